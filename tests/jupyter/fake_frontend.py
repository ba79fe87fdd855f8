"""A stand-in for nbagent's frontend part: a notebook kept in Python that answers the `nbagent.notebook`
protocol the way frontend/src/notebook/notebookComm.ts does (the same checks, the same answers).

`FakeNotebook` holds the cells and answers one request (`answer(data) -> reply`). It checks every request
against the protocol (nbagent/jupyter/notebook/protocol.json) and every answer it gives too: what does not fit
is refused and kept in `FakeNotebook.problems`, which the tests' conftest checks after each test. `InProcessComm` plugs it
into `NotebookFrontend(opener=...)` in the test process, answering from another thread as JupyterLab's
subshells do; `KernelFrontend` plays it against a real kernel over jupyter_client (it watches IOPub for
the comm, answers on the shell channel, and can close the comm instead of answering).
"""

from __future__ import annotations

import threading
import time
import uuid
from typing import Any, Callable

from jupyter_client.session import Session

from nbagent.jupyter.protocol import problem

from .protocols import reply_problem


class FakeNotebook:
    problems: list[str] = []
    """Requests and answers of any fake notebook that were not in the protocol (emptied before each test)."""

    def __init__(self, cells: list[dict[str, Any]] | None = None, path: str = "analysis.ipynb") -> None:
        self.path = path
        self.cells = [dict(c) for c in (cells or [])]
        for c in self.cells:
            c.setdefault("cell_type", "code")
            c.setdefault("outputs", [])
            c.setdefault("execution_count", None)
            c.setdefault("metadata", {})
        self.client = uuid.uuid4().hex[:8]
        self.metadata: dict[str, Any] = {}
        """The notebook's metadata (the frontend part keeps the notebook's id in `nbagent.id`)."""
        self.snapshots: dict[str, dict[str, str]] = {}
        """The static renderings of live views the kernel sent (`snapshot`), by widget model id."""
        self.requests: list[dict[str, Any]] = []
        self.on_run: Callable[[dict[str, Any]], tuple[list[dict], str]] | None = None
        self._count = 0

    def cell(self, cell_id: str) -> dict[str, Any]:
        return next(c for c in self.cells if c["id"] == cell_id)

    def _find(self, cell_id: Any) -> int:
        for i, c in enumerate(self.cells):
            if c["id"] == cell_id:
                return i
        raise LookupError(f"there is no cell with id {cell_id!r} in {self.path}")

    def _json(self, i: int) -> dict[str, Any]:
        c = self.cells[i]
        return {"id": c["id"], "index": i, "cell_type": c["cell_type"], "source": c["source"],
                "execution_count": c["execution_count"], "outputs": c["outputs"],
                "nbagent": c["metadata"].get("nbagent")}

    def _expected(self, i: int, expected: Any) -> None:
        if isinstance(expected, str) and self.cells[i]["source"] != expected:
            raise LookupError(f"cell {self.cells[i]['id']} changed since you last read it (someone edited it "
                              "meanwhile); nothing was done. Read it again with read_notebook.")

    def answer(self, data: dict[str, Any]) -> dict[str, Any]:
        self.requests.append(data)
        why = problem("notebook", "KernelRequest", data)
        if why is not None:
            FakeNotebook.problems.append(f"the kernel asked outside the protocol ({why}): {str(data)[:300]}")
            return {"id": data.get("id"), "ok": False, "error": f"not in the protocol: {why}"}
        try:
            reply = {"id": data["id"], "ok": True, "result": self._handle(data)}
        except LookupError as exc:
            reply = {"id": data["id"], "ok": False, "error": str(exc)}
        why = reply_problem("notebook", data["op"], reply)
        if why is not None:
            FakeNotebook.problems.append(f"the fake page answered outside the protocol ({why}): {str(reply)[:300]}")
        return reply

    def _handle(self, data: dict[str, Any]) -> Any:
        op = data["op"]
        if op == "hello":  # the notebook's id is made the first time (frontend/src/notebook/notebookComm.ts, notebookId)
            self.metadata.setdefault("nbagent", {}).setdefault("id", uuid.uuid4().hex)
            return {"client": self.client, "path": self.path, "app": "fake",
                    "notebook_id": self.metadata["nbagent"]["id"]}
        if op == "snapshot":  # kept by widget model id (frontend/src/notebook/keptViews.ts keeps them in the cell's metadata)
            if data.get("html") is None:
                self.snapshots.pop(data["model_id"], None)
            else:
                self.snapshots[data["model_id"]] = {"html": data["html"], "text": data["text"]}
            return {"kept": data.get("html") is not None}
        if op == "read":
            return {"path": self.path, "cells": [self._json(i) for i in range(len(self.cells))]}
        if op == "insert":
            index = self._find(data["after"]) + 1 if data.get("after") else len(self.cells)
            new = {"id": uuid.uuid4().hex[:8], "cell_type": data["cell_type"], "source": data["source"],
                   "outputs": [], "execution_count": None, "metadata": {"nbagent": data.get("mark")}}
            self.cells.insert(index, new)
            return {"cell_id": new["id"], "index": index, "count": len(self.cells)}
        if op == "edit":
            i = self._find(data["cell_id"])
            self._expected(i, data.get("expected"))
            src = self.cells[i]["source"]
            if src.count(data["old"]) != 1:
                raise LookupError("the text to replace is not in the cell once any more; nothing was done")
            self.cells[i]["source"] = src.replace(data["old"], data["new"], 1)
            self.cells[i]["metadata"]["nbagent"] = data.get("mark")
            return {"cell_id": data["cell_id"], "index": i, "source": self.cells[i]["source"]}
        if op == "delete":
            i = self._find(data["cell_id"])
            self._expected(i, data.get("expected"))
            gone = self.cells.pop(i)
            return {"cell_id": gone["id"], "index": i, "source": gone["source"]}
        if op == "run":
            i = self._find(data["cell_id"])
            self._expected(i, data.get("expected"))
            self._count += 1
            outputs, status = (self.on_run(self.cells[i]) if self.on_run else
                               ([{"output_type": "stream", "name": "stdout", "text": "ran\n"}], "ok"))
            self.cells[i]["outputs"] = outputs
            self.cells[i]["execution_count"] = self._count
            return {"cell": self._json(i), "status": status}
        raise LookupError(f"unknown request {op!r}")


