"""The sandbox's edges and secrets by the piece, attacked from the outside.

The README says an auto-allowed command runs in a read-only sandbox with an empty home, no network and
no view of the kernel, and that keys never reach the model. Each attack makes the classifier wrong on
purpose where it needs to (`misclassified`), so the sandbox is the wall; each has a control, and a test
that turns the defence off and sees the attack get through. Runs under every backend this machine has.
"""

from __future__ import annotations

import base64
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from nbagent import Agent, AssistantMessage, ScriptedModel, toolbox
from nbagent.safety import sandbox as _sandbox
from nbagent.safety import sandbox_linux
from nbagent.safety import secrets as _secrets
from nbagent.safety.sandbox import sandbox_backend
from nbagent.toolbox import _shell, _values

from .conftest import Recorder, call, everything_model_saw, run_agent, sh, text_of

pytestmark = [pytest.mark.timeout(90),
              pytest.mark.skipif(not sandbox_backend().available, reason="no sandbox on this machine")]

KEY = "sk-piece-Zq8vN2xPmL4kR7tY1wB9cE3hJ6uA0sD5"
SECRET = "kernel-hmac-7f3a9c2e5b8d1f4a"


@pytest.fixture(autouse=True)
def backend(sandbox_lane):
    """Every test runs in each sandbox lane this machine has (tests/conftest.py: bubblewrap, Landlock with a
    mount namespace, Landlock alone as in a container without privileges)."""
    return sandbox_lane


@pytest.fixture
def misclassified(monkeypatch):
    monkeypatch.setattr(_shell, "read_only_problem", lambda *a, **k: None)
    monkeypatch.setattr(_shell, "reveals_denied", lambda *a, **k: None)


