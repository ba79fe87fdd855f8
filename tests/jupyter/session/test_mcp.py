"""The README's MCP example in a kernel set up as `./dev lab` starts it: the virtualenv's `bin` is not on the
kernel's PATH, yet `"command": "mcp-server-time"` is found (this Python's own scripts are looked in);
`%agent --mcp-list` starts the servers and says each one's state and why; a call to a server that does not
start fails at once, saying where the command was looked for, without asking anyone to approve it.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from ..kernelclient import KernelSession

pytestmark = pytest.mark.kernel

SCRIPTS = os.path.dirname(sys.executable)


@pytest.mark.skipif(not os.path.exists(os.path.join(SCRIPTS, "mcp-server-time")),
                    reason="mcp-server-time is not installed next to this Python (pip install -e .[test])")
def test_the_readme_mcp_example_works_without_the_virtualenv_on_path(tmp_path: Path) -> None:
    path = os.pathsep.join(p for p in os.environ.get("PATH", "").split(os.pathsep) if p and p != SCRIPTS)
    k = KernelSession(tmp_path, PATH=path or "/usr/bin:/bin")
    try:
        assert SCRIPTS not in k.value("__import__('os').environ['PATH'].split(':')")
        k.execute("%load_ext nbagent")
        k.execute("%config NBAgent.mcp_servers = {'time': {'command': 'mcp-server-time', "
                  "'args': ['--local-timezone', 'UTC']}, 'nope': {'command': 'nbagent-no-such-server'}}")
        listing = k.execute("%agent --mcp-list")
        text = listing["data"][0]["text/plain"]
        assert "time: ready, 2 tools" in text and "get_current_time" in text, text
        assert "nope: failed to start (why below)" in text and "was not found: looked in" in text, text
        assert SCRIPTS in text  # says where it looked

        k.execute(
            "from nbagent import AssistantMessage, ScriptedModel, ToolCall\n"
            "model = ScriptedModel([AssistantMessage(tool_calls=[ToolCall(name='nope__anything', arguments={})]),"
            " AssistantMessage(tool_calls=[ToolCall(name='time__get_current_time', arguments={'timezone': 'UTC'})]),"
            " 'done'])\n")
        # no approval policy: a call that needs consent would wait for a click, and this cell would not end
        k.execute("%config NBAgent.rules = ['allow: time__*']")
        k.execute("run = %agent --model model --wait what time is it?", timeout=90)
        calls = k.value("[(c.status, c.decision is None, c.result.text) for c in run.calls]")
        assert calls[0][0] == "error" and calls[0][1] is True, calls  # failed before anyone was asked
        assert "was not found: looked in" in calls[0][2]
        assert calls[1][0] == "ok" and json.loads(calls[1][2])["timezone"] == "UTC", calls
    finally:
        k.shutdown()
