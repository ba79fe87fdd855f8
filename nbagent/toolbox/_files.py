"""File tools, confined to the workspace: read_file, list_files, grep (read-only); write_file, edit_file.

`grep` matches in a worker process (`_grepworker`), one batch of lines at a time: a pattern that takes
longer than `GREP_TIMEOUT` on a batch ends the call with an error that says so, and Stop kills the worker
at once, so a catastrophic regex (`(a+)+$`) never holds the kernel.

A deny rule on reading a file (`deny: read_file(.env)`) holds here too: `grep` skips it, `edit_file`
refuses it (its diff and messages would show what it holds), `write_file` replaces it without a diff.

Every path goes through `Workspace.resolve` (see `_workspace`): a path outside the workspace is refused
with a clear message whatever the mode, rules or approvals. Rule patterns for these tools are path globs
relative to the workspace (`write_file(notebooks/**)`, `deny: read_file(.env)`; see
`nbagent.permissions.path_rule_matcher`); `grep` also skips files that a deny rule of `read_file` or
`grep` protects, and `list_files` hides what a deny rule of `list_files` covers. `write_file` and
`edit_file` count as file edits for the `acceptEdits` mode, except for configuration that can run programs
(`nbagent.protected`: `.mcp.json`, `.nbagent/`, `.git` and the files that make a bare repository, editor,
Jupyter and other agents' settings), matched in any case and spelling, as given and as resolved: a write
there always asks, whatever the mode or grant; only an allow rule the person wrote allows it.
"""

from __future__ import annotations

import codecs
import difflib
import json
import os
import re
import select
import stat as stat_module
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field

from ..context import ToolContext
from ..messages import TextBlock, ToolResult
from ..paths import glob_regex, match_path, path_rule_matcher
from ..protected import protected_reason
from ..results import error_result, image_result, sniff_image_type
from ..tools import Tool
from ._binding import Binding, read_denied_check
from ._values import cut
from ._workspace import ResolvedPath, Workspace, WorkspaceError

__all__ = ["FileChange", "FileContent", "GrepMatch", "make_file_tools"]

MAX_READ_CHARS = 100_000
"""The most text one read_file call returns (the model sees less once results are cut)."""
MAX_LINE_CHARS = 2_000
"""Longer lines are cut in read_file and grep output."""
MAX_COUNT_BYTES = 64 * 1024 * 1024
"""Files up to this size get their lines counted ("lines 1-2000 of 51,234")."""
MAX_IMAGE_BYTES = 20 * 1024 * 1024
MAX_WRITE_BYTES = 10 * 1024 * 1024
"""The largest file write_file writes and edit_file edits."""
MAX_GREP_FILE_BYTES = 20 * 1024 * 1024
MAX_LIST_SCAN = 200_000
"""Entries list_files and grep look at before they stop."""
_SNIFF = 8192

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


@dataclass(slots=True)
class FileChange:
    """What write_file or edit_file changed (`details` of their result)."""

    path: str
    created: bool
    diff: str
    size: int
    replacements: int = 0

    def __str__(self) -> str:
        return self.diff or f"{'created' if self.created else 'wrote'} {self.path}"


@dataclass(slots=True)
class GrepMatch:
    path: str
    line_number: int
    line: str


@dataclass(slots=True)
class GrepResult:
    """What grep found (`details` of its result)."""

    pattern: str
    matches: list[GrepMatch] = field(default_factory=list)
    files_searched: int = 0
    complete: bool = True


def _size(n: int) -> str:
    size = float(n)
    for unit in ("bytes", "KB", "MB", "GB"):
        if size < 1024 or unit == "GB":
            return f"{int(size)} bytes" if unit == "bytes" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} bytes"  # pragma: no cover


