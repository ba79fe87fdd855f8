"""A third party in a notebook's shared document: a Y client of the collaboration engine, in the test process.

It joins the room as JupyterLab does (`PUT api/collaboration/session/<path>`, then the room's websocket) with
pycrdt's own `Provider` for the sync protocol, keeps the other clients' awareness states, and lets a test read
the live document and type into a cell, on a thread of its own so a synchronous test can use it.
"""

from __future__ import annotations

import asyncio
import json
import threading
import urllib.request
from typing import Any, Callable
from urllib.parse import quote


class _Channel:
    """The room's websocket as pycrdt's `Channel`; awareness messages go to `on_awareness`, sync ones through."""

    def __init__(self, ws: Any, path: str, on_awareness: Callable[[bytes], None]) -> None:
        self.ws, self._path, self.on_awareness = ws, path, on_awareness

    @property
    def path(self) -> str:
        return self._path

    def __aiter__(self) -> _Channel:
        return self

    async def __anext__(self) -> bytes:
        while True:
            message = await self.ws.read_message()
            if message is None:
                raise StopAsyncIteration
            if isinstance(message, bytes) and message[:1] == b"\x01":
                self.on_awareness(message)
                continue
            if isinstance(message, bytes):
                return message

    async def recv(self) -> bytes:
        return await self.__anext__()

    async def send(self, message: bytes) -> None:
        await self.ws.write_message(message, binary=True)


class YCollaborator:
    """Joins `path` on `server` (a tests.jupyter.browser.lab.LabServer) as a collaborator named `name`."""

    def __init__(self, server: Any, path: str, name: str = "third party", timeout: float = 30.0) -> None:
        from jupyter_ydoc import YNotebook
        from pycrdt import Awareness, Doc

        self.server, self.path = server, path
        self.doc = Doc()
        self.notebook = YNotebook(self.doc)
        self.awareness = Awareness(self.doc)
        self.awareness.set_local_state({"user": {"username": name, "name": name, "display_name": name}})
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        self._call(self._join(), timeout)

    def _call(self, coro: Any, timeout: float = 30.0) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout)

    async def _join(self) -> None:
        from pycrdt import Provider, create_awareness_message, read_message
        from tornado.httpclient import HTTPRequest
        from tornado.websocket import websocket_connect

        auth = {"Authorization": f"token {self.server.token}", "Content-Type": "application/json"}
        request = urllib.request.Request(f"{self.server.url}/api/collaboration/session/{quote(self.path)}",
                                         data=json.dumps({"format": "json", "type": "notebook"}).encode(),
                                         headers=auth, method="PUT")
        room = json.loads(await asyncio.to_thread(lambda: urllib.request.urlopen(request, timeout=10).read()))
        url = (f"ws://127.0.0.1:{self.server.port}/api/collaboration/room/json:notebook:{room['fileId']}"
               f"?sessionId={room['sessionId']}")
        self.ws = await websocket_connect(HTTPRequest(url, headers=auth))
        channel = _Channel(self.ws, url, lambda m: self.awareness.apply_awareness_update(read_message(m[1:]), "ws"))
        self.provider = Provider(self.doc, channel)
        self._task = asyncio.ensure_future(self.provider.start())
        await self.provider.started.wait()
        await self.provider.synced.wait()
        await self.ws.write_message(create_awareness_message(
            self.awareness.encode_awareness_update([self.awareness.client_id])), binary=True)

    # -- reading --------------------------------------------------------------------------------------------------
    def cells(self) -> list[dict[str, Any]]:
        return self._call(self._cells())

    async def _cells(self) -> list[dict[str, Any]]:
        return [{**self.notebook.get_cell(i), "id": c.get("id")} for i, c in enumerate(self.notebook.ycells)]

    def source(self, cell_id: str) -> str:
        return next(c["source"] for c in self.cells() if c["id"] == cell_id)

    def users(self) -> list[str]:
        """The names in the other clients' awareness states."""
        return self._call(self._users())

    async def _users(self) -> list[str]:
        return [((s or {}).get("user") or {}).get("name", "") for cid, s in self.awareness.states.items()
                if cid != self.awareness.client_id]

    def state_of(self, name: str) -> dict[str, Any] | None:
        return self._call(self._state_of(name))

    async def _state_of(self, name: str) -> dict[str, Any] | None:
        for cid, s in self.awareness.states.items():
            if cid != self.awareness.client_id and ((s or {}).get("user") or {}).get("name") == name:
                return s
        return None

    # -- typing ---------------------------------------------------------------------------------------------------
    def type_at(self, cell_id: str, index: int, text: str) -> None:
        """Type `text` at character `index` of a cell, as a person in a page would (one keystroke at a time)."""
        self._call(self._type_at(cell_id, index, text))

    async def _type_at(self, cell_id: str, index: int, text: str) -> None:
        ytext = next(c for c in self.notebook.ycells if c.get("id") == cell_id)["source"]
        for i, ch in enumerate(text):
            at = len(str(ytext)[:index + i].encode("utf-8"))
            ytext.insert(at, ch)
            await asyncio.sleep(0)

    def replace(self, cell_id: str, old: str, new: str) -> None:
        self._call(self._replace(cell_id, old, new))

    async def _replace(self, cell_id: str, old: str, new: str) -> None:
        ytext = next(c for c in self.notebook.ycells if c.get("id") == cell_id)["source"]
        source = str(ytext)
        at = source.index(old)
        start, end = len(source[:at].encode()), len(source[:at + len(old)].encode())
        with self.doc.transaction():
            del ytext[start:end]
            ytext.insert(start, new)

    def close(self) -> None:
        async def stop() -> None:
            self.ws.close()
            self._task.cancel()

        try:
            self._call(stop(), 5)
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
