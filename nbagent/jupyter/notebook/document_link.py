"""The kernel's end of one notebook's room in the collaboration engine: the Y.js sync and awareness protocols
over the engine's websocket, and the notebook requests done on the synced document (see shared.py for the
why; everything here runs on the shared document's own thread and loop).

Reads the shared document and the other collaborators' awareness states: anyone who has the notebook open
writes them. A cell's text is handed to the model as text; a change is applied only as hunks anchored to
what the agent read, never over text someone changed meanwhile (hunks.py); a deletion or a run needs the
cell to hold exactly what the agent read.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any, Callable
from urllib.parse import quote

from pycrdt import (
    Array,
    Assoc,
    Awareness,
    Doc,
    Map,
    Text,
    create_awareness_message,
    create_sync_message,
    create_update_message,
    handle_sync_message,
    read_message,
)

from .comm import FrontendError
from .execute import KernelClient
from .hunks import Conflict, plan_edit, rebase
from .server import NoEngine, ServerInfo

__all__ = ["AGENT_USER", "DocumentLink"]

AGENT_USER = {"username": "nbagent", "name": "nbagent", "display_name": "nbagent", "initials": "AI",
              "color": "#7c3aed", "avatar_url": None}
"""How the kernel shows among the document's collaborators (the engine's awareness `user`)."""

SYNC, AWARENESS = 0, 1
STEP2 = 1
RENEW_AWARENESS = 10.0
"""Seconds between two renewals of the awareness state (others forget a state not renewed within 30 s)."""


def _bytes(text: str, index: int) -> int:
    """A character index of `text` as the document counts (bytes of UTF-8)."""
    return len(text[:index].encode("utf-8"))


class DocumentLink:
    """One joined room: the synced notebook document, the kernel shown as "nbagent", the requests."""

    def __init__(self, server: ServerInfo, path: str, connection_info: Callable[[], dict[str, Any]]) -> None:
        from jupyter_ydoc import YNotebook

        self.server, self.path = server, path
        self.doc = Doc()
        self.notebook = YNotebook(self.doc)
        self.awareness = Awareness(self.doc)
        self.alive = False
        self._ws: Any = None
        self._remote = False
        self._synced = asyncio.Event()
        self._tasks: list[asyncio.Task] = []
        self._kernel = KernelClient(connection_info())
        self._displays: dict[str, list[Map]] = {}
        """display id -> the outputs written for it (update_display_data replaces their data)."""

    # -- joining the room --------------------------------------------------------------------------------------
    async def open(self) -> None:
        import httpx
        from tornado.httpclient import HTTPRequest
        from tornado.websocket import websocket_connect

        auth = {"Authorization": f"token {self.server.token}"}
        async with httpx.AsyncClient(timeout=10.0) as client:
            reply = await client.put(self.server.api("api/collaboration/session/" + quote(self.path)), headers=auth,
                                     json={"format": "json", "type": "notebook"})
        if reply.status_code not in (200, 201):
            raise NoEngine(f"the Jupyter server at {self.server.url} has no collaboration engine "
                           f"(jupyter-collaboration) for {self.path} (HTTP {reply.status_code})")
        room = reply.json()
        url = self.server.websocket(f"api/collaboration/room/json:notebook:{room['fileId']}"
                                    f"?sessionId={room.get('sessionId', '')}")
        self._ws = await websocket_connect(HTTPRequest(url, headers=auth), max_message_size=1 << 30)
        self.alive = True
        self.doc.observe(self._on_update)
        self._tasks.append(asyncio.ensure_future(self._receive()))
        self._send(create_sync_message(self.doc))
        await self._synced.wait()
        self.awareness.set_local_state({"user": AGENT_USER})
        self._send_awareness()
        self._tasks.append(asyncio.ensure_future(self._renew()))

    def _send(self, message: bytes) -> None:
        try:
            self._ws.write_message(message, binary=True)
        except Exception:  # closed: the reader notices and the next request joins again
            self.alive = False

    def _on_update(self, event: Any) -> None:
        if not self._remote and self.alive:
            self._send(create_update_message(event.update))

    def _send_awareness(self) -> None:
        self._send(create_awareness_message(self.awareness.encode_awareness_update([self.awareness.client_id])))

    async def _receive(self) -> None:
        try:
            while True:
                message = await self._ws.read_message()
                if message is None:
                    break
                if isinstance(message, str) or len(message) < 2:
                    continue
                if message[0] == SYNC:
                    self._remote = True  # what others wrote: not sent back
                    try:
                        reply = handle_sync_message(message[1:], self.doc)
                    finally:
                        self._remote = False
                    if reply is not None:
                        self._send(reply)
                    if message[1] == STEP2:
                        self._synced.set()
                elif message[0] == AWARENESS:
                    self.awareness.apply_awareness_update(read_message(message[1:]), "remote")
        finally:
            self.alive = False
            self._synced.set()

    async def _renew(self) -> None:
        while self.alive:
            await asyncio.sleep(RENEW_AWARENESS)
            self.awareness.set_local_state(self.awareness.get_local_state())
            self._send_awareness()

    async def close(self) -> None:
        if self._ws is not None and self.alive:
            self.awareness.set_local_state(None)
            self._send_awareness()
            self._ws.close()
        self.alive = False
        for task in self._tasks:
            task.cancel()
        self._kernel.stop()

    def _point_at(self, ycell: Map, index: int) -> None:
        """Show the agent's cursor in `ycell` at character `index` (where it just wrote)."""
        text = ycell.get("source")
        source = str(text) if isinstance(text, Text) else ""
        if not source:
            return
        at = _bytes(source, min(index, len(source) - 1))
        try:
            position = text.sticky_index(at, Assoc.AFTER).to_json()
        except Exception:  # pragma: no cover - a position the document cannot name
            return
        self.awareness.set_local_state({"user": AGENT_USER,
                                        "cursors": [{"anchor": position, "head": position, "primary": True,
                                                     "empty": True}]})
        self._send_awareness()

    # -- the requests --------------------------------------------------------------------------------------------
    async def request(self, op: str, fields: dict[str, Any]) -> Any:
        if not self.alive:
            raise FrontendError("the shared document went away; nothing was done")
        handler = {"read": self._op_read, "insert": self._op_insert, "edit": self._op_edit,
                   "delete": self._op_delete, "run": self._op_run, "settle": self._op_settle}.get(op)
        if handler is None:
            raise FrontendError(f"unknown request {op!r}")
        return await handler(**fields)

    def _cells(self) -> list[Map]:
        return list(self.notebook.ycells)

    def _find(self, cell_id: Any) -> tuple[int, Map]:
        cells = self._cells()
        for i, ycell in enumerate(cells):
            if ycell.get("id") == cell_id:
                return i, ycell
        known = ", ".join(str(c.get("id")) for c in cells[:40])
        raise FrontendError(f"there is no cell with id {cell_id!r} in {self.path} (its cells: {known})")

    def _json(self, index: int, ycell: Map) -> dict[str, Any]:
        cell = self.notebook.get_cell(index)
        metadata = cell.get("metadata") or {}
        return {"id": ycell.get("id"), "index": index, "cell_type": cell.get("cell_type", "code"),
                "source": cell.get("source", ""), "execution_count": cell.get("execution_count"),
                "outputs": list(cell.get("outputs") or []), "nbagent": metadata.get("nbagent")}

    async def _op_read(self, **_: Any) -> dict[str, Any]:
        return {"path": self.path, "cells": [self._json(i, c) for i, c in enumerate(self._cells())]}

    async def _op_insert(self, source: str = "", cell_type: str = "code", after: Any = None, mark: Any = None,
                      **_: Any) -> dict[str, Any]:
        if cell_type not in ("code", "markdown", "raw"):
            raise FrontendError(f"cell_type must be code, markdown or raw, not {cell_type!r}")
        index = len(self._cells()) if not after else self._find(after)[0] + 1
        cell: dict[str, Any] = {"id": str(uuid.uuid4()), "cell_type": cell_type, "source": str(source),
                                "metadata": {"nbagent": mark} if mark else {}}
        if cell_type == "code":
            cell.update(outputs=[], execution_count=None)
        with self.doc.transaction():
            self.notebook.ycells.insert(index, self.notebook.create_ycell(cell))
        self._point_at(self._cells()[index], 0)
        return {"cell_id": cell["id"], "index": index, "count": len(self._cells())}

    async def _op_edit(self, cell_id: Any = None, old: str = "", new: str = "", expected: Any = None, mark: Any = None,
                    **_: Any) -> dict[str, Any]:
        index, ycell = self._find(cell_id)
        text: Text = ycell["source"]
        live = str(text)
        base = expected if isinstance(expected, str) else live
        try:
            hunks, span = plan_edit(base, old, new)
        except ValueError:
            raise FrontendError(f"the text to replace does not occur exactly once in cell {cell_id} as you read "
                                "it; nothing was done") from None
        moved = rebase(base, live, hunks, span)
        if isinstance(moved, Conflict):
            raise FrontendError(
                f"cell {cell_id} changed since you last read it where your edit applies (someone is editing that "
                f"text); nothing was done. It holds now:\n{live}\nRead it again and base the change on what it "
                "holds now.")
        with self.doc.transaction():
            for h in sorted(moved, key=lambda h: h.start, reverse=True):
                start, end = _bytes(live, h.start), _bytes(live, h.end)
                if end > start:
                    del text[start:end]
                if h.insert:
                    text.insert(start, h.insert)
            if mark:
                ycell["metadata"]["nbagent"] = mark
        self._point_at(ycell, moved[0].start if moved else 0)
        return {"cell_id": cell_id, "index": index, "source": str(text), "kept_others": live != base}

    async def _op_delete(self, cell_id: Any = None, expected: Any = None, **_: Any) -> dict[str, Any]:
        index, ycell = self._find(cell_id)
        source = str(ycell["source"])
        _check(cell_id, source, expected, "deleting it would delete what they wrote")
        with self.doc.transaction():
            del self.notebook.ycells[index]
        return {"cell_id": cell_id, "index": index, "source": source}

    async def _op_run(self, cell_id: Any = None, expected: Any = None, **_: Any) -> dict[str, Any]:
        index, ycell = self._find(cell_id)
        source = str(ycell["source"])
        _check(cell_id, source, expected, "it runs only as the code that was approved")
        if ycell.get("cell_type") != "code":
            return {"cell": self._json(index, ycell), "status": "ok"}
        with self.doc.transaction():
            ycell["outputs"].clear()
            ycell["execution_count"] = None
            ycell["execution_state"] = "running"
        self._point_at(ycell, 0)
        writer = _OutputWriter(self, ycell)
        try:
            status, count = await self._kernel.execute(source, str(cell_id), writer)
        finally:
            ycell["execution_state"] = "idle"
        if count is not None:
            ycell["execution_count"] = count
        index, ycell = self._find(cell_id)
        return {"cell": self._json(index, ycell), "status": status}


    async def _op_settle(self, model_id: Any = None, bundle: Any = None, **_: Any) -> dict[str, Any]:
        """Put a run's static rendering in place of each display of its widget still in the document."""
        replaced = 0
        with self.doc.transaction():
            for ycell in self._cells():
                outputs = ycell.get("outputs")
                if not isinstance(outputs, Array):
                    continue
                for i in range(len(outputs)):
                    if _widget_of(outputs[i]) == model_id:
                        del outputs[i]
                        outputs.insert(i, Map({"output_type": "display_data", "data": dict(bundle or {}),
                                               "metadata": {}}))
                        replaced += 1
        return {"replaced": replaced}


