"""A real HTTP/1.1 server on 127.0.0.1 that replays recorded provider streams and injects faults.

    server = await FakeServer().start()
    server.add(Reply.sse(load_stream("openai", "parallel-tool-calls")))     # a recorded stream
    server.add(Reply.json(429, {"error": {"message": "slow down"}}, headers={"retry-after": "2"}))
    server.add(Reply.sse(body, chunk_size=1))       # one byte per HTTP chunk (splits UTF-8 characters)
    server.add(Reply.sse(body, drop_after=300))     # the connection is cut after 300 bytes of body
    ...
    server.requests[0].json()                        # what the client sent

Replies are used in order, one per request; a request with none left gets a 500 saying so. Streamed
bodies use chunked transfer encoding, so a dropped connection is visible to the client as such (a body
that merely lacks its terminal event is a complete HTTP response: that is the "cut before the end" case).
"""

from __future__ import annotations

import asyncio
import json
from collections import deque
from dataclasses import dataclass, field
from http import HTTPStatus
from pathlib import Path
from typing import Any, Callable, Iterable

__all__ = ["FIXTURES", "FakeServer", "RecordedRequest", "Reply", "chunks_to_sse", "load_stream"]

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "streams"


@dataclass
class Reply:
    """One scripted response."""

    status: int = 200
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)
    content_type: str = "text/event-stream"
    chunk_size: int | None = None
    """Send the body in HTTP chunks of this many bytes (default: one chunk per SSE event). They go without a pause
    between them, and may share a TCP segment: the client's HTTP parser still gives each chunk on its own (one
    byte at a time, for `chunk_size=1`, measured), without a read of the socket per byte."""
    delay: float = 0.0
    """Seconds to wait between chunks."""
    drop_after: int | None = None
    """Abort the connection after this many bytes of body (no terminating chunk)."""
    hang: bool = False
    """Accept the request and never answer."""
    before: float = 0.0
    """Seconds to wait before the status line."""

    @classmethod
    def sse(cls, body: bytes | str, **kwargs: Any) -> Reply:
        return cls(200, body.encode() if isinstance(body, str) else body, **kwargs)

    @classmethod
    def json(cls, status: int, payload: Any, **kwargs: Any) -> Reply:
        return cls(status, json.dumps(payload).encode(), content_type="application/json", **kwargs)

    def chunks(self) -> list[bytes]:
        body = self.body
        if not body:
            return []
        if self.chunk_size:
            return [body[i : i + self.chunk_size] for i in range(0, len(body), self.chunk_size)]
        if self.content_type == "text/event-stream":
            parts = body.split(b"\n\n")
            out = [p + b"\n\n" for p in parts[:-1]]
            if parts[-1]:
                out.append(parts[-1])
            return out
        return [body]


@dataclass
class RecordedRequest:
    """A request the server received."""

    method: str
    path: str
    headers: dict[str, str]
    """Header names in lower case."""
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


class LocalServer:
    """A server on 127.0.0.1 run by asyncio, its connections' tasks tracked so that `close()` ends them all;
    a subclass answers each connection in `_serve`. Used as `async with Server() as s:`."""

    backlog = 100

    def __init__(self) -> None:
        self._server: asyncio.base_events.Server | None = None
        self._tasks: set[asyncio.Task] = set()
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        raise NotImplementedError

    async def start(self, port: int = 0) -> Any:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", port, backlog=self.backlog)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()

    async def __aenter__(self) -> Any:
        return await self.start()

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()


