"""Capturing what one thread prints, without taking anything another thread prints.

`sys.stdout` and `sys.stderr` are process-wide. A tool running on a worker thread that swapped them for
a buffer (as `contextlib.redirect_stdout` does) would also swallow whatever the notebook's own cell
prints meanwhile, and the next swap back could lose output. Instead, a thin `RoutedStream` proxy is put
in front of each stream once; it keeps a table of thread id -> sink. A write from a thread that has a
sink goes to it; every other write goes, unchanged, to the stream that was there before (ipykernel's
`OutStream` in a kernel, the terminal in a script). Everything else (`flush`, `fileno`, `encoding`,
ipykernel's `set_parent`...) is delegated, so the proxy is invisible to the code around it. Reading
`sys.stdin` from a routed thread raises `EOFError`: nobody is there to type.

If something replaces `sys.stdout` later (a cell using `redirect_stdout`), `route_thread` puts a new proxy
in front of the replacement the next time it runs; the table is shared by all proxies.
"""

from __future__ import annotations

import sys
import threading
import time
from contextlib import contextmanager
from typing import Any, Callable, Generic, Iterator, TypeVar

__all__ = ["RoutedStream", "StreamSink", "ThreadRoutes", "ensure_installed", "route_thread"]

Sink = Callable[[str, str], None]
"""`sink(stream_name, text)` for "stdout" and "stderr"."""

S = TypeVar("S")


class ThreadRoutes(dict[int, S], Generic[S]):
    """A table of thread id -> sink, shared by every proxy that routes by thread (these streams, the
    kernel's display publisher): what a thread sends goes to its sink while it is routed."""

    @contextmanager
    def route(self, sink: S) -> Iterator[None]:
        """While the block runs, the current thread is routed to `sink` (the entry is removed after it,
        unless something routed the thread anew meanwhile)."""
        ident = threading.get_ident()
        self[ident] = sink
        try:
            yield
        finally:
            if self.get(ident) is sink:
                del self[ident]


_routes: ThreadRoutes[Sink] = ThreadRoutes()
_install_lock = threading.Lock()


_local = threading.local()


class RoutedStream:
    """A stand-in for `sys.stdout` / `sys.stderr` that sends a routed thread's writes to its sink."""

    def __init__(self, name: str, underlying: Any) -> None:
        self.__dict__["_nbagent_name"] = name
        self.__dict__["_nbagent_underlying"] = underlying

    def __setattr__(self, name: str, value: Any) -> None:
        # IPython patches `write` on sys.stdout while a cell runs, to record the cell's output in its
        # history. The patch is kept behind the routing, so a routed thread's output never reaches it.
        if name == "write":
            if getattr(value, "__self__", None) is self and getattr(value, "__func__", None) is RoutedStream.write:
                self.__dict__.pop("_nbagent_patched_write", None)  # the patch being undone
            else:
                self.__dict__["_nbagent_patched_write"] = value
            return
        object.__setattr__(self, name, value)

    def write(self, text: str) -> int:
        sink = _routes.get(threading.get_ident())
        if sink is not None and getattr(sink, "closed", False):
            _routes.pop(threading.get_ident(), None)  # left behind by an interrupted run
            sink = None
        if sink is not None:
            if not isinstance(text, str):
                raise TypeError(f"write() argument must be str, not {type(text).__name__}")
            sink(self._nbagent_name, text)
            return len(text)
        patched = self.__dict__.get("_nbagent_patched_write")
        if patched is not None and not getattr(_local, "in_patch", False):
            _local.in_patch = True  # the patch calls back the original write (this one)
            try:
                return patched(text)
            finally:
                _local.in_patch = False
        underlying = self._nbagent_underlying
        if underlying is None:
            return len(text)
        return underlying.write(text)

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        if threading.get_ident() in _routes:
            return
        underlying = self._nbagent_underlying
        if underlying is not None:
            underlying.flush()

    def isatty(self) -> bool:
        if threading.get_ident() in _routes:
            return False
        underlying = self._nbagent_underlying
        return bool(underlying is not None and underlying.isatty())

    def writable(self) -> bool:
        return True

    def readable(self) -> bool:
        return False

    @property
    def closed(self) -> bool:
        underlying = self._nbagent_underlying
        return bool(getattr(underlying, "closed", False)) if underlying is not None else False

    def __getattr__(self, name: str) -> Any:
        underlying = self.__dict__.get("_nbagent_underlying")
        if underlying is None:
            raise AttributeError(name)
        return getattr(underlying, name)

    def __repr__(self) -> str:
        return f"<RoutedStream {self._nbagent_name} over {self._nbagent_underlying!r}>"


