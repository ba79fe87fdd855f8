"""Offline replay of a stored session: the same answers, no network, tools rerun or recorded."""

from __future__ import annotations

from nbagent import render

from pathlib import Path

import pytest

from nbagent import Agent, AssistantMessage, ScriptedModel, ToolCall, load_model, tool
from nbagent.providers.replay import NotRestored, ReplayDivergence, ReplayModel, replay_tools
from nbagent.transcript import check_transcript

state = {"n": 0}


@tool(read_only=True)
def count() -> int:
    """Count up."""
    state["n"] += 1
    return state["n"]


@tool(destructive=True)
def wipe(path: str) -> str:
    """Delete a file."""
    return f"wiped {path}"


def record(tmp_path: Path) -> Agent:
    state["n"] = 0
    model = ScriptedModel([AssistantMessage(text="counting", tool_calls=[ToolCall(name="count", arguments={})]),
                           "counted once", AssistantMessage(tool_calls=[ToolCall(name="wipe", arguments={"path": "x"})]),
                           "wiped"])
    agent = Agent(model=model, tools=[count, wipe], workspace=tmp_path, session=True, approver=lambda r: True)
    agent.run_sync("count")
    agent.run_sync("wipe x")
    return agent


def replay(tmp_path: Path, session_id: str, mode: str, approver=lambda r: True, prompts=("count", "wipe x")):
    model = load_model(f"replay:{session_id}", workspace=tmp_path)
    agent = Agent(model=model, tools=replay_tools([count, wipe], model, mode), workspace=tmp_path, approver=approver)
    runs, history = [], None
    for prompt in prompts:
        run = agent.run_sync(prompt, history=history)
        runs.append(run)
        history = run
    return model, runs


def test_replay_gives_the_same_answers_and_reruns_tools(tmp_path: Path) -> None:
    recorded = record(tmp_path)
    state["n"] = 41  # the world changed since: the rerun result differs
    model, runs = replay(tmp_path, recorded.session_id, "rerun")
    assert [r.output for r in runs] == ["counted once", "wiped"]
    assert runs[0].calls[0].result.details == 42
    assert "differs from the recorded one" in runs[0].calls[0].output_tail.text
    shown = render.call_inner_html(runs[0].calls[0], output=True)  # open, under a label that says so
    assert '<details class="nba-result" open><summary>differs from the recorded result</summary>' in shown
    assert model.requests == 4
    assert check_transcript(runs[-1].messages) == []


def test_recorded_mode_runs_nothing_and_says_what_the_live_object_was(tmp_path: Path) -> None:
    recorded = record(tmp_path)
    state["n"] = 100
    _, runs = replay(tmp_path, recorded.session_id, "recorded")
    assert state["n"] == 100  # the tool did not run
    call = runs[0].calls[0]
    assert call.result.text == "1"
    assert isinstance(call.result.details, NotRestored) and "int" in str(call.result.details)


def test_replayed_destructive_calls_still_ask(tmp_path: Path) -> None:
    recorded = record(tmp_path)
    asked = []
    _, runs = replay(tmp_path, recorded.session_id, "recorded", approver=lambda r: asked.append(r) or False)
    assert [r.call.name for r in asked] == ["wipe"]
    assert runs[1].calls[0].status == "denied"


def test_a_request_that_diverges_fails_and_shows_where(tmp_path: Path) -> None:
    recorded = record(tmp_path)
    model = ReplayModel(recorded.session_id, workspace=tmp_path)
    agent = Agent(model=model, tools=replay_tools([count, wipe], model), workspace=tmp_path)
    with pytest.raises(ReplayDivergence) as caught:
        agent.run_sync("count to ten")  # not the recorded prompt
    message = str(caught.value)
    assert "message 0" in message and "'count'" in message and "'count to ten'" in message


def test_replay_of_the_latest_session_and_a_missing_one(tmp_path: Path) -> None:
    with pytest.raises(Exception, match="no stored session"):
        load_model("replay", workspace=tmp_path)
    recorded = record(tmp_path)
    assert load_model("replay", workspace=tmp_path).name == recorded.session_id
    with pytest.raises(Exception, match="no session 'nope'"):
        load_model("replay:nope", workspace=tmp_path)


def test_a_record_that_ran_out_says_so(tmp_path: Path) -> None:
    recorded = record(tmp_path)
    with pytest.raises(ReplayDivergence, match="message 8 is new: UserMessage 'and more'"):
        replay(tmp_path, recorded.session_id, "recorded", prompts=("count", "wipe x", "and more"))
