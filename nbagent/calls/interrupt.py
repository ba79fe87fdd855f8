"""Sync tools on worker threads, and stopping them: the one place nbagent interrupts a thread.

A sync tool runs on a pool thread (`THREAD_POOL_SIZE` of them, so many blocking calls of one batch run
at once). When its call is cancelled or times out, its cancellation token is cancelled first (a
cooperative tool that polls `ctx.cancelled` stops by itself); then an exception is injected into the
thread with `PyThreadState_SetAsyncExc`, a few times within `THREAD_STOP_GRACE` seconds, which stops pure
Python code. Code blocked outside Python (a C extension, a system call) cannot be stopped: the call then
says so, and the thread finishes in the background.
"""

from __future__ import annotations

import asyncio
import ctypes
import logging
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable

from ..context import CancellationToken, ToolCancelled

__all__ = ["NOT_STOPPED", "THREAD_POOL_SIZE", "THREAD_STOP_GRACE", "ToolTimeout", "run_in_thread", "tool_executor"]

log = logging.getLogger("nbagent.interrupt")

THREAD_POOL_SIZE = 64
"""Worker threads for sync tools: enough that many blocking calls of one batch run at once."""
THREAD_STOP_GRACE = 1.0
"""Seconds to wait for a sync tool's thread to stop after it was cancelled or timed out."""

_executor: ThreadPoolExecutor | None = None
_executor_lock = threading.Lock()


def tool_executor() -> ThreadPoolExecutor:
    global _executor
    if _executor is None:
        with _executor_lock:
            if _executor is None:
                _executor = ThreadPoolExecutor(max_workers=THREAD_POOL_SIZE, thread_name_prefix="nbagent-tool")
    return _executor


NOT_STOPPED = (
    "Its code could not be stopped (it is blocked outside Python, e.g. in a C extension or a system call) "
    "and may still be running in the background."
)


class ToolTimeout(Exception):
    """A call ran past its timeout; `stopped` says whether its code was actually stopped."""

    def __init__(self, stopped: bool = True) -> None:
        super().__init__("timeout")
        self.stopped = stopped


class _Interrupt(BaseException):
    """Injected into a sync tool's thread to stop it. A BaseException (like KeyboardInterrupt), so tool
    code that catches `Exception` does not swallow it; it reaches the runtime as `ToolCancelled`."""


class _ThreadCall:
    """Runs one sync call on a pool thread, and can interrupt it (where Python allows) when cancelled."""

    __slots__ = ("lock", "thread_id", "active")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.thread_id: int | None = None
        self.active = False

    def run(self, fn: Callable[[], Any], token: CancellationToken) -> Any:
        with self.lock:
            self.thread_id = threading.get_ident()
            self.active = True
        try:
            return fn()
        except _Interrupt:
            raise ToolCancelled(token.reason_text or "interrupted") from None
        finally:
            with self.lock:
                self.active = False
            _clear_pending_interrupt()

    def interrupt(self) -> bool:
        """Raise `_Interrupt` inside the thread at its next Python instruction."""
        with self.lock:
            if not self.active or self.thread_id is None:
                return False
            ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(self.thread_id), ctypes.py_object(_Interrupt))
            return True


def _clear_pending_interrupt() -> None:
    """Drop an interrupt that arrived too late to matter, so it cannot hit the pool thread's next job."""
    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(threading.get_ident()), ctypes.c_void_p(0))


async def run_in_thread(fn: Callable[[], Any], token: CancellationToken, timeout: float | None) -> Any:
    """Run `fn()` on a worker thread and return its value; on cancellation or after `timeout` seconds,
    cancel `token`, then interrupt the thread (raising `ToolTimeout` for a timeout).

    A cancellation whose thread could not be stopped re-raises `CancelledError(NOT_STOPPED)`.
    """
    loop = asyncio.get_running_loop()
    state = _ThreadCall()
    future = loop.run_in_executor(tool_executor(), state.run, fn, token)
    try:
        done, _ = await asyncio.wait((future,), timeout=timeout)
    except asyncio.CancelledError:
        token.cancel("cancelled")
        stopped = await _stop_thread(state, future)
        if not stopped:
            raise asyncio.CancelledError(NOT_STOPPED) from None
        raise
    if not done:
        token.cancel("timeout")
        stopped = await _stop_thread(state, future)
        raise ToolTimeout(stopped)
    return future.result()


async def _stop_thread(state: _ThreadCall, future: asyncio.Future) -> bool:
    """Stop a sync call's thread; return whether it stopped (False: blocked outside Python)."""
    if future.done():
        _consume(future)
        return True
    # Give a cooperative tool a moment to notice ctx.cancelled, then interrupt it, again a few times in
    # case the code caught the first interrupt with a bare `except:`. A second cancellation (Stop pressed
    # twice) does not cut this short: the thread must be dealt with either way.
    try:
        await asyncio.wait((future,), timeout=0.05)
    except asyncio.CancelledError:
        pass
    attempts = 5
    for _ in range(attempts):
        if future.done():
            break
        state.interrupt()
        try:
            await asyncio.wait((future,), timeout=THREAD_STOP_GRACE / attempts)
        except asyncio.CancelledError:
            pass
    if future.done():
        _consume(future)
        return True
    log.warning("a sync tool's thread did not stop (it is blocked outside Python); it will finish in the background")
    future.add_done_callback(_consume)
    return False


def _consume(future: asyncio.Future) -> None:
    if not future.cancelled():
        future.exception()
