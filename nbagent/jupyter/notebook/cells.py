"""The notebook's cells as the notebook tools see them: what the tools return (`CellChange`, `CellRun`,
`NotebookSnapshot`, `cells_of(run)`), the summaries of outputs the model reads, one kernel's
`NotebookState` (the way to the live notebook, the sources the agent last saw), and running a cell through the
notebook (`run_cell_in_notebook`). The live notebook is reached through the server's shared document where a
collaboration engine runs (shared.py), else over the `nbagent.notebook` comm with the page (comm.py); each
request says which (`NotebookState.via`).

Reads the saved notebook file and what the frontend sends about the live one; the person, a collaborator,
or anything that can write the notebook could have written either. What stops harm: cells are read as
text for the model, never run here (running a cell is the run_cell tool, which asks as `python` does);
outputs are cut (`MAX_OUTPUT`), images and HTML summarised.
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from nbagent.context import ToolContext
from nbagent.lineage import NamespaceWatch
from nbagent.messages import TextBlock
from nbagent.render.runs import diff_html
from nbagent.reprs import shortened
from nbagent.safety.shown import shown_html
from nbagent.tools.results import ToolResult, error_result

from .comm import FrontendError, NoFrontend, NotebookFrontend, frontend_for
from .outputs import MAX_OUTPUT, _text, cut_text, summarize_output, summarize_outputs
from .shared import SharedDocument, shared_document_for

__all__ = ["CANNOT_RUN", "MAX_OUTPUT", "RUN_REPORT_TIMEOUT", "RUN_START_TIMEOUT", "SAVED", "SHARED", "TAB",
           "CellChange", "CellRun", "NotebookCell", "NotebookSnapshot", "NotebookState", "cells_idle", "cells_of", "cut_text", "notebook_state",
           "cell_name", "run_cell_in_notebook", "summarize_output", "summarize_outputs"]

RUN_START_TIMEOUT = 20.0
"""Seconds for the notebook to start a cell run_cell asked for (then the cell may run as long as it needs)."""
RUN_REPORT_TIMEOUT = 20.0
"""Seconds for the notebook to report a cell's output once the kernel has finished running it."""
SHARED = "shared document"
"""The path to the live notebook through the server's shared document (no page needed)."""
TAB = "this tab"
"""The path through the notebook page that has nbagent's frontend part (the comm)."""
SAVED = "saved file"
"""No live notebook: read from the saved file (nothing can be changed)."""
CANNOT_RUN = ("Cells can only be run while the notebook is open in JupyterLab or Notebook 7 with nbagent's frontend "
              "part, or, with no tab open, through the server's shared document where jupyter-collaboration runs; "
              "the python tool runs code without either.")


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
    via: str = ""
    """How the notebook was reached: "shared document", "this tab" or "saved file"."""

    def __repr__(self) -> str:
        return f"<NotebookSnapshot {self.path!r} {'live' if self.live else 'saved'} {len(self.cells)} of {self.total} cells>"


def _link(cell_id: str, text: str | None = None) -> str:
    return (f'<a class="nba-cell-link" href="#nbagent-cell={shown_html(cell_id)}" '
            f'title="Scroll to this cell">{shown_html(text or "cell " + cell_id)} ↗</a>')


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
    name: str = ""
    """The cell as the person sees it (`[3] df.plot()`)."""
    via: str = ""
    """How the change reached the notebook: "shared document" or "this tab"."""

    def link_html(self) -> str:
        if self.action == "deleted":
            return shown_html(f"{self.name or 'cell ' + self.cell_id} (deleted)")
        return _link(self.cell_id, self.name or None)

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
    name: str = ""
    """The cell as the person sees it (`[3] df.plot()`)."""
    via: str = ""
    """How the cell was run: "shared document" (in this kernel, outputs written into the document) or "this tab"."""

    @property
    def error(self) -> dict[str, Any] | None:
        return next((o for o in self.outputs if o.get("output_type") == "error"), None)

    def link_html(self) -> str:
        return _link(self.cell_id, self.name or None)

    def _repr_html_(self) -> str:
        count = f"[{self.execution_count}]" if self.execution_count is not None and not self.name else ""
        body = shown_html(summarize_outputs(self.outputs) or "(no output)")
        return (f"<div>Ran {self.link_html()} {count} · {shown_html(self.status)}</div>"
                f'<div class="nba-pre">{body}</div>')


