"""The workspace boundary: every path a file tool touches is resolved, checked and opened here.

A path given by the model is resolved against the workspace root with every symbolic link followed
(`os.path.realpath`), and refused unless the result lies inside the root: `..` that climbs out, absolute
paths elsewhere, `~`, symbolic links that lead out, NUL bytes and Windows-style paths (`C:\\`, `\\\\server`)
all end in a `WorkspaceError` whose message is written for the model. So is a path no tool may reach
(`nbagent.safety.reach`: credential stores, Jupyter's runtime folder, nbagent's keys, and with the workspace
at or above home, home's hidden files and folders), as written or as it resolves; `walk` passes such
places by without looking in. No mode, rule or approval changes this: the check is inside the tools,
after the permission pipeline.

Opening is then one step from the root's directory descriptor (`_beneath.open_beneath`: `openat2` with
`RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS` where the kernel has it, else `openat` with `O_NOFOLLOW` component
by component), so a folder or file swapped for a symbolic link between the check and the open is refused
instead of followed. Everything goes through it: reading, writing, `stat`, and `walk`, which lists each
folder through a descriptor opened that way (never by its path), so `list_files` and `grep` cannot be
led out either. Writes go to a temporary file in the same directory and are renamed over the target, so
a reader never sees half a file and a hard-linked target outside is never written through.
"""

from __future__ import annotations

import errno
import os
import re
import secrets
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from ..safety.reach import out_of_reach, reach_check
from ..tools.paths import relative_inside
from ._beneath import O_CLOEXEC as _O_CLOEXEC
from ._beneath import O_DIRECTORY as _O_DIRECTORY
from ._beneath import O_NOFOLLOW as _O_NOFOLLOW
from ._beneath import O_NONBLOCK as _O_NONBLOCK
from ._beneath import open_beneath

__all__ = ["Entry", "ResolvedPath", "Workspace", "WorkspaceError", "workspace_of"]

_DIR_FD = os.open in os.supports_dir_fd and os.mkdir in os.supports_dir_fd
_WINDOWS_ABS = re.compile(r"^(?:[A-Za-z]:|\\\\)")  # C:\x, C:x, \\server\share, \\?\C:\x


class WorkspaceError(Exception):
    """A path is outside the workspace, or cannot be used; the message is written for the model."""


@dataclass(frozen=True, slots=True)
class ResolvedPath:
    """A path inside the workspace."""

    given: str
    """The path as the model wrote it."""
    path: Path
    """The real absolute path (symbolic links resolved)."""
    rel: str
    """The real path relative to the workspace root, `/`-separated (`.` for the root itself)."""

    @property
    def parts(self) -> tuple[str, ...]:
        return () if self.rel == "." else tuple(self.rel.split("/"))


