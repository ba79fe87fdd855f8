"""Deny rules on reading, held for the `python` tool's code too.

The `python` tool runs code in the kernel itself, where no OS sandbox can stand. While a call's code
runs, an audit hook (PEP 578) watches the thread running it: opening a file that a read deny rule
protects (`deny: read_file(.env)`) raises `PermissionError`, and so does starting another program
(`subprocess`, `os.system`, `os.exec*`), whose reads the hook cannot see. Threads the code starts itself
are not watched: this narrows what code can reach by accident or by a model's plain attempt, it is not
a wall (the README says so).

One hook is installed for the process, the first time it is needed (audit hooks cannot be removed); it
costs a dictionary look-up per audited event in every other thread.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from pathlib import Path
from typing import Any, Callable, Iterator

__all__ = ["guard_reads"]

_watched: dict[int, tuple[Path, Callable[[str, str], bool]]] = {}
_installed = False
_install_lock = threading.Lock()
_SPAWN_EVENTS = {"subprocess.Popen", "os.system", "os.exec", "os.posix_spawn", "os.spawn", "os.fork", "os.forkpty",
                 "pty.spawn"}


def _hook(event: str, args: tuple[Any, ...]) -> None:
    if not _watched:
        return
    watched = _watched.get(threading.get_ident())
    if watched is None:
        return
    if event == "open":
        path = args[0] if args else None
        if isinstance(path, int) or path is None:
            return
        _check_path(os.fsdecode(path), *watched)
    elif event in _SPAWN_EVENTS:
        raise PermissionError(f"{event}: deny rules protect some files here, and a program this code starts could "
                              "read them; use the shell tool for commands")


def _check_path(path: str, root: Path, denied: Callable[[str, str], bool]) -> None:
    real = os.path.realpath(path)
    try:
        rel = Path(real).relative_to(root).as_posix()
    except ValueError:
        rel = real
    spelled = os.path.normpath(path)
    if denied(rel, real) or (not os.path.isabs(spelled) and denied(spelled, real)):
        raise PermissionError(f"{path}: a deny rule protects this file from being read")


@contextlib.contextmanager
def guard_reads(root: Path, denied: Callable[[str, str], bool] | None) -> Iterator[None]:
    """While the block runs in this thread, files `denied(rel, real)` protects cannot be opened."""
    global _installed
    if denied is None:
        yield
        return
    if not _installed:
        with _install_lock:
            if not _installed:
                sys.addaudithook(_hook)
                _installed = True
    ident = threading.get_ident()
    previous = _watched.get(ident)
    _watched[ident] = (Path(os.path.realpath(root)), denied)
    try:
        yield
    finally:
        if previous is None:
            _watched.pop(ident, None)
        else:
            _watched[ident] = previous
