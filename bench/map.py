"""One agent over many inputs, against its peers, in one run: nbagent's `Agent.map`, LangChain's
`abatch(max_concurrency=...)` (with its `InMemoryRateLimiter` at the same rate), and pydantic-ai with
`asyncio.gather` and a semaphore, all against one fake OpenAI server (tests/providers/ratelimited.py, in a
process of its own) that answers after 40 ms and allows a number of requests per minute.

    python bench/map.py [--n 600] [--concurrency 8] [--rpm 6000] [--latency 0.04] [--rounds 2] [--dask]

For each: throughput (of the items answered) as a share of the bound min(concurrency / latency, rate), 429s
per 1,000 items, the items that failed (a peer's retries given up on a 429), the
client's CPU per item (the per-item overhead: the server runs elsewhere), and memory per item (what the
results and their bookkeeping keep, by tracemalloc, in a second smaller pass). "stored" is the same map with
`session=True` (every item written to the batch store, fsync grouped): its CPU per item next to the
unstored row is the store's cost. `--dask` adds nbagent's map on a
2-worker LocalCluster (engine=client): one runner task per worker, the limit held across the workers.
Goal: at least 0.95 of the bound with under 1% 429s, ahead of both peers.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path
from typing import Any, Awaitable, Callable

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

KEY = "sk-bench-map-0000000000000000"


class Server:
    """The fake provider in a process of its own: `reset()` zeroes its counters, `stats()` reads them."""

    def __init__(self, rpm: float, latency: float, burst: float) -> None:
        self.proc = subprocess.Popen([sys.executable, "-m", "tests.providers.ratelimited", "--rpm", str(rpm),
                                      "--latency", str(latency), "--burst", str(burst)], cwd=ROOT, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        self.url = f"http://127.0.0.1:{int(line.split()[1])}"

    def ask(self, line: str) -> dict[str, Any]:
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        return json.loads(self.proc.stdout.readline())

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(timeout=10)


def nbagent_map(url: str, concurrency: int, rpm: float, engine: Any = None,
                stored: bool = False) -> Callable[[int], Awaitable[list[str]]]:
    import tempfile

    from nbagent import Agent, RateLimit
    from nbagent.providers.openai import OpenAIChatModel

    workspace = tempfile.mkdtemp(prefix="nbagent-bench-map-")
    agent = Agent(model=OpenAIChatModel("gpt-4o-mini", base_url=url + "/v1", api_key=None if engine else KEY),
                  workspace=workspace)

    async def run(n: int) -> list[str]:
        batch = agent.map(range(n), "item {item}", concurrency=concurrency,
                          rate_limit=RateLimit(requests_per_minute=rpm), engine=engine, session=stored or None)
        await batch
        return [r.output if r.status == "done" else None for r in batch.results]

    return run


def langchain_abatch(url: str, concurrency: int, rpm: float, burst: float = 0.1) -> Callable[[int], Awaitable[list[str]]]:
    from langchain_core.rate_limiters import InMemoryRateLimiter
    from langchain_openai import ChatOpenAI

    limiter = InMemoryRateLimiter(requests_per_second=rpm / 60.0, check_every_n_seconds=0.005,
                                  max_bucket_size=max(1, int(rpm / 60 * burst)))  # the server's burst
    chat = ChatOpenAI(model="gpt-4o-mini", base_url=url + "/v1", api_key=KEY, rate_limiter=limiter)

    async def run(n: int) -> list[str]:
        replies = await chat.abatch([f"item {i}" for i in range(n)], config={"max_concurrency": concurrency},
                                    return_exceptions=True)
        return [None if isinstance(r, BaseException) else r.content for r in replies]

    return run


def pydantic_ai_gather(url: str, concurrency: int, rpm: float) -> Callable[[int], Awaitable[list[str]]]:
    from pydantic_ai import Agent as PAgent
    from pydantic_ai.models.openai import OpenAIChatModel as PModel
    from pydantic_ai.providers.openai import OpenAIProvider

    agent = PAgent(PModel("gpt-4o-mini", provider=OpenAIProvider(base_url=url + "/v1", api_key=KEY)))

    async def run(n: int) -> list[str]:
        gate = asyncio.Semaphore(concurrency)

        async def one(i: int) -> str:
            async with gate:
                return (await agent.run(f"item {i}")).output

        answers = await asyncio.gather(*(one(i) for i in range(n)), return_exceptions=True)
        return [None if isinstance(a, BaseException) else a for a in answers]

    return run


async def measure(name: str, make: Callable[[], Callable[[int], Awaitable[list[str]]]], server: Server, n: int,
                  bound: float, warm: int = 4) -> dict[str, Any]:
    run = make()
    expected = [f"echo: item {i}" for i in range(n)]
    assert await run(warm) == expected[:warm], f"{name}: wrong answers"  # warm-up: imports, connections
    await asyncio.sleep(1.5)  # the server's bucket refills
    server.ask("reset")
    gc.collect()
    cpu0, t0 = time.process_time(), time.perf_counter()
    outputs = await run(n)
    wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    stats = server.ask("stats")
    failed = sum(o is None for o in outputs)
    assert all(o == e for o, e in zip(outputs, expected) if o is not None), f"{name}: answers out of place"
    await asyncio.sleep(1.5)
    small = min(n, 200)
    gc.collect()
    tracemalloc.start()
    kept = await run(small)
    gc.collect()
    memory = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    del kept
    await asyncio.sleep(1.5)
    return {"name": name, "failed": failed, "share": ((n - failed) / wall) / bound, "per_s": n / wall, "429_per_1000": stats["limited"] * 1000 / n,
            "cpu_us": cpu / n * 1e6, "mem_kb": memory / small / 1024, "wall": wall}


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=600)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--rpm", type=float, default=6000)
    parser.add_argument("--latency", type=float, default=0.04)
    parser.add_argument("--burst", type=float, default=0.1, help="seconds' worth of requests the server takes at once")
    parser.add_argument("--dask", action="store_true")
    parser.add_argument("--only-dask", action="store_true", help="just the 2-worker cluster row")
    parser.add_argument("--rounds", type=int, default=2, help="rounds alternating the peers; the best of each kept")
    opts = parser.parse_args()
    bound = min(opts.concurrency / opts.latency, opts.rpm / 60.0)
    server = Server(opts.rpm, opts.latency, opts.burst)
    rows = []
    try:
        args = (server.url, opts.concurrency, opts.rpm)
        peers = [("nbagent map", lambda: nbagent_map(*args)),
                 ("nbagent map, stored (fsync)", lambda: nbagent_map(*args, stored=True)), ("langchain abatch", lambda: langchain_abatch(*args, opts.burst)),
                 ("pydantic-ai gather", lambda: pydantic_ai_gather(*args))]
        best: dict[str, dict[str, Any]] = {}
        for _ in range(0 if opts.only_dask else opts.rounds):
            for name, make in peers:
                row = await measure(name, make, server, opts.n, bound)
                if name not in best or row["share"] > best[name]["share"]:
                    best[name] = row
        rows += [best[name] for name, _ in peers if name in best]
        if opts.dask or opts.only_dask:
            from distributed import Client, LocalCluster

            os.environ["OPENAI_API_KEY"] = KEY  # the workers' own environment (they inherit it when started)
            # one runner task a worker, each running its share of the concurrency on the worker's loop
            cluster = await LocalCluster(n_workers=2, threads_per_worker=max(1, opts.concurrency // 2), processes=True,
                                         asynchronous=True, dashboard_address=None)
            client = await Client(cluster, asynchronous=True)
            try:
                best_dask = None
                for _ in range(opts.rounds):  # warmed on both workers (their imports, clients, queues)
                    row = await measure("nbagent map, dask 2 workers", lambda: nbagent_map(*args, engine=client),
                                        server, opts.n, bound, warm=64)
                    best_dask = row if best_dask is None or row["share"] > best_dask["share"] else best_dask
                rows.append(best_dask)
            finally:
                await client.close()
                await cluster.close()
    finally:
        server.close()
    print(f"n={opts.n} concurrency={opts.concurrency} rpm={opts.rpm:g} latency={opts.latency * 1000:g} ms: "
          f"bound {bound:.0f} items/s")
    print(f"{'':30} {'share of bound':>14} {'items/s':>8} {'429s/1000':>10} {'failed':>7} {'CPU µs/item':>12} "
          f"{'KiB/item':>9}")
    for r in rows:
        print(f"{r['name']:30} {r['share']:14.3f} {r['per_s']:8.1f} {r['429_per_1000']:10.1f} {r['failed']:7d} "
              f"{r['cpu_us']:12.0f} {r['mem_kb']:9.1f}")


if __name__ == "__main__":
    asyncio.run(main())
