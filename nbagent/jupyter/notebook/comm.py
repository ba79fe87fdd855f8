"""The kernel's end of the `nbagent.notebook` comm: it asks the frontend part (JupyterLab 4 / Notebook 7
extension in `frontend/`) for the live notebook and has it apply edits and run cells.

Protocol (JSON over one comm, target `nbagent.notebook`, opened by the kernel on first use; every message
and what each answer holds is in protocol.json beside this file, from which the page's types are generated):

    kernel -> frontend   comm_open {"protocol": 1}, then {"id": N, "op": "hello", "protocol": 1}
    frontend -> kernel   {"id": N, "ok": true, "result": {"client": "...", "path": "dir/nb.ipynb", "app": "lab", ...}}
    kernel -> frontend   {"id": N, "op": "read" | "insert" | "edit" | "delete" | "run" | "snapshot", "client": "...", ...}
    frontend -> kernel   {"id": N, "ok": true, "result": {...}}   or   {"id": N, "ok": false, "error": "why"}

Every open notebook attached to this kernel answers the hello; the first one is chosen and every later
request names it (`client`), so a second view never applies an edit twice. Every request has a timeout;
a comm the frontend closes (the notebook was closed, the kernel was switched) fails the requests that are
waiting, at once, with a message saying so. Where nobody answers the hello (nbclient, papermill, the
terminal, a frontend without the extension), `NoFrontend` says why, and the answer is remembered for a
while so the tools do not wait again on every call.

Replies may arrive on any thread (JupyterLab sends comm messages over kernel subshells): they are handed
to the asking loop with `call_soon_threadsafe`.
"""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
from typing import Any

__all__ = ["FrontendError", "NoFrontend", "NotebookFrontend", "TARGET", "frontend_for"]

TARGET = "nbagent.notebook"
PROTOCOL = 1
HELLO_TIMEOUT = 5.0
"""Seconds to wait for a frontend to answer the first message."""
REQUEST_TIMEOUT = 20.0
"""Seconds to wait for the answer to a read or an edit."""
ABSENT_FOR = 30.0
"""Seconds a failed hello is remembered (no frontend: the tools answer at once meanwhile)."""


class NoFrontend(Exception):
    """No live notebook answers: there is no frontend, or it has no nbagent extension, or it went away."""


class FrontendError(Exception):
    """The frontend answered, and refused (the message says why, for the model)."""


