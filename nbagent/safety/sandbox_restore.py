"""Protected paths kept by a copy, for the Landlock backend where the process may make no mount namespace.

Landlock gives a folder's rights to everything beneath it: a command that may make `notes.txt` at the
workspace's top level may also write `.git/config` (measured, Landlock ABI 7: with MAKE_REG, MAKE_DIR and
MAKE_SYM on the top folder alone `touch` works but `echo hi > notes.txt` does not, and a symbolic link can be
planted as `.git/hooks/pre-commit`; add WRITE_FILE and `.git/config`, `.mcp.json` and new hooks are writable;
without REMOVE_* nothing at the top can be renamed, so neither can `sed -i` or `mv` an ordinary file there).
So there the whole workspace is writable, and what protects the protected paths is this module:

- before the command, `ProtectedCopy` takes what of each protected top-level entry can run programs:
  which entry it is (device and inode, so a rename away or a replacement is seen), and every file, folder
  and link inside it with its mode and content and each file's link count, except the data that changes as
  a person works (git's objects, refs and logs, decided by kind: `_DATA`; nbagent's sessions and
  batches), which runs nothing;
- after the command (and, for a command left running in the background, before every later call and
  when it ends: `check_running`), `restore()` compares and puts back what changed: an entry renamed away is
  renamed back from where it went (found by its inode), a replaced or removed one made again from the copy,
  a changed file written back, a new file removed, a file hard-linked elsewhere (its link count grew)
  replaced by a fresh copy with a new inode; the result names each path put back.

A command that goes on in the background is not kept by a copy at all (`sandbox_landlock`: the top level
stays closed for it), since a put-back comes after what a program outside ran meanwhile; `check_running`
stays for a copy that a command in the background still holds.

What this does not give (the mount namespace does, `nbagent.safety.sandbox_landlock`): while the command
runs, a program outside the sandbox (a git prompt, JupyterLab's git panel, an editor) can read what the
command wrote before it is put back; `.git`'s history, if the command deletes it, is not in the copy.

Bounded: more than `COPY_LIMIT` bytes or `ENTRY_LIMIT` entries to copy makes `ProtectedCopy` raise
`CopyTooLarge`; the caller then closes the top level instead (it fails closed).

It reads what the workspace holds (which anyone could have written) only to compare it and copy it back;
nothing found there is run.
"""

from __future__ import annotations

import os
import stat
import threading
from collections.abc import Iterable
from typing import Any

from ._nofollow import NOFOLLOW, At, read_fd
from .protected import PROTECTED_PATHS

__all__ = ["COPY_LIMIT", "ENTRY_LIMIT", "CopyTooLarge", "NotPutBack", "ProtectedCopy", "check_running", "ended",
           "started", "take"]

COPY_LIMIT = 32 * 1024 * 1024
ENTRY_LIMIT = 20_000
SEARCH_LIMIT = 100_000
"""How many workspace entries `restore` looks through for an entry renamed away."""

_DATA = {".git": frozenset({"objects", "refs", "logs", "packed-refs", "HEAD", "ORIG_HEAD", "FETCH_HEAD",
                            "COMMIT_EDITMSG"}),
         ".nbagent": frozenset({"sessions", "batches"})}
"""Per protected folder: names of data that changes as the person or nbagent works and runs no program; not
copied, not put back (a commit or a stored session made meanwhile is kept). Decided by kind: in `.git` only
object, ref and log data is data (directly in `.git`, or in a git folder it holds: `modules/<name>`,
`worktrees/<name>`); everything else there (config, hooks, info, a pending rebase's or sequencer's todo, which
can run `exec` lines, `config.worktree`, a submodule's config and hooks, and the index, whose gitlinks send the
person's `git status` into a nested repository whose own config, an ordinary workspace file, can run a program:
found by an outside try) is copied and put back, and what is new there is removed. (Under bubblewrap and with a
mount namespace all of `.git` is read-only.)"""


def _is_data(rel: str, name: str) -> bool:
    """Whether `name` inside the folder `rel` is data (`_DATA`), not copied nor put back."""
    parts = rel.split("/")
    for at, part in enumerate(parts):  # (a protected folder below the top: the kernel's folder's `.git`)
        if part in _DATA:
            parts = parts[at:]
            break
    data = _DATA.get(parts[0], frozenset())
    if name not in data:
        return False
    if parts[0] != ".git":
        return True
    return len(parts) == 1 or (len(parts) >= 3 and parts[-2] in ("modules", "worktrees"))


