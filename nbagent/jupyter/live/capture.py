"""What a user's tool prints goes to its call's row, as the `python` tool's output does, not to the cell.

A tool given with `--tools` is the user's own function: its `print()` would otherwise go to whatever cell
the kernel's stdout belongs to at that moment (flooding the cell that started the run, or lost after a
click). `capturing(tool)` gives a copy of the tool whose output is routed, by thread, to a `StreamSink`
that reports it as the call's live output (`ctx.progress(output=...)`), the same mechanism the `python`
tool uses (`nbagent.toolbox._capture`):

- a sync tool runs on a worker thread: that thread is routed for the whole call;
- an async tool runs on the kernel's own thread, between other work (the user's cells): the thread is
  routed only while the tool's coroutine itself runs, one step at a time, never while it awaits.

Figures a tool returns are drawn in its row and result by the view, which closes them so the inline
backend does not draw them again under the next cell (`close_figure`).
"""

from __future__ import annotations

import copy
import functools
import sys
from typing import Any, Generator

from nbagent.toolbox import StreamSink, route_thread
from nbagent.tools.definition import Tool

__all__ = ["capturing", "close_figure", "is_figure"]

_CTX = "_nbagent_ctx"


def capturing(t: Tool) -> Tool:
    """A copy of `t` whose printed output becomes its call's live output (the original is untouched)."""
    if getattr(t, "_nbagent_captures", False):
        return t
    new = copy.copy(t)
    inner = t.fn
    own = t.ctx_param
    key = own or _CTX

    def sink_for(kwargs: dict[str, Any]) -> StreamSink:
        ctx = kwargs.get(key) if own else kwargs.pop(key, None)
        progress = getattr(ctx, "progress", None)
        if progress is None:
            return StreamSink(None)
        return StreamSink(lambda stream, text: progress(output=text, stream=stream))

    if t.is_async:
        @functools.wraps(inner)
        async def call(*args: Any, **kwargs: Any) -> Any:
            sink = sink_for(kwargs)
            try:
                return await _Routed(inner(*args, **kwargs), sink)
            finally:
                sink.close()
    else:
        @functools.wraps(inner)
        def call(*args: Any, **kwargs: Any) -> Any:
            sink = sink_for(kwargs)
            try:
                with route_thread(sink):
                    return inner(*args, **kwargs)
            finally:
                sink.close()

    new.fn = call
    new.ctx_param = key
    new._nbagent_captures = True
    return new


class _Routed:
    """Await a coroutine with this thread's output routed to `sink` only while the coroutine runs."""

    def __init__(self, coro: Any, sink: StreamSink) -> None:
        self.coro = coro
        self.sink = sink

    def __await__(self) -> Generator[Any, Any, Any]:
        coro = self.coro
        if not hasattr(coro, "send"):  # a plain awaitable: nothing to step through
            return (yield from coro.__await__())
        send: Any = None
        throw: BaseException | None = None
        while True:
            with route_thread(self.sink):
                try:
                    step = coro.throw(throw) if throw is not None else coro.send(send)
                except StopIteration as stop:
                    return stop.value
            try:
                send, throw = (yield step), None
            except GeneratorExit:
                coro.close()
                raise
            except BaseException as exc:  # CancelledError included: handed to the tool
                send, throw = None, exc


def is_figure(obj: Any) -> bool:
    """A matplotlib figure (without importing matplotlib)."""
    return type(obj).__module__.startswith("matplotlib.") and hasattr(obj, "savefig") and hasattr(obj, "axes")


def close_figure(obj: Any) -> None:
    """Close a figure in pyplot, so the inline backend does not draw it under the next cell."""
    pyplot = sys.modules.get("matplotlib.pyplot")
    if pyplot is not None and is_figure(obj):
        try:
            pyplot.close(obj)
        except Exception:
            pass
