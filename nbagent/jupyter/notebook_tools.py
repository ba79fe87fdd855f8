"""Notebook tools: the agent reads the notebook's cells, writes cells, and runs them where the user sees them.

    read_notebook(cell_id=None, start=None, end=None)   read-only
    insert_cell(source, cell_type="code", after=None)   a file edit: default mode asks, acceptEdits allows
    edit_cell(cell_id, old, new)                        a file edit
    delete_cell(cell_id)                                a file edit
    run_cell(cell_id)                                   runs code: asks, as `python` does

They work on the live notebook through nbagent's frontend part (`frontend/`, shipped in
`nbagent/labextension/`), over the `nbagent.notebook` comm (`notebook_comm`): unsaved edits are seen,
each edit is one undoable step (Ctrl+Z), and `run_cell` executes through the notebook, so the output lands
in the cell. Without a live frontend (nbclient, papermill, a terminal, a frontend without the extension)
`read_notebook` reads the saved file (`NBAgent.notebook_path`, else `NBAGENT_NOTEBOOK`, else the path the
Jupyter server gives the kernel in `JPY_SESSION_NAME`) and the other tools say why they cannot act.

Safety: an edit or a deletion applies only to a cell whose source is still exactly what the agent last
read (or wrote); a cell the user changed meanwhile is refused, with a result saying to read it again, so
the user's own text is never overwritten silently. Cells the agent wrote or changed carry
`metadata.nbagent = {"run": ..., "call": ..., "action": ...}`; `cells_of(run)` lists them, and each
result links to its cell (a click scrolls there).

`NBAgent.python_in_cells = True` makes the `python` tool insert its code as a cell (after the last cell this
run wrote, else at the end) and run it there, so the analysis stays in the notebook.
"""

from __future__ import annotations

import asyncio
import copy
import difflib
import html
import json
import os
import re
import threading
import uuid
import weakref
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from ..context import ToolContext
from ..messages import TextBlock
from ..render import diff_html
from ..results import ToolResult, error_result
from ..tools import Tool
from .notebook_comm import FrontendError, NoFrontend, NotebookFrontend, frontend_for

__all__ = ["CellChange", "CellRun", "NotebookCell", "NotebookSnapshot", "cells_of", "notebook_tools",
           "summarize_output", "TOOL_NAMES"]

TOOL_NAMES = ("read_notebook", "insert_cell", "edit_cell", "delete_cell", "run_cell")
MAX_SOURCE = 6000
MAX_OUTPUT = 2500
MAX_TOTAL = 60_000
RUN_START_TIMEOUT = 20.0
"""Seconds for the notebook to start a cell run_cell asked for (then the cell may run as long as it needs)."""
RUN_REPORT_TIMEOUT = 20.0
"""Seconds for the notebook to report a cell's output once the kernel has finished running it."""
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_FRAME_SHAPE = re.compile(r"([\d,]+) rows\s*(?:×|x|&times;)\s*([\d,]+) columns")


# --------------------------------------------------------------------------------------------------
# What the tools return (details)
# --------------------------------------------------------------------------------------------------
@dataclass
class NotebookCell:
    """One cell as read: id, position (1-based), type, source, execution count, outputs (nbformat dicts)."""

    id: str
    number: int
    cell_type: str
    source: str
    execution_count: int | None = None
    outputs: list[dict[str, Any]] = field(default_factory=list)
    nbagent: dict[str, Any] | None = None


@dataclass
class NotebookSnapshot:
    """What `read_notebook` saw: the cells, where from (`live` or the saved file), and the path."""

    path: str
    live: bool
    cells: list[NotebookCell]
    total: int
    note: str = ""

    def __repr__(self) -> str:
        return f"<NotebookSnapshot {self.path!r} {'live' if self.live else 'saved'} {len(self.cells)} of {self.total} cells>"


def _link(cell_id: str, text: str | None = None) -> str:
    return (f'<a class="nba-cell-link" href="#nbagent-cell={html.escape(cell_id, quote=True)}" '
            f'title="Scroll to this cell">{html.escape(text or "cell " + cell_id)} ↗</a>')


