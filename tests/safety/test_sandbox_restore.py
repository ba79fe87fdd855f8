"""Protected paths kept by a copy (`nbagent.safety.sandbox_restore`, Landlock without a mount namespace):
what is copied, what is put back and how it is named, what is left alone (what changes as the person
works), and commands that overlap sharing the copy taken before either ran. Pure file operations: what a
sandboxed command would do is done here directly."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from nbagent.safety import _nofollow, sandbox_restore
from nbagent.safety.protected import PROTECTED_PATHS
from nbagent.safety.sandbox_restore import CopyTooLarge, ProtectedCopy, check_running, ended, started, take


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    (ws / ".git" / "hooks").mkdir(parents=True)
    (ws / ".git" / "objects" / "ab").mkdir(parents=True)
    (ws / ".git" / "refs" / "heads").mkdir(parents=True)
    (ws / ".git" / "config").write_text("[core]\n")
    (ws / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (ws / ".git" / "hooks" / "pre-commit.sample").write_text("#!/bin/sh\n")
    (ws / ".git" / "objects" / "ab" / "cdef").write_bytes(b"object")
    (ws / ".mcp.json").write_text("{}")
    (ws / ".nbagent" / "sessions").mkdir(parents=True)
    (ws / "sub").mkdir()
    return ws


def test_each_protected_entry_is_copied_but_not_what_changes_as_the_person_works(ws: Path) -> None:
    copy = ProtectedCopy(ws)
    assert {".git", ".git/config", ".git/hooks/pre-commit.sample", ".mcp.json", ".nbagent"} <= set(copy.entries)
    assert not any(r.startswith((".git/objects", ".git/refs", ".nbagent/sessions")) or r == ".git/HEAD"
                   for r in copy.entries)
    assert set(copy.tops) == {".git", ".mcp.json", ".nbagent"} and copy.restore() == []


def test_every_protected_name_that_exists_is_copied(tmp_path: Path) -> None:
    for name in PROTECTED_PATHS:
        (tmp_path / name).write_text("x")
    assert set(ProtectedCopy(tmp_path).tops) == set(PROTECTED_PATHS)


def test_a_file_written_in_place_is_written_back_in_place(ws: Path) -> None:
    copy = ProtectedCopy(ws)
    inode = (ws / ".git" / "config").stat().st_ino
    with open(ws / ".git" / "config", "a") as f:
        f.write("\tfsmonitor = touch pwned\n")
    (ws / ".mcp.json").chmod(0o755)
    assert copy.restore() == [".git/config (changed: put back)", ".mcp.json (changed: put back)"]
    assert (ws / ".git" / "config").read_text() == "[core]\n" and (ws / ".git" / "config").stat().st_ino == inode
    assert (ws / ".mcp.json").stat().st_mode & 0o777 != 0o755


def test_a_new_hook_is_removed_and_a_removed_file_made_again(ws: Path) -> None:
    copy = ProtectedCopy(ws)
    os.symlink("../../sub/evil.sh", ws / ".git" / "hooks" / "pre-commit")
    (ws / ".git" / "hooks" / "pre-commit.sample").unlink()
    (ws / ".nbagent" / "mcp.json").write_text("{}")
    assert copy.restore() == [".git/hooks/pre-commit.sample (removed: put back)",
                              ".git/hooks/pre-commit (made by the command: removed)",
                              ".nbagent/mcp.json (made by the command: removed)"]
    assert sorted(os.listdir(ws / ".git" / "hooks")) == ["pre-commit.sample"]


def test_an_entry_renamed_away_is_renamed_back(ws: Path) -> None:
    copy = ProtectedCopy(ws)
    os.rename(ws / ".git", ws / "sub" / "old-git")
    (ws / ".git").mkdir()
    (ws / ".git" / "config").write_text("[core]\n\tfsmonitor = touch pwned\n")
    os.rename(ws / ".mcp.json", ws / "sub" / "old.json")
    (ws / ".mcp.json").write_text('{"mcpServers": {"x": {"command": "touch"}}}')
    assert copy.restore() == [".git (renamed away to sub/old-git: renamed back)",
                              ".mcp.json (renamed away to sub/old.json: renamed back)"]
    assert (ws / ".git" / "objects" / "ab" / "cdef").read_bytes() == b"object"  # the same .git, history and all
    assert (ws / ".git" / "config").read_text() == "[core]\n" and (ws / ".mcp.json").read_text() == "{}"


def test_a_removed_folder_is_made_again_from_the_copy_and_says_what_was_not_in_it(ws: Path) -> None:
    copy = ProtectedCopy(ws)
    shutil.rmtree(ws / ".git")
    (ws / ".git").write_text("gitdir: /elsewhere\n")
    assert copy.restore() == [(".git (replaced: made again from the copy (what runs no program, such as git's "
                               "history, was not in the copy))")]
    assert (ws / ".git" / "config").read_text() == "[core]\n" and (ws / ".git" / "hooks").is_dir()


def test_what_changes_as_the_person_works_is_left_alone(ws: Path) -> None:
    copy = ProtectedCopy(ws)
    (ws / ".git" / "objects" / "ab" / "new").write_bytes(b"commit")
    (ws / ".git" / "HEAD").write_text("ref: refs/heads/other\n")
    (ws / ".git" / "index.lock").write_text("")
    (ws / ".nbagent" / "sessions" / "s.jsonl").write_text("{}\n")
    (ws / ".nbagent" / "batches").mkdir()
    assert copy.restore() == []
    assert (ws / ".git" / "objects" / "ab" / "new").exists() and (ws / ".nbagent" / "batches").is_dir()


def test_too_much_to_copy_fails_closed(ws: Path, monkeypatch) -> None:
    monkeypatch.setattr(sandbox_restore, "COPY_LIMIT", 3)
    with pytest.raises(CopyTooLarge, match="more than 3 bytes"):
        ProtectedCopy(ws)
    monkeypatch.setattr(sandbox_restore, "COPY_LIMIT", 1 << 20)
    monkeypatch.setattr(sandbox_restore, "ENTRY_LIMIT", 2)
    with pytest.raises(CopyTooLarge, match="more than 2 entries"):
        ProtectedCopy(ws)


def test_overlapping_commands_share_the_copy_taken_before_either_ran(ws: Path) -> None:
    """A second command starting while the first has planted something must not copy what was planted, and
    the first to end must not put things back under the other's feet: the last one does."""
    first = take(ws)
    (ws / ".git" / "config").write_text("[core]\n\tfsmonitor = touch pwned\n")  # the first command's work
    second = take(ws)
    assert second is first and first.shared
    assert ended(second) == [] and "pwned" in (ws / ".git" / "config").read_text()
    assert ended(first) == [".git/config (changed: put back)"]
    assert take(ws) is not first  # let go once no command is kept by it
    ended(take(ws))


