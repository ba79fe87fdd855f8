"""The OS sandbox, proved by commands the classifier gets wrong on purpose.

`misclassified` makes the classifier call every command read-only, as a bug in it would: the command is
auto-allowed, and the sandbox is then the only wall. Each attack has a control showing the same
mechanism working for a legitimate command.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from nbagent import Agent, AssistantMessage, ScriptedModel, ToolCall, toolbox
from nbagent.safety import sandbox as _sandbox
from nbagent.safety.sandbox import SandboxPolicy, sandbox_backend, sandbox_command
from nbagent.toolbox import _shell
from tests.toolbox.test_shell_tool import _gone, _marker

pytestmark = pytest.mark.skipif(not sandbox_backend().available,
                                reason=f"no sandbox here: {sandbox_backend().reason}")


@pytest.fixture(autouse=True)
def backend(sandbox_lane):
    """Every test runs in each sandbox lane this machine has (tests/conftest.py: bubblewrap, Landlock with a
    mount namespace, Landlock alone as in a container without privileges)."""
    return sandbox_lane


def bubblewrap_only(backend) -> None:
    if backend.name != "bubblewrap":
        pytest.skip("Landlock cannot do this (see nbagent.safety.sandbox)")


@pytest.fixture
def misclassified(monkeypatch: pytest.MonkeyPatch) -> None:
    """The classifier calls everything read-only and sees no deny rule in any line (bugs, on purpose)."""
    monkeypatch.setattr(_shell, "read_only_problem", lambda *a, **k: None)
    monkeypatch.setattr(_shell, "reveals_denied", lambda *a, **k: None)


def shell(ws: Path, command: str, *, mode: str = "default", sandbox="workspace-write", rules=(), asked=None):
    def approver(request):
        if asked is not None:
            asked.append(request)
        return True

    model = ScriptedModel([AssistantMessage(tool_calls=[ToolCall(name="shell", arguments={"command": command})]),
                           "done"])
    agent = Agent(model=model, tools=toolbox.all(workspace=ws), mode=mode, sandbox=sandbox,
                  rules=list(rules), approver=approver)
    return agent.run_sync("go").calls[0]


# -- read-only: what auto-allow runs ---------------------------------------------------------------------

def test_a_write_disguised_as_a_read_changes_nothing(misclassified, ws: Path, outside: Path) -> None:
    asked: list = []
    rec = shell(ws, "echo pwned > notes.txt; echo pwned > new.txt; echo pwned > ../outside/secret.txt; "
                    "rm -f data/a.csv; mkdir made", asked=asked)
    assert not asked and rec.decision.source == "read_only"  # it was auto-allowed: only the sandbox stood
    assert rec.details.sandbox == "read-only"
    assert (ws / "notes.txt").read_text() == "alpha\nbeta\ngamma\n"
    assert not (ws / "new.txt").exists() and not (ws / "made").exists()
    assert (ws / "data" / "a.csv").exists()
    assert (outside / "secret.txt").read_text() == "TOP SECRET\n"
    assert "read-only sandbox" in rec.result.text  # the model is told why


def test_control_a_real_read_works_in_the_read_only_sandbox(ws: Path) -> None:
    rec = shell(ws, "cat notes.txt")
    assert rec.decision.source == "read_only" and rec.details.sandbox == "read-only"
    assert rec.status == "ok" and "beta" in rec.details.stdout


def test_a_read_through_a_symlink_out_of_the_workspace_returns_nothing(misclassified, ws: Path) -> None:
    rec = shell(ws, "cat link_out; ls dir_out; cat dir_out/secret.txt; ls -LR .")
    assert "TOP SECRET" not in rec.details.output
    control = shell(ws, "cat link_out", sandbox="danger-full-access", mode="bypassPermissions")
    assert "TOP SECRET" in control.details.output  # without the sandbox the link does lead out


def test_control_a_symlink_inside_the_workspace_is_followed(ws: Path) -> None:
    rec = shell(ws, "cat link_in", mode="bypassPermissions")
    assert rec.details.stdout == "alpha\nbeta\ngamma\n"


def test_the_home_directory_is_empty_inside(misclassified, ws: Path, tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_rsa").write_text("PRIVATE KEY\n")
    monkeypatch.setenv("HOME", str(home))
    rec = shell(ws, "cat ~/.ssh/id_rsa; ls -a ~")
    assert "PRIVATE KEY" not in rec.details.output and rec.details.stdout.split() in ([".", ".."], [])
    control = shell(ws, "cat ~/.ssh/id_rsa", sandbox="danger-full-access", mode="bypassPermissions")
    assert "PRIVATE KEY" in control.details.output


def test_files_hidden_by_read_deny_rules_look_empty(misclassified, ws: Path, backend) -> None:
    # bubblewrap shows them empty; Landlock refuses to open them (no rule reaches them)
    rec = shell(ws, "cat .env; grep -r sk- . ; base64 .env", rules=["deny: read_file(.env)"])
    assert "sk-123" not in rec.details.output
    assert "c2stMTIz" not in rec.details.output  # base64 of sk-123
    control = shell(ws, "cat .env")  # no rule: the file is there
    assert "sk-123" in control.details.output


def test_credentials_are_not_in_a_sandboxed_environment(misclassified, ws: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-this-must-not-leak-0123456789abcdef")
    monkeypatch.setenv("NBAGENT_TEST_PLAIN", "plain-value")
    rec = shell(ws, "env")
    assert "sk-this-must-not-leak" not in rec.details.output
    assert "plain-value" in rec.details.output  # control: the rest of the environment is there


# -- processes: nothing outlives the call ----------------------------------------------------------------

@pytest.mark.parametrize("start", [
    "setsid sleep 41.301 &",
    "nohup sleep 41.301 >/dev/null 2>&1 &",
    "(sleep 41.301 &) ; disown -a;",
    "sh -c 'sleep 41.301 >/dev/null 2>&1 & exit 0';",
])
def test_a_forked_daemon_is_gone_when_the_call_ends(ws: Path, start: str) -> None:
    marker = _marker(41)
    start = start.replace("41.301", marker)
    rec = shell(ws, start + " echo started", mode="bypassPermissions")
    assert rec.status == "ok" and "started" in rec.details.stdout
    assert _gone(marker)


def test_a_delayed_write_from_a_background_process_never_happens(ws: Path) -> None:
    rec = shell(ws, "(sleep 0.5; echo late > late.txt) & echo now", mode="bypassPermissions")
    assert rec.details.stdout == "now\n"
    time.sleep(1.0)
    assert not (ws / "late.txt").exists()


def test_control_without_a_sandbox_the_background_process_survives(ws: Path) -> None:
    rec = shell(ws, "(sleep 0.3; echo late > late.txt) & echo now", mode="bypassPermissions",
                sandbox="danger-full-access")
    assert rec.details.sandbox == "none"
    for _ in range(40):
        if (ws / "late.txt").exists():
            break
        time.sleep(0.05)
    assert (ws / "late.txt").exists()


# -- workspace-write: what an approval runs --------------------------------------------------------------

def test_an_approved_command_writes_in_the_workspace_only(ws: Path, outside: Path, backend) -> None:
    asked: list = []
    escape = Path(f"/tmp/nbagent-escape-{os.getpid()}-{time.time_ns()}.txt")
    made = "made.txt"  # the top level too, in every lane (Landlock alone puts protected paths back after it)
    rec = shell(ws, f"echo made > {made}; echo x > ../outside/secret.txt; echo y > {escape}; cat {made}",
                asked=asked)
    assert asked and rec.details.sandbox == "workspace-write"
    assert (ws / made).read_text() == "made\n"
    assert (outside / "secret.txt").read_text() == "TOP SECRET\n"
    assert not escape.exists()


def test_protected_paths_stay_read_only(ws: Path, backend) -> None:
    made = "made.txt"
    git = ws / ".git"
    (git / "hooks").mkdir(parents=True)
    (git / "config").write_text("[core]\n")
    (ws / ".nbagent").mkdir()
    rec = shell(ws, "echo '[core] fsmonitor = touch pwned' >> .git/config; echo x > .git/hooks/pre-commit; "
                    "echo x > .nbagent/session.jsonl; echo x > .git/HEAD_NOTE; "
                    f"echo ok > {made}", mode="bypassPermissions")
    assert (git / "config").read_text() == "[core]\n"
    assert not (git / "hooks" / "pre-commit").exists()
    assert not (ws / ".nbagent" / "session.jsonl").exists()
    assert not (git / "HEAD_NOTE").exists()  # .git is protected whole (nbagent.safety.protected.PROTECTED_PATHS)
    assert (ws / made).read_text() == "ok\n"  # control: the rest of the workspace is writable


def _listener() -> tuple[int, Callable[[], list[bytes]]]:
    """A port to connect to, and what reached it, read once the command has ended (a connection the command made
    is queued by then, with what it sent: nothing to wait for)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)

    def received() -> list[bytes]:
        server.settimeout(0.2)
        try:
            conn, _ = server.accept()
            conn.settimeout(2)
            with conn:
                return [conn.recv(100)]
        except OSError:
            return []
        finally:
            server.close()

    return server.getsockname()[1], received


