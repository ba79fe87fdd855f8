"""Running a cell's code in this kernel as a frontend does, with no frontend: a client of this very kernel
(its own connection details) sends the execute request and turns what the kernel publishes for it into
nbformat outputs, handed over one by one as they come (so the shared document shows them live).

The kernel handles the request as any cell: a new execution count, `In` / `Out`, the cell's id in its
metadata, outputs, interrupt. Nothing here decides what runs: the run_cell tool asked for approval of exactly
this code, and the shared document checked the cell still holds it.
"""

from __future__ import annotations

import asyncio
import itertools
from typing import Any, Callable

__all__ = ["KernelClient", "OutputSink"]

OutputSink = Callable[[str, Any], None]
"""Called with ("clear", None), ("output", an nbformat output dict), ("stream", (name, text)),
("update", (display_id, data, metadata)) or ("count", n), in the order the kernel published them."""


class KernelClient:
    """One client of this kernel, kept for the life of the shared document (made on the document's loop)."""

    def __init__(self, connection_info: dict[str, Any]) -> None:
        self.info = connection_info
        self._client: Any = None
        self._listeners: dict[str, Callable[[dict[str, Any]], None]] = {}
        self._reader: asyncio.Task | None = None
        self._ready = False
        self._ids = itertools.count(1)

    async def start(self, timeout: float = 20.0) -> None:
        if self._ready:
            return
        from jupyter_client.asynchronous import AsyncKernelClient

        client = AsyncKernelClient()
        client.load_connection_info(self.info)
        client.start_channels(shell=True, iopub=True, stdin=False, hb=False, control=False)
        self._client = client
        self._reader = asyncio.ensure_future(self._read_iopub())
        # the kernel's answer on iopub proves the subscription is live (a subscriber joins late, ZeroMQ drops
        # what was published before): ask until one comes
        deadline = asyncio.get_running_loop().time() + timeout
        while True:
            seen = asyncio.get_running_loop().create_future()
            msg_id = client.kernel_info()
            self._listeners[msg_id] = lambda msg, f=seen: f.done() or f.set_result(True)
            try:
                await asyncio.wait_for(seen, 1.0)
                break
            except asyncio.TimeoutError:
                if asyncio.get_running_loop().time() > deadline:
                    raise RuntimeError("this kernel did not answer its own client") from None
            finally:
                self._listeners.pop(msg_id, None)
        self._ready = True

    async def _read_iopub(self) -> None:
        while True:
            msg = await self._client.get_iopub_msg()
            parent = (msg.get("parent_header") or {}).get("msg_id")
            listener = self._listeners.get(parent)
            if listener is not None:
                try:
                    listener(msg)
                except Exception:  # pragma: no cover - a sink's failure must not stop the reader
                    pass

    async def execute(self, code: str, cell_id: str, sink: OutputSink) -> tuple[str, int | None]:
        """Run `code` as cell `cell_id`; return its status ("ok", "error", "aborted") and execution count, once
        the kernel went idle after it."""
        await self.start()
        client = self._client
        msg = client.session.msg("execute_request", {
            "code": code, "silent": False, "store_history": True, "user_expressions": {}, "allow_stdin": False,
            "stop_on_error": True})
        msg["metadata"]["cellId"] = cell_id
        msg_id = msg["header"]["msg_id"]
        idle = asyncio.get_running_loop().create_future()
        count: list[int | None] = [None]

        def on_msg(m: dict[str, Any]) -> None:
            kind, content = m.get("msg_type"), m.get("content") or {}
            if kind == "status" and content.get("execution_state") == "idle":
                if not idle.done():
                    idle.set_result(True)
            elif kind == "execute_input":
                count[0] = content.get("execution_count")
                sink("count", count[0])
            elif kind == "stream":
                sink("stream", (content.get("name", "stdout"), content.get("text", "")))
            elif kind in ("display_data", "execute_result", "error"):
                out = {"output_type": kind, **{k: v for k, v in content.items() if k != "transient"}}
                display_id = (content.get("transient") or {}).get("display_id")
                sink("output", (out, display_id))
            elif kind == "update_display_data":
                display_id = (content.get("transient") or {}).get("display_id")
                if display_id:
                    sink("update", (display_id, content.get("data") or {}, content.get("metadata") or {}))
            elif kind == "clear_output":
                sink("clear", bool(content.get("wait")))

        self._listeners[msg_id] = on_msg
        try:
            client.shell_channel.send(msg)
            reply = None
            while reply is None:
                answer = await client.get_shell_msg()
                if (answer.get("parent_header") or {}).get("msg_id") == msg_id:
                    reply = answer
            await asyncio.wait_for(idle, 30.0)  # the outputs published before the kernel went idle
        finally:
            self._listeners.pop(msg_id, None)
        content = reply.get("content") or {}
        return str(content.get("status", "ok")), content.get("execution_count", count[0])

    def stop(self) -> None:
        if self._reader is not None:
            self._reader.cancel()
        if self._client is not None:
            try:
                self._client.stop_channels()
            except Exception:  # pragma: no cover
                pass
        self._ready = False
