"""ToolContext: typed extensions, constraints, cancellation."""

from __future__ import annotations

import threading

import pytest

from nbagent import Agent, CancellationToken, ScriptedModel, ToolContext, tool
from tests.helpers import call, calls


class Database:
    def __init__(self, rows):
        self.rows = rows


class SpecialDatabase(Database):
    pass


def test_extensions_by_type_constraints_and_cwd(tmp_path):
    seen = {}

    @tool(read_only=True)
    def query(sql: str, ctx: ToolContext) -> int:
        db = ctx.get(Database)
        seen.update(cwd=ctx.cwd, mode=ctx.constraints.mode, cap=ctx.constraints.capability_mode,
                    workspace=ctx.constraints.workspace, missing=ctx.get(int, None), call_id=ctx.call_id)
        return len(db.rows)

    agent = Agent(model=ScriptedModel([calls(call("query", sql="select")), "ok"]), tools=[query],
                  extensions=[SpecialDatabase([1, 2, 3])], workspace=tmp_path, mode="acceptEdits",
                  capability_mode="read-only")
    run = agent.run_sync("x")
    assert run.calls[0].result.text == "3"
    assert seen["cwd"] == tmp_path and seen["workspace"] == tmp_path
    assert seen["mode"] == "acceptEdits" and seen["cap"] == "read-only" and seen["missing"] is None
    assert seen["call_id"] == run.calls[0].id


def test_get_without_an_extension_says_what_is_there():
    ctx = ToolContext("c", extensions={Database: Database([])})
    with pytest.raises(LookupError, match=r"no str extension .*registered: Database"):
        ctx.get(str)


def test_cancellation_tokens_chain_and_wake_waiters():
    parent = CancellationToken()
    child = CancellationToken(parent=parent)
    woke = []
    t = threading.Thread(target=lambda: woke.append(child.wait(5)))
    t.start()
    parent.cancel("stop")
    t.join(2)
    assert woke == [True] and child.cancelled and child.reason_text == "stop"
    ctx = ToolContext("c", cancellation=child)
    from nbagent import ToolCancelled

    with pytest.raises(ToolCancelled, match="stop"):
        ctx.raise_if_cancelled()


def test_a_context_keeps_the_token_it_is_given_linked_to_its_parent():
    run_token = CancellationToken()
    ctx = ToolContext("c1", "t", cancellation=CancellationToken(parent=run_token))
    assert not ctx.cancelled
    run_token.cancel("stop")
    assert ctx.cancelled and ctx.cancellation.reason_text == "stop"


def test_the_context_measured_when_a_run_ends_counts_the_tool_schemas_it_was_sent():
    from nbagent import Agent, AssistantMessage, ScriptedModel, ToolCall, tool

    @tool
    def lookup(query: str, region: str = "eu", limit: int = 10, verbose: bool = False) -> str:
        """Look a thing up in a very large catalogue of things, with many words in its description so
        that its schema weighs something in the request: regions, limits, verbosity and all the rest."""
        return "found"

    seen = []
    model = ScriptedModel([AssistantMessage(tool_calls=[ToolCall(name="lookup", arguments={"query": "x"})]),
                           lambda messages: seen.append(run_ref[0].context_tokens) or AssistantMessage(text="done")])
    run_ref = []
    agent = Agent(model=model, tools=[lookup])

    async def go():
        run = agent.start("Find x")
        run_ref.append(run)
        return await run

    import asyncio

    run = asyncio.run(go())
    assert run.status == "done"
    assert run.context_tokens >= seen[-1]  # the count does not drop when the run ends (schemas included)
