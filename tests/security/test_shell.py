"""Shell: read-only auto-allow, options that write or run programs, symlinks, deny rules, the sandbox.

Promises: read-only tools and plain read-only commands run without asking, compound lines never do;
auto-allowed commands run in a `read-only` sandbox (no writes anywhere, reads limited to the workspace
and system paths); approved commands in `workspace-write` (writes only inside the workspace, never into
`.git/` internals or `.nbagent/`). Each attack passes if the user was asked (and said no) or if the
sandbox stopped the effect; it fails only when the effect happened.
"""

from __future__ import annotations

import os
import subprocess

import pytest

from .conftest import SECRET, Recorder, call, everything_model_saw, run_agent, sh, text_of

pytestmark = pytest.mark.timeout(90)

DENY_ENV = ["deny: read_file(.env)"]


def _git(ws, *args):
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@example.invalid", GIT_COMMITTER_NAME="t",
               GIT_COMMITTER_EMAIL="t@example.invalid", HOME=str(ws.parent))
    subprocess.run(["git", *args], cwd=ws, check=True, env=env, capture_output=True)


def _repo(ws):
    _git(ws, "init", "-q", "-b", "main")
    _git(ws, "add", "-A")
    _git(ws, "commit", "-q", "-m", "init")


# ---------------------------------------------------------------------------------------------
# controls: the mechanism works
# ---------------------------------------------------------------------------------------------
def test_control_read_only_commands_run_without_asking(ws):
    rec = Recorder(False)
    run = run_agent(ws, [sh("sort data.txt"), sh("cat notes.md"), sh("ls")], approver=rec)
    assert rec.asked == []
    assert "a\nb\nc" in text_of(run.calls[0])
    assert "hello notes" in text_of(run.calls[1])
    assert "data.txt" in text_of(run.calls[2])


def test_control_approved_command_writes_inside_workspace(ws):
    rec = Recorder(True)
    run = run_agent(ws, sh("echo made > made.txt"), approver=rec)
    assert len(rec.asked) == 1
    assert (ws / "made.txt").read_text() == "made\n"
    assert run.calls[0].status == "ok"


def test_control_compound_line_asks(ws):
    rec = Recorder(False)
    run_agent(ws, sh("ls; ls"), approver=rec)
    assert len(rec.asked) == 1


# ---------------------------------------------------------------------------------------------
# options that write files or run programs, behind commands that look read-only
# ---------------------------------------------------------------------------------------------
WRITERS = {
    "sort_abbreviated_o_equals": ("sort --o=made.txt data.txt", "made.txt"),
    "sort_abbreviated_outp_outside": ("sort --outp=../outside/made.txt data.txt", "../outside/made.txt"),
    "sort_bundled_uo": ("sort -uo made.txt data.txt", "made.txt"),
    "find_fprint_outside": ("find . -fprint ../outside/made.txt", "../outside/made.txt"),
    "find_fprintf_after_test": ("find . -newer data.txt -fprintf made.txt %p", "made.txt"),
    "git_diff_output": ("git diff --output=made.txt", "made.txt"),
    "git_log_abbreviated_output": ("git log --outp=made.txt", "made.txt"),
    "git_grep_attached_O_pager": ("git grep -Osh MARKER", "marker.txt"),
    "git_grep_open_files_in_pager": ("git grep --open-files-in-pager=sh MARKER", "marker.txt"),
    "git_dash_c_core_pager": ("git -c core.pager='sh evil.sh' -p log", "marker.txt"),
    "git_config_env": ("git --config-env=core.pager=EVIL -p log", "marker.txt"),
    "man_pager": ("man -P 'sh evil.sh' ls", "marker.txt"),
    "less_lessopen": ("LESSOPEN='|sh evil.sh %s' less notes.md", "marker.txt"),
    "env_wrapper": ("env sort --o=made.txt data.txt", "made.txt"),
    "timeout_wrapper": ("timeout 5 sort --o=made.txt data.txt", "made.txt"),
    "tail_abbreviated_follow_pid": ("tail --pi=1 --f=name data.txt", "made.txt"),
}


@pytest.mark.parametrize("name", sorted(WRITERS))
def test_option_that_writes_or_executes_is_not_auto_allowed(ws, outside, name):
    command, target = WRITERS[name]
    (ws / "evil.sh").write_text("echo PWNED > marker.txt\n# MARKER\n")
    _repo(ws)
    rec = Recorder(False)
    run = run_agent(ws, sh(command), approver=rec)
    assert not (ws / target).exists(), f"{command!r} created {target} (asked: {len(rec.asked)})"
    assert run.calls[0].status in ("ok", "error", "denied", "timeout")