@dataclass
class CellChange:
    """A cell the agent inserted, edited or deleted (`details` of insert_cell / edit_cell / delete_cell)."""

    action: Literal["inserted", "edited", "deleted"]
    cell_id: str
    number: int
    cell_type: str
    source: str
    diff: str
    run: str | None = None
    call: str | None = None

    def link_html(self) -> str:
        if self.action == "deleted":
            return html.escape(f"cell {self.cell_id} (deleted)")
        return _link(self.cell_id)

    def _repr_html_(self) -> str:
        return f'<div>{self.action.capitalize()} {self.link_html()}</div>{diff_html(self.diff)}'


@dataclass
class CellRun:
    """A cell the agent ran (`details` of run_cell, and of `python` with `python_in_cells`): its outputs as
    the notebook shows them, and `value`, the live object of its last expression (`Out[n]`)."""

    cell_id: str
    number: int
    source: str
    status: str
    execution_count: int | None
    outputs: list[dict[str, Any]]
    value: Any = None
    inserted: bool = False

    @property
    def error(self) -> dict[str, Any] | None:
        return next((o for o in self.outputs if o.get("output_type") == "error"), None)

    def link_html(self) -> str:
        return _link(self.cell_id)

    def _repr_html_(self) -> str:
        count = f"[{self.execution_count}]" if self.execution_count is not None else ""
        body = html.escape(summarize_outputs(self.outputs) or "(no output)")
        return (f"<div>Ran {self.link_html()} {count} · {html.escape(self.status)}</div>"
                f'<div class="nba-pre">{body}</div>')


# --------------------------------------------------------------------------------------------------
# Output summaries
# --------------------------------------------------------------------------------------------------
def _text(value: Any) -> str:
    if isinstance(value, list):
        return "".join(str(v) for v in value)
    return "" if value is None else str(value)


