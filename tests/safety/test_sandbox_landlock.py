"""How the Landlock backend keeps protected paths (`nbagent.safety.sandbox_landlock`): with a mount namespace
where the process may make one, by a copy put back after the command where it may not (the top level
closed only where a read deny rule hides something there, or the copy would be too large), and what each
says."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from nbagent.safety import sandbox_landlock, sandbox_linux
from nbagent.safety.sandbox import SandboxBackend, prepare
from nbagent.safety.sandbox_linux import MountPlan, landlock_abi, mount_namespace

needs_landlock = pytest.mark.skipif(landlock_abi() < 1, reason="no Landlock here")
needs_mounts = pytest.mark.skipif(not mount_namespace(), reason="this process cannot make a mount namespace")
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    (ws / ".git" / "hooks").mkdir(parents=True)
    (ws / ".git" / "config").write_text("[core]\n")
    (ws / ".mcp.json").write_text("{}")
    (ws / "data").mkdir()
    (ws / "data" / ".env").write_text("TOKEN=x\n")
    return ws


def _landlock(mounts: bool) -> SandboxBackend:
    return SandboxBackend("landlock", mounts=mounts)


@needs_landlock
def test_without_a_mount_namespace_protected_paths_are_copied_and_the_top_level_is_open(repo: Path) -> None:
    prepared = prepare(["true"], workspace=repo, backend=_landlock(False))
    try:
        assert prepared.mounts is None and prepared.top_level == ""
        assert prepared.copy is not None and {".git/config", ".mcp.json"} <= set(prepared.copy.entries)
        assert not (repo / ".nbagent").exists()  # nothing made for a mount that will not happen
    finally:
        prepared.cleanup()
    assert prepared.copy is None and prepared.put_back == []


@needs_landlock
def test_without_a_mount_namespace_a_hidden_file_still_closes_the_top_level_and_says_why(repo: Path) -> None:
    (repo / "secret.txt").write_text("x")
    prepared = prepare(["true"], workspace=repo, backend=_landlock(False), hidden=[repo / "secret.txt"])
    try:
        assert prepared.top_level.startswith("the top level holds secret.txt (hidden by a read deny rule")
    finally:
        prepared.cleanup()


@needs_landlock
def test_protected_paths_too_large_to_copy_stay_read_only_and_close_the_top_level(repo: Path, monkeypatch) -> None:
    from nbagent.safety import sandbox_restore

    monkeypatch.setattr(sandbox_restore, "COPY_LIMIT", 3)
    prepared = prepare(["true"], workspace=repo, backend=_landlock(False))
    try:
        assert prepared.copy is None
        assert prepared.top_level.startswith("the top level holds .git, .mcp.json (protected paths, kept read-only: "
                                             "too large to copy and put back: more than 3 bytes")
    finally:
        prepared.cleanup()


@needs_landlock
def test_with_a_mount_namespace_protected_paths_are_mounts_and_the_top_level_is_open(repo: Path) -> None:
    prepared = prepare(["true"], workspace=repo, backend=_landlock(True), hidden=[repo / "data" / ".env"])
    try:
        assert prepared.top_level == ""
        ws = os.path.realpath(repo)
        assert {f"{ws}/.git", f"{ws}/.mcp.json", f"{ws}/.nbagent", f"{ws}/data/.env"} <= set(prepared.mounts.paths)
    finally:
        prepared.cleanup()


@needs_landlock
def test_the_read_only_policy_needs_no_mounts(repo: Path) -> None:
    prepared = prepare(["true"], workspace=repo, backend=_landlock(True), policy="read-only")
    try:
        assert prepared.mounts is None and prepared.top_level == "" and not prepared.watched
    finally:
        prepared.cleanup()


@needs_mounts
def test_a_mount_that_fails_stops_the_command_before_it_runs(tmp_path: Path) -> None:
    plan = MountPlan(read_only=[str(tmp_path / "no-such-path")])
    done = subprocess.run([sys.executable, "-c", "open('ran', 'w')"], cwd=tmp_path, preexec_fn=plan.apply,
                          capture_output=True, text=True, check=False)
    assert done.returncode == 126 and "could not be set up" in done.stderr and "did not run" in done.stderr
    assert not (tmp_path / "ran").exists()


@needs_mounts
def test_mounts_stay_in_the_command_s_namespace(tmp_path: Path) -> None:
    (tmp_path / "kept").mkdir()
    plan = MountPlan(read_only=[str(tmp_path / "kept")])
    done = subprocess.run(["sh", "-c", "touch kept/x; grep -c kept /proc/self/mountinfo"], cwd=tmp_path,
                          preexec_fn=plan.apply, capture_output=True, text=True, check=False)
    assert "Read-only file system" in done.stderr and done.stdout.strip() == "1"
    with open("/proc/self/mountinfo") as f:
        assert str(tmp_path / "kept") not in f.read()  # this process never sees it


def test_a_replaced_protected_link_is_put_back(tmp_path: Path) -> None:
    (tmp_path / "conf.json").write_text("{}")
    os.symlink("conf.json", tmp_path / ".mcp.json")
    links = sandbox_landlock.protected_links(tmp_path)
    assert links == {str(tmp_path / ".mcp.json"): "conf.json"}
    (tmp_path / ".mcp.json").unlink()
    (tmp_path / ".mcp.json").mkdir()
    (tmp_path / ".mcp.json" / "x").write_text("planted")
    assert sandbox_landlock.restore_links(links) == [str(tmp_path / ".mcp.json")]
    assert os.readlink(tmp_path / ".mcp.json") == "conf.json"
    assert sandbox_landlock.restore_links(links) == []  # control: a link in place is left alone


def test_the_header_says_when_landlock_has_no_mount_namespace() -> None:
    assert "no mount namespace" in _landlock(False).describe("workspace-write")
    assert _landlock(True).describe("workspace-write") == "sandbox: landlock, workspace-write"
    assert _landlock(False).describe("read-only") == "sandbox: landlock, read-only"


def test_a_process_without_cap_sys_admin_gets_landlock_alone(tmp_path: Path) -> None:
    """Root without CAP_SYS_ADMIN (forced to Landlock, as where bubblewrap has no user namespaces) is what a
    container gives: no mount namespace is found; a new entry next to `.git` is made, one in `.git` removed after
    the command, and the result says so."""
    if os.geteuid() != 0 or not Path("/usr/bin/setpriv").exists() or landlock_abi() < 1:
        pytest.skip("needs root, setpriv (to drop a capability) and Landlock")
    ws = tmp_path / "ws"
    (ws / ".git").mkdir(parents=True)
    code = ("from nbagent import Agent, AssistantMessage, ScriptedModel, ToolCall, toolbox\n"
            "from nbagent.safety.sandbox import sandbox_backend\n"
            f"ws = {str(ws)!r}\n"
            "print('MOUNTS', sandbox_backend().mounts)\n"
            "m = ScriptedModel([AssistantMessage(tool_calls=[ToolCall(name='shell', arguments={'command': "
            "'echo hi > notes.txt; echo ok > .git/x'})]), 'done'])\n"
            "run = Agent(model=m, tools=toolbox.all(workspace=ws), mode='bypassPermissions').run_sync('go')\n"
            "print(run.calls[0].result.text)\n")
    env = {**os.environ, "NBAGENT_SANDBOX": "landlock", "PYTHONPATH": str(ROOT)}
    out = subprocess.run(["/usr/bin/setpriv", "--bounding-set=-sys_admin", "--inh-caps=-sys_admin", sys.executable,
                          "-c", code], capture_output=True, text=True, timeout=60, env=env, check=False)
    assert "MOUNTS False" in out.stdout, out.stderr
    assert "exit code 0; protected paths were changed while it ran and were put back after it" in out.stdout
    assert ".git/x (made by the command: removed)" in out.stdout
    assert (ws / "notes.txt").read_text() == "hi\n" and not (ws / ".git" / "x").exists()


def test_the_filter_refuses_what_it_says_for_each_setting() -> None:
    # the one seccomp program of every backend (tests/security/test_process_walls.py tries it from commands):
    # tracing and another's limits always; sockets only with the network off
    for network in (False, True):
        flt = sandbox_linux.CommandFilter(network=network)
        if not flt.supported:
            pytest.skip("no system-call numbers for this machine")
        code = textwrap.dedent(f"""
            import ctypes, os, socket, sys
            sys.path.insert(0, {str(Path(__file__).resolve().parents[2])!r})
            from nbagent.safety import sandbox_linux
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(38, 1, 0, 0, 0)  # no_new_privs
            assert sandbox_linux.CommandFilter(network={network}).install()
            out = []
            out.append("ptrace:" + str(libc.ptrace(16, os.getppid(), 0, 0) == 0))
            new = (ctypes.c_uint64 * 2)(1024, 1024)
            out.append("prlimit-other:" + str(libc.prlimit(os.getppid(), 7, new, None) == 0))
            out.append("prlimit-self:" + str(libc.prlimit(0, 7, new, None) == 0))
            old = (ctypes.c_uint64 * 2)()
            out.append("read-other:" + str(libc.prlimit(os.getppid(), 7, None, old) == 0))
            group = os.getpgrp()
            os.setsid()  # said done (it raises otherwise), nothing done
            out.append("setsid:" + str(os.getpgrp() == group))
            try:
                socket.socket().close()
                out.append("socket:True")
            except OSError:
                out.append("socket:False")
            print(" ".join(out))
        """)
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False)
        assert done.stdout.split() == ["ptrace:False", "prlimit-other:False", "prlimit-self:True", "read-other:True",
                                       "setsid:True", f"socket:{network}"], done.stderr
