"""A command made ready to start (`Prepared`), what both backends keep of protected paths around it, and the
Landlock backend's way of keeping them (`landlock_prepared`).

Landlock gives a folder's rights to everything beneath it and cannot take them back for one child: a
workspace whose top level is writable leaves `.git` writable too. Two ways, chosen by what the process may do:

| the process | protected paths at the top level | the rest of the workspace |
|---|---|---|
| may make a mount namespace (CAP_SYS_ADMIN: root in a VM or a privileged container) | read-only mounts over themselves, as under bubblewrap: not written, renamed away or replaced (EBUSY) | writable, top level included |
| may not (a container without user namespaces or privileges) | writable by the command; what can run programs in them is copied before it and put back after it (`nbagent.safety.sandbox_restore`), and the result says what was put back | writable, top level included |

Files a read deny rule hides and secret places inside the workspace are masked by mounts in the first
case (empty and read-only, as under bubblewrap) and left out of the rules in the second (refused; the top
level then takes no new entry while one is there). Protected paths too large to copy stay read-only in the
second case, and the top level above them closed (`_closed_top` says why).

Why a copy rather than the top level closed, and what it does not give (a program outside the sandbox can
read what the command wrote until it is put back): docs/notes/sandbox-landlock.md, measured there.

It reads the workspace's top-level names (which anyone could have written) only to compare them with
`PROTECTED_PATHS`; nothing found there is run.
"""

from __future__ import annotations

import functools
import marshal
import os
import shutil
import signal
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from . import _launcher
from . import sandbox_restore as _restore
from .protected import PROTECTED_PATHS
from .sandbox_linux import _DEVICES, MARKER_VARIABLE, LandlockRuleset, MountPlan, stop_marked

__all__ = ["Prepared", "landlock_prepared", "missing_protected", "protected_links", "protected_mounts",
           "protected_names", "remove_created", "restore_links"]


