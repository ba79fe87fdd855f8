"""The session store: append-only JSONL that survives killed writers, corrupt lines and two kernels."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import pytest

from nbagent import AssistantMessage, ToolCall, UserMessage
from nbagent.messages import TextBlock, ToolResultMessage
from nbagent.sessions import (
    FORMAT, INTERRUPTED, SIDE_FILE_CHARS, SessionError, SessionWriter, delete_session, list_sessions, load_session,
    repair_transcript,
)
from nbagent.transcript import check_transcript


def conversation() -> list:
    call = ToolCall(name="add", arguments={"a": 1, "b": 2}, id="call_1")
    return [UserMessage("add 1 and 2"), AssistantMessage(text="", tool_calls=[call]),
            ToolResultMessage("call_1", "add", [TextBlock("3")], False), AssistantMessage(text="It is 3.")]


def test_a_conversation_round_trips(tmp_path: Path) -> None:
    w = SessionWriter(tmp_path, notebook=str(tmp_path / "a.ipynb"), model="scripted")
    w.run_started("add 1 and 2", model="scripted", mode="default")
    w.messages(conversation())
    w.request({"model": "m", "messages": []})
    w.run_ended("done", output="It is 3.")
    w.commit()
    stored = load_session(tmp_path, w.id)
    assert [type(m).__name__ for m in stored.messages] == ["UserMessage", "AssistantMessage", "ToolResultMessage",
                                                           "AssistantMessage"]
    assert stored.messages[1].tool_calls[0].arguments == {"a": 1, "b": 2}
    assert stored.responses[-1].text == "It is 3." and stored.requests == [{"model": "m", "messages": []}]
    assert not stored.warnings and not stored.interrupted
    info = list_sessions(tmp_path)[0]
    assert (info.id, info.runs, info.turns, info.last_prompt) == (w.id, 1, 2, "add 1 and 2")
    assert list_sessions(tmp_path, notebook=str(tmp_path / "a.ipynb"))[0].id == w.id
    assert list_sessions(tmp_path, notebook=str(tmp_path / "other.ipynb")) == []


def test_nothing_is_written_before_commit_and_everything_after(tmp_path: Path) -> None:
    w = SessionWriter(tmp_path)
    size = w.path.stat().st_size
    w.messages(conversation())
    assert w.path.stat().st_size == size  # a batch in flight is not on disk yet
    w.commit()
    assert len(load_session(tmp_path, w.id).messages) == 4


def test_a_truncated_last_line_is_skipped_with_a_warning(tmp_path: Path) -> None:
    w = SessionWriter(tmp_path)
    w.messages(conversation()[:2])
    w.commit()
    with w.path.open("a") as f:
        f.write('{"kind": "message", "message": {"role": "tool", "tool_ca')  # the kernel died mid-write
    with pytest.warns(UserWarning, match="truncated last line"):
        stored = load_session(tmp_path, w.id)
    # the call that was in flight gets an "interrupted" result: the transcript is valid again
    assert stored.interrupted == ["call_1"]
    assert stored.messages[-1].content[0].text == INTERRUPTED and stored.messages[-1].is_error
    assert check_transcript(stored.messages) == []


def test_a_corrupt_line_in_the_middle_is_skipped(tmp_path: Path) -> None:
    w = SessionWriter(tmp_path)
    w.messages(conversation()[:1])
    w.commit()
    with w.path.open("a") as f:
        f.write("not json at all\n")
    w.messages(conversation()[1:])
    w.commit()
    with pytest.warns(UserWarning, match="corrupt line 3"):
        stored = load_session(tmp_path, w.id)
    assert len(stored.messages) == 4


def test_a_newer_format_is_refused_clearly(tmp_path: Path) -> None:
    w = SessionWriter(tmp_path)
    lines = w.path.read_text().splitlines()
    head = json.loads(lines[0]) | {"format": FORMAT + 1}
    w.path.write_text(json.dumps(head) + "\n")
    with pytest.raises(SessionError, match="newer nbagent"):
        load_session(tmp_path, w.id)
    (w.path.parent / "foreign.jsonl").write_text('{"role": "user"}\n')
    with pytest.raises(SessionError, match="not an nbagent session"):
        load_session(tmp_path, "foreign")


def test_ids_cannot_leave_the_store(tmp_path: Path) -> None:
    for bad in ("../x", "/etc/passwd", "a/b", "", ".hidden"):
        with pytest.raises(SessionError):
            load_session(tmp_path, bad)
        with pytest.raises(SessionError):
            delete_session(tmp_path, bad)


def test_long_results_go_to_a_side_file_and_come_back_whole(tmp_path: Path) -> None:
    text = "x" * (SIDE_FILE_CHARS * 3) + "END"
    w = SessionWriter(tmp_path)
    call = ToolCall(name="dump", arguments={}, id="c/../1")
    w.messages([UserMessage("go"), AssistantMessage(tool_calls=[call]),
                ToolResultMessage(call.id, "dump", [TextBlock(text)], False)])
    w.commit()
    assert w.path.stat().st_size < SIDE_FILE_CHARS * 2  # the line holds a cut copy
    side = list((w.path.parent / f"{w.id}.d").iterdir())
    assert len(side) == 1 and ".." not in side[0].name
    assert load_session(tmp_path, w.id).messages[-1].content[0].text == text
    side[0].unlink()  # a lost side file: the cut copy stands in
    assert "side file" in load_session(tmp_path, w.id).messages[-1].content[0].text


def test_secrets_never_reach_the_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    key = "sk-proj-abcdefghijklmnopqrstuvwxyz0123456789"
    monkeypatch.setenv("OPENAI_API_KEY", key + "\n")
    token = "ghp_" + "a" * 36
    w = SessionWriter(tmp_path)
    call = ToolCall(name="env", arguments={"q": key}, id="c1")
    long = f"OPENAI_API_KEY={key}\n" + "y" * (SIDE_FILE_CHARS + 10) + token
    w.messages([UserMessage(f"my key is {key}"), AssistantMessage(tool_calls=[call]),
                ToolResultMessage("c1", "env", [TextBlock(long)], False)])
    w.request({"headers": {"authorization": f"Bearer {key}"}, "token": token})
    w.commit()
    everything = "".join(p.read_text() for p in w.path.parent.rglob("*") if p.is_file())
    assert key not in everything and token not in everything
    assert "[REDACTED:OPENAI_API_KEY]" in everything


_WRITER = """
import os, sys
from nbagent import UserMessage
from nbagent.sessions import SessionWriter
w = SessionWriter(sys.argv[1], sys.argv[2], resume=True)
for i in range(200):
    w.messages([UserMessage(f"{os.getpid()}-{i}-" + "z" * 5000)])
    w.commit(fsync=False)