# --------------------------------------------------------------------------------------------------
# Output summaries
# --------------------------------------------------------------------------------------------------
# --------------------------------------------------------------------------------------------------
# One kernel's notebook state
# --------------------------------------------------------------------------------------------------
class NotebookState:
    """Per shell: the frontend connection, the sources the agent last saw, and the runs' ids."""

    def __init__(self, shell: Any, frontend: NotebookFrontend | None = None,
                 shared: SharedDocument | None = None) -> None:
        self.shell = shell
        self.frontend = frontend or frontend_for(shell)
        self.shared = shared if shared is not None else (shared_document_for(shell) if frontend is None else None)
        """The server's shared document (None: not in a kernel a server started, or a test's frontend)."""
        self.via = ""
        """How the last request reached the notebook: SHARED or TAB."""
        self.seen: dict[str, str] = {}
        """cell id -> the source the agent last read or wrote: an edit applies only while the cell holds it."""
        self.saved_seen: dict[str, str] = {}
        """cell id -> its source in the saved file, as the agent read it there (no basis for an edit)."""
        self.names: dict[str, str] = {}
        """cell id -> how the person sees the cell: `[3] first line` (its In [3]), or `cell 5 · first line`."""
        self.running_cells = 0
        self.started = 0
        """How many cells began to run in this kernel (any cell; a run request watches it move)."""
        self.finished = 0
        self.last_written: dict[str, str] = {}
        """run id -> the id of the last cell that run inserted (python_in_cells puts the next one after it)."""
        self.recreated: dict[str, dict[str, dict[str, Any]]] = {}
        """`%agent --to-cells` run id -> cell source -> the provenance its cell keeps (where the code came from)."""
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
        return getattr(ctx, "run_id", None)

    def mark(self, ctx: ToolContext | None, action: str, source: str | None = None) -> dict[str, Any]:
        """What a cell the agent writes keeps in `metadata.nbagent`: the run, the call, the model, the action;
        for a cell `%agent --to-cells` inserts (this exact source, in that run), where its code came from."""
        run, call = self.run_id(ctx), getattr(ctx, "call_id", None)
        recreated = self.recreated.get(run or "", {}).get(source) if source is not None else None
        if recreated is not None:
            return {**recreated, "inserted_by": {"run": run, "call": call}}
        return {"run": run, "call": call, "action": action, "model": self.model_of(run)}

    def model_of(self, run_id: str | None) -> str | None:
        """The model spec of one of this kernel's runs (None when it is not known here)."""
        session = getattr(self.shell, "_nbagent_session", None)
        for run in reversed(list(getattr(session, "runs", None) or [])):
            if getattr(run, "id", None) == run_id:
                spec = getattr(getattr(run, "model", None), "spec", None)
                return spec if isinstance(spec, str) else None
        return None

    def config(self, name: str, default: Any = None) -> Any:
        session = getattr(self.shell, "_nbagent_session", None)
        return getattr(getattr(session, "config", None), name, default)

    # -- the saved file --------------------------------------------------------------------------------------------
    def saved_path(self) -> Path | None:
        candidates = [self.config("notebook_path"), os.environ.get("NBAGENT_NOTEBOOK"),
                      os.environ.get("JPY_SESSION_NAME"), self.frontend.info.get("path"),
                      self.shared.path if self.shared is not None else None]
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
        for c in cells:  # no basis for an edit, but a run_cell asks about exactly this code (then cannot run)
            self.saved_seen[c.id] = c.source
            self.names.setdefault(c.id, cell_name(c))
        return str(path), cells

    # -- the live notebook ----------------------------------------------------------------------------------------
    async def request(self, op: str, timeout: float | None = 20.0, **fields: Any) -> Any:
        """One request to the live notebook: through the server's shared document where a collaboration engine
        runs, else through the page (`timeout` bounds the page's answer only). Raises `NoFrontend` or
        `FrontendError` as the comm does."""
        if self.shared is not None and await self.shared.available():
            self.via = SHARED
            return await self.shared.request(op, **fields)
        self.via = TAB
        try:
            return await self.frontend.request(op, timeout=timeout, **fields)
        except NoFrontend as exc:
            if self.shared is not None and self.shared.why_not:
                raise NoFrontend(f"{exc}; and the server's shared document is not reachable: "
                                 f"{self.shared.why_not}") from None
            raise

    async def read_live(self) -> tuple[str, list[NotebookCell]]:
        result = await self.request("read")
        cells = [self._cell(c) for c in result.get("cells") or []]
        for c in cells:
            self.seen[c.id] = c.source
            self.names[c.id] = cell_name(c)
        return str(result.get("path") or ""), cells

    def name(self, cell_id: Any) -> str:
        """The cell as the person sees it (`[3] df.plot()`); its id while the agent has not read it."""
        return self.names.get(cell_id) or f'cell "{cell_id}"'

    async def live_source(self, cell_id: str) -> str | None:
        """What the cell holds in the page now (None: no such cell), without changing what the agent saw."""
        result = await self.request("read")
        for c in result.get("cells") or []:
            if str(c.get("id")) == cell_id:
                cell = self._cell(c)
                self.names[cell_id] = cell_name(cell)
                return cell.source
        return None

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
# Running a cell through the notebook
# --------------------------------------------------------------------------------------------------
def cell_name(cell: NotebookCell) -> str:
    """`[3] total = df.revenue.sum()`: the In [3] the person sees and the cell's first line (a cell never
    run: `cell 5 · ...`, its place in the notebook)."""
    first = next((line.strip() for line in cell.source.splitlines() if line.strip()), "")
    first = shortened(first, 40)
    where = f"[{cell.execution_count}]" if cell.execution_count is not None else f"cell {cell.number}"
    if cell.cell_type != "code":
        where = f"{cell.cell_type} cell {cell.number}"
    return f"{where} {first}" if first else f"{where} (empty)"


