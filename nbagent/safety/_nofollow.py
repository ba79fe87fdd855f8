"""Operations on a folder's relative paths that follow no link on the way (`At`), for putting protected paths back
(`nbagent.safety.sandbox_restore`) while a command may still be running: each folder is opened from the root's
own with O_NOFOLLOW, a file is read no further than asked, and a folder tree is removed without recursion.

It reads what the workspace holds (which anyone could have written) only to compare it and copy it back;
nothing found there is run.
"""

from __future__ import annotations

import os
import stat

__all__ = ["NOFOLLOW", "REMOVE_STEPS", "At", "read_fd"]


def _write_all(file: int, content: bytes) -> None:
    """All of `content` to the open file `file` (a write may take only part of it)."""
    view = memoryview(content)
    while view:
        view = view[os.write(file, view):]



_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
NOFOLLOW = os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
"""How a file is opened: no link followed, never inherited, non-blocking (a fifo never holds nbagent up)."""


def read_fd(fd: int, limit: int | None = None) -> bytes:
    """What the open file holds, or its first `limit` bytes."""
    chunks = []
    left = limit
    while left is None or left > 0:
        chunk = os.read(fd, 1 << 20 if left is None else min(1 << 20, left))
        if not chunk:
            break
        chunks.append(chunk)
        if left is not None:
            left -= len(chunk)
    return b"".join(chunks)


def _remove_tree(parent: int, name: str) -> None:
    """Remove the folder `name` in the open folder `parent` and all it holds, following no link, without recursion
    and with one folder open at a time: a command can nest folders deeper than Python's recursion allows, and
    than a process may open files. Going back up is by `..`, checked to be the folder it came from. A folder
    is read again until a look finds it empty (what a look unlinks may hide other entries from it);
    `REMOVE_STEPS` bounds the work against a process that keeps adding entries."""
    names = [name]
    above: list[tuple[int, int]] = []  # (device, inode) of the folder holding each level below the first
    fd = os.open(name, _DIR | os.O_NOFOLLOW, dir_fd=parent)
    steps = 0
    try:
        while True:
            inner, empty = None, True
            for entry in os.scandir(fd):
                steps += 1
                if steps > REMOVE_STEPS:
                    raise OSError(f"more than {REMOVE_STEPS:,} entries to remove")
                empty = False
                if entry.is_dir(follow_symlinks=False):
                    inner = entry.name
                    break
                os.unlink(entry.name, dir_fd=fd)
            if inner is not None:
                here = os.fstat(fd)
                below = os.open(inner, _DIR | os.O_NOFOLLOW, dir_fd=fd)
                os.close(fd)
                fd = below
                above.append((here.st_dev, here.st_ino))
                names.append(inner)
            elif not empty:
                continue
            elif not above:
                os.close(fd)
                fd = -1
                os.rmdir(name, dir_fd=parent)
                return
            else:
                up = os.open("..", _DIR, dir_fd=fd)
                os.close(fd)
                fd = up
                st = os.fstat(fd)
                if (st.st_dev, st.st_ino) != above.pop():
                    raise OSError("a folder being removed was moved meanwhile")
                os.rmdir(names.pop(), dir_fd=fd)
    finally:
        if fd >= 0:
            os.close(fd)


REMOVE_STEPS = 1_000_000
"""The most entries `_remove_tree` looks at before it gives up (and the path is reported not put back)."""


