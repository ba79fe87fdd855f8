"""What a sandboxed command leaves running, without a PID namespace (the Landlock backend): `supervise_command`.

The process the caller started forks once more: the command goes on in the new process, and the first stays
outside the sandbox as a subreaper (orphans come to it, not to init). It stops them all when the command exits,
and when the process that started it dies however it dies (its death signal is one it catches). The command
cannot signal it (Landlock's signal scoping), trace it or change its limits (`sandbox_linux.CommandFilter`).

It reads nothing anyone else wrote but its own list of children in /proc.
"""

from __future__ import annotations

import ctypes
import os
import signal

__all__ = ["STARTER_GONE", "process_fields", "supervise_command"]

_LIBC = ctypes.CDLL(None, use_errno=True) if os.name == "posix" else None
_PR_SET_PDEATHSIG, _PR_SET_CHILD_SUBREAPER = 1, 36


def supervise_command() -> None:
    """In the child, before the ruleset: fork once more. The command goes on in the new process (the
    function returns there); the process the caller started stays outside the sandbox as a subreaper and
    never returns: every process the command leaves behind (`setsid`, a double fork, a cleared
    environment, which the marker sweep cannot see) is adopted by it instead of by init, and once the
    command exits it stops them all, then exits as the command did. It also dies with the process that
    started it (a kernel killed outright, whose exit handlers never run) and takes them all along: its
    death signal from that process (PR_SET_PDEATHSIG) is `STARTER_GONE`, which it catches. The command
    cannot signal it (Landlock's signal scoping, ABI 6; before that, a command that sends it stops only
    itself) and dies with it (PR_SET_PDEATHSIG)."""
    if _LIBC is None or _LIBC.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        return  # no subreaper: the marker sweep alone stops what is left
    starter = os.getppid()
    command = os.fork()
    if command == 0:
        _LIBC.prctl(_PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)
        _LIBC.prctl(_PR_SET_PDEATHSIG, 9, 0, 0, 0)
        return
    _supervise(command, starter)


STARTER_GONE = signal.SIGUSR1
"""The supervisor's death signal from the process that started it (`supervise_command`); on it, the
supervisor stops the command and everything it adopted, then exits as if killed."""


def _supervise(command: int, starter: int) -> None:
    me = os.getpid()
    try:  # opened now, before the command can do anything: what it adopted is read from it, no file opened later
        children = os.open(f"/proc/{me}/task/{me}/children", os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        children = -1

    def starter_gone(*_: object) -> None:  # the kernel is gone: so is everything its command started
        try:
            _stop_adopted(me, children)
        finally:  # then the whole process group, this process with it: everything the command started is in it
            os.killpg(0, signal.SIGKILL)  # (`CommandFilter`), however deep a chain `_stop_adopted` took link by link
            os._exit(128 + signal.SIGKILL)

    try:
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT):
            signal.signal(sig, signal.SIG_IGN)  # stopping a call signals the command's whole family: it acts
        signal.signal(STARTER_GONE, starter_gone)  # on it, and this process outlives it only to clean up
        _LIBC.prctl(_PR_SET_PDEATHSIG, STARTER_GONE, 0, 0, 0)  # (it was SIGKILL, which cannot be caught)
        if os.getppid() != starter:  # gone before the death signal was changed
            starter_gone()
        null = os.open("/dev/null", os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)  # the command's pipes close when the command's own processes close them
        if children > 3:
            os.closerange(3, children)  # every descriptor but the list of children
        os.closerange(max(3, children + 1), 1 << 20)
        status = 0
        while True:
            pid, got = os.waitpid(-1, 0)
            if pid == command:
                status = got
                break
        _stop_adopted(me, children)
    except BaseException:
        try:  # whatever failed, what the command left is still stopped before this process goes
            _stop_adopted(me, children)
        finally:
            os._exit(126)
    if os.WIFSIGNALED(status):
        signal.signal(os.WTERMSIG(status), signal.SIG_DFL)
        os.kill(os.getpid(), os.WTERMSIG(status))
    os._exit(os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else 128 + os.WTERMSIG(status))


ROUNDS = 10_000
"""Rounds of `_stop_adopted` at most (each stops the children seen then; a chain of processes loses one link a
round). What a chain deeper than that leaves is in the command's process group, which the supervisor kills when
the kernel is gone and the kernel kills when the command has ended (`Prepared.stop_leftovers`)."""


def _stop_adopted(me: int, fd: int = -1) -> None:
    """SIGKILL every child of `me` (what it adopted), until none is left (the children of one it stops
    become its children in turn), at most `ROUNDS` times; `fd`: `me`'s list of children, open."""
    for _ in range(ROUNDS):
        children = _children(me, fd)
        if not children:
            break
        for pid in children:
            try:
                os.kill(pid, 9)
            except OSError:
                pass
        for _ in children:
            try:
                os.waitpid(-1, 0)
            except ChildProcessError:
                break


def _children(parent: int, fd: int = -1) -> list[int]:
    try:  # the kernel's own list (CONFIG_PROC_CHILDREN; the process is single-threaded, so its thread is itself)
        if fd >= 0:
            return [int(pid) for pid in os.pread(fd, 1 << 22, 0).split()]
        with open(f"/proc/{parent}/task/{parent}/children", "rb") as f:
            return [int(pid) for pid in f.read().split()]
    except OSError:
        pass
    found = []
    for entry in os.listdir("/proc"):
        fields = process_fields(entry) if entry.isdigit() else None
        if fields is not None and len(fields) > 1 and fields[1] == str(parent).encode():
            found.append(int(entry))
    return found


def process_fields(pid: int | str) -> list[bytes] | None:
    """The fields of `/proc/<pid>/stat` after the command's name (its state first, then its parent, ... its
    start time at index 19), or None when there is no such process. The name, in brackets, may hold anything."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return None
