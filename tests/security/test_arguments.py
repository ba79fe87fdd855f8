"""Arguments and rule patterns: what is approved or allowed must be exactly what runs.

Allow rules and acceptEdits' `.git/` exception against path spellings, JSON with duplicate keys and
repairs, extra arguments, and `inspect_variable` names that are code."""

from __future__ import annotations

import os
import subprocess

import pytest

from nbagent import ToolCall

from .conftest import Recorder, call, everything_model_saw, run_agent, sh, text_of

pytestmark = pytest.mark.timeout(60)


def _repo(ws):
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=ws, check=True, env=env, capture_output=True)


GIT_PATHS = [".git/config", "./.git/config", "sub/../.git/config", ".git//config", ".git/./config",
             "{ws}/.git/config", "gitlink/config"]


@pytest.mark.parametrize("path", GIT_PATHS)
def test_accept_edits_git_internals_by_any_spelling(ws, path):
    _repo(ws)
    (ws / "sub").mkdir()
    os.symlink(".git", ws / "gitlink")
    before = (ws / ".git" / "config").read_text()
    rec = Recorder(False)
    run = run_agent(ws, [call("write_file", path=path.format(ws=ws), content="[core]\n\tfsmonitor = x\n"),
                         call("edit_file", path=path.format(ws=ws), old="[core]", new="[core]\n\tfsmonitor = y"),
                         call("write_file", path="ok.txt", content="x")],
                    mode="acceptEdits", approver=rec)
    assert (ws / "ok.txt").exists()                       # control: acceptEdits allows edits
    assert (ws / ".git" / "config").read_text() == before


ALLOW_PATHS = ["notebooks/../evil.py", "notebooks/./../evil.py", "notebooks/up/evil.py", "NOTEBOOKS/evil.py",
               "notebooks/../.git/hooks/pre-commit"]


@pytest.mark.parametrize("path", ALLOW_PATHS)
def test_allow_rule_path_pattern_widening(ws, path):
    (ws / "notebooks").mkdir()
    os.symlink("..", ws / "notebooks" / "up")
    (ws / ".git" / "hooks").mkdir(parents=True)
    rec = Recorder(False)
    run = run_agent(ws, [call("write_file", path=path, content="x"), call("write_file", path="notebooks/a.py", content="x")],
                    rules=["allow: write_file(notebooks/**)"], approver=rec)
    assert (ws / "notebooks" / "a.py").exists()           # control: the rule allows its own folder
    assert run.calls[1].decision.source == "rule"
    assert not (ws / "evil.py").exists() and not (ws / "NOTEBOOKS").exists()
    assert not (ws / ".git" / "hooks" / "pre-commit").exists()


SHELL_ALLOW = {
    "and_list": "git status && touch pwned.txt",
    "newline": "git status\ntouch pwned.txt",
    "substitution_in_argument": "git status $(touch pwned.txt)",
    "backticks": "git status `touch pwned.txt`",
    "redirection": "git status > pwned.txt",
    "process_substitution": "git status <(touch pwned.txt)",
    "carriage_return": "git status\rtouch pwned.txt",
    "assignment_prefix": "GIT_EXTERNAL_DIFF='touch pwned.txt' git status",
    "config_option": "git status -c core.fsmonitor='touch pwned.txt'",
}


@pytest.mark.parametrize("name", sorted(SHELL_ALLOW))
def test_allow_rule_shell_prefix_widening(ws, name):
    _repo(ws)
    rec = Recorder(False)
    run = run_agent(ws, [sh(SHELL_ALLOW[name]), sh("git status")], rules=["allow: shell(git status*)"],
                    approver=rec)
    assert run.calls[1].status == "ok"
    assert not (ws / "pwned.txt").exists(), f"{SHELL_ALLOW[name]!r}: {run.calls[0].decision}"


