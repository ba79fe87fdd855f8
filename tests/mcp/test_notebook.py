"""`%config NBAgent.mcp_servers`, the workspace's `.mcp.json`, `%agent --mcp NAME,...` and `--mcp-list`."""

from __future__ import annotations

import asyncio
import json

import pytest

from IPython.core.error import UsageError

import nbagent.mcp
from nbagent import ScriptedModel
from nbagent.mcp import _connection
from nbagent.jupyter import get_session
from tests.helpers import call, calls
from tests.jupyter.conftest import _ipython, finish, run_cell, shell  # noqa: F401 (fixtures)

from .conftest import misbehaving, time_server


@pytest.fixture(autouse=True)
async def _stop_servers_on_this_loop():
    """%agent makes the kernel's loop (here: the test's) the home of its servers: stop them before it closes."""
    yield
    here = asyncio.get_running_loop()
    await asyncio.gather(*(c.stop() for c in _connection.connections() if c.loop is here))
    nbagent.mcp.use_loop(None)


def _model():
    return ScriptedModel([calls(call("time__get_current_time", timezone="UTC")), "done"])


async def test_servers_from_config_and_the_workspace_file(shell, tmp_path):
    (tmp_path / ".mcp.json").write_text(json.dumps({"mcpServers": {"other": misbehaving("plain")}}))
    shell.user_ns["servers"] = {"time": time_server(trusted=True)}
    await run_cell(shell, "%config NBAgent.mcp_servers = servers")
    shell.user_ns["model"] = _model()
    await run_cell(shell, "%config NBAgent.toolbox = False")
    await run_cell(shell, "run = %agent --model model --mcp time What time is it?")
    run = await finish(shell.user_ns["run"])
    assert run.calls[0].status == "ok" and run.calls[0].decision.source == "read_only"
    assert run.requests[0].tools == ("time__convert_time", "time__get_current_time")  # only --mcp time

    # the workspace's file is not trusted yet: its server does not start, the run goes on without it
    shell.user_ns["model"] = ScriptedModel(["done"])
    await run_cell(shell, "run = %agent --model model --new Hello")
    run = await finish(shell.user_ns["run"])
    assert set(run.requests[0].tools) == {"time__convert_time", "time__get_current_time"}
    assert not any(c.name == "other" and c.state != "idle" for c in _connection.connections())
    prompts = get_session(shell).agents.consent_prompts
    assert len(prompts) == 1 and "misbehaving.py" in prompts[0].text.value and "not trusted yet" in prompts[0].text.value
    result = await run_cell(shell, "listing = %agent --mcp-list")
    assert "other: not trusted yet, not started" in str(shell.user_ns["listing"])
    assert len(get_session(shell).agents.consent_prompts) == 1  # asked once per content a session

    prompts[0].trust_button.click()  # as a person's click: handed to the loop, recorded there
    await asyncio.sleep(0)
    assert prompts[0].decision is True and "Trusted" in prompts[0].text.value
    shell.user_ns["model"] = ScriptedModel(["done"])
    await run_cell(shell, "run = %agent --model model --new Hello")
    run = await finish(shell.user_ns["run"])
    assert set(run.requests[0].tools) == {"time__convert_time", "time__get_current_time", "other__log_then_answer"}

    result = await run_cell(shell, "listing = %agent --mcp-list")
    assert result.error_in_exec is None
    text = str(shell.user_ns["listing"])
    assert "time: ready, trusted" in text and "time__get_current_time" in text and "other: ready" in text


async def test_mistakes_are_usage_errors(shell, caplog):
    await run_cell(shell, "%config NBAgent.mcp_servers = {'bad': {'args': []}}")
    assert "server 'bad': give either \"command\"" in caplog.text  # %config reports it; the setting is unchanged
    assert get_session(shell).config.mcp_servers == {}
    shell.user_ns["model"] = ScriptedModel(["done"])
    result = await run_cell(shell, "%agent --model model --mcp nowhere Hi")
    assert isinstance(result.error_in_exec, UsageError) and "no MCP server named 'nowhere'" in str(result.error_in_exec)
    result = await run_cell(shell, "listing = %agent --mcp-list")
    assert "No MCP servers are configured" in str(shell.user_ns["listing"])
