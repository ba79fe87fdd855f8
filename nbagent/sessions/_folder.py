"""Where stored conversations live, what they are called, and the format version their headers carry.

Ids are checked (`check_id`) before they build a path: a stored file or a person's `--resume ID` could
name anything, and only letters, digits, `-`, `_` and `.` (never `..` alone, never a path) reach the
filesystem.
"""

from __future__ import annotations

import os
import re
import secrets as _random
import time
from pathlib import Path

__all__ = ["FORMAT", "ID", "SessionError", "check_id", "new_session_id", "sessions_dir"]

FORMAT = 1
"""The store's format version, written in every header."""
ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,80}$")


class SessionError(ValueError):
    """A session cannot be found, read or written (the message says which and why)."""


def sessions_dir(workspace: str | os.PathLike[str]) -> Path:
    return Path(workspace) / ".nbagent" / "sessions"


def new_session_id() -> str:
    """Sortable by time, unique across kernels: `20261201-051530-a1b2c3`."""
    return time.strftime("%Y%m%d-%H%M%S", time.localtime()) + "-" + _random.token_hex(3)


def check_id(session_id: str) -> str:
    if not isinstance(session_id, str) or not ID.match(session_id) or session_id.endswith((".jsonl", ".d")):
        raise SessionError(f"{session_id!r} is not a session id (letters, digits, '-', '_', '.')")
    return session_id


def inside(path: Path, folder: Path) -> Path:
    """The real path of `path`, which must stay inside `folder` (no link or name leads out)."""
    real, top = os.path.realpath(path), os.path.realpath(folder)
    if not real.startswith(top.rstrip(os.sep) + os.sep):
        raise SessionError(f"{path} leads outside {folder} (a symbolic link?), so it is not read")
    return Path(real)