def _widget_of(output: Any) -> Any:
    """The model id of the widget an output displays (None: not a widget)."""
    data = output.get("data") if isinstance(output, Map) else None
    data = data.to_py() if hasattr(data, "to_py") else data
    view = data.get("application/vnd.jupyter.widget-view+json") if isinstance(data, dict) else None
    return view.get("model_id") if isinstance(view, dict) else None


def _check(cell_id: Any, source: str, expected: Any, why: str) -> None:
    if isinstance(expected, str) and source != expected:
        raise FrontendError(f"cell {cell_id} changed since you last read it (someone edited it meanwhile: {why}); "
                            "nothing was done. Read it again with read_notebook and base the change on what it "
                            "holds now.")


class _OutputWriter:
    """Writes what the kernel publishes for one run into the cell's outputs, as a notebook page would."""

    def __init__(self, link: DocumentLink, ycell: Map) -> None:
        self.link, self.ycell = link, ycell
        self._clear_next = False

    def __call__(self, kind: str, value: Any) -> None:
        outputs = self.ycell["outputs"]
        if kind == "count":
            self.ycell["execution_count"] = value
            return
        if kind == "clear":
            if value:
                self._clear_next = True
            else:
                outputs.clear()
            return
        if kind == "update":
            display_id, data, metadata = value
            for out in self.link._displays.get(display_id, []):
                with self.link.doc.transaction():
                    out["data"], out["metadata"] = data, metadata
            return
        if self._clear_next:
            self._clear_next = False
            outputs.clear()
        with self.link.doc.transaction():
            if kind == "stream":
                name, text = value
                last = outputs[len(outputs) - 1] if len(outputs) else None
                if isinstance(last, Map) and last.get("output_type") == "stream" and last.get("name") == name \
                        and isinstance(last.get("text"), Text):
                    last["text"] += text
                else:
                    outputs.append(Map({"output_type": "stream", "name": name, "text": Text(text)}))
            elif kind == "output":
                out, display_id = value
                outputs.append(Map(out))
                if display_id:
                    self.link._displays.setdefault(display_id, []).append(outputs[len(outputs) - 1])
