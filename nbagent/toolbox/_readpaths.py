"""Where the paths a read-only command names lead: inside the workspace, not protected, no link out.

Reads: the workspace's directory entries and symbolic links, which the model, a cloned repository or a
download could have made. What could happen: a path that looks inside but leads out (`notes -> /etc`), or a
link that a following option (`ls -L`, `grep -R`, `find -L`) would walk into a home directory. What stops
it: every path is checked once links are resolved (`os.path.realpath`), and as written, against the
workspace and the deny rules on reading; a following option is allowed only while no link in the
workspace leads out, looked for each time over at most `MAX_LINK_SCAN` entries (more, or an entry that
cannot be read: assume one does).
"""

from __future__ import annotations

import os
from typing import Callable

from ._workspace import Workspace

__all__ = ["DeniedCheck", "MAX_LINK_SCAN", "has_outward_link", "path_problem"]

DeniedCheck = Callable[[str, str], bool]
"""`f(relative path, real absolute path) -> bool`: whether a deny rule protects that path from reading."""

MAX_LINK_SCAN = 20_000
"""Entries looked at when checking a workspace for symbolic links that lead out (more: assume one does)."""


def path_problem(value: str, workspace: Workspace, read_denied: DeniedCheck | None) -> str | None:
    if not value or value == "-":
        return None
    if value.startswith("~"):
        return f"{value!r} is in a home directory, outside the workspace"
    root = str(workspace.root)
    joined = value if os.path.isabs(value) else os.path.join(root, value)
    real = os.path.realpath(joined)
    rel = workspace.relative(real)
    if rel is None:
        return f"{value!r} is outside the workspace"
    lexical_rel = workspace.relative(os.path.normpath(joined))
    if read_denied is not None and (read_denied(rel, real) or (lexical_rel is not None and read_denied(lexical_rel, real))):
        return f"{value!r} is protected by a deny rule"
    return None


def has_outward_link(workspace: Workspace, limit: int = MAX_LINK_SCAN) -> bool:
    """Whether some symbolic link in the workspace leads out of it (True too when there are too many
    entries to look at them all)."""
    seen = 0
    stack = [str(workspace.root)]
    while stack:
        directory = stack.pop()
        try:
            with os.scandir(directory) as it:
                for entry in it:
                    seen += 1
                    if seen > limit:
                        return True
                    try:
                        if entry.is_symlink():
                            if workspace.relative(os.path.realpath(entry.path)) is None:
                                return True
                        elif entry.is_dir(follow_symlinks=False):
                            stack.append(entry.path)
                    except OSError:
                        return True
        except OSError:
            continue
    return False