@dataclass(slots=True)
class Prepared:
    """A command ready to start under a sandbox: what to run, with what, and what to do after."""

    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)
    """Variables to add to the command's environment."""
    setup: tuple[Any, ...] = (None, False, -1, False)
    """What the command's process does before it becomes the command, beside dying with the kernel: `(mount steps
    or None, supervise, ruleset fd or -1, network)`, the rest of `nbagent.safety._launcher.set_up`'s spec."""
    workspace: str = ""
    """The workspace's real path, for a sandboxed command ("" without a sandbox)."""
    ruleset: LandlockRuleset | None = None
    marker: str | None = None
    tmpdir: str | None = None
    watched: list[Path] = field(default_factory=list)
    """Protected paths that did not exist before the call: removed after it if the command made them."""
    removed: list[str] = field(default_factory=list)
    """What `cleanup()` removed of them."""
    links: dict[str, str] = field(default_factory=dict)
    """Protected paths that are symbolic links (path: where it leads): put back after the call if replaced."""
    restored: list[str] = field(default_factory=list)
    """What `cleanup()` put back of them."""
    pass_fds: tuple[int, ...] = ()
    """File descriptors the sandbox program reads (bubblewrap's seccomp filter): passed, then closed."""
    mounts: MountPlan | None = None
    """Landlock: the mount namespace the command gets, where the process may make one."""
    top_level: str = ""
    """Why the command may not add, rename or remove entries at the workspace's top level ("" when it may)."""
    copy: _restore.ProtectedCopy | None = None
    """Landlock without a mount namespace: the protected paths as they were, put back after the command."""
    background: bool = False
    """The command went on in the background (`in_background`)."""
    beside: bool = False
    """Another command of the workspace ran beside it: what was put back may be either's doing."""
    put_back: list[str] = field(default_factory=list)
    """What `cleanup()` put back of them, each with what the command had done."""

    def how_to_start(self) -> tuple[list[str], dict[str, Any]]:
        """How to start the command, as `(argv, {"preexec_fn": ..., "pass_fds": ...})` for `subprocess` or
        asyncio's `create_subprocess_exec`: every way a tool starts a command goes through here. Its process dies
        with this one and takes the sandbox's steps (`nbagent.safety._launcher.set_up`), forked from this
        process, or, when this process holds more than `LAUNCH_ABOVE` (forking it would cost more than starting
        a small program), through `nbagent.safety._launcher` started without a fork. Not Linux: as it is."""
        if not sys.platform.startswith("linux"):
            return list(self.argv), {"pass_fds": self.pass_fds}
        spec = (os.getpid(), *self.setup)
        ruleset = self.setup[2]
        if _launching() and not _writable_launcher(self.workspace):
            encoded = marshal.dumps(spec).hex()
            if len(encoded) < _SPEC_LIMIT:
                return ([sys.executable, "-I", "-S", _launcher.PROGRAM, encoded, "--", *self.argv],
                        {"pass_fds": (*self.pass_fds, *((ruleset,) if ruleset >= 0 else ()))})
        command_filter = self.ruleset.command_filter if self.ruleset is not None else None
        return list(self.argv), {"preexec_fn": functools.partial(_launcher.set_up, spec, command_filter),
                                 "pass_fds": self.pass_fds}

    def started(self) -> None:
        """Once the process started: close what was passed to it."""
        for fd in self.pass_fds:
            try:
                os.close(fd)
            except OSError:
                pass
        self.pass_fds = ()

    def in_background(self) -> None:
        """The command goes on in the background: with a copy, what it changes of protected paths is put back
        before every later tool call (`sandbox_restore.check_running`) until `cleanup()`."""
        if self.copy is not None and not self.background:
            self.background = True
            _restore.started(self.copy)

    def stop_leftovers(self, group: int | None = None) -> None:
        """Once the command exited: stop what it left running (Landlock; bubblewrap's PID namespace
        already did): its process group `group` (the pid of the process started, just reaped), where everything
        the command started stays (`CommandFilter`: a chain of processes deeper than the supervisor's rounds,
        a process that cleared its environment), then what carries its marker."""
        if self.marker is None:
            return
        if group is not None:
            try:  # (the group outlives its leader while it has members, so its id is still this command's)
                os.killpg(group, signal.SIGKILL)
            except OSError:
                pass
        stop_marked(self.marker)

    def cleanup(self) -> None:
        """After the command: stop what it left running, undo what it made at protected paths, free what
        was made for it."""
        self.stop_leftovers()
        self.started()
        if self.watched:
            self.removed = remove_created(self.watched)
            self.watched = []
        if self.links:
            self.restored = restore_links(self.links)
            self.links = {}
        if self.copy is not None:
            self.put_back += _restore.ended(self.copy, self.background)
            self.beside = self.copy.shared
            self.copy = None
        if self.ruleset is not None:
            self.ruleset.close()
        if self.tmpdir is not None:
            shutil.rmtree(self.tmpdir, ignore_errors=True)


LAUNCH_ABOVE = 512 << 20
"""Bytes of memory this process holds above which a command is started through `nbagent.safety._launcher`
rather than forked from it: a fork copies the page tables, about 16 ms a GB here (9 ms at 511 MB; under
Landlock twice, as its supervisor forks again), while the launcher costs about 14 ms whatever this process
holds. A notebook's kernel holding a few GB of data would otherwise pay a fork of that size per command."""
SPAWN_VARIABLE = "NBAGENT_SPAWN"
"""`launcher` or `fork`: how every command is started, whatever this process holds (tests; troubleshooting)."""
_SPEC_LIMIT = 100_000
"""Characters of a spec passed as one argument (Linux takes 128 KiB an argument); longer: forked."""