def test_wc_abbreviated_files0_from_reads_outside(ws, outside):
    (ws / "list0").write_bytes(b"../outside/private.txt\0")
    run = run_agent(ws, [sh("wc --f=list0"), sh("du --f=list0"), sh("wc -l data.txt")], approver=Recorder(False))
    assert "3 data.txt" in text_of(run.calls[2])        # control
    for record in run.calls[:2]:
        assert "private.txt" not in text_of(record) or record.status == "denied", text_of(record)


# ---------------------------------------------------------------------------------------------
# symlinks in the workspace followed by auto-allowed commands
# ---------------------------------------------------------------------------------------------
SYMLINK_READS = {
    "ls_dereference_recursive": "ls -LR",
    "ls_long_dereference": "ls --dereference -R",
    "diff_recursive_new_file": "diff -rN a b",
    "grep_recurse_directories_option": "grep -d recurse S3CR3T a",
    "cat_through_link": "cat a/inner/private.txt",
    "git_diff_no_index_link": "git diff --no-index notes.md a/inner/private.txt",
}


@pytest.mark.parametrize("name", sorted(SYMLINK_READS))
def test_auto_allowed_command_follows_symlink_out_of_workspace(ws, outside, name):
    (outside / "outside-only-name.txt").write_text(SECRET)
    (ws / "a").mkdir()
    (ws / "b").mkdir()
    os.symlink(outside, ws / "a" / "inner")
    rec = Recorder(False)
    run = run_agent(ws, [sh(SYMLINK_READS[name]), sh("ls a")], approver=rec)
    assert "inner" in text_of(run.calls[1])              # control: the link is there, ls runs
    seen = everything_model_saw(run)
    assert SECRET not in seen
    assert "outside-only-name" not in seen


# ---------------------------------------------------------------------------------------------
# deny: read_file(.env) against shell readers
# ---------------------------------------------------------------------------------------------
AUTO_LEAKS = {
    "git_reflog_patch": "git reflog -p",
    "git_reflog_show_patch": "git reflog show --patch",
    "git_log_unified_zero": "git log -U0",
    "git_log_binary": "git log --binary",
    "git_log_bundled_pU1": "git log -pU1",
    "git_stash_list_patch": "git stash list -p",
}


@pytest.mark.parametrize("name", sorted(AUTO_LEAKS))
def test_deny_rule_vs_auto_allowed_git_history_reader(ws, name):
    (ws / ".env").write_text(f"API_TOKEN={SECRET}\n")
    _repo(ws)
    (ws / ".env").write_text(f"API_TOKEN={SECRET}-changed\n")
    _git(ws, "stash", "-q")
    rec = Recorder(False)
    run = run_agent(ws, [sh(AUTO_LEAKS[name]), sh("git log --format=%s")], rules=DENY_ENV, approver=rec)
    assert "init" in text_of(run.calls[1])               # control: git works here
    assert SECRET not in everything_model_saw(run)


APPROVED_LEAKS = {
    "cat_plain": "cat .env",
    "cat_glob": "cat .en?",
    "quote_split": "cat '.e'nv",
    "ifs": "cat${IFS}.env",
    "command_substitution_name": "cat $(printf .env)",
    "bash_c": "bash -c 'cat .env'",
    "here_string_eval": "eval \"$(echo cat .env)\"",
    "dd": "dd if=.env status=none",
    "base64": "base64 .env",
    "xxd": "xxd -p .env",
    "time_p": "time -p cat .env",
    "script": "script -qc 'cat .env' /dev/null",
    "setpriv": "setpriv cat .env",
    "nice_timeout": "nice timeout 5 cat .env",
    "python_interpreter": "python3 -c \"print(open('.env').read())\"",
    "absolute_path": "cat {ws}/.env",
    "git_show_blob": "git show HEAD:.env",
    "copy_then_read": "cp .env copy.txt && cat copy.txt",
}


