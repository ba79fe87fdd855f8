"""Deny rules walked around by programs that run other programs from their options, scripts or environment.

The person wrote `deny: shell(rm *)`: a wall. Each attack is a command that an approver (who approves
everything shown) lets through; SECURITY.md invariant 7 says such a command is denied when nbagent cannot
show that it keeps the deny rule. Effect checked: `victim.txt` still exists.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from nbagent import Agent, toolbox

from .conftest import Recorder, sh, ws  # noqa: F401 - fixtures
from .recorders import init_repo, turns

RULES = ["deny: shell(rm *)"]


def _run(ws: Path, command: str):
    approver = Recorder(True)
    agent = Agent(model=turns(sh(command, timeout=20)), tools=toolbox.all(workspace=ws), rules=RULES,
                  approver=approver, workspace=ws)
    return agent.run_sync("go")


def _setup(ws: Path, needs: str) -> None:
    (ws / "victim.txt").write_text("keep me\n")
    if needs == "git":
        if shutil.which("git") is None:
            pytest.skip("git is not installed")
        (ws / "hello.txt").write_text("hello\n")
        init_repo(ws)
    if needs == "bashenv":
        (ws / "evil.sh").write_text("rm victim.txt\n")


ATTACKS = [
    # (id, program needed, setup, command)
    ("split-filter", "split", "", "split --filter='rm victim.txt' data.txt"),
    ("tar-checkpoint-action", "tar", "", "tar -cf /dev/null --checkpoint=1 --checkpoint-action=exec='rm victim.txt' data.txt"),
    ("tar-compress-program", "tar", "", "tar -cf o.tar --use-compress-program='rm victim.txt' data.txt"),
    ("sed-e-command", "sed", "", "sed -n '1e rm victim.txt' data.txt"),
    ("sqlite3-shell", "sqlite3", "", "sqlite3 :memory: '.shell rm victim.txt'"),
    ("zip-TT", "zip", "", "zip z.zip data.txt -T -TT 'rm victim.txt'"),
    ("ssh-proxycommand", "ssh", "", "ssh -o BatchMode=yes -o ProxyCommand='rm victim.txt' somehost"),
    ("git-ls-remote-upload-pack", "git", "git", "git ls-remote --upload-pack='rm victim.txt; false' ."),
    ("git-grep-open-files-in-pager", "git", "git", "git grep --open-files-in-pager='rm victim.txt' hello"),
    ("git-alias-from-env-config", "git", "git",
     "GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=alias.st GIT_CONFIG_VALUE_0='!rm victim.txt' git st"),
    ("git-fetch-upload-pack", "git", "git", "git fetch --upload-pack='rm victim.txt; false' ."),
    ("git-ssh-command-from-env", "git", "git", "GIT_SSH_COMMAND='rm victim.txt; false' git ls-remote ssh://somehost/repo"),
    ("bash-env-startup-file", "bash", "bashenv", "BASH_ENV=./evil.sh bash -c true"),
    ("lessopen-preprocessor", "less", "", "LESSOPEN='|rm victim.txt' less data.txt"),
]


@pytest.mark.parametrize("program,needs,command", [a[1:] for a in ATTACKS], ids=[a[0] for a in ATTACKS])
def test_deny_rule_holds_against_programs_that_run_programs(ws, program, needs, command):
    if shutil.which(program) is None:
        pytest.skip(f"{program} is not installed")
    _setup(ws, needs)
    run = _run(ws, command)
    assert (ws / "victim.txt").exists(), (
        f"`{command}` ran rm past `deny: shell(rm *)`: call {run.calls[0].status}, "
        f"decision {run.calls[0].decision}")


KNOWN = [
    ("find-exec", "find . -maxdepth 0 -exec rm victim.txt ';'"),
    ("awk-system", "mawk 'BEGIN{system(\"rm victim.txt\")}'"),
    ("xargs", "echo victim.txt | xargs rm"),
    ("env-wrapper", "env rm victim.txt"),
]


@pytest.mark.parametrize("command", [k[1] for k in KNOWN], ids=[k[0] for k in KNOWN])
def test_deny_rule_holds_against_known_wrappers(ws, command):
    """The members of the class the README names: these must hold too (and show the rule is live)."""
    if command.startswith("mawk") and shutil.which("mawk") is None:
        pytest.skip("mawk is not installed")
    _setup(ws, "")
    _run(ws, command)
    assert (ws / "victim.txt").exists()


def test_control_plain_rm_is_denied_and_other_commands_run(ws):
    """Control: the rule denies plain rm, and an approved harmless split (the same program) runs."""
    _setup(ws, "")
    denied = _run(ws, "rm victim.txt")
    assert denied.calls[0].status == "denied" and (ws / "victim.txt").exists()
    ok = _run(ws, "split -l 1 data.txt part-")
    assert ok.calls[0].status == "ok", ok.calls[0].result
    assert (ws / "part-aa").exists()
