"""Deny rules fail closed: with one in force, only programs known to run no others pass (SECURITY.md
invariant 7).

Written from the outside: the README says `deny: shell(rm *)` stops every command that may run `rm`, and
that a command whose effect nbagent cannot show is denied. Each attack runs `rm` through something that is
on no list of programs that run programs: the dynamic loader, `/proc/self/exe`, a copy of rm under another
name, a program of the workspace, a git filter or editor that the repository's configuration names, and
bash builtins that rename or run programs or assign the variables bash runs (`hash -p`, aliases, `trap`,
`PS4` with `set -x` however it is assigned, `mapfile -C`, arithmetic on a value holding `$(...)`). The
approver approves everything shown; the effect checked is that `victim.txt` is still there. The defence
(`nbagent.toolbox._leaves`) lets a program pass only when it is known; turned off, the attacks delete it.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from nbagent import Agent, toolbox
from nbagent.toolbox import _subcommands
from nbagent.toolbox._leaves import LEAF_BUILTINS, LEAF_PROGRAMS, Where
from nbagent.toolbox._runsprograms import RUNNERS
from nbagent.toolbox._shellrules import pattern_matches

from .conftest import Recorder, sh, text_of, ws  # noqa: F401 - fixtures
from .recorders import git, init_repo, turns

pytestmark = pytest.mark.timeout(120)

RULES = ["deny: shell(rm *)"]
LOADER = next((p for p in ("/lib64/ld-linux-x86-64.so.2", "/lib/ld-linux-aarch64.so.1") if os.path.exists(p)), None)


def _run(ws: Path, command: str, **kw):
    agent = Agent(model=turns(sh(command, timeout=20)), tools=toolbox.all(workspace=ws), rules=RULES,
                  approver=Recorder(True), workspace=ws, **kw)
    return agent.run_sync("go")


def _setup(ws: Path, needs: str) -> None:
    (ws / "victim.txt").write_text("keep me\n")
    (ws / "payload").write_text("$(rm victim.txt)\n")
    (ws / "subscript").write_text("a[$(rm victim.txt)]\n")
    if needs.startswith("git"):
        if shutil.which("git") is None:
            pytest.skip("git is not installed")
        init_repo(ws)
        # what a cloned repository, or an earlier approved edit, leaves in its configuration
        config = {"git-filter": '[filter "x"]\n\tclean = rm victim.txt\n',
                  "git-diff": "[diff]\n\texternal = rm victim.txt; false\n",
                  "git-editor": "[core]\n\teditor = rm victim.txt; false\n",
                  "git-include": f"[include]\n\tpath = {ws}/more.cfg\n"}[needs]
        with open(ws / ".git" / "config", "a") as f:
            f.write(config)
        (ws / "more.cfg").write_text('[filter "x"]\n\tclean = rm victim.txt\n')
        (ws / ".gitattributes").write_text("*.txt filter=x\n")
        (ws / "victim.txt").write_text("keep me, changed\n")
    if needs == "script":
        (ws / "ls").write_text("#!/bin/sh\nrm victim.txt\n")
        (ws / "ls").chmod(0o755)


ATTACKS = [
    # (id, setup, command)
    ("dynamic-loader", "loader", f"{LOADER} /bin/rm victim.txt"),
    ("proc-self-exe", "", "/proc/self/exe -c 'r''m victim.txt'"),
    ("copy-under-another-name", "", "cp /bin/rm ./purge && ./purge victim.txt"),
    ("link-under-another-name", "", "ln -s /bin/rm purge; ./purge victim.txt"),
    ("workspace-program", "script", "./ls"),
    ("program-by-path", "script", "$PWD/ls"),
    ("git-filter-driver", "git-filter", "git add victim.txt"),
    ("git-filter-on-status", "git-filter", "git status"),
    ("git-external-diff", "git-diff", "git diff"),
    ("git-editor", "git-editor", "git commit -a"),
    ("git-include-names-a-filter", "git-include", "git add victim.txt"),
    ("hash-p", "", "hash -p /bin/rm ls; ls victim.txt"),
    ("alias-next-line", "", "shopt -s expand_aliases\nalias ls='r''m victim.txt'\nls"),
    ("trap-exit", "", "trap 'r''m victim.txt' EXIT"),
    ("ps4-assigned", "", "PS4='$(r''m victim.txt)'; set -x; true"),
    ("ps4-read", "", "read PS4 < payload; set -x; true"),
    ("ps4-printf-v", "", "printf -v PS4 '%s' '$(r''m victim.txt)'; set -x; true"),
    ("ps4-mapfile", "", "mapfile -t PS4 < payload; set -x; true"),
    ("ps4-for-loop", "", "for PS4 in '$(r''m victim.txt)'; do set -x; true; done"),
    ("mapfile-callback", "", "mapfile -C 'r''m victim.txt #' -c 1 < payload"),
    ("arithmetic-on-a-value", "", "read x < subscript; echo $((x))"),
    ("arithmetic-old-form", "", "read x < subscript; echo $[x]"),
    ("let", "", "read x < subscript; let x"),
    ("test-v-subscript", "", "test -v 'a[$(r''m victim.txt)]'"),
    ("double-bracket-arithmetic", "", "[[ 1 -eq 'a[$(r''m victim.txt)]' ]]"),
    ("compgen-command", "", "compgen -C 'r''m victim.txt' x"),
    ("jobs-x", "", "jobs -x /bin/r''m victim.txt"),
    ("unknown-program", "", "frobnicate victim.txt"),
]


@pytest.mark.parametrize("needs,command", [a[1:] for a in ATTACKS], ids=[a[0] for a in ATTACKS])
def test_deny_rule_holds_against_programs_not_known_to_run_no_others(ws, needs, command):
    if needs == "loader" and LOADER is None:
        pytest.skip("no dynamic loader at a known path")
    _setup(ws, needs)
    run = _run(ws, command)
    assert (ws / "victim.txt").exists(), (
        f"`{command}` ran rm past `deny: shell(rm *)`: {run.calls[0].status}, {run.calls[0].decision}, "
        f"{text_of(run.calls[0])[:300]}")
    assert run.calls[0].status == "denied" or "not run" in text_of(run.calls[0])


CONTROLS = [
    # (id, setup, command): the README's kind of commands, which keep the rule and run
    ("ls", "", "ls -la"),
    ("cat", "", "cat notes.md"),
    ("grep", "", "grep -n hello notes.md"),
    ("echo-pipe-wc", "", "echo hi | wc -c"),
    ("nice-wrapped", "", "nice -n 5 wc -l notes.md"),
    ("timeout-wrapped", "", "timeout 5 head -1 notes.md"),
    ("read-loop", "", "while read line; do echo \"$line\"; done < notes.md"),
    ("for-loop", "", "for f in notes.md data.txt; do wc -c \"$f\"; done"),
    ("cd-and-ls", "", "cd . && ls"),
    ("printf", "", "printf '%s\\n' hello"),
    ("system-program-by-path", "", "/usr/bin/wc -l notes.md"),
    ("git-status-plain-repo", "git", "git status --short"),
    ("git-commit-plain-repo", "git-full", "git commit -qam 'notes'"),
    ("git-log", "git", "git log --oneline"),
]


@pytest.mark.parametrize("needs,command", [c[1:] for c in CONTROLS], ids=[c[0] for c in CONTROLS])
def test_control_known_programs_keep_the_rule_and_run(ws, needs, command):
    (ws / "victim.txt").write_text("keep me\n")
    if needs.startswith("git"):
        if shutil.which("git") is None:
            pytest.skip("git is not installed")
        init_repo(ws)
        (ws / "notes.md").write_text("hello notes, changed\n")
        git(ws, "config", "user.name", "a")
        git(ws, "config", "user.email", "a@b")
    # a commit writes .git, which the sandbox keeps read-only: it runs without one
    run = _run(ws, command, **({"sandbox": "danger-full-access"} if needs == "git-full" else {}))
    assert run.calls[0].status == "ok", (command, run.calls[0].decision, text_of(run.calls[0])[:300])


@pytest.mark.parametrize("command", ["nice -n 5 ./purge victim.txt", "taskset -c 0 ./purge victim.txt",
                                     "timeout -s KILL 5 frobnicate", "sudo -u me ./purge victim.txt",
                                     "env -i A=1 ./purge victim.txt", "command ./purge victim.txt",
                                     "exec -a ls ./purge victim.txt", "chroot / ./purge victim.txt",
                                     "find . -exec ./purge {} ;", "bash -c './purge victim.txt'"])
def test_the_program_a_wrapper_runs_is_judged(command):
    """A wrapper is read through: whatever option syntax it has, the program it runs must be known too."""
    assert pattern_matches("rm *", command, "deny")


def test_control_plain_rm_is_still_denied(ws):
    (ws / "victim.txt").write_text("keep me\n")
    assert _run(ws, "rm victim.txt").calls[0].status == "denied" and (ws / "victim.txt").exists()


REAL = ["hash -p /bin/rm ls; ls victim.txt", "read PS4 < payload; set -x; true",
        "cp /bin/rm ./purge && ./purge victim.txt", "git add victim.txt", "/proc/self/exe -c 'r''m victim.txt'"]


@pytest.mark.parametrize("command", REAL)
def test_the_mechanism_off_lets_rm_run(ws, command, monkeypatch):
    _setup(ws, "git-filter" if command.startswith("git") else "")
    monkeypatch.setattr(_subcommands, "program_problem", lambda words, where, known=(): None)
    monkeypatch.setattr(_subcommands, "git_problem", lambda words, where: None)
    run = _run(ws, command, mode="bypassPermissions", sandbox="danger-full-access")  # git add writes .git
    assert not (ws / "victim.txt").exists(), (command, run.calls[0].status, text_of(run.calls[0])[:300])


def test_the_deny_rule_is_looked_at_again_when_the_command_starts(ws):
    """Calls running side by side are decided before any runs: when the decision was made, the repository
    configured no program; meanwhile another call (approved) configured a filter. The command is refused
    as it starts."""
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    from nbagent.calls.permissions import PermissionPolicy
    from nbagent.context import Constraints, ToolContext

    _setup(ws, "")
    init_repo(ws)
    (ws / ".gitattributes").write_text("*.txt filter=x\n")
    (ws / "victim.txt").write_text("keep me, changed\n")
    shell = next(t for t in toolbox.all(workspace=ws) if t.name == "shell")
    policy = PermissionPolicy(rules=RULES, mode="bypassPermissions")
    ctx = ToolContext(call_id="c", constraints=Constraints(mode="bypassPermissions", workspace=ws),
                      rules=tuple(policy.rules))
    args = shell.validate({"command": "git add victim.txt"})
    decision, _ = policy.evaluate(shell, args, ctx)
    assert decision is not None and decision.allow  # a plain repository: git keeps the rule
    git(ws, "config", "filter.x.clean", f"rm {ws / 'victim.txt'}")  # the other call of the batch
    ctx.decision = decision
    import asyncio

    result = asyncio.run(shell.invoke(args, ctx))
    assert (ws / "victim.txt").exists() and "checked again as it started" in result.text


def test_no_program_is_both_a_leaf_and_a_runner():
    """The tables do not contradict each other: a leaf never has a table of how it runs others."""
    assert not (LEAF_PROGRAMS | LEAF_BUILTINS) & {n for n, r in RUNNERS.items() if r.always}
    assert not (LEAF_PROGRAMS | LEAF_BUILTINS) & _subcommands.RUNS_OTHER_COMMANDS


def test_without_a_deny_rule_an_unknown_program_is_asked_about_and_runs(ws):
    """The allowlist speaks only for deny rules: without one, an approved command runs whatever it is."""
    (ws / "tool.sh").write_text("echo ran-it\n")
    agent = Agent(model=turns(sh("bash tool.sh")), tools=toolbox.all(workspace=ws), approver=Recorder(True),
                  workspace=ws)
    run = agent.run_sync("go")
    assert run.calls[0].status == "ok" and "ran-it" in text_of(run.calls[0])


def test_git_is_known_only_once_its_repository_was_read(tmp_path):
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    (tmp_path / "a.txt").write_text("a\n")
    init_repo(tmp_path)
    where = Where(str(tmp_path.resolve()), sandboxed=True)
    assert not pattern_matches("rm *", "git status", "deny", where)
    assert pattern_matches("rm *", "git status", "deny")  # not read: it may run a filter
    git(tmp_path, "config", "filter.x.smudge", "cat")
    assert pattern_matches("rm *", "git status", "deny", where)