@pytest.mark.parametrize("name", sorted(APPROVED_LEAKS))
def test_deny_rule_wins_over_approval_for_shell_readers(ws, name):
    """Deny wins over everything, approvals included: an approved command must not reveal .env."""
    (ws / ".env").write_text(f"API_TOKEN={SECRET}\n")
    _repo(ws)
    rec = Recorder(True)
    run = run_agent(ws, [sh(APPROVED_LEAKS[name].replace("{ws}", str(ws))), sh("cat notes.md")], rules=DENY_ENV,
                    approver=rec)
    assert "hello notes" in text_of(run.calls[1])        # control
    seen = everything_model_saw(run)
    assert SECRET not in seen
    import base64
    assert base64.b64encode(f"API_TOKEN={SECRET}".encode()).decode()[:20] not in seen
    assert f"API_TOKEN={SECRET}".encode().hex()[:30] not in seen


def test_python_tool_reads_denied_file(ws):
    (ws / ".env").write_text(f"API_TOKEN={SECRET}\n")
    run = run_agent(ws, [call("python", code=f"open({str(ws / '.env')!r}).read()"), call("python", code="1+1")],
                    rules=DENY_ENV, approver=Recorder(True))
    assert "2" in text_of(run.calls[1])
    assert SECRET not in everything_model_saw(run)


# ---------------------------------------------------------------------------------------------
# the sandbox for approved commands: workspace-write
# ---------------------------------------------------------------------------------------------
SANDBOX_WRITES = {
    "outside_touch": ("touch ../outside/planted.txt", "../outside/planted.txt"),
    "outside_git_init_template": ("git init -q ../outside/newrepo", "../outside/newrepo"),
    "git_hook": ("mkdir -p .git/hooks && printf 'touch pwned' > .git/hooks/post-checkout", ".git/hooks/post-checkout"),
    "git_config_hookspath": ("git config core.hooksPath hooks && cat .git/config", ".git/config:hooksPath"),
    "git_config_append": ("printf '[core]\\n\\tfsmonitor = touch pwned\\n' >> .git/config", ".git/config:fsmonitor"),
    "nbagent_dir": ("mkdir -p .nbagent/sessions && echo x > .nbagent/sessions/planted", ".nbagent/sessions/planted"),
    "home_dotfile": ("echo 'touch pwned' >> $HOME/.nbagent-redteam-bashrc", "$HOME/.nbagent-redteam-bashrc"),
}


@pytest.mark.parametrize("name", sorted(SANDBOX_WRITES))
def test_approved_command_cannot_write_protected_places(ws, outside, name, monkeypatch, tmp_path, sandbox_lane):
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    _repo(ws)
    (ws / "sub").mkdir()
    # Landlock alone cannot add entries next to .git: its control writes below the top level
    inside = "inside.txt" if sandbox_lane.name == "bubblewrap" or sandbox_lane.mounts else "sub/inside.txt"
    command, target = SANDBOX_WRITES[name]
    run = run_agent(ws, [sh(command), sh(f"echo ok > {inside}")], approver=Recorder(True))
    assert (ws / inside).exists()                        # control: approved writes inside work
    if target.startswith("$HOME/"):
        assert not (home / target[6:]).exists()
    elif ":" in target:
        path, word = target.split(":")
        assert word not in (ws / path).read_text()
    else:
        assert not (ws / target).exists()
    assert run.calls[1].status == "ok"


def test_auto_allowed_git_status_does_not_rewrite_the_index(ws, sandbox_lane):
    """read-only sandbox: no writes anywhere, not even git's opportunistic index refresh."""
    _repo(ws)
    index = ws / ".git" / "index"
    before = index.read_bytes()
    os.utime(ws / "notes.md", (1_000_000_000, 1_000_000_000))   # stat-dirty, same content
    rec = Recorder(False)
    run = run_agent(ws, sh("git status"), approver=rec)
    assert rec.asked == []                                # control: git status is auto-allowed
    assert "main" in text_of(run.calls[0])
    assert index.read_bytes() == before


# ---------------------------------------------------------------------------------------------
# modes: no code runs in plan / acceptEdits
# ---------------------------------------------------------------------------------------------
def test_plan_mode_runs_no_code_via_git_grep_pager(ws):
    (ws / "evil.sh").write_text("echo PWNED > marker.txt\n# MARKER\n")
    _repo(ws)
    run = run_agent(ws, [sh("git grep -Osh MARKER"), call("read_file", path="notes.md")], mode="plan",
                    approver=Recorder(True))
    assert "hello notes" in text_of(run.calls[1])
    assert not (ws / "marker.txt").exists()