async def run_cell_in_notebook(state: NotebookState, cell_id: str, ctx: ToolContext | None, *, inserted: bool = False,
                               expected: str | None = None) -> ToolResult:
    """Run a cell through the notebook; with `expected`, only while the cell holds exactly that code (the
    page checks it as it starts the cell, so nothing can change it in between)."""
    if not await cells_idle(state):
        return error_result(
            f'Cell "{cell_id}" was not run: a cell of this notebook is running right now (probably the one that '
            "waits for this run, with --wait or `await run`), and the notebook runs one cell at a time. Use the "
            "python tool instead, or start the run without waiting for it.")
    watch = await _watch(state, expected if expected is not None else state.seen.get(cell_id, ""), cell_id,
                         "python" if inserted else "run_cell")
    try:
        result = await _await_run(state, cell_id, expected)
    except (NoFrontend, FrontendError) as exc:
        if isinstance(exc, NoFrontend):
            return error_result(f'Cell "{cell_id}" was not run: {exc}. {CANNOT_RUN}')
        return error_result(f'Cell "{cell_id}" was not run: {exc}')
    cell = NotebookState._cell(result.get("cell") or {})
    status = str(result.get("status", "ok"))
    values = state.out_values()
    value = values.get(cell.execution_count) if cell.execution_count is not None else None
    state.seen[cell.id] = cell.source
    state.names[cell.id] = cell_name(cell)
    summary = summarize_outputs(cell.outputs, values) or "(no output)"
    count = f"[{cell.execution_count}]" if cell.execution_count is not None else ""
    details = CellRun(cell.id, cell.number, cell.source, status, cell.execution_count, cell.outputs, value, inserted,
                      state.names[cell.id], via=state.via)
    head = f'Ran cell "{cell.id}" {count}'.rstrip() + f" · {status}"
    if watch is not None and ctx is not None:  # the call's record keeps what the cell did to the names
        failed = RuntimeError(status) if status == "error" else None
        ctx.state_change = await asyncio.to_thread(watch.finish, failed)
    return ToolResult([TextBlock(f"{head}\n{summary}")], details=details, is_error=status == "error")


async def _watch(state: NotebookState, code: str, cell_id: str, tool: str) -> NamespaceWatch | None:
    """A watch over the kernel's namespace while a cell runs (see nbagent.lineage); None if it cannot be made."""
    shell = state.shell
    if getattr(shell, "user_ns", None) is None:
        return None
    runner = getattr(shell, "_nbagent_runner", None)  # the kernel's runner (kernel_tools): it knows IPython's names
    hidden = runner.hidden_names() if runner is not None else {"In", "Out", "get_ipython", "exit", "quit"}
    try:
        return await asyncio.to_thread(NamespaceWatch, shell.user_ns, code, hidden=hidden,
                                       transform=shell.transform_cell, tool=tool, cell_id=cell_id)
    except Exception:  # pragma: no cover - a namespace that cannot be looked at: the cell still runs
        return None


async def _await_run(state: NotebookState, cell_id: str, expected: str | None = None) -> Any:
    """Ask the notebook to run a cell and wait for its output, for as long as the cell runs in the kernel,
    but not forever when the notebook went silent: the cell must start within RUN_START_TIMEOUT, and the
    answer must come within RUN_REPORT_TIMEOUT of the kernel finishing it."""
    loop = asyncio.get_running_loop()
    started, finished = state.started, state.finished
    task = asyncio.ensure_future(state.request("run", timeout=None, cell_id=cell_id, expected=expected))
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


async def cells_idle(state: NotebookState) -> bool:
    """Whether no cell is running; waits a moment for the cell that started the run to finish."""
    for _ in range(40):
        if state.running_cells <= 0:
            return True
        await asyncio.sleep(0.05)
    return state.running_cells <= 0