def test_defence_off_a_copy_taken_late_keeps_what_was_planted(ws: Path) -> None:
    take(ws)
    (ws / ".git" / "config").write_text("planted")
    late = ProtectedCopy(ws)  # what sharing prevents: a copy of the planted state
    assert late.restore() == [] and (ws / ".git" / "config").read_text() == "planted"


def test_a_background_command_is_checked_until_it_ends(ws: Path) -> None:
    copy = take(ws)
    assert check_running() == []  # a foreground command is checked when it ends, by its own call
    started(copy)
    (ws / ".mcp.json").write_text("planted")
    assert check_running() == [".mcp.json (changed: put back)"]
    assert ended(copy, background=True) == []
    (ws / ".mcp.json").write_text("later")
    assert check_running() == [] and (ws / ".mcp.json").read_text() == "later"


def test_a_folder_turned_into_a_link_leads_nothing_outside_the_workspace(ws: Path, tmp_path: Path) -> None:
    """A command still running in the background turns `.git/hooks` into a link to a folder of yours:
    putting back removes the link and makes the folder again; nothing outside is written or removed."""
    outside = tmp_path / "yours"
    outside.mkdir()
    (outside / "keep.txt").write_text("mine")
    copy = ProtectedCopy(ws)
    shutil.rmtree(ws / ".git" / "hooks")
    os.symlink(outside, ws / ".git" / "hooks")
    said = copy.restore()
    assert ".git/hooks (changed: put back)" in said and ".git/hooks/pre-commit.sample (removed: put back)" in said
    assert sorted(os.listdir(outside)) == ["keep.txt"] and not (ws / ".git" / "hooks").is_symlink()