class Workspace:
    """A directory that file tools are confined to."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        real = os.path.realpath(os.fspath(root))
        if not os.path.isdir(real):
            raise WorkspaceError(f"the workspace {os.fspath(root)!r} is not a directory")
        self.root = Path(real)
        """The real absolute path of the workspace root."""
        self._root_str = real

    def __repr__(self) -> str:
        return f"Workspace({self._root_str!r})"

    # -- resolving --------------------------------------------------------------------------------------
    def resolve(self, given: Any, *, what: str = "path") -> ResolvedPath:
        """Resolve a path the model gave; raise `WorkspaceError` unless it is inside the workspace."""
        if not isinstance(given, str):
            raise WorkspaceError(f"the {what} must be a string, not {type(given).__name__}")
        if "\x00" in given:
            raise WorkspaceError(f"the {what} contains a NUL byte, which no file name can contain")
        text = given
        if text in ("", "."):
            return ResolvedPath(given, self.root, ".")
        if _WINDOWS_ABS.match(text):
            raise WorkspaceError(
                f"{given!r} is a Windows-style absolute path; use a path relative to the workspace ({self._root_str})"
            )
        text = text.replace("\\", "/")
        if text.startswith("~"):
            raise WorkspaceError(
                f"{given!r} points into a home directory, which is outside the workspace; "
                f"use a path relative to the workspace ({self._root_str})"
            )
        joined = text if os.path.isabs(text) else os.path.join(self._root_str, text)
        lexical = os.path.normpath(joined)
        real = os.path.realpath(joined)
        rel = self.relative(real)
        if rel is None:
            if self.relative(lexical) is not None:
                raise WorkspaceError(
                    f"{given!r} goes through a symbolic link that leads outside the workspace; "
                    "only files inside the workspace can be used"
                )
            if os.path.isabs(text):
                raise WorkspaceError(
                    f"{given!r} is outside the workspace ({self._root_str}); "
                    "only files inside the workspace can be used"
                )
            raise WorkspaceError(
                f"{given!r} leads outside the workspace ({self._root_str}) with '..'; "
                "only files inside the workspace can be used"
            )
        why = out_of_reach(real, self._root_str) or out_of_reach(lexical, self._root_str)
        if why:
            raise WorkspaceError(f"{given!r} is out of reach: {why}")
        return ResolvedPath(given, Path(real), rel)

    def out_of_reach(self, path: str | os.PathLike[str]) -> str | None:
        """Why no tool may touch `path` (absolute, inside the workspace), or None (`nbagent.safety.reach`)."""
        return out_of_reach(os.fspath(path), self._root_str)

    def relative(self, path: str | os.PathLike[str]) -> str | None:
        """`path` (absolute) relative to the root, `/`-separated; None when it is not inside."""
        return relative_inside(self._root_str, os.fspath(path))

    def contains(self, path: str | os.PathLike[str]) -> bool:
        """Whether `path` really (symbolic links followed) lies inside the workspace."""
        return self.relative(os.path.realpath(os.fspath(path))) is not None

    # -- opening ---------------------------------------------------------------------------------------
    def _root_fd(self) -> int:
        return os.open(self._root_str, os.O_RDONLY | _O_DIRECTORY | _O_CLOEXEC)

    def _open(self, parts: tuple[str, ...], flags: int) -> int:
        """`parts` below the root, opened in one step (`_beneath.open_beneath`): never through a link."""
        root = self._root_fd()
        try:
            for _ in range(3):  # EAGAIN: a rename raced the kernel's lookup; look again
                try:
                    return open_beneath(root, parts, flags)
                except BlockingIOError:
                    continue
            raise OSError(errno.EAGAIN, "the path kept changing while it was opened")
        finally:
            os.close(root)

    def _open_dir(self, parts: tuple[str, ...], *, create: bool = False) -> int:
        """A descriptor of the directory `parts` below the root, opened in one step without following any
        link; with `create`, missing directories are made on the way (each in a parent opened that way)."""
        flags = os.O_RDONLY | _O_DIRECTORY
        try:
            if not create:
                return self._open(parts, flags)
            for i in range(len(parts) + 1):
                try:
                    fd = self._open(parts[: i + 1], flags)
                except FileNotFoundError:
                    parent = self._open(parts[:i], flags)
                    try:
                        os.mkdir(parts[i], 0o777, dir_fd=parent)
                    except FileExistsError:
                        pass
                    finally:
                        os.close(parent)
                    fd = self._open(parts[: i + 1], flags)
                if i + 1 >= len(parts):
                    return fd
                os.close(fd)
            return self._open(parts, flags)  # pragma: no cover - the loop returns
        except OSError as exc:
            if exc.errno == errno.ENOTDIR and self._link_among(parts):
                exc = OSError(errno.ELOOP, "a symbolic link appeared")
            elif exc.errno == errno.ENOTDIR and create:
                raise
            raise _changed(exc, "/".join(parts)) from None

    def _link_among(self, parts: tuple[str, ...]) -> bool:
        """Whether a component of `parts` is a symbolic link now (to say so in a message; never to open)."""
        return any(os.path.islink(os.path.join(self._root_str, *parts[: i + 1])) for i in range(len(parts)))

    def open_read(self, resolved: ResolvedPath) -> Any:
        """Open a regular file for reading (binary); refuse anything else with a clear message."""
        if resolved.rel == ".":
            raise WorkspaceError(f"{resolved.given!r} is a directory, not a file")
        flags = os.O_RDONLY | _O_NOFOLLOW | _O_CLOEXEC | _O_NONBLOCK
        try:
            if _DIR_FD:
                fd = self._open(resolved.parts, flags)
            else:  # pragma: no cover - platforms without dir_fd
                fd = os.open(resolved.path, flags)
        except FileNotFoundError:
            raise WorkspaceError(f"{resolved.given!r} does not exist") from None
        except IsADirectoryError:
            raise WorkspaceError(f"{resolved.given!r} is a directory, not a file") from None
        except OSError as exc:
            raise _changed(exc, resolved.given) from None
        try:
            st = os.fstat(fd)
            if stat.S_ISDIR(st.st_mode):
                raise WorkspaceError(f"{resolved.given!r} is a directory, not a file")
            if not stat.S_ISREG(st.st_mode):
                raise WorkspaceError(f"{resolved.given!r} is not a regular file (a device, pipe or socket)")
            if _O_NONBLOCK:
                os.set_blocking(fd, True)
            return os.fdopen(fd, "rb")
        except BaseException:
            os.close(fd)
            raise

    def read_bytes(self, resolved: ResolvedPath, limit: int | None = None) -> bytes:
        with self.open_read(resolved) as f:
            return f.read() if limit is None else f.read(limit)

    def stat(self, resolved: ResolvedPath) -> os.stat_result | None:
        """What the path is (a link is not followed), looked at through its folder's descriptor; None when
        it does not exist or cannot be reached that way."""
        if not _DIR_FD:  # pragma: no cover - platforms without dir_fd
            try:
                return os.stat(resolved.path, follow_symlinks=False)
            except OSError:
                return None
        try:
            dfd = self._open(resolved.parts[:-1], os.O_RDONLY | _O_DIRECTORY)
        except OSError:
            return None
        try:
            return os.stat(resolved.parts[-1] if resolved.parts else ".", dir_fd=dfd, follow_symlinks=False)
        except OSError:
            return None
        finally:
            os.close(dfd)

    def write_bytes(self, resolved: ResolvedPath, data: bytes) -> bool:
        """Write `data` to the file (creating parent directories inside the workspace); return whether it
        was created. The file is written beside the target and renamed over it."""
        if resolved.rel == ".":
            raise WorkspaceError(f"{resolved.given!r} is the workspace directory itself, not a file")
        name = resolved.parts[-1]
        if not _DIR_FD:  # pragma: no cover - platforms without dir_fd
            return self._write_plain(resolved, data)
        try:
            dfd = self._open_dir(resolved.parts[:-1], create=True)
        except NotADirectoryError:
            raise WorkspaceError(f"cannot create {resolved.given!r}: a parent of it is a file, not a directory") from None
        except OSError as exc:
            raise _changed(exc, resolved.given) from None
        tmp = f".{name}.{secrets.token_hex(4)}.nbagent-tmp"
        try:
            mode = None
            try:
                st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
            except FileNotFoundError:
                st = None
            if st is not None:
                if stat.S_ISLNK(st.st_mode):
                    raise WorkspaceError(f"{resolved.given!r} changed while it was being written (a symbolic link appeared)")
                if stat.S_ISDIR(st.st_mode):
                    raise WorkspaceError(f"{resolved.given!r} is a directory, not a file")
                if not stat.S_ISREG(st.st_mode):
                    raise WorkspaceError(f"{resolved.given!r} is not a regular file")
                mode = stat.S_IMODE(st.st_mode)
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _O_NOFOLLOW | _O_CLOEXEC, 0o666, dir_fd=dfd)
            try:
                with os.fdopen(fd, "wb") as f:
                    f.write(data)
                if mode is not None:
                    os.chmod(tmp, mode, dir_fd=dfd)
                os.replace(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
            except BaseException:
                try:
                    os.unlink(tmp, dir_fd=dfd)
                except OSError:
                    pass
                raise
            return st is None
        except PermissionError:
            raise WorkspaceError(f"no permission to write {resolved.given!r}") from None
        finally:
            os.close(dfd)

    def _write_plain(self, resolved: ResolvedPath, data: bytes) -> bool:  # pragma: no cover
        created = not resolved.path.exists()
        resolved.path.parent.mkdir(parents=True, exist_ok=True)
        if not self.contains(resolved.path.parent):
            raise WorkspaceError(f"{resolved.given!r} leads outside the workspace")
        resolved.path.write_bytes(data)
        return created

    # -- walking -----------------------------------------------------------------------------------------
    def walk(self, start: ResolvedPath, *, max_depth: int | None = None,
             skip_dirs: frozenset[str] = frozenset({".git"}), sizes: bool = False) -> Iterator[tuple[str, "Entry"]]:
        """(relative path, entry) for everything below `start`, never following symbolic links: each folder
        is listed through a descriptor opened in one step from the root (a folder swapped for a link
        meanwhile is not listed), what each entry is is read through that descriptor too, and places out
        of reach (`nbagent.safety.reach`) are passed by. `sizes`: read the size of each regular file."""
        stack: list[tuple[str, int]] = [(start.rel, 0)]
        unreachable = reach_check(self._root_str)
        while stack:
            rel_dir, depth = stack.pop()
            parts = () if rel_dir == "." else tuple(rel_dir.split("/"))
            try:
                dfd = self._open(parts, os.O_RDONLY | _O_DIRECTORY)
            except OSError:
                continue
            entries: list[Entry] = []
            try:
                with os.scandir(dfd) as it:
                    for found in it:  # kinds from the listing (or an lstat through the descriptor)
                        try:
                            kind = ("link" if found.is_symlink() else "dir" if found.is_dir(follow_symlinks=False)
                                    else "file" if found.is_file(follow_symlinks=False) else "other")
                            size = found.stat(follow_symlinks=False).st_size if sizes and kind == "file" else None
                        except OSError:
                            continue
                        rel = found.name if rel_dir == "." else f"{rel_dir}/{found.name}"
                        entries.append(Entry(found.name, rel, f"{self._root_str}/{rel}", kind, size))
            finally:
                os.close(dfd)
            entries.sort(key=lambda e: e.name)
            subdirs = []
            for entry in entries:
                if unreachable is not None and unreachable(entry.path):
                    continue
                yield entry.rel, entry
                if entry.kind == "dir" and entry.name not in skip_dirs and (max_depth is None or depth + 1 < max_depth):
                    subdirs.append((entry.rel, depth + 1))
            stack.extend(reversed(subdirs))


@dataclass(frozen=True, slots=True)
class Entry:
    """One thing `Workspace.walk` found: what it is was read through its folder's descriptor, never by path."""

    name: str
    rel: str
    """Relative to the workspace root, `/`-separated."""
    path: str
    """The absolute path it was found at (for messages and for where a link leads; never opened)."""
    kind: str
    """"dir", "file", "link" (a symbolic link, not followed) or "other" (a device, pipe or socket)."""
    size: int | None = None
    """A regular file's size, when the walk was asked for sizes."""

    def is_dir(self, follow_symlinks: bool = False) -> bool:
        return self.kind == "dir"

    def is_file(self, follow_symlinks: bool = False) -> bool:
        return self.kind == "file"

    def is_symlink(self) -> bool:
        return self.kind == "link"


def _changed(exc: OSError, what: str) -> WorkspaceError:
    if exc.errno in (errno.ELOOP, errno.EMLINK):
        return WorkspaceError(f"{what!r} changed while it was being opened (a symbolic link appeared); try again")
    if exc.errno == errno.ENOTDIR:
        return WorkspaceError(f"{what!r}: a part of this path is a file, not a directory")
    if isinstance(exc, PermissionError):
        return WorkspaceError(f"no permission to open {what!r}")
    return WorkspaceError(f"cannot open {what!r}: {exc.strerror or exc}")


def workspace_of(bound: str | os.PathLike[str] | Workspace | None, ctx: Any) -> Workspace:
    """The workspace a call works in: the tool's own (`bound`), else the session's
    (`ctx.constraints.workspace`), else the working directory."""
    if isinstance(bound, Workspace):
        return bound
    if bound is not None:
        return Workspace(bound)
    constraints = getattr(ctx, "constraints", None)
    root = getattr(constraints, "workspace", None)
    return Workspace(root if root is not None else os.getcwd())