def _writable_launcher(workspace: str) -> bool:
    """Whether what the launcher runs before the sandbox is in place lies in `workspace`, where commands write:
    its interpreter (and the `pyvenv.cfg` beside it or above, which names where the standard library is), the
    standard library, or the launcher's own folder (its modules and their cached bytecode). A kernel whose Python
    environment is in its workspace (a project's `.venv`) then forks its commands, as before: the launcher would
    otherwise run outside the sandbox what an earlier command wrote."""
    if not workspace:
        return False
    top = workspace.rstrip("/") + "/"
    return any((real := os.path.realpath(path)) == workspace or real.startswith(top) for path in _launcher_reads())


def _launcher_reads() -> tuple[str, ...]:
    """Where everything the launcher reads before the sandbox is in place lies: its interpreter (and the folder
    and the one above, where a `pyvenv.cfg` names the standard library), the prefixes its standard library and
    compiled modules come from, and its own folder (test: every module it loads lies under one of these)."""
    here = os.path.dirname(sys.executable)
    return tuple(path for path in (here, os.path.dirname(here), os.path.realpath(sys.executable), sys.base_prefix,
                                   sys.base_exec_prefix, sys.prefix, sys.exec_prefix,
                                   os.path.dirname(_launcher.PROGRAM)) if path)


def _launching() -> bool:
    """Whether to start commands through `nbagent.safety._launcher` (see `LAUNCH_ABOVE`)."""
    chosen = os.environ.get(SPAWN_VARIABLE, "").strip().lower()
    if chosen in ("fork", "launcher"):
        return chosen == "launcher" and bool(sys.executable)
    try:
        with open("/proc/self/statm", "rb") as f:
            resident = int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return False
    return resident > LAUNCH_ABOVE and bool(sys.executable)


# -- protected paths, for both backends ------------------------------------------------------------------

def make_own_folder(ws: Path) -> None:
    """nbagent's own folder, made so that a mount can keep it read-only before nbagent first writes in it."""
    try:
        (ws / ".nbagent").mkdir(exist_ok=True)
    except OSError:
        pass


def protected_names(ws: str | os.PathLike[str]) -> list[str]:
    """What is kept for commands, relative to the workspace `ws`: `PROTECTED_PATHS` at its top level and, where
    this process (the kernel) works in a folder of the workspace below it (a notebook in a sub-folder, `%cd`), in
    that folder too: programs read them from the folder they run in (the debugger's `.pdbrc`, git's `.git`,
    direnv's `.envrc`; a `.pdbrc` in the kernel's sub-folder was found by an outside try)."""
    names = list(PROTECTED_PATHS)
    top = os.path.realpath(ws)
    try:
        here = os.path.realpath(os.getcwd())
    except OSError:  # (its folder was removed)
        return names
    if here.startswith(top.rstrip("/") + "/"):
        folder = os.path.relpath(here, top)
        names += [f"{folder}/{name}" for name in PROTECTED_PATHS]
    return names


def missing_protected(ws: Path) -> list[Path]:
    """The `protected_names` of `ws` that do not exist now (what `remove_created` looks at after a call)."""
    return [ws / rel for rel in protected_names(ws) if not os.path.lexists(ws / rel)]


def remove_created(paths: Iterable[Path]) -> list[str]:
    """Remove what a command created at protected paths that did not exist before it ran (`missing_protected`);
    the paths removed."""
    removed = []
    for path in paths:
        if os.path.lexists(path):
            try:
                _remove(path)
                removed.append(str(path))
            except OSError:
                removed.append(f"{path} (could not be removed)")
    return removed


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink()


def protected_links(ws: Path) -> dict[str, str]:
    """The `PROTECTED_PATHS` of `ws` that are symbolic links, with where each leads. A mount follows a
    link, so what keeps the link itself in place is `restore_links` after the call."""
    found = {}
    for rel in protected_names(ws):
        path = ws / rel
        if path.is_symlink():
            try:
                found[str(path)] = os.readlink(path)
            except OSError:
                continue
    return found