class CopyTooLarge(OSError):
    """The protected paths hold more than `ProtectedCopy` may copy."""


_Entry = tuple[str, int, "bytes | str | None"]
"""(kind, mode, content): kind "f", "d" or "l"; content: a file's bytes, a link's target, or None."""


class ProtectedCopy:
    """What each protected top-level entry of `ws` holds that can run programs, taken now."""

    def __init__(self, ws: str | os.PathLike[str], names: Iterable[str] = PROTECTED_PATHS) -> None:
        self.ws = os.path.realpath(ws)
        self.tops: dict[str, tuple[int, int, str]] = {}
        """name: (device, inode, kind) of each protected entry at the top level."""
        self.entries: dict[str, _Entry] = {}
        """Workspace-relative path: what it was."""
        self.names = tuple(names)
        self.data_links: dict[str, int] = {}
        """The same for the data files directly in a copied folder (`.git/HEAD`), whose content is not kept."""
        self.links: dict[str, int] = {}
        """Workspace-relative path: its link count when copied (a hard link made to it is seen after)."""
        self.users = 0
        """Commands kept by this copy now (`take`, `ended`)."""
        self.background = 0
        """Of those, how many run in the background."""
        self.shared = False
        """Two commands or more were kept by it at once (what was put back may be either's doing)."""
        self._size = 0
        self._lock = threading.Lock()
        for name in dict.fromkeys(self.names):
            path = os.path.join(self.ws, name)
            try:
                st = os.lstat(path)
            except OSError:
                continue
            self.tops[name] = (st.st_dev, st.st_ino, _kind(st.st_mode))
            self._take(name)
            if stat.S_ISLNK(st.st_mode):  # where it leads, when that is in the workspace, is kept too
                real = os.path.realpath(path)
                if real.startswith(self.ws + "/") and os.path.exists(real):
                    self._take(os.path.relpath(real, self.ws), outside=True)

    def _take(self, rel: str, outside: bool = False) -> None:
        pending = [rel]
        while pending:
            here = pending.pop()
            full = os.path.join(self.ws, here)
            st = os.lstat(full)
            if len(self.entries) >= ENTRY_LIMIT:
                raise CopyTooLarge(f"more than {ENTRY_LIMIT:,} entries in protected paths")
            kind = _kind(st.st_mode)
            if kind == "f":
                self._size += st.st_size
                if self._size > COPY_LIMIT:
                    raise CopyTooLarge(f"more than {COPY_LIMIT:,} bytes in protected paths")
                file = os.open(full, os.O_RDONLY | NOFOLLOW)
                try:
                    content: bytes | str | None = read_fd(file)
                finally:
                    os.close(file)
            elif kind == "l":
                content = os.readlink(full)
            else:
                content = None
            self.entries[here] = (kind, stat.S_IMODE(st.st_mode), content)
            self.links[here] = st.st_nlink
            if kind == "d":
                for entry in os.scandir(full):
                    if outside or not _is_data(here, entry.name):
                        pending.append(os.path.join(here, entry.name))
                    elif entry.is_file(follow_symlinks=False):  # data (HEAD): not copied, but a link to it is seen
                        self.data_links[os.path.join(here, entry.name)] = entry.stat(follow_symlinks=False).st_nlink

    # -- after -------------------------------------------------------------------------------------------

    def restore(self) -> list[str]:
        """Put back what changed since the copy was taken; each path put back, with what was done. Each path is
        put back on its own: whatever one of them raises (a folder nested deeper than any stack, a file too
        large to read) is reported as that path not put back, and the others are still put back."""
        with self._lock:
            done: list[str] = []
            remade: set[str] = set()
            for name, (dev, ino, kind) in self.tops.items():
                said = _each(name, "replaced", self._top, name, dev, ino, kind)
                if said and "made again" in said[0]:
                    remade.add(name)
                done += said
            for rel in sorted(self.entries):
                said = _each(rel, "changed", self._one, rel)
                if rel.split("/")[0] not in remade:  # a top made again whole is reported once, by its name
                    done += said
            for rel, count in self.data_links.items():
                done += _each(rel, "hard-linked elsewhere", self._unlink_data, rel, count)
            for rel in self._new_entries():
                try:
                    self._remove_new(rel)
                    done.append(f"{rel} (made by the command: removed)")
                except Exception as exc:  # noqa: BLE001 - reported: see the docstring
                    done.append(f"{rel} (made by the command: could not be removed: {_why(exc)})")
            failed = [said for said in done if ": could not be " in said]
            if failed:  # what is left changed would be the next copy's starting point: later commands are closed
                _UNRESTORED[self.ws] = failed
            return done

    def _unlink_data(self, rel: str, count: int) -> list[str]:
        """A data file (`.git/HEAD`) hard-linked elsewhere: a fresh copy of what it holds now takes its place."""
        at = At(self.ws)
        st = at.lstat(rel)
        if st is None or not stat.S_ISREG(st.st_mode) or st.st_nlink <= count:
            return []
        if st.st_size > COPY_LIMIT:
            return [f"{rel} (hard-linked elsewhere: could not be replaced: larger than {COPY_LIMIT:,} bytes)"]
        content = at.content(rel, "f", limit=COPY_LIMIT)
        if not isinstance(content, bytes) or len(content) > COPY_LIMIT:  # (unreadable, or grown since it was looked at)
            return [f"{rel} (hard-linked elsewhere: could not be replaced)"]
        at.replace(rel, content, stat.S_IMODE(st.st_mode))
        return [f"{rel} (hard-linked elsewhere: replaced by a fresh copy, the other name no longer reaches it)"]

    def _top(self, name: str, dev: int, ino: int, kind: str) -> list[str]:
        at = At(self.ws)
        st = at.lstat(name)
        if st is not None and (st.st_dev, st.st_ino) == (dev, ino) and _kind(st.st_mode) == kind:
            return []  # (an inode number reused by a new folder: its content is compared below)
        moved = _find(self.ws, dev, ino, kind)
        if st is not None:
            at.remove(name)
        if moved is not None:
            at.rename(moved, name)
            return [f"{name} (renamed away to {moved}: renamed back)"]
        what = "replaced" if st is not None else "removed"
        lost = " (what runs no program, such as git's history, was not in the copy)" if name in _DATA else ""
        return [f"{name} ({what}: made again from the copy{lost})"]

    def _one(self, rel: str) -> list[str]:
        kind, mode, content = self.entries[rel]
        at = At(self.ws)
        st = at.lstat(rel)
        same = st is not None and _kind(st.st_mode) == kind
        linked = same and kind == "f" and st.st_nlink > self.links.get(rel, 1)  # type: ignore[union-attr]
        if linked:  # a hard link made to it: a fresh file (a new inode) takes its place, out of the link's reach
            try:
                at.replace(rel, content, mode)  # type: ignore[arg-type]
            except OSError as exc:
                return [f"{rel} (hard-linked elsewhere: could not be replaced: {_why(exc)})"]
            return [f"{rel} (hard-linked elsewhere: replaced by a fresh copy, the other name no longer reaches it)"]
        if same and stat.S_IMODE(st.st_mode) == mode and (kind in ("d", "o") or at.holds(rel, kind, content)):
            return []
        if kind == "o":
            return [f"{rel} (changed: could not be put back, it is neither a file, a folder nor a link)"]
        if st is not None and (not same or kind == "l"):
            at.remove(rel)  # a file written in place is written back in place: the same file stays
        if kind == "d":
            at.mkdir(rel, mode)
        elif kind == "l":
            at.symlink(rel, content)  # type: ignore[arg-type]
        else:
            at.write(rel, content, mode)  # type: ignore[arg-type]
        return [f"{rel} ({'removed' if st is None else 'changed'}: put back)"]

    def _new_entries(self) -> list[str]:
        """Entries in the copied folders that were not there (a hook the command added), outermost first."""
        found: list[str] = []
        at = At(self.ws)
        for rel, (kind, _mode, _content) in self.entries.items():
            if kind != "d":
                continue
            for name in at.listdir(rel):
                child = os.path.join(rel, name)
                if child not in self.entries and not _is_data(rel, name) and not _transient(name):
                    found.append(child)
        return sorted(found)

    def _remove_new(self, rel: str) -> None:
        At(self.ws).remove(rel)


