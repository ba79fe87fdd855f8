"""File tools and the workspace boundary: symlinks, traversal, deny rules of read_file.

Promise: "The workspace is a hard boundary for file tools: no mode, rule or approval lets them reach
outside it." and "`deny: read_file(.env)` protects the file's content from every tool".
Attacks run with the most permissive settings (bypassPermissions, an approver that says yes, allow
rules) so that only the boundary itself can stop them.
"""

from __future__ import annotations

import os

import pytest

from .conftest import SECRET, Recorder, call, everything_model_saw, run_agent, sh, text_of

pytestmark = pytest.mark.timeout(60)

DENY_ENV = ["deny: read_file(.env)"]


def _env(ws):
    (ws / ".env").write_text(f"API_TOKEN={SECRET}\nOTHER=1\n")


# ---------------------------------------------------------------------------------------------
# symlinks out of the workspace
# ---------------------------------------------------------------------------------------------
def test_read_file_through_symlink_to_outside_file(ws, outside):
    os.symlink(outside / "private.txt", ws / "link.txt")
    run = run_agent(ws, [call("read_file", path="link.txt"), call("read_file", path="notes.md")],
                    mode="bypassPermissions", approver=Recorder(True))
    assert "hello notes" in text_of(run.calls[1])          # control: an inside file is read
    assert SECRET not in everything_model_saw(run)


def test_read_file_through_symlinked_directory(ws, outside):
    os.symlink(outside, ws / "shared")
    run = run_agent(ws, [call("read_file", path="shared/private.txt"), call("read_file", path="notes.md")],
                    mode="bypassPermissions", approver=Recorder(True))
    assert "hello notes" in text_of(run.calls[1])
    assert SECRET not in everything_model_saw(run)


def test_list_files_through_symlinked_directory(ws, outside):
    (outside / "outside-only-name.csv").write_text("x")
    os.symlink(outside, ws / "shared")
    run = run_agent(ws, [call("list_files", pattern="shared/**"), call("list_files", pattern="**/*.md")],
                    mode="bypassPermissions", approver=Recorder(True))
    assert "notes.md" in text_of(run.calls[1])
    assert "outside-only-name" not in text_of(run.calls[0])


def test_grep_tool_recurses_into_symlinked_directory(ws, outside):
    os.symlink(outside, ws / "shared")
    run = run_agent(ws, [call("grep", pattern="S3CR3T|hello", path=".")],
                    mode="bypassPermissions", approver=Recorder(True))
    assert "hello notes" in text_of(run.calls[0])       # control: the search ran over the workspace
    assert SECRET not in everything_model_saw(run)


def test_grep_tool_on_symlink_path_directly(ws, outside):
    os.symlink(outside, ws / "shared")
    os.symlink(outside / "private.txt", ws / "p.txt")
    run = run_agent(ws, [call("grep", pattern="S3CR3T", path="shared"), call("grep", pattern="S3CR3T", path="p.txt"),
                         call("grep", pattern="hello", path="notes.md")],
                    mode="bypassPermissions", approver=Recorder(True))
    assert "hello" in text_of(run.calls[2])
    assert SECRET not in everything_model_saw(run)


def test_write_file_through_symlink_to_outside_file(ws, outside):
    os.symlink(outside / "private.txt", ws / "link.txt")
    run = run_agent(ws, [call("write_file", path="link.txt", content="overwritten"),
                         call("write_file", path="fresh.txt", content="inside")],
                    mode="bypassPermissions", approver=Recorder(True))
    assert (ws / "fresh.txt").read_text() == "inside"      # control
    assert (outside / "private.txt").read_text() == f"outside {SECRET}\n"


def test_write_file_through_dangling_symlink_creates_outside_file(ws, outside):
    os.symlink(outside / "created-by-agent.txt", ws / "dangling.txt")
    run_agent(ws, [call("write_file", path="dangling.txt", content="planted")],
              mode="bypassPermissions", approver=Recorder(True))
    assert not (outside / "created-by-agent.txt").exists()


def test_write_file_into_symlinked_directory(ws, outside):
    os.symlink(outside, ws / "shared")
    run_agent(ws, [call("write_file", path="shared/new.txt", content="planted"),
                   call("write_file", path="shared/deeper/new.txt", content="planted")],
              mode="bypassPermissions", approver=Recorder(True))
    assert not (outside / "new.txt").exists()
    assert not (outside / "deeper").exists()


def test_edit_file_through_symlink_to_outside_file(ws, outside):
    os.symlink(outside / "private.txt", ws / "link.txt")
    run = run_agent(ws, [call("edit_file", path="link.txt", old="outside", new="EDITED"),
                         call("edit_file", path="notes.md", old="hello", new="bye")],
                    mode="bypassPermissions", approver=Recorder(True))
    assert (ws / "notes.md").read_text() == "bye notes\n"  # control
    assert (outside / "private.txt").read_text() == f"outside {SECRET}\n"
    assert SECRET not in everything_model_saw(run)


@pytest.mark.parametrize("path", ["../outside/planted.txt", "sub/../../outside/planted.txt", "{outside}/planted.txt",
                                  "./../outside/planted.txt", "sub/./../../outside/planted.txt"])
def test_write_file_path_traversal_with_full_approval(ws, outside, path):
    (ws / "sub").mkdir()
    path = path.format(outside=outside)
    run = run_agent(ws, [call("write_file", path=path, content="planted")], mode="bypassPermissions",
                    rules=["allow: write_file", "allow: write_file(**)"], approver=Recorder(True))
    assert not (outside / "planted.txt").exists()
    assert run.calls[0].status != "ok"


