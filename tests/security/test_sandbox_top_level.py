"""The workspace's top level, in every sandbox lane (tests/conftest.py `sandbox_lane`: bubblewrap, Landlock
with a mount namespace per command, Landlock alone as in a container without user namespaces or privileges).

What a person approving `echo hi > notes.txt` or `mkdir out` meets: in every lane the command makes,
renames and removes files and folders at the top level. With bubblewrap or a mount namespace, an approved
command cannot write, replace or rename `.git`, `.mcp.json` or `.nbagent`, and a program outside the sandbox
never sees them changed while it runs. Landlock alone cannot say that (a right on a folder holds for all
beneath it): there they are put back after the command, the result names what was put back, a command
left running in the background is checked before every later call, and a program outside can see the
change until then (tested as what it is). In every lane a change made outside meanwhile (the person's
commit, nbagent's own session store) is not undone after it. Each wall is shown failing when it is turned off.
"""
from __future__ import annotations

import os
import subprocess
import threading
import time
from pathlib import Path

import pytest

from nbagent.messages import ToolCall
from nbagent.safety import sandbox as _sandbox
from nbagent.safety import sandbox_landlock
from nbagent.safety import sandbox_restore as _restore

from .conftest import Recorder, run_agent, sh, text_of

pytestmark = [pytest.mark.timeout(120), pytest.mark.skipif(not _sandbox.sandbox_backend().available,
                                                           reason="no sandbox on this machine")]

EVIL_CONFIG = "[core]\n\tfsmonitor = touch pwned\n"
EVIL_MCP = '{"mcpServers": {"x": {"command": "touch", "args": ["pwned"]}}}'
GIT_ENV = {**os.environ, "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_NOSYSTEM": "1"}


@pytest.fixture(autouse=True)
def backend(sandbox_lane):
    return sandbox_lane


def copies(backend) -> bool:
    """Whether the lane keeps protected paths by a copy put back after the command (Landlock alone) rather
    than by read-only mounts."""
    return backend.name == "landlock" and not backend.mounts


def _git(ws: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=ws, env=GIT_ENV, check=True, capture_output=True, text=True).stdout


