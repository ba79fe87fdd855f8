"""File tools, confined to the workspace: read_file, list_files, grep (read-only); write_file, edit_file.

The five tools are made together (`make_file_tools`), each in the module of its seam: `read_file` and
`list_files` here, `grep` in `_grep` (a worker process), `write_file` and `edit_file` in `_edits`
(changes, diffs, protected configuration); how they read bytes is `_filetext`.

A deny rule on reading a file (`deny: read_file(.env)`) holds here too: `grep` skips it, `edit_file`
refuses it (its diff and messages would show what it holds), `write_file` replaces it without a diff.

Every path goes through `Workspace.resolve` (see `_workspace`): a path outside the workspace is refused
with a clear message whatever the mode, rules or approvals. Rule patterns for these tools are path globs
relative to the workspace (`write_file(notebooks/**)`, `deny: read_file(.env)`; see
`nbagent.calls.permissions.path_rule_matcher`); `grep` also skips files that a deny rule of `read_file` or
`grep` protects, and `list_files` hides what a deny rule of `list_files` covers. `write_file` and
`edit_file` count as file edits for the `acceptEdits` mode, except for files of a kind that runs or
configures programs (`nbagent.safety.protected.write_reason`; see `_edits`): a write there always asks,
whatever the mode or grant. No tool here reaches the places the sandbox hides (`nbagent.safety.reach`), and
names that are not plain are shown quoted with escapes (`_filetext.shown_path`), one entry a line.
"""

from __future__ import annotations

import os
import re
import stat as stat_module
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field

from ..context import ToolContext
from ..messages import TextBlock, ToolResult
from ..reprs import short_line as short
from ..safety.gate import screen_lines
from ..tools.definition import Tool
from ..tools.paths import glob_regex, match_path, path_rule_matcher
from ..tools.results import error_result, image_result, sniff_image_type
from ._binding import Binding
from ._edits import make_edit_tools
from ._filetext import (
    MAX_LINE_CHARS, MAX_LIST_SCAN, SNIFF_BYTES, binary_lines, count_lines, human_size, looks_binary,
    shown_path,
)
from ._grep import make_grep_tool
from ._workspace import Workspace, WorkspaceError

__all__ = ["FileContent", "make_file_tools"]

MAX_READ_CHARS = 100_000
"""The most text one read_file call returns (the model sees less once results are cut)."""
MAX_COUNT_BYTES = 64 * 1024 * 1024
"""Files up to this size get their lines counted ("lines 1-2000 of 51,234")."""
MAX_IMAGE_BYTES = 20 * 1024 * 1024
_CONTEXT_LINES = 16
"""Lines before and after those shown that read_file screens them with (a key wrapped over the edge)."""

# parameter types made once: a `Field` made in each call of a tool factory would rebuild its model (tools/schemas.py)
_READ_LIMIT = Annotated[int, Field(ge=1, le=10_000)]

_BINARY_HINTS = {
    ".parquet": "pandas.read_parquet", ".feather": "pandas.read_feather", ".xlsx": "pandas.read_excel",
    ".xls": "pandas.read_excel", ".pkl": "pandas.read_pickle", ".pickle": "pickle.load", ".npy": "numpy.load",
    ".npz": "numpy.load", ".h5": "pandas.read_hdf", ".hdf5": "h5py", ".sqlite": "sqlite3", ".db": "sqlite3",
    ".zip": "zipfile", ".gz": "gzip.open", ".pdf": "a PDF library",
}


@dataclass(slots=True)
class FileContent:
    """What read_file read (`details` of its result)."""

    path: str
    text: str
    first_line: int
    last_line: int
    total_lines: int | None


