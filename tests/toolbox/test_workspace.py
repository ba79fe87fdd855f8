"""The workspace boundary itself: resolving, opening and writing paths."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from nbagent.toolbox import Workspace, WorkspaceError


@pytest.fixture
def w(ws: Path) -> Workspace:
    return Workspace(ws)


def test_relative_paths_resolve_inside(w: Workspace, ws: Path) -> None:
    r = w.resolve("data/a.csv")
    assert r.path == ws / "data" / "a.csv"
    assert r.rel == "data/a.csv"
    assert w.resolve(".").rel == "."
    assert w.resolve("").rel == "."


def test_dotdot_that_stays_inside_is_fine(w: Workspace) -> None:
    assert w.resolve("data/../notes.txt").rel == "notes.txt"


def test_absolute_path_inside_is_fine(w: Workspace, ws: Path) -> None:
    assert w.resolve(str(ws / "notes.txt")).rel == "notes.txt"


def test_symlink_inside_resolves_to_its_target(w: Workspace) -> None:
    assert w.resolve("link_in").rel == "notes.txt"


@pytest.mark.parametrize(
    "path, words",
    [
        ("../outside/secret.txt", "'..'"),
        ("data/../../outside/secret.txt", "'..'"),
        ("/etc/passwd", "outside the workspace"),
        ("link_out", "symbolic link"),
        ("dir_out/secret.txt", "symbolic link"),
        ("~/.ssh/id_rsa", "home directory"),
        ("~root/x", "home directory"),
        ("C:\\Windows\\system.ini", "Windows-style"),
        ("c:secret", "Windows-style"),
        ("\\\\server\\share\\x", "Windows-style"),
        ("..\\outside\\secret.txt", "'..'"),
        ("notes.txt\x00.png", "NUL"),
    ],
)
def test_paths_outside_are_refused_clearly(w: Workspace, path: str, words: str) -> None:
    with pytest.raises(WorkspaceError) as info:
        w.resolve(path)
    assert words in str(info.value)


def test_a_non_string_path_is_refused(w: Workspace) -> None:
    with pytest.raises(WorkspaceError, match="must be a string"):
        w.resolve(None)


def test_the_workspace_must_be_a_directory(tmp_path: Path) -> None:
    with pytest.raises(WorkspaceError, match="not a directory"):
        Workspace(tmp_path / "missing")


def test_open_read_refuses_directories_and_missing_files(w: Workspace) -> None:
    with pytest.raises(WorkspaceError, match="directory"):
        w.open_read(w.resolve("data"))
    with pytest.raises(WorkspaceError, match="does not exist"):
        w.open_read(w.resolve("nope.txt"))


def test_open_read_refuses_a_fifo_without_blocking(w: Workspace, ws: Path) -> None:
    os.mkfifo(ws / "pipe")
    with pytest.raises(WorkspaceError, match="not a regular file"):
        w.open_read(w.resolve("pipe"))


def test_write_creates_parent_directories(w: Workspace, ws: Path) -> None:
    created = w.write_bytes(w.resolve("new/deeper/file.txt"), b"hello")
    assert created is True
    assert (ws / "new" / "deeper" / "file.txt").read_bytes() == b"hello"
    assert w.write_bytes(w.resolve("new/deeper/file.txt"), b"again") is False
    assert not [p for p in (ws / "new" / "deeper").iterdir() if p.name.endswith(".nbagent-tmp")]


def test_write_keeps_the_file_mode(w: Workspace, ws: Path) -> None:
    target = ws / "script.sh"
    target.write_text("echo 1\n")
    target.chmod(0o750)
    w.write_bytes(w.resolve("script.sh"), b"echo 2\n")
    assert (target.stat().st_mode & 0o777) == 0o750


def test_a_directory_swapped_for_a_link_after_resolving_is_not_followed(w: Workspace, ws: Path, outside: Path) -> None:
    (ws / "sub").mkdir()
    resolved = w.resolve("sub/file.txt")
    (ws / "sub").rmdir()
    os.symlink(outside, ws / "sub")  # a race: the directory became a link to the outside
    with pytest.raises(WorkspaceError, match="changed"):
        w.write_bytes(resolved, b"pwned")
    assert not (outside / "file.txt").exists()


def test_a_file_swapped_for_a_link_after_resolving_is_not_read(w: Workspace, ws: Path, outside: Path) -> None:
    resolved = w.resolve("notes.txt")
    (ws / "notes.txt").unlink()
    os.symlink(outside / "secret.txt", ws / "notes.txt")
    with pytest.raises(WorkspaceError, match="changed"):
        w.open_read(resolved)


def test_writing_a_hard_link_does_not_write_through_it(w: Workspace, ws: Path, outside: Path) -> None:
    os.link(outside / "secret.txt", ws / "hard")
    w.write_bytes(w.resolve("hard"), b"replaced")
    assert (outside / "secret.txt").read_text() == "TOP SECRET\n"
    assert (ws / "hard").read_bytes() == b"replaced"


def test_walk_never_follows_links(w: Workspace) -> None:
    seen = [rel for rel, _ in w.walk(w.resolve("."))]
    assert "dir_out" in seen
    assert not any(rel.startswith("dir_out/") for rel in seen)
    assert "data/a.csv" in seen
