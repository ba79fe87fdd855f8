"""Processes started by a command are gone when the call ends (setsid, nohup, disown, double fork,
timeouts, Stop), and no network from sandboxed commands."""

from __future__ import annotations

import asyncio
import os
import socket
import threading
import time

import pytest

from nbagent import Agent, toolbox

from tests.toolbox.test_shell_tool import _running

from .conftest import Recorder, run_agent, script, sh, text_of

pytestmark = [pytest.mark.timeout(60), pytest.mark.usefixtures("sandbox_lane")]  # every sandbox lane

LATE = "sleep 1.5; echo late > late.txt"

ESCAPES = {
    "setsid": f"echo s > started.txt; setsid sh -c '{LATE}' >/dev/null 2>&1 </dev/null &",
    "nohup": f"echo s > started.txt; nohup sh -c '{LATE}' >/dev/null 2>&1 </dev/null &",
    "disown": f"echo s > started.txt; sh -c '{LATE}' >/dev/null 2>&1 </dev/null & disown",
    "double_fork": ("echo s > started.txt; python3 -c \"import os,time\n"
                    "if os.fork(): os._exit(0)\nos.setsid()\nif os.fork(): os._exit(0)\n"
                    "os.close(0); os.close(1); os.close(2)\n"
                    "time.sleep(1.5); open('late.txt','w').write('late')\""),
    "setsid_fork_flag": f"echo s > started.txt; setsid -f sh -c '{LATE}' >/dev/null 2>&1 </dev/null",
    "at_exit_trap": f"echo s > started.txt; trap \"setsid sh -c '{LATE}' >/dev/null 2>&1 </dev/null &\" EXIT",
}


@pytest.mark.parametrize("name", sorted(ESCAPES))
def test_background_process_outlives_the_call(ws, name):
    run = run_agent(ws, sh(ESCAPES[name], timeout=10), approver=Recorder(True))
    assert (ws / "started.txt").exists(), text_of(run.calls[0])      # control: the command ran
    time.sleep(2.5)
    assert not (ws / "late.txt").exists()


def test_daemon_pid_is_not_alive_after_the_call(ws):
    marker = f"60.{os.getpid() % 1000:03}{time.time_ns() % 1_000_000:06}"
    cmd = f"setsid sleep {marker} >/dev/null 2>&1 </dev/null & echo started"
    run_agent(ws, sh(cmd, timeout=10), approver=Recorder(True))
    time.sleep(0.5)
    alive = _running(marker)  # by command line: a pid printed inside the sandbox names another process here
    for pid in alive:
        os.kill(pid, 9)
    assert not alive


def test_timeout_kills_background_children(ws):
    cmd = "echo s > started.txt; (sleep 1.5; echo late > late.txt) & sleep 30"
    run = run_agent(ws, sh(cmd, timeout=0.5), approver=Recorder(True))
    assert (ws / "started.txt").exists()
    assert run.calls[0].status in ("timeout", "error", "ok")
    time.sleep(2.5)
    assert not (ws / "late.txt").exists()


async def test_cancel_kills_the_command_and_its_children(ws):
    cmd = "echo s > started.txt; (sleep 1.5; echo late > late.txt) & setsid sh -c 'sleep 1.5; echo x > late2.txt' & sleep 30"
    agent = Agent(model=script(sh(cmd, timeout=60)), tools=toolbox.all(workspace=ws), approver=Recorder(True),
                  workspace=ws)
    run = agent.start("go")
    for _ in range(100):
        if (ws / "started.txt").exists():
            break
        await asyncio.sleep(0.05)
    assert (ws / "started.txt").exists()
    run.cancel()
    t0 = time.monotonic()
    try:
        await asyncio.wait_for(asyncio.shield(asyncio.ensure_future(_wait(run))), 5)
    except asyncio.TimeoutError:
        pytest.fail("the run did not end within 5 s of cancel()")
    assert time.monotonic() - t0 < 5
    await asyncio.sleep(2.5)
    assert not (ws / "late.txt").exists()
    assert not (ws / "late2.txt").exists()


async def _wait(run):
    try:
        await run
    except BaseException:
        pass


class _Listener:
    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(5)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.connections = 0
        self._stop = False
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.thread.start()

    def _loop(self):
        while not self._stop:
            try:
                conn, _ = self.sock.accept()
                self.connections += 1
                conn.close()
            except OSError:
                pass

    def close(self):
        self._stop = True
        self.thread.join(2)
        self.sock.close()


def test_approved_command_has_no_network(ws):
    listener = _Listener()
    try:
        cmd = (f"echo s > started.txt; python3 -c \"import socket; socket.create_connection(('127.0.0.1', {listener.port}), 2)\"; "
               f"bash -c 'echo x > /dev/tcp/127.0.0.1/{listener.port}'; true")
        run_agent(ws, sh(cmd, timeout=10), approver=Recorder(True))
        time.sleep(0.3)
        assert (ws / "started.txt").exists()
        assert listener.connections == 0
    finally:
        listener.close()


def test_sandbox_read_only_blocks_approved_writes(ws):
    agent = Agent(model=script([sh("touch made.txt"), sh("cat notes.md")]), tools=toolbox.all(workspace=ws),
                  approver=Recorder(True), workspace=ws, sandbox="read-only")
    run = agent.run_sync("go")
    assert "hello notes" in text_of(run.calls[1])
    assert not (ws / "made.txt").exists()


def test_sandbox_workspace_write_option_confines_approved_writes(ws, outside):
    agent = Agent(model=script([sh("touch ../outside/planted.txt"), sh("touch inside.txt")]),
                  tools=toolbox.all(workspace=ws), approver=Recorder(True), workspace=ws, sandbox="workspace-write")
    agent.run_sync("go")
    assert (ws / "inside.txt").exists()
    assert not (outside / "planted.txt").exists()
