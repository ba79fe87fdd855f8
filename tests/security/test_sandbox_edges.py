"""Sandbox edges (SECURITY.md invariant 6): what an approved shell command (workspace-write, network off)
can still reach. The approver approves, as a person would approve `python3 tool.py`: the sandbox is the
wall for what the program then does.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import tempfile
import time
from pathlib import Path

import pytest

from nbagent import Agent, toolbox
from nbagent.safety import sandbox_landlock
from nbagent.safety.sandbox import sandbox_backend

from .conftest import Recorder, sh, ws  # noqa: F401 - fixtures
from .recorders import UDPRecorder, UnixRecorder, turns

PY = shutil.which("python3") or "python3"


@pytest.fixture(autouse=True)
def backend(sandbox_lane):
    """Every test runs in each sandbox lane this machine has (tests/conftest.py: bubblewrap, Landlock with a
    mount namespace, Landlock alone as in a container without privileges)."""
    return sandbox_lane


def _approved(ws: Path, command: str, **kw):
    agent = Agent(model=turns(sh(command, timeout=30)), tools=toolbox.all(workspace=ws), approver=Recorder(True),
                  workspace=ws, **kw)
    run = agent.run_sync("go")
    return run, (run.calls[0].result.text if run.calls[0].result else "")


def _py(code: str) -> str:
    return f"{PY} -c {json.dumps(code)}"


def test_network_off_blocks_udp(ws):
    udp = UDPRecorder()
    try:
        _approved(ws, _py(f"import socket; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); "
                          f"s.sendto(b'leak', ('127.0.0.1', {udp.port}))"))
        got = udp.received()
    finally:
        udp.close()
    assert got == b"", "network off, yet a UDP datagram left the sandbox"


def test_network_off_blocks_named_unix_sockets_outside_the_workspace(ws, tmp_path):
    server = UnixRecorder(tmp_path / "agent.sock")  # an ssh-agent, a docker or D-Bus socket stands here
    try:
        _approved(ws, _py(f"import socket; s=socket.socket(socket.AF_UNIX); s.connect({str(server.path)!r}); "
                          "s.send(b'leak')"))
        time.sleep(0.3)
    finally:
        server.close()
    assert server.got == [], "network off, yet the command talked to a unix socket outside the workspace"


def test_network_off_blocks_abstract_unix_sockets(ws):
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    name = f"\0rt3-{os.getpid()}"
    srv.bind(name)
    srv.listen(1)
    srv.settimeout(1.5)
    try:
        _approved(ws, _py(f"import socket; s=socket.socket(socket.AF_UNIX); s.connect({name!r}); s.send(b'x')"))
        try:
            conn, _ = srv.accept()
            conn.close()
            connected = True
        except OSError:
            connected = False
    finally:
        srv.close()
    assert not connected


def test_network_off_blocks_tcp_and_control_network_on_allows_it(ws):
    """Control: with network=True the same TCP connect works; off, it does not."""
    from nbagent.safety.sandbox import SandboxPolicy

    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(4)
    srv.settimeout(1.5)
    port = srv.getsockname()[1]
    code = _py(f"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=2).send(b'x')")

    def accepted() -> bool:
        try:
            srv.accept()[0].close()
            return True
        except OSError:
            return False

    try:
        _approved(ws, code)
        off = accepted()
        _approved(ws, code, sandbox=SandboxPolicy("workspace-write", network=True))
        on = accepted()
    finally:
        srv.close()
    assert not off and on


@pytest.fixture
def fake_home(backend, monkeypatch):
    """A home outside /tmp whose ~/.local/bin is on PATH (as pip --user puts it), with a Jupyter kernel file."""
    home = Path(tempfile.mkdtemp(prefix="rt3-home-", dir="/var/tmp"))
    (home / ".local" / "bin").mkdir(parents=True)
    runtime = home / ".local" / "share" / "jupyter" / "runtime"
    runtime.mkdir(parents=True)
    (runtime / "kernel-1.json").write_text(json.dumps({"key": "rt3-kernel-hmac-5a8e2c", "shell_port": 1}))
    (home / ".ssh").mkdir()
    (home / ".ssh" / "id_ed25519").write_text("rt3-ssh-private-key-9d3f\n")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("PATH", f"{home}/.local/bin:{os.environ['PATH']}")
    sandbox_backend.cache_clear()
    yield home
    sandbox_backend.cache_clear()
    shutil.rmtree(home, ignore_errors=True)


def test_path_entry_in_home_does_not_expose_jupyter_runtime(ws, fake_home):
    _, text = _approved(ws, f"cat {fake_home}/.local/share/jupyter/runtime/kernel-1.json")
    assert "rt3-kernel-hmac" not in text, "~/.local on PATH exposed the Jupyter runtime folder (kernel keys)"


def test_control_home_credentials_are_hidden(ws, fake_home):
    """Control: the rest of the home stays unreadable, and a command in ~/.local/bin still runs."""
    tool = fake_home / ".local" / "bin" / "rt3tool"
    tool.write_text("#!/bin/sh\necho rt3tool-ran\n")
    tool.chmod(0o755)
    _, text = _approved(ws, f"cat {fake_home}/.ssh/id_ed25519; rt3tool")
    assert "rt3-ssh-private-key" not in text and "rt3tool-ran" in text


def _repo(ws: Path) -> None:
    (ws / ".git" / "hooks").mkdir(parents=True)
    (ws / ".git" / "config").write_text("[core]\n\trepositoryformatversion = 0\n")
    (ws / ".git" / "HEAD").write_text("ref: refs/heads/main\n")


def test_workspace_write_keeps_git_hooks_read_only(ws):
    _repo(ws)
    _approved(ws, "printf '#!/bin/sh\\ntouch PWNED\\n' > .git/hooks/pre-commit")
    assert not (ws / ".git" / "hooks" / "pre-commit").exists()


def test_workspace_write_keeps_git_config_from_being_renamed_away(ws):
    _repo(ws)
    _approved(ws, "mv .git .git-old && mkdir -p .git && cp -r .git-old/. .git/ && "
                  "printf '[core]\\n\\tfsmonitor = ./x\\n' > .git/config")
    assert "fsmonitor" not in (ws / ".git" / "config").read_text()


def test_workspace_write_keeps_nbagent_folder_read_only(ws):
    _approved(ws, "mkdir -p .nbagent && echo '{}' > .nbagent/mcp.json")
    assert not (ws / ".nbagent" / "mcp.json").exists()


def test_control_workspace_write_writes_the_workspace(ws, backend):
    if not (backend.name == "bubblewrap" or backend.mounts):  # Landlock alone cannot keep .git read-only under a
        (ws / "sub").mkdir()  # writable top level: the top level is not writable there, what is below it is
        (ws / "made.txt").write_text("")
        run, _ = _approved(ws, "echo made > made.txt; echo made > sub/new.txt")
        assert (ws / "sub" / "new.txt").read_text() == "made\n"
    else:
        run, _ = _approved(ws, "echo made > made.txt")
    assert (ws / "made.txt").read_text() == "made\n" and run.calls[0].status == "ok"


def test_no_process_outlives_the_call(ws):
    """A program that clears its environment and leaves a child behind: it must be gone when the call ends."""
    _approved(ws, "setsid env -i /bin/sh -c 'sleep 2; echo late > late.txt' > /dev/null 2>&1 & sleep 0.5")
    time.sleep(3.5)
    assert not (ws / "late.txt").exists(), "a process the command started went on after the call ended"


def test_defence_off_without_the_subreaper_a_cleared_environment_escapes(ws, backend, monkeypatch):
    """Landlock has no PID namespace: what stops such a process is the process the command was started as,
    which adopts what the command leaves (a subreaper), and the kill of the command's process group once it has
    ended. Both turned off, the marker sweep alone misses it."""
    if backend.name != "landlock":
        pytest.skip("bubblewrap's PID namespace is the defence there")
    from nbagent.safety import supervisor

    monkeypatch.setenv("NBAGENT_SPAWN", "fork")  # (the patch below holds in this process only)
    monkeypatch.setattr(supervisor, "supervise_command", lambda: None)
    monkeypatch.setattr(sandbox_landlock.os, "killpg", lambda *a: None)  # (the group kill after the command)
    _approved(ws, "setsid env -i /bin/sh -c 'sleep 1; echo late > late.txt' > /dev/null 2>&1 & sleep 0.2")
    for _ in range(60):
        if (ws / "late.txt").exists():
            break
        time.sleep(0.1)
    assert (ws / "late.txt").exists()


def test_read_deny_holds_in_skipped_folders(ws):
    """deny: read_file(.env): a .env inside node_modules (a folder the scan skips) read by an approved tar."""
    (ws / "node_modules" / "pkg").mkdir(parents=True)
    (ws / "node_modules" / "pkg" / ".env").write_text("TOKEN=rt3-deny-hidden-4b7c\n")
    agent = Agent(model=turns(sh("tar -cf - node_modules | tar -xOf -")), tools=toolbox.all(workspace=ws),
                  approver=Recorder(True), workspace=ws, rules=["deny: read_file(.env)"])
    run = agent.run_sync("go")
    assert "rt3-deny-hidden" not in (run.calls[0].result.text if run.calls[0].result else "")


def test_control_read_deny_named_file_refused(ws):
    (ws / ".env").write_text("TOKEN=rt3-deny-hidden-4b7c\n")
    agent = Agent(model=turns(sh("cat .env"), sh("cat notes.md")), tools=toolbox.all(workspace=ws),
                  approver=Recorder(True), workspace=ws, rules=["deny: read_file(.env)"])
    run = agent.run_sync("go")
    assert "rt3-deny-hidden" not in run.calls[0].result.text and "hello notes" in run.calls[1].result.text


def _sibling(*argv: str):
    import subprocess
    import sys

    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)", *argv])


def test_other_processes_command_lines_are_not_readable(ws, backend):
    """A Jupyter server started with --IdentityProvider.token=...: its command line in /proc."""
    if backend.name == "landlock":
        pytest.skip("Landlock has no PID namespace: other processes' /proc entries stay readable (README: what "
                    "the sandbox guarantees per backend); bubblewrap hides them")
    proc = _sibling("--IdentityProvider.token=rt3-jupyter-token-83c1")
    try:
        _, text = _approved(ws, f"tr '\\0' ' ' < /proc/{proc.pid}/cmdline; echo; tr '\\0' ' ' < /proc/{os.getpid()}/cmdline")
    finally:
        proc.kill()
        proc.wait()
    assert "rt3-jupyter-token" not in text, "the sandbox shows other processes' /proc (their command lines)"


def test_control_signals_to_processes_outside_are_refused(ws):
    proc = _sibling()
    try:
        _approved(ws, f"kill -9 {proc.pid}")
        time.sleep(0.3)
        alive = proc.poll() is None
    finally:
        proc.kill()
        proc.wait()
    assert alive


def _deny_env_make(ws: Path, where: str):
    target = ws / where / ".env"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text("TOKEN=rt3-deny-hidden-4b7c\n")
    (ws / "Makefile").write_text(f"all:\n\tcat {where}/.env\n")
    agent = Agent(model=turns(sh("make")), tools=toolbox.all(workspace=ws), approver=Recorder(True),
                  workspace=ws, rules=["deny: read_file(.env)"])
    run = agent.run_sync("go")
    return run.calls[0].result.text if run.calls[0].result else ""


def test_read_deny_hides_files_in_folders_the_scan_skips(ws):
    """An approved `make` (a program the person knows) whose Makefile reads node_modules/pkg/.env."""
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    text = _deny_env_make(ws, "node_modules/pkg")
    assert "rt3-deny-hidden" not in text, "a .env in a folder the hiding scan skips was readable"


def test_read_deny_fails_closed_past_the_scan_limit(ws, monkeypatch):
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    from nbagent.safety import sandbox

    # the limit lowered (it is read when a command is prepared): the same folder past it, 2,100 files to make
    # and remove instead of 50,100 (about 8 s of each lane's time, and as long again removing them)
    monkeypatch.setattr(sandbox, "HIDDEN_SCAN_LIMIT", 2_000)
    big = ws / "data"
    big.mkdir()
    for i in range(sandbox.HIDDEN_SCAN_LIMIT + 100):
        (big / f"f{i:06d}").touch()
    text = _deny_env_make(ws, "data/zz")
    assert "rt3-deny-hidden" not in text, "past the scan limit the .env was not hidden, and the command still ran"


def test_control_read_deny_hides_a_top_level_file_from_make(ws, backend):
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    if not (backend.name == "bubblewrap" or backend.mounts):
        pytest.skip("Landlock alone cannot show a hidden file empty (README); the classifier must refuse instead")
    text = _deny_env_make(ws, "config")
    assert "rt3-deny-hidden" not in text and "cat config/.env" in text  # make ran; the file looked empty


def test_network_off_blocks_unix_sockets_inside_the_workspace(ws):
    """A dev server's or a kernel's (ipc transport) socket file in the workspace: reachable with network off."""
    server = UnixRecorder(ws / "dev.sock")
    try:
        _approved(ws, _py("import socket; s=socket.socket(socket.AF_UNIX); s.connect('dev.sock'); s.send(b'leak')"))
        time.sleep(0.3)
    finally:
        server.close()
    assert server.got == [], "network off, yet the command talked to a unix socket"
