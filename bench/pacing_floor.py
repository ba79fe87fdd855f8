"""How exactly can any client on this machine pace requests to a provider that allows no burst? The floor under
bench/map.py's "none" window: a bare asyncio client (raw sockets, no HTTP library, no agent, eight keep-alive
connections) sends each request at its exact time, at a share of the rate, to the fake provider of
tests/providers/ratelimited.py (in a process of its own) that takes one request per interval and refuses one that
arrives early, by its arrival (the kernel's receive time; `--stamp read`: when the provider's event loop read it,
which adds the provider process's own wait for a core on this machine). What is refused is the machine's own timing
noise (the client's timers and its wait for a core), which no limiter can pace away; `map.py` reads against it.

    python bench/pacing_floor.py [--rpm 3000] [--n 400] [--shares 1,0.97,0.95,0.9,0.85] [--stamp arrival|read]

For each share of the rate: 429s per 1,000 requests, and how many of the gaps between arrivals the provider saw
were under its interval.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.map import Server  # noqa: E402


async def paced(server: Server, rate: float, share: float, n: int) -> tuple[float, float]:
    host, port = "127.0.0.1", int(server.url.rsplit(":", 1)[1])
    body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "x"}]}).encode()
    request = (f"POST /v1/chat/completions HTTP/1.1\r\nhost: {host}\r\ncontent-type: application/json\r\n"
               f"content-length: {len(body)}\r\n\r\n").encode() + body
    free: asyncio.Queue = asyncio.Queue()
    for _ in range(8):
        free.put_nowait(await asyncio.open_connection(host, port))

    async def one(connection) -> None:
        reader, writer = connection
        writer.write(request)
        head = await reader.readuntil(b"\r\n\r\n")
        length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length"))
        await reader.readexactly(length)
        free.put_nowait(connection)

    await asyncio.sleep(1.2)  # the window refills
    server.ask("reset")
    start, interval, sent = time.monotonic(), 1.0 / (rate * share), []
    for i in range(n):
        wait = start + i * interval - time.monotonic()
        if wait > 0:
            await asyncio.sleep(wait)
        sent.append(asyncio.create_task(one(await free.get())))
    await asyncio.gather(*sent)
    limited = server.ask("stats")["limited"]
    arrivals = server.ask("arrivals")
    gaps = [b - a for a, b in zip(arrivals, arrivals[1:])]
    while not free.empty():
        free.get_nowait()[1].close()
    return limited * 1000 / n, sum(g < 1.0 / rate for g in gaps) / max(1, len(gaps))


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rpm", type=float, default=3000)
    parser.add_argument("--n", type=int, default=400)
    parser.add_argument("--shares", default="1,0.97,0.95,0.9,0.85")
    parser.add_argument("--stamp", default="arrival", choices=("arrival", "read"),
                        help="the provider's time of a request: its arrival, or when its loop read it")
    opts = parser.parse_args()
    server = Server(opts.rpm, 0.04, 0.0, opts.stamp)
    try:
        rows = [(share, *await paced(server, opts.rpm / 60.0, share, opts.n))
                for share in (float(s) for s in opts.shares.split(","))]
    finally:
        server.close()
    print(f"a bare client paced exactly, against a provider allowing no burst ({opts.rpm:g}/min, n={opts.n}, "
          f"load average {os.getloadavg()[0]:.1f})")
    print(f"{'share of the rate':>18} {'429s/1000':>10} {'gaps under the interval':>24}")
    for share, per_1000, under in rows:
        print(f"{share:18.2f} {per_1000:10.1f} {under:24.3f}")


if __name__ == "__main__":
    asyncio.run(main())