def make_file_tools(binding: Binding) -> dict[str, Tool]:
    """read_file, list_files, grep, write_file and edit_file, working in the binding's workspace."""
    root = binding.workspace.root if binding.workspace is not None else None
    path_matcher = path_rule_matcher("path", root)

    # -- read_file -----------------------------------------------------------------------------------------
    def read_file(
        path: str,
        offset: int = 1,
        limit: _READ_LIMIT = 2000,
        ctx: ToolContext = None,  # type: ignore[assignment]
    ) -> ToolResult:
        """Read a text file in the workspace; lines come numbered. Images (PNG, JPEG, GIF, WebP) are shown.

        Args:
            path: the file, relative to the workspace.
            offset: the line to start at (1 is the first line; -50 starts 50 lines before the end).
            limit: how many lines to read at most.
        """
        try:
            ws = binding.workspace_for(ctx)
            resolved = ws.resolve(path)
            with ws.open_read(resolved) as f:
                size = os.fstat(f.fileno()).st_size
                head = f.read(SNIFF_BYTES)
                mime = sniff_image_type(head)
                if mime is not None:
                    if size > MAX_IMAGE_BYTES:
                        return error_result(f"{resolved.rel} is an image of {human_size(size)}, too large to show")
                    data = head + f.read()
                    return image_result(data, text=f"{resolved.rel}: {mime} image, {human_size(size)}",
                                        details=FileContent(resolved.rel, "", 0, 0, None))
                if looks_binary(head):
                    hint = _BINARY_HINTS.get(Path(resolved.rel).suffix.lower())
                    how = f"; load it with the python tool ({hint})" if hint else ""
                    return error_result(f"{resolved.rel} is a binary file ({human_size(size)}), not text{how}")
                f.seek(0)
                return _read_lines(f, resolved.rel, size, offset, limit)
        except WorkspaceError as exc:
            return error_result(str(exc))

    def _read_lines(f: Any, rel: str, size: int, offset: int, limit: int) -> ToolResult:
        total = None
        if size <= MAX_COUNT_BYTES or offset < 0:
            total = count_lines(f)
            f.seek(0)
        if offset < 0:
            start = max(1, (total or 0) + offset + 1)
        else:
            start = max(1, offset)
        shown: list[str] = []
        raw: list[str] = []
        before: deque[str] = deque(maxlen=_CONTEXT_LINES)
        picked: list[tuple[int, str, int]] = []
        after: list[str] = []
        chars = 0
        last = start - 1
        stopped_for_size = False
        for n, (data, length) in enumerate(binary_lines(f), 1):
            line = data.decode("utf-8", errors="replace")
            body = line.rstrip("\r\n")
            if n < start:
                before.append(body[:MAX_LINE_CHARS * 2])
                continue
            if n >= start + limit or stopped_for_size:
                after.append(body[:MAX_LINE_CHARS * 2])
                if len(after) >= _CONTEXT_LINES:
                    break
                continue
            cost = 8 + min(len(body), MAX_LINE_CHARS + 40)
            if chars + cost > MAX_READ_CHARS and picked:
                stopped_for_size = True
                after.append(body[:MAX_LINE_CHARS * 2])
                continue
            raw.append(line)
            picked.append((n, body, length))
            chars += cost
            last = n
        # screened as they read with their neighbours (a key wrapped over the first or last line shown is
        # still found), before a long line is cut: the model's lines are derived from the screened text
        bodies = screen_lines(list(before) + [body for _, body, _ in picked] + after)[len(before):len(before) + len(picked)]
        for (n, _, length), body in zip(picked, bodies):
            if length > MAX_LINE_CHARS:
                body = body[:MAX_LINE_CHARS] + f" [... line cut: {length:,} bytes]"
            shown.append(f"{n:>6}\t{body}")
        if total is None:
            total_text = ""
        else:
            total_text = f" of {total:,}"
        if not shown:
            if size == 0:
                return ToolResult([TextBlock(f"{rel} is empty.")], details=FileContent(rel, "", 0, 0, 0))
            return error_result(f"{rel} has{total_text or ' fewer'} lines; offset {offset} is past its end")
        body = "\n".join(shown)
        more = total is None or last < total
        if more or start > 1:
            note = f"[{rel}: lines {start:,}-{last:,}{total_text}"
            if stopped_for_size or more:
                note += f"; read on with offset={last + 1}"
            body += "\n" + note + "]"
        return ToolResult([TextBlock(body)], details=FileContent(rel, "".join(raw), start, last, total))

    read_tool = Tool(
        read_file, read_only=True, rule_matcher=path_matcher,
        describe_activity=lambda a: f"Reading {short(a.path)}",
        describe_completed_activity=lambda a, r: (
            f"Read lines {r.first_line}-{r.last_line} of {short(a.path)}" if isinstance(r, FileContent) and r.last_line
            else f"Read {short(a.path)}"),
    )

    # -- list_files -----------------------------------------------------------------------------------------
    def list_files(pattern: str = "*", ctx: ToolContext = None) -> ToolResult:  # type: ignore[assignment]
        """List files and directories in the workspace that match a glob pattern, with their sizes.

        Args:
            pattern: a glob relative to the workspace: `*` (the top level), `data/*.csv`, `**/*.ipynb`
                (any depth). Directories end with `/`.
        """
        try:
            ws = binding.workspace_for(ctx)
            pat = _check_glob(pattern)
            base_parts: list[str] = []
            parts = pat.split("/")
            for part in parts[:-1]:
                if any(c in part for c in "*?["):
                    break
                base_parts.append(part)
            base = ws.resolve("/".join(base_parts) or ".")
            st = ws.stat(base)
            if st is None or not stat_module.S_ISDIR(st.st_mode):
                if base.rel != "." and base_parts:
                    return error_result(f"{'/'.join(base_parts)} is not a directory in the workspace")
            depth = None if "**" in pat else max(1, len(parts) - len(base_parts))
            regex = glob_regex(pat)
            hidden = _list_denied(ctx)
            skip = frozenset() if pat.startswith(".git") else frozenset({".git"})
            found: list[str] = []
            lines: list[str] = []
            scanned = 0
            complete = True
            for rel, entry in ws.walk(base, max_depth=depth, skip_dirs=skip, sizes=True):
                scanned += 1
                if scanned > MAX_LIST_SCAN:
                    complete = False
                    break
                if not regex.match(rel) or (hidden is not None and hidden(rel)):
                    continue
                found.append(rel)
                if len(found) <= 500:
                    lines.append(_describe_entry(ws, rel, entry))
        except WorkspaceError as exc:
            return error_result(str(exc))
        if not found:
            return ToolResult([TextBlock(f"No files match {pattern!r} in the workspace.")], details=[])
        text = "\n".join(lines)
        if len(found) > 500:
            text += f"\n[... and {len(found) - 500:,} more; use a narrower pattern]"
        if not complete:
            text += f"\n[stopped after looking at {MAX_LIST_SCAN:,} entries; use a narrower pattern]"
        return ToolResult([TextBlock(text)], details=found)

    list_tool = Tool(
        list_files, read_only=True,
        rule_matcher=_glob_matcher(path_matcher),
        describe_activity=lambda a: f"Listing {short(a.pattern)}",
        describe_completed_activity=lambda a, r: f"Listed {len(r)} entries" if isinstance(r, list) else "Listed files",
    )

    grep_tool = make_grep_tool(binding, path_matcher)
    write_tool, edit_tool = make_edit_tools(binding, path_matcher)
    return {t.name: t for t in (read_tool, list_tool, grep_tool, write_tool, edit_tool)}


