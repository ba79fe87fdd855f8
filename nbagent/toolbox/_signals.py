"""How a command and everything it started are stopped: signals to its process group and to every process
descended from it (read from /proc), and a child that Linux kills when the kernel dies without its exit handlers.
Used by `shell` (a command that times out or is stopped) and by the background processes of `process`.

Every command a tool starts, foreground or background, is started as its `Prepared.how_to_start()` says (it
dies with the kernel: `nbagent.safety._launcher`) and held with
`stopped_at_exit` while it runs: one exit handler (the kernel shutting down, a script's `sys.exit`) kills each
one still running with its whole family, whichever sandbox backend started it (bubblewrap's
`--die-with-parent` takes its namespace along; under Landlock the command's supervisor and everything it
adopted would otherwise go on after the interpreter)."""

from __future__ import annotations

import atexit
import os
import signal
import weakref
from typing import Any

from ..safety.supervisor import process_fields

__all__ = ["descendants", "kill_family", "kill_family_now", "kill_group", "signal_all", "signal_family",
           "stopped_at_exit"]

_HELD: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()
"""Commands running now (`stopped_at_exit`), each with what to do for it at exit (None: kill its family)."""


def stopped_at_exit(proc: Any, stop: Any = None) -> None:
    """Hold `proc` (an asyncio or subprocess process) until it ends: if the interpreter exits first, the exit
    handler SIGKILLs its process group and every process descended from it, or calls `stop()` when given
    (a background process also frees what its sandbox made; held weakly, as `proc` is)."""
    _HELD[proc] = None if stop is None else weakref.WeakMethod(stop)


def kill_family_now(proc: Any) -> bool:
    """SIGKILL to a command's process group and every process descended from it, at once, if it has not ended
    (an exit handler cannot wait); whether it was still running."""
    if getattr(proc, "returncode", None) is not None:
        return False
    kill_family(proc)
    return True


def kill_family(proc: Any, family: list[int] = ()) -> None:  # type: ignore[assignment]
    """SIGKILL to every process descended from the command (and to `family`, found before, each while it is the
    same process), again until a look finds none left (at most `SWEEPS` looks), and only then to its process
    group, the command among it.

    The group is what ends a sandboxed command whole: nothing it starts can leave it (`setsid` and `setpgid` do
    nothing under `nbagent.safety.sandbox_linux.CommandFilter`), and the kernel kills a group at once, forks in
    flight included, where any list of pids read from /proc is stale against a process that forks and exits
    every tenth of a millisecond. The looks before it keep the command the caller started alive meanwhile:
    under Landlock it is the supervisor, a subreaper, to which what a killed process had just forked comes;
    under bubblewrap, its namespace's first process is among those killed, and all else with it; without a
    sandbox they are what reaches a process that started a session of its own."""
    started = getattr(family, "started", {})
    for pid in family:
        if started.get(pid, -1) == _started(pid):  # the same process: a pid ended since may be another's now
            _kill(pid)
    for _ in range(SWEEPS):
        found = descendants(proc.pid, living=True)
        if not found:
            break
        for pid in found:
            _kill(pid)
    kill_group(proc, signal.SIGKILL)
    _kill(proc.pid)


SWEEPS = 200
"""The most looks `kill_family` takes for what is left of a command's family (each one kills all it finds)."""


class _Family(list):
    """Pids found in a command's family, each with when it started (`started`): a pid read some time ago is
    signalled again only while it is the same process (pids are reused, and a process that forks fast goes
    through all of them in seconds)."""

    def __init__(self, pids: list[int], started: dict[int, int] | None = None) -> None:
        super().__init__(pids)
        self.started = dict(started or {})
        for pid in pids:
            if pid not in self.started:
                self.started[pid] = _started(pid)


def _started(pid: int) -> int:
    """When process `pid` started (clock ticks after boot), or -2 when there is none."""
    fields = process_fields(pid)
    try:
        return int(fields[19]) if fields is not None else -2
    except (ValueError, IndexError):
        return -2


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except OSError:
        pass


@atexit.register
def _stop_everything_held() -> None:  # the kernel (or the script) is exiting
    for proc, stop in list(_HELD.items()):
        try:
            method = stop() if stop is not None else None
            if method is not None:
                method()  # its own stop (which also frees what its sandbox made, ended or not)
            else:
                kill_family_now(proc)
        except Exception:  # pragma: no cover  (an exit handler must not stop the others)
            pass


def kill_group(proc: Any, sig: int) -> None:
    """`sig` to a command's process group (it was started in a group of its own); to the process alone
    where the group is gone."""
    try:
        os.killpg(proc.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass
    except OSError:  # pragma: no cover
        try:
            proc.sendsignal_all(sig)
        except ProcessLookupError:
            pass


def signal_family(proc: Any, sig: int, family: list[int] | None = None) -> list[int]:
    """`sig` to a command's process group and to every process descended from it, and return those: a
    sandbox's PID namespace runs in a session of its own, outside the group, and outlives a killed group
    when it was still being set up. The first time (`family` None) the group is stopped while its family
    is read, so nothing forks meanwhile; later (SIGKILL after a grace period) `family` is what was found
    then, with what has appeared since."""
    if family is None:
        signal_all(proc, signal.SIGSTOP)
        family = _Family(descendants(proc.pid))
        signal_all(proc, sig, family)
        signal_all(proc, signal.SIGCONT, family)
        return family
    family = _Family([*family, *(pid for pid in descendants(proc.pid) if pid not in family)],
                     getattr(family, "started", None))
    if sig == signal.SIGKILL:
        kill_family(proc, family)
    else:
        signal_all(proc, sig, family)
    return family


def signal_all(proc: Any, sig: int, family: list[int] = ()) -> None:  # type: ignore[assignment]
    """`sig` to the process group, then to each process of `family` (descendants found beforehand)."""
    kill_group(proc, sig)
    for pid in family:
        try:
            os.kill(pid, sig)
        except OSError:
            pass


def descendants(root: int, *, living: bool = False) -> list[int]:
    """Every process descended from `root` (read from /proc; empty where there is none); `living`: not those
    that have ended and wait for their parent to collect them (a zombie has no children left)."""
    children: dict[int, list[int]] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return []
    for entry in entries:
        fields = process_fields(entry) if entry.isdigit() else None
        try:
            ppid = int(fields[1])  # type: ignore[index]
        except (TypeError, ValueError, IndexError):
            continue
        if living and fields[0] in (b"Z", b"X"):
            continue
        children.setdefault(ppid, []).append(int(entry))
    found: list[int] = []
    todo = [root]
    while todo:
        for child in children.get(todo.pop(), ()):
            found.append(child)
            todo.append(child)
    return found
