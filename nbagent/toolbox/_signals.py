"""How a command and everything it started are stopped: signals to its process group and to every process
descended from it (read from /proc), and a child that Linux kills when the kernel dies without its exit handlers.
Used by `shell` (a command that times out or is stopped) and by the background processes of `process`."""

from __future__ import annotations

import os
import signal
from typing import Any

__all__ = ["descendants", "dies_with_us", "kill_group", "signal_all", "signal_family"]


def dies_with_us(then: Any) -> Any:
    """A preexec function that asks Linux to SIGKILL the child if this process dies without running its exit
    handlers (a kernel killed outright)."""
    try:
        import ctypes

        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):  # not Linux
        return then

    def preexec() -> None:
        prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
        if then is not None:
            then()

    return preexec


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
        family = descendants(proc.pid)
        signal_all(proc, sig, family)
        signal_all(proc, signal.SIGCONT, family)
        return family
    family = family + [pid for pid in descendants(proc.pid) if pid not in family]
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


def descendants(root: int) -> list[int]:
    """Every live process descended from `root` (read from /proc; empty where there is none)."""
    children: dict[int, list[int]] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return []
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                ppid = int(f.read().rsplit(b")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    found: list[int] = []
    todo = [root]
    while todo:
        for child in children.get(todo.pop(), ()):
            found.append(child)
            todo.append(child)
    return found
