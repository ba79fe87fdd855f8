"""Starting a command without forking the kernel (`nbagent.safety._launcher`): the same steps as a forked child's,
taken in a small program, chosen when the kernel holds more than `LAUNCH_ABOVE`.

The walls themselves are checked in every sandbox lane, the launched one included (tests/conftest.py
`sandbox_lane`, `landlock-launched`); here: the choice, the program's own failures, its isolation from the
environment it is given, and that what it starts dies with the process that started it."""

from __future__ import annotations

import marshal
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from nbagent.safety import _launcher, sandbox_landlock
from nbagent.safety.sandbox import prepare

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux only")


def test_a_big_process_starts_its_commands_through_the_launcher_and_a_small_one_forks(monkeypatch):
    monkeypatch.delenv("NBAGENT_SPAWN", raising=False)
    prepared = sandbox_landlock.Prepared(["true"])
    monkeypatch.setattr(sandbox_landlock, "LAUNCH_ABOVE", 1 << 50)
    argv, how = prepared.how_to_start()
    assert argv == ["true"] and how["preexec_fn"].args[0][0] == os.getpid()  # forked: dies with this process
    monkeypatch.setattr(sandbox_landlock, "LAUNCH_ABOVE", 0)
    argv, how = prepared.how_to_start()
    assert argv[:4] == [sys.executable, "-I", "-S", _launcher.PROGRAM] and argv[5:] == ["--", "true"]
    assert "preexec_fn" not in how and marshal.loads(bytes.fromhex(argv[4])) == (os.getpid(), None, False, -1, False)
    for chosen, launched in (("fork", False), ("launcher", True), (" Launcher ", True)):
        monkeypatch.setenv("NBAGENT_SPAWN", chosen)
        monkeypatch.setattr(sandbox_landlock, "LAUNCH_ABOVE", 1 << 50 if launched else 0)
        assert (prepared.how_to_start()[0][0] == sys.executable) == launched, chosen


def test_a_landlock_command_s_steps_travel_whole_and_its_ruleset_is_passed(tmp_path, monkeypatch):
    monkeypatch.setenv("NBAGENT_SPAWN", "launcher")
    from nbagent.safety.sandbox import SandboxBackend
    from nbagent.safety.sandbox_linux import landlock_abi

    if landlock_abi() < 1:
        pytest.skip("no Landlock here")
    prepared = prepare(["true"], workspace=tmp_path, policy="workspace-write", backend=SandboxBackend("landlock"))
    try:
        argv, how = prepared.how_to_start()
        spec = marshal.loads(bytes.fromhex(argv[4]))
        assert spec == (os.getpid(), *prepared.setup) and spec[2] is True  # supervised
        assert spec[3] == prepared.ruleset.fd and spec[3] in how["pass_fds"]
        done = subprocess.run(argv, cwd=tmp_path, env={**os.environ, **prepared.env}, capture_output=True, **how)
        assert done.returncode == 0, done.stderr
    finally:
        prepared.cleanup()


@pytest.mark.parametrize("args, code, said", [
    ([], 126, "usage"), (["zz", "--", "true"], 126, "could not be set up"), (["00", "true"], 126, "usage"),
    ([marshal.dumps((1, None, False, -1, False)).hex(), "--", "true"], None, ""),  # its starter is gone: killed
    ([marshal.dumps((os.getpid(), None, False, -1, False)).hex(), "--", "no-such-program-x"], 127, "No such file"),
    ([marshal.dumps((os.getpid(), None, False, 987, False)).hex(), "--", "true"], 126, ""),  # no such ruleset
])
def test_the_launcher_refuses_what_it_cannot_do_and_the_command_does_not_run(args, code, said):
    done = subprocess.run([sys.executable, "-I", "-S", _launcher.PROGRAM, *args], capture_output=True, text=True)
    if code is None:  # pid 1 did not start it: it dies at once, as a command whose kernel died before it asked
        assert done.returncode == -signal.SIGKILL
    else:
        assert done.returncode == code and said in done.stderr, done.stderr