def test_every_step_of_putting_back_follows_no_link_on_the_way(ws: Path, tmp_path: Path) -> None:
    outside = tmp_path / "yours"
    outside.mkdir()
    (outside / "pre-commit.sample").write_text("mine")
    at = _nofollow.At(str(ws))
    shutil.rmtree(ws / ".git" / "hooks")
    os.symlink(outside, ws / ".git" / "hooks")
    for step in (lambda: at.write(".git/hooks/pre-commit.sample", b"x", 0o644),
                 lambda: at.remove(".git/hooks/pre-commit.sample"), lambda: at.mkdir(".git/hooks/d", 0o755),
                 lambda: at.symlink(".git/hooks/l", "x")):
        with pytest.raises(OSError):
            step()
    assert at.listdir(".git/hooks") == [] and at.content(".git/hooks/pre-commit.sample", "f", limit=100) is None
    assert sorted(os.listdir(outside)) == ["pre-commit.sample"] and (outside / "pre-commit.sample").read_text() == "mine"


def test_a_fifo_is_never_opened(ws: Path) -> None:
    os.mkfifo(ws / ".git" / "hooks" / "pipe")
    copy = ProtectedCopy(ws)  # would block forever if it opened the fifo to copy it
    assert copy.entries[".git/hooks/pipe"][0] == "o" and copy.restore() == []
    (ws / ".git" / "hooks" / "pipe").unlink()
    os.mkfifo(ws / ".git" / "config.new")
    (ws / ".git" / "config").unlink()
    os.mkfifo(ws / ".git" / "config")
    assert ".git/config (changed: put back)" in copy.restore()
    assert (ws / ".git" / "config").read_text() == "[core]\n"


# -- git state that runs code, and hard links ------------------------------------------------------------------

def test_git_state_that_is_not_object_ref_log_or_index_data_is_put_back(ws: Path) -> None:
    (ws / ".git" / "info").mkdir()
    (ws / ".git" / "info" / "attributes").write_text("")
    (ws / ".git" / "modules" / "lib" / "hooks").mkdir(parents=True)
    (ws / ".git" / "modules" / "lib" / "config").write_text("[core]\n")
    (ws / ".git" / "modules" / "lib" / "objects").mkdir()
    copy = ProtectedCopy(ws)
    assert ".git/modules/lib/config" in copy.entries and ".git/modules/lib/objects" not in copy.entries
    todo = ws / ".git" / "rebase-merge" / "git-rebase-todo"
    todo.parent.mkdir()
    todo.write_text("exec touch pwned\n")
    (ws / ".git" / "sequencer").mkdir()
    (ws / ".git" / "config.worktree").write_text("[core]\n\tfsmonitor = touch pwned\n")
    (ws / ".git" / "info" / "attributes").write_text("* filter=evil\n")
    (ws / ".git" / "modules" / "lib" / "hooks" / "post-checkout").write_text("#!/bin/sh\ntouch pwned\n")
    (ws / ".git" / "worktrees" / "w").mkdir(parents=True)
    (ws / ".git" / "objects" / "ab" / "new").write_bytes(b"object")  # data: kept
    (ws / ".git" / "modules" / "lib" / "objects" / "x").write_bytes(b"object")
    done = copy.restore()
    assert ".git/info/attributes (changed: put back)" in done
    for made in (".git/rebase-merge", ".git/sequencer", ".git/config.worktree", ".git/worktrees",
                 ".git/modules/lib/hooks/post-checkout"):
        assert f"{made} (made by the command: removed)" in done and not (ws / made).exists()
    assert (ws / ".git" / "objects" / "ab" / "new").exists() and (ws / ".git/modules/lib/objects/x").exists()
    assert copy.restore() == []


def test_the_data_kinds_are_exactly_objects_refs_and_logs(ws: Path) -> None:
    names = ("objects", "refs", "logs", "packed-refs", "HEAD", "ORIG_HEAD", "FETCH_HEAD", "COMMIT_EDITMSG")
    assert sandbox_restore._DATA[".git"] == frozenset(names)
    for name in ("rebase-merge", "rebase-apply", "sequencer", "info", "hooks", "modules", "worktrees", "config",
                 "index"):  # (the index's gitlinks send git into a nested repository, whose config can run a program)
        assert not sandbox_restore._is_data(".git", name)