def _looks_binary(head: bytes) -> bool:
    if not head:
        return False
    if b"\x00" in head:
        return True
    decoder = codecs.getincrementaldecoder("utf-8")()
    try:
        decoder.decode(head, final=False)
        return False
    except UnicodeDecodeError:
        control = sum(1 for b in head if b < 32 and b not in (9, 10, 12, 13, 8, 27))
        return control / len(head) > 0.05


def _short(text: str, n: int = 60) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= n else text[: n - 1] + "…"


def _unified_diff(before: str, after: str, rel: str, limit: int = 8000) -> str:
    lines = difflib.unified_diff(before.splitlines(True), after.splitlines(True), f"a/{rel}", f"b/{rel}", n=3)
    out = []
    for line in lines:
        out.append(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n")
    return cut("".join(out), limit, what="characters of the diff")


def _protected_write(binding: Binding):
    """Why a write/edit call writes configuration that can run programs (`nbagent.protected`), or None."""

    def reason(args: Any, ctx: Any = None) -> str | None:
        given = args.get("path")
        try:
            resolved = binding.workspace_for(ctx).resolve(given)
        except WorkspaceError:
            return None  # refused by the tool itself, whatever is decided
        return protected_reason([str(given), resolved.rel], real_path=str(resolved.path))

    return reason


def _edit_call(binding: Binding):
    """Whether a write/edit call is a plain file edit inside the workspace (what acceptEdits allows)."""
    protected = _protected_write(binding)

    def edits(args: Any, ctx: Any = None) -> bool:
        try:
            binding.workspace_for(ctx).resolve(args.get("path"))
        except WorkspaceError:
            return False
        return protected(args, ctx) is None

    return edits


def _grant_scope(binding: Binding):
    """An "always allow" of a write covers that one file (anchored at the workspace root); never the
    whole tool, even for a path that cannot be resolved."""

    def scope(args: Any, ctx: Any = None) -> str:
        try:
            rel = binding.workspace_for(ctx).resolve(args.get("path")).rel
        except WorkspaceError:
            rel = str(args.get("path"))
        return "./" + "".join(f"[{c}]" if c in "*?[" else c for c in rel)

    return scope


def make_file_tools(binding: Binding) -> dict[str, Tool]:
    """read_file, list_files, grep, write_file and edit_file, working in the binding's workspace."""
    root = binding.workspace.root if binding.workspace is not None else None
    path_matcher = path_rule_matcher("path", root)

    # -- read_file -----------------------------------------------------------------------------------------
    def read_file(
        path: str,
        offset: int = 1,
        limit: Annotated[int, Field(ge=1, le=10_000)] = 2000,
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
                head = f.read(_SNIFF)
                mime = sniff_image_type(head)
                if mime is not None:
                    if size > MAX_IMAGE_BYTES:
                        return error_result(f"{resolved.rel} is an image of {_size(size)}, too large to show")
                    data = head + f.read()
                    return image_result(data, text=f"{resolved.rel}: {mime} image, {_size(size)}",
                                        details=FileContent(resolved.rel, "", 0, 0, None))
                if _looks_binary(head):
                    hint = _BINARY_HINTS.get(Path(resolved.rel).suffix.lower())
                    how = f"; load it with the python tool ({hint})" if hint else ""
                    return error_result(f"{resolved.rel} is a binary file ({_size(size)}), not text{how}")
                f.seek(0)
                return _read_lines(f, resolved.rel, size, offset, limit)
        except WorkspaceError as exc:
            return error_result(str(exc))

    def _read_lines(f: Any, rel: str, size: int, offset: int, limit: int) -> ToolResult:
        total = None
        if size <= MAX_COUNT_BYTES or offset < 0:
            total = _count_lines(f)
            f.seek(0)
        if offset < 0:
            start = max(1, (total or 0) + offset + 1)
        else:
            start = max(1, offset)
        shown: list[str] = []
        raw: list[str] = []
        chars = 0
        last = start - 1
        stopped_for_size = False
        for n, (data, length) in enumerate(_binary_lines(f), 1):
            if n < start:
                continue
            if n >= start + limit:
                break
            line = data.decode("utf-8", errors="replace")
            body = line.rstrip("\r\n")
            raw.append(line)
            if length > MAX_LINE_CHARS:
                body = body[:MAX_LINE_CHARS] + f" [... line cut: {length:,} bytes]"
            entry = f"{n:>6}\t{body}"
            if chars + len(entry) > MAX_READ_CHARS and shown:
                stopped_for_size = True
                break
            shown.append(entry)
            chars += len(entry) + 1
            last = n
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
        describe_activity=lambda a: f"Reading {_short(a.path)}",
        describe_completed_activity=lambda a, r: (
            f"Read lines {r.first_line}-{r.last_line} of {_short(a.path)}" if isinstance(r, FileContent) and r.last_line
            else f"Read {_short(a.path)}"),
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
            for rel, entry in ws.walk(base, max_depth=depth, skip_dirs=skip):
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
        describe_activity=lambda a: f"Listing {_short(a.pattern)}",
        describe_completed_activity=lambda a, r: f"Listed {len(r)} entries" if isinstance(r, list) else "Listed files",
    )

    # -- grep ---------------------------------------------------------------------------------------------------
    def grep(
        pattern: str,
        path: str = ".",
        glob: str = "",
        ignore_case: bool = False,
        max_results: Annotated[int, Field(ge=1, le=1000)] = 100,
        ctx: ToolContext = None,  # type: ignore[assignment]
    ) -> ToolResult:
        """Search file contents in the workspace with a regular expression (Python syntax); prints
        `path:line: text` for each matching line. Binary files are skipped.

        Args:
            pattern: the regular expression to look for.
            path: a file or directory to search, relative to the workspace.
            glob: only search files whose name (or path, if it has a `/`) matches, e.g. `*.py` (empty: all).
            ignore_case: match without regard to case.
            max_results: stop after this many matching lines.
        """
        try:
            re.compile(pattern, re.IGNORECASE if ignore_case else 0)
        except re.error as exc:
            return error_result(f"invalid regular expression {pattern!r}: {exc}")
        try:
            ws = binding.workspace_for(ctx)
            start = ws.resolve(path)
        except WorkspaceError as exc:
            return error_result(str(exc))
        denied = read_denied_check(ctx)
        result = GrepResult(pattern)
        skipped_denied = 0
        skipped_outside = 0
        lines: list[str] = []
        searcher = _Searcher(pattern, re.IGNORECASE if ignore_case else 0,
                             (lambda: bool(ctx.cancelled)) if ctx is not None else (lambda: False))
        try:
            for rel, real in _files_under(ws, start):
                if ctx is not None and ctx.cancelled:
                    result.complete = False
                    break
                if real is None:
                    skipped_outside += 1
                    continue
                if glob and not (match_path(glob, rel) if "/" in glob else match_path(glob, rel.rsplit("/", 1)[-1])):
                    continue
                if denied is not None and denied(rel, real):
                    skipped_denied += 1
                    continue
                result.files_searched += 1
                if result.files_searched > MAX_LIST_SCAN:
                    result.complete = False
                    break
                if not _grep_file(ws, rel, searcher, result, lines, max_results):
                    result.complete = False
                    break
        except WorkspaceError as exc:
            return error_result(str(exc))
        except _TooSlow as exc:
            return error_result(
                f"the pattern took longer than {GREP_TIMEOUT:g} s on {exc}; simplify it (nested repeats such as "
                "(a+)+ can take forever on some lines)", details=result)
        except _Stopped:
            result.complete = False
        except _WorkerFailed as exc:
            return error_result(f"grep failed: {exc}", details=result)
        finally:
            searcher.close()
        notes = []
        if not result.complete:
            notes.append(f"stopped at {len(result.matches)} matches; narrow the pattern, path or glob for the rest"
                         if len(result.matches) >= max_results else "the search was stopped before it finished")
        if skipped_denied:
            notes.append(f"{skipped_denied} file(s) skipped: protected by deny rules")
        if skipped_outside:
            notes.append(f"{skipped_outside} symbolic link(s) leading outside the workspace skipped")
        if not result.matches:
            text = f"No matches for {pattern!r} in {start.rel} ({result.files_searched} files searched)."
        else:
            text = "\n".join(lines)
        if notes:
            text += "\n[" + "; ".join(notes) + "]"
        return ToolResult([TextBlock(text)], details=result)

    grep_tool = Tool(
        grep, read_only=True, rule_matcher=path_matcher,
        describe_activity=lambda a: f"Searching for “{_short(a.pattern, 40)}” in {_short(a.path, 40)}",
        describe_completed_activity=lambda a, r: (
            f"Found {len(r.matches)} matching lines in {r.files_searched} files" if isinstance(r, GrepResult)
            else "Searched files"),
    )

    # -- write_file -------------------------------------------------------------------------------------------
    def write_file(path: str, content: str, ctx: ToolContext = None) -> ToolResult:  # type: ignore[assignment]
        """Write a text file in the workspace (UTF-8), creating it and its directories if needed, or
        replacing it whole. To change part of a file, use edit_file.

        Args:
            path: the file, relative to the workspace.
            content: the whole new content of the file.
        """
        data = content.encode("utf-8", errors="surrogatepass")
        if len(data) > MAX_WRITE_BYTES:
            return error_result(f"content is {_size(len(data))}; write_file writes at most {_size(MAX_WRITE_BYTES)}")
        try:
            ws = binding.workspace_for(ctx)
            resolved = ws.resolve(path)
            denied = read_denied_check(ctx)
            hidden = denied is not None and _read_denied(denied, ws, path, resolved)
            before = None if hidden else _old_text(ws, resolved)
            created = ws.write_bytes(resolved, data)
        except WorkspaceError as exc:
            return error_result(str(exc))
        n_lines = content.count("\n") + (1 if content and not content.endswith("\n") else 0)
        if created:
            text = f"Created {resolved.rel} ({n_lines:,} lines, {_size(len(data))})."
            diff = ""
        else:
            diff = _unified_diff(before, content, resolved.rel) if before is not None else ""
            text = f"Wrote {resolved.rel} ({n_lines:,} lines, {_size(len(data))}), replacing what was there."
            if hidden:
                text += " (a deny rule protects it from reading, so what it held is not shown)"
            elif before is not None and before == content:
                text = f"Wrote {resolved.rel}: the content was already exactly this."
            elif diff:
                text += "\n" + diff
        return ToolResult([TextBlock(text)], details=FileChange(resolved.rel, created, diff, len(data)))

    write_tool = Tool(
        write_file, edits_files=_edit_call(binding), capability="write", rule_matcher=path_matcher,
        suggest_grant=_grant_scope(binding), protected_write=_protected_write(binding),
        describe_activity=lambda a: f"Writing {_short(a.path)}",
        describe_completed_activity=lambda a, r: (
            f"{'Created' if r.created else 'Wrote'} {_short(a.path)}" if isinstance(r, FileChange) else f"Wrote {_short(a.path)}"),
    )

    # -- edit_file -----------------------------------------------------------------------------------------------
    def edit_file(path: str, old: str, new: str, replace_all: bool = False,
                  ctx: ToolContext = None) -> ToolResult:  # type: ignore[assignment]
        """Replace an exact piece of text in a file of the workspace. `old` must occur exactly once
        (include enough surrounding lines to make it unique), unless replace_all is true. Returns a diff.

        Args:
            path: the file, relative to the workspace.
            old: the exact text to replace (whitespace and indentation included).
            new: the text to put in its place.
            replace_all: replace every occurrence of `old`.
        """
        if old == "":
            return error_result("old is empty: give the exact text to replace (to create a file, use write_file)")
        if old == new:
            return error_result("old and new are the same: there is nothing to change")
        try:
            ws = binding.workspace_for(ctx)
            resolved = ws.resolve(path)
            denied = read_denied_check(ctx)
            if denied is not None and _read_denied(denied, ws, path, resolved):
                return error_result(
                    f"a deny rule protects {resolved.rel} from reading, and edit_file would show what it holds "
                    "(in its diff and its messages); write_file can replace it whole")
            with ws.open_read(resolved) as f:
                size = os.fstat(f.fileno()).st_size
                if size > MAX_WRITE_BYTES:
                    return error_result(f"{resolved.rel} is {_size(size)}; edit_file edits files up to {_size(MAX_WRITE_BYTES)}")
                data = f.read()
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError:
                return error_result(f"{resolved.rel} is not UTF-8 text, so it cannot be edited as text")
            count = text.count(old)
            adapted = ""
            if count == 0 and "\r\n" in text and "\n" in old and "\r\n" not in old:
                crlf_old = old.replace("\n", "\r\n")
                if text.count(crlf_old):
                    old, new = crlf_old, new.replace("\r\n", "\n").replace("\n", "\r\n")
                    count = text.count(old)
                    adapted = " (line endings adapted to the file's CRLF)"
            if count == 0:
                return error_result(_not_found_message(resolved.rel, text, old))
            if count > 1 and not replace_all:
                where = _line_numbers(text, old)
                shown = ", ".join(str(n) for n in where[:10]) + (" ..." if len(where) > 10 else "")
                return error_result(
                    f"old occurs {count} times in {resolved.rel} (at lines {shown}); include more of the "
                    "surrounding text so it occurs once, or set replace_all to replace every occurrence")
            updated = text.replace(old, new) if replace_all else text.replace(old, new, 1)
            encoded = updated.encode("utf-8", errors="surrogatepass")
            if len(encoded) > MAX_WRITE_BYTES:
                return error_result(f"the edited file would be {_size(len(encoded))}; the limit is {_size(MAX_WRITE_BYTES)}")
            ws.write_bytes(resolved, encoded)
        except WorkspaceError as exc:
            return error_result(str(exc))
        diff = _unified_diff(text, updated, resolved.rel)
        replaced = count if replace_all else 1
        summary = f"Edited {resolved.rel}: replaced {replaced} occurrence{'s' if replaced != 1 else ''}{adapted}."
        return ToolResult([TextBlock(summary + "\n" + diff)],
                          details=FileChange(resolved.rel, False, diff, len(encoded), replaced))

    edit_tool = Tool(
        edit_file, edits_files=_edit_call(binding), capability="write", rule_matcher=path_matcher,
        suggest_grant=_grant_scope(binding), protected_write=_protected_write(binding),
        describe_activity=lambda a: f"Editing {_short(a.path)}",
        describe_completed_activity=lambda a, r: f"Edited {_short(a.path)}",
    )

    return {t.name: t for t in (read_tool, list_tool, grep_tool, write_tool, edit_tool)}


# --------------------------------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------------------------------
def _binary_lines(f: Any, keep: int = 4 * MAX_LINE_CHARS):
    """(the first `keep` bytes of each line, the line's length without its ending) of a binary file; lines end at
    `\\n` only (as `wc -l` counts them), and a huge line is never held in memory whole."""
    while True:
        chunk = f.readline(1 << 16)
        if not chunk:
            return
        kept = chunk[:keep]
        length = len(chunk)
        while not chunk.endswith(b"\n"):
            chunk = f.readline(1 << 16)
            if not chunk:
                break
            if len(kept) < keep:
                kept += chunk[: keep - len(kept)]
            length += len(chunk)
        if chunk.endswith(b"\r\n"):
            length -= 2
        elif chunk.endswith(b"\n"):
            length -= 1
        yield kept, length


def _count_lines(f: Any) -> int:
    count = 0
    last = b""
    while True:
        chunk = f.read(1 << 20)
        if not chunk:
            break
        count += chunk.count(b"\n")
        last = chunk
    if last and not last.endswith(b"\n"):
        count += 1
    return count


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


def _describe_entry(ws: Workspace, rel: str, entry: os.DirEntry[str]) -> str:
    try:
        if entry.is_symlink():
            target = os.path.realpath(entry.path)
            inside = ws.relative(target)
            return f"{rel} -> {inside if inside is not None else '(outside the workspace)'}"
        if entry.is_dir(follow_symlinks=False):
            return f"{rel}/"
        return f"{rel}  ({_size(entry.stat(follow_symlinks=False).st_size)})"
    except OSError:
        return rel


def _files_under(ws: Workspace, start: ResolvedPath):
    """(relative path, real path or None when it leads outside) of every regular file to search."""
    st = ws.stat(start)
    if st is not None and not stat_module.S_ISDIR(st.st_mode):
        yield start.rel, str(start.path)
        return
    for rel, entry in ws.walk(start):
        try:
            if entry.is_symlink():
                # links are not followed (their targets inside are searched as themselves)
                if ws.relative(os.path.realpath(entry.path)) is None:
                    yield rel, None
                continue
            if entry.is_file(follow_symlinks=False):
                yield rel, entry.path
        except OSError:
            continue


GREP_TIMEOUT = 10.0
"""Seconds the regex may spend on one batch of lines before grep gives up on the pattern."""
_GREP_BATCH_CHARS = 1 << 20
_WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_grepworker.py")


class _TooSlow(Exception):
    """The pattern took longer than GREP_TIMEOUT on one batch (the message names the file)."""


class _Stopped(Exception):
    """The call was cancelled while the worker searched."""


class _WorkerFailed(Exception):
    """The worker could not be started or stopped unexpectedly."""


class _Searcher:
    """Matches lines against a regex in a worker process (`_grepworker`), with a time bound per batch of
    lines and cancellation checked while it waits: a runaway pattern is killed, never waited for."""

    def __init__(self, pattern: str, flags: int, cancelled: Any) -> None:
        self.pattern = pattern
        self.flags = flags
        self.cancelled = cancelled
        self.proc: subprocess.Popen[bytes] | None = None  # started with the first batch
        self._buffer = b""

    def _start(self) -> subprocess.Popen[bytes]:
        try:
            self.proc = subprocess.Popen([sys.executable, "-I", "-S", _WORKER], stdin=subprocess.PIPE,
                                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, close_fds=True)
        except OSError as exc:
            raise _WorkerFailed(f"the regex worker could not start ({exc})") from None
        self._send({"pattern": self.pattern, "flags": self.flags})
        return self.proc

    def _send(self, message: dict[str, Any]) -> None:
        assert self.proc is not None and self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(message).encode("utf-8", "surrogatepass") + b"\n")
        self.proc.stdin.flush()

    def search(self, lines: list[str], where: str) -> list[int]:
        """The indices of the lines that match."""
        proc = self.proc if self.proc is not None else self._start()
        try:
            self._send({"lines": lines})
        except OSError:
            self.close()
            raise _WorkerFailed("the regex worker stopped unexpectedly") from None
        deadline = time.monotonic() + GREP_TIMEOUT
        fd = proc.stdout.fileno()  # type: ignore[union-attr]
        while b"\n" not in self._buffer:
            if self.cancelled():
                self.close()
                raise _Stopped()
            left = deadline - time.monotonic()
            if left <= 0:
                self.close()
                raise _TooSlow(where)
            ready, _, _ = select.select([fd], [], [], min(0.05, left))
            if ready:
                chunk = os.read(fd, 1 << 16)
                if not chunk:
                    self.close()
                    raise _WorkerFailed("the regex worker stopped unexpectedly")
                self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        answer = json.loads(line)
        if "error" in answer:
            raise _WorkerFailed(f"invalid regular expression: {answer['error']}")
        return answer["hits"]

    def close(self) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.kill()
        for stream in (self.proc.stdin, self.proc.stdout):
            try:
                stream.close()  # type: ignore[union-attr]
            except OSError:
                pass
        self.proc.wait()


