"""The tools that change files: write_file (a whole file) and edit_file (exact text replaced, a diff back).

They count as file edits for the `acceptEdits` mode. Each says what it writes (`writes`: the path as given
and as it resolves), and the permission pipeline judges that by kind (`nbagent.safety.protected.write_reason`:
hidden files and folders, environment and package trees, executables, configuration a program loads, the
trust store), in any case and spelling: such a write always asks, whatever the mode or grant; only an
allow rule the person wrote allows it. The kind is looked at again when the write happens: a call that a
mode or grant allowed is refused if its target became such a file in the meantime (made executable, say,
by an earlier call of the same batch). An "always allow" covers the one file approved. A file a deny rule
protects from reading is never shown: edit_file refuses it (its diff and messages would show what it
holds), write_file replaces it without a diff.
"""

from __future__ import annotations

import difflib
import os
import stat as stat_module
from dataclasses import dataclass
from typing import Any

from ..context import ToolContext
from ..messages import TextBlock, ToolResult
from ..reprs import short_line as short
from ..safety import protected
from ..safety.gate import Screened
from ..tools.definition import Tool
from ..tools.results import error_result
from ._binding import Binding, read_denied_check
from ._filetext import human_size
from ._values import cut
from ._workspace import ResolvedPath, Workspace, WorkspaceError

__all__ = ["FileChange", "MAX_WRITE_BYTES", "make_edit_tools"]

MAX_WRITE_BYTES = 10 * 1024 * 1024
"""The largest file write_file writes and edit_file edits."""


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


def make_edit_tools(binding: Binding, path_matcher: Any) -> list[Tool]:
    """write_file and edit_file, working in the binding's workspace."""

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
            return error_result(f"content is {human_size(len(data))}; write_file writes at most {human_size(MAX_WRITE_BYTES)}")
        try:
            ws = binding.workspace_for(ctx)
            resolved = ws.resolve(path)
            _check_kind_again(ws, path, resolved, ctx)
            denied = read_denied_check(ctx)
            hidden = denied is not None and _read_denied(denied, ws, path, resolved)
            before = None if hidden else _old_text(ws, resolved)
            created = ws.write_bytes(resolved, data)
        except WorkspaceError as exc:
            return error_result(str(exc))
        n_lines = content.count("\n") + (1 if content and not content.endswith("\n") else 0)
        if created:
            text = f"Created {resolved.rel} ({n_lines:,} lines, {human_size(len(data))})."
            diff = ""
        else:
            diff = _unified_diff(before, content, resolved.rel) if before is not None else ""
            text = f"Wrote {resolved.rel} ({n_lines:,} lines, {human_size(len(data))}), replacing what was there."
            if hidden:
                text += " (a deny rule protects it from reading, so what it held is not shown)"
            elif before is not None and before == content:
                text = f"Wrote {resolved.rel}: the content was already exactly this."
            elif diff:
                text += "\n" + diff
        return ToolResult([TextBlock(text)], details=FileChange(resolved.rel, created, diff, len(data)))

    write_tool = Tool(
        write_file, edits_files=_edit_call(binding), capability="write", rule_matcher=path_matcher,
        suggest_grant=_grant_scope(binding), writes=_writes(binding),
        describe_activity=lambda a: f"Writing {short(a.path)}",
        describe_completed_activity=lambda a, r: (
            f"{'Created' if r.created else 'Wrote'} {short(a.path)}" if isinstance(r, FileChange) else f"Wrote {short(a.path)}"),
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
            _check_kind_again(ws, path, resolved, ctx)
            denied = read_denied_check(ctx)
            if denied is not None and _read_denied(denied, ws, path, resolved):
                return error_result(
                    f"a deny rule protects {resolved.rel} from reading, and edit_file would show what it holds "
                    "(in its diff and its messages); write_file can replace it whole")
            with ws.open_read(resolved) as f:
                size = os.fstat(f.fileno()).st_size
                if size > MAX_WRITE_BYTES:
                    return error_result(f"{resolved.rel} is {human_size(size)}; edit_file edits files up to {human_size(MAX_WRITE_BYTES)}")
                data = f.read()
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError:
                return error_result(f"{resolved.rel} is not UTF-8 text, so it cannot be edited as text")
            view = Screened(text)  # `old` is looked for in what the model can see: no oracle on a secret
            count = view.count(old)
            adapted = ""
            if count == 0 and "\r\n" in text and "\n" in old and "\r\n" not in old:
                crlf_old = old.replace("\n", "\r\n")
                if view.count(crlf_old):
                    old, new = crlf_old, new.replace("\r\n", "\n").replace("\n", "\r\n")
                    count = view.count(old)
                    adapted = " (line endings adapted to the file's CRLF)"
            if count == 0:
                return error_result(_not_found_message(resolved.rel, view.text, old))
            if count > 1 and not replace_all:
                where = _line_numbers(view.text, old)
                shown = ", ".join(str(n) for n in where[:10]) + (" ..." if len(where) > 10 else "")
                return error_result(
                    f"old occurs {count} times in {resolved.rel} (at lines {shown}); include more of the "
                    "surrounding text so it occurs once, or set replace_all to replace every occurrence")
            updated = view.replace(old, new) if replace_all else view.replace(old, new, 1)
            encoded = updated.encode("utf-8", errors="surrogatepass")
            if len(encoded) > MAX_WRITE_BYTES:
                return error_result(f"the edited file would be {human_size(len(encoded))}; the limit is {human_size(MAX_WRITE_BYTES)}")
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
        suggest_grant=_grant_scope(binding), writes=_writes(binding),
        describe_activity=lambda a: f"Editing {short(a.path)}",
        describe_completed_activity=lambda a, r: f"Edited {short(a.path)}",
    )
    return [write_tool, edit_tool]