class At:
    """Operations on a workspace-relative path that follow no link on the way: each folder is opened from the
    workspace's own with O_NOFOLLOW, so a command still running (in the background) cannot turn one of them
    into a link that leads what is put back, or removed, outside the workspace. Files are opened
    non-blocking (a fifo never holds nbagent up)."""

    def __init__(self, ws: str) -> None:
        self.ws = ws

    def _parent(self, rel: str) -> tuple[int, str]:
        parts = rel.split("/")
        fd = os.open(self.ws, _DIR)
        try:
            for part in parts[:-1]:
                inner = os.open(part, _DIR | os.O_NOFOLLOW, dir_fd=fd)
                os.close(fd)
                fd = inner
        except OSError:
            os.close(fd)
            raise
        return fd, parts[-1]

    def lstat(self, rel: str) -> os.stat_result | None:
        try:
            fd, name = self._parent(rel)
        except OSError:
            return None
        try:
            return os.stat(name, dir_fd=fd, follow_symlinks=False)
        except OSError:
            return None
        finally:
            os.close(fd)

    def content(self, rel: str, kind: str, limit: int) -> bytes | str | None:
        """A link's target, or a file's bytes (at most `limit + 1` of them: a file larger than `limit` is never
        read whole); None when it cannot be read."""
        try:
            fd, name = self._parent(rel)
        except OSError:
            return None
        try:
            if kind == "l":
                return os.readlink(name, dir_fd=fd)
            file = os.open(name, os.O_RDONLY | NOFOLLOW, dir_fd=fd)
            try:
                return read_fd(file, limit + 1)
            finally:
                os.close(file)
        except OSError:
            return None
        finally:
            os.close(fd)

    def holds(self, rel: str, kind: str, content: bytes | str | None) -> bool:
        """Whether `rel` holds `content` (a file compared without reading more than `content` is long)."""
        return self.content(rel, kind, limit=len(content) if isinstance(content, bytes) else 0) == content

    def write(self, rel: str, content: bytes, mode: int) -> None:
        fd, name = self._parent(rel)
        try:
            file = os.open(name, os.O_WRONLY | os.O_CREAT | NOFOLLOW, 0o600, dir_fd=fd)
            try:
                os.fchmod(file, mode | stat.S_IWUSR)
                os.ftruncate(file, 0)
                _write_all(file, content)
                os.fchmod(file, mode)
            finally:
                os.close(file)
        finally:
            os.close(fd)

    def replace(self, rel: str, content: bytes, mode: int) -> None:
        """A new file with `content` takes `rel`'s place (renamed over it: a new inode)."""
        fd, name = self._parent(rel)
        try:
            fresh = f".{name}.nbagent-fresh"
            try:
                os.unlink(fresh, dir_fd=fd)
            except FileNotFoundError:
                pass
            file = os.open(fresh, os.O_WRONLY | os.O_CREAT | os.O_EXCL | NOFOLLOW, 0o600, dir_fd=fd)
            try:
                _write_all(file, content)
                os.fchmod(file, mode)
            finally:
                os.close(file)
            os.rename(fresh, name, src_dir_fd=fd, dst_dir_fd=fd)
        finally:
            os.close(fd)

    def mkdir(self, rel: str, mode: int) -> None:
        fd, name = self._parent(rel)
        try:
            try:
                os.mkdir(name, 0o700, dir_fd=fd)
            except FileExistsError:
                pass
            folder = os.open(name, _DIR | os.O_NOFOLLOW, dir_fd=fd)
            try:
                os.fchmod(folder, mode)
            finally:
                os.close(folder)
        finally:
            os.close(fd)

    def symlink(self, rel: str, target: str) -> None:
        fd, name = self._parent(rel)
        try:
            os.symlink(target, name, dir_fd=fd)
        finally:
            os.close(fd)

    def remove(self, rel: str) -> None:
        fd, name = self._parent(rel)
        try:
            if stat.S_ISDIR(os.stat(name, dir_fd=fd, follow_symlinks=False).st_mode):
                _remove_tree(fd, name)
            else:
                os.unlink(name, dir_fd=fd)
        finally:
            os.close(fd)

    def rename(self, rel: str, to: str) -> None:
        fd, name = self._parent(rel)
        try:
            to_fd, to_name = self._parent(to)
            try:
                os.rename(name, to_name, src_dir_fd=fd, dst_dir_fd=to_fd)
            finally:
                os.close(to_fd)
        finally:
            os.close(fd)

    def listdir(self, rel: str) -> list[str]:
        try:
            fd, name = self._parent(rel)
        except OSError:
            return []
        try:
            folder = os.open(name, _DIR | os.O_NOFOLLOW, dir_fd=fd)
            try:
                return os.listdir(folder)
            finally:
                os.close(folder)
        except OSError:
            return []
        finally:
            os.close(fd)