def _grep_file(ws: Workspace, rel: str, searcher: _Searcher, result: GrepResult, lines: list[str],
               max_results: int) -> bool:
    """Search one file; False when max_results was reached."""
    try:
        resolved = ws.resolve(rel)
        with ws.open_read(resolved) as f:
            if os.fstat(f.fileno()).st_size > MAX_GREP_FILE_BYTES:
                return True
            head = f.read(_SNIFF)
            if _looks_binary(head):
                return True
            f.seek(0)
            batch: list[tuple[int, str]] = []
            size = 0
            for n, (data, _length) in enumerate(_binary_lines(f), 1):
                body = data.decode("utf-8", errors="replace").rstrip("\r\n")
                batch.append((n, body))
                size += min(len(body), MAX_LINE_CHARS)
                if size >= _GREP_BATCH_CHARS:
                    if not _grep_batch(resolved.rel, batch, searcher, result, lines, max_results):
                        return False
                    batch, size = [], 0
            if batch and not _grep_batch(resolved.rel, batch, searcher, result, lines, max_results):
                return False
    except WorkspaceError:
        return True
    return True


def _grep_batch(rel: str, batch: list[tuple[int, str]], searcher: _Searcher, result: GrepResult,
                lines: list[str], max_results: int) -> bool:
    for i in searcher.search([body[:MAX_LINE_CHARS] for _, body in batch], rel):
        n, body = batch[i]
        if len(result.matches) >= max_results:
            return False
        result.matches.append(GrepMatch(rel, n, body))
        shown = body.strip()
        if len(shown) > 300:
            shown = shown[:300] + " [...]"
        lines.append(f"{rel}:{n}: {shown}")
    return True