def _unified_diff(before: str, after: str, rel: str, limit: int = 8000) -> str:
    lines = difflib.unified_diff(before.splitlines(True), after.splitlines(True), f"a/{rel}", f"b/{rel}", n=3)
    out = []
    for line in lines:
        out.append(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n")
    return cut("".join(out), limit, what="characters of the diff")


def _writes(binding: Binding):
    """What a write/edit call writes: the path as given and as it resolves, in the binding's workspace (so
    the permission pipeline judges it by kind, `nbagent.safety.protected.write_reason`)."""

    def writes(args: Any, ctx: Any = None) -> list[protected.Target]:
        ws = binding.workspace_for(ctx)
        given = str(args.get("path"))
        try:
            real = str(ws.resolve(given).path)
        except WorkspaceError:
            # refused by the tool itself, whatever is decided (its message says why); a path inside that no
            # tool may reach (nbagent's trust store in a home workspace) is still judged, so it is asked about
            lexical = os.path.normpath(os.path.join(str(ws.root), given.replace("\\", "/")))
            return [protected.Target(given, str(ws.root))] if ws.relative(lexical) not in (None, ".") else []
        return [protected.Target(given, str(ws.root)), protected.Target(real, str(ws.root))]

    return writes


def _edit_call(binding: Binding):
    """Whether a write/edit call is a plain file edit inside the workspace (what acceptEdits allows, once
    the pipeline found that it writes no file of a kind that asks)."""

    def edits(args: Any, ctx: Any = None) -> bool:
        try:
            binding.workspace_for(ctx).resolve(args.get("path"))
        except WorkspaceError:
            return False
        return True

    return edits


def _check_kind_again(ws: Workspace, given: str, resolved: ResolvedPath, ctx: Any) -> None:
    """A call a mode or grant allowed, whose target became a file of a kind that asks since it was decided
    (an earlier call of the batch made it executable, or put it inside an environment): refused."""
    source = getattr(getattr(ctx, "decision", None), "source", None)
    if source not in ("mode", "grant"):
        return  # asked (and approved with the kind shown), allowed by a rule the person wrote, or no pipeline
    reason = protected.write_reason([protected.Target(given, str(ws.root)),
                                     protected.Target(str(resolved.path), str(ws.root))])
    if reason:
        raise WorkspaceError(f"not written: {reason}; it changed since the call was allowed, so ask again")


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
