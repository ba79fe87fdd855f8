"""A fake OpenAI Chat Completions server on 127.0.0.1 that limits its rate as providers do.

    server = await RateLimitedServer(requests_per_minute=3000, burst_seconds=0.25, latency=0.04).start()
    model = OpenAIChatModel("gpt-4o-mini", base_url=server.url + "/v1", api_key="sk-test")
    ...
    server.stats()     # requests, 429s, the most requests in flight at once, answers per prompt

The limit is per minute, enforced over a shorter window, as OpenAI and Anthropic say they may: each request
takes a permit from a token bucket holding `burst_seconds` worth of the rate (`BURSTS`: one second, a quarter
second, or none: one request's worth, so requests must come at least one interval apart), and likewise for
`tokens_per_minute` (the body's size / 4 plus the answer's). Without one it answers 429 with the headers a
provider sends (`headers=`):

    "openai"        `x-ratelimit-{limit,remaining,reset}-{requests,tokens}` on every answer (the reset as a Go
                    duration, `20ms`; on a 429 the kind that ran out says remaining 0 and the reset is the
                    wait until the refused request would have been taken), and `retry-after` in whole seconds
    "anthropic"     the same as `anthropic-ratelimit-{requests,tokens}-{limit,remaining,reset}`, the reset an
                    RFC 3339 time
    "retry-after-ms" no limit headers; a 429 says `retry-after-ms` (precise) and `retry-after`
    "none"          no limit headers; a 429 says only `retry-after` in whole seconds

On an answer, `remaining` and the reset describe the per-minute budget (as the providers' headers do), not the
shorter window that refuses: the headers do not warn of a burst that is too big. A request's time is when its last
bytes reached the machine (`stamp="arrival"`: the kernel's receive time of the socket's data, `SO_TIMESTAMPNS`,
as a provider's edge stamps a request on arrival), or when the server's event loop got round to reading it
(`stamp="read"`: later by however long this process waited for a core, which on a busy machine is milliseconds;
a provider's rate limiter does not run on the client's cores). Accepted requests wait
`latency` seconds, then are answered streamed (SSE) or as one JSON body, whichever the request asks. The
answer is `answer(request)`: by default "echo: <the last user message>"; when the request offers a
`submit_result` tool the answer is a call to it with `structured(text)`. A prompt containing FAIL is answered
400 (an item that fails).

Also a command, for the benchmarks (prints `port <n>` once listening):
    python -m tests.providers.ratelimited --rpm 3000 --latency 0.04 --burst 0.25 [--stamp arrival|read]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import socket
import struct
import time
from datetime import datetime, timedelta, timezone
from typing import Any, Callable

from tests.providers.fakeserver import LocalServer

__all__ = ["BURSTS", "HEADER_STYLES", "RateLimitedServer"]


BURSTS = (1.0, 0.25, 0.0)
"""The windows the suite and the benchmark run against: a second's worth at once, a quarter second's, none."""
HEADER_STYLES = ("openai", "anthropic", "retry-after-ms", "none")
STAMPS = ("arrival", "read")
_SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)
_CMSG = socket.CMSG_SPACE(16)


class _Bucket:
    def __init__(self, per_minute: float, burst_seconds: float) -> None:
        self.rate = per_minute / 60.0
        self.capacity = max(1.0, self.rate * burst_seconds)
        self.level = self.capacity
        self.stamp = time.monotonic()

    def refill(self, now: float) -> None:
        now = max(now, self.stamp)  # a request that arrived before one already counted: as if at the same time
        self.level = min(self.capacity, self.level + (now - self.stamp) * self.rate)
        self.stamp = now

    def take(self, amount: float, now: float) -> float:
        """0 when taken, else the seconds until it could be."""
        self.refill(now)
        need = min(amount, self.capacity)
        if self.level >= need:
            self.level -= amount
            return 0.0
        return (need - self.level) / self.rate

    def until_full(self, now: float) -> float:
        self.refill(now)
        return max(0.0, self.capacity - self.level) / self.rate


def _go_duration(seconds: float) -> str:
    """As OpenAI writes a reset: `20ms`, `1.5s`, `6m0s`."""
    if seconds < 1.0:
        return f"{max(1, math.ceil(seconds * 1000))}ms"
    if seconds < 60.0:
        return f"{seconds:.3g}s"
    return f"{int(seconds // 60)}m{seconds % 60:.0f}s"


def _rfc3339(seconds: float) -> str:
    when = datetime.now(timezone.utc) + timedelta(seconds=seconds)
    return when.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _last_user_text(body: dict[str, Any]) -> str:
    for message in reversed(body.get("messages", [])):
        if message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, list):
                return " ".join(p.get("text", "") for p in content if isinstance(p, dict))
            return str(content)
    return ""


class RateLimitedServer(LocalServer):
    """See the module docstring. `url` is `http://127.0.0.1:<port>`."""

    backlog = 1024

    def __init__(self, *, requests_per_minute: float | None = None, tokens_per_minute: float | None = None,
                 latency: float = 0.0, burst_seconds: float = 1.0, headers: str = "openai",
                 answer: Callable[[dict], str] | None = None, structured: Callable[[str], dict] | None = None,
                 model: str = "gpt-4o-mini", stamp: str = "arrival") -> None:
        super().__init__()
        if headers not in HEADER_STYLES:
            raise ValueError(f"headers is one of {HEADER_STYLES}, not {headers!r}")
        if stamp not in STAMPS:
            raise ValueError(f"stamp is one of {STAMPS}, not {stamp!r}")
        self.stamp = stamp
        self._listener: socket.socket | None = None
        self._accepting: asyncio.Task | None = None
        self.burst_seconds = burst_seconds
        self.header_style = headers
        # the windows that refuse, and the per-minute budgets the headers describe
        self.requests_bucket = _Bucket(requests_per_minute, burst_seconds) if requests_per_minute else None
        self.tokens_bucket = _Bucket(tokens_per_minute, burst_seconds) if tokens_per_minute else None
        self.requests_minute = _Bucket(requests_per_minute, 60.0) if requests_per_minute else None
        self.tokens_minute = _Bucket(tokens_per_minute, 60.0) if tokens_per_minute else None
        self.rpm, self.tpm = requests_per_minute, tokens_per_minute
        self.latency = latency
        self.answer = answer or (lambda body: "echo: " + _last_user_text(body))
        self.structured = structured or (lambda text: {"text": text})
        self.model = model
        self.fail_word: str | None = "FAIL"
        self.requests = 0
        self.accepted = 0
        self.limited = 0
        self.in_flight = 0
        self.max_in_flight = 0
        self.headers_seen: list[dict[str, str]] = []
        self.bodies: list[bytes] = []
        self.keep_bodies = True
        self.refusals: list[dict[str, str]] = []
        """The headers of every 429 sent."""
        self.arrivals: list[float] = []
        """Each request's time (see `stamp`), as `time.monotonic()` reads it (one clock for every process of the
        machine), in the order they were handled."""
        self.reordered = 0
        """Requests handled after one that arrived later (the bucket counts them as arriving with it)."""

    def stats(self) -> dict[str, Any]:
        return {"requests": self.requests, "accepted": self.accepted, "limited": self.limited,
                "max_in_flight": self.max_in_flight, "reordered": self.reordered}

    async def start(self, port: int = 0) -> Any:
        if self.stamp == "read":
            return await super().start(port)
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        # on the listener too: a connection's first bytes may arrive before it is accepted (the option is
        # inherited, and the kernel stamps what arrives from then on)
        listener.setsockopt(socket.SOL_SOCKET, _SO_TIMESTAMPNS, 1)
        listener.bind(("127.0.0.1", port))
        listener.listen(self.backlog)
        listener.setblocking(False)
        self._listener, self.port = listener, listener.getsockname()[1]
        self._accepting = asyncio.create_task(self._accept(listener))
        return self

    async def _accept(self, listener: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        while True:
            conn, _ = await loop.sock_accept(listener)
            conn.setblocking(False)
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            conn.setsockopt(socket.SOL_SOCKET, _SO_TIMESTAMPNS, 1)
            stamped = _StampedConnection(conn, loop)
            asyncio.create_task(self._serve(stamped, stamped))  # type: ignore[arg-type]

    async def close(self) -> None:
        if self._accepting is not None:
            self._accepting.cancel()
            await asyncio.gather(self._accepting, return_exceptions=True)
        if self._listener is not None:
            self._listener.close()
        await super().close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, ConnectionError):
                    break
                lines = head.decode("latin-1").split("\r\n")
                headers = {}
                for line in lines[1:]:
                    if ":" in line:
                        k, v = line.split(":", 1)
                        headers[k.strip().lower()] = v.strip()
                length = int(headers.get("content-length", "0"))
                raw = await reader.readexactly(length) if length else b""
                await self._handle(writer, headers, raw)
        except (ConnectionError, asyncio.CancelledError, asyncio.IncompleteReadError):
            pass
        finally:
            self._tasks.discard(task)
            if not writer.is_closing():
                writer.close()

    async def _handle(self, writer: asyncio.StreamWriter, headers: dict[str, str], raw: bytes) -> None:
        arrived = getattr(writer, "arrived", None)  # a `_StampedConnection`'s (stamp="arrival")
        now = time.monotonic() if arrived is None else arrived
        self.requests += 1
        if self.arrivals and now < self.arrivals[-1]:
            self.reordered += 1
        if len(self.arrivals) < 100_000:
            self.arrivals.append(now)
        if self.keep_bodies:
            self.bodies.append(raw)
            self.headers_seen.append(headers)
        body = json.loads(raw or b"{}")
        text = self.answer(body)
        tokens = len(raw) // 4 + len(text) // 4 + 1
        waits = {"requests": 0.0, "tokens": 0.0}
        if self.requests_bucket is not None:
            waits["requests"] = self.requests_bucket.take(1, now)
        if not waits["requests"] and self.tokens_bucket is not None:
            waits["tokens"] = self.tokens_bucket.take(tokens, now)
            if waits["tokens"] and self.requests_bucket is not None:
                self.requests_bucket.level += 1  # refused: the request's permit goes back
        wait = max(waits.values())
        if wait:
            self.limited += 1
            headers = {**self._limit_headers(now, refused=waits), **self._retry_headers(wait)}
            if self.keep_bodies:
                self.refusals.append(headers)
            error = {"error": {"message": f"Rate limit reached; please try again in {wait * 1000:.0f}ms",
                               "type": "tokens" if waits["tokens"] else "requests", "code": "rate_limit_exceeded"}}
            self._write(writer, 429, "application/json", json.dumps(error).encode(), headers)
            await writer.drain()
            return
        for minute, amount in ((self.requests_minute, 1), (self.tokens_minute, tokens)):
            if minute is not None:
                minute.refill(now)
                minute.level -= amount
        limits = self._limit_headers(now)
        self.accepted += 1
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            if self.latency:
                await asyncio.sleep(self.latency)
        finally:
            self.in_flight -= 1
        if self.fail_word and self.fail_word in _last_user_text(body):
            error = {"error": {"message": "this input cannot be answered", "type": "invalid_request_error"}}
            self._write(writer, 400, "application/json", json.dumps(error).encode(), limits)
            await writer.drain()
            return
        tool_names = [t.get("function", {}).get("name") for t in body.get("tools") or []]
        last_role = (body.get("messages") or [{}])[-1].get("role")
        call = None
        if "submit_result" in tool_names and last_role != "tool":
            call = {"index": 0, "id": f"call_{self.requests}", "type": "function",
                    "function": {"name": "submit_result", "arguments": json.dumps(self.structured(text))}}
        usage = {"prompt_tokens": len(raw) // 4, "completion_tokens": len(text) // 4 + 1,
                 "total_tokens": len(raw) // 4 + len(text) // 4 + 1}
        if body.get("stream"):
            events = []
            delta: dict[str, Any] = {"role": "assistant"}
            if call is not None:
                delta["tool_calls"] = [call]
            else:
                delta["content"] = text
            chunk = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 0, "model": self.model}
            events.append({**chunk, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]})
            events.append({**chunk, "choices": [{"index": 0, "delta": {},
                                                 "finish_reason": "tool_calls" if call else "stop"}]})
            events.append({**chunk, "choices": [], "usage": usage})
            payload = "".join(f"data: {json.dumps(e)}\n\n" for e in events) + "data: [DONE]\n\n"
            self._write(writer, 200, "text/event-stream", payload.encode(), limits)
        else:
            message: dict[str, Any] = {"role": "assistant", "content": None if call else text}
            if call is not None:
                message["tool_calls"] = [{k: v for k, v in call.items() if k != "index"}]
            completion = {"id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": self.model,
                          "choices": [{"index": 0, "message": message,
                                       "finish_reason": "tool_calls" if call else "stop"}], "usage": usage}
            self._write(writer, 200, "application/json", json.dumps(completion).encode(), limits)
        await writer.drain()

    def _limit_headers(self, now: float, refused: dict[str, float] | None = None) -> dict[str, str]:
        """The rate-limit headers of an answer (the per-minute budgets), or of a refusal (`refused`: the wait for
        each kind; the kind that ran out says remaining 0 and the wait as its reset)."""
        style = self.header_style
        if style not in ("openai", "anthropic"):
            return {}
        out = {}
        for kind, limit, minute in (("requests", self.rpm, self.requests_minute), ("tokens", self.tpm, self.tokens_minute)):
            if minute is None:
                continue
            wait = (refused or {}).get(kind, 0.0)
            remaining = 0 if wait else max(0, int(minute.level))
            reset = wait if wait else minute.until_full(now)
            if style == "openai":
                out[f"x-ratelimit-limit-{kind}"] = str(int(limit))
                out[f"x-ratelimit-remaining-{kind}"] = str(remaining)
                out[f"x-ratelimit-reset-{kind}"] = _go_duration(reset)
            else:
                out[f"anthropic-ratelimit-{kind}-limit"] = str(int(limit))
                out[f"anthropic-ratelimit-{kind}-remaining"] = str(remaining)
                out[f"anthropic-ratelimit-{kind}-reset"] = _rfc3339(reset)
        return out

    def _retry_headers(self, wait: float) -> dict[str, str]:
        out = {"retry-after": str(math.ceil(wait))}  # whole seconds, rounded up, as the providers send it
        if self.header_style == "retry-after-ms":
            out["retry-after-ms"] = str(math.ceil(wait * 1000))
        return out

    @staticmethod
    def _write(writer: asyncio.StreamWriter, status: int, content_type: str, body: bytes,
               headers: dict[str, str]) -> None:
        reason = {200: "OK", 400: "Bad Request", 429: "Too Many Requests"}.get(status, "Status")
        head = [f"HTTP/1.1 {status} {reason}", f"content-type: {content_type}", f"content-length: {len(body)}"]
        head += [f"{k}: {v}" for k, v in headers.items()]
        writer.write(("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + body)


class _StampedConnection:
    """A connection's reader and writer in one, that knows when the bytes it returned reached the machine: the
    kernel's receive time of the last data read (`SO_TIMESTAMPNS`), on `time.monotonic()`'s clock (`arrived`)."""

    def __init__(self, sock: socket.socket, loop: asyncio.AbstractEventLoop) -> None:
        self.sock, self.loop = sock, loop
        self.buffer = bytearray()
        self.arrived: float | None = None
        self._out: list[bytes] = []
        self._closed = False

    async def _fill(self) -> None:
        while True:
            try:
                data, ancillary, _, _ = self.sock.recvmsg(65536, _CMSG)
                break
            except (BlockingIOError, InterruptedError):
                ready = self.loop.create_future()
                self.loop.add_reader(self.sock.fileno(), _wake, ready)
                try:
                    await ready
                finally:
                    self.loop.remove_reader(self.sock.fileno())
        if not data:
            raise asyncio.IncompleteReadError(bytes(self.buffer), None)
        self.buffer += data
        self.arrived = _arrival(ancillary)

    async def readuntil(self, separator: bytes) -> bytes:
        while (at := self.buffer.find(separator)) < 0:
            await self._fill()
        out = bytes(self.buffer[: at + len(separator)])
        del self.buffer[: at + len(separator)]
        return out

    async def readexactly(self, n: int) -> bytes:
        while len(self.buffer) < n:
            await self._fill()
        out = bytes(self.buffer[:n])
        del self.buffer[:n]
        return out

    def write(self, data: bytes) -> None:
        self._out.append(data)

    async def drain(self) -> None:
        data, self._out = b"".join(self._out), []
        if data:
            await self.loop.sock_sendall(self.sock, data)

    def is_closing(self) -> bool:
        return self._closed

    @property
    def transport(self) -> _StampedConnection:
        return self  # (as a stream writer's: `writer.transport.abort()` cuts the connection)

    def abort(self) -> None:
        self.close()

    def close(self) -> None:
        self._closed = True
        self.sock.close()


def _wake(ready: asyncio.Future) -> None:
    if not ready.done():
        ready.set_result(None)


def _arrival(ancillary: list[tuple[int, int, bytes]]) -> float:
    """The kernel's receive time in the ancillary data, on `time.monotonic()`'s clock (now, when there is none)."""
    for level, kind, data in ancillary:
        if level == socket.SOL_SOCKET and kind == _SO_TIMESTAMPNS and len(data) >= 16:
            seconds, nanoseconds = struct.unpack("qq", data[:16])
            return seconds + nanoseconds / 1e9 - (time.time() - time.monotonic())
    return time.monotonic()


async def _main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rpm", type=float, default=None)
    parser.add_argument("--tpm", type=float, default=None)
    parser.add_argument("--latency", type=float, default=0.04)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--burst", type=float, default=1.0, help="seconds' worth of requests allowed at once")
    parser.add_argument("--headers", default="openai", choices=HEADER_STYLES)
    parser.add_argument("--stamp", default="arrival", choices=STAMPS)
    opts = parser.parse_args()
    server = RateLimitedServer(requests_per_minute=opts.rpm, tokens_per_minute=opts.tpm, latency=opts.latency,
                               burst_seconds=opts.burst, headers=opts.headers, stamp=opts.stamp)
    server.keep_bodies = False
    await server.start(opts.port)
    print(f"port {server.port}", flush=True)
    loop = asyncio.get_running_loop()
    # a line on stdin asks for the counters ("reset" zeroes them); end of stdin stops the server
    while True:
        line = await loop.run_in_executor(None, input_line)
        if line is None:
            break
        if line.strip() == "reset":
            server.requests = server.accepted = server.limited = server.max_in_flight = server.reordered = 0
            server.arrivals.clear()
        if line.strip() == "arrivals":
            print(json.dumps(server.arrivals), flush=True)
            continue
        print(json.dumps(server.stats()), flush=True)
    await server.close()


def input_line() -> str | None:
    import sys

    line = sys.stdin.readline()
    return line if line else None


if __name__ == "__main__":
    asyncio.run(_main())
