"""Notebook tools: the agent reads the notebook's cells, writes cells, and runs them where the user sees them.

    read_notebook(cell_id=None, start=None, end=None)   read-only
    insert_cell(source, cell_type="code", after=None)   a file edit: default mode asks, acceptEdits allows
    edit_cell(cell_id, old, new)                        a file edit
    delete_cell(cell_id)                                a file edit
    run_cell(cell_id)                                   runs code: asks, as `python` does

They work on the live notebook: through the server's shared document where a collaboration engine runs
(shared.py: no tab needed, edits as hunks that keep a collaborator's typing elsewhere in the cell, `run_cell`
in this kernel with its outputs written into the document), else through nbagent's frontend part over the
`nbagent.notebook` comm (comm.py): unsaved edits are seen, each edit is one undoable step (Ctrl+Z), and
`run_cell` executes through the notebook, so the output lands in the cell. Results and the header say which.
Without a live frontend (nbclient, papermill, a terminal, a frontend without the extension)
`read_notebook` reads the saved file (`NBAgent.notebook_path`, else `NBAGENT_NOTEBOOK`, else the path the
Jupyter server gives the kernel in `JPY_SESSION_NAME`) and the other tools say why they cannot act.

Safety: an edit or a deletion applies only to a cell whose source is still exactly what the agent last
read (or wrote); a cell the user changed meanwhile is refused, with a result saying to read it again, so
the user's own text is never overwritten silently. Cells the agent wrote or changed carry
`metadata.nbagent = {"run": ..., "call": ..., "action": ...}`; `cells_of(run)` lists them, and each
result links to its cell (a click scrolls there).

`NBAgent.python_in_cells = True` makes the `python` tool insert its code as a cell (after the last cell this
run wrote, else at the end) and run it there, so the analysis stays in the notebook.

This module defines the tools; what they return, one kernel's notebook state and running a cell through the
notebook are in cells.py, the summaries of outputs in outputs.py, `python_in_cells` in python_cells.py.
"""

from __future__ import annotations

import difflib
import os
from typing import Any, Callable, Literal

from nbagent.calls.hooks import Block
from nbagent.context import ToolContext
from nbagent.messages import TextBlock
from nbagent.safety.gate import Screened
from nbagent.safety.protected import Target
from nbagent.toolbox import python_pattern_matches as code_matcher
from nbagent.tools.definition import Tool
from nbagent.tools.results import ToolResult, error_result

from .cells import (
    CANNOT_RUN,
    SAVED,
    SHARED,
    CellChange,
    CellRun,
    NotebookCell,
    NotebookSnapshot,
    NotebookState,
    cell_name,
    cells_of,
    notebook_state,
    run_cell_in_notebook,
)
from .comm import FrontendError, NoFrontend
from .hunks import lands_apart
from .outputs import cut_text, summarize_output, summarize_outputs

__all__ = ["CellChange", "CellRun", "NotebookCell", "NotebookSnapshot", "cells_of", "notebook_tools",
           "stale_guard", "summarize_output", "TOOL_NAMES"]

TOOL_NAMES = ("read_notebook", "insert_cell", "edit_cell", "delete_cell", "run_cell")
MAX_SOURCE = 6000
MAX_TOTAL = 60_000


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


