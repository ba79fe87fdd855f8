"""What a call knows of its run, agent and session; agent-wide sequential batches; tools found by the
resolver (filtered like every other tool, offered in later requests); a persist hook cut off by a cancel."""

from __future__ import annotations

import asyncio
import threading

from nbagent import Agent, Hooks, ScriptedModel, ToolResult, tool
from tests.helpers import assert_valid, call, calls


@tool(read_only=True)
def look(q: str) -> str:
    return "seen " + q


def test_before_hook_knows_agent_session_and_run(tmp_path):
    seen = []

    def before(rec, ctx):
        seen.append((ctx.agent_name, ctx.session_id, ctx.run_id, ctx.call_id))

    agent = Agent(model=ScriptedModel([calls(call("look", q="a")), "done"]), tools=[look], name="analyst",
                  hooks=Hooks(before_tool_call=before), workspace=tmp_path, session=True)
    run = agent.run_sync("x")
    assert seen == [("analyst", agent.session_id, run.id, run.calls[0].id)]
    assert agent.session_id is not None


def test_a_call_sees_its_run_agent_and_no_session():
    got = {}

    @tool(read_only=True)
    def whoami(ctx) -> str:
        got.update(agent=ctx.agent_name, session=ctx.session_id, run=ctx.run_id)
        return "ok"

    run = Agent(model=ScriptedModel([calls(call("whoami")), "done"]), tools=[whoami], name="a2").run_sync("x")
    assert got == {"agent": "a2", "session": None, "run": run.id}


def _overlap_probe():
    """Two tools that record how many calls run at once."""
    lock = threading.Lock()
    state = {"now": 0, "most": 0}
    gate = threading.Event()

    def make(name):
        @tool(name=name, read_only=True)
        def probe() -> str:
            with lock:
                state["now"] += 1
                state["most"] = max(state["most"], state["now"])
            gate.wait(0.3)  # a parallel partner would arrive meanwhile and open it
            gate.set()
            with lock:
                state["now"] -= 1
            return name
        return probe

    return make("p1"), make("p2"), state


def test_agent_wide_sequential_runs_every_batch_in_order():
    p1, p2, state = _overlap_probe()
    script = [calls(call("p1"), call("p2")), "done"]
    run = Agent(model=ScriptedModel(list(script)), tools=[p1, p2], execution_mode="sequential").run_sync("x")
    assert state["most"] == 1
    assert [c.result.text for c in run.calls] == ["p1", "p2"]
    p1, p2, state = _overlap_probe()
    Agent(model=ScriptedModel(list(script)), tools=[p1, p2]).run_sync("x")
    assert state["most"] == 2  # without the setting the same batch overlaps


def test_execution_mode_is_checked():
    import pytest

    from nbagent import ConfigurationError

    with pytest.raises(ConfigurationError, match="execution_mode"):
        Agent(model=ScriptedModel([]), execution_mode="serial")


@tool
def shell_like(command: str) -> str:
    """Run something."""
    return "ran " + command


@tool(read_only=True)
def late(q: str) -> str:
    """A tool found late."""
    return "late " + q


def test_resolved_tools_are_offered_in_later_requests():
    model = ScriptedModel([calls(call("late", q="1")), calls(call("late", q="2")), "done"])
    run = Agent(model=model, tools=[look], tool_resolver=lambda n: late if n == "late" else None).run_sync("x")
    assert [c.result.text for c in run.calls] == ["late 1", "late 2"]
    assert "late" not in run.requests[0].tools
    assert "late" in run.requests[1].tools and "late" in run.requests[2].tools
    assert_valid(run)


def test_resolved_tools_honour_capability_mode():
    model = ScriptedModel([calls(call("shell_like", command="rm x")), "done"])
    run = Agent(model=model, tools=[look], capability_mode="read-only",
                tool_resolver=lambda n: shell_like if n == "shell_like" else None).run_sync("x")
    rec = run.calls[0]
    assert rec.status == "not_found" and "capability mode" in rec.result.text
    assert all("shell_like" not in r.tools for r in run.requests)


def test_resolved_tools_honour_allowed_tools():
    model = ScriptedModel([calls(call("late", q="1")), "done"])
    run = Agent(model=model, tools=[look], allowed_tools=["look"],
                tool_resolver=lambda n: late if n == "late" else None).run_sync("x")
    rec = run.calls[0]
    assert rec.status == "not_found" and "allowed_tools" in rec.result.text
    assert rec.result.text.count("late 1") == 0


async def test_cancel_during_an_async_persist_hook_keeps_no_unredacted_result():
    started = asyncio.Event()

    @tool(read_only=True)
    def secret() -> str:
        return "the launch code is 7419"

    async def redact(rec, result):
        started.set()
        await asyncio.sleep(30)
        return ToolResult(result.text.replace("7419", "****"))

    agent = Agent(model=ScriptedModel([calls(call("secret")), "done"]), tools=[secret],
                  hooks=Hooks(tool_result_persist=redact))
    run = agent.start("x")
    await asyncio.wait_for(started.wait(), 10)
    run.cancel()
    await asyncio.wait_for(asyncio.shield(run._task), 10)
    assert run.status == "cancelled"
    rec = run.calls[0]
    everything = repr(rec.result) + repr(run.messages) + repr(rec.result.details)
    assert "7419" not in everything
    assert "withheld" in rec.result.text
    assert_valid(run)