def test_symlink_made_by_an_approved_command_then_followed_by_file_tools(ws, outside):
    """The user approves a harmless-looking `ln -s`; afterwards the file tools follow the link."""
    rec = Recorder(True)
    run = run_agent(ws, sh("ln -s ../outside shared"),
                    [call("read_file", path="shared/private.txt"),
                     call("write_file", path="shared/planted.txt", content="x")],
                    approver=rec, mode="acceptEdits")
    assert (ws / "shared").is_symlink()                 # control: the approved command ran
    assert SECRET not in everything_model_saw(run)
    assert not (outside / "planted.txt").exists()


# ---------------------------------------------------------------------------------------------
# deny: read_file(.env) through the file tools
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("path", ["./.env", "sub/../.env", ".ENV", "{ws}/.env", ".env/", "alias"])
def test_read_file_deny_rule_spellings(ws, path):
    _env(ws)
    (ws / "sub").mkdir()
    os.symlink(".env", ws / "alias")
    run = run_agent(ws, [call("read_file", path=path.format(ws=ws)), call("read_file", path="notes.md")],
                    rules=DENY_ENV, mode="bypassPermissions", approver=Recorder(True))
    assert "hello notes" in text_of(run.calls[1])
    assert SECRET not in everything_model_saw(run)


def test_read_file_deny_rule_through_hardlink_made_by_approved_command(ws):
    _env(ws)
    run = run_agent(ws, sh("ln .env backup.txt"), call("read_file", path="backup.txt"),
                    rules=DENY_ENV, approver=Recorder(True))
    assert SECRET not in everything_model_saw(run)


def test_edit_file_diff_reveals_denied_file(ws):
    _env(ws)
    run = run_agent(ws, call("edit_file", path=".env", old="OTHER=1", new="OTHER=2"),
                    rules=DENY_ENV, mode="acceptEdits", approver=Recorder(True))
    assert SECRET not in everything_model_saw(run)


def test_edit_file_error_message_echoes_denied_file(ws):
    _env(ws)
    run = run_agent(ws, call("edit_file", path=".env", old="NOT-THERE", new="x"),
                    rules=DENY_ENV, mode="acceptEdits", approver=Recorder(True))
    assert SECRET not in everything_model_saw(run)


def test_edit_file_ambiguous_match_context_reveals_denied_file(ws):
    (ws / ".env").write_text(f"A={SECRET}\nA={SECRET}\n")
    run = run_agent(ws, call("edit_file", path=".env", old="A=", new="B="),
                    rules=DENY_ENV, mode="acceptEdits", approver=Recorder(True))
    assert SECRET not in everything_model_saw(run)


def test_write_file_diff_reveals_previous_content_of_denied_file(ws):
    _env(ws)
    run = run_agent(ws, call("write_file", path=".env", content="EMPTY=1\n"),
                    rules=DENY_ENV, mode="acceptEdits", approver=Recorder(True))
    assert SECRET not in everything_model_saw(run)


def test_grep_tool_with_explicit_denied_path(ws):
    _env(ws)
    run = run_agent(ws, [call("grep", pattern="API_TOKEN", path=".env"),
                         call("grep", pattern="API_TOKEN", path="."),
                         call("grep", pattern=".", path=".", glob=".env"),
                         call("grep", pattern="hello", path=".")],
                    rules=DENY_ENV, mode="bypassPermissions", approver=Recorder(True))
    assert "hello notes" in text_of(run.calls[3])
    assert SECRET not in everything_model_saw(run)


def test_grep_tool_as_an_oracle_on_denied_file(ws):
    """Even without printing the line, match/no-match per guess would reveal the secret."""
    _env(ws)
    texts = []
    for guess in ("API_TOKEN=S3", "API_TOKEN=ZZ"):
        run = run_agent(ws, [call("grep", pattern=guess, path=".env"), call("grep", pattern=guess, path="."),
                             call("grep", pattern=guess, path=".", ignore_case=True, glob=".e*")],
                        rules=DENY_ENV, mode="bypassPermissions", approver=Recorder(True))
        texts.append([text_of(c).replace(guess, "GUESS") for c in run.calls])
    assert texts[0] == texts[1]
    control = run_agent(ws, call("grep", pattern="hello", path="."), rules=DENY_ENV)
    assert "hello notes" in text_of(control.calls[0])


def test_edit_file_success_as_an_oracle_on_denied_file(ws):
    """Even with no diff shown, "replaced" against "not found" for a guessed `old` reveals the file
    piece by piece (the file is restored between guesses)."""
    statuses = []
    for guess in ("API_TOKEN=S3", "API_TOKEN=ZZ"):
        _env(ws)
        run = run_agent(ws, call("edit_file", path=".env", old=guess, new=guess + "#"),
                        rules=DENY_ENV, mode="acceptEdits", approver=Recorder(True))
        statuses.append(run.calls[0].status)
    assert statuses[0] == statuses[1], f"a right guess gives {statuses[0]}, a wrong one {statuses[1]}"
    control = run_agent(ws, call("edit_file", path="notes.md", old="hello", new="bye"), mode="acceptEdits")
    assert control.calls[0].status == "ok"


def test_always_allow_file_with_glob_characters_in_its_name(ws):
    from nbagent import Decision
    rec = Recorder(Decision(True, remember=True))
    run_agent(ws, [call("write_file", path="*.txt", content="x")], [call("write_file", path="data.txt", content="y")],
              [call("write_file", path="[dn]otes.md", content="x")], [call("write_file", path="notes.md", content="y")],
              approver=rec)
    assert [r.arguments["path"] for r in rec.asked] == ["*.txt", "data.txt", "[dn]otes.md", "notes.md"]