_CANNOT_EDIT = ("{what}: {why}. The notebook can only be changed while it is open in JupyterLab or Notebook 7 with "
                "nbagent's frontend part, or, with no tab open, through the server's shared document where "
                "jupyter-collaboration runs; nothing was changed.")


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
        where = ("live shared document" if state.via == SHARED else "live, unsaved edits included") if live \
            else "saved file"
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
        return ToolResult([TextBlock(text)], details=NotebookSnapshot(path, live, picked, total, note.strip(),
                                                                      via=state.via if live else SAVED))

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
            result = await state.request("insert", source=source, cell_type=cell_type, after=after,
                                         mark=state.mark(ctx, "inserted", source))
        except (NoFrontend, FrontendError) as exc:
            return _refusal("The cell was not inserted", exc)
        new_id = str(result.get("cell_id"))
        number = int(result.get("index", 0)) + 1
        state.seen[new_id] = source
        state.names[new_id] = cell_name(NotebookCell(new_id, number, cell_type, source, None, [], None))
        rid = state.run_id(ctx)
        if rid:
            state.last_written[rid] = new_id
        diff = _insert_diff(state, source, cell_type, after)
        place = f'after cell "{after}"' if after else "at the end"
        return ToolResult([TextBlock(f'Inserted a {cell_type} cell with id "{new_id}" {place} (cell {number} of '
                                     f'{result.get("count", "?")}). It has not been run.')],
                          details=CellChange("inserted", new_id, number, cell_type, source, diff, rid,
                                             getattr(ctx, "call_id", None), state.name(new_id), via=state.via))

    async def edit_cell(cell_id: str, old: str, new: str, ctx: ToolContext = None) -> ToolResult:  # type: ignore[assignment]
        """Replace an exact piece of text in one cell. `old` must occur exactly once in the cell (include
        more of the surrounding text if needed). Read the notebook first: the edit applies only if the cell
        still holds what you read.

        Args:
            cell_id: the cell's id (from read_notebook).
            old: the exact text to replace.
            new: the text to put in its place.
        """
        problem = _edit_problem(state, cell_id, old, new)
        if problem:
            return error_result(problem)
        before = state.seen[cell_id]
        view = Screened(before)
        if view.tokens:  # a cell holding a secret: `old` was found in its screened text; the page gets it whole
            old, new = before, view.replace(old, new, 1)
        try:
            result = await state.request("edit", cell_id=cell_id, old=old, new=new, expected=before,
                                         mark=state.mark(ctx, "edited"))
        except (NoFrontend, FrontendError) as exc:
            return _refusal("The cell was not edited", exc)
        after = str(result.get("source", before.replace(old, new, 1)))
        state.seen[cell_id] = after
        number = int(result.get("index", 0)) + 1
        diff = _diff(before, before.replace(old, new, 1), state.name(cell_id))  # this edit's change, and only it
        kept = ("\nSomeone else changed other parts of the cell meanwhile; their text was kept. The cell now "
                f"holds:\n{cut_text(after, 3000)}") if result.get("kept_others") else ""
        return ToolResult([TextBlock(f'Edited cell "{cell_id}" (cell {number}); it has not been run again.\n{diff}'
                                     + kept)],
                          details=CellChange("edited", cell_id, number, "", after, diff, state.run_id(ctx),
                                             getattr(ctx, "call_id", None), state.name(cell_id), via=state.via))

    async def delete_cell(cell_id: str, ctx: ToolContext = None) -> ToolResult:  # type: ignore[assignment]
        """Delete one cell from the notebook (the user can undo it with Ctrl+Z / z). Read it first: a cell
        is deleted only while it still holds what you read.

        Args:
            cell_id: the cell's id (from read_notebook).
        """
        problem = _delete_problem(state, cell_id)
        if problem:
            return error_result(problem)
        before = state.seen[cell_id]
        try:
            result = await state.request("delete", cell_id=cell_id, expected=before)
        except (NoFrontend, FrontendError) as exc:
            return _refusal("The cell was not deleted", exc)
        state.seen.pop(cell_id, None)
        number = int(result.get("index", 0)) + 1
        diff = _diff(before, "", state.name(cell_id))
        return ToolResult([TextBlock(f'Deleted cell "{cell_id}" (it was cell {number}).')],
                          details=CellChange("deleted", cell_id, number, "", before, diff, state.run_id(ctx),
                                             getattr(ctx, "call_id", None), state.name(cell_id), via=state.via))

    async def run_cell(cell_id: str, code: str | None = None,
                       ctx: ToolContext = None) -> ToolResult:  # type: ignore[assignment]
        """Run one cell in the notebook, as the user would: its output appears under it, and you get that
        output back (the value of its last expression stays a live object). The cell runs only while it
        holds exactly the code shown for approval: what you last read of it (or `code`).

        Args:
            cell_id: the cell's id (from read_notebook or insert_cell).
            code: the exact source you expect the cell to hold; left out: what you last read of it.
        """
        if code is None:  # never read: read it now, and let the model ask again for exactly that code
            return await _unread_cell(state, cell_id)
        return await run_cell_in_notebook(state, cell_id, ctx, expected=code)

    def notebook_written(args: Any, ctx: Any = None) -> list[Target]:
        """What an edit of cells writes: the notebook's saved file (when known), judged by kind like any
        file (a notebook inside a hidden folder or an environment asks), below the workspace when it is in
        it; the cells themselves change in the open document the person sees, which the page saves."""
        path = state.saved_path()
        if path is None:
            return []
        real = os.path.realpath(path)
        root = getattr(getattr(ctx, "constraints", None), "workspace", None) or os.getcwd()
        root = os.path.realpath(root)
        inside = real == root or real.startswith(root.rstrip(os.sep) + os.sep)
        return [Target(real, root if inside else os.path.dirname(real))]

    tools = [
        Tool(read_notebook, read_only=True,
             describe_activity=lambda a: f"Reading {state.name(a.get('cell_id'))}" if a.get("cell_id")
             else "Reading the notebook",
             describe_completed_activity=lambda a, r: "Read the notebook" if a.get("cell_id") is None
             else f"Read {state.name(a.get('cell_id'))}"),
        Tool(insert_cell, edits_files=True, capability="write", execution_mode="sequential",
             writes=notebook_written,
             describe_activity=lambda a: f"Inserting a {a.get('cell_type', 'code')} cell" + (
                 f" after {state.name(a.get('after'))}" if a.get("after") else " at the end"),
             describe_completed_activity=_done_label(state, "insert")),
        Tool(edit_cell, edits_files=True, capability="write", execution_mode="sequential",
             writes=notebook_written,
             describe_activity=lambda a: f"Editing {state.name(a.get('cell_id'))}",
             describe_completed_activity=_done_label(state, "edit")),
        Tool(delete_cell, edits_files=True, capability="write", execution_mode="sequential",
             writes=notebook_written,
             describe_activity=lambda a: f"Deleting {state.name(a.get('cell_id'))}",
             describe_completed_activity=_done_label(state, "delete")),
        Tool(run_cell, destructive=True, capability="execute", execution_mode="sequential",
             prepare_arguments=lambda a: _pin_code(state, a),
             rule_matcher=code_matcher,  # a grant or allow rule covers exactly the code it spells
             suggest_grant=lambda a: a.get("code") if isinstance(a.get("code"), str) else None,
             describe_activity=lambda a: f"Running {state.name(a.get('cell_id'))}",
             describe_completed_activity=lambda a, r: (f"Ran {state.name(a.get('cell_id'))}" if isinstance(r, CellRun)
                                                       else f"Did not run {state.name(a.get('cell_id'))}")),
    ]
    previews = {"insert_cell": lambda a: _insert_diff(state, a.get("source", ""), a.get("cell_type", "code"),
                                                      a.get("after")),
                "edit_cell": lambda a: _edit_preview(state, a),
                "delete_cell": lambda a: _delete_preview(state, a),
                "run_cell": lambda a: _run_preview(state, a)}
    tools[-1].badge = "runs code"
    for t in tools:
        if t.name in previews:
            t.preview = previews[t.name]  # the view shows this diff with the Approve / Deny buttons
    return tools


