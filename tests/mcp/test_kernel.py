"""A real kernel: `%agent` calls an MCP server whose connection lives on the kernel's own loop, while the
kernel stays free; `nbagent.mcp.close()` from a cell stops it."""

from __future__ import annotations

import shutil
import sys

import pytest

from tests.jupyter.kernelclient import KernelSession

from .conftest import misbehaving

pytestmark = pytest.mark.kernel


@pytest.fixture
def kernel(tmp_path):
    k = KernelSession(tmp_path)
    k.execute("%load_ext nbagent")
    yield k
    k.shutdown()
    shutil.rmtree(tmp_path, ignore_errors=True)


def test_agent_in_a_kernel_calls_an_mcp_server_on_the_kernels_loop(kernel):
    server = misbehaving("ok")
    kernel.execute(f"""
import asyncio
from nbagent import ScriptedModel
from tests.helpers import call, calls
model = ScriptedModel([calls(call("talk__log_then_answer", text="hi")), "done"])
servers = {{"talk": {{"command": {sys.executable!r}, "args": {server["args"]!r}}}}}
%config NBAgent.mcp_servers = servers
%config NBAgent.toolbox = False
%config NBAgent.approver = "allow"
%config NBAgent.view = "text"
""")
    kernel.execute("run = %agent --model model Talk to the server")
    assert kernel.wait_for("run.done", timeout=60)
    assert kernel.value("run.calls[0].status") == "ok"
    assert kernel.value("run.calls[0].result.text") == "answer: hi"
    assert "[info] working on hi" in kernel.value("run.calls[0].output_tail.text")
    kernel.execute("import nbagent.mcp, nbagent.mcp._connection as connection")
    assert kernel.value("connection.connections()[0].loop is asyncio.get_running_loop()") is True
    kernel.execute("nbagent.mcp.close()")
    assert kernel.wait_for("nbagent.mcp.status()[0]['state'] == 'closed'", timeout=30)