def _cut(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    head = text[: limit * 2 // 3]
    tail = text[-(limit // 3):]
    return f"{head}\n… ({len(text) - len(head) - len(tail):,} characters left out) …\n{tail}"


def _shape_of(value: Any) -> str | None:
    shape = getattr(value, "shape", None)
    if isinstance(shape, tuple) and getattr(value, "columns", None) is not None and len(shape) == 2:
        return f"a {type(value).__name__} {shape[0]} x {shape[1]}"
    if isinstance(shape, tuple) and type(value).__name__ in ("Series", "ndarray"):
        return f"a {type(value).__name__} of shape {' x '.join(str(n) for n in shape)}"
    return None


def summarize_output(output: dict[str, Any], value: Any = None) -> str:
    """One output of a cell, bounded: text, an error with its traceback's last lines, "an image",
    "a DataFrame 1000 x 20". `value` is the live object behind an execute_result, when known."""
    kind = output.get("output_type")
    if kind == "stream":
        text = _text(output.get("text")).rstrip("\n")
        return f"[{output.get('name', 'stdout')}] {_cut(text, MAX_OUTPUT)}" if text else ""
    if kind == "error":
        tb = [_ANSI.sub("", _text(line)) for line in output.get("traceback") or []]
        lines = "\n".join(tb).strip().splitlines()
        last = "\n".join(lines[-4:])
        return _cut(f"[error] {output.get('ename', 'Error')}: {output.get('evalue', '')}\n"
                    f"traceback (last lines):\n{last}", MAX_OUTPUT)
    data = output.get("data") or {}
    parts: list[str] = []
    shape = _shape_of(value) if value is not None else None
    html_text = _text(data.get("text/html"))
    if shape is None and html_text:
        m = _FRAME_SHAPE.search(html_text)
        if m and "dataframe" in html_text:
            shape = f"a DataFrame {m.group(1).replace(',', '')} x {m.group(2).replace(',', '')}"
        elif 'class="dataframe"' in html_text:
            rows = html_text.count("<tr") - 1
            cols = max(0, html_text.split("</tr>", 1)[0].count("<th") - 1)
            if rows >= 0 and cols:
                shape = f"a DataFrame {rows} x {cols}"
    images = [m for m in data if m.startswith("image/")]
    if shape:
        parts.append(shape)
    if images:
        parts.append(f"an image ({', '.join(images)})")
    plain = _text(data.get("text/plain"))
    if "application/vnd.jupyter.widget-view+json" in data:
        parts.append("a widget")
    elif plain and not (images and plain.startswith("<Figure")):
        parts.append(_cut(plain.rstrip("\n"), MAX_OUTPUT if not shape else 800))
    elif plain and images:
        parts.append(plain.strip())
    elif html_text and not shape:
        stripped = re.sub(r"<[^>]+>", " ", html_text)
        parts.append(f"HTML: {_cut(' '.join(stripped.split()), 400)}")
    elif not parts and data:
        parts.append(f"a display of {', '.join(sorted(data))}")
    label = "[out]" if kind == "execute_result" else "[display]"
    return f"{label} " + "\n".join(parts) if parts else ""


def summarize_outputs(outputs: list[dict[str, Any]], values: dict[int, Any] | None = None) -> str:
    pieces = []
    for out in outputs:
        value = None
        if values is not None and out.get("output_type") == "execute_result":
            value = values.get(out.get("execution_count"))
        piece = summarize_output(out, value)
        if piece:
            pieces.append(piece)
    return _cut("\n".join(pieces), MAX_OUTPUT * 2)


# --------------------------------------------------------------------------------------------------
# One kernel's notebook state
# --------------------------------------------------------------------------------------------------
class NotebookState:
    """Per shell: the frontend connection, the sources the agent last saw, and the runs' ids."""

    def __init__(self, shell: Any, frontend: NotebookFrontend | None = None) -> None:
        self.shell = shell
        self.frontend = frontend or frontend_for(shell)
        self.seen: dict[str, str] = {}
        """cell id -> the source the agent last read or wrote: an edit applies only while the cell holds it."""
        self.running_cells = 0
        self.started = 0
        """How many cells began to run in this kernel (any cell; a run request watches it move)."""
        self.finished = 0
        self._run_ids: weakref.WeakKeyDictionary[Any, str] = weakref.WeakKeyDictionary()
        self.last_written: dict[str, str] = {}
        """run id -> the id of the last cell that run inserted (python_in_cells puts the next one after it)."""
        self._hooked = False
        self._hook_events()

    def _hook_events(self) -> None:
        events = getattr(self.shell, "events", None)
        if events is None or self._hooked:
            return

        def pre(*_a: Any) -> None:
            self.running_cells += 1
            self.started += 1

        def post(*_a: Any) -> None:
            self.running_cells = max(0, self.running_cells - 1)
            self.finished += 1

        try:
            events.register("pre_run_cell", pre)
            events.register("post_run_cell", post)
            self._hooked = True
        except Exception:  # pragma: no cover - a shell without these events
            pass

    def run_id(self, ctx: ToolContext | None) -> str | None:
        run = getattr(ctx, "run", None)
        if run is None:
            return None
        try:
            found = self._run_ids.get(run)
            if found is None:
                found = self._run_ids[run] = uuid.uuid4().hex[:8]
            return found
        except TypeError:  # pragma: no cover - a run that cannot be weakly referenced
            return None

    def mark(self, ctx: ToolContext | None, action: str) -> dict[str, Any]:
        return {"run": self.run_id(ctx), "call": getattr(ctx, "call_id", None), "action": action}

    def config(self, name: str, default: Any = None) -> Any:
        session = getattr(self.shell, "_nbagent_session", None)
        return getattr(getattr(session, "config", None), name, default)

    # -- the saved file --------------------------------------------------------------------------------------------
    def saved_path(self) -> Path | None:
        candidates = [self.config("notebook_path"), os.environ.get("NBAGENT_NOTEBOOK"),
                      os.environ.get("JPY_SESSION_NAME"), self.frontend.info.get("path")]
        for raw in candidates:
            if not raw:
                continue
            path = Path(str(raw)).expanduser()
            tries = [path] if path.is_absolute() else [Path.cwd() / path, Path.cwd() / path.name]
            for p in tries:
                if p.is_file():
                    return p
        return None

    def read_saved(self) -> tuple[str, list[NotebookCell]]:
        path = self.saved_path()
        if path is None:
            raise FileNotFoundError(
                "the notebook's file is not known here: set %config NBAgent.notebook_path = \"name.ipynb\" "
                "(or NBAGENT_NOTEBOOK in the kernel's environment)")
        nb = json.loads(path.read_text(encoding="utf-8"))
        cells = []
        for i, c in enumerate(nb.get("cells") or [], 1):
            cells.append(NotebookCell(
                id=str(c.get("id") or f"#{i}"), number=i, cell_type=c.get("cell_type", "code"),
                source=_text(c.get("source")), execution_count=c.get("execution_count"),
                outputs=list(c.get("outputs") or []), nbagent=(c.get("metadata") or {}).get("nbagent")))
        return str(path), cells

    # -- the live notebook ----------------------------------------------------------------------------------------
    async def read_live(self) -> tuple[str, list[NotebookCell]]:
        result = await self.frontend.request("read")
        cells = [self._cell(c) for c in result.get("cells") or []]
        for c in cells:
            self.seen[c.id] = c.source
        return str(result.get("path") or ""), cells

    @staticmethod
    def _cell(c: dict[str, Any]) -> NotebookCell:
        return NotebookCell(id=str(c.get("id")), number=int(c.get("index", 0)) + 1,
                            cell_type=str(c.get("cell_type", "code")), source=_text(c.get("source")),
                            execution_count=c.get("execution_count"), outputs=list(c.get("outputs") or []),
                            nbagent=c.get("nbagent"))

    def out_values(self) -> dict[int, Any]:
        out = (getattr(self.shell, "user_ns", None) or {}).get("Out")
        return out if isinstance(out, dict) else {}


_states_lock = threading.Lock()


def notebook_state(shell: Any) -> NotebookState:
    with _states_lock:
        state = getattr(shell, "_nbagent_notebook", None)
        if not isinstance(state, NotebookState):
            state = NotebookState(shell)
            shell._nbagent_notebook = state
        return state


def cells_of(run: Any) -> list[CellChange | CellRun]:
    """The cells a run wrote, changed, deleted or ran, in call order (from its calls' results)."""
    found = []
    for rec in getattr(run, "calls", []):
        details = getattr(getattr(rec, "result", None), "details", None)
        if isinstance(details, (CellChange, CellRun)):
            found.append(details)
    return found


# --------------------------------------------------------------------------------------------------
# Formatting what the model reads
# --------------------------------------------------------------------------------------------------
def _cell_text(cell: NotebookCell, values: dict[int, Any]) -> str:
    head = f'--- cell {cell.number} · id "{cell.id}" · {cell.cell_type}'
    if cell.cell_type == "code":
        head += f" · ran as [{cell.execution_count}]" if cell.execution_count is not None else " · not run"
    if cell.nbagent:
        head += " · written by nbagent"
    source = cell.source
    if len(source) > MAX_SOURCE:
        source = source[:MAX_SOURCE] + f"\n… ({len(cell.source) - MAX_SOURCE:,} more characters)"
    parts = [head, source if source else "(empty)"]
    if cell.outputs:
        parts.append(">>> output\n" + (summarize_outputs(cell.outputs, values) or "(nothing shown)"))
    return "\n".join(parts)


def _diff(before: str, after: str, label: str) -> str:
    lines = difflib.unified_diff(before.splitlines(), after.splitlines(), f"{label} (before)", f"{label} (after)",
                                 lineterm="", n=3)
    return "\n".join(lines)


def _short(text: str, n: int = 40) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= n else line[: n - 1] + "…"


_CANNOT_EDIT = ("{what}: {why}. The notebook can only be changed through nbagent's frontend part in JupyterLab "
                "or Notebook 7 while the notebook is open; nothing was changed.")


# --------------------------------------------------------------------------------------------------
# The tools
# --------------------------------------------------------------------------------------------------
def notebook_tools(shell: Any) -> list[Tool]:
    """The five notebook tools for this shell's notebook."""
    state = notebook_state(shell)

    async def read_notebook(cell_id: str | None = None, start: int | None = None, end: int | None = None,
                            ctx: ToolContext = None) -> ToolResult:  # type: ignore[assignment]
        """Read the notebook this kernel runs in: each cell's id, type, source (unsaved edits included),
        execution count, and a short summary of its outputs. Use the ids with edit_cell, insert_cell,
        delete_cell and run_cell.

        Args:
            cell_id: read only this cell.
            start: the first cell to read (1-based position).
            end: the last cell to read (inclusive).
        """
        note = ""
        try:
            path, cells = await state.read_live()
            live = True
        except (NoFrontend, FrontendError) as exc:
            try:
                path, cells = state.read_saved()
            except (OSError, ValueError) as err:
                return error_result(f"The notebook cannot be read: there is no live notebook ({exc}), and {err}.")
            live = False
            note = f" (the saved file: unsaved edits are not included, because {exc})"
        total = len(cells)
        picked = cells
        if cell_id is not None:
            picked = [c for c in cells if c.id == cell_id]
            if not picked:
                ids = ", ".join(f'"{c.id}"' for c in cells[:40])
                return error_result(f'There is no cell with id "{cell_id}" in {path}. Its cells: {ids}.')
        elif start is not None or end is not None:
            lo = max(1, start or 1)
            hi = min(total, end or total)
            picked = [c for c in cells if lo <= c.number <= hi]
        values = state.out_values() if live else {}
        where = "live, unsaved edits included" if live else "saved file"
        header = f"Notebook {path or '(unsaved)'} ({where}) · {total} cell{'s' if total != 1 else ''}"
        if len(picked) != total:
            header += f" · showing {len(picked)}"
        body = []
        size = len(header)
        shown = 0
        for c in picked:
            text = _cell_text(c, values)
            if size + len(text) > MAX_TOTAL and shown:
                body.append(f"… {len(picked) - shown} more cells left out: read them with start={c.number}")
                break
            body.append(text)
            size += len(text)
            shown += 1
        text = header + note + "\n" + "\n".join(body)
        return ToolResult([TextBlock(text)], details=NotebookSnapshot(path, live, picked, total, note.strip()))

    def _refusal(what: str, exc: Exception) -> ToolResult:
        if isinstance(exc, NoFrontend):
            return error_result(_CANNOT_EDIT.format(what=what, why=str(exc)))
        return error_result(f"{what}: {exc}")

    async def insert_cell(source: str, cell_type: Literal["code", "markdown", "raw"] = "code",
                          after: str | None = None, ctx: ToolContext = None) -> ToolResult:  # type: ignore[assignment]
        """Insert a new cell into the notebook (not run; use run_cell to run it).

        Args:
            source: the cell's text.
            cell_type: code, markdown or raw.
            after: the id of the cell to insert after; none: at the end of the notebook.
        """
        try:
            result = await state.frontend.request("insert", source=source, cell_type=cell_type, after=after,
                                                  mark=state.mark(ctx, "inserted"))
        except (NoFrontend, FrontendError) as exc:
            return _refusal("The cell was not inserted", exc)
        new_id = str(result.get("cell_id"))
        number = int(result.get("index", 0)) + 1
        state.seen[new_id] = source
        rid = state.run_id(ctx)
        if rid:
            state.last_written[rid] = new_id
        diff = _insert_diff(state, source, cell_type, after)
        place = f'after cell "{after}"' if after else "at the end"
        return ToolResult([TextBlock(f'Inserted a {cell_type} cell with id "{new_id}" {place} (cell {number} of '
                                     f'{result.get("count", "?")}). It has not been run.')],
                          details=CellChange("inserted", new_id, number, cell_type, source, diff, rid,
                                             getattr(ctx, "call_id", None)))

    async def edit_cell(cell_id: str, old: str, new: str, ctx: ToolContext = None) -> ToolResult:  # type: ignore[assignment]
        """Replace an exact piece of text in one cell. `old` must occur exactly once in the cell (include
        more of the surrounding text if needed). Read the notebook first: the edit applies only if the cell
        still holds what you read.

        Args:
            cell_id: the cell's id (from read_notebook).
            old: the exact text to replace.
            new: the text to put in its place.
        """
        if old == "":
            return error_result("old is empty: give the exact text of the cell to replace")
        if old == new:
            return error_result("old and new are the same: there is nothing to change")
        before = state.seen.get(cell_id)
        if before is None:
            return error_result(f'Read cell "{cell_id}" first (read_notebook with cell_id="{cell_id}"): a cell is '
                                "edited only from what you have seen of it. Nothing was changed.")
        count = before.count(old)
        if count == 0:
            return error_result(f'old does not occur in cell "{cell_id}" (as last read). Its source:\n'
                                f"{_cut(before, 3000)}\nNothing was changed.")
        if count > 1:
            return error_result(f'old occurs {count} times in cell "{cell_id}"; include more of the surrounding '
                                "text so it occurs once. Nothing was changed.")
        try:
            result = await state.frontend.request("edit", cell_id=cell_id, old=old, new=new, expected=before,
                                                  mark=state.mark(ctx, "edited"))
        except (NoFrontend, FrontendError) as exc:
            return _refusal("The cell was not edited", exc)
        after = str(result.get("source", before.replace(old, new, 1)))
        state.seen[cell_id] = after
        number = int(result.get("index", 0)) + 1
        diff = _diff(before, after, f"cell {cell_id}")
        return ToolResult([TextBlock(f'Edited cell "{cell_id}" (cell {number}); it has not been run again.\n{diff}')],
                          details=CellChange("edited", cell_id, number, "", after, diff, state.run_id(ctx),
                                             getattr(ctx, "call_id", None)))

    async def delete_cell(cell_id: str, ctx: ToolContext = None) -> ToolResult:  # type: ignore[assignment]
        """Delete one cell from the notebook (the user can undo it with Ctrl+Z / z). Read it first: a cell
        is deleted only while it still holds what you read.

        Args:
            cell_id: the cell's id (from read_notebook).
        """
        before = state.seen.get(cell_id)
        if before is None:
            return error_result(f'Read cell "{cell_id}" first (read_notebook with cell_id="{cell_id}"): a cell is '
                                "deleted only after you have seen it. Nothing was changed.")
        try:
            result = await state.frontend.request("delete", cell_id=cell_id, expected=before)
        except (NoFrontend, FrontendError) as exc:
            return _refusal("The cell was not deleted", exc)
        state.seen.pop(cell_id, None)
        number = int(result.get("index", 0)) + 1
        diff = _diff(before, "", f"cell {cell_id}")
        return ToolResult([TextBlock(f'Deleted cell "{cell_id}" (it was cell {number}).')],
                          details=CellChange("deleted", cell_id, number, "", before, diff, state.run_id(ctx),
                                             getattr(ctx, "call_id", None)))

    async def run_cell(cell_id: str, ctx: ToolContext = None) -> ToolResult:  # type: ignore[assignment]
        """Run one cell in the notebook, as the user would: its output appears under it, and you get that
        output back (the value of its last expression stays a live object).

        Args:
            cell_id: the cell's id (from read_notebook or insert_cell).
        """
        return await _run(state, cell_id, ctx)

    tools = [
        Tool(read_notebook, read_only=True, describe_activity=_read_label,
             describe_completed_activity=lambda a, r: "Read the notebook" if a.get("cell_id") is None
             else f"Read cell {a.get('cell_id')}"),
        Tool(insert_cell, edits_files=True, capability="write", execution_mode="sequential",
             describe_activity=lambda a: f"Inserting a {a.get('cell_type', 'code')} cell" + (
                 f" after cell {a.get('after')}" if a.get("after") else " at the end"),
             describe_completed_activity=_done_label("insert")),
        Tool(edit_cell, edits_files=True, capability="write", execution_mode="sequential",
             describe_activity=lambda a: f"Editing cell {a.get('cell_id')}",
             describe_completed_activity=_done_label("edit")),
        Tool(delete_cell, edits_files=True, capability="write", execution_mode="sequential",
             describe_activity=lambda a: f"Deleting cell {a.get('cell_id')}",
             describe_completed_activity=_done_label("delete")),
        Tool(run_cell, destructive=True, capability="execute", execution_mode="sequential",
             describe_activity=lambda a: f"Running cell {a.get('cell_id')}",
             describe_completed_activity=lambda a, r: (f"Ran cell {a.get('cell_id')}" if isinstance(r, CellRun)
                                                       else f"Did not run cell {a.get('cell_id')}")),
    ]
    previews = {"insert_cell": lambda a: _insert_diff(state, a.get("source", ""), a.get("cell_type", "code"),
                                                      a.get("after")),
                "edit_cell": lambda a: _edit_preview(state, a),
                "delete_cell": lambda a: _delete_preview(state, a)}
    for t in tools:
        if t.name in previews:
            t.preview = previews[t.name]  # the view shows this diff with the Approve / Deny buttons
    return tools


def _read_label(a: Any) -> str:
    if a.get("cell_id"):
        return f"Reading cell {a.get('cell_id')}"
    return "Reading the notebook"


def _done_label(verb: str):
    def label(a: Any, r: Any) -> str:
        if isinstance(r, CellChange):
            return f"{r.action.capitalize()} cell {r.cell_id}"
        target = f"cell {a.get('cell_id')}" if a.get("cell_id") else "a cell"
        return f"Did not {verb} {target}"

    return label


def _insert_diff(state: NotebookState, source: str, cell_type: str, after: str | None) -> str:
    if after:
        near = state.seen.get(after)
        where = f'# a new {cell_type} cell, after cell "{after}"' + (f" ({_short(near)})" if near else "")
    else:
        where = f"# a new {cell_type} cell, at the end of the notebook"
    return where + "\n" + "\n".join("+" + line for line in (source.splitlines() or [""]))


def _edit_preview(state: NotebookState, a: Any) -> str:
    cell_id, old, new = a.get("cell_id"), a.get("old") or "", a.get("new") or ""
    before = state.seen.get(cell_id)
    if before is not None and before.count(old) == 1 and old:
        return _diff(before, before.replace(old, new, 1), f"cell {cell_id}")
    return (f'# cell "{cell_id}"\n' + "\n".join("-" + line for line in old.splitlines())
            + "\n" + "\n".join("+" + line for line in new.splitlines()))


def _delete_preview(state: NotebookState, a: Any) -> str:
    cell_id = a.get("cell_id")
    before = state.seen.get(cell_id)
    return f'# delete cell "{cell_id}"\n' + "\n".join("-" + line for line in (before or "(not read yet)").splitlines())


async def _run(state: NotebookState, cell_id: str, ctx: ToolContext | None, *, inserted: bool = False) -> ToolResult:
    if not await _cells_idle(state):
        return error_result(
            f'Cell "{cell_id}" was not run: a cell of this notebook is running right now (probably the one that '
            "waits for this run, with --wait or `await run`), and the notebook runs one cell at a time. Use the "
            "python tool instead, or start the run without waiting for it.")
    try:
        result = await _await_run(state, cell_id)
    except (NoFrontend, FrontendError) as exc:
        if isinstance(exc, NoFrontend):
            return error_result(f'Cell "{cell_id}" was not run: {exc}. Cells can only be run through nbagent\'s '
                                "frontend part in JupyterLab or Notebook 7; the python tool runs code without it.")
        return error_result(f'Cell "{cell_id}" was not run: {exc}')
    cell = NotebookState._cell(result.get("cell") or {})
    status = str(result.get("status", "ok"))
    values = state.out_values()
    value = values.get(cell.execution_count) if cell.execution_count is not None else None
    state.seen[cell.id] = cell.source
    summary = summarize_outputs(cell.outputs, values) or "(no output)"
    count = f"[{cell.execution_count}]" if cell.execution_count is not None else ""
    details = CellRun(cell.id, cell.number, cell.source, status, cell.execution_count, cell.outputs, value, inserted)
    head = f'Ran cell "{cell.id}" {count}'.rstrip() + f" · {status}"
    return ToolResult([TextBlock(f"{head}\n{summary}")], details=details, is_error=status == "error")


async def _await_run(state: NotebookState, cell_id: str) -> Any:
    """Ask the notebook to run a cell and wait for its output, for as long as the cell runs in the kernel,
    but not forever when the notebook went silent: the cell must start within RUN_START_TIMEOUT, and the
    answer must come within RUN_REPORT_TIMEOUT of the kernel finishing it."""
    loop = asyncio.get_running_loop()
    started, finished = state.started, state.finished
    task = asyncio.ensure_future(state.frontend.request("run", timeout=None, cell_id=cell_id))
    t0 = loop.time()
    idle_since: float | None = None
    try:
        while True:
            done, _ = await asyncio.wait({task}, timeout=0.25)
            if done:
                return task.result()
            now = loop.time()
            if state.started == started:
                if now - t0 > RUN_START_TIMEOUT:
                    raise NoFrontend(f"the notebook did not start the cell within {RUN_START_TIMEOUT:g} s (is it "
                                     "still open, and is its kernel this one?)")
            elif state.finished > finished and state.running_cells == 0:
                idle_since = idle_since if idle_since is not None else now
                if now - idle_since > RUN_REPORT_TIMEOUT:
                    raise NoFrontend("the cell ran in the kernel, but the notebook did not report its output "
                                     f"within {RUN_REPORT_TIMEOUT:g} s (was it closed?)")
            else:
                idle_since = None
    finally:
        if not task.done():
            task.cancel()


async def _cells_idle(state: NotebookState) -> bool:
    """Whether no cell is running; waits a moment for the cell that started the run to finish."""
    for _ in range(40):
        if state.running_cells <= 0:
            return True
        await asyncio.sleep(0.05)
    return state.running_cells <= 0


# --------------------------------------------------------------------------------------------------
# python_in_cells: the python tool, writing its code as a cell and running it there
# --------------------------------------------------------------------------------------------------
def cell_python(shell: Any, original: Tool) -> Tool:
    """The `python` tool, which (while `NBAgent.python_in_cells` is on and the notebook is live) inserts
    its code as a cell and runs it there; otherwise it runs as before."""
    state = notebook_state(shell)

    def python(code: str, ctx: ToolContext = None) -> Any:  # type: ignore[assignment]
        if not state.config("python_in_cells", False):
            return original.fn(code=code, ctx=ctx)
        return _python_cell(code, ctx)

    async def _python_cell(code: str, ctx: ToolContext | None) -> Any:
        if not await _cells_idle(state):
            return await _fallback(code, ctx, "a cell of the notebook is running (it runs one cell at a time)")
        rid = state.run_id(ctx)
        after = state.last_written.get(rid) if rid else None
        try:
            result = await state.frontend.request("insert", source=code, cell_type="code", after=after,
                                                  mark=state.mark(ctx, "python"))
        except FrontendError as exc:
            if after:  # the cell it followed is gone: put it at the end
                try:
                    result = await state.frontend.request("insert", source=code, cell_type="code", after=None,
                                                          mark=state.mark(ctx, "python"))
                except (NoFrontend, FrontendError) as exc2:
                    return _fallback(code, ctx, str(exc2))
            else:
                return _fallback(code, ctx, str(exc))
        except NoFrontend as exc:
            return _fallback(code, ctx, str(exc))
        new_id = str(result.get("cell_id"))
        state.seen[new_id] = code
        if rid:
            state.last_written[rid] = new_id
        return await _run(state, new_id, ctx, inserted=True)

    async def _fallback(code: str, ctx: ToolContext | None, why: str) -> Any:
        result = await asyncio.to_thread(original.fn, code=code, ctx=ctx)
        if isinstance(result, ToolResult):
            note = TextBlock(f"(ran in the kernel, not as a cell: {why})")
            return ToolResult([*result.content, note], details=result.details, is_error=result.is_error,
                              terminate=result.terminate)
        return result

    python.__doc__ = original.fn.__doc__
    # the same tool (schema, permissions, grants, timeout, labels) with this function behind it
    tool = copy.copy(original)
    tool.fn = python
    tool.__wrapped__ = python
    done = original.describe_completed_activity
    tool.describe_completed_activity = lambda a, r: (
        f"Ran cell {r.cell_id}" if isinstance(r, CellRun) else done(a, r) if done else "Ran Python")
    return tool