def _edit_problem(state: NotebookState, cell_id: str, old: str, new: str) -> str | None:
    """Why edit_cell cannot apply these arguments, from what the agent has read (None: it can). The guard
    asks this before anyone is asked to approve, and the tool again as it runs."""
    if old == "":
        return "old is empty: give the exact text of the cell to replace"
    if old == new:
        return "old and new are the same: there is nothing to change"
    before = state.seen.get(cell_id)
    if before is None:
        return (f'Read cell "{cell_id}" first (read_notebook with cell_id="{cell_id}"): a cell is edited only from '
                "what you have seen of it. Nothing was changed.")
    view = Screened(before)  # `old` is looked for in what the model can see: no oracle on a secret
    count = view.count(old)
    if count == 0:
        return (f'old does not occur in cell "{cell_id}" (as last read). Its source:\n{cut_text(view.text, 3000)}\n'
                "Nothing was changed.")
    if count > 1:
        return (f'old occurs {count} times in cell "{cell_id}"; include more of the surrounding text so it occurs '
                "once. Nothing was changed.")
    return None


def _delete_problem(state: NotebookState, cell_id: str) -> str | None:
    if state.seen.get(cell_id) is None:
        return (f'Read cell "{cell_id}" first (read_notebook with cell_id="{cell_id}"): a cell is deleted only '
                "after you have seen it. Nothing was changed.")
    return None


def _pin_code(state: NotebookState, a: Any) -> Any:
    """run_cell's arguments with the code it will run filled in from what the agent last read of the
    cell: that code is what the approval shows and binds to, and the notebook runs the cell only while
    it holds exactly that code (an edit made in between makes the run refuse, not run something else)."""
    if isinstance(a, dict) and a.get("code") is None and isinstance(a.get("cell_id"), str):
        seen = state.seen.get(a["cell_id"], state.saved_seen.get(a["cell_id"]))
        if seen is not None:
            a = {**a, "code": seen}
    return a


def _run_preview(state: NotebookState, a: Any) -> str:
    code = a.get("code")
    if code is None:
        return ""
    head = f"# run {state.name(a.get('cell_id'))}: exactly this code"
    return head + "\n" + "\n".join(" " + line for line in (code.splitlines() or [""]))


