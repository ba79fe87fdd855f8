"""Secrets never reach the model or the transcript through a tool result, and every result, the ones the
runtime writes itself included, passes the `tool_result_persist` hooks."""

from __future__ import annotations

import asyncio

import pytest

from nbagent import Agent, Block, Hooks, ScriptedModel, ToolResult, tool
from tests.helpers import assert_valid, call, calls, raw

KEY = "sk-proj-" + "A1b2C3d4E5f6G7h8I9j0" * 2


@pytest.fixture(autouse=True)
def key_in_environment(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)


class Holder:
    def __init__(self, secret: str) -> None:
        self.secret = secret

    def __repr__(self) -> str:
        return f"Holder(secret={self.secret!r})"


@tool(read_only=True)
def show_env() -> str:
    """Like `env` in a shell."""
    return f"HOME=/root\nOPENAI_API_KEY={KEY}\n"


@tool(read_only=True)
def inspect_variable(name: str) -> Holder:
    """A notebook variable holding a key (its repr is what the model would see)."""
    return Holder(KEY)


@tool(read_only=True)
def fail() -> str:
    """Raises with the key in its message."""
    raise RuntimeError(f"could not connect with key {KEY}")


def test_tool_results_and_runtime_errors_are_redacted_before_the_model_and_the_transcript():
    seen_by_model: list[str] = []

    def model_turn(messages):
        seen_by_model.extend(m.text for m in messages if getattr(m, "kind", "") == "tool_result")
        return "done"

    agent = Agent(model=ScriptedModel([
        calls(call("show_env"), call("inspect_variable", name="h"), call("fail"), call(f"tool_{KEY}")),
        model_turn]), tools=[show_env, inspect_variable, fail])
    run = agent.run_sync("x")
    assert_valid(run)
    assert len(seen_by_model) == 4
    for text in seen_by_model:
        assert KEY not in text, text
    assert "[REDACTED:OPENAI_API_KEY]" in seen_by_model[0]
    for rec in run.calls:
        assert KEY not in rec.result.text and KEY not in rec.message.text
        assert KEY not in str(rec.wire["content"])  # (the name is the model's own, as it sent it)
    assert [c.status for c in run.calls] == ["ok", "ok", "error", "not_found"]
    # the live object stays as it is
    assert run.calls[1].details.secret == KEY


def test_persist_hooks_see_every_result_the_runtime_writes_itself():
    seen: dict[str, str] = {}

    def persist(call, result):
        seen[call.id] = result.text
        return ToolResult(result.text.upper(), details=result.details, is_error=result.is_error)

    @tool
    def guarded(path: str) -> str:
        """Not read-only: asks."""
        return "ran"

    @tool(read_only=True, timeout=0.05)
    async def slow() -> str:
        """Times out."""
        await asyncio.sleep(5)
        return "never"

    @tool(read_only=True)
    def blocked() -> str:
        """Blocked by a hook."""
        return "never"

    hooks = Hooks(before_tool_call=[lambda call, ctx: Block("not today") if call.name == "blocked" else None],
                  tool_result_persist=[persist])
    agent = Agent(model=ScriptedModel([
        calls(call("nowhere"), raw("guarded", '{"path": 3'), call("guarded", path="x"), call("blocked"),
              call("slow")), "done"]), tools=[guarded, slow, blocked], hooks=hooks, approver="deny")
    run = agent.run_sync("x")
    assert_valid(run)
    assert [c.status for c in run.calls] == ["not_found", "invalid_arguments", "denied", "blocked", "timeout"]
    for rec in run.calls:
        assert rec.id in seen, rec.status
        assert rec.result.text == seen[rec.id].upper() and rec.message.text == rec.result.text


async def test_persist_hooks_see_cancelled_results():
    seen: list[str] = []
    started = asyncio.Event()

    @tool(read_only=True)
    async def wait_long() -> str:
        """Waits."""
        started.set()
        await asyncio.sleep(30)
        return "never"

    agent = Agent(model=ScriptedModel([calls(call("wait_long")), "never"]), tools=[wait_long],
                  hooks=Hooks(tool_result_persist=[lambda call, result: seen.append(result.text)]))
    run = agent.start("x")
    await asyncio.wait_for(started.wait(), 5)
    run.cancel()
    await run
    assert run.calls[0].status == "cancelled" and seen and "cancelled" in seen[0]
    assert_valid(run)
