"""The session store: append-only JSONL that survives killed writers, corrupt lines and two kernels."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from types import SimpleNamespace

import pytest

from nbagent import AssistantMessage, ToolCall, UserMessage
from nbagent.messages import TextBlock, ToolResultMessage
from nbagent.sessions import _ends
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


# How each kind of fact is written with a secret in it; `notebook` (and the header) are the store's own
# identifying facts, written as given: see the test after this one.
FACTS = {
    "settings": lambda w, s: w.settings({"model": "openai:gpt-4.1", "note": s}),
    "run_started": lambda w, s: w.run_started(f"use {s}", model="scripted"),
    "messages": lambda w, s: w.messages([UserMessage(f"my key is {s}"), AssistantMessage(text=s)]),
    "compaction": lambda w, s: w.compaction(SimpleNamespace(
        start=0, end=0, replacement=[UserMessage(s)], responses=[AssistantMessage(text=s)], reason=s, stubbed=0,
        summarized=0, tokens_before=2, tokens_after=1)),
    "call": lambda w, s: w.call(SimpleNamespace(id="c1", name="env", status="ok", arguments={"q": s}, decision=None,
                                                duration=0.1, activity=f"reading {s}", result=None)),
    "request": lambda w, s: w.request({"headers": {"authorization": f"Bearer {s}"}}),
    "run_ended": lambda w, s: w.run_ended("failed", error=RuntimeError(f"refused {s}"), output=s),
}
OWN = {"notebook"}


def test_every_fact_the_store_writes_is_redacted_but_its_own_identifying_ones(tmp_path: Path,
                                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    methods = {name for name, value in vars(SessionWriter).items() if callable(value) and not name.startswith("_")}
    assert methods - {"commit", "close"} == set(FACTS) | OWN  # a new kind of fact says how it is redacted
    key = "sk-proj-Qm7Xv2Lp9Rt4Wz8Kc3Nb6Hd1Fy5Gs0Ja"
    monkeypatch.setenv("OPENAI_API_KEY", key)
    for name, write in FACTS.items():
        w = SessionWriter(tmp_path)
        write(w, key)
        w.close()
        text = w.path.read_text()
        assert key not in text and key[5:17] not in text and "[REDACTED:OPENAI_API_KEY" in text, name


def test_a_notebook_path_sharing_a_piece_with_a_key_still_finds_its_conversations(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # a key given as api_key= stays known to the process; "test-0" is a piece of it, and of the path
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-0123456789abcdef0123")
    notebook, renamed = str(tmp_path / "pytest-0" / "a.ipynb"), str(tmp_path / "pytest-0" / "b.ipynb")
    w = SessionWriter(tmp_path, notebook=notebook, model="scripted")
    w.run_started(f"look at {notebook}")
    w.close()
    assert [i.id for i in list_sessions(tmp_path, notebook=notebook)] == [w.id]
    assert "[REDACTED:OPENAI_API_KEY piece]" in load_session(tmp_path, w.id).runs[0]["prompt"]  # content is redacted
    w = SessionWriter(tmp_path, w.id, resume=True)
    w.notebook("nb-1", renamed)
    w.close()
    assert [i.id for i in list_sessions(tmp_path, notebook=renamed)] == [w.id]


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
    _ends.forget(path)  # a killed kernel never closed the file: no end was recorded for this run
    resumed = Agent(model=ScriptedModel(["fine"]), tools=[add], workspace=tmp_path).resume(agent.session_id)
    assert check_transcript(resumed.conversation) == []
    assert resumed.conversation[-1].content[0].text == INTERRUPTED
    run = resumed.run_sync("go on")
    assert run.status == "done" and check_transcript(run.messages) == []


def _session_text(tmp_path: Path, agent: Agent) -> str:
    return (tmp_path / ".nbagent" / "sessions" / f"{agent.session_id}.jsonl").read_text()


def test_a_batchs_results_are_on_disk_while_the_next_request_waits(tmp_path: Path) -> None:
    seen: list[str] = []

    async def slow_answer(messages):
        await asyncio.sleep(0.01)  # the provider takes its time: the loop waits, and writes meanwhile
        seen.append(_session_text(tmp_path, agent))
        return "three"

    agent = Agent(model=ScriptedModel(_answers(slow_answer)), tools=[add], workspace=tmp_path, session=True,
                  approver=lambda request: True)
    agent.run_sync("add 1 and 2")
    assert '"role":"tool"' in seen[0] and '"kind":"call"' in seen[0]


def test_control_a_model_that_answers_at_once_gets_the_results_written_with_its_answer(tmp_path: Path) -> None:
    seen: list[str] = []

    def instant_answer(messages):
        seen.append(_session_text(tmp_path, agent))
        return "three"

    agent = Agent(model=ScriptedModel(_answers(instant_answer)), tools=[add], workspace=tmp_path, session=True,
                  approver=lambda request: True)
    agent.run_sync("add 1 and 2")
    assert '"role":"tool"' not in seen[0]  # nothing waited: one write for the results and the answer
    assert [type(m).__name__ for m in load_session(tmp_path, agent.session_id).messages] == [
        "UserMessage", "AssistantMessage", "ToolResultMessage", "AssistantMessage"]


def test_what_orjson_writes_or_reads_differently_round_trips_as_json_has_it(tmp_path: Path) -> None:
    w = SessionWriter(tmp_path)
    big = {"n": 2**70, "m": -(2**64), "x": float("inf"), "s": "lone \ud800 surrogate", 3: "int key"}
    plain = {"x": float("nan"), 3: "int key", "when": Path("/data/x.csv"), "ids": {1, 2}, "raw": b"\x00\x01"}
    for i, arguments in enumerate((big, plain)):
        w.call(SimpleNamespace(id=f"c{i}", name="f", status="ok", arguments=arguments, decision=None, duration=0.0,
                               activity="", result=None))
    w.close()
    stored = load_session(tmp_path, w.id)
    assert not stored.warnings
    # beyond orjson (integers over 64 bits, a lone surrogate): the line is written and read by `json`, exactly
    assert stored.calls[0]["arguments"] == {"n": 2**70, "m": -(2**64), "x": float("inf"), "s": "lone \ud800 surrogate",
                                            "3": "int key"}
    assert isinstance(stored.calls[0]["arguments"]["n"], int)
    # the rest as `json` would have it, but numbers JSON has not (NaN, infinities), which are null
    assert stored.calls[1]["arguments"] == {"x": None, "3": "int key", "when": "/data/x.csv", "ids": [1, 2],
                                            "raw": "<2 bytes>"}


def test_a_secret_in_a_line_json_writes_is_redacted_too(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    secret = "pässwörd-Zq8vN2xPm"
    monkeypatch.setenv("DB_PASSWORD", secret)
    w = SessionWriter(tmp_path)
    w.call(SimpleNamespace(id="c1", name="f", status="ok", arguments={"n": 2**70, "s": f"\ud800 {secret}"},
                           decision=None, duration=0.0, activity="", result=None))
    w.close()
    text = w.path.read_text(encoding="utf-8")
    assert secret not in text and "[REDACTED:DB_PASSWORD]" in text
    assert load_session(tmp_path, w.id).calls[0]["arguments"]["s"] == "\ud800 [REDACTED:DB_PASSWORD]"


def test_the_lock_is_kept_until_the_loop_waits_and_a_writer_of_this_process_takes_it_over(tmp_path: Path) -> None:
    import fcntl

    async def go() -> str:
        w = SessionWriter(tmp_path)
        w.messages([AssistantMessage(text="first")])
        w.commit()
        other = os.open(w.path, os.O_RDONLY)
        try:
            with pytest.raises(BlockingIOError):  # another kernel would wait: the loop has not waited yet
                fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
            second = SessionWriter(tmp_path, w.id, resume=True)  # this process: no deadlock, it takes over
            second.messages([AssistantMessage(text="second")])
            second.commit()
            w.messages([AssistantMessage(text="third")])
            w.commit()  # and back: our lines continue the chain the other writer extended
            await asyncio.sleep(0)  # the loop waits: the lock goes
            fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
            fcntl.flock(other, fcntl.LOCK_UN)
        finally:
            os.close(other)
        w.close()
        second.close()
        return w.id

    session_id = asyncio.run(go())
    stored = load_session(tmp_path, session_id)
    assert stored.signed and [m.text for m in stored.messages] == ["first", "second", "third"]


def test_the_listing_counts_a_call_that_was_in_flight_as_resuming_does(tmp_path: Path) -> None:
    w = SessionWriter(tmp_path)
    w.run_started("add 1 and 2", model="scripted", mode="default")
    w.messages(conversation()[:2])  # the model asked for a call; the kernel went before it had a record
    w.commit()
    stored = load_session(tmp_path, w.id)
    assert stored.interrupted == ["call_1"]
    assert list_sessions(tmp_path)[0].calls == 1 == stored.info.calls


def test_a_call_waiting_for_approval_while_the_loop_waits_is_recorded_once_it_has_ended(tmp_path: Path) -> None:
    seen: list[str] = []

    async def approver(request):
        await asyncio.sleep(0.01)  # the person takes their time: the loop waits, and writes meanwhile
        seen.append(_session_text(tmp_path, agent))
        return True

    agent = Agent(model=ScriptedModel(_answers("three")), tools=[add], workspace=tmp_path, session=True,
                  approver=approver)
    agent.run_sync("add 1 and 2")
    assert '"tool_calls"' in seen[0] and '"kind":"call"' not in seen[0]  # asked for, not ended yet
    calls = [json.loads(line) for line in _session_text(tmp_path, agent).splitlines() if '"kind":"call"' in line]
    assert [c["status"] for c in calls] == ["ok"] and calls[0]["decision"]["source"] == "user"
