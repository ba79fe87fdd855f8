"""Shell deny rules: "deny rules match any command the line may run ... and any line they cannot read";
"Deny wins over everything, modes included". Every attack runs in bypassPermissions with an approver
that says yes, so the deny rule is the only thing standing."""

from __future__ import annotations

import os
import subprocess

import pytest

from .conftest import Recorder, run_agent, sh, text_of

pytestmark = pytest.mark.timeout(60)


def _run(ws, command, rule):
    return run_agent(ws, [sh(command), sh("ls")], mode="bypassPermissions", rules=[rule], approver=Recorder(True))


def test_control_deny_rm_blocks_plain_and_wrapped_rm(ws):
    run = run_agent(ws, [sh("rm -f notes.md"), sh("bash -c 'rm -f notes.md'"), sh("ls")],
                    mode="bypassPermissions", rules=["deny: shell(rm *)"], approver=Recorder(True))
    assert run.calls[0].status == "denied" and run.calls[1].status == "denied"
    assert "notes.md" in text_of(run.calls[2])


RM_EVASIONS = {
    "here_string_to_bash": "bash <<< 'rm -f notes.md'",
    "pipe_to_bash": "echo 'rm -f notes.md' | bash",
    "base64_pipe_to_sh": "echo cm0gLWYgbm90ZXMubWQ= | base64 -d | sh",
    "trap_exit": "trap 'rm -f notes.md' EXIT",
    "alias": "shopt -s expand_aliases; alias r=rm\nr -f notes.md",
    "script_c": "script -qc 'rm -f notes.md' /dev/null",
    "git_alias_shell": "git -c alias.x='!rm -f notes.md' x",
    "make_from_stdin": "make -f - <<< $'x:\\n\\trm -f notes.md'",
    "script_file_then_run": "printf 'rm -f notes.md' > s.sh; bash s.sh",
    "awk_system": "awk 'BEGIN{system(\"rm -f notes.md\")}'",
    "heredoc_to_bash": "bash <<'EOF'\nrm -f notes.md\nEOF",
    "source_process_substitution": ". <(echo rm -f notes.md)",
    "xargs_sh_from_printf": "printf 'rm -f notes.md' | xargs -0 sh -c",
}


@pytest.mark.parametrize("name", sorted(RM_EVASIONS))
def test_deny_rm_rule_evasion(ws, name):
    run = _run(ws, RM_EVASIONS[name], "deny: shell(rm *)")
    assert "data.txt" in text_of(run.calls[1])          # control: the shell works
    assert (ws / "notes.md").exists(), f"{RM_EVASIONS[name]!r} ran rm ({run.calls[0].decision})"


def _git(ws, *args):
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@example.invalid", GIT_COMMITTER_NAME="t",
               GIT_COMMITTER_EMAIL="t@example.invalid")
    return subprocess.run(["git", *args], cwd=ws, check=True, env=env, capture_output=True, text=True).stdout


GIT_EVASIONS = {
    "dash_C": "git -C . commit -q --allow-empty -m x",
    "no_pager": "git --no-pager commit -q --allow-empty -m x",
    "dash_c_option": "git -c user.name=x commit -q --allow-empty -m x",
    "git_dir_option": "git --git-dir=.git commit -q --allow-empty -m x",
    "exec_path_program": "$(git --exec-path)/git-commit -q --allow-empty -m x",
    "libexec_program": "/usr/lib/git-core/git-commit -q --allow-empty -m x",
    "alias_in_line": "git -c alias.ci=commit ci -q --allow-empty -m x",
}


@pytest.mark.parametrize("name", sorted(GIT_EVASIONS))
def test_deny_git_commit_rule_evasion(ws, name, monkeypatch):
    for k in list(os.environ):
        if k.startswith("GIT_"):
            monkeypatch.delenv(k)
    monkeypatch.setenv("GIT_AUTHOR_NAME", "t")
    monkeypatch.setenv("GIT_AUTHOR_EMAIL", "t@example.invalid")
    monkeypatch.setenv("GIT_COMMITTER_NAME", "t")
    monkeypatch.setenv("GIT_COMMITTER_EMAIL", "t@example.invalid")
    _git(ws, "init", "-q", "-b", "main")
    _git(ws, "add", "-A")
    _git(ws, "commit", "-q", "-m", "init")
    run = run_agent(ws, [sh("git commit -q --allow-empty -m direct"), sh(GIT_EVASIONS[name]), sh("ls")],
                    mode="bypassPermissions", rules=["deny: shell(git commit*)"], approver=Recorder(True))
    assert run.calls[0].status == "denied"               # control: the rule works on the plain form
    assert "data.txt" in text_of(run.calls[2])
    count = _git(ws, "rev-list", "--count", "HEAD").strip()
    assert count == "1", f"{GIT_EVASIONS[name]!r} committed ({run.calls[1].decision})"
