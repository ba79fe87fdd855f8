"""The runtime's own walls: redaction hooks against cancellation, and the tool allow-list and capability mode
against tools found by name (`tool_resolver`, MCP servers).
"""

from __future__ import annotations

import asyncio
import json
import sys
import textwrap

import pytest

from nbagent import Agent, AssistantMessage, Hooks, ScriptedModel, ToolCall, ToolResult, tool

PASSWORD = "rt3-db-password-Zk81Qw"


@tool(read_only=True)
def read_config() -> str:
    """Read the service configuration."""
    return f"db.internal, as admin; the word is {PASSWORD}"  # a form only a hook knows to redact


def _redacted(result: ToolResult) -> ToolResult:
    return ToolResult(result.text.replace(PASSWORD, "[hidden]"), details=result.details, is_error=result.is_error)


def _calls_then_text(*names: str, rounds: int = 1) -> ScriptedModel:
    msgs = [AssistantMessage(tool_calls=[ToolCall(name=n, arguments={}) for n in names]) for _ in range(rounds)]
    return ScriptedModel(msgs + [AssistantMessage(text="done")])


def _transcript(run) -> str:
    return repr(run.messages) + json.dumps([c.wire for c in run.calls], default=repr) + repr(run.requests)


def test_cancel_while_an_async_redaction_hook_works_keeps_no_secret(tmp_path):
    started = asyncio.Event()

    async def redact(call, result):
        started.set()
        await asyncio.sleep(2)
        return _redacted(result)

    async def main():
        agent = Agent(model=_calls_then_text("read_config"), tools=[read_config],
                      hooks=Hooks(tool_result_persist=[redact]), workspace=tmp_path, session=True)
        run = agent.start("go")
        await asyncio.wait_for(started.wait(), 10)
        run.cancel()
        try:
            await run
        except BaseException:
            pass
        return run

    run = asyncio.run(main())
    stored = "".join(p.read_text() for p in (tmp_path / ".nbagent" / "sessions").glob("*.jsonl"))
    assert PASSWORD not in _transcript(run), "Stop during the redaction hook left the password in the transcript"
    assert PASSWORD not in stored, "Stop during the redaction hook left the password in the stored session"


def test_control_async_redaction_hook_redacts(tmp_path):
    async def redact(call, result):
        await asyncio.sleep(0.01)
        return _redacted(result)

    run = Agent(model=_calls_then_text("read_config"), tools=[read_config],
                hooks=Hooks(tool_result_persist=[redact]), workspace=tmp_path).run_sync("go")
    assert run.calls[0].status == "ok" and "[hidden]" in run.calls[0].result.text
    assert PASSWORD not in _transcript(run)


MARK: list[str] = []


@tool(destructive=True)
def drop_database() -> str:
    """Drop the production database."""
    MARK.append("dropped")
    return "dropped"


@tool(read_only=True)
def add() -> int:
    """Add."""
    return 3


def _resolver(name):
    return drop_database if name == "drop_database" else None


def test_tool_resolver_respects_allowed_tools():
    MARK.clear()
    agent = Agent(model=_calls_then_text("drop_database"), tools=[add], allowed_tools=["add"],
                  tool_resolver=_resolver, mode="bypassPermissions")
    run = agent.run_sync("go")
    assert MARK == [], f"a tool outside allowed_tools ran through tool_resolver ({run.calls[0].status})"


def test_tool_resolver_respects_capability_mode():
    MARK.clear()
    agent = Agent(model=_calls_then_text("drop_database"), tools=[add], capability_mode="read-only",
                  tool_resolver=_resolver, mode="bypassPermissions")
    run = agent.run_sync("go")
    assert MARK == [], f"an execute tool ran in capability_mode=read-only through tool_resolver ({run.calls[0].status})"


def test_allowed_tools_hold_for_a_tool_in_the_list_but_not_offered():
    """Control of the wall itself: a listed tool outside allowed_tools is not run when called by name."""
    MARK.clear()
    run = Agent(model=_calls_then_text("drop_database", "add"), tools=[add, drop_database], allowed_tools=["add"],
                mode="bypassPermissions").run_sync("go")
    assert MARK == [] and run.calls[1].status == "ok"


def test_control_tool_resolver_finds_tools():
    MARK.clear()
    run = Agent(model=_calls_then_text("drop_database"), tools=[add], tool_resolver=_resolver,
                mode="bypassPermissions").run_sync("go")
    assert MARK == ["dropped"] and run.calls[0].status == "ok"


SERVER = textwrap.dedent("""
    import sys
    from pathlib import Path
    from mcp.server.mcpserver import MCPServer
    mark = Path(sys.argv[1])
    app = MCPServer("rt3")

    @app.tool()
    def wipe() -> str:
        "Delete everything."
        mark.write_text("wiped")
        return "wiped"

    app.run()
""")


def test_mcp_tools_respect_allowed_tools(tmp_path):
    pytest.importorskip("mcp.server.mcpserver")
    import nbagent.mcp

    script = tmp_path / "server.py"
    script.write_text(SERVER)
    mark = tmp_path / "WIPED"
    try:
        agent = Agent(model=_calls_then_text("rt3__wipe"), tools=[add], allowed_tools=["add"], mode="bypassPermissions",
                      mcp_servers={"rt3": {"command": sys.executable, "args": [str(script), str(mark)]}},
                      workspace=tmp_path)
        run = agent.run_sync("go")
    finally:
        nbagent.mcp.close()
    assert not mark.exists(), f"an MCP tool outside allowed_tools ran ({run.calls[0].status})"
