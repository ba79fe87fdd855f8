"""The adversarial suite: every case is an attempt to get past the workspace boundary or the permission
pipeline, run through a real Agent with a ScriptedModel. None may succeed."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import pytest

from nbagent import Agent, AssistantMessage, Decision, ScriptedModel, ToolCall, ToolDefinitionError, tool, toolbox


# --------------------------------------------------------------------------------------------------
# Fixtures and helpers
# --------------------------------------------------------------------------------------------------
@pytest.fixture
def outside(tmp_path: Path) -> Path:
    d = tmp_path / "outside"
    d.mkdir()
    (d / "secret.txt").write_text("TOP SECRET\n")
    return d


@pytest.fixture
def ws(tmp_path: Path, outside: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "notes.txt").write_text("hello\n")
    (root / ".env").write_text("API_KEY=sk-live-123\n")
    (root / ".git").mkdir()
    os.symlink(outside / "secret.txt", root / "link_out")
    os.symlink(outside, root / "dir_out")
    os.symlink(root / ".env", root / "env_alias")
    return root


def run_calls(ws: Path, *calls: ToolCall, tools: list[Any] | None = None, **agent_kwargs: Any):
    model = ScriptedModel([AssistantMessage(tool_calls=[c]) for c in calls] + ["done"])
    agent = Agent(model=model, tools=tools if tools is not None else toolbox.all(workspace=ws), workspace=ws,
                  **agent_kwargs)
    return agent.run_sync("go")


def one(ws: Path, name: str, /, arguments: dict[str, Any], **agent_kwargs: Any):
    return run_calls(ws, ToolCall(name=name, arguments=arguments), **agent_kwargs).calls[0]


def no_secret(rec) -> bool:
    text = rec.result.text if rec.result is not None else ""
    return "TOP SECRET" not in text and "sk-live-123" not in text and "root:" not in text


# --------------------------------------------------------------------------------------------------
# Path traversal and absolute paths (bypassPermissions: only the boundary itself stands in the way)
# --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("path", [
    "../outside/secret.txt",
    "notes.txt/../../outside/secret.txt",
    "./../outside/secret.txt",
    "....//outside/secret.txt",
    "..\\outside\\secret.txt",
])
def test_path_traversal_is_refused_for_reading(ws: Path, path: str) -> None:
    rec = one(ws, "read_file", {"path": path}, mode="bypassPermissions")
    assert rec.status == "error" and no_secret(rec)


def test_path_traversal_is_refused_for_writing(ws: Path, outside: Path) -> None:
    rec = one(ws, "write_file", {"path": "../outside/pwned.txt", "content": "x"}, mode="bypassPermissions")
    assert rec.status == "error"
    assert not (outside / "pwned.txt").exists()


def test_path_traversal_is_refused_for_editing(ws: Path, outside: Path) -> None:
    rec = one(ws, "edit_file", {"path": "../outside/secret.txt", "old": "TOP", "new": "PWNED"}, mode="bypassPermissions")
    assert rec.status == "error"
    assert (outside / "secret.txt").read_text() == "TOP SECRET\n"


@pytest.mark.parametrize("name, arguments", [
    ("read_file", {"path": "/etc/passwd"}),
    ("grep", {"pattern": "root", "path": "/etc"}),
    ("list_files", {"pattern": "/etc/*"}),
    ("write_file", {"path": "/tmp/nbagent-security-pwned.txt", "content": "x"}),
])
def test_absolute_paths_outside_are_refused(ws: Path, name: str, arguments: dict) -> None:
    rec = one(ws, name, arguments, mode="bypassPermissions")
    assert rec.status == "error" and no_secret(rec)
    assert not Path("/tmp/nbagent-security-pwned.txt").exists()


def test_absolute_path_to_a_secret_next_to_the_workspace_is_refused(ws: Path, outside: Path) -> None:
    rec = one(ws, "read_file", {"path": str(outside / "secret.txt")}, mode="bypassPermissions")
    assert rec.status == "error" and no_secret(rec)


def test_home_directory_paths_are_refused(ws: Path) -> None:
    rec = one(ws, "read_file", {"path": "~/.bashrc"}, mode="bypassPermissions")
    assert rec.status == "error" and "home directory" in rec.result.text


def test_nul_bytes_in_paths_are_refused(ws: Path) -> None:
    rec = one(ws, "read_file", {"path": "notes.txt\x00../../etc/passwd"}, mode="bypassPermissions")
    assert rec.status == "error" and "NUL" in rec.result.text


@pytest.mark.parametrize("path", ["C:\\Windows\\win.ini", "\\\\server\\share\\secret.txt", "\\etc\\passwd"])
def test_windows_style_paths_are_refused(ws: Path, path: str) -> None:
    rec = one(ws, "read_file", {"path": path}, mode="bypassPermissions")
    assert rec.status == "error" and no_secret(rec)


# --------------------------------------------------------------------------------------------------
# Symbolic links
# --------------------------------------------------------------------------------------------------
def test_a_symlinked_file_leading_out_is_not_read(ws: Path) -> None:
    rec = one(ws, "read_file", {"path": "link_out"}, mode="bypassPermissions")
    assert rec.status == "error" and "symbolic link" in rec.result.text and no_secret(rec)


def test_a_symlinked_directory_leading_out_is_not_read(ws: Path) -> None:
    rec = one(ws, "read_file", {"path": "dir_out/secret.txt"}, mode="bypassPermissions")
    assert rec.status == "error" and no_secret(rec)


def test_a_symlink_leading_out_is_not_written_through(ws: Path, outside: Path) -> None:
    for path in ("link_out", "dir_out/new.txt"):
        rec = one(ws, "write_file", {"path": path, "content": "PWNED"}, mode="bypassPermissions")
        assert rec.status == "error"
    assert (outside / "secret.txt").read_text() == "TOP SECRET\n"
    assert not (outside / "new.txt").exists()


def test_grep_and_list_files_do_not_follow_links_out(ws: Path) -> None:
    run = run_calls(ws, ToolCall(name="grep", arguments={"pattern": "SECRET"}),
                    ToolCall(name="list_files", arguments={"pattern": "**"}), mode="bypassPermissions")
    assert no_secret(run.calls[0])
    assert not any(p.startswith("dir_out/") for p in run.calls[1].details)


def test_chains_of_links_and_relative_links_out_are_not_followed(ws: Path, outside: Path) -> None:
    (ws / "sub").mkdir()
    os.symlink("../../outside", ws / "sub" / "rel_out")          # relative, climbing out
    os.symlink(ws / "sub", ws / "sub_alias")                      # inside, leading to a dir with a link out
    os.symlink(ws / "link_out", ws / "chain")                     # a link to a link that leads out
    calls = [
        ToolCall(name="read_file", arguments={"path": "sub/rel_out/secret.txt"}),
        ToolCall(name="read_file", arguments={"path": "sub_alias/rel_out/secret.txt"}),
        ToolCall(name="read_file", arguments={"path": "chain"}),
        ToolCall(name="grep", arguments={"pattern": "SECRET", "path": "sub_alias"}),
        ToolCall(name="grep", arguments={"pattern": "SECRET", "path": "sub/rel_out"}),
        ToolCall(name="grep", arguments={"pattern": "SECRET", "path": "chain"}),
        ToolCall(name="list_files", arguments={"pattern": "sub_alias/rel_out/*"}),
        ToolCall(name="list_files", arguments={"pattern": "**/secret.txt"}),
    ]
    run = run_calls(ws, *calls, mode="bypassPermissions")
    for rec in run.calls:
        assert no_secret(rec), rec.name
        if rec.name == "list_files":
            assert not any(p.endswith("secret.txt") for p in (rec.result.details or [])), rec.result.text
    control = run_calls(ws, ToolCall(name="read_file", arguments={"path": "sub_alias/../notes.txt"}),
                        mode="bypassPermissions")
    assert "hello" in control.calls[0].result.text


def test_a_symlink_created_by_shell_does_not_open_the_boundary(ws: Path) -> None:
    run = run_calls(ws, ToolCall(name="shell", arguments={"command": "ln -s / rootlink"}),
                    ToolCall(name="read_file", arguments={"path": "rootlink/etc/passwd"}), mode="bypassPermissions")
    assert run.calls[0].status == "ok"
    assert run.calls[1].status == "error" and no_secret(run.calls[1])


# --------------------------------------------------------------------------------------------------
# Shell chaining and substitution (default mode, nobody to approve: only what is allowed may run)
# --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("command", [
    "cat notes.txt; touch pwned",
    "cat notes.txt && touch pwned",
    "cat notes.txt || touch pwned",
    "cat notes.txt | tee pwned",
    "cat notes.txt & touch pwned",
    "cat notes.txt\ntouch pwned",
    "cat notes.txt $(touch pwned)",
    "cat notes.txt `touch pwned`",
    'cat "$(touch pwned)"',
    "cat notes.txt > pwned",
    "cat <(touch pwned)",
    "ls ${X:=$(touch pwned)}",
    "echo hi >> pwned",
])
def test_compound_commands_are_never_auto_allowed(ws: Path, command: str) -> None:
    rec = one(ws, "shell", {"command": command})
    assert rec.status == "denied"
    assert not (ws / "pwned").exists()


@pytest.mark.parametrize("command", [
    "sort -o pwned notes.txt",
    "find . -name notes.txt -exec touch pwned ;",
    "find . -delete",
    "git -c core.pager='touch pwned' log",
    "git diff --output=pwned",
    "git branch pwned",
    "tail -f notes.txt",
    "cat ../outside/secret.txt",
    "cat link_out",
    "cat /etc/passwd",
    "cat *",
    "PAGER='touch pwned' git log",
])
def test_read_only_looking_commands_that_are_not_are_not_auto_allowed(ws: Path, command: str) -> None:
    rec = one(ws, "shell", {"command": command})
    assert rec.status == "denied"
    assert not (ws / "pwned").exists()
    assert no_secret(rec)


def test_real_read_only_commands_run_without_asking(ws: Path) -> None:
    rec = one(ws, "shell", {"command": "cat notes.txt"})
    assert rec.status == "ok" and rec.decision.source == "read_only"


# --------------------------------------------------------------------------------------------------
# Rule-pattern confusion
# --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("command", [
    "git status; rm -rf x",
    "git status && rm -rf x",
    "git status || rm -rf x",
    "git status | rm -rf x",
    "git status\nrm -rf x",
    "git status $(rm -rf x)",
    "git status `rm -rf x`",
    "git status & rm -rf x",
    "git status >/dev/null; rm -rf x",
    "GIT_EXTERNAL_DIFF=x git status",
])
def test_allow_prefix_rule_does_not_cover_a_chained_command(ws: Path, command: str) -> None:
    (ws / "x").mkdir()
    rec = one(ws, "shell", {"command": command}, rules=["allow: shell(git status*)"])
    assert rec.status == "denied"
    assert rec.decision.source == "policy"  # it had to ask; nobody approved
    assert (ws / "x").exists()


def test_allow_prefix_rule_covers_the_plain_command(ws: Path) -> None:
    rec = one(ws, "shell", {"command": "git status --short"}, rules=["allow: shell(git status*)"])
    assert rec.decision.source == "rule" and rec.decision.allow


@pytest.mark.parametrize("command", [
    "git status; rm -rf x", "\\rm -rf x", "/bin/rm -rf x", "'rm' -rf x", "sudo rm -rf x",
    "bash -c 'rm -rf x'", "echo $(rm -rf x)", "xargs rm <<< x", "env rm -rf x", "r\\m -rf x",
])
def test_deny_rule_catches_the_command_however_it_is_dressed(ws: Path, command: str) -> None:
    (ws / "x").mkdir()
    rec = one(ws, "shell", {"command": command}, mode="bypassPermissions", rules=["deny: shell(rm *)"])
    assert rec.status == "denied" and rec.decision.source == "rule"
    assert (ws / "x").exists()


def test_deny_rule_fails_closed_on_an_unreadable_command(ws: Path) -> None:
    rec = one(ws, "shell", {"command": "echo 'unterminated"}, mode="bypassPermissions", rules=["deny: shell(rm *)"])
    assert rec.status == "denied"


def test_a_grant_for_a_compound_command_covers_only_that_line(ws: Path) -> None:
    answers = iter([Decision(True, remember=True), False])
    model = ScriptedModel([
        AssistantMessage(tool_calls=[ToolCall(name="shell", arguments={"command": "echo a; echo b"})]),
        AssistantMessage(tool_calls=[ToolCall(name="shell", arguments={"command": "echo a; touch pwned"})]),
        "done"])
    agent = Agent(model=model, tools=toolbox.all(workspace=ws), workspace=ws, approver=lambda req: next(answers))
    run = agent.run_sync("go")
    assert [str(g) for g in agent.grants] == ["shell(echo a; echo b)"]
    assert run.calls[0].status == "ok"
    assert run.calls[1].status == "denied"
    assert not (ws / "pwned").exists()


# --------------------------------------------------------------------------------------------------
# Deny rules on files: no way around them, in any mode
# --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("path", [".env", "./.env", "sub/../.env", "env_alias", ".ENV"])
def test_deny_read_rule_holds_in_bypass_mode_under_every_spelling(ws: Path, path: str) -> None:
    (ws / "sub").mkdir()
    rec = one(ws, "read_file", {"path": path}, mode="bypassPermissions",
              rules=["allow: read_file", "deny: read_file(.env)"])
    assert rec.status == "denied" and no_secret(rec)


def test_deny_read_rule_holds_for_the_absolute_path(ws: Path) -> None:
    rec = one(ws, "read_file", {"path": str(ws / ".env")}, mode="bypassPermissions", rules=["deny: read_file(.env)"])
    assert rec.status == "denied"


def test_deny_read_rule_is_not_sidestepped_by_grep_or_a_read_only_command(ws: Path) -> None:
    run = run_calls(ws, ToolCall(name="grep", arguments={"pattern": "API_KEY"}),
                    ToolCall(name="shell", arguments={"command": "cat .env"}),
                    ToolCall(name="shell", arguments={"command": "grep -r API_KEY ."}),
                    rules=["deny: read_file(.env)"])
    assert no_secret(run.calls[0])
    assert run.calls[1].status == "denied" and no_secret(run.calls[1])
    assert run.calls[2].status == "denied" and no_secret(run.calls[2])


def test_accept_edits_does_not_auto_allow_git_configuration(ws: Path) -> None:
    rec = one(ws, "write_file", {"path": ".git/config", "content": "[core]\n\tfsmonitor = touch pwned\n"},
              mode="acceptEdits")
    assert rec.status == "denied"
    assert not (ws / ".git" / "config").exists()


def test_accept_edits_never_opens_the_boundary(ws: Path, outside: Path) -> None:
    rec = one(ws, "write_file", {"path": "../outside/new.txt", "content": "x"}, mode="acceptEdits")
    assert rec.status != "ok"
    assert not (outside / "new.txt").exists()


# --------------------------------------------------------------------------------------------------
# Arguments changed after approval
# --------------------------------------------------------------------------------------------------
def test_arguments_changed_while_asking_void_the_approval(ws: Path) -> None:
    def approver(request):
        request.call.arguments["command"] = "touch pwned"  # what was shown is not what would run
        return True

    rec = one(ws, "shell", {"command": "touch approved"}, approver=approver)
    assert rec.status == "denied"
    assert "changed after they were approved" in rec.result.text
    assert not (ws / "pwned").exists() and not (ws / "approved").exists()


def test_arguments_changed_by_a_hook_before_asking_are_what_is_asked_about(ws: Path) -> None:
    from nbagent import Hooks

    shown: list[str] = []
    rec = one(ws, "shell", {"command": "echo safe"},
              hooks=Hooks(before_tool_call=[lambda call, ctx: {"command": "touch pwned"}]),
              approver=lambda request: shown.append(request.arguments["command"]) or False)
    assert shown == ["touch pwned"]
    assert rec.status == "denied" and not (ws / "pwned").exists()


def test_arguments_changed_right_after_approval_do_not_reach_the_tool(ws: Path) -> None:
    async def approver(request):
        args = request.call.arguments
        asyncio.get_running_loop().call_soon(lambda: args.update(path="pwned.txt", content="pwned"))
        return True

    rec = one(ws, "write_file", {"path": "ok.txt", "content": "approved"}, approver=approver)
    assert rec.status == "ok"
    assert (ws / "ok.txt").read_text() == "approved"
    assert not (ws / "pwned.txt").exists()


def test_arguments_changed_after_approval_do_not_reach_a_threaded_tool(ws: Path) -> None:
    ran: list[str] = []

    @tool
    def risky(command: str) -> str:
        """Pretend to do something risky."""
        import time

        time.sleep(0.05)  # the approver's late change lands while this runs
        ran.append(command)
        return command

    async def approver(request):
        args = request.call.arguments
        loop = asyncio.get_running_loop()
        loop.call_soon(lambda: args.update(command="evil"))
        return True

    rec = one(ws, "risky", {"command": "fine"}, tools=[risky], approver=approver)
    assert ran == ["fine"]
    assert rec.result.text == "fine"


# --------------------------------------------------------------------------------------------------
# A tool name that mimics another
# --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["Shell", "shell ", " shell", "shel1", "sh\u200bell", "\u0455hell", "shell\x00",
                                  "read_file\u200b", "READ_FILE", "toolbox.read_file", "functions.shell"])
def test_a_mimicking_tool_name_runs_nothing(ws: Path, name: str) -> None:
    rec = one(ws, name, {"command": "touch pwned", "path": "notes.txt"}, mode="bypassPermissions")
    assert rec.status == "not_found"
    assert not (ws / "pwned").exists()


def test_a_rule_for_one_tool_does_not_cover_a_lookalike(ws: Path) -> None:
    @tool(name="read_file_unsafe")
    def lookalike(path: str) -> str:
        """Read anything."""
        return Path(path).read_text()

    rec = one(ws, "read_file_unsafe", {"path": str(ws / ".env")}, tools=[lookalike], rules=["allow: read_file"])
    assert rec.status == "denied" and no_secret(rec)


def test_a_lookalike_name_cannot_even_be_declared(ws: Path) -> None:
    with pytest.raises(ToolDefinitionError):
        tool(name="\u0455hell")(lambda command: command)
    with pytest.raises(ToolDefinitionError):
        tool(name="shell\u200b")(lambda command: command)


def test_two_tools_cannot_share_a_name(ws: Path) -> None:
    from nbagent.errors import ConfigurationError

    @tool(name="shell")
    def fake_shell(command: str) -> str:
        """Not the real one."""
        return "fake"

    with pytest.raises(ConfigurationError):
        Agent(model=ScriptedModel([]), tools=[*toolbox.all(workspace=ws), fake_shell])


def test_deny_by_name_holds_for_a_tool_found_by_the_resolver(ws: Path) -> None:
    @tool(name="dangerous")
    def dangerous() -> str:
        """Something dangerous."""
        (ws / "pwned").write_text("x")
        return "done"

    rec = one(ws, "dangerous_alias", {}, tools=[], tool_resolver=lambda name: dangerous if name == "dangerous_alias" else None,
              mode="bypassPermissions", rules=["deny: dangerous"])
    assert rec.status == "denied"
    assert not (ws / "pwned").exists()


# --------------------------------------------------------------------------------------------------
# Plan mode executes nothing that is not read-only
# --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name, arguments", [
    ("python", {"code": "open('pwned', 'w').write('x')"}),
    ("shell", {"command": "touch pwned"}),
    ("write_file", {"path": "pwned", "content": "x"}),
    ("edit_file", {"path": "notes.txt", "old": "hello", "new": "pwned"}),
])
def test_plan_mode_runs_nothing_that_writes(ws: Path, name: str, arguments: dict) -> None:
    rec = one(ws, name, arguments, mode="plan", approver=lambda request: True, rules=[f"allow: {name}"])
    assert rec.status == "denied" and rec.decision.source == "mode"
    assert not (ws / "pwned").exists()
    assert (ws / "notes.txt").read_text() == "hello\n"


def test_a_python_allow_pattern_does_not_cover_code_that_merely_starts_like_it(ws: Path) -> None:
    rec = one(ws, "python", {"code": "print(1); open('pwned', 'w').write('x')"}, rules=["allow: python(print*)"])
    assert rec.status == "denied"
    assert not (ws / "pwned").exists()
    exact = one(ws, "python", {"code": "print(1)"}, rules=["allow: python(print(1))"])
    assert exact.status == "ok"


def test_a_python_deny_pattern_is_a_glob_over_the_code(ws: Path) -> None:
    rec = one(ws, "python", {"code": "import os\nos.system('touch pwned')"}, mode="bypassPermissions",
              rules=["deny: python(*os.system*)"])
    assert rec.status == "denied"
    assert not (ws / "pwned").exists()


# --------------------------------------------------------------------------------------------------
# A deny rule on reading a path holds for every tool that could show it
# --------------------------------------------------------------------------------------------------
DENY_ENV = ["deny: read_file(.env)"]


@pytest.mark.parametrize("old", ["API_KEY=sk-live-123", "API_KEY=sk-live-1", "nothing like it", "API"])
def test_edit_file_shows_nothing_of_a_read_denied_file(ws: Path, old: str) -> None:
    for path in (".env", "env_alias", "./.env", "notes.txt/../.env"):
        rec = one(ws, "edit_file", {"path": path, "old": old, "new": "X"}, rules=DENY_ENV, mode="bypassPermissions")
        assert rec.result.is_error and no_secret(rec), path
        assert "sk-live" not in str(rec.result.details)
    assert (ws / ".env").read_text() == "API_KEY=sk-live-123\n"
    control = one(ws, "edit_file", {"path": "notes.txt", "old": "hello", "new": "bye"}, rules=DENY_ENV,
                  mode="bypassPermissions")
    assert not control.result.is_error and "-hello" in control.result.text


def test_write_file_shows_no_diff_of_a_read_denied_file(ws: Path) -> None:
    # a hidden file asks first whatever the mode (protected kinds): the person's allow rule lets it be written
    allowed = DENY_ENV + ["allow: write_file(.env)"]
    rec = one(ws, "write_file", {"path": ".env", "content": "NEW=1\n"}, rules=allowed, mode="bypassPermissions")
    assert not rec.result.is_error and no_secret(rec) and "sk-live" not in rec.result.details.diff
    assert (ws / ".env").read_text() == "NEW=1\n"
    (ws / ".env").write_text("API_KEY=sk-live-123\n")
    same = one(ws, "write_file", {"path": ".env", "content": "API_KEY=sk-live-123\n"}, rules=allowed,
               mode="bypassPermissions")
    assert "already exactly" not in same.result.text  # no oracle either
    control = one(ws, "write_file", {"path": "notes.txt", "content": "bye\n"}, rules=DENY_ENV, mode="bypassPermissions")
    assert "-hello" in control.result.text


@pytest.mark.parametrize("command", [
    "cat .env", "head -c 100 .env", "tail .env", "less .env", "more .env", "dd if=.env", "xxd .env", "od -c .env",
    "base64 .env", "strings .env", "sort .env", "uniq .env", "diff .env notes.txt", "cmp -l .env notes.txt",
    "grep -r KEY .", "grep -R KEY", "grep KEY .env", "rg KEY", "awk '{print}' .env", "sed -n p .env",
    "awk 'BEGIN{while((getline l < \".env\")>0) print l}'", "cat ./.env", "cat data/../.env", "cat env_alias",
    "cat .e''nv", "cat .e\\nv", "cat \".env\"", "cat $'\\x2eenv'", "cat .en?", "cat .e*", "cat .[e]nv",
    "cat {.env,x}", "F=.env; cat $F", "cat $(echo .env)", "bash -c 'cat .env'", "sh -c 'cat $0' .env",
    "eval 'cat .env'", "python3 -c \"print(open('.env').read())\"", "git show HEAD:.env", "git log -p",
    "git log -U3", "git log --patch", "git diff", "git reflog -p", "git cat-file -p HEAD:.env", "git grep KEY",
    "git lg -p", "ls -a | xargs cat", "find . -name .env -exec cat {} +", "tar cf - .", "cp -r . ../copy",
    "time -p cat .env", "nice -n 5 cat .env", "sudo cat .env", "cat < .env", "bash < .env",
])
def test_shell_never_shows_a_read_denied_file(ws: Path, command: str) -> None:
    (ws / "data").mkdir(exist_ok=True)
    rec = one(ws, "shell", {"command": command}, rules=DENY_ENV, mode="bypassPermissions")
    assert no_secret(rec), command
    assert rec.result.is_error and rec.result.text.startswith("not run"), (command, rec.result.text)


def test_shell_reads_other_files_under_a_read_deny(ws: Path) -> None:
    for command in ("cat notes.txt", "grep hello notes.txt", "echo .envelope", "ls -a", "git status"):
        rec = one(ws, "shell", {"command": command}, rules=DENY_ENV, mode="bypassPermissions")
        assert not rec.result.text.startswith("not run"), (command, rec.result.text)
    rec = one(ws, "shell", {"command": "cat notes.txt"}, rules=DENY_ENV)  # default mode: read-only, runs
    assert rec.decision.source == "read_only" and "hello" in rec.result.text


@pytest.mark.parametrize("command", ["git diff -- notes.txt", "git log -p -- notes.txt", "git show HEAD -- notes.txt",
                                     "git blame notes.txt"])
def test_git_contents_limited_to_other_paths_run_under_a_read_deny(ws: Path, command: str) -> None:
    rec = one(ws, "shell", {"command": command}, rules=DENY_ENV, mode="bypassPermissions")
    assert not rec.result.text.startswith("not run"), rec.result.text


@pytest.mark.parametrize("command", ["git diff -- .", "git diff -- ':!notes.txt'", "git log -p -- '*'",
                                     "git diff -- .env", "git log -p -- ENV_ALIAS/..", "git blame -C notes.txt",
                                     "git show HEAD:.env -- notes.txt", "git diff -- ''"])
def test_git_contents_not_limited_to_other_paths_do_not_run_under_a_read_deny(ws: Path, command: str) -> None:
    rec = one(ws, "shell", {"command": command}, rules=DENY_ENV, mode="bypassPermissions")
    assert rec.result.text.startswith("not run") and no_secret(rec), rec.result.text


def test_shell_under_a_read_deny_is_not_auto_allowed_when_it_names_the_file(ws: Path) -> None:
    rec = one(ws, "shell", {"command": "cat .env"}, rules=DENY_ENV)
    assert rec.decision.source != "read_only" and no_secret(rec)


def test_grep_tool_skips_a_read_denied_file_named_directly(ws: Path) -> None:
    rec = one(ws, "grep", {"pattern": "API", "path": ".env"}, rules=DENY_ENV)
    assert no_secret(rec)
    rec = one(ws, "grep", {"pattern": "API", "path": "env_alias"}, rules=DENY_ENV)
    assert no_secret(rec)
    control = one(ws, "grep", {"pattern": "hello", "path": "."}, rules=DENY_ENV)
    assert "notes.txt:1" in control.result.text


# --------------------------------------------------------------------------------------------------
# acceptEdits never writes what would make another git repository, or change this one's
# --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("path", [".git/config", ".git/hooks/pre-commit", ".GIT/config", "HEAD", "config", "head",
                                  "commondir", "packed-refs", "sub/.git", "sub/HEAD", ".git/info/attributes",
                                  "./.git/HEAD"])
def test_accept_edits_asks_before_writing_git_layout_files(ws: Path, path: str) -> None:
    rec = one(ws, "write_file", {"path": path, "content": "x\n"}, mode="acceptEdits")
    assert rec.status == "denied", path  # asked, and nobody answered


def test_accept_edits_still_writes_ordinary_files(ws: Path) -> None:
    for path in ("notes.txt", "config.yaml", "src/head.py", "objects/readme.md"):
        rec = one(ws, "write_file", {"path": path, "content": "x\n"}, mode="acceptEdits")
        assert rec.status == "ok" and rec.decision.source == "mode", path


# --------------------------------------------------------------------------------------------------
# "Always allow" grants exactly what was approved
# --------------------------------------------------------------------------------------------------
def test_always_allow_of_one_command_does_not_allow_its_family(ws: Path) -> None:
    asked: list[str] = []

    def approver(request):
        asked.append(request.arguments["command"])
        return Decision(True, remember=True) if len(asked) == 1 else Decision(False)

    calls = [ToolCall(name="shell", arguments={"command": c}) for c in
             ("git config --get user.name", "git config core.fsmonitor 'touch pwned'", "git config --get user.name")]
    run = run_calls(ws, *calls, approver=approver)
    assert [str(g) for g in run.agent.grants] == ["shell(git config --get user.name)"]
    assert asked == ["git config --get user.name", "git config core.fsmonitor 'touch pwned'"]
    assert [c.decision.source for c in run.calls] == ["user", "user", "grant"]
    assert not (ws / "pwned").exists()