def warm_up() -> None:
    """Compile the protocol's schemas now, not while the kernel waits for the page's hello (that took seconds
    on a busy machine, and the kernel gives a page 5 s to answer it)."""
    FakeNotebook([]).answer({"id": 0, "op": "hello", "protocol": 1})


class InProcessComm:
    """What `comm.create_comm` gives, with a FakeNotebook answering from a thread (or not at all)."""

    def __init__(self, notebook: FakeNotebook | None, *, silent: bool = False, close_on: str | None = None) -> None:
        self.notebook = notebook
        self.silent = silent
        self.close_on = close_on
        self._on_msg: Callable | None = None
        self._on_close: Callable | None = None
        self.closed = False
        warm_up()

    def opener(self, target: str, data: dict[str, Any]) -> "InProcessComm":
        assert target == "nbagent.notebook" and data == {"protocol": 1}
        return self

    def on_msg(self, fn: Callable) -> None:
        self._on_msg = fn

    def on_close(self, fn: Callable) -> None:
        self._on_close = fn

    def send(self, data: dict[str, Any]) -> None:
        self._later(data)

    def close(self) -> None:
        self.closed = True

    def _later(self, data: dict[str, Any]) -> None:
        if self.silent or self.notebook is None:
            return

        def answer() -> None:
            time.sleep(0.01)
            if self.close_on is not None and data.get("op") == self.close_on:
                if self._on_close:
                    self._on_close({"content": {"comm_id": "x", "data": {}}})
                return
            reply = self.notebook.answer(data)
            if self._on_msg:
                self._on_msg({"content": {"comm_id": "x", "data": reply}})

        threading.Thread(target=answer, daemon=True).start()


class KernelFrontend:
    """Plays the frontend against a real kernel (a `KernelSession`): answers the comm with a FakeNotebook."""

    def __init__(self, session: Any, notebook: FakeNotebook, *, close_on: str | None = None) -> None:
        self.session = session
        self.notebook = notebook
        self.close_on = close_on
        # a connection of its own, as a page has: a zmq socket is not to be used from two threads at once, and
        # the test's thread waits on the session's shell socket while this one answers. Its own Session too: a
        # shell socket's identity is its session's id, and the kernel sends each reply to the socket of that
        # identity which connected last (sharing it, the test's execute replies would come here)
        km = session.km
        self.client = km.client(session=Session(key=km.session.key, signature_scheme=km.session.signature_scheme,
                                                username=km.session.username))
        self.client.start_channels(shell=True, iopub=False, stdin=False, hb=False, control=False)
        warm_up()
        self.comm_id: str | None = None
        self.closed = False
        self._seen = len(session.iopub)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="fake-frontend", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.is_set():
            with self.session._lock:
                new = self.session.iopub[self._seen:]
                self._seen += len(new)
            for msg in new:
                self._handle(msg)
            time.sleep(0.01)

    def _handle(self, msg: dict[str, Any]) -> None:
        content = msg["content"]
        if msg["msg_type"] == "comm_open" and content.get("target_name") == "nbagent.notebook":
            self.comm_id = content["comm_id"]
            self.closed = False
            if self.close_on == "open":  # what JupyterLab does for a target nobody registered
                self.close()
        elif msg["msg_type"] == "comm_msg" and content.get("comm_id") == self.comm_id and not self.closed:
            self._answer(content["data"])

    def _answer(self, data: dict[str, Any]) -> None:
        if self.close_on is not None and data.get("op") == self.close_on:
            self.close()
            return
        reply = self.notebook.answer(data)
        self.client.shell_channel.send(self.client.session.msg("comm_msg", {"comm_id": self.comm_id, "data": reply}))

    def close(self) -> None:
        """What JupyterLab sends when the notebook is closed: comm_close."""
        self.closed = True
        msg = self.client.session.msg("comm_close", {"comm_id": self.comm_id, "data": {}})
        self.client.shell_channel.send(msg)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self.client.stop_channels()