@pytest.fixture
def repo(ws: Path) -> Path:
    """A workspace that is a git repository with a commit, an `.mcp.json`, nbagent's folder and a sub-folder."""
    _git(ws, "init", "-q")
    _git(ws, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", "init")
    (ws / ".mcp.json").write_text('{"mcpServers": {}}\n')
    (ws / ".nbagent" / "sessions").mkdir(parents=True)
    (ws / "sub").mkdir()
    return ws


def _approved(ws: Path, *commands: str, **kw):
    return run_agent(ws, [sh(c, timeout=30) for c in commands], approver=Recorder(True), **kw)


# -- ordinary work at the top level ------------------------------------------------------------------------

TOP_LEVEL_WORK = ("echo hi > notes.txt && mkdir out && echo x > out/a.txt && mv notes.txt renamed.txt && "
                  "sed -i s/hi/ho/ renamed.txt && rm out/a.txt && python3 -c \"open('made.csv', 'w').write('1')\" && "
                  "ln -s renamed.txt link.txt && cat link.txt")


def test_an_approved_command_makes_files_and_folders_at_the_top_level(repo: Path, backend) -> None:
    """Every lane, Landlock alone included (there `.git`, `.mcp.json` and `.nbagent` are put back after the
    command; here it did not touch them, so nothing is said about them)."""
    run = _approved(repo, TOP_LEVEL_WORK, "echo below > sub/below.txt")
    text = text_of(run.calls[0])
    assert (repo / "sub" / "below.txt").read_text() == "below\n"
    assert run.calls[0].status == "ok", text
    assert (repo / "renamed.txt").read_text() == "ho\n" and (repo / "out").is_dir()
    assert not (repo / "out" / "a.txt").exists() and (repo / "made.csv").read_text() == "1"
    assert os.readlink(repo / "link.txt") == "renamed.txt" and "stopped by the sandbox" not in text
    assert "put back" not in text


def test_defence_off_landlock_alone_without_the_copy_closes_the_top_level(repo: Path, backend, monkeypatch) -> None:
    """Landlock alone where protected paths are too large to copy: they stay read-only, so the top level
    above them is closed, and the result says which wall and why."""
    if not copies(backend):
        pytest.skip("only Landlock alone keeps protected paths by a copy")
    monkeypatch.setattr(_restore, "COPY_LIMIT", 0)
    run = _approved(repo, TOP_LEVEL_WORK)
    text = text_of(run.calls[0])
    assert not (repo / "notes.txt").exists() and run.calls[0].status == "error"
    assert "notes.txt would be a new entry at the workspace's top level" in text
    assert "too large to copy and put back" in text and "inside a folder that is already there" in text


def test_without_protected_paths_the_top_level_is_open_in_every_lane(ws: Path) -> None:
    """A folder that is not a repository and has no nbagent folder yet: even Landlock alone lets a command
    make entries at the top (a protected path it makes there is removed after it)."""
    run = _approved(ws, "echo hi > notes.txt && mkdir out && mkdir .vscode && echo '{}' > .vscode/tasks.json")
    assert (ws / "notes.txt").read_text() == "hi\n" and (ws / "out").is_dir()
    assert not (ws / ".vscode").exists() and "removed after it" in text_of(run.calls[0])


# -- protected paths: not written, replaced or renamed ------------------------------------------------------

ATTACKS = {
    "write_git_config": f"printf '{EVIL_CONFIG}' >> .git/config",
    "replace_git_config": f"printf '{EVIL_CONFIG}' > sub/cfg && mv -f sub/cfg .git/config",
    "add_a_hook": "printf '#!/bin/sh\\ntouch pwned\\n' > .git/hooks/pre-commit && chmod +x .git/hooks/pre-commit",
    "rename_git_away": f"mv .git sub/old-git && mkdir -p .git && printf '{EVIL_CONFIG}' > .git/config",
    "replace_git_with_a_folder": f"mkdir sub/evil && printf '{EVIL_CONFIG}' > sub/evil/config && rm -rf .git; "
                                 "mv -T sub/evil .git",
    "exchange_git": (f"mkdir sub/evil && printf '{EVIL_CONFIG}' > sub/evil/config && python3 -c \"import ctypes, os; "
                     "libc = ctypes.CDLL(None, use_errno=True); r = libc.renameat2(-100, b'sub/evil', -100, b'.git', 2); "
                     "print('exchanged' if r == 0 else os.strerror(ctypes.get_errno()))\""),
    "hard_link_to_git_config": f"ln .git/config sub/c && printf '{EVIL_CONFIG}' >> sub/c",
    "symbolic_link_to_git_config": f"ln -s ../.git/config sub/c && printf '{EVIL_CONFIG}' >> sub/c",
    "write_mcp_json": f"printf '{EVIL_MCP}' > .mcp.json",
    "replace_mcp_json": f"printf '{EVIL_MCP}' > sub/m.json && mv -f sub/m.json .mcp.json",
    "rename_mcp_json_away": f"mv .mcp.json sub/old.json; printf '{EVIL_MCP}' > .mcp.json",
    "remove_mcp_json": f"rm -f .mcp.json; printf '{EVIL_MCP}' > .mcp.json",
    "rename_nbagent_away": "mv .nbagent sub/nb && mkdir .nbagent && echo '{}' > .nbagent/mcp.json",
    # what puts back must not stop partway: a protected file made a folder nested deeper than any stack, then a
    # hook; a config made too large to read (sparse: nothing on the disk)
    "nest_deep_then_add_a_hook": ("rm -f .git/description && mkdir -p .git/description/$(printf 'd/%.0s' $(seq 1500)) "
                                  "&& printf '#!/bin/sh\\ntouch pwned\\n' > .git/hooks/pre-commit "
                                  "&& chmod +x .git/hooks/pre-commit"),
    "make_git_config_huge": f"printf '{EVIL_CONFIG}' >> .git/config && truncate -s 20G .git/config",
}


def _state(ws: Path, identity: bool = True) -> dict:
    git = ws / ".git"
    state = {"git_is_dir": git.is_dir() and not git.is_symlink(), "config": (git / "config").read_text(),
             "hooks": sorted(p.name for p in (git / "hooks").iterdir()), "mcp": (ws / ".mcp.json").read_text(),
             "nbagent": sorted(p.name for p in (ws / ".nbagent").iterdir())}
    if identity:
        state |= {"git_inode": git.stat().st_ino, "mcp_inode": (ws / ".mcp.json").stat().st_ino}
    return state


DELETES_THE_ORIGINAL = {"replace_git_with_a_folder", "replace_mcp_json", "remove_mcp_json"}
"""Attacks that delete the original: a copy put back is another file (and `.git`'s history is gone)."""


@pytest.mark.parametrize("name", sorted(ATTACKS))
def test_git_and_mcp_json_cannot_be_written_replaced_or_renamed(repo: Path, backend, name: str) -> None:
    """Bubblewrap and Landlock with a mount namespace: the attack fails. Landlock alone: it is undone after
    the command (a renamed-away `.git` renamed back, the same file written back) and the result says so."""
    identity = not (copies(backend) and name in DELETES_THE_ORIGINAL)
    before = _state(repo, identity)
    run = _approved(repo, ATTACKS[name], "echo ok > made.txt")
    assert run.calls[1].status == "ok", text_of(run.calls[1])  # control: the approved command could write
    assert _state(repo, identity) == before, text_of(run.calls[0])
    assert "pwned" not in (repo / ".git" / "config").read_text() and not (repo / "pwned").exists()
    if copies(backend):  # the two calls may run side by side: the last to end puts back, and says so
        both = text_of(run.calls[0]) + text_of(run.calls[1])
        assert "and were put back after it" in both
    else:
        assert "pwned" not in _git(repo, "config", "--list", "--local")


def test_defence_off_the_same_attacks_get_through(repo: Path, backend, monkeypatch) -> None:
    """With no protected path kept (no mount over them, nothing copied and put back), the attacks above
    change `.git/config` and `.mcp.json`: the check above can fail."""
    monkeypatch.setattr(_sandbox, "protected_binds", lambda ws_: [])
    monkeypatch.setattr(sandbox_landlock, "PROTECTED_PATHS", ())
    before = _state(repo)
    _approved(repo, ATTACKS["write_git_config"], ATTACKS["replace_mcp_json"])
    after = _state(repo)
    assert "fsmonitor" in after["config"] and after["mcp"] == EVIL_MCP and after != before


def test_a_refusal_names_the_protected_path_and_why(repo: Path, backend) -> None:
    run = _approved(repo, ATTACKS["write_git_config"] + "; " + ATTACKS["rename_mcp_json_away"])
    text = text_of(run.calls[0])
    assert "writes only in the workspace" not in text
    if copies(backend):  # it ran: what it did to them is named, and that it was undone
        assert ".git/config (changed: put back)" in text and "were put back after it" in text
        assert ".mcp.json (renamed away to sub/old.json: renamed back)" in text
        assert (repo / ".mcp.json").read_text() == '{"mcpServers": {}}\n' and not (repo / "sub" / "old.json").exists()
    else:
        assert "stopped by the sandbox (workspace-write)" in text and "protected paths (.git, .mcp.json" in text
        assert "cannot be renamed away or replaced" in text


def test_a_protected_link_a_command_replaced_is_put_back(repo: Path, backend) -> None:
    """`.mcp.json` as a link to a file in the workspace: a mount follows the link, so the link itself is put
    back after the command if it replaced it; Landlock alone puts back the link and where it leads."""
    (repo / ".mcp.json").unlink()
    (repo / "conf").mkdir()
    (repo / "conf" / "mcp.json").write_text('{"mcpServers": {}}\n')
    os.symlink("conf/mcp.json", repo / ".mcp.json")
    run = _approved(repo, f"rm .mcp.json; printf '{EVIL_MCP}' > .mcp.json; printf x >> conf/mcp.json")
    assert os.readlink(repo / ".mcp.json") == "conf/mcp.json"
    assert (repo / "conf" / "mcp.json").read_text() == '{"mcpServers": {}}\n'  # where it leads is kept too
    assert "put back after it" in text_of(run.calls[0])


def test_defence_off_a_replaced_protected_link_stays_replaced(repo: Path, backend, monkeypatch) -> None:
    monkeypatch.setattr(sandbox_landlock, "restore_links", lambda links: [])
    monkeypatch.setattr(_restore.ProtectedCopy, "restore", lambda self: [])
    (repo / ".mcp.json").unlink()
    os.symlink("sub/mcp.json", repo / ".mcp.json")
    (repo / "sub" / "mcp.json").write_text("{}")
    _approved(repo, f"rm .mcp.json; printf '{EVIL_MCP}' > .mcp.json")
    assert not (repo / ".mcp.json").is_symlink() and (repo / ".mcp.json").read_text() == EVIL_MCP


# -- while the command runs: what programs outside see, and what they change ---------------------------------

def _watch(path: Path, stop: threading.Event, seen: list[bytes]) -> None:
    while not stop.is_set():
        try:
            seen.append((path / ".git" / "config").read_bytes())
        except OSError:
            seen.append(b"<missing>")
        time.sleep(0.005)


def _watched_attack(repo: Path) -> tuple[bytes, list[bytes]]:
    """A git prompt or JupyterLab's git panel reads `.git/config` again and again while an approved command
    tries to plant `core.fsmonitor` in it (in place, then by swapping `.git`) and waits."""
    before = (repo / ".git" / "config").read_bytes()
    stop, seen = threading.Event(), []
    watcher = threading.Thread(target=_watch, args=(repo, stop, seen), daemon=True)
    watcher.start()
    try:
        _approved(repo, f"printf '{EVIL_CONFIG}' >> .git/config; {ATTACKS['rename_git_away']}; sleep 1")
    finally:
        stop.set()
        watcher.join()
    return before, seen


def test_what_a_program_outside_sees_of_git_config_while_the_command_runs(repo: Path, backend) -> None:
    """Bubblewrap and Landlock with a mount namespace: never the planted config. Landlock alone (its stated
    limit, docs/security.md): what the command wrote, until the command ends; then it is put back."""
    before, seen = _watched_attack(repo)
    assert len(seen) > 10  # control: it looked all along
    if copies(backend):
        assert any(b"fsmonitor" in s for s in seen) and (repo / ".git" / "config").read_bytes() == before
        return
    assert all(s == before for s in seen), "an outside program read .git/config while the command had changed it"


def test_defence_off_a_program_outside_sees_the_planted_config(repo: Path, monkeypatch) -> None:
    monkeypatch.setattr(_sandbox, "protected_binds", lambda ws_: [])
    monkeypatch.setattr(sandbox_landlock, "PROTECTED_PATHS", ())
    _, seen = _watched_attack(repo)
    assert any(b"fsmonitor" in s for s in seen)


def test_a_change_made_outside_while_the_command_runs_is_kept(repo: Path) -> None:
    """The person commits, and nbagent's session store writes, while a long approved command runs: nothing
    after the command undoes them (as putting protected paths back from a copy would)."""
    started = threading.Event()

    def meanwhile() -> None:
        started.wait(10)
        _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", "meanwhile")
        (repo / ".nbagent" / "sessions" / "s.jsonl").write_text('{"kept": true}\n')

    outside = threading.Thread(target=meanwhile, daemon=True)
    outside.start()
    marker = repo / "sub" / "running"
    runner = threading.Thread(target=_approved, args=(repo, f"touch {marker}; sleep 1.5"), daemon=True)
    runner.start()
    for _ in range(400):
        if marker.exists():
            break
        time.sleep(0.01)
    started.set()
    outside.join(20)
    runner.join(60)
    assert marker.exists()  # control: the command ran
    assert "meanwhile" in _git(repo, "log", "--format=%s")
    assert (repo / ".nbagent" / "sessions" / "s.jsonl").read_text() == '{"kept": true}\n'


PLANT_LATER = f"echo below > sub/below.txt; echo started; sleep 1; printf '{EVIL_CONFIG}' >> .git/config; sleep 20"


def test_a_background_command_cannot_write_protected_paths_while_it_runs(repo: Path, backend) -> None:
    """A command left running by the `process` tool: in every lane it cannot write `.git/config` at all (under
    Landlock alone the top level stays closed for it, as a put-back at its end, or between calls, cannot
    protect what a `git status` outside runs meanwhile), and the result says why; sub-folders stay writable."""
    run = run_agent(repo, [sh(PLANT_LATER, yield_ms=500)], [sh("sleep 3; cat .git/config", timeout=30)],
                    [ToolCall(name="process", arguments={"action": "kill", "id": "p1"})], approver=Recorder(True))
    assert "p1" in text_of(run.calls[0]) and "started" in text_of(run.calls[0])  # control: it went on
    assert (repo / "sub" / "below.txt").read_text() == "below\n"
    assert "fsmonitor" not in text_of(run.calls[1]) and "fsmonitor" not in (repo / ".git" / "config").read_text()
    assert "put back" not in text_of(run.calls[1])  # nothing was planted, so nothing had to be put back
    if copies(backend):
        assert _restore.check_running() == []


def test_a_background_command_at_the_top_level_is_refused_with_why(repo: Path, backend) -> None:
    if not copies(backend):
        pytest.skip("only Landlock alone copies protected paths for foreground commands")
    run = run_agent(repo, [sh("echo hi > notes.txt; echo done", yield_ms=2000)], approver=Recorder(True))
    text = text_of(run.calls[0])
    assert not (repo / "notes.txt").exists()
    assert "goes on in the background" in text and "notes.txt would be a new entry" in text, text


def _unguarded(prepared):
    """A prepared command whose copy the background start does not see (that check turned off too)."""

    class Unguarded:
        def __getattr__(self, name):
            return None if name == "copy" else getattr(prepared, name)

    return Unguarded()


def test_defence_off_a_background_command_plants_before_it_is_put_back(repo: Path, backend, monkeypatch) -> None:
    """With background commands copied and put back like foreground ones, the planted config is there for a
    program outside (and the next call) to run until it is put back."""
    if not copies(backend):
        pytest.skip("only Landlock alone lets the command write there")
    real = _sandbox.landlock_prepared
    monkeypatch.setattr(_sandbox, "landlock_prepared", lambda *a, **kw: _unguarded(real(*a, **{**kw, "long_lived": False})))
    monkeypatch.setattr(_restore, "check_running", list)
    monkeypatch.setattr("nbagent.calls.execution.check_running", list)
    run = run_agent(repo, [sh(PLANT_LATER, yield_ms=500)], [sh("sleep 3; cat .git/config", timeout=30)],
                    [ToolCall(name="process", arguments={"action": "kill", "id": "p1"})], approver=Recorder(True))
    assert "fsmonitor" in text_of(run.calls[1])
    assert "fsmonitor" not in (repo / ".git" / "config").read_text()  # put back only when it ended


def test_a_command_prepared_to_be_put_back_never_goes_on_in_the_background(
        repo: Path, backend, monkeypatch) -> None:
    """The background start is the choke point: a command prepared with a copy (to be put back after it) is
    refused there, whoever prepared it."""
    if not copies(backend):
        pytest.skip("only Landlock alone copies protected paths")
    real = _sandbox.landlock_prepared
    monkeypatch.setattr(_sandbox, "landlock_prepared", lambda *a, **kw: real(*a, **{**kw, "long_lived": False}))
    run = run_agent(repo, [sh(PLANT_LATER, yield_ms=500)], approver=Recorder(True))
    text = text_of(run.calls[0])
    assert run.calls[0].status == "error" and "cannot protect what runs meanwhile" in text, text
    assert not (repo / "sub" / "below.txt").exists()


def test_after_a_put_back_that_failed_later_commands_keep_protected_paths_read_only(repo: Path, backend,
                                                                                      monkeypatch) -> None:
    # it fails closed: once a path could not be put back, a copy taken now would keep what was planted, so later
    # commands get the protected paths read-only (and no new top-level entry), and are told why
    if not copies(backend):
        pytest.skip("only Landlock alone puts protected paths back")
    failed = ".git/hooks/pre-commit (made by the command: could not be removed: OSError: busy)"
    monkeypatch.setattr(_restore, "_UNRESTORED", {os.path.realpath(repo): [failed]})
    run = _approved(repo, ATTACKS["write_git_config"], "echo ok > sub/made.txt", "echo x > new-at-the-top.txt")
    assert "pwned" not in (repo / ".git" / "config").read_text()
    assert "stay read-only" in text_of(run.calls[0]), text_of(run.calls[0])
    assert run.calls[1].status == "ok" and (repo / "sub" / "made.txt").read_text() == "ok\n"
    assert not (repo / "new-at-the-top.txt").exists() and "could not be put back" in text_of(run.calls[2])


# -- found by the third outside try ----------------------------------------------------------------------------

GITLINK = ("mkdir -p vendor/lib && cd vendor/lib && git init -q . && git -c user.email=a@b -c user.name=a commit -q "
           "--allow-empty -m v && git config core.fsmonitor 'touch {proof}; false' && cd ../.. && "
           "git add vendor/lib; git ls-files -s")


def test_a_gitlink_recorded_in_the_index_does_not_send_the_person_s_git_into_a_planted_config(repo: Path,
                                                                                              tmp_path: Path) -> None:
    """A nested repository whose own config (an ordinary workspace file) names a program, recorded as a gitlink in
    `.git/index`: the person's `git status` at the top level would go into it and run the program. The index is
    read-only (mounts) or put back (Landlock alone) like the rest of `.git`."""
    proof = tmp_path / "ran-outside"
    index = (repo / ".git" / "index").read_bytes() if (repo / ".git" / "index").exists() else None
    _approved(repo, GITLINK.format(proof=proof))
    proof.unlink(missing_ok=True)  # what ran inside the sandbox does not count
    subprocess.run(["git", "status", "--short"], cwd=repo, env=GIT_ENV, capture_output=True, check=False)
    assert not proof.exists(), "the person's git status ran a program the command planted"
    assert ((repo / ".git" / "index").read_bytes() if (repo / ".git" / "index").exists() else None) == index


def test_defence_off_a_gitlink_in_the_index_runs_the_planted_program(repo: Path, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setitem(_restore._DATA, ".git", _restore._DATA[".git"] | {"index"})
    monkeypatch.setenv("NBAGENT_SANDBOX", "none")
    _sandbox.sandbox_backend.cache_clear()
    proof = tmp_path / "ran-outside"
    _approved(repo, GITLINK.format(proof=proof))
    proof.unlink(missing_ok=True)
    subprocess.run(["git", "status", "--short"], cwd=repo, env=GIT_ENV, capture_output=True, check=False)
    assert proof.exists()


def test_a_pdbrc_the_command_writes_at_the_top_level_is_refused_or_removed(repo: Path) -> None:
    """Python's and IPython's debugger run the lines of `./.pdbrc` (the kernel's folder is the workspace): a
    protected path like `.git`, refused (mounts) or removed after the command (Landlock alone)."""
    run = _approved(repo, "printf '!import os; os.system(\"touch pwned\")\\ncontinue\\n' > .pdbrc; echo done")
    assert not (repo / ".pdbrc").exists(), text_of(run.calls[0])


def test_the_python_environment_the_kernel_runs_from_is_read_only_to_commands(repo: Path, backend, monkeypatch) -> None:
    """A project's `.venv` inside the workspace, the kernel's own: a `.pth` file a command adds to its
    site-packages would run at the next start of the kernel, or of any `python`, `jupyter` or `pip` from it (an
    outside try). Kept read-only and in place, as protected paths are; Landlock alone closes the top level then,
    and says why."""
    import sys

    env = repo / ".venv"
    (env / "lib" / "site-packages").mkdir(parents=True)
    (env / "pyvenv.cfg").write_text("home = /usr/bin\n")
    monkeypatch.setattr(sys, "prefix", str(env))
    run = _approved(repo, "echo 'import os' > .venv/lib/site-packages/zz.pth", "mv .venv sub/gone",
                    "echo ok > sub/made.txt")
    assert not (env / "lib" / "site-packages" / "zz.pth").exists(), text_of(run.calls[0])
    assert (env / "pyvenv.cfg").exists() and not (repo / "sub" / "gone").exists(), text_of(run.calls[1])
    assert (repo / "sub" / "made.txt").exists(), text_of(run.calls[2])  # control: the workspace is still writable
    if copies(backend):
        assert "the Python environment the kernel runs from" in text_of(run.calls[1]), text_of(run.calls[1])


def test_defence_off_a_command_plants_a_pth_in_the_kernel_s_environment(repo: Path, monkeypatch) -> None:
    import sys

    env = repo / ".venv"
    (env / "lib" / "site-packages").mkdir(parents=True)
    monkeypatch.setattr(sys, "prefix", str(env))
    monkeypatch.setattr(sandbox_landlock, "kernel_environments", lambda ws: [])
    _approved(repo, "echo 'import os' > .venv/lib/site-packages/zz.pth")
    assert (env / "lib" / "site-packages" / "zz.pth").exists()


@pytest.mark.parametrize("name", [".pdbrc", ".envrc"])
def test_protected_names_hold_in_the_folder_the_kernel_works_in_too(repo: Path, name: str, monkeypatch) -> None:
    """The kernel working in a sub-folder of the workspace (a notebook there, `%cd`): programs read these from the
    folder they run in (the debugger's `.pdbrc`: an outside try), so they are kept there as at the top level."""
    (repo / "notebooks").mkdir()
    monkeypatch.chdir(repo / "notebooks")
    run = _approved(repo, f"printf 'x\\n' > notebooks/{name}; echo done", "echo ok > notebooks/made.txt")
    assert not (repo / "notebooks" / name).exists(), text_of(run.calls[0])
    assert (repo / "notebooks" / "made.txt").exists(), text_of(run.calls[1])  # control: the folder is writable


def test_defence_off_outside_the_kernel_s_folder_the_name_is_an_ordinary_file(repo: Path, monkeypatch) -> None:
    (repo / "notebooks").mkdir()
    run = _approved(repo, "printf 'x\\n' > notebooks/.pdbrc; echo done")  # the kernel works elsewhere
    assert (repo / "notebooks" / ".pdbrc").exists(), text_of(run.calls[0])