@pytest.fixture
def home(tmp_path, monkeypatch):
    """A home with a Jupyter runtime folder, credential stores, and tools on PATH under ~/.local, ~/.cargo."""
    h = tmp_path / "home"
    runtime = h / ".local" / "share" / "jupyter" / "runtime"
    runtime.mkdir(parents=True)
    (runtime / "kernel-1.json").write_text(f'{{"key": "{SECRET}"}}\n')
    (h / ".local" / "bin").mkdir(parents=True)
    (h / ".local" / "bin" / "mytool").write_text("#!/bin/sh\necho mytool-ran\n")
    (h / ".local" / "bin" / "mytool").chmod(0o755)
    (h / ".cargo" / "bin").mkdir(parents=True)
    (h / ".cargo" / "credentials.toml").write_text(f'[registry]\ntoken = "{SECRET}"\n')
    (h / ".local" / "share" / "nbagent").mkdir(parents=True)
    (h / ".local" / "share" / "nbagent" / "trust.key").write_text(SECRET)
    monkeypatch.setenv("HOME", str(h))
    for var in ("JUPYTER_RUNTIME_DIR", "JUPYTER_DATA_DIR", "XDG_DATA_HOME"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("PATH", f"{h / '.local' / 'bin'}:{h / '.cargo' / 'bin'}:{os.environ['PATH']}")
    monkeypatch.setattr(_sandbox, "_NOT_BOUND", ())  # the test's home lies under /tmp, which is never bound
    sandbox_backend.cache_clear()
    yield h
    sandbox_backend.cache_clear()


# -- the empty home stays empty: PATH entries bring no credential store or runtime folder -----------------

READS_FROM_HOME = {
    "jupyter_connection_file": "cat ~/.local/share/jupyter/runtime/kernel-1.json",
    "cargo_token": "cat ~/.cargo/credentials.toml",
    "nbagent_trust_key": "cat ~/.local/share/nbagent/trust.key",
    "listing": "ls -R ~/.local ~/.cargo",
}


@pytest.mark.parametrize("name", sorted(READS_FROM_HOME))
def test_path_entries_under_home_bring_no_secrets(misclassified, ws, home, name):
    run = run_agent(ws, [sh(READS_FROM_HOME[name]), sh("mytool")], approver=Recorder(False))
    assert "mytool-ran" in text_of(run.calls[1])  # control: the PATH entry itself is there
    assert SECRET not in text_of(run.calls[0])
    if name == "listing":
        assert "kernel-1.json" not in text_of(run.calls[0]) and "credentials.toml" not in text_of(run.calls[0])


def test_defence_off_the_parent_of_a_path_entry_shows_the_runtime_folder(misclassified, ws, home, monkeypatch):
    monkeypatch.setattr(_sandbox, "_holds", lambda path, places: False)
    monkeypatch.setattr(_sandbox, "secret_places", lambda: ())
    sandbox_backend.cache_clear()
    run = run_agent(ws, [sh(READS_FROM_HOME["jupyter_connection_file"])], approver=Recorder(False))
    assert SECRET in text_of(run.calls[0])


def test_a_workspace_holding_a_credential_store_does_not_show_it(misclassified, tmp_path, home):
    """The workspace is the home directory itself (Jupyter started in ~)."""
    (home / ".ssh").mkdir()
    (home / ".ssh" / "id_ed25519").write_text(SECRET)
    (home / "notes.md").write_text("my notes\n")
    run = run_agent(home, [sh("cat .ssh/id_ed25519 .local/share/jupyter/runtime/kernel-1.json"), sh("cat notes.md")],
                    approver=Recorder(False))
    assert "my notes" in text_of(run.calls[1])  # control
    assert SECRET not in text_of(run.calls[0])


# -- the kernel's /proc ------------------------------------------------------------------------------------

@pytest.fixture
def kernel_like(monkeypatch):
    """A process outside the sandbox started with a key in its environment (as a kernel is)."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"],
                            env={**os.environ, "KERNEL_API_KEY": SECRET})
    yield proc.pid
    proc.kill()
    proc.wait()


def test_a_command_cannot_read_another_process_environment(misclassified, ws, kernel_like):
    run = run_agent(ws, [sh(f"cat /proc/{kernel_like}/environ; cat /proc/$PPID/environ; echo done")],
                    approver=Recorder(False))
    assert "done" in text_of(run.calls[0])
    assert SECRET not in text_of(run.calls[0]) and "KERNEL_API_KEY" not in text_of(run.calls[0])


def test_control_without_a_sandbox_the_environment_is_readable(ws, kernel_like):
    run = run_agent(ws, [sh(f"cat /proc/{kernel_like}/environ")], mode="bypassPermissions", sandbox="danger-full-access")
    assert "KERNEL_API_KEY" in run.calls[0].result.details.stdout


def test_defence_off_root_reads_it_under_landlock(misclassified, ws, kernel_like, backend, monkeypatch):
    if backend.name != "landlock" or os.geteuid() != 0:
        pytest.skip("only root under Landlock has the capability that the drop removes")
    monkeypatch.setenv("NBAGENT_SPAWN", "fork")  # (the patch holds in this process only, not in a launcher)
    monkeypatch.setattr(sandbox_linux, "drop_capabilities", lambda: True)
    run = run_agent(ws, [sh(f"cat /proc/{kernel_like}/environ")], approver=Recorder(False))
    assert "KERNEL_API_KEY" in run.calls[0].result.details.stdout


# -- "network off" is every protocol ----------------------------------------------------------------------

def _udp_listener():
    """A port to send to, and what reached it, read once the command has ended (a datagram sent on this machine is
    queued by then: nothing to wait for)."""
    server = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    server.bind(("127.0.0.1", 0))

    def received() -> list[bytes]:
        server.settimeout(0.2)
        try:
            return [server.recvfrom(100)[0]]
        except OSError:
            return []
        finally:
            server.close()

    return server.getsockname()[1], received


SEND_UDP = "python3 -c \"import socket; socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b'leak', ('127.0.0.1', {port}))\""


@pytest.mark.parametrize("policy", ["read-only", "workspace-write"])
def test_udp_does_not_leave_the_sandbox(ws, policy):
    port, received = _udp_listener()
    run = run_agent(ws, [sh(SEND_UDP.format(port=port))], mode="bypassPermissions", sandbox=policy)
    assert received() == [], run.calls[0].result


def test_other_families_are_refused_too(ws, backend):
    code = ("import socket\nfor f, t in ((socket.AF_INET6, socket.SOCK_DGRAM), (socket.AF_NETLINK, socket.SOCK_RAW),\n"
            "             (socket.AF_UNIX, socket.SOCK_STREAM)):\n"
            "    try:\n        socket.socket(f, t).close(); print('opened', f)\n    except OSError as e:\n"
            "        print('refused', f)\na, b = socket.socketpair(); a.send(b'x'); print('pair ok', b.recv(1))\n")
    (ws / "probe.py").write_text(code)
    run = run_agent(ws, [sh("python3 probe.py")], mode="bypassPermissions")
    out = run.calls[0].result.details.stdout
    assert "pair ok" in out  # control: a process still talks to itself
    assert "opened" not in out and out.count("refused") == 3


def test_control_udp_when_the_policy_allows_the_network(ws):
    from nbagent.safety.sandbox import SandboxPolicy

    port, received = _udp_listener()
    run_agent(ws, [sh(SEND_UDP.format(port=port))], mode="bypassPermissions",
              sandbox=SandboxPolicy("workspace-write", network=True))
    assert received() == [b"leak"]


def test_defence_off_udp_gets_out_under_landlock(ws, backend, monkeypatch):
    if backend.name != "landlock":
        pytest.skip("bubblewrap's network namespace is the defence there")
    monkeypatch.setenv("NBAGENT_SPAWN", "fork")  # (the patch holds in this process only, not in a launcher)
    monkeypatch.setattr(sandbox_linux.CommandFilter, "install", lambda self: True)
    port, received = _udp_listener()
    run_agent(ws, [sh(SEND_UDP.format(port=port))], mode="bypassPermissions")
    assert received() == [b"leak"]


# -- protected paths are protected whole ------------------------------------------------------------------

def _repo(ws):
    env = {**os.environ, "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_NOSYSTEM": "1"}
    for args in (["init", "-q"], ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty",
                                   "-m", "init"]):
        subprocess.run(["git", *args], cwd=ws, env=env, check=True, capture_output=True)


REPLACE_GIT = {
    "rename_git_away": "mv .git .git-old && mkdir -p .git/hooks && printf 'touch pwned' > .git/hooks/pre-commit",
    "rename_hooks_away": "mv .git/hooks .git/hooks-old && mkdir .git/hooks && printf x > .git/hooks/pre-commit",
    "remove_and_replace_config": "rm -f .git/config && printf '[core]\\n\\tfsmonitor = touch pwned\\n' > .git/config",
    "rename_nbagent_away": "mv .nbagent .nb-old && mkdir .nbagent && echo x > .nbagent/planted",
    "create_missing_info": "rm -rf .git/info; mkdir -p .git/info && echo '* filter=x' > .git/info/attributes",
}


@pytest.mark.parametrize("name", sorted(REPLACE_GIT))
def test_protected_paths_cannot_be_renamed_away_or_replaced(ws, backend, name):
    _repo(ws)
    (ws / ".nbagent").mkdir(exist_ok=True)
    config = (ws / ".git" / "config").read_text()
    # Landlock alone puts them back after the command; the top level stays writable in every lane
    made = "made.txt"
    run = run_agent(ws, [sh(REPLACE_GIT[name]), sh(f"echo ok > {made}")], mode="bypassPermissions")
    assert run.calls[1].status == "ok" and (ws / made).exists()  # control: the workspace is writable
    assert (ws / ".git" / "config").read_text() == config
    assert not (ws / ".git" / "hooks" / "pre-commit").exists()
    assert not (ws / ".nbagent" / "planted").exists() and not (ws / ".nb-old").exists()
    assert not (ws / ".git" / "info" / "attributes").exists() or "filter=x" not in (
        ws / ".git" / "info" / "attributes").read_text()


def test_a_protected_path_made_by_a_command_is_removed_after_it(ws, backend):
    _repo(ws)
    import shutil as _shutil

    _shutil.rmtree(ws / ".vscode", ignore_errors=True)
    run = run_agent(ws, [sh("mkdir .vscode && printf '{}' > .vscode/tasks.json && echo ok > made.txt")],
                    mode="bypassPermissions")
    assert not (ws / ".vscode").exists() and (ws / "made.txt").exists()
    assert "removed after it" in text_of(run.calls[0])


def test_defence_off_git_renamed_away_is_replaced(ws, backend, monkeypatch):
    _repo(ws)
    from nbagent.safety import sandbox_landlock, sandbox_restore

    monkeypatch.setattr(_sandbox, "protected_binds", lambda ws_: [])  # nothing bound over the protected paths
    monkeypatch.setattr(sandbox_landlock, "protected_mounts", lambda ws_: ([], []))
    monkeypatch.setattr(sandbox_restore.ProtectedCopy, "restore", lambda self: [])  # nothing put back
    run_agent(ws, [sh(REPLACE_GIT["rename_git_away"])], mode="bypassPermissions")
    assert (ws / ".git" / "hooks" / "pre-commit").exists()


# -- files hidden for deny rules, wherever they are (fails closed) ----------------------------------------

DENY_ENV = ["deny: read_file(.env)"]


def _deep_env(ws):
    for folder in ("node_modules/pkg", ".venv/lib", ".git/objects"):
        (ws / folder).mkdir(parents=True, exist_ok=True)
        (ws / folder / ".env").write_text(f"# {SECRET}\n")  # a form redaction does not know: the wall is tested
    (ws / "node_modules" / "pkg" / "index.js").write_text("module.exports = 1\n")


def test_files_in_skipped_folders_are_hidden_too(misclassified, ws):
    _deep_env(ws)
    run = run_agent(ws, [sh("cat node_modules/pkg/.env .venv/lib/.env .git/objects/.env"),
                         sh("cat node_modules/pkg/index.js")], rules=DENY_ENV, approver=Recorder(False))
    assert "module.exports" in text_of(run.calls[1])  # control
    assert SECRET not in everything_model_saw(run)


def test_past_the_scan_limit_folders_are_hidden_whole(misclassified, ws, monkeypatch):
    _deep_env(ws)
    for i in range(30):
        (ws / "node_modules" / f"f{i}").write_text("x")
    monkeypatch.setattr(_sandbox, "HIDDEN_SCAN_LIMIT", 12)
    run = run_agent(ws, [sh("cat node_modules/pkg/.env; cat notes.md")], rules=DENY_ENV, approver=Recorder(False))
    assert SECRET not in everything_model_saw(run)
    assert "hello notes" in text_of(run.calls[0])  # control: the rest of the workspace is there


def test_a_workspace_too_big_to_look_through_refuses_the_command(misclassified, ws, monkeypatch):
    monkeypatch.setattr(_sandbox, "HIDDEN_SCAN_LIMIT", 1)
    run = run_agent(ws, [sh("cat notes.md")], rules=DENY_ENV, approver=Recorder(False))
    assert "did not run" in text_of(run.calls[0]) and "hello notes" not in text_of(run.calls[0])


def test_defence_off_nothing_hidden_shows_them(misclassified, ws, monkeypatch):
    _deep_env(ws)
    monkeypatch.setattr(_shell, "hidden_paths", lambda root, denied: ())
    run = run_agent(ws, [sh("cat node_modules/pkg/.env")], rules=DENY_ENV, approver=Recorder(False))
    assert SECRET in text_of(run.calls[0])


# -- secrets by the piece ---------------------------------------------------------------------------------

@pytest.fixture
def key_env(monkeypatch):
    monkeypatch.setenv("MY_SERVICE_TOKEN", KEY)
    return KEY


def _namespace_agent(ws, namespace, *turns, approver=None):
    messages = [AssistantMessage(tool_calls=[t] if not isinstance(t, list) else t) for t in turns]
    return Agent(model=ScriptedModel(messages + [AssistantMessage(text="done")]),
                 tools=toolbox.all(workspace=ws, namespace=namespace), workspace=ws,
                 approver=approver or Recorder(False)).run_sync("go")


class _Client:
    def __init__(self, key):
        self._api_key = key
        self.base_url = "https://api.example.com"


PIECE_LOOKUPS = {
    "environ_index": "os.environ['MY_SERVICE_TOKEN']",
    "environ_char": "os.environ['MY_SERVICE_TOKEN'][0]",
    "string_index": "key[3]",
    "dict_holding_key": "cfg",
    "client_holding_key": "client",
    "attribute_of_client": "client._api_key",
    "unknown_token_field": "settings",
}


@pytest.mark.parametrize("name", sorted(PIECE_LOOKUPS))
def test_inspect_variable_never_auto_shows_a_credential(ws, key_env, name):
    namespace = {"os": os, "key": KEY, "cfg": {"model": "x", "api_key": KEY}, "client": _Client(KEY),
                 "settings": {"auth_token": "unregistered-token-9f8e7d6c5b4a"}, "n_rows": 12345}
    asked = Recorder(False)
    run = _namespace_agent(ws, namespace, call("inspect_variable", name=PIECE_LOOKUPS[name]),
                           call("inspect_variable", name="n_rows"), approver=asked)
    assert "12345" in text_of(run.calls[1])  # control: plain values are inspected without asking
    seen = everything_model_saw(run)
    assert KEY[:6] not in seen and KEY[-6:] not in seen and "9f8e7d6c5b4a" not in seen
    if name not in ("environ_char", "string_index"):  # those are refused outright: a string is seen whole
        assert [r.name for r in asked.asked] == ["inspect_variable"]


def test_approved_inspection_of_a_holder_is_redacted(ws, key_env):
    run = _namespace_agent(ws, {"cfg": {"api_key": KEY, "model": "m1"}}, call("inspect_variable", name="cfg"),
                           approver=Recorder(True))
    assert "m1" in text_of(run.calls[0]) and KEY[:10] not in everything_model_saw(run)


def test_defence_off_a_string_index_hands_over_a_character_at_a_time(ws, key_env, monkeypatch):
    from nbagent.toolbox import _python

    def old_resolve_one(namespace, node, text, chain):
        import ast as _ast
        if isinstance(node, _ast.Subscript):
            return _python._resolve(namespace, node.value, text, chain)[_ast.literal_eval(node.slice)]
        return original(namespace, node, text, chain)

    original = _python._resolve_one
    monkeypatch.setattr(_python, "_resolve_one", old_resolve_one)
    run = _namespace_agent(ws, {"key": KEY}, [call("inspect_variable", name=f"key[{i}]") for i in range(8)],
                           approver=Recorder(True))
    assert "".join(text_of(r).split("value: ")[-1].split("\n")[0].strip("'") for r in run.calls) == KEY[:8]


PIECES = {
    "head": KEY[9:17],  # (a readable prefix such as "sk-piece" is not the secret part: pieces must look random)
    "middle": KEY[10:17],
    "reversed": KEY[::-1],
    "base64": base64.b64encode(("x" + KEY).encode()).decode(),
    "base64_urlsafe": base64.urlsafe_b64encode(("xy" + KEY).encode()).decode(),
    "hex": KEY.encode().hex(),
}


@pytest.mark.parametrize("name", sorted(PIECES))
def test_a_command_printing_a_piece_of_a_key_is_redacted(ws, key_env, name):
    (ws / "blob.txt").write_text(f"value: {PIECES[name]}\n")
    run = run_agent(ws, [sh("cat blob.txt"), sh("cat notes.md")], approver=Recorder(False))
    assert "hello notes" in text_of(run.calls[1])  # control
    assert PIECES[name] not in everything_model_saw(run)


def test_cut_over_a_file_holding_a_key_is_redacted(ws, key_env):
    (ws / "settings.ini").write_text(f"token={KEY}\n")
    # (auto-allowed, cut over a file holding a key asks first: test_redteam_secret_oracles; approved, it is redacted)
    run = run_agent(ws, [sh("cut -c7-20 settings.ini"), sh("cut -c21- settings.ini"), sh("cut -c1-5 settings.ini")],
                    approver=Recorder(True))
    assert "token" in text_of(run.calls[2])  # control: cut works
    seen = everything_model_saw(run)
    assert KEY[:14] not in seen and KEY[14:] not in seen


def test_defence_off_pieces_get_through(ws, key_env, monkeypatch):
    monkeypatch.setattr(_secrets, "_piece_spans", lambda text, pattern, pieces: [])
    (ws / "blob.txt").write_text(f"value: {PIECES['head']}\n")
    run = run_agent(ws, [sh("cat blob.txt")], approver=Recorder(False))
    assert PIECES["head"] in text_of(run.calls[0])


def test_a_truncated_listing_keeps_no_piece(ws, key_env):
    run = _namespace_agent(ws, {"msg": "x" * 70 + KEY, "big": {"k": "y" * 2990 + KEY}},
                           call("list_variables"), call("inspect_variable", name="big"))
    seen = everything_model_saw(run)
    assert "msg" in text_of(run.calls[0])  # control
    assert KEY[:6] not in seen


def test_auto_allowed_commands_get_no_credential_variable_even_without_a_sandbox(ws, key_env, monkeypatch):
    monkeypatch.setenv("NBAGENT_SANDBOX", "none")
    sandbox_backend.cache_clear()
    control = run_agent(ws, [sh("env")], mode="bypassPermissions")  # approved: the person let it run as is
    assert "MY_SERVICE_TOKEN" in control.calls[0].result.details.stdout
    monkeypatch.setattr(_shell, "read_only_problem", lambda *a, **k: None)
    run = run_agent(ws, [sh("env")], approver=Recorder(False))
    assert run.calls[0].decision.source == "read_only"
    assert "MY_SERVICE_TOKEN" not in run.calls[0].result.details.stdout