def _each(rel: str, what: str, step: Any, *args: Any) -> list[str]:
    """`step(*args)`, what it says; whatever it raises, `rel` reported as not put back, and why."""
    try:
        return step(*args)
    except Exception as exc:  # noqa: BLE001 - any failure is one path's: reported, the others still put back
        return [f"{rel} ({what}: could not be put back: {_why(exc)})"]


def _why(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def _transient(name: str) -> bool:
    """A file git makes and removes as it works (a lock, a message, a merge's state): left alone."""
    return name.endswith((".lock", "_MSG", "_MODE", "_HEAD")) or name in ("gc.pid", "gc.log")


def _kind(mode: int) -> str:
    """"f" a file, "d" a folder, "l" a link, "o" anything else (a fifo, a socket: never opened)."""
    return ("l" if stat.S_ISLNK(mode) else "d" if stat.S_ISDIR(mode) else "f" if stat.S_ISREG(mode) else "o")


def _find(ws: str, dev: int, ino: int, kind: str) -> str | None:
    """Where in `ws` the entry with this device and inode is now (renamed away, relative to `ws`), or None."""
    pending, seen = [ws], 0
    while pending and seen < SEARCH_LIMIT:
        try:
            entries = list(os.scandir(pending.pop()))
        except OSError:
            continue
        for entry in entries:
            seen += 1
            try:
                folder = entry.is_dir(follow_symlinks=False)
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if (st.st_dev, st.st_ino) == (dev, ino) and _kind(st.st_mode) == kind:
                return os.path.relpath(entry.path, ws)
            if folder and entry.name not in (".git", "node_modules"):
                pending.append(entry.path)
    return None


# -- commands that overlap share one copy; those in the background are checked before each later call ------------

_SHARED: dict[tuple[str, tuple[str, ...]], ProtectedCopy] = {}
_SHARED_LOCK = threading.Lock()


class NotPutBack(OSError):
    """An earlier command left protected paths of this workspace changed that could not be put back: no copy is
    taken for later ones (the caller keeps protected paths read-only instead: it fails closed)."""


_UNRESTORED: dict[str, list[str]] = {}
"""Per workspace (real path): the protected paths a put-back could not put back, as its result named them."""


def take(ws: str | os.PathLike[str], names: Iterable[str] = PROTECTED_PATHS) -> ProtectedCopy:
    """The copy a command starting now is kept by: a new one, or, while another command of the same workspace
    runs, that one's (taken before either could change anything: a copy taken now could hold what the other
    already planted). Raises `NotPutBack` for a workspace whose protected paths were left changed: a copy
    taken then would keep what was planted."""
    key = (os.path.realpath(ws), tuple(names))
    if key[0] in _UNRESTORED:
        raise NotPutBack("an earlier command left protected paths changed that could not be put back ("
                         + "; ".join(_UNRESTORED[key[0]][:3])
                         + "): see what is there, and restart the kernel once it is as it should be")
    with _SHARED_LOCK:
        copy = _SHARED.get(key)
        if copy is None:
            copy = _SHARED[key] = ProtectedCopy(*key)
        copy.users += 1
        copy.shared = copy.shared or copy.users > 1
        return copy


def started(copy: ProtectedCopy) -> None:
    """A command kept by `copy` goes on in the background: `check_running` looks at it until it ends."""
    with _SHARED_LOCK:
        copy.background += 1


def ended(copy: ProtectedCopy, background: bool = False) -> list[str]:
    """A command kept by `copy` ended. The last of the commands kept by it puts back what was changed while
    they ran (a command running beside it may still be at work until then) and lets the copy go; so does
    one ending while a command runs in the background (which is checked between calls anyway). What was
    put back, or [] for the others."""
    with _SHARED_LOCK:
        copy.users -= 1
        copy.background -= 1 if background else 0
        last = copy.users <= 0
        if last:
            _SHARED.pop((copy.ws, copy.names), None)
        now = last or copy.background > 0
    return copy.restore() if now else []


def check_running() -> list[str]:
    """For every copy a command still running in the background is kept by: put back what was changed so
    far (called before each tool call, so nothing planted is read by the next one)."""
    with _SHARED_LOCK:
        copies = [c for c in _SHARED.values() if c.background > 0]
    done: list[str] = []
    for copy in copies:
        done += copy.restore()
    return done
