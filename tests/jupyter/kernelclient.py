"""A real IPython kernel for tests, driven through jupyter_client the way a frontend drives it.

`KernelSession` starts a kernel (this checkout first on its path, a private IPYTHONDIR, no API keys), records
every IOPub message on a thread, runs code and returns its outputs, and sends the messages a person's click
sends (`comm_msg` with `{"method": "custom", "content": {"event": "click"}}`), on the main shell or on a
subshell. Every wait has a timeout.
"""

from __future__ import annotations

import json
import os
import queue
import threading
import time
from pathlib import Path
from typing import Any

from jupyter_client import KernelManager

ROOT = Path(__file__).resolve().parents[2]


def kernel_env(workdir: Path, **extra: str) -> dict[str, str]:
    """The environment of a test kernel: this checkout importable, no provider keys or endpoints, no
    approval policy, its own IPYTHONDIR."""
    env = {k: v for k, v in os.environ.items()
           if not k.endswith(("_API_KEY", "_BASE_URL")) and k != "NBAGENT_APPROVAL"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env["IPYTHONDIR"] = str(workdir / ".ipython")
    env["PYDEVD_DISABLE_FILE_VALIDATION"] = "1"
    env.update(extra)
    return env


class KernelError(AssertionError):
    """Code run in the kernel raised, or the kernel did not answer in time."""


class KernelSession:
    def __init__(self, workdir: Path, **env: str) -> None:
        self.km: KernelManager | None = KernelManager(kernel_name="python3")
        self.km.start_kernel(cwd=str(workdir), env=kernel_env(workdir, **env))
        self._connect(self.km.client())

    @classmethod
    def attach(cls, connection_file: str) -> KernelSession:
        """A client of a kernel someone else started (a Jupyter server, say): `shutdown` leaves it running."""
        from jupyter_client import BlockingKernelClient

        self = cls.__new__(cls)
        self.km = None
        client = BlockingKernelClient(connection_file=connection_file)
        client.load_connection_file()
        client.start_channels(hb=False)  # `wait_for_ready` would take a heartbeat not yet heard for a dead kernel
        deadline = time.monotonic() + 60
        while True:
            client.kernel_info()
            try:
                if client.get_shell_msg(timeout=1)["msg_type"] == "kernel_info_reply":  # to this ask or an earlier
                    client.get_iopub_msg(timeout=1)  # IOPub is connected too
                    break
            except queue.Empty:
                pass
            if time.monotonic() > deadline:
                raise KernelError(f"the kernel of {connection_file} did not answer")
        self._connect(client, started=True)
        return self

    def _connect(self, client: Any, started: bool = False) -> None:
        self.kc = client
        if not started:
            self.kc.start_channels()
            self.kc.wait_for_ready(timeout=60)
        self.iopub: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._reader = threading.Thread(target=self._read_iopub, name="iopub-reader", daemon=True)
        self._reader.start()

    # -- IOPub --------------------------------------------------------------------------------------------
    def _read_iopub(self) -> None:
        while not self._stop.is_set():
            try:
                msg = self.kc.get_iopub_msg(timeout=0.2)
            except queue.Empty:
                continue
            except Exception:  # channels closed at shutdown
                return
            msg["_received"] = time.monotonic()
            with self._lock:
                self.iopub.append(msg)

    def messages(self, msg_type: str | None = None, parent: str | None = None) -> list[dict[str, Any]]:
        with self._lock:
            msgs = list(self.iopub)
        return [m for m in msgs if (msg_type is None or m["msg_type"] == msg_type)
                and (parent is None or m["parent_header"].get("msg_id") == parent)]

    def wait_iopub(self, predicate: Any, *, start: int = 0, timeout: float = 30) -> dict[str, Any]:
        """The first IOPub message from index `start` on for which `predicate(msg)` holds."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                msgs = self.iopub[start:]
            for m in msgs:
                if predicate(m):
                    return m
            time.sleep(0.05)
        raise KernelError(f"no such IOPub message within {timeout} s")

    # -- running code -------------------------------------------------------------------------------------
    def send_execute(self, code: str, subshell_id: str | None = None, cell_id: str | None = None) -> str:
        msg = self.kc.session.msg("execute_request", {
            "code": code, "silent": False, "store_history": True, "user_expressions": {},
            "allow_stdin": False, "stop_on_error": True,
        }, metadata={"cellId": cell_id} if cell_id is not None else None)
        if subshell_id is not None:
            msg["header"]["subshell_id"] = subshell_id
        self.kc.shell_channel.send(msg)
        return msg["header"]["msg_id"]

    def wait_reply(self, msg_id: str, timeout: float = 60) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                reply = self.kc.get_shell_msg(timeout=min(1.0, max(0.05, deadline - time.monotonic())))
            except queue.Empty:
                continue
            if reply["parent_header"].get("msg_id") == msg_id:
                self._wait_idle(msg_id, deadline)
                return reply
        raise KernelError(f"no reply to {msg_id} within {timeout} s")

    def _wait_idle(self, msg_id: str, deadline: float) -> None:
        while time.monotonic() < deadline:
            if any(m["content"].get("execution_state") == "idle" for m in self.messages("status", msg_id)):
                return
            time.sleep(0.02)

    def execute(self, code: str, timeout: float = 60, *, check: bool = True, cell_id: str | None = None) -> dict[str, Any]:
        """Run code like a cell (as the cell `cell_id`, the id JupyterLab sends); return {"reply", "stdout",
        "data" (display and result bundles), "error"}."""
        msg_id = self.send_execute(code, cell_id=cell_id)
        reply = self.wait_reply(msg_id, timeout)
        return self._outputs(msg_id, reply, check)

    def _outputs(self, msg_id: str, reply: dict[str, Any], check: bool) -> dict[str, Any]:
        msgs = self.messages(parent=msg_id)
        stdout = "".join(m["content"]["text"] for m in msgs if m["msg_type"] == "stream")
        data = [m["content"]["data"] for m in msgs if m["msg_type"] in ("display_data", "execute_result")]
        errors = [m["content"] for m in msgs if m["msg_type"] == "error"]
        out = {"reply": reply, "stdout": stdout, "data": data, "error": errors[0] if errors else None}
        if check and reply["content"]["status"] != "ok":
            err = reply["content"]
            raise KernelError(f"{err.get('ename')}: {err.get('evalue')}\n" + "\n".join(err.get("traceback", [])))
        return out

    def value(self, expression: str, timeout: float = 30) -> Any:
        """Evaluate an expression in the kernel; it must be JSON-serialisable."""
        out = self.execute(f"import json as _json; print(_json.dumps({expression}))", timeout)
        return json.loads(out["stdout"].strip().splitlines()[-1])

    def wait_for(self, expression: str, timeout: float = 30, interval: float = 0.1) -> Any:
        """Evaluate `expression` until it is truthy; return its value."""
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            last = self.value(expression)
            if last:
                return last
            time.sleep(interval)
        raise KernelError(f"{expression!r} still {last!r} after {timeout} s")

    # -- what a frontend sends --------------------------------------------------------------------------------
    def comm_msg(self, comm_id: str, data: dict[str, Any], subshell_id: str | None = None) -> None:
        msg = self.kc.session.msg("comm_msg", {"comm_id": comm_id, "data": data})
        if subshell_id is not None:
            msg["header"]["subshell_id"] = subshell_id
        self.kc.shell_channel.send(msg)

    def click(self, comm_id: str, subshell_id: str | None = None) -> None:
        """Exactly what JupyterLab sends when a person clicks a widget button."""
        self.comm_msg(comm_id, {"method": "custom", "content": {"event": "click"}}, subshell_id)

    def type_text(self, comm_id: str, value: str, subshell_id: str | None = None) -> None:
        """What a frontend sends as a person types into a Text widget."""
        self.comm_msg(comm_id, {"method": "update", "state": {"value": value}, "buffer_paths": []}, subshell_id)

    def create_subshell(self, timeout: float = 30) -> str:
        msg = self.kc.session.msg("create_subshell_request", {})
        self.kc.control_channel.send(msg)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                reply = self.kc.control_channel.get_msg(timeout=1.0)
            except queue.Empty:
                continue
            if reply["parent_header"].get("msg_id") == msg["header"]["msg_id"]:
                return reply["content"]["subshell_id"]
        raise KernelError("no create_subshell_reply")

    def interrupt(self) -> None:
        self.km.interrupt_kernel()

    def restart(self, timeout: float = 60) -> None:
        """Restart the kernel and wait for it. The IOPub reader is stopped meanwhile: `wait_for_ready` reads
        IOPub too, and two threads on one zmq socket abort the process (libzmq asserts)."""
        self._stop.set()
        self._reader.join(timeout=5)
        self.km.restart_kernel(now=True)
        self.kc.wait_for_ready(timeout=timeout)
        self._stop = threading.Event()
        self._reader = threading.Thread(target=self._read_iopub, name="iopub-reader", daemon=True)
        self._reader.start()

    def shutdown(self, now: bool = True) -> None:
        """Stop the kernel: killed at once (`now`), or asked to shut down (its exit handlers run)."""
        self._stop.set()
        self._reader.join(timeout=5)  # before the sockets close: no thread may be polling one then
        try:
            self.kc.stop_channels()
        finally:
            if self.km is not None:
                self.km.shutdown_kernel(now=now)