@pytest.mark.parametrize("target", [".git/config", ".git/HEAD"])
def test_a_hard_link_made_to_a_protected_file_no_longer_reaches_it(ws: Path, target: str) -> None:
    copy = ProtectedCopy(ws)
    before = (ws / target).read_text()
    os.link(ws / target, ws / "sub" / "notes.cfg")
    done = copy.restore()
    assert done == [f"{target} (hard-linked elsewhere: replaced by a fresh copy, the other name no longer reaches it)"]
    with open(ws / "sub" / "notes.cfg", "a") as f:
        f.write("[core]\n\tfsmonitor = touch pwned\n")
    assert (ws / target).read_text() == before and (ws / target).stat().st_nlink == 1
    assert copy.restore() == []


def test_a_file_made_huge_is_put_back_without_being_read(ws: Path, monkeypatch) -> None:
    copy = ProtectedCopy(ws)
    with open(ws / ".git" / "config", "a") as f:
        f.write("\tfsmonitor = touch pwned\n")
    os.truncate(ws / ".git" / "config", 20 << 30)  # sparse: 20 GB to read, none on the disk
    read: list[int] = []
    slow = _nofollow.read_fd
    monkeypatch.setattr(_nofollow, "read_fd", lambda fd, limit=None: read.append(limit) or slow(fd, limit))
    assert copy.restore() == [".git/config (changed: put back)"]
    assert (ws / ".git" / "config").read_text() == "[core]\n"
    assert read and all(limit is not None and limit <= 12 for limit in read)  # each at most its copy's length


def test_a_folder_nested_deeper_than_any_stack_is_removed(ws: Path) -> None:
    # a protected file turned into folders nested deeper than Python's recursion and the open-file limit allow
    copy = ProtectedCopy(ws)
    (ws / ".git" / "config").unlink()
    deep = os.path.join(ws, ".git", "config", *(["d"] * 1500))
    import subprocess

    subprocess.run(["mkdir", "-p", deep], check=True)  # (os.makedirs recurses)
    (ws / ".git" / "hooks" / "pre-commit").write_text("#!/bin/sh\ntouch pwned\n")
    assert copy.restore() == [".git/config (changed: put back)", ".git/hooks/pre-commit (made by the command: removed)"]
    assert (ws / ".git" / "config").read_text() == "[core]\n" and not (ws / ".git" / "hooks" / "pre-commit").exists()


def test_each_path_is_put_back_on_its_own_whatever_another_raises(ws: Path, monkeypatch) -> None:
    # the mechanism: one path that cannot be put back (for any reason) is reported, and every other is still put
    # back, removed or renamed back
    copy = ProtectedCopy(ws)
    (ws / ".git" / "config").write_text("[core]\n\tfsmonitor = touch pwned\n")
    (ws / ".mcp.json").write_text('{"mcpServers": {"x": {"command": "touch"}}}')
    (ws / ".git" / "hooks" / "pre-commit").write_text("#!/bin/sh\ntouch pwned\n")
    write = _nofollow.At.write

    def failing(self, rel: str, content: bytes, mode: int) -> None:
        if rel == ".git/config":
            raise RecursionError("maximum recursion depth exceeded")
        write(self, rel, content, mode)

    monkeypatch.setattr(_nofollow.At, "write", failing)
    monkeypatch.setattr(sandbox_restore, "_UNRESTORED", {})
    said = copy.restore()
    assert said == [".git/config (changed: could not be put back: RecursionError: maximum recursion depth exceeded)",
                    ".mcp.json (changed: put back)", ".git/hooks/pre-commit (made by the command: removed)"], said
    assert (ws / ".mcp.json").read_text() == "{}" and not (ws / ".git" / "hooks" / "pre-commit").exists()

    # and it fails closed: no copy is taken for later commands (which would keep what was planted as it is now);
    # the caller keeps protected paths read-only for them instead, and says why
    with pytest.raises(sandbox_restore.NotPutBack, match="could not be put back"):
        take(ws)
