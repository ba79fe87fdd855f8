"""The grep tool: a regex over the workspace's files, matched in a worker process.

`grep` matches in a worker process (`_grepworker`), one batch of lines at a time: a pattern that takes
longer than `GREP_TIMEOUT` on a batch ends the call with an error that says so, and Stop kills the worker
at once, so a catastrophic regex (`(a+)+$`) never holds the kernel.

Reads: the workspace's files and links (the model, a cloned repository or a download could have written
them) with a pattern the model wrote. What could happen: a pattern that never ends, a file too big to
hold, a link that leads out of the workspace, a file a deny rule protects shown line by line. What stops
it: the worker and its time bound per batch; files over `MAX_GREP_FILE_BYTES` and binary files are
skipped; links are never followed (one that leads out is counted and skipped); files that a deny rule of
`read_file` or `grep` protects are skipped (`_binding.read_denied_check`), and the message says how many.
A file holding a credential is searched as the model would read it (`nbagent.safety.gate.screen_lines`):
the pattern never meets a key, so a match, a count or the time a match takes is no oracle on one.
"""

from __future__ import annotations

import json
import os
import re
import select
import stat as stat_module
import subprocess
import sys
import time
from dataclasses import dataclass, field
from typing import Annotated, Any

from pydantic import Field

from ..context import ToolContext
from ..messages import TextBlock, ToolResult
from ..reprs import short_line as short
from ..safety.gate import screen_lines
from ..tools.definition import Tool
from ..tools.paths import match_path
from ..tools.results import error_result
from ._binding import Binding, read_denied_check
from ._filetext import MAX_LINE_CHARS, MAX_LIST_SCAN, SNIFF_BYTES, binary_lines, looks_binary, shown_path
from ._workspace import ResolvedPath, Workspace, WorkspaceError

__all__ = ["GREP_TIMEOUT", "GrepMatch", "GrepResult", "make_grep_tool"]

MAX_GREP_FILE_BYTES = 20 * 1024 * 1024
GREP_TIMEOUT = 10.0
"""Seconds the regex may spend on one batch of lines before grep gives up on the pattern."""

# parameter types made once: a `Field` made in each call of a tool factory would rebuild its model (tools/schemas.py)
_MAX_RESULTS = Annotated[int, Field(ge=1, le=1000)]

_GREP_BATCH_CHARS = 1 << 20
_WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_grepworker.py")


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


def make_grep_tool(binding: Binding, path_matcher: Any) -> Tool:
    """grep, searching the binding's workspace."""

    def grep(
        pattern: str,
        path: str = ".",
        glob: str = "",
        ignore_case: bool = False,
        max_results: _MAX_RESULTS = 100,
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
            text = f"No matches for {pattern!r} in {shown_path(start.rel)} ({result.files_searched} files searched)."
        else:
            text = "\n".join(lines)
        if notes:
            text += "\n[" + "; ".join(notes) + "]"
        return ToolResult([TextBlock(text)], details=result)

    grep_tool = Tool(
        grep, read_only=True, rule_matcher=path_matcher,
        describe_activity=lambda a: f"Searching for “{short(a.pattern, 40)}” in {short(a.path, 40)}",
        describe_completed_activity=lambda a, r: (
            f"Found {len(r.matches)} matching lines in {r.files_searched} files" if isinstance(r, GrepResult)
            else "Searched files"),
    )
    return grep_tool


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
            head = f.read(SNIFF_BYTES)
            if looks_binary(head):
                return True
            f.seek(0)
            batch: list[tuple[int, str]] = []
            size = 0
            for n, (data, _length) in enumerate(binary_lines(f), 1):
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
    # the pattern meets the screened lines (a secret is `[REDACTED:NAME]` there): its matches, its count and
    # its time say nothing about a key, and what is shown of a line is screened before it is cut
    screened = screen_lines([body for _, body in batch])
    batch = [(n, text) for (n, _), text in zip(batch, screened)]
    for i in searcher.search([body[:MAX_LINE_CHARS] for _, body in batch], rel):
        n, body = batch[i]
        if len(result.matches) >= max_results:
            return False
        result.matches.append(GrepMatch(rel, n, body))
        shown = body.strip()
        if len(shown) > 300:
            shown = shown[:300] + " [...]"
        lines.append(f"{shown_path(rel)}:{n}: {shown}")
    return True