class RoutedStdin:
    """A stand-in for `sys.stdin`: a routed thread reading it gets `EOFError` at once."""

    def __init__(self, underlying: Any) -> None:
        self._nbagent_underlying = underlying

    def _refuse(self) -> None:
        raise EOFError("input() is not available to code run by a tool: nobody is there to type")

    def readline(self, *args: Any) -> str:
        if threading.get_ident() in _routes or self._nbagent_underlying is None:
            self._refuse()
        return self._nbagent_underlying.readline(*args)

    def read(self, *args: Any) -> str:
        if threading.get_ident() in _routes or self._nbagent_underlying is None:
            self._refuse()
        return self._nbagent_underlying.read(*args)

    def readlines(self, *args: Any) -> list[str]:
        if threading.get_ident() in _routes or self._nbagent_underlying is None:
            self._refuse()
        return self._nbagent_underlying.readlines(*args)

    def __iter__(self) -> Iterator[str]:
        if threading.get_ident() in _routes or self._nbagent_underlying is None:
            self._refuse()
        return iter(self._nbagent_underlying)

    def isatty(self) -> bool:
        if threading.get_ident() in _routes or self._nbagent_underlying is None:
            return False
        return bool(self._nbagent_underlying.isatty())

    def __getattr__(self, name: str) -> Any:
        underlying = self.__dict__.get("_nbagent_underlying")
        if underlying is None:
            raise AttributeError(name)
        return getattr(underlying, name)


def ensure_installed() -> None:
    """Put the routing proxies in front of `sys.stdout`, `sys.stderr` and `sys.stdin` (once; again only
    if something replaced them since)."""
    with _install_lock:
        for name in ("stdout", "stderr"):
            current = getattr(sys, name)
            if not isinstance(current, RoutedStream):
                setattr(sys, name, RoutedStream(name, current))
        if not isinstance(sys.stdin, RoutedStdin):
            sys.stdin = RoutedStdin(sys.stdin)


@contextmanager
def route_thread(sink: Sink) -> Iterator[None]:
    """While the block runs, what the current thread writes to stdout/stderr goes to `sink` only."""
    ensure_installed()
    with _routes.route(sink):
        yield


def routed(ident: int | None = None) -> bool:
    """Whether a thread (default: this one) is being captured."""
    return (threading.get_ident() if ident is None else ident) in _routes


class StreamSink:
    """Collects a routed thread's output (bounded) and streams it on as progress, a little at a time.

    Writes are passed to `on_output(stream, text)` at most every `interval` seconds (a background flusher
    sends what is left), so a loop printing thousands of lines makes a few dozen progress reports.
    """

    def __init__(self, on_output: Callable[[str, str], None] | None = None, *, limit: int = 8_000_000,
                 interval: float = 0.1) -> None:
        self.on_output = on_output
        self.limit = limit
        self.interval = interval
        self.parts: dict[str, list[str]] = {"stdout": [], "stderr": []}
        self.sizes = {"stdout": 0, "stderr": 0}
        self.dropped = {"stdout": 0, "stderr": 0}
        self._pending: list[tuple[str, str]] = []
        self._lock = threading.Lock()
        self._last = 0.0
        self._closed = False
        self._wake = threading.Event()
        self._flusher: threading.Thread | None = None

    def __call__(self, stream: str, text: str) -> None:
        if not text:
            return
        with self._lock:
            if self._closed:
                return
            if self.sizes[stream] + len(text) <= self.limit:
                self.parts[stream].append(text)
                self.sizes[stream] += len(text)
            else:
                room = max(0, self.limit - self.sizes[stream])
                if room:
                    self.parts[stream].append(text[:room])
                    self.sizes[stream] += room
                self.dropped[stream] += len(text) - room
            if self.on_output is None:
                return
            self._pending.append((stream, text))
            now = time.monotonic()
            due = now - self._last >= self.interval
            if not due and self._flusher is None:
                self._flusher = threading.Thread(target=self._flush_loop, name="nbagent-output", daemon=True)
                self._flusher.start()
        if due:
            self.flush()

    def _flush_loop(self) -> None:
        while not self._closed:
            self._wake.wait(self.interval)
            self.flush()

    def flush(self) -> None:
        with self._lock:
            pending, self._pending = self._pending, []
            self._last = time.monotonic()
        if not pending or self.on_output is None:
            return
        groups: list[tuple[str, list[str]]] = []
        for stream, text in pending:
            if groups and groups[-1][0] == stream:
                groups[-1][1].append(text)
            else:
                groups.append((stream, [text]))
        for stream, texts in groups:
            text = "".join(texts)
            try:
                self.on_output(stream, text)
            except Exception:  # pragma: no cover - progress is best effort
                pass

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        """Send what is left and stop streaming (later writes are ignored)."""
        self.flush()
        with self._lock:
            self._closed = True
        self._wake.set()

    def text(self, stream: str) -> str:
        with self._lock:
            text = "".join(self.parts[stream])
        if self.dropped[stream]:
            text += f"\n[... {self.dropped[stream]:,} more characters were not kept ...]\n"
        return text
