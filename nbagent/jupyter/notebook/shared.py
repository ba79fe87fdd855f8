"""The notebook as the server's shared document: where the Jupyter server runs a collaboration engine
(jupyter-collaboration), the notebook tools read and change the live document itself, from the kernel, with no
browser tab open, and everyone who has the notebook open sees the change as it is made.

How: the kernel finds the server that started it and the notebook of its session (server.py), asks the engine
for the document's room (`PUT api/collaboration/session/<path>`) and joins it over the engine's websocket
(`api/collaboration/room/json:notebook:<file id>`), as JupyterLab does: the Y.js sync protocol over a
pycrdt document, and the awareness protocol, where the kernel shows as a collaborator named "nbagent" with a
cursor on the cell it changes. The connection lives on a thread of its own (a cell that blocks the kernel
does not stall it); the tools' requests are handed to it.

Changes are made as the engine's clients make them: a cell is a map with a shared text (`source`); an edit
is the smallest hunks (hunks.py) anchored to the text the agent read, applied in one transaction; an edit
whose text someone changed meanwhile is refused with what the cell holds now; a deletion or a run needs the
cell to hold exactly what the agent read (and what the approval showed). A cell runs in this kernel through
a client of the kernel itself (execute.py), and its outputs are written into the document as they come.

Reads the shared document, which every collaborator (and anything that can write the notebook file) writes:
untrusted, like any notebook: text for the model, run only with approval of exactly the code shown.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
from typing import Any, Callable

from .comm import NoFrontend
from .server import NoEngine, NoServer, ServerInfo, kernel_id, server_candidates

__all__ = ["SharedDocument", "shared_document_for"]

log = logging.getLogger("nbagent.jupyter")

CONNECT_TIMEOUT = 15.0
ABSENT_FOR = 30.0
"""Seconds a failed attempt is remembered (the comm path answers at once meanwhile)."""


class SharedDocument:
    """One kernel's connection to its notebook's shared document (made on first use; see the module docstring)."""

    def __init__(self, locate: Callable[[], tuple[ServerInfo, str]] | None = None,
                 connection_info: Callable[[], dict[str, Any]] | None = None) -> None:
        self._locate = locate or _locate
        self._connection_info = connection_info or _connection_info
        self.path = ""
        self.why_not = ""
        """Why the shared document is not used (no engine, no server...), once an attempt failed."""
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._link: Any = None
        self._absent_until = 0.0

    # -- from the kernel's loop --------------------------------------------------------------------------------
    @property
    def joined(self) -> bool:
        """Whether the kernel is in the document's room now (no attempt is made to join)."""
        return self._link is not None and self._link.alive

    async def available(self) -> bool:
        """Whether the shared document answers (connects on first use; a failure is remembered a while)."""
        if self._link is not None and self._link.alive:
            return True
        if time.monotonic() < self._absent_until:
            return False
        try:
            await self._call(self._connect())
            return True
        except (NoServer, NoEngine, NoFrontend) as exc:
            self.why_not = str(exc)
        except Exception as exc:  # the server went away, the websocket failed...: the comm path is tried
            self.why_not = f"the shared document could not be reached ({type(exc).__name__}: {exc})"
            log.debug("shared document unreachable", exc_info=True)
        self._absent_until = time.monotonic() + ABSENT_FOR
        return False

    async def request(self, op: str, **fields: Any) -> Any:
        """Do one of the notebook requests (read, insert, edit, delete, run, settle) on the shared document."""
        if not await self.available():
            raise NoFrontend(self.why_not)
        return await self._call(self._link.request(op, fields))

    def close(self) -> None:
        link, self._link = self._link, None
        if link is not None and self._loop is not None:
            asyncio.run_coroutine_threadsafe(link.close(), self._loop)

    # -- the document's thread ---------------------------------------------------------------------------------
    async def _call(self, coro: Any) -> Any:
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._loop = asyncio.new_event_loop()
                self._thread = threading.Thread(target=self._loop.run_forever, name="nbagent-shared-document",
                                                daemon=True)
                self._thread.start()
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, self._loop))

    async def _connect(self) -> None:
        if self._link is not None and self._link.alive:
            return
        server, path = await asyncio.wait_for(asyncio.to_thread(self._locate), CONNECT_TIMEOUT)
        try:
            from .document_link import DocumentLink  # pycrdt and jupyter_ydoc: only where an engine may run
        except ImportError as exc:
            raise NoEngine(f"this kernel's environment cannot join a shared document ({exc}): install "
                           "\"nbagent[collaboration]\" (pycrdt, jupyter-ydoc) where the kernel runs") from None
        link = DocumentLink(server, path, self._connection_info)
        await asyncio.wait_for(link.open(), CONNECT_TIMEOUT)
        self._link, self.path, self.why_not = link, path, ""


def _locate() -> tuple[ServerInfo, str]:
    """This kernel's server, and the path of the notebook its session names (see server.py)."""
    kid = kernel_id()
    import httpx

    last = "no server listed this kernel"
    for server in server_candidates():
        try:
            reply = httpx.get(server.api("api/sessions"), headers={"Authorization": f"token {server.token}"},
                              timeout=5.0)
            reply.raise_for_status()
            sessions = reply.json()
        except (httpx.HTTPError, ValueError) as exc:
            last = f"the server at {server.url} did not list its sessions ({exc})"
            continue
        for s in sessions if isinstance(sessions, list) else []:
            kernel = s.get("kernel") if isinstance(s, dict) else None
            if isinstance(kernel, dict) and kernel.get("id") == kid and isinstance(s.get("path"), str):
                if s.get("type", "notebook") != "notebook" or not s["path"].endswith(".ipynb"):
                    raise NoServer(f"this kernel's session is not a notebook ({s['path']})")
                return server, s["path"]
    raise NoServer(f"no notebook session of this kernel was found ({last})")


def _connection_info() -> dict[str, Any]:
    from ipykernel.connect import get_connection_info

    info = get_connection_info(unpack=True)
    return info if isinstance(info, dict) else json.loads(info)


_docs_lock = threading.Lock()


def shared_document_for(shell: Any) -> SharedDocument | None:
    """The kernel's `SharedDocument` (one per shell, made on first use); None outside a Jupyter kernel."""
    if getattr(shell, "kernel", None) is None:
        return None
    with _docs_lock:
        found = getattr(shell, "_nbagent_shared", None)
        if not isinstance(found, SharedDocument):
            found = SharedDocument()
            shell._nbagent_shared = found
        return found

