"""The shell's background mode and the `process` tool: start, poll, write to stdin, list, kill; inside the
sandbox; every process gone when the run ends (done or cancelled) and when the interpreter exits."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from nbagent import Agent, AssistantMessage, ScriptedModel, ToolCall
from tests.helpers import assert_valid
from tests.toolbox.test_shell_tool import _gone, _marker, _running


def script(*calls: tuple[str, dict]) -> ScriptedModel:
    return ScriptedModel([AssistantMessage(tool_calls=[ToolCall(name=n, arguments=a)]) for n, a in calls] + ["done"])


def texts(run) -> list[str]:
    return [c.result.text for c in run.calls]


def test_start_poll_write_list_kill(tools, ws: Path) -> None:
    marker = _marker(30)
    command = f'echo ready; read line; echo "got $line"; sleep {marker}'
    model = script(
        ("shell", {"command": command, "background": True}),
        ("process", {"action": "poll", "id": "p1", "wait_ms": 10_000}),
        ("process", {"action": "write", "id": "p1", "input": "hello\n"}),
        ("process", {"action": "poll", "id": "p1", "wait_ms": 10_000}),
        ("process", {"action": "list"}),
        ("process", {"action": "kill", "id": "p1"}),
        ("process", {"action": "poll", "id": "p9"}),
    )
    run = Agent(model=model, tools=tools, mode="bypassPermissions", workspace=ws).run_sync("go")
    started, first, wrote, second, listed, killed, unknown = texts(run)
    assert "process p1" in started and run.calls[0].status == "ok"
    assert "ready" in first and "still running" in first
    assert "wrote 6 characters to p1" in wrote
    assert "got hello" in second and "ready" not in second  # only what is new since the last poll
    assert listed.startswith("p1 · running") and command in listed
    assert "p1 stopped" in killed
    assert run.calls[6].status == "error" and "no process 'p9'" in unknown
    (proc,) = run.processes
    assert proc.status == "killed" and "got hello" in proc.output
    assert _gone(marker)
    assert_valid(run)
    # the run's view lists its processes (the live view's header is the same HTML)
    html = run._repr_html_()
    assert "background processes · none running" in html and "got hello" in html and "p1" in html
    assert f"process p1 · killed, exit code {proc.exit_code}" in str(run)


def test_every_process_is_stopped_when_the_run_ends(tools, ws: Path) -> None:
    marker = _marker(31)
    model = script(("shell", {"command": f"sleep {marker} & sleep {marker}", "background": True}))
    run = Agent(model=model, tools=tools, mode="bypassPermissions", workspace=ws).run_sync("go")
    assert run.status == "done"
    assert run.processes[0].status == "killed"
    assert _gone(marker)  # the command and the child it put in the background


async def test_cancelling_the_run_stops_its_processes(tools, ws: Path) -> None:
    marker = _marker(32)
    model = ScriptedModel([
        AssistantMessage(tool_calls=[ToolCall(name="shell", arguments={"command": f"sleep {marker}", "background": True})]),
        AssistantMessage(tool_calls=[ToolCall(name="shell", arguments={"command": "sleep 30"})]),
        "done",
    ])
    run = Agent(model=model, tools=tools, mode="bypassPermissions", workspace=ws).start("go")
    for _ in range(500):
        if _running(marker) and len(run.calls) == 2:
            break
        await asyncio.sleep(0.02)
    assert _running(marker)
    run.cancel()
    await asyncio.wait_for(asyncio.shield(run._task), 30)
    assert run.status == "cancelled"
    assert await asyncio.to_thread(_gone, marker)
    assert_valid(run)


def test_yield_ms_returns_a_quick_command_as_usual(tools, ws: Path) -> None:
    model = script(("shell", {"command": "echo quick", "yield_ms": 20_000}))
    run = Agent(model=model, tools=tools, mode="bypassPermissions", workspace=ws).run_sync("go")
    assert "quick" in texts(run)[0] and "exit code 0" in texts(run)[0]
    assert run.processes == []


def test_yield_ms_moves_a_long_command_to_the_background(tools, ws: Path) -> None:
    marker = _marker(33)
    model = script(("shell", {"command": f"echo early; sleep {marker}", "yield_ms": 300}),
                   ("process", {"action": "poll", "id": "p1"}))
    run = Agent(model=model, tools=tools, mode="bypassPermissions", workspace=ws).run_sync("go")
    first, poll = texts(run)
    assert "still running after 300 ms" in first and "process p1" in first
    assert "[p1: still running]" in poll
    assert "early" in run.processes[0].output
    assert _gone(marker)


def test_background_commands_run_in_the_sandbox(tools, ws: Path, outside: Path, sandbox_lane) -> None:
    target = outside / "escaped.txt"
    model = script(("shell", {"command": f"echo x > {target}; echo inside > mine.txt", "yield_ms": 20_000}))
    run = Agent(model=model, tools=tools, mode="bypassPermissions", workspace=ws).run_sync("go")
    assert not target.exists()
    assert (ws / "mine.txt").read_text() == "inside\n"
    assert run.calls[0].result.details.sandbox == "workspace-write"


def test_poll_list_and_log_are_read_only_write_and_kill_ask(tools, ws: Path) -> None:
    marker = _marker(34)
    asked: list[str] = []

    def approver(request) -> bool:
        asked.append(f"{request.call.name}:{request.call.arguments.get('action', '')}")
        return True

    model = script(("shell", {"command": f"cat; sleep {marker}", "background": True}),
                   ("process", {"action": "list"}), ("process", {"action": "poll", "id": "p1"}),
                   ("process", {"action": "log", "id": "p1"}),
                   ("process", {"action": "write", "id": "p1", "input": "x\n"}),
                   ("process", {"action": "kill", "id": "p1"}))
    run = Agent(model=model, tools=tools, approver=approver, workspace=ws).run_sync("go")
    assert asked == ["shell:", "process:write", "process:kill"]
    assert all(c.status == "ok" for c in run.calls)
    assert _gone(marker)


def test_read_only_capability_mode_leaves_the_process_tool_out(tools, ws: Path) -> None:
    run = Agent(model=ScriptedModel(["done"]), tools=tools, capability_mode="read-only", workspace=ws).run_sync("go")
    assert "process" not in run.requests[0].tools and "shell" not in run.requests[0].tools


def _interpreter_with_a_process(ws: Path, marker: str, ending: str, sandbox: str = "workspace-write",
                                in_flight: str = "20", background: str = "", foreground: str = "",
                                settle: float = 0, prelude: str = "") -> subprocess.CompletedProcess:
    """A Python process whose run started `sleep marker` in the background and is still going (its second call,
    `sleep in_flight`, running in the foreground) when the interpreter ends with `ending`; `background` and
    `foreground` are other commands for those calls, given `settle` seconds to start what they start."""
    background = background or f"sleep {marker}"
    foreground = foreground or f"sleep {in_flight}"
    code = textwrap.dedent(f"""
        import asyncio, sys
        from nbagent import Agent, AssistantMessage, ScriptedModel, ToolCall, toolbox
        {prelude}
        model = ScriptedModel([
            AssistantMessage(tool_calls=[ToolCall(name="shell", arguments={{"command": {background!r}, "background": True}})]),
            AssistantMessage(tool_calls=[ToolCall(name="shell", arguments={{"command": {foreground!r}}})]),
            "done"])
        agent = Agent(model=model, tools=toolbox.all(workspace={str(ws)!r}), mode="bypassPermissions",
                      workspace={str(ws)!r}, sandbox={sandbox!r})
        loop = asyncio.new_event_loop()
        async def main():
            run = agent.start("go")
            while len(run.calls) < 2:
                await asyncio.sleep(0.02)
            await asyncio.sleep({settle})
            print("RUNNING", flush=True)
        loop.run_until_complete(main())
        {ending}
    """)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                          cwd=Path(__file__).resolve().parents[2])


def test_processes_left_running_die_with_the_interpreter(ws: Path, sandbox_lane) -> None:
    marker, in_flight = _marker(35), _marker(37)
    # the run is still in flight: only the exit handler can stop its processes, the background one and the
    # foreground command of the call that was running (under Landlock, with the supervisor that adopts what
    # it leaves: a fork of this interpreter, whose command line names both markers)
    out = _interpreter_with_a_process(ws, marker, "sys.exit(0)", in_flight=in_flight)
    assert "RUNNING" in out.stdout, out.stderr
    assert _gone(marker) and _gone(in_flight)


def test_a_command_dies_with_an_interpreter_killed_outright(ws: Path) -> None:
    # no exit handler runs: Linux kills the command itself (PR_SET_PDEATHSIG); shown without a sandbox,
    # where nothing else would
    marker = _marker(36)
    out = _interpreter_with_a_process(ws, marker, "import os, signal; os.kill(os.getpid(), signal.SIGKILL)",
                                      sandbox="danger-full-access")
    assert "RUNNING" in out.stdout and out.returncode == -9, out.stderr
    assert _gone(marker)


@pytest.mark.parametrize("policy", ["read-only", "workspace-write"])
@pytest.mark.parametrize("ending", ["exits", "killed"])
def test_what_a_sandboxed_command_starts_goes_with_its_interpreter_however_it_ends(
        ws: Path, sandbox_lane, policy: str, ending: str) -> None:
    # the mechanism, for every sandboxed member (each backend, each policy, foreground and background): a command
    # and everything it started go with the interpreter that started it, even what left its process group and
    # its parent (`setsid`, a double fork), and even when the interpreter is killed outright (no exit handler
    # runs: bubblewrap's PID namespace dies with it; under Landlock the command's supervisor catches its death
    # signal and stops all it adopted). Without that signal, every process below outlived a killed interpreter.
    left = [_marker(n) for n in (41, 42, 43, 44)]
    out = _interpreter_with_a_process(
        ws, left[0], "sys.exit(0)" if ending == "exits" else "import os, signal; os.kill(os.getpid(), signal.SIGKILL)",
        sandbox=policy, background=f"setsid sleep {left[0]} & sleep {left[1]}",
        foreground=f"(setsid sleep {left[2]} &); sleep {left[3]}", settle=1.0)
    assert "RUNNING" in out.stdout, out.stderr
    assert out.returncode == (0 if ending == "exits" else -9), out.stderr
    assert all(_gone(marker) for marker in left), [m for m in left if _running(m)]


@pytest.mark.parametrize("ending", ["exits", "killed"])
def test_a_chain_deeper_than_the_supervisor_s_rounds_goes_with_its_interpreter(ws: Path, sandbox_lane, monkeypatch,
                                                                               ending: str) -> None:
    # found by an outside try: a chain of processes deeper than the supervisor's rounds (it stops one generation a
    # round) outlived a killed interpreter; the supervisor then kills the command's whole process group, where
    # everything the command started stays. Rounds cut to 2 (forked: the supervisor is a copy of the interpreter)
    monkeypatch.setenv("NBAGENT_SPAWN", "fork")
    marker = _marker(45)
    chain = (f"env -i bash -c 'link() {{ if [ $1 -gt 0 ]; then link $(($1 - 1)) & wait; else exec sleep 60; fi; }}; "
             f"link 12 # {marker}' > /dev/null 2>&1 & sleep 30")
    out = _interpreter_with_a_process(
        ws, marker, "sys.exit(0)" if ending == "exits" else "import os, signal; os.kill(os.getpid(), signal.SIGKILL)",
        background="sleep 30", foreground=chain, settle=1.5,
        prelude="from nbagent.safety import supervisor; supervisor.ROUNDS = 2")
    assert "RUNNING" in out.stdout, out.stderr
    assert _gone(marker), f"links of the chain outlived the interpreter ({ending})"


def test_every_command_a_tool_starts_is_held_for_the_exit_handler() -> None:
    # the mechanism, for every member: each place in the toolbox that starts a command starts it as its prepared
    # command's `how_to_start()` says (no preexec of its own: it dies with the kernel, forked or launched) and holds
    # the process with `stopped_at_exit` in the same function
    import ast

    import nbagent.toolbox

    starts = []
    for path in sorted(Path(nbagent.toolbox.__file__).parent.glob("*.py")):
        tree = ast.parse(path.read_text())
        for func in ast.walk(tree):
            if not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            calls = [n for n in ast.walk(func) if isinstance(n, ast.Call)]
            names = {ast.unparse(c.func) for c in calls}
            for call in calls:
                if ast.unparse(call.func).endswith(("create_subprocess_exec", "create_subprocess_shell", "Popen")):
                    starts.append(f"{path.name}:{func.name}")
                    keywords = {k.arg: ast.unparse(k.value) for k in call.keywords}
                    if path.name == "_grep.py":  # the regex worker: a helper that ends at its stdin's end
                        continue
                    assert "preexec_fn" not in keywords and keywords.get(None) == "how", f"{path.name}:{func.name}"
                    assert "prepared.how_to_start" in ast.unparse(func), f"{path.name}:{func.name} starts without it"
                    assert "stopped_at_exit" in names, f"{path.name}:{func.name} does not hold its command"
    assert {"_shell.py:shell", "_background.py:start_background"} <= set(starts), starts


@pytest.mark.kernel
@pytest.mark.parametrize("how", ["shutdown", "killed"])
def test_a_kernel_that_goes_takes_its_runs_commands_with_it(ws: Path, sandbox_lane, how: str) -> None:
    # in a real kernel, a run in flight: a background command that started a process in a session of its own,
    # and the foreground command of the call running; a kernel shut down (its exit handlers run) or killed
    # outright (none run: bubblewrap's PID namespace, or Landlock's supervisor, takes them) stops them all
    from tests.jupyter.kernelclient import KernelSession

    background, foreground = _marker(38), _marker(39)
    k = KernelSession(ws)
    try:
        k.execute(textwrap.dedent(f"""
            from nbagent import Agent, AssistantMessage, ScriptedModel, ToolCall, toolbox
            model = ScriptedModel([
                AssistantMessage(tool_calls=[ToolCall(name="shell", arguments={{"command": "(setsid sleep {background} &); sleep 600", "background": True}})]),
                AssistantMessage(tool_calls=[ToolCall(name="shell", arguments={{"command": "sleep {foreground}"}})]),
                "done"])
            agent = Agent(model=model, tools=toolbox.all(workspace={str(ws)!r}), mode="bypassPermissions",
                          workspace={str(ws)!r})
            run = agent.start("go")
        """))
        k.wait_for("len(run.calls) >= 2")
        deadline = time.monotonic() + 30
        while not (_running(background) and _running(foreground)) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _running(background) and _running(foreground)
    finally:
        k.shutdown(now=how == "killed")  # a shutdown_request (its exit handlers run), or SIGKILL
    assert _gone(foreground) and _gone(background)


def test_the_exit_handler_stops_each_command_held_its_own_way(monkeypatch) -> None:
    # a background process's own stop runs even when it has ended (it frees what its sandbox made); a foreground
    # command still running has its family killed; one that ended is left alone
    from nbagent.toolbox import _signals

    class Proc:
        def __init__(self, pid: int, returncode: int | None) -> None:
            self.pid, self.returncode = pid, returncode

    class Background:
        def __init__(self) -> None:
            self.stopped = 0

        def kill_now(self) -> None:
            self.stopped += 1

    killed: list[int] = []
    monkeypatch.setattr(_signals, "kill_family", lambda proc, family=(): killed.append(proc.pid))
    monkeypatch.setattr(_signals, "_HELD", type(_signals._HELD)())
    ended_background, running, ended = Proc(1, 0), Proc(2, None), Proc(3, 0)
    background = Background()
    _signals.stopped_at_exit(ended_background, background.kill_now)
    _signals.stopped_at_exit(running)
    _signals.stopped_at_exit(ended)
    _signals._stop_everything_held()
    assert background.stopped == 1 and killed == [2]


def test_a_pid_found_before_is_killed_only_while_it_is_the_same_process() -> None:
    # pids are reused (a process forking fast goes through all of them in seconds): a pid recorded at the first
    # signal is killed at the last only if the process there started when the recorded one did
    from nbagent.toolbox import _signals

    other = subprocess.Popen(["sleep", "30"])
    gone = subprocess.Popen(["true"])
    gone.wait()
    try:
        family = _signals._Family([other.pid], {other.pid: 1})  # recorded as a process that started at another time
        _signals.kill_family(gone, family)
        time.sleep(0.1)
        assert other.poll() is None  # another process now: left alone
        _signals.kill_family(gone, _signals._Family([other.pid]))  # the same process: killed
        assert other.wait(timeout=10) == -9
    finally:
        other.kill()
        other.wait()