class FakeServer(LocalServer):
    """See the module docstring. `url` is `http://127.0.0.1:<port>`."""

    def __init__(self) -> None:
        super().__init__()
        self.replies: deque[Reply | Callable[[RecordedRequest], Reply]] = deque()
        self.requests: list[RecordedRequest] = []
        self.connections = 0

    def add(self, *replies: Reply | Callable[[RecordedRequest], Reply]) -> FakeServer:
        """Queue replies (or functions of the request returning one), used in order."""
        self.replies.extend(replies)
        return self

    # -- the connection loop ---------------------------------------------------------------------------
    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        self.connections += 1
        try:
            while True:
                request = await self._read_request(reader)
                if request is None:
                    break
                self.requests.append(request)
                reply = self.replies.popleft() if self.replies else Reply.json(
                    500, {"error": {"message": f"fake server: no reply queued for request {len(self.requests)}"}})
                if callable(reply):
                    reply = reply(request)
                if not await self._write_reply(writer, reply):
                    return
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError):
            pass  # the client went away, or the server is closing
        finally:
            self._tasks.discard(task)
            if not writer.is_closing():
                writer.close()

    async def _read_request(self, reader: asyncio.StreamReader) -> RecordedRequest | None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except (asyncio.IncompleteReadError, ConnectionError):
            return None
        lines = head.decode("latin-1").split("\r\n")
        method, path, _ = lines[0].split(" ", 2)
        headers: dict[str, str] = {}
        for line in lines[1:]:
            if ":" in line:
                k, v = line.split(":", 1)
                headers[k.strip().lower()] = v.strip()
        length = int(headers.get("content-length", "0"))
        body = await reader.readexactly(length) if length else b""
        return RecordedRequest(method, path, headers, body)

    async def _write_reply(self, writer: asyncio.StreamWriter, reply: Reply) -> bool:
        """Write one reply; False when the connection was dropped on purpose."""
        if reply.hang:
            await asyncio.Event().wait()
        if reply.before:
            await asyncio.sleep(reply.before)
        reason = HTTPStatus(reply.status).phrase if reply.status in HTTPStatus._value2member_map_ else "Status"
        head = [f"HTTP/1.1 {reply.status} {reason}", f"content-type: {reply.content_type}"]
        chunked = reply.content_type == "text/event-stream" or reply.drop_after is not None
        head.append("transfer-encoding: chunked" if chunked else f"content-length: {len(reply.body)}")
        head.extend(f"{k}: {v}" for k, v in reply.headers.items())
        writer.write(("\r\n".join(head) + "\r\n\r\n").encode("latin-1"))
        if not chunked:
            writer.write(reply.body)
            await writer.drain()
            return True
        sent = 0
        for chunk in reply.chunks():
            if reply.drop_after is not None and sent + len(chunk) > reply.drop_after:
                chunk = chunk[: reply.drop_after - sent]
                if chunk:
                    writer.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                    await writer.drain()
                writer.transport.abort()
                return False
            writer.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            sent += len(chunk)
            await writer.drain()
            if reply.delay:
                await asyncio.sleep(reply.delay)
        if reply.drop_after is not None:
            writer.transport.abort()
            return False
        writer.write(b"0\r\n\r\n")
        await writer.drain()
        return True


# --------------------------------------------------------------------------------------------------
# Recorded streams
# --------------------------------------------------------------------------------------------------
def chunks_to_sse(lines: Iterable[str], *, done: str | None = "[DONE]") -> bytes:
    """SSE text from recorded chunks, one JSON object per line (`data: ...` events, then `done`)."""
    out = [f"data: {line.strip()}\n\n" for line in lines if line.strip()]
    if done is not None:
        out.append(f"data: {done}\n\n")
    return "".join(out).encode("utf-8")


def load_stream(provider: str, name: str, *, done: str | None = "[DONE]") -> bytes:
    """A recorded stream from tests/fixtures/streams/<provider>/: `<name>.sse` as it is, or
    `<name>.chunks.txt` (one JSON chunk per line) turned into SSE by `chunks_to_sse`."""
    base = FIXTURES / provider
    sse = base / f"{name}.sse"
    if sse.exists():
        return sse.read_bytes()
    chunks = base / f"{name}.chunks.txt"
    if chunks.exists():
        return chunks_to_sse(chunks.read_text("utf-8").splitlines(), done=done)
    raise FileNotFoundError(f"no recorded stream {name!r} for {provider} in {base}")