def restore_links(links: dict[str, str]) -> list[str]:
    """Put back each link of `protected_links` that is no longer there as it was; the paths put back."""
    restored = []
    for path, target in links.items():
        try:
            if os.path.islink(path) and os.readlink(path) == target:
                continue
            if os.path.lexists(path):
                _remove(Path(path))
            os.symlink(target, path)
            restored.append(path)
        except OSError:
            restored.append(f"{path} (could not be put back)")
    return restored


def protected_mounts(ws: Path) -> tuple[list[str], list[str]]:
    """What keeps `PROTECTED_PATHS` read-only as a whole under a mount namespace: `(pinned, read_only)`.
    Each protected path that exists is bound read-only over itself (a mount point: it cannot be written,
    removed, renamed away or replaced); each directory between one and the workspace is bound over itself,
    writable (`pinned`), so that it cannot be renamed away either. A link is followed to where it leads,
    when that is inside the workspace."""
    pinned: list[str] = []
    read_only: list[str] = []
    names = [*protected_names(ws), *(os.path.relpath(p, ws) for p in kernel_environments(str(ws)))]
    for rel in names:
        for parent in reversed(Path(rel).parents[:-1]):  # .git for .git/hooks
            where = ws / parent
            if str(where) not in pinned and where.is_dir() and not where.is_symlink():
                pinned.append(str(where))
    for rel in names:
        target = ws / rel
        if target.is_symlink():
            real = os.path.realpath(target)
            if real.startswith(str(ws) + "/") and os.path.exists(real):
                read_only.append(real)
        elif target.exists():
            read_only.append(str(target))
    return pinned, read_only


def kernel_environments(ws: str) -> list[str]:
    """The Python environments this process runs from (its prefix, its base's) that lie inside the workspace `ws`
    (a project's `.venv`): kept read-only for commands, as protected paths are. The kernel, and the person's
    next `python`, `jupyter` or `pip` from it, run what is in them (a `.pth` file in its site-packages runs at
    every start: found by an outside try)."""
    top = ws.rstrip("/") + "/"
    found: list[str] = []
    for prefix in (sys.prefix, sys.exec_prefix, sys.base_prefix):
        real = os.path.realpath(prefix)
        if real.startswith(top) and not any(real == f or real.startswith(f + "/") for f in found):
            found.append(real)
    return found


# -- Landlock -------------------------------------------------------------------------------------------