def test_the_network_is_off(ws: Path) -> None:
    port, received = _listener()
    rec = shell(ws, f"echo hello > /dev/tcp/127.0.0.1/{port}", mode="bypassPermissions")
    assert not received() and rec.status == "error"


def test_control_the_network_when_the_policy_allows_it(ws: Path) -> None:
    port, received = _listener()
    rec = shell(ws, f"echo hello > /dev/tcp/127.0.0.1/{port}", mode="bypassPermissions",
                sandbox=SandboxPolicy("workspace-write", network=True))
    assert rec.status == "ok" and received() == [b"hello\n"]


def test_a_process_in_the_sandbox_has_no_capabilities(ws: Path, backend) -> None:
    rec = shell(ws, "grep CapEff /proc/self/status; grep NoNewPrivs /proc/self/status", mode="bypassPermissions")
    assert "NoNewPrivs:\t1" in rec.details.stdout  # setuid programs cannot raise privileges
    if backend.name == "bubblewrap":
        assert "CapEff:\t0000000000000000" in rec.details.stdout


# -- where there is none ---------------------------------------------------------------------------------

def test_no_sandbox_is_said_plainly(monkeypatch: pytest.MonkeyPatch, ws: Path) -> None:
    monkeypatch.setenv("NBAGENT_SANDBOX", "none")
    sandbox_backend.cache_clear()
    try:
        backend = sandbox_backend()
        assert not backend.available
        assert backend.describe("workspace-write").startswith("no sandbox (NBAGENT_SANDBOX=none)")
        assert sandbox_command(["true"], workspace=ws) == ["true"]
        rec = shell(ws, "echo hi", mode="bypassPermissions")
        assert rec.details.sandbox == "none" and rec.details.stdout == "hi\n"
    finally:
        monkeypatch.delenv("NBAGENT_SANDBOX")
        sandbox_backend.cache_clear()
    assert sandbox_backend().available


