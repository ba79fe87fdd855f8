"""@-mentions of workspace files in the panel's box: `@data/sales.csv` sends the file's name, size and head.

A mention is `@` and a path with an extension (`@notes.md`, `@data/sales.csv`) or a folder in it; a mention
whose first part is a variable of the kernel (`@df.columns`) is the variable's, not a file's.

What it reads, who could have written it: the path (typed by the person, but pasted text can hold anything)
and the file (anyone who can write the workspace, the model included). What stops harm: the same checks
`read_file` makes, at the same choke points: the workspace's `resolve` (inside the workspace, no symbolic link
leading out, nothing out of reach such as nbagent's trust store) and `open_read`; the session's deny rules on
reading (`deny: read_file(.env)`, through `read_denied_check`, the check the file tools use); the head is
screened for secrets as `read_file` screens its lines (`screen_lines`: a key wrapped over lines is found); a
binary file is named with its size only. What is sent is data, fenced, under the person's words.
"""

from __future__ import annotations

import os
import re
from types import SimpleNamespace
from typing import Any

from nbagent.calls.permissions import parse_rule
from nbagent.safety.gate import screen_lines
from nbagent.toolbox import Workspace, WorkspaceError
from nbagent.toolbox._binding import read_denied_check  # the file tools' own check of the deny rules

__all__ = ["HEAD_CHARS", "HEAD_LINES", "file_mentions", "file_summary"]

HEAD_LINES = 20
HEAD_CHARS = 4000
MAX_FILES = 6
_FILE = re.compile(r"(?<![\w@])@((?:\.{1,2}/)?[\w-][\w.\-]*(?:/[\w.\-]+)*/?)")


def file_mentions(words: str, namespace: dict[str, Any]) -> list[str]:
    """The paths the words mention as files (in order, once each, at most `MAX_FILES`)."""
    out: list[str] = []
    for found in _FILE.finditer(words):
        path = found.group(1).rstrip(".")  # "see @notes.md." ends a sentence
        if "/" not in path and "." not in path:
            continue  # @total: a variable
        if re.fullmatch(r"[A-Za-z_]\w*", path.split(".")[0]) and path.split(".")[0] in namespace and "/" not in path:
            continue  # @df.columns: the variable's
        if path not in out:
            out.append(path)
    return out[:MAX_FILES]


def _size(n: int) -> str:
    for unit in ("bytes", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n} {unit}" if unit == "bytes" else f"{n:.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    return f"{n} bytes"  # pragma: no cover


def file_summary(path: str, workspace: str | os.PathLike[str], rules: Any = ()) -> tuple[str, str | None]:
    """(a line naming the file: its path, size, or why it is not sent; its head, screened, or None)."""
    try:
        ws = Workspace(workspace)
        resolved = ws.resolve(path)
    except WorkspaceError as exc:
        return f"@{path}: not sent: {exc}", None
    denied = read_denied_check(SimpleNamespace(rules=[parse_rule(r) for r in rules or ()]))
    if denied is not None and (denied(resolved.rel, str(resolved.path))
                               or denied(os.path.normpath(path), str(resolved.path))):
        return f"@{path}: not sent: a deny rule on reading protects it", None
    try:
        if os.path.isdir(resolved.path):
            names = sorted(os.listdir(resolved.path))
            shown = ", ".join(names[:40]) + (f" and {len(names) - 40} more" if len(names) > 40 else "")
            return f"@{path}: a folder of the workspace ({resolved.rel}), {len(names)} entries: {shown}", None
        with ws.open_read(resolved) as f:
            size = os.fstat(f.fileno()).st_size
            head = f.read(HEAD_CHARS)
    except (WorkspaceError, OSError) as exc:
        return f"@{path}: not sent: {exc}", None
    if b"\x00" in head:
        return f"@{path}: {resolved.rel}, {_size(size)}, a binary file (its content is not sent)", None
    lines = head.decode("utf-8", errors="replace").splitlines()[:HEAD_LINES]
    screened = screen_lines(lines)
    whole = len(lines) >= HEAD_LINES or len(head) >= HEAD_CHARS
    what = f"its first {len(lines)} lines" if whole else "all of it"
    return f"@{path}: {resolved.rel}, {_size(size)}; {what}:", "\n".join(screened)
