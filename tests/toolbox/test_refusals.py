"""What a result says the sandbox refused (`_refusals.sandbox_refusal`): the wall each path met, from the
errors real programs print, and never a reason that did not happen."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from nbagent.toolbox._refusals import sandbox_refusal

TOP = "the top level holds .git (protected paths, kept read-only), and Landlock, with no mount namespace here, ..."


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    (tmp_path / ".git").mkdir()
    (tmp_path / "notes.md").write_text("x")
    (tmp_path / "node_modules" / "pkg").mkdir(parents=True)
    return tmp_path


def say(ws: Path, errors: str, top_level: str = TOP, hidden=()) -> str | None:
    return sandbox_refusal(errors, sandbox="workspace-write", workspace=str(ws), top_level=top_level,
                           hidden=[str(ws / h) for h in hidden])


# (errors a program prints, words the note must hold) -- the wall named for each
SEEN = {
    "bash_redirect_new_file": ("/usr/bin/bash: line 1: notes.txt: Permission denied",
                               "notes.txt would be a new entry at the workspace's top level"),
    "mkdir": ("mkdir: cannot create directory ‘out’: Permission denied", "out would be a new entry"),
    "python_open": ("PermissionError: [Errno 13] Permission denied: 'out.csv'", "out.csv would be a new entry"),
    "rename_existing_at_top": ("mv: cannot move 'notes.md' to 'sub/notes.md': Permission denied",
                               "notes.md is at the workspace's top level, where this sandbox cannot rename or remove"),
    "git_lock_in_protected": ("fatal: Unable to create '{ws}/.git/index.lock': Read-only file system",
                              "/.git/index.lock is in protected paths (.git:"),
    "rename_mount_point": ("mv: cannot move '.git' to 'g2': Device or resource busy", ".git is in protected paths"),
    "hard_link_out_of_protected": ("ln: failed to create hard link 'c' => '.git/config': Invalid cross-device link",
                                   ".git/config is in protected paths"),
    "outside": ("bash: /etc/motd: Permission denied", "/etc/motd is outside the workspace"),
    "hidden": ("cat: .env: Permission denied", ".env is hidden by a read deny rule"),
    "near_hidden": ("touch: cannot touch 'node_modules/new': Permission denied",
                    "node_modules/new is in a folder holding files a read deny rule hides"),
}


@pytest.mark.parametrize("name", sorted(SEEN))
def test_each_wall_is_named_with_the_path_that_met_it(ws: Path, name: str) -> None:
    errors, words = SEEN[name]
    note = say(ws, errors.format(ws=ws), hidden=[".env", "node_modules/pkg/.env"])
    assert note is not None and words in note, note
    assert note.startswith("stopped by the sandbox (workspace-write): ")
    assert "writes only in the workspace" not in note


def test_where_the_top_level_is_open_a_top_level_path_is_not_blamed_on_it(ws: Path) -> None:
    note = say(ws, "bash: notes.txt: Permission denied", top_level="")
    assert "top level" not in note and note.startswith("refused by the sandbox (workspace-write)")


def test_many_paths_of_one_wall_are_one_note(ws: Path) -> None:
    errors = "\n".join(f"bash: .git/f{i}: Read-only file system" for i in range(8))
    note = say(ws, errors)
    assert note.count("protected paths") == 1 and ".git/f0, .git/f1" in note and "and 3 more" in note


def test_a_link_to_a_protected_path_is_shown_with_where_it_leads(ws: Path) -> None:
    (ws / ".git" / "config").write_text("")
    os.symlink(".git/config", ws / "c")
    assert "c (a link to .git/config) is in protected paths" in say(ws, "bash: c: Permission denied")


def test_no_sign_of_a_refusal_says_nothing(ws: Path) -> None:
    assert say(ws, "ls: cannot access 'nope': No such file or directory") is None
    # two file systems refuse a hard link the same way: without a path that met a wall, nothing is said
    assert say(ws, "ln: failed to create hard link 'a' => '/tmp/b': Invalid cross-device link") is None


def test_without_the_workspace_only_the_walls_are_said() -> None:
    note = sandbox_refusal("bash: x: Permission denied", sandbox="workspace-write", workspace=None)
    assert note.startswith("refused by the sandbox (workspace-write): it lets a command write in the workspace")


def test_the_read_only_sandbox_says_writing_needs_an_approval(ws: Path) -> None:
    note = sandbox_refusal("bash: x: Read-only file system", sandbox="read-only", workspace=str(ws))
    assert "read-only sandbox" in note and "approve" in note


def test_the_read_only_sandbox_says_what_it_refuses_when_only_eperm_shows(ws: Path) -> None:
    # EPERM alone may be a write, or tracing or another process's limits (refused to every sandboxed command)
    note = sandbox_refusal("prlimit: failed to set the NOFILE resource limit: Operation not permitted",
                           sandbox="read-only", workspace=str(ws))
    assert "traces no other process" in note and "approve" in note