def _read_denied(denied: Any, ws: Workspace, given: str, resolved: ResolvedPath) -> bool:
    """Whether a deny rule on reading covers this path, as given (normalised) or as it really is."""
    lexical = ws.relative(os.path.normpath(os.path.join(str(ws.root), given.replace("\\", "/"))))
    return denied(resolved.rel, str(resolved.path)) or (lexical is not None and denied(lexical, str(resolved.path)))


def _old_text(ws: Workspace, resolved: ResolvedPath) -> str | None:
    st = ws.stat(resolved)
    if st is None or not stat_module.S_ISREG(st.st_mode) or st.st_size > 2 * 1024 * 1024:
        return None
    try:
        return ws.read_bytes(resolved).decode("utf-8")
    except (WorkspaceError, UnicodeDecodeError):
        return None


def _line_numbers(text: str, needle: str) -> list[int]:
    out = []
    start = 0
    while True:
        i = text.find(needle, start)
        if i == -1:
            return out
        out.append(text.count("\n", 0, i) + 1)
        start = i + 1


def _not_found_message(rel: str, text: str, old: str) -> str:
    message = f"old was not found in {rel}; it must match the file exactly, whitespace and indentation included"
    squashed_text = " ".join(text.split())
    squashed_old = " ".join(old.split())
    if squashed_old and squashed_old in squashed_text:
        return message + ". It does occur with different whitespace or line breaks: copy it exactly from read_file's output (without the line numbers)"
    first = old.strip().splitlines()[0].strip() if old.strip() else ""
    if first:
        candidates = [(i + 1, line) for i, line in enumerate(text.splitlines()) if first in line]
        if candidates:
            n, line = candidates[0]
            return message + f". Its first line occurs at line {n}: {line.strip()[:200]!r}"
        close = difflib.get_close_matches(first, [line.strip() for line in text.splitlines()], n=1, cutoff=0.75)
        if close:
            n = [line.strip() for line in text.splitlines()].index(close[0]) + 1
            return message + f". The closest line is {n}: {close[0][:200]!r}"
    return message