async def _unread_cell(state: NotebookState, cell_id: str) -> ToolResult:
    try:
        _, cells = await state.read_live()
    except (NoFrontend, FrontendError) as exc:
        return error_result(f'Cell "{cell_id}" was not run: {exc}. {CANNOT_RUN}')
    cell = next((c for c in cells if c.id == cell_id), None)
    if cell is None:
        return error_result(f'There is no cell with id "{cell_id}" in the notebook. Nothing was run.')
    return error_result(f'Cell "{cell_id}" was not run: a cell runs only as the code you have seen of it, and '
                        f"you had not read it. It holds:\n{cut_text(cell.source, 3000)}\nCall run_cell again "
                        "to run exactly this code.")


def stale_guard(shell: Any) -> Callable[..., Any]:
    """A `before_tool_call` hook: an edit, deletion or run of a cell that changed since the agent read it
    (the person typed in it meanwhile) is refused before anyone is asked to approve it, not after the
    click (the page, or the shared document, still checks again as it applies the change). Through the shared
    document an edit goes on when what changed lies apart from the text it replaces."""
    state = notebook_state(shell)

    async def refuse_stale(call: Any, ctx: Any) -> Block | None:
        if call.name not in ("edit_cell", "delete_cell", "run_cell"):
            return None
        args = call.arguments or {}
        cell_id = args.get("cell_id")
        expected = args.get("code") if call.name == "run_cell" else None
        if not isinstance(cell_id, str):
            return None
        if call.name == "edit_cell" and isinstance(args.get("old"), str) and isinstance(args.get("new"), str):
            problem = _edit_problem(state, cell_id, args["old"], args["new"])
        else:
            problem = _delete_problem(state, cell_id) if call.name == "delete_cell" else None
        if problem:  # it would fail as it ran: say so now, not after someone approved it
            return Block(problem.removesuffix(" Nothing was changed.").rstrip(".") + " (nothing was asked or done)")
        expected = expected if isinstance(expected, str) else state.seen.get(cell_id)
        if expected is None:
            if call.name != "run_cell":
                return None
            try:  # a run of a cell the agent has not read: pin what it holds now, so the approval shows it
                now = await state.live_source(cell_id)
            except (NoFrontend, FrontendError):
                return None
            if now is None:
                return None
            return {"code": now}
        try:
            now = await state.live_source(cell_id)
        except (NoFrontend, FrontendError):
            return None  # no live notebook: the tool itself says why it cannot act
        if now is None or now == expected:
            return None
        if call.name == "edit_cell" and state.via == SHARED and lands_apart(expected, now, args.get("old"),
                                                                            args.get("new")):
            return None  # someone typed elsewhere in the cell: the shared document keeps it and applies the hunks
        return Block(f"{state.name(cell_id)} changed since you last read it (someone edited it meanwhile), so "
                     "nothing was asked or done. Read it again with read_notebook and base the change on what "
                     "it holds now")

    return refuse_stale


def _done_label(state: NotebookState, verb: str):
    def label(a: Any, r: Any) -> str:
        if isinstance(r, CellChange):
            return f"{r.action.capitalize()} {r.name or state.name(r.cell_id)}"
        target = state.name(a.get("cell_id")) if a.get("cell_id") else "a cell"
        return f"Did not {verb} {target}"

    return label


def _insert_diff(state: NotebookState, source: str, cell_type: str, after: str | None) -> str:
    if after:
        where = f"# a new {cell_type} cell, after {state.name(after)}"
    else:
        where = f"# a new {cell_type} cell, at the end of the notebook"
    return where + "\n" + "\n".join("+" + line for line in (source.splitlines() or [""]))


def _edit_preview(state: NotebookState, a: Any) -> str:
    cell_id, old, new = a.get("cell_id"), a.get("old") or "", a.get("new") or ""
    before = state.seen.get(cell_id)
    if before is not None and old and Screened(before).count(old) == 1:
        return _diff(before, Screened(before).replace(old, new, 1), state.name(cell_id))
    return (f"# {state.name(cell_id)}\n" + "\n".join("-" + line for line in old.splitlines())
            + "\n" + "\n".join("+" + line for line in new.splitlines()))


def _delete_preview(state: NotebookState, a: Any) -> str:
    cell_id = a.get("cell_id")
    before = state.seen.get(cell_id)
    return f"# delete {state.name(cell_id)}\n" + "\n".join("-" + line for line in (before or "(not read yet)").splitlines())
