"""The shell tool: running, streaming, timeouts and cancellation that stop the whole process group."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from pathlib import Path

from nbagent import Agent, AssistantMessage, ScriptedModel, ToolCall
from nbagent.events import ToolCallProgress
from nbagent.toolbox import ShellResult
from tests.toolbox.support import Runner


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is dead for our purposes
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ", 1)[1][0] != "Z"
    except OSError:
        return False


def _marker(seconds: int) -> str:
    """A sleep duration no other process on the machine is using, to find this test's processes by."""
    return f"{seconds}.{os.getpid() % 1000:03}{time.time_ns() % 1_000_000:06}"


def _running(marker: str) -> list[int]:
    """Host pids of live processes whose command line holds `marker` (pids inside a sandbox's PID
    namespace mean nothing out here)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                if marker.encode() in f.read() and _alive(int(entry)):
                    found.append(int(entry))
        except OSError:
            pass
    return found


def _gone(marker: str) -> bool:
    for _ in range(200):
        if not _running(marker):
            return True
        time.sleep(0.05)
    return False


def test_runs_in_the_workspace(runner: Runner, ws: Path) -> None:
    rec = runner.call("shell", command="pwd && ls data")
    assert rec.status == "ok"
    assert rec.result.text.splitlines() == [str(ws), "a.csv", "b.csv", "[exit code 0]"]
    assert isinstance(rec.details, ShellResult) and rec.details.exit_code == 0
    assert rec.label == "Ran `pwd && ls data` (exit 0)"


def test_a_failing_command_is_an_error_result_with_its_output(runner: Runner) -> None:
    rec = runner.call("shell", command="echo out; echo err >&2; exit 3")
    assert rec.status == "error"
    assert rec.details.exit_code == 3
    assert rec.details.stdout == "out\n" and rec.details.stderr == "err\n"
    assert "[exit code 3]" in rec.result.text and "err" in rec.result.text


def test_stdin_is_closed_and_pagers_are_off(runner: Runner) -> None:
    rec = runner.call("shell", command="cat; echo \"$PAGER $GIT_PAGER\"")
    assert rec.result.text.splitlines()[0] == "cat cat"


def test_output_streams_as_progress(tools, ws: Path) -> None:
    seen: list[str] = []
    model = ScriptedModel([AssistantMessage(tool_calls=[ToolCall(name="shell", arguments={
        "command": "for i in 1 2 3; do echo line$i; sleep 0.05; done"})]), "done"])
    agent = Agent(model=model, tools=tools, mode="bypassPermissions", workspace=ws)
    run = agent.run_sync("go", on_event=lambda e: seen.append(e.update.output) if isinstance(e, ToolCallProgress) and e.update.output else None)
    assert "".join(seen) == "line1\nline2\nline3\n"
    assert run.calls[0].output_tail.text == "line1\nline2\nline3\n"


def test_long_output_is_cut_for_the_model_and_kept_whole(runner: Runner) -> None:
    rec = runner.call("shell", command="seq 1 200000")
    assert len(rec.result.text) < 40_000
    assert "characters of output cut" in rec.result.text
    assert rec.details.stdout.splitlines()[-1] == "200000"
    assert len(rec.details.stdout.splitlines()) == 200000


def test_a_timeout_kills_the_whole_process_group(runner: Runner, ws: Path) -> None:
    marker = _marker(30)
    rec = runner.call("shell", command=f"sleep {marker} & wait", timeout=0.5)
    assert rec.status == "error"
    assert rec.details.timed_out
    assert "timed out after 0.5 s" in rec.result.text
    assert _gone(marker)


async def test_cancelling_the_run_kills_the_command(tools, ws: Path) -> None:
    marker = _marker(30)
    model = ScriptedModel([AssistantMessage(tool_calls=[ToolCall(name="shell", arguments={
        "command": f"echo started > shell.txt; sleep {marker}"})]), "done"])
    agent = Agent(model=model, tools=tools, mode="bypassPermissions", workspace=ws)
    run = agent.start("go")
    for _ in range(500):
        if _running(marker):
            break
        await asyncio.sleep(0.02)
    assert _running(marker)
    run.cancel()
    await run
    assert run.status == "cancelled"
    assert run.calls[0].status == "cancelled"
    assert await asyncio.to_thread(_gone, marker)


def test_programs_left_in_the_background_do_not_hold_the_call(runner: Runner, ws: Path) -> None:
    # without a sandbox they survive the call (and the call says they held its output)
    rec = runner.run(ToolCall(name="shell", arguments={"command": "(sleep 20.103; echo late) & echo $! > bg.pid; echo now"}),
                     sandbox="danger-full-access").calls[0]
    assert rec.status == "ok"
    assert rec.result.text.startswith("now\n")
    assert "kept its output open" in rec.result.text
    os.kill(int((ws / "bg.pid").read_text()), signal.SIGKILL)


def test_nul_bytes_are_refused(runner: Runner) -> None:
    rec = runner.call("shell", command="echo a\x00b")
    assert rec.status == "error" and "NUL" in rec.result.text


def test_the_timeout_is_bounded(runner: Runner) -> None:
    assert runner.call("shell", command="true", timeout=0).status == "invalid_arguments"
    assert runner.call("shell", command="true", timeout=10_000).status == "invalid_arguments"


def test_a_write_the_sandbox_stops_is_said_apart_from_an_ordinary_failure(tmp_path, sandbox_lane):
    from nbagent import Agent, AssistantMessage, ScriptedModel, ToolCall, render, toolbox

    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "config").write_text("[core]\n")
    calls = [ToolCall(name="shell", arguments={"command": "echo x >> .git/config; true"}),
             ToolCall(name="shell", arguments={"command": "ls no-such-file"})]
    model = ScriptedModel([AssistantMessage(tool_calls=[c]) for c in calls] + ["done"])
    run = Agent(model=model, tools=toolbox.all(workspace=tmp_path), approver=lambda r: True,
                workspace=tmp_path).run_sync("go")
    stopped, ordinary = run.calls
    assert (tmp_path / ".git" / "config").read_text() == "[core]\n"
    if sandbox_lane.name == "landlock" and not sandbox_lane.mounts:  # Landlock alone: written, then put back
        assert "were put back after it" in stopped.result.text and ".git/config (changed: put back)" in \
            stopped.result.text
    else:
        assert "stopped by the sandbox (workspace-write): .git/config is in protected paths" in stopped.result.text
    assert "nba-sandboxed" in render.call_inner_html(stopped)  # the row says so, even though the command "passed"
    assert "stopped by the sandbox" not in ordinary.result.text and "put back" not in ordinary.result.text
    assert "nba-sandboxed" not in render.call_inner_html(ordinary)


async def test_stopping_a_command_stops_what_it_started_in_a_session_of_its_own() -> None:
    """A sandbox's PID namespace runs in a session of its own (bwrap --new-session): cancelled while it was
    being set up, it outlived the killed group. Stopping a command stops its whole family."""
    import sys

    from nbagent.toolbox._shell import _terminate

    marker = _marker(30)
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c",
        f"import subprocess, time; subprocess.Popen(['sleep', '{marker}'], start_new_session=True); time.sleep(60)",
        start_new_session=True)
    def started() -> bool:  # the sleep itself, not the parent whose command line spells it
        return any(pid != proc.pid for pid in _running(marker))

    for _ in range(500):
        if started():
            break
        await asyncio.sleep(0.02)
    assert started()
    await _terminate(proc)
    assert await asyncio.to_thread(_gone, marker)
