"""A conversation in real kernels: it keeps its model, tools and settings (also after `--resume`), its
stored sessions follow the notebook through a rename (the id in the notebook's metadata), a bare
`--resume` says what it picked and never takes another notebook's conversation, and runs that failed
before the model answered are not listed as conversations.
"""

from __future__ import annotations

import json
from pathlib import Path

import nbformat
import pytest

from ..kernelclient import KernelSession

pytestmark = pytest.mark.kernel

ECHO = (
    "from nbagent import ScriptedModel, UserMessage\n"
    "echo = ScriptedModel([lambda messages: ' | '.join(m.text for m in messages if isinstance(m, UserMessage))] * 10)\n"
    "def lookup(key: str) -> str:\n"
    "    'Look a key up.'\n"
    "    return key.upper()\n"
)


def _text(reply: dict) -> str:
    return json.dumps(reply.get("stdout", "")) + json.dumps(reply.get("data") or {}) + str(reply.get("error") or "")


def test_a_follow_up_keeps_the_model_tools_and_mode_of_the_conversation_also_after_resume(tmp_path: Path) -> None:
    k = KernelSession(tmp_path, NBAGENT_APPROVAL="allow")
    try:
        k.execute("%load_ext nbagent")
        k.execute(ECHO)
        k.execute("run = %agent --model echo --tools lookup --mode acceptEdits --wait first")
        # no --model, no --tools, no key set: the conversation's own
        follow = k.execute("run = %agent --wait second", check=False)
        assert follow["error"] is None, follow["error"]
        assert k.value("run.output") == "first | second"
        assert k.value("run.model is echo") is True
        assert k.value("'lookup' in [t.name for t in run.agent.tools]") is True
        assert k.value("run.agent.mode") == "acceptEdits"
        compact = k.execute("c = %agent --compact", check=False)  # --compact too
        assert compact["error"] is None, compact["error"]
        k.execute("await c")
        assert k.value("c.model is echo") is True
        # a %agent that names another mode changes it for it and the runs after it
        k.execute("run = %agent --mode default --wait third")
        k.execute("run = %agent --wait fourth")
        assert k.value("run.agent.mode") == "default"
        # a new conversation starts from the settings again
        fresh = k.execute("%agent --new fresh", check=False)
        assert "No model is configured" in _text(fresh)

        k.restart()
        k.execute("%load_ext nbagent")
        k.execute(ECHO)
        resumed = k.execute("run = %agent --resume --wait and now?", check=False)
        assert resumed["error"] is None, resumed["error"]
        assert "--model echo" in _text(resumed)
        assert k.value("run.output").endswith("third | fourth | and now?")
        assert k.value("'lookup' in [t.name for t in run.agent.tools]") is True
        assert k.value("run.agent.mode") == "default"
    finally:
        k.shutdown()


def _notebook(path: Path, notebook_id: str | None) -> None:
    nb = nbformat.v4.new_notebook()
    if notebook_id:
        nb.metadata["nbagent"] = {"id": notebook_id}
    nbformat.write(nb, path)


def test_sessions_follow_a_renamed_notebook_and_a_bare_resume_says_what_it_picked(tmp_path: Path) -> None:
    _notebook(tmp_path / "Untitled.ipynb", "nb-untitled-0001")
    _notebook(tmp_path / "other.ipynb", "nb-other-00000002")
    _notebook(tmp_path / "fresh.ipynb", "nb-fresh-00000003")

    def kernel(name: str) -> KernelSession:
        k = KernelSession(tmp_path, NBAGENT_APPROVAL="allow", JPY_SESSION_NAME=name)
        k.execute("%load_ext nbagent")
        k.execute(ECHO)
        return k

    k = kernel("Untitled.ipynb")
    try:
        for prompt in ("one", "two", "three"):
            k.execute(f"run = %agent --model echo --wait {prompt}")
    finally:
        k.shutdown()
    k = kernel("other.ipynb")  # another notebook's conversation, later
    try:
        k.execute("run = %agent --model echo --wait elsewhere")
        k.execute("broken = ScriptedModel([])")
        failed = k.execute("run = %agent --new --model broken --wait never answered", check=False)
        assert failed["error"] is not None  # the model failed before it answered
        listing = _text(k.execute("%agent --sessions"))
        assert "elsewhere" in listing and "never answered" not in listing  # no empty conversation listed
    finally:
        k.shutdown()

    (tmp_path / "Untitled.ipynb").rename(tmp_path / "analysis.ipynb")
    k = kernel("analysis.ipynb")
    try:
        out = k.execute("%agent --resume")
        said = _text(out)
        assert "the latest conversation of this notebook" in said and "3 runs" in said, said
        listing = _text(k.execute("%agent --sessions"))
        assert "analysis.ipynb (this notebook; then Untitled.ipynb)" in listing  # called as it is now
        k.execute("run = %agent --wait four")
        assert k.value("run.output") == "one | two | three | four"
        listing = _text(k.execute("%agent --sessions"))
        assert "analysis.ipynb (this notebook)" in listing
    finally:
        k.shutdown()

    k = kernel("fresh.ipynb")  # a notebook without conversations: not silently another's
    try:
        out = k.execute("%agent --resume", check=False)
        assert "fresh.ipynb has no stored conversation yet" in _text(out)
        assert "--resume ID" in _text(out)
    finally:
        k.shutdown()


def test_a_resumed_conversation_leaves_out_mcp_servers_no_longer_configured_and_says_so(tmp_path: Path) -> None:
    k = KernelSession(tmp_path, NBAGENT_APPROVAL="allow")
    try:
        k.execute("%load_ext nbagent")
        k.execute(ECHO)
        k.execute('%config NBAgent.mcp_servers = {"time": {"command": "mcp-server-time"}}')
        k.execute("run = %agent --model echo --mcp time --wait first")
        assert k.value("any(t.name == 'mcp' for t in run.agent.tools)") is True
        k.restart()
        k.execute("%load_ext nbagent")
        k.execute(ECHO)  # the MCP configuration is not run again
        resumed = k.execute("run = %agent --resume --wait and now?", check=False)
        assert resumed["error"] is None, resumed["error"]
        assert "MCP server time is not configured in this kernel: left out of this run" in _text(resumed)
        assert k.value("run.output").endswith("first | and now?")
    finally:
        k.shutdown()