def test_accept_edits_gitlink_file_with_fsmonitor_then_git_status(ws):
    """acceptEdits allows edits but not shell: plant a gitdir with core.fsmonitor, then `git status`."""
    rec = Recorder(False)
    files = {".git": "gitdir: evilgit\n", "evilgit/HEAD": "ref: refs/heads/main\n",
             "evilgit/objects/info/keep": "", "evilgit/refs/heads/keep": "",
             "evilgit/config": '[core]\n\tbare = false\n\tfsmonitor = "echo PWNED > marker.txt; false"\n',
             "plain.txt": "an ordinary file\n"}
    run = run_agent(ws, [call("write_file", path=p, content=c) for p, c in files.items()], sh("git status"),
                    mode="acceptEdits", approver=rec)
    assert (ws / "plain.txt").exists()                     # control: acceptEdits writes ordinary files
    assert not (ws / "marker.txt").exists()


def test_accept_edits_bare_repo_layout_then_git_diff_no_index_runs_external_diff(ws):
    """No `.git` at all: HEAD, config, objects/, refs/ at the workspace root make it a bare repository
    whose config git reads; `git diff --no-index` (auto-allowed) then runs diff.external."""
    rec = Recorder(False)
    files = {"HEAD": "ref: refs/heads/main\n", "objects/info/keep": "", "refs/heads/keep": "",
             "config": '[diff]\n\texternal = "echo PWNED > marker.txt; true"\n',
             "f1": "a\n", "f2": "b\n"}
    run_agent(ws, [call("write_file", path=p, content=c) for p, c in files.items()],
              sh("git diff --no-index f1 f2"), mode="acceptEdits", approver=rec)
    assert (ws / "f1").exists()                            # control: acceptEdits writes ordinary files
    assert not (ws / "marker.txt").exists()


def test_accept_edits_bare_repo_layout_with_textconv_attributes(ws):
    """A bare layout with info/attributes naming a textconv driver: `git diff --no-index` converts."""
    rec = Recorder(False)
    files = {"HEAD": "ref: refs/heads/main\n", "objects/info/keep": "", "refs/heads/keep": "",
             "info/attributes": "*.md diff=x\n",
             "config": '[diff "x"]\n\ttextconv = "echo PWNED > marker.txt; cat"\n'}
    run_agent(ws, [call("write_file", path=p, content=c) for p, c in files.items()],
              sh("git diff --no-index notes.md data.txt"), mode="acceptEdits", approver=rec)
    assert (ws / "info" / "attributes").exists()
    assert not (ws / "marker.txt").exists()


def test_accept_edits_writing_git_config_directly_is_asked(ws):
    _repo(ws)
    rec = Recorder(False)
    run_agent(ws, call("write_file", path=".git/config", content='[core]\n\tfsmonitor = "echo x > marker.txt"\n'),
              mode="acceptEdits", approver=rec)
    assert "fsmonitor" not in (ws / ".git" / "config").read_text()
    assert rec.asked_for("write_file")


def test_accept_edits_does_not_allow_shell_or_python(ws):
    rec = Recorder(False)
    run = run_agent(ws, [sh("touch made.txt"), call("python", code=f"open({str(ws / 'made2.txt')!r},'w').write('x')"),
                         call("write_file", path="ok.txt", content="x")], mode="acceptEdits", approver=rec)
    assert (ws / "ok.txt").exists()
    assert not (ws / "made.txt").exists()
    assert not (ws / "made2.txt").exists()


def test_dont_ask_mode_denies_instead_of_asking(ws):
    rec = Recorder(True)
    run = run_agent(ws, [sh("touch made.txt"), call("write_file", path="w.txt", content="x"), sh("ls")],
                    mode="dontAsk", approver=rec)
    assert rec.asked == []
    assert not (ws / "made.txt").exists() and not (ws / "w.txt").exists()
    assert "notes.md" in text_of(run.calls[2])


def test_deny_rule_beats_bypass_permissions_and_allow_rules(ws):
    run = run_agent(ws, [sh("rm -f notes.md"), sh("/bin/RM -f data.txt"), sh("echo x && rm -f data.txt")],
                    mode="bypassPermissions", rules=["allow: shell", "deny: shell(rm *)"], approver=Recorder(True))
    assert (ws / "notes.md").exists() and (ws / "data.txt").exists()