def landlock_prepared(argv: list[str], *, ws: str, writes: bool, network: bool, readable: list[str],
                      writable: list[str], secret: Iterable[str], hidden: Iterable[str], mounts: bool,
                      long_lived: bool = False) -> Prepared:
    """`argv` ready to start under Landlock. `ws`: the workspace's real path; `writes`: workspace-write
    (else read-only); `writable`: more directories it may write; `secret`: places never shown; `hidden`:
    real paths of what read deny rules protect; `mounts`: the process may make a mount namespace;
    `long_lived`: the command goes on in the background, so without a mount namespace its protected paths
    are not copied but kept read-only, and the top level with them (a put-back at its end, or between calls,
    cannot protect what other programs run from them meanwhile)."""
    ws_path = Path(ws)
    secret = [os.path.realpath(p) for p in secret]
    hidden = [os.path.realpath(p) for p in hidden]
    plan = None
    copy: _restore.ProtectedCopy | None = None
    too_big = ""
    watched: list[Path] = []
    links: dict[str, str] = {}
    read_only: list[str] = []
    if writes:
        if mounts:
            make_own_folder(ws_path)
        watched, links = missing_protected(ws_path), protected_links(ws_path)
        if mounts:
            pinned, bound = protected_mounts(ws_path)
            masked = [p for p in secret + hidden if _inside(p, ws) and os.path.lexists(p)]
            plan = MountPlan(read_only=bound, pinned=pinned, masked=masked)
            secret = [p for p in secret if not _inside(p, ws)]
            hidden = [p for p in hidden if not _inside(p, ws)]
        else:
            # a right on a directory holds for all beneath it: the whole workspace is writable, and protected
            # paths are copied now and put back after the command (`sandbox_restore`); where they hold more
            # than may be copied, they stay read-only and so does the top level above them
            read_only = kernel_environments(ws)  # too big to copy: read-only, and the top level with them
            try:
                if long_lived:
                    raise _Closed
                copy = _restore.take(ws, protected_names(ws))
            except (OSError, _Closed) as exc:
                too_big = (LONG_LIVED if isinstance(exc, _Closed) else
                           f"too large to copy and put back: {exc}" if isinstance(exc, _restore.CopyTooLarge)
                           else str(exc) if isinstance(exc, _restore.NotPutBack)
                           else f"they could not be copied: {exc}")
                read_only += [os.path.join(ws, rel) for rel in protected_names(ws)
                              if os.path.lexists(os.path.join(ws, rel))]
    tmpdir = tempfile.mkdtemp(prefix="nbagent-sandbox-")
    try:
        ruleset = LandlockRuleset(readable=readable, writable=[tmpdir, *writable] if writes else [tmpdir],
                                  devices=_DEVICES, excluded=secret + hidden, network=network, read_only=read_only)
    except BaseException:
        shutil.rmtree(tmpdir, ignore_errors=True)
        if copy is not None:
            _restore.ended(copy)
        raise

    # the command's process takes its mounts, leaves a supervisor outside (what the command leaves behind is
    # adopted and stopped, whatever its environment, when it ends or the kernel dies: read-only commands too, one
    # may still start a process that goes on), then restricts itself (`nbagent.safety._launcher.set_up`)
    setup = (plan.steps if plan is not None else None, True, ruleset.fd, network)

    import uuid

    marker = uuid.uuid4().hex
    env = {MARKER_VARIABLE: marker, "TMPDIR": tmpdir, "TMP": tmpdir, "TEMP": tmpdir}
    top = _closed_top(ws, read_only, secret, hidden, too_big) if writes and plan is None else ""
    return Prepared(list(argv), env=env, setup=setup, workspace=ws, ruleset=ruleset, marker=marker, tmpdir=tmpdir,
                    watched=watched, links=links, mounts=plan, top_level=top, copy=copy)


class _Closed(Exception):
    """The protected paths are not copied for this command: they stay read-only."""


LONG_LIVED = ("the command goes on in the background, and copying them to put them back after it cannot protect "
              "what other programs (git, an editor) run from them while it runs")


def _inside(path: str, ws: str) -> bool:
    return path == ws or path.startswith(ws.rstrip("/") + "/")


def _closed_top(ws: str, read_only: list[str], secret: list[str], hidden: list[str], too_big: str = "") -> str:
    """Why the top level is not writable, in words ("" when it is)."""

    def tops(paths: Iterable[str]) -> list[str]:
        return sorted({os.path.relpath(p, ws).split("/")[0] for p in paths if _inside(p, ws) and p != ws})

    if any(p == ws for p in secret + hidden):
        return "the workspace itself is hidden from commands"
    parts = []
    kept = f"protected paths, kept read-only: {too_big}" if too_big else "protected paths, kept read-only"
    environments = tops(kernel_environments(ws))
    for names, what in (([n for n in tops(read_only) if n not in environments], kept),
                        (environments, "the Python environment the kernel runs from, kept read-only"),
                        (tops(hidden), "hidden by a read deny rule, or holding what one hides"),
                        (tops(secret), "holding a credential store or Jupyter's runtime folder")):
        if names:
            parts.append(f"{', '.join(names)} ({what})")
    if not parts:
        return ""
    return (f"the top level holds {' and '.join(parts)}, and Landlock, with no mount namespace here, gives a "
            "folder's rights to everything in it")
