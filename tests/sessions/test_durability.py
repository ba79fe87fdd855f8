"""What a killed kernel loses, tried on real processes killed with SIGKILL: at most the batch in flight (its
calls come back "interrupted"), every line signed and chained, the transcript valid. And the fsync: off the
run's thread, one for many commits, waited for when a writer closes, its failure reported."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from nbagent import Agent, AssistantMessage, ScriptedModel, ToolCall, UserMessage, tool
from nbagent.messages import ToolResultMessage
from nbagent.sessions import INTERRUPTED, SessionWriter, load_session
from nbagent.safety.trust import session_key
from nbagent.sessions import _syncer
from nbagent.transcript import check_transcript

ROOT = str(Path(__file__).resolve().parents[2])

_CHILD = """
import os, sys
from nbagent import Agent, AssistantMessage, ScriptedModel, ToolCall, tool

ws, mode, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
progress = os.open(os.path.join(ws, "progress"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)


@tool(read_only=True)
def step(i: int) -> str:
    '''One step of the work.'''
    os.write(progress, b"%d\\n" % i)  # step i runs: every batch before it has ended
    if mode == "self" and i == n // 2:
        os.kill(os.getpid(), 9)  # the kernel dies in the middle of a call
    return f"step {i} done"


script = [AssistantMessage(tool_calls=[ToolCall(name="step", arguments={"i": i}, id=f"c{i}")]) for i in range(n)]
agent = Agent(model=ScriptedModel(script + ["all done"]), tools=[step], workspace=ws, session=True, max_turns=n + 1)
print(agent.session_id, flush=True)
agent.run_sync("do the steps")
"""


def _start(ws: Path, mode: str, n: int) -> tuple[subprocess.Popen, str]:
    env = {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}
    child = subprocess.Popen([sys.executable, "-c", _CHILD, str(ws), mode, str(n)], env=env, stdout=subprocess.PIPE,
                             text=True)
    assert child.stdout is not None
    return child, child.stdout.readline().strip()


def _progress(ws: Path) -> list[int]:
    path = ws / "progress"
    return [int(line) for line in path.read_text().split()] if path.exists() else []


def _results(ws: Path, session_id: str) -> tuple[list[str], list[str], list]:
    """The ids of the calls stored with their own result, of those answered "interrupted", and the messages."""
    stored = load_session(ws, session_id)  # every line verifies, or this raises
    assert stored.signed and check_transcript(stored.messages) == []
    done, interrupted = [], []
    for m in stored.messages:
        if isinstance(m, ToolResultMessage):
            (interrupted if m.content[0].text == INTERRUPTED else done).append(m.tool_call_id)
    assert interrupted == stored.interrupted
    return done, interrupted, stored.messages


@pytest.fixture
def own_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NBAGENT_CONFIG_DIR", str(tmp_path / "config"))  # the child signs, the test verifies
    session_key()  # made now (it is fsynced too), not by the first writer


def test_a_kernel_killed_in_a_call_loses_only_that_call(tmp_path: Path, own_key: None) -> None:
    child, session_id = _start(tmp_path, "self", 40)
    assert child.wait(timeout=120) == -signal.SIGKILL
    done, interrupted, messages = _results(tmp_path, session_id)
    assert done == [f"c{i}" for i in range(20)]  # every batch that ended is there, whole
    assert interrupted == ["c20"]  # the call in flight: asked for, on disk, answered "interrupted"
    assert isinstance(messages[0], UserMessage) and messages[0].text == "do the steps"


@pytest.mark.parametrize("attempt", range(3))
def test_a_kernel_killed_at_any_moment_loses_at_most_the_batch_in_flight(tmp_path: Path, own_key: None,
                                                                         attempt: int) -> None:
    child, session_id = _start(tmp_path, "outside", 20_000)
    target = random.Random(attempt).randrange(20, 600)
    deadline = time.monotonic() + 120
    while len(_progress(tmp_path)) < target and time.monotonic() < deadline and child.poll() is None:
        time.sleep(0.002)
    child.send_signal(signal.SIGKILL)  # whatever the kernel was doing: a call, the loop, a write
    assert child.wait(timeout=60) == -signal.SIGKILL
    last = _progress(tmp_path)[-1]  # the step that was running, or the last that ran
    done, interrupted, _ = _results(tmp_path, session_id)
    # every batch that ended before the last step started is stored with its result
    assert done[:last] == [f"c{i}" for i in range(last)]
    # and at most the batch in flight is missing: the last step (its result, if it ended, not yet written),
    # or the next one, asked for and written just before the kill, its step not yet started
    assert done[last:] in ([], [f"c{last}"])
    assert interrupted in ([], [f"c{last}"], [f"c{last + 1}"]) and len(done) + len(interrupted) >= last + 1


# -- the fsync ------------------------------------------------------------------------------------------------


def _fsyncs(monkeypatch: pytest.MonkeyPatch, folder: Path) -> list[str]:
    """Record the thread of every fsync of a file in `folder` (other tests' writers may still be syncing)."""
    seen: list[str] = []
    real = os.fsync

    def fsync(fd: int) -> None:
        if os.readlink(f"/proc/self/fd/{fd}").startswith(str(folder)):
            seen.append(threading.current_thread().name)
        real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    return seen


def _synced(writer: SessionWriter) -> None:
    """Wait until everything `writer` wrote has been fsynced."""
    deadline = time.monotonic() + 60
    while writer._synced < writer._size and time.monotonic() < deadline:
        time.sleep(0.01)
    assert writer._synced == writer._size


def test_commits_are_fsynced_off_the_callers_thread_many_at_a_time(tmp_path: Path, own_key: None,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    seen = _fsyncs(monkeypatch, tmp_path)
    recording = os.fsync
    began, disk = threading.Event(), threading.Event()  # the first fsync takes as long as the test says

    def slow_fsync(fd: int) -> None:
        if not seen:
            began.set()
            disk.wait(30)
        recording(fd)

    monkeypatch.setattr(os, "fsync", slow_fsync)
    w = SessionWriter(tmp_path)  # its header: the first fsync, held
    assert began.wait(30)
    for i in range(50):
        w.messages([UserMessage(f"message {i}")])
        w.commit()  # returns at once: the caller never waits for the disk
    assert seen == []
    disk.set()
    _synced(w)
    # one fsync for the header, one for the 50 commits made while it ran, none on the caller's thread
    assert seen == ["nbagent-session-fsync"] * 2
    w.close()  # nothing written since: nothing to wait for
    assert len(seen) == 2
    w2 = SessionWriter(tmp_path, w.id, resume=True)
    w2.messages([UserMessage("last")])
    w2.close()  # something new: close flushes it, on the caller's thread, and returns when it is on disk
    assert seen[2:] == [threading.current_thread().name]
    assert load_session(tmp_path, w.id).messages[-1].text == "last"


def test_control_without_fsync_nothing_is_flushed(tmp_path: Path, own_key: None,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    seen = _fsyncs(monkeypatch, tmp_path)
    monkeypatch.setattr(SessionWriter, "fsync", False)
    w = SessionWriter(tmp_path)
    w.messages([UserMessage("x")])
    w.commit()
    w.close()
    time.sleep(_syncer.SYNC_INTERVAL * 2)  # the store's thread would have had its chance
    assert seen == []


def test_a_failed_fsync_is_raised_by_the_next_commit(tmp_path: Path, own_key: None,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    w = SessionWriter(tmp_path)
    _synced(w)

    def broken(fd: int) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(os, "fsync", broken)
    w.messages([UserMessage("x")])
    w.commit()
    deadline = time.monotonic() + 60
    while w._sync_error is None and time.monotonic() < deadline:
        time.sleep(0.01)
    with pytest.raises(OSError, match="Input/output error"):
        w.commit()
    with pytest.raises(OSError, match="Input/output error"):  # and close, which flushes itself
        w.close()


def test_a_run_that_fails_to_fsync_goes_on_and_keeps_the_error(tmp_path: Path, own_key: None,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    @tool(read_only=True)
    def add(a: int, b: int) -> int:
        """Add."""
        return a + b

    def broken(fd: int) -> None:
        raise OSError(28, "No space left on device")

    agent = Agent(model=ScriptedModel([AssistantMessage(tool_calls=[ToolCall(name="add", arguments={"a": 1, "b": 2})]),
                                       "3"]), tools=[add], workspace=tmp_path, session=True)
    monkeypatch.setattr(os, "fsync", broken)
    run = agent.run_sync("add")
    assert run.status == "done" and run.output == "3"  # recording never fails a run
