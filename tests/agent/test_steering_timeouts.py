"""Steering a running run, run and session timeouts, and the "still waiting for your approval" notice."""

from __future__ import annotations

import asyncio

import pytest

from nbagent import Agent, ConfigurationError, ScriptedModel, UserMessage, tool
from nbagent.events import ApprovalStillWaiting, Steered
from tests.helpers import assert_valid, call, calls
from tests.wire_rules import problems

PROVIDERS = ("anthropic", "openai", "openai-responses", "google", "mistral")


def wire_problems(run) -> dict[str, list[str]]:
    from nbagent import load_model

    out = {}
    for spec in PROVIDERS:
        model = load_model(f"{spec}:some-model", api_key="sk-test-0123456789abcdef0123")
        out[spec] = problems(spec, model.to_wire(run.messages), run.messages)
    return {k: v for k, v in out.items() if v}


async def test_a_steering_message_joins_at_the_next_turn_boundary():
    gate = asyncio.Event()
    entered = asyncio.Event()

    @tool(read_only=True)
    async def slow(q: str) -> str:
        entered.set()
        await gate.wait()
        return "slow " + q

    seen = []

    def second(messages):
        seen.append([type(m).__name__ for m in messages])
        return "ok, in French then"

    model = ScriptedModel([calls(call("slow", q="a")), second])
    run = Agent(model=model, tools=[slow]).start("summarise")
    await asyncio.wait_for(entered.wait(), 10)
    assert run.steer("answer in French, please")
    assert run.steering and run.steering[0].text == "answer in French, please"
    gate.set()
    await asyncio.wait_for(run.wait(), 10)
    # prompt, the call, its result, then the steering message, then the answer
    assert seen == [["UserMessage", "AssistantMessage", "ToolResultMessage", "UserMessage"]]
    assert run.messages[3].text == "answer in French, please"
    assert [e.text for e in run.events if isinstance(e, Steered)] == ["answer in French, please"]
    assert run.output == "ok, in French then" and run.steering == []
    assert_valid(run)
    assert wire_problems(run) == {}


async def test_steering_while_the_model_answers_keeps_the_run_going():
    run_box = {}

    def first(messages):
        run_box["run"].steer("one more thing: add a title")
        return "a draft"

    model = ScriptedModel([first, "Title\n\na draft"])
    run = Agent(model=model).start("write")
    run_box["run"] = run
    await asyncio.wait_for(run.wait(), 10)
    assert [m.text for m in run.messages] == ["write", "a draft", "one more thing: add a title", "Title\n\na draft"]
    assert run.output == "Title\n\na draft"
    assert wire_problems(run) == {}


def test_steering_a_finished_run_says_so():
    run = Agent(model=ScriptedModel(["done"])).run_sync("x")
    assert run.steer("too late") is False


async def test_a_blank_steering_message_is_refused():
    gate = asyncio.Event()

    async def wait(messages):
        await gate.wait()
        return "x"

    run = Agent(model=ScriptedModel([wait])).start("x")
    with pytest.raises(ValueError, match="some text"):
        run.steer("   ")
    gate.set()
    await run
    assert [m.text for m in run.messages] == ["x", "x"]


async def test_a_run_timeout_cancels_the_run_with_a_clear_reason():
    @tool(read_only=True)
    async def forever() -> str:
        await asyncio.sleep(3600)
        return "never"

    agent = Agent(model=ScriptedModel([calls(call("forever")), "done"]), tools=[forever], timeout=0.5)
    run = agent.start("x")
    await asyncio.wait_for(asyncio.shield(run._task), 30)
    assert run.status == "cancelled"
    assert run.stop_reason.startswith("timeout:") and "timeout=0.5 s" in run.stop_reason
    assert run.calls[0].status == "cancelled" and "timeout" in run.calls[0].result.text
    assert_valid(run)
    assert wire_problems(run) == {}


async def test_a_session_timeout_counts_every_run_of_the_agent():
    never = asyncio.Event()

    async def stuck(messages):
        await never.wait()
        return "never"

    agent = Agent(model=ScriptedModel(["quick", stuck, stuck]), session_timeout=1.5)
    first = await agent.run("one")
    assert first.status == "done"
    second = agent.start("two")  # what is left of the 1.5 s, then cancelled
    await asyncio.wait_for(asyncio.shield(second._task), 30)
    assert second.status == "cancelled" and "session_timeout=1.5 s" in second.stop_reason
    assert agent.session_elapsed >= 1.5
    third = agent.start("three")
    await asyncio.wait_for(asyncio.shield(third._task), 30)
    assert third.status == "cancelled" and third.turns <= 1
    assert_valid(third)


def test_timeouts_are_checked():
    for bad in (dict(timeout=0), dict(session_timeout=-1), dict(approval_notice_after="soon")):
        with pytest.raises(ConfigurationError):
            Agent(model=ScriptedModel([]), **bad)


async def test_still_waiting_for_approval_notice():
    decided = asyncio.Event()

    @tool
    def deploy() -> str:
        return "deployed"

    async def approver(request):
        await decided.wait()
        return True

    notices: list[ApprovalStillWaiting] = []
    agent = Agent(model=ScriptedModel([calls(call("deploy")), "done"]), tools=[deploy], approver=approver,
                  approval_notice_after=0.05)
    run = agent.start("x", on_event=lambda e: notices.append(e) if isinstance(e, ApprovalStillWaiting) else None)
    while len(notices) < 2:
        await asyncio.sleep(0.02)
    decided.set()
    await asyncio.wait_for(run.wait(), 10)
    assert run.calls[0].status == "ok"
    assert notices[0].call is run.calls[0] and notices[1].waited > notices[0].waited
    assert run.calls[0].approval_waited == notices[-1].waited
    count = len(notices)
    await asyncio.sleep(0.3)
    assert len(notices) == count  # no notice once decided


async def test_no_notice_without_a_wait():
    @tool
    def deploy() -> str:
        return "deployed"

    agent = Agent(model=ScriptedModel([calls(call("deploy")), "done"]), tools=[deploy], approver="allow",
                  approval_notice_after=0.01)
    run = await agent.run("x")
    await asyncio.sleep(0.1)
    assert not [e for e in run.events if isinstance(e, ApprovalStillWaiting)]