def test_an_unknown_policy_is_refused() -> None:
    from nbagent.errors import ConfigurationError

    with pytest.raises(ConfigurationError, match="unknown sandbox"):
        Agent(model=ScriptedModel(["x"]), sandbox="everything")
    with pytest.raises(ValueError):
        SandboxPolicy("nope")


def test_hidden_paths_look_everywhere_and_fail_closed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """(Was: `.git` internals skipped and the scan cut at the limit, which left files there shown.)"""
    (tmp_path / ".git" / "objects").mkdir(parents=True)
    (tmp_path / ".git" / "objects" / ".env").write_text("x")
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / ".env").write_text("x")
    found = _sandbox.hidden_paths(tmp_path, lambda rel, real: rel.endswith(".env"))
    assert set(found) == {tmp_path / "a" / ".env", tmp_path / ".git" / "objects" / ".env"}
    monkeypatch.setattr(_sandbox, "HIDDEN_SCAN_LIMIT", 3)  # the top (2 entries) and a/ (1): .git is not finished
    found = _sandbox.hidden_paths(tmp_path, lambda rel, real: rel.endswith(".env"))
    assert tmp_path / "a" / ".env" in found and tmp_path / ".git" in found  # hidden whole
    monkeypatch.setattr(_sandbox, "HIDDEN_SCAN_LIMIT", 1)  # not even the top: the command is refused
    with pytest.raises(_sandbox.HiddenScanError):
        _sandbox.hidden_paths(tmp_path, lambda rel, real: False)


def test_without_a_sandbox_auto_allow_shrinks_to_the_strict_list(ws: Path, backend) -> None:
    asked: list = []
    # `sort` is read-only and auto-allowed with a sandbox to catch a mistake; without one it asks
    with_sandbox = shell(ws, "sort notes.txt", asked=asked)
    assert with_sandbox.decision.source == "read_only" and not asked
    without = shell(ws, "sort notes.txt", asked=asked, sandbox="danger-full-access")
    assert asked and without.decision.source != "read_only"
    # a command on the strict list still runs without asking
    strict = shell(ws, "cat notes.txt", sandbox="danger-full-access")
    assert strict.decision.source == "read_only" and strict.details.sandbox == "none"


def test_the_python_tool_cannot_open_a_file_a_read_deny_rule_protects(ws: Path, backend) -> None:
    model = ScriptedModel([
        AssistantMessage(tool_calls=[ToolCall(name="python", arguments={"code": "open('.env').read()"})]),
        AssistantMessage(tool_calls=[ToolCall(name="python", arguments={
            "code": f"import subprocess; subprocess.run(['cat', {str(ws / '.env')!r}], capture_output=True).stdout"})]),
        AssistantMessage(tool_calls=[ToolCall(name="python", arguments={"code": "open('notes.txt').read()"})]),
        "done"])
    import os as _os

    here = _os.getcwd()
    _os.chdir(ws)
    try:
        agent = Agent(model=model, tools=toolbox.all(workspace=ws), mode="bypassPermissions",
                      rules=["deny: read_file(.env)"])
        run = agent.run_sync("go")
    finally:
        _os.chdir(here)
    texts = [c.result.text for c in run.calls]
    assert all("sk-123" not in t for t in texts)
    assert "PermissionError" in texts[0] and "deny rule" in texts[0]
    assert "PermissionError" in texts[1]
    assert "alpha" in texts[2]  # control: other files open as usual
    # control: without the rule the same code reads the file
    plain = Agent(model=ScriptedModel([AssistantMessage(tool_calls=[ToolCall(name="python", arguments={
        "code": f"open({str(ws / '.env')!r}).read()"})]), "done"]), tools=toolbox.all(workspace=ws),
        mode="bypassPermissions").run_sync("go")
    assert "API_KEY=[REDACTED:" in plain.calls[0].result.text  # (read, and the key's value redacted)