"""


def test_two_kernels_writing_one_file_never_interleave_lines(tmp_path: Path) -> None:
    import subprocess
    import sys

    w = SessionWriter(tmp_path)
    root = str(Path(__file__).resolve().parents[2])
    env = {**os.environ, "PYTHONPATH": root + os.pathsep + os.environ.get("PYTHONPATH", "")}
    procs = [subprocess.Popen([sys.executable, "-c", _WRITER, str(tmp_path), w.id], env=env) for _ in range(2)]
    assert [p.wait(timeout=60) for p in procs] == [0, 0]
    lines = w.path.read_text().splitlines()
    facts = [json.loads(line) for line in lines[1:]]  # every line whole: none cut into by the other writer
    assert len(facts) == 400
    assert all(len(f["message"]["content"]) > 5000 for f in facts)
    assert load_session(tmp_path, w.id).signed  # each writer continued the other's chain: it verifies


def test_repair_answers_every_call_in_place() -> None:
    a = AssistantMessage(tool_calls=[ToolCall(name="x", arguments={}, id="1"), ToolCall(name="y", arguments={}, id="2")])
    messages = [UserMessage("go"), a, ToolResultMessage("2", "y", [TextBlock("ok")], False), UserMessage("next"),
                ToolResultMessage("9", "z", [TextBlock("orphan")], False)]
    repaired, interrupted = repair_transcript(messages)
    assert interrupted == ["1"]
    assert check_transcript(repaired) == []
    assert [getattr(m, "tool_call_id", None) for m in repaired] == [None, None, "2", "1", None]


def test_delete(tmp_path: Path) -> None:
    w = SessionWriter(tmp_path)
    delete_session(tmp_path, w.id)
    assert list_sessions(tmp_path) == []
    with pytest.raises(SessionError, match="no session"):
        load_session(tmp_path, w.id)


# -- runs written as they go -------------------------------------------------------------------------------

from nbagent import Agent, ScriptedModel, tool  # noqa: E402


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def _answers(*texts: str):
    return [AssistantMessage(tool_calls=[ToolCall(name="add", arguments={"a": 1, "b": 2})])] + list(texts)


def test_runs_of_an_agent_are_stored_and_resumed(tmp_path: Path) -> None:
    model = ScriptedModel(_answers("three") + ["again"])
    agent = Agent(model=model, tools=[add], workspace=tmp_path, session=True, approver=lambda request: True)
    first = agent.run_sync("add 1 and 2")
    second = agent.run_sync("and again?")
    assert second.messages[: len(first.messages)] == first.messages  # the second run continued the first
    stored = load_session(tmp_path, agent.session_id)
    assert [type(m).__name__ for m in stored.messages] == [
        "UserMessage", "AssistantMessage", "ToolResultMessage", "AssistantMessage", "UserMessage", "AssistantMessage"]
    assert [c["status"] for c in stored.calls] == ["ok"]
    assert stored.calls[0]["decision"]["allow"] is True
    assert [r["kind"] for r in stored.runs] == ["run", "end", "run", "end"]
    assert len(stored.requests) == 3
    # a new kernel: another Agent resumes the latest conversation and every earlier message is sent again
    seen = []
    later = Agent(model=ScriptedModel([lambda messages: seen.append(list(messages)) or "yes"]), workspace=tmp_path)
    later.resume()
    later.run_sync("still there?")
    assert [getattr(m, "text", None) for m in seen[0] if isinstance(m, UserMessage)] == [
        "add 1 and 2", "and again?", "still there?"]


def test_a_run_that_failed_before_any_answer_leaves_no_prompt_behind(tmp_path: Path) -> None:
    def boom(messages):
        raise RuntimeError("provider down")

    seen = []
    model = ScriptedModel([boom, lambda messages: seen.append(list(messages)) or "ok"])
    agent = Agent(model=model, workspace=tmp_path, session=True)

    async def go():
        r = agent.start("first prompt")
        try:
            await r
        except Exception:
            pass
        return r

    assert asyncio.run(go()).status == "failed"
    agent.run_sync("second prompt")
    users = [m.text for m in seen[0] if isinstance(m, UserMessage)]
    assert users == ["second prompt"]
    # and from the store, after a restart
    resumed = Agent(model=ScriptedModel(["x"]), workspace=tmp_path).resume(agent.session_id)
    assert [m.text for m in resumed.conversation if isinstance(m, UserMessage)] == ["second prompt"]


def test_a_kernel_killed_mid_batch_resumes_with_the_call_interrupted(tmp_path: Path) -> None:
    agent = Agent(model=ScriptedModel(_answers("three")), tools=[add], workspace=tmp_path, session=True,
                  approver=lambda request: True)
    agent.run_sync("add")
    path = tmp_path / ".nbagent" / "sessions" / f"{agent.session_id}.jsonl"
    lines = path.read_text().splitlines(keepends=True)
    # cut the file just after the assistant message that made the call: its result never reached the disk
    cut = next(i for i, line in enumerate(lines) if '"tool_calls"' in line)
    path.write_text("".join(lines[: cut + 1]))
    resumed = Agent(model=ScriptedModel(["fine"]), tools=[add], workspace=tmp_path).resume(agent.session_id)
    assert check_transcript(resumed.conversation) == []
    assert resumed.conversation[-1].content[0].text == INTERRUPTED
    run = resumed.run_sync("go on")
    assert run.status == "done" and check_transcript(run.messages) == []


def test_the_listing_counts_a_call_that_was_in_flight_as_resuming_does(tmp_path: Path) -> None:
    w = SessionWriter(tmp_path)
    w.run_started("add 1 and 2", model="scripted", mode="default")
    w.messages(conversation()[:2])  # the model asked for a call; the kernel went before it had a record
    w.commit()
    stored = load_session(tmp_path, w.id)
    assert stored.interrupted == ["call_1"]
    assert list_sessions(tmp_path)[0].calls == 1 == stored.info.calls