def _check_glob(pattern: str) -> str:
    if not isinstance(pattern, str) or "\x00" in pattern:
        raise WorkspaceError("the pattern must be a string without NUL bytes")
    pat = pattern.replace("\\", "/").strip() or "*"
    if pat.startswith(("/", "~")) or re.match(r"^[A-Za-z]:", pat):
        raise WorkspaceError(f"the pattern {pattern!r} must be relative to the workspace (like data/*.csv)")
    while pat.startswith("./"):
        pat = pat[2:]
    if ".." in pat.split("/"):
        raise WorkspaceError(f"the pattern {pattern!r} leads outside the workspace with '..'")
    return pat.rstrip("/") or "*"


def _glob_matcher(path_matcher: Any):
    """Rules on list_files match the directory its pattern lists (the part before any wildcard)."""

    def matcher(pattern: str, args: Any, ctx: Any = None, action: str = "allow") -> bool:
        value = args.get("pattern", "*")
        if not isinstance(value, str):
            return action == "deny"
        parts = []
        for part in value.replace("\\", "/").split("/")[:-1]:
            if any(c in part for c in "*?["):
                break
            parts.append(part)
        return path_matcher(pattern, {"path": "/".join(parts) or "."}, ctx, action)

    return matcher


def _list_denied(ctx: Any):
    rules = [r for r in (getattr(ctx, "rules", None) or ()) if r.action == "deny" and r.names("list_files")
             and r.pattern is not None]
    if not rules:
        return None
    return lambda rel: any(match_path(r.pattern, rel, ignore_case=True) for r in rules)


def _describe_entry(ws: Workspace, rel: str, entry: Any) -> str:
    """One line of list_files: the name (quoted with escapes when it is not plain: `shown_path`), then `/`
    for a folder, `-> where` for a link, or the size."""
    name = shown_path(rel)
    if entry.is_symlink():
        target = os.path.realpath(entry.path)
        inside = ws.relative(target)
        if inside is not None and ws.out_of_reach(target):
            inside = None
        return f"{name} -> {shown_path(inside) if inside is not None else '(outside the workspace)'}"
    if entry.is_dir():
        return f"{name}/"
    return f"{name}  ({human_size(entry.size or 0)})"