class NotebookFrontend:
    """One kernel's connection to the notebook frontend that serves it."""

    def __init__(self, opener: Any = None) -> None:
        self._open_comm = opener or _create_comm
        self._comm: Any = None
        self._client: str | None = None
        self.info: dict[str, Any] = {}
        self._ids = itertools.count(1)
        self._waiting: dict[int, tuple[asyncio.AbstractEventLoop, asyncio.Future]] = {}
        self._lock = threading.Lock()
        self._absent_until = 0.0
        self._absent_reason = ""
        self._connecting: asyncio.Future | None = None

    # -- public ------------------------------------------------------------------------------------------------
    @property
    def connected(self) -> bool:
        return self._comm is not None and self._client is not None

    async def request(self, op: str, timeout: float | None = REQUEST_TIMEOUT, **fields: Any) -> Any:
        """Send one request to the chosen frontend and return its result; raise `NoFrontend` or
        `FrontendError`. `timeout` None waits as long as it takes (cancelling the caller stops waiting)."""
        await self.connect()
        comm, client = self._comm, self._client
        if comm is None:
            raise NoFrontend("the notebook went away; nothing was done")
        message_id = next(self._ids)
        future = self._expect(message_id)
        try:
            comm.send({"id": message_id, "op": op, "client": client, **fields})
            return await self._wait(future, timeout, f"the notebook did not answer the {op!r} request within "
                                                     f"{timeout:g} s" if timeout else "")
        finally:
            with self._lock:
                self._waiting.pop(message_id, None)

    async def connect(self) -> None:
        """Open the comm and choose a frontend (no-op when connected)."""
        if self.connected:
            return
        if time.monotonic() < self._absent_until:
            raise NoFrontend(self._absent_reason)
        if self._connecting is not None and not self._connecting.done():
            await asyncio.shield(self._connecting)
            return
        loop = asyncio.get_running_loop()
        self._connecting = loop.create_future()
        try:
            await self._hello()
            self._connecting.set_result(None)
        except BaseException as exc:
            if isinstance(exc, NoFrontend):
                self._absent_until = time.monotonic() + ABSENT_FOR
                self._absent_reason = str(exc)
            self._connecting.set_exception(exc)
            self._connecting.exception()  # retrieved: a lone waiter must not log "never retrieved"
            raise

    def forget(self) -> None:
        """Drop the comm (the next request says hello again)."""
        comm, self._comm, self._client = self._comm, None, None
        self._absent_until = 0.0
        if comm is not None:
            try:
                comm.close()
            except Exception:  # pragma: no cover - a comm already gone
                pass

    # -- the comm ------------------------------------------------------------------------------------------------
    async def _hello(self) -> None:
        message_id = next(self._ids)
        future = self._expect(message_id)
        try:
            try:
                comm = self._open_comm(TARGET, {"protocol": PROTOCOL})
            except Exception as exc:
                raise NoFrontend(f"no comm can be opened here ({exc})") from None
            if comm is None:
                raise NoFrontend("this kernel has no frontend connection (comms are unavailable)")
            comm.on_msg(self._on_msg)
            comm.on_close(self._on_close_for(comm))
            self._comm = comm
            # the hello goes once the handlers are in place, so no answer can arrive before them
            from nbagent.render.markdown import LIVE_MARK  # the page's Copy / Insert: this kernel's blocks only

            comm.send({"id": message_id, "op": "hello", "protocol": PROTOCOL, "mark": LIVE_MARK})
            try:
                result = await self._wait(future, HELLO_TIMEOUT, "")
            except NoFrontend:
                self._comm = None
                try:
                    comm.close()
                except Exception:  # pragma: no cover
                    pass
                raise
        finally:
            with self._lock:
                self._waiting.pop(message_id, None)
        result = result if isinstance(result, dict) else {}
        self._client = str(result.get("client") or "")
        self.info = result

    def _expect(self, message_id: int) -> asyncio.Future:
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        with self._lock:
            self._waiting[message_id] = (loop, future)
        return future

    async def _wait(self, future: asyncio.Future, timeout: float | None, late: str) -> Any:
        try:
            if timeout is None:
                return await future
            return await asyncio.wait_for(future, timeout)
        except asyncio.TimeoutError:
            if late:  # the frontend was there and went silent: ask again from scratch next time
                self.forget()
                raise NoFrontend(late + " (is the notebook still open in JupyterLab or Notebook 7?)") from None
            raise NoFrontend(
                "no notebook frontend with nbagent's extension answered: the kernel runs headless (nbclient, "
                "papermill, a terminal), or in a frontend without the extension (VS Code, classic Notebook 6); "
                "install nbagent in the Jupyter server's environment and reload the page") from None

    def _on_msg(self, msg: dict[str, Any]) -> None:
        data = (msg.get("content") or {}).get("data") or {}
        if not isinstance(data, dict):
            return
        message_id = data.get("id")
        with self._lock:
            entry = self._waiting.get(message_id) if isinstance(message_id, int) else None
        if entry is None:
            return  # a late answer, or a second frontend's hello
        loop, future = entry
        if data.get("ok"):
            outcome: tuple[str, Any] = ("result", data.get("result"))
        else:
            outcome = ("error", FrontendError(str(data.get("error") or "the notebook refused, without a reason")))
        loop.call_soon_threadsafe(_settle, future, outcome)

    def _on_close_for(self, comm: Any):
        def on_close(_msg: Any = None) -> None:
            if self._comm is not comm:
                return
            greeted = self._client is not None
            self._comm, self._client = None, None
            with self._lock:
                waiting = list(self._waiting.values())
                self._waiting.clear()
            if greeted:
                why = ("the notebook went away (it was closed, reloaded or its kernel was changed) before it "
                       "answered; nothing more was done")
            else:
                why = ("the notebook frontend refused the comm: it has no nbagent extension (install nbagent in "
                       "the Jupyter server's environment and reload the page)")
            for loop, future in waiting:
                loop.call_soon_threadsafe(_settle, future, ("error", NoFrontend(why)))

        return on_close


def _settle(future: asyncio.Future, outcome: tuple[str, Any]) -> None:
    if future.done():
        return
    kind, value = outcome
    if kind == "result":
        future.set_result(value)
    else:
        future.set_exception(value)


def _create_comm(target: str, data: dict[str, Any]) -> Any:
    from comm import create_comm

    return create_comm(target_name=target, data=data)


def _no_kernel(target: str, data: dict[str, Any]) -> Any:
    raise RuntimeError("this IPython is not a Jupyter kernel, so there is no notebook page to talk to")


_frontends: dict[int, NotebookFrontend] = {}
_frontends_lock = threading.Lock()


def frontend_for(shell: Any) -> NotebookFrontend:
    """The `NotebookFrontend` of a shell (one per kernel, made on first use)."""
    with _frontends_lock:
        found = getattr(shell, "_nbagent_frontend", None)
        if not isinstance(found, NotebookFrontend):
            found = NotebookFrontend(None if getattr(shell, "kernel", None) is not None else _no_kernel)
            try:
                shell._nbagent_frontend = found
            except Exception:  # pragma: no cover
                _frontends[id(shell)] = found
        return found
