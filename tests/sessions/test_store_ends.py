"""A stored conversation cut short at its end is refused: every line of what is left still verifies, but the
place its writer last closed it at, recorded outside the workspace (nbagent.sessions._ends), is gone."""

from __future__ import annotations

from pathlib import Path

import pytest

from nbagent import Agent, AssistantMessage, ScriptedModel, ToolCall, UserMessage, tool
from nbagent.messages import TextBlock, ToolResultMessage
from nbagent.safety.trust import config_dir
from nbagent.sessions import SessionError, SessionWriter, delete_session, list_sessions, load_session
from nbagent.sessions import _ends


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def write(tmp_path: Path, turns: int = 2) -> SessionWriter:
    writer = SessionWriter(tmp_path)
    for i in range(turns):
        call = ToolCall(name="add", arguments={"a": i, "b": 1}, id=f"call_{i}")
        writer.messages([UserMessage(f"add {i} and 1"), AssistantMessage(tool_calls=[call]),
                         ToolResultMessage(call.id, "add", [TextBlock(str(i + 1))], False),
                         AssistantMessage(text=f"It is {i + 1}.")])
        writer.commit()
    writer.close()
    return writer


def cut(path: Path, lines: int) -> None:
    """The file less its last `lines` lines: what is left verifies line by line."""
    kept = path.read_bytes().splitlines(keepends=True)[:-lines]
    path.write_bytes(b"".join(kept))


@pytest.mark.parametrize("lines", [1, 2, 4])
def test_a_closed_conversation_cut_short_at_its_end_is_refused_and_left_out_of_the_listing(tmp_path, lines):
    writer = write(tmp_path)
    assert len(load_session(tmp_path, writer.id).messages) == 8
    cut(writer.path, lines)
    with pytest.raises(SessionError, match="ends before the last line"):
        load_session(tmp_path, writer.id)
    listed = list_sessions(tmp_path)
    assert writer.id not in [info.id for info in listed]
    assert any("ends before" in str(skipped) for skipped in listed.skipped)


def test_the_record_is_what_catches_it(tmp_path):
    """The control: with the record gone (as for a kernel killed before its run ended), the same cut loads,
    since every line left verifies."""
    writer = write(tmp_path)
    cut(writer.path, 2)
    _ends.forget(writer.path)
    stored = load_session(tmp_path, writer.id)  # the call whose result was cut comes back "interrupted"
    assert len(stored.messages) == 7 and stored.interrupted == ["call_1"]


def test_lines_appended_later_keep_the_file_whole_and_a_cut_back_to_an_earlier_end_is_refused(tmp_path):
    agent = Agent(model=ScriptedModel(["one"]), tools=[add], workspace=tmp_path, session=True)
    agent.run_sync("first")
    path = tmp_path / ".nbagent" / "sessions" / f"{agent.session_id}.jsonl"
    first_end = path.read_bytes()
    again = Agent(model=ScriptedModel(["two"]), tools=[add], workspace=tmp_path).resume(agent.session_id)
    again.session = True
    run = again.run_sync("second")
    assert run.status == "done"
    assert len(load_session(tmp_path, agent.session_id).messages) == 4  # the next run continued the chain
    path.write_bytes(first_end)  # the second run's lines removed: the first run's end is all that is left
    with pytest.raises(SessionError, match="ends before"):
        load_session(tmp_path, agent.session_id)


def test_lines_written_after_the_last_close_are_not_covered(tmp_path):
    """What the record cannot tell (said in nbagent.sessions._ends): lines after the last close, as a kernel
    killed during a run leaves them, may be cut without notice; the lines up to that close may not."""
    writer = write(tmp_path, turns=1)
    more = SessionWriter(tmp_path, writer.id, resume=True)
    more.messages([UserMessage("and then?")])
    more.commit()  # written, never closed: the kernel died
    cut(writer.path, 1)
    assert len(load_session(tmp_path, writer.id).messages) == 4
    cut(writer.path, 1)
    with pytest.raises(SessionError, match="ends before"):
        load_session(tmp_path, writer.id)


def test_a_record_that_is_not_what_the_writer_writes_is_ignored_and_deleting_forgets_it(tmp_path):
    writer = write(tmp_path)
    records = list((config_dir() / "session-ends").glob("*.json"))
    assert len(records) == 1 and records[0].stat().st_mode & 0o777 == 0o600
    for junk in (b"", b"not json", b'{"path": 1}', b'{"path": "%s", "mac": "zz"}' % str(writer.path).encode()):
        records[0].write_bytes(junk)
        assert len(load_session(tmp_path, writer.id).messages) == 8
    write_again = write(tmp_path)
    delete_session(tmp_path, write_again.id)
    assert len(list((config_dir() / "session-ends").glob("*.json"))) == 1  # the other conversation's
