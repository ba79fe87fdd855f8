"""What the sandbox refused a command, and why, in words that match what happened.

A refused write shows in the command's errors as "Permission denied" (Landlock), "Read-only file
system" or "Device or resource busy" (a read-only mount, a mount point), and the program usually names
the path. `sandbox_refusal` picks that path out and says which wall it met: a protected path, the
workspace's top level where the sandbox cannot let new entries be made, a place outside the workspace.

Reads: the command's error output, which the command itself wrote (it may name any path, or lie). It
only chooses which explanation to show; the path is compared with the workspace as text, and only a
top-level name of the workspace is looked up (whether it exists), never opened.
"""

from __future__ import annotations

import os
import re
from typing import Iterable

from ..safety.protected import PROTECTED_PATHS

__all__ = ["WRITE_SIGNS", "sandbox_refusal"]

WRITE_SIGNS = ("Read-only file system", "Permission denied", "Operation not permitted", "Device or resource busy")
"""How a refused write reads in a program's errors."""
_NOT_PERMITTED = "Operation not permitted"
"""EPERM: a refused write, or what the sandbox refuses every command (tracing, another process's limits)."""
_LINK_SIGN = "Invalid cross-device link"
"""A hard link refused across a mount or by Landlock (also what two file systems give: said only with a path)."""
_QUOTED = re.compile(r"""['"‘“]([^'"’”\n]{1,400})['"’”]""")
_BEFORE_SIGN = re.compile(r": ([^:\n]{1,400}): (?:" + "|".join(WRITE_SIGNS) + ")")
_PROTECTED_WORDS = ", ".join(PROTECTED_PATHS[:3]) + ", configuration that runs code"


def sandbox_refusal(text: str, *, sandbox: str, workspace: str | None, top_level: str = "",
                    hidden: Iterable[str] = ()) -> str | None:
    """The note for a command whose errors show a refused write, or None. `sandbox`: the policy it ran
    under; `workspace`: its real path (None: say only what the walls are); `top_level`: why new entries at
    its top level are refused there ("" when they are not); `hidden`: real paths read deny rules hide."""
    lines = [line for line in text.splitlines() if any(sign in line for sign in (*WRITE_SIGNS, _LINK_SIGN))]
    if not lines:
        return None
    if sandbox == "read-only":
        if all(_NOT_PERMITTED in line and not any(s in line for s in WRITE_SIGNS if s != _NOT_PERMITTED)
               for line in lines):  # EPERM alone: a write, or what no sandboxed command may do (`CommandFilter`)
            return ("refused by the read-only sandbox (it ran as a command that only reads): it writes nothing, "
                    "traces no other process and changes no other process's limits; writing needs a command that "
                    "is not auto-allowed, so that the person can approve it")
        return ("stopped by the read-only sandbox (it ran as a command that only reads): writing needs a "
                "command that is not auto-allowed, so that the person can approve it")
    if workspace is not None:
        walls = _Walls(os.path.realpath(workspace), top_level, tuple(hidden))
        for line in lines[:50]:
            walls.add(line)
        if walls.found:
            return f"stopped by the sandbox ({sandbox}): " + "; ".join(walls.notes())
    if not any(sign in line for line in lines for sign in WRITE_SIGNS):
        return None
    rest = f" (but no new entry at its top level here: {top_level})" if top_level else ""
    return (f"refused by the sandbox ({sandbox}): it lets a command write in the workspace{rest}, never in "
            f"protected paths ({_PROTECTED_WORDS}) or outside it, use the network only where allowed, and never "
            "trace another process or change another process's limits")


_NOTES = {
    "protected": "{paths} {is} in protected paths ({names}: configuration that can run programs, or nbagent's own "
                 "records), which stay read-only and cannot be renamed away or replaced",
    "new_top": "{paths} would be new entries at the workspace's top level, which this sandbox cannot add: {top}. "
               "Files and folders already there can be written, and everything below them: make it inside a folder "
               "that is already there, or with write_file (which asks as usual, and makes missing folders)",
    "top": "{paths} {is} at the workspace's top level, where this sandbox cannot rename or remove entries: {top}",
    "hidden": "{paths} {is} hidden by a read deny rule",
    "near_hidden": "{paths} {is} in a folder holding files a read deny rule hides, where Landlock cannot let a command "
                   "add entries",
    "outside": "{paths} {is} outside the workspace: a command writes in the workspace and in its own temporary "
               "folder ($TMPDIR), nowhere else, and reads nothing of yours outside them but system and runtime paths",
}


class _Walls:
    """The refused paths found so far, by the wall each one met."""

    def __init__(self, ws: str, top_level: str, hidden: tuple[str, ...]) -> None:
        self.ws, self.top_level, self.hidden = ws, top_level, hidden
        self.found: dict[str, list[str]] = {}
        self.names: list[str] = []

    def add(self, line: str) -> None:
        linking = not any(sign in line for sign in WRITE_SIGNS)  # only a hard link refused: protected or hidden
        for path in _paths(line):
            kind, shown = self._kind(path)
            if kind is not None and (not linking or kind in ("protected", "hidden")):
                if shown not in self.found.setdefault(kind, []):
                    self.found[kind].append(shown)
                return

    def notes(self) -> list[str]:
        out = []
        for kind, paths in self.found.items():
            one = len(paths) == 1
            if kind == "new_top" and one:
                template = _NOTES[kind].replace("would be new entries", "would be a new entry")
            else:
                template = _NOTES[kind]
            shown = ", ".join(paths[:5]) + (f" and {len(paths) - 5} more" if len(paths) > 5 else "")
            out.append(template.format(paths=shown, top=self.top_level, names=", ".join(self.names),
                                       **{"is": "is" if one else "are"}))
        return out

    def _kind(self, path: str) -> tuple[str | None, str]:
        """The wall `path` met, and how to show it."""
        ws = self.ws
        where = os.path.normpath(path if os.path.isabs(path) else os.path.join(ws, path))
        if where != ws and not where.startswith(ws.rstrip("/") + "/"):
            return (None if where.startswith(("/proc/", "/sys/", "/dev/")) else "outside"), path
        if any(where == h or where.startswith(h + "/") for h in self.hidden):
            return "hidden", path
        real = os.path.realpath(where)  # a link the command made to a protected path
        if real != where and real.startswith(ws.rstrip("/") + "/"):
            where, path = real, f"{path} (a link to {os.path.relpath(real, ws)})"
        parts = os.path.relpath(where, ws).split("/")
        if parts[0] in PROTECTED_PATHS:
            if parts[0] not in self.names:
                self.names.append(parts[0])
            return "protected", path
        if len(parts) == 1 and self.top_level:
            return ("top" if os.path.lexists(where) else "new_top"), path
        folder = os.path.dirname(where)
        if any(h.startswith(folder + "/") for h in self.hidden):
            return "near_hidden", path
        return None, path


def _paths(line: str) -> list[str]:
    """The paths a line of errors names: quoted ones first, then the one just before ": Permission denied"."""
    found = [m.group(1).strip() for m in _QUOTED.finditer(line)]
    found += [p for m in _BEFORE_SIGN.finditer(line) if " " not in (p := m.group(1).strip()) or p.startswith("/")]
    return [p for p in found if p and not p.startswith(("[Errno", "Errno")) and "\x00" not in p]