def test_the_launcher_reads_nothing_of_python_s_from_the_environment_it_is_given(tmp_path):
    (tmp_path / "sitecustomize.py").write_text(f"open({str(tmp_path / 'ran')!r}, 'w').close()\n")
    (tmp_path / "startup.py").write_text(f"open({str(tmp_path / 'ran')!r}, 'w').close()\n")
    env = {**os.environ, "PYTHONPATH": str(tmp_path), "PYTHONSTARTUP": str(tmp_path / "startup.py"),
           "PYTHONUSERBASE": str(tmp_path), "PYTHONINSPECT": "1"}
    spec = marshal.dumps((os.getpid(), None, False, -1, False)).hex()
    done = subprocess.run([sys.executable, "-I", "-S", _launcher.PROGRAM, spec, "--", "sh", "-c", "echo ok"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=30)
    assert done.stdout == "ok\n" and not (tmp_path / "ran").exists(), done.stderr


def test_what_the_launcher_starts_dies_with_the_process_that_started_it(tmp_path):
    # a parent (as a kernel) starts a command through the launcher, then is killed outright: no exit handler runs
    suffix = f"{os.getpid()}-{time.monotonic_ns()}"
    marker = f"nbagent-launched-{suffix}"  # (the parent's own command line holds only the suffix)
    parent = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import os, subprocess, sys, time
        sys.path.insert(0, {str(Path(__file__).resolve().parents[2])!r})
        from nbagent.safety import sandbox_landlock
        os.environ["NBAGENT_SPAWN"] = "launcher"
        name = "nbagent-launched-" + sys.argv[1]
        argv, how = sandbox_landlock.Prepared(["bash", "-c", f"exec -a {{name}} sleep 60"]).how_to_start()
        assert argv[0] == sys.executable
        subprocess.Popen(argv, **how)
        print("started", flush=True)
        time.sleep(60)
        """), suffix], stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout.readline().strip() == "started"
        assert _alive(f"^{marker}", 10)  # the command itself (not the launcher before its exec: that one, whose
        parent.kill()  # starter dies before it asked, kills itself, which `test_the_launcher_refuses_...` checks)
        parent.wait()
        assert _gone(marker, 5), "the command outlived the process that started it"
    finally:
        parent.kill()
        subprocess.run(["pkill", "-9", "-f", marker], check=False)


def _alive(marker: str, within: float) -> bool:
    end = time.monotonic() + within
    while True:
        if subprocess.run(["pgrep", "-f", marker], capture_output=True).returncode == 0:
            return True
        if time.monotonic() >= end:
            return False
        time.sleep(0.05)


def _gone(marker: str, within: float) -> bool:
    end = time.monotonic() + within
    while subprocess.run(["pgrep", "-f", marker], capture_output=True).returncode == 0:
        if time.monotonic() >= end:
            return False
        time.sleep(0.05)
    return True


def test_a_kernel_whose_python_lies_in_its_workspace_forks_its_commands(tmp_path, monkeypatch):
    # the launcher runs before the sandbox is in place: an interpreter, a standard library or a launcher that a
    # command may have rewritten (a project's .venv inside the workspace) would run outside it
    monkeypatch.setenv("NBAGENT_SPAWN", "launcher")
    outside = sandbox_landlock.Prepared(["true"], workspace=str(tmp_path))
    assert outside.how_to_start()[0][0] == sys.executable
    for where in (os.path.dirname(os.path.dirname(sys.executable)), os.path.dirname(_launcher.PROGRAM),
                  os.path.realpath(sys.base_prefix)):
        inside = sandbox_landlock.Prepared(["true"], workspace=os.path.realpath(where))
        argv, how = inside.how_to_start()
        assert argv == ["true"] and "preexec_fn" in how, where


def test_every_file_the_launcher_loads_lies_where_the_workspace_check_looks():
    # the mechanism behind the check above, for every member: each module the launcher's interpreter has loaded by
    # the time it would exec the command lies under a place `_writable_launcher` looks at (so a workspace holding
    # any of them makes the kernel fork instead)
    code = ("import runpy, sys; runpy.run_path(sys.argv[1], run_name='loaded'); "
            "print('\\n'.join(getattr(m, '__file__', None) or '' for m in list(sys.modules.values())))")
    done = subprocess.run([sys.executable, "-I", "-S", "-c", code, _launcher.PROGRAM], capture_output=True,
                          text=True, check=True)
    files = [os.path.realpath(f) for f in done.stdout.split("\n") if f]
    assert any(f.endswith("sandbox_linux.py") for f in files) and any(f.endswith("supervisor.py") for f in files)
    roots = [os.path.realpath(r) for r in sandbox_landlock._launcher_reads()]
    outside = [f for f in files if not any(f == r or f.startswith(r.rstrip("/") + "/") for r in roots)]
    assert not outside, outside