RAW = {
    "duplicate_keys": '{"command": "ls", "command": "touch pwned.txt"}',
    "two_objects": '{"command": "ls"}{"command": "touch pwned.txt"}',
    "trailing_garbage": '{"command": "ls"} ; touch pwned.txt',
    "unterminated_string": '{"command": "ls\\ntouch pwned.txt',
    "nested_arguments": '{"arguments": {"command": "touch pwned.txt"}, "command": "ls"}',
    "python_literal": "{'command': 'ls', 'command': 'touch pwned.txt'}",
}


@pytest.mark.parametrize("name", sorted(RAW))
def test_malformed_raw_arguments_run_what_was_checked(ws, name):
    rec = Recorder(False)
    run = run_agent(ws, [ToolCall(name="shell", raw_arguments=RAW[name]), sh("ls")], approver=rec)
    assert "notes.md" in text_of(run.calls[1])
    assert not (ws / "pwned.txt").exists(), run.calls[0].decision


def test_extra_arguments_do_not_move_the_workspace(ws, outside):
    run = run_agent(ws, [call("read_file", path="private.txt", workspace=str(outside), cwd=str(outside), root="/"),
                         call("shell", command="cat private.txt", cwd=str(outside), workspace=str(outside)),
                         call("list_files", pattern="*", root=str(outside))],
                    mode="bypassPermissions", approver=Recorder(True))
    from .conftest import SECRET
    assert SECRET not in everything_model_saw(run)


@pytest.mark.parametrize("name", ["__import__('os').system('touch pwned.txt')", "open('pwned.txt','w')",
                                  "[x for x in ().__class__.__base__.__subclasses__() if x.__name__=='Popen'][0]('touch pwned.txt',shell=True)",
                                  "exec(\"open('pwned.txt','w')\")"])
def test_inspect_variable_name_is_not_evaluated(ws, name):
    rec = Recorder(False)
    run = run_agent(ws, [ToolCall(name="inspect_variable", arguments={"name": name}),
                         ToolCall(name="list_variables", arguments={})], mode="plan", approver=rec)
    assert run.calls[1].status == "ok"                   # control: read-only tools run in plan mode
    assert not (ws / "pwned.txt").exists()
    assert not (ws.parent / "pwned.txt").exists() and not os.path.exists("pwned.txt")


def test_plan_mode_runs_only_read_only_tools(ws):
    rec = Recorder(True)
    run = run_agent(ws, [call("python", code=f"open({str(ws / 'pwned.txt')!r},'w')"), call("write_file", path="w.txt", content="x"),
                         sh("touch pwned2.txt"), sh("sort --o=pwned3.txt data.txt"), call("read_file", path="notes.md")],
                    mode="plan", approver=rec)
    assert "hello notes" in text_of(run.calls[4])
    for f in ("pwned.txt", "w.txt", "pwned2.txt", "pwned3.txt"):
        assert not (ws / f).exists(), f


def test_read_file_proc_environ_absolute(ws, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-redteam-abs-proc-0001")
    run = run_agent(ws, [call("read_file", path="/proc/self/environ"), call("read_file", path="../../../../proc/self/environ"),
                         call("grep", pattern="sk-", path="/proc/self/environ"), call("list_files", pattern="/etc/*")],
                    mode="bypassPermissions", approver=Recorder(True))
    seen = everything_model_saw(run)
    assert "sk-redteam-abs-proc-0001" not in seen
    assert "passwd" not in text_of(run.calls[3])


def test_grep_glob_and_list_files_pattern_traversal(ws, outside):
    from .conftest import SECRET
    run = run_agent(ws, [call("grep", pattern="S3CR3T", path=".", glob="../outside/*"),
                         call("grep", pattern="S3CR3T", path=".", glob="**/../../outside/*"),
                         call("list_files", pattern="../outside/*"), call("list_files", pattern="**/../../outside/*"),
                         call("list_files", pattern="*.md")],
                    mode="bypassPermissions", approver=Recorder(True))
    assert "notes.md" in text_of(run.calls[4])
    seen = everything_model_saw(run)
    assert SECRET not in seen and "private.txt" not in seen
