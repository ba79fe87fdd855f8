"""`%agent --to-cells`: a run's state-changing code, inserted below the run's cell as reviewable changes.

The cells are `nbagent.lineage.plan_cells(run)`'s: the code of the calls the run's final state needs, as it
ran. They go in through the notebook tools' own path: a run of their own whose script (nbagent's, not a
model's: `ScriptedModel` named `to-cells`) calls `insert_cell` once per cell, below the run's cell, each
after the one before. So each cell is a proposal like any agent edit: its diff and Approve / Deny in the
view, Accept / Reject on the cell, Undo in the panel; the run asks for each (default mode, unless `--mode`
says otherwise; the person's rules and remembered grants apply as ever), and nothing runs: the person runs
the cells when they have read them. That run is not part of the conversation: it is neither stored nor
continued by the next `%agent`.

The code inserted is exactly the code that ran (its record's), under nbagent's one-line comment; what a
cell keeps in `metadata.nbagent` is registered here, by the inserting run's id and the exact source, so
the model of a later run cannot claim it (`NotebookState.mark`).
"""

from __future__ import annotations

import asyncio
import uuid
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from IPython.core.error import UsageError

from nbagent.lineage import plan_cells, provenance
from nbagent.messages import AssistantMessage, ToolCall
from nbagent.providers import ScriptedModel
from nbagent.safety.shown import shown

from ..notebook.cells import notebook_state

if TYPE_CHECKING:  # pragma: no cover
    from nbagent.agent.run import AgentRun

    from .state import NotebookSession

__all__ = ["find_run", "is_to_cells", "start_to_cells"]

_MADE: weakref.WeakSet[Any] = weakref.WeakSet()
"""The runs `--to-cells` started (they make no cells of themselves)."""


def is_to_cells(run: Any) -> bool:
    """Whether `run` is one that `%agent --to-cells` started."""
    return run in _MADE


def find_run(session: NotebookSession, which: str = "") -> AgentRun:
    """The run `%agent --to-cells` works on: a notebook variable holding a run, a run's id, or (nothing
    given) the latest %agent run that ran code and has ended."""
    from nbagent.agent.run import AgentRun

    which = which.strip()
    runs = [r for r in session.runs if not is_to_cells(r)]
    if which:
        value = session.shell.user_ns.get(which) if which.isidentifier() else None
        if isinstance(value, AgentRun):
            return value
        found = next((r for r in runs if r.id == which), None)
        if found is None:
            raise UsageError(f"--to-cells {which}: no %agent run of this kernel has that name or id")
        return found
    for run in reversed(runs):
        if run.done and any(getattr(c, "state_change", None) is not None for c in run.calls):
            return run
    raise UsageError("--to-cells: no %agent run of this kernel has run code yet (nothing to make cells of)")


def start_to_cells(session: NotebookSession, run: AgentRun, mode: str | None = None, *,
                   say: Callable[[str], Any] = print) -> AgentRun | None:
    """Start the run that inserts `run`'s cells (see the module docstring); None when it needs none. `say`
    gets what the cells make and what is left out, and why."""
    if not run.done:
        raise UsageError("--to-cells: the run is still going; make cells of it once it has ended")
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        raise UsageError("--to-cells inserts cells from the kernel's event loop: run it in a notebook cell") from None
    plan = plan_cells(run)
    say(shown(plan.summary()))  # names are the model's code's: hidden characters shown
    if not plan.steps:
        return None
    cells = plan.cells()
    state = notebook_state(session.shell)
    anchor = session.notebook_runs.cell_of(run)
    holder: dict[str, Any] = {}
    n = len(cells)

    def turn(k: int):
        def respond(messages: Any) -> AssistantMessage:
            mine: AgentRun = holder["run"]
            if mine.calls and mine.calls[-1].status not in ("ok", "denied"):
                why = mine.calls[-1].result.text if mine.calls[-1].result is not None else mine.calls[-1].status
                return AssistantMessage(text=f"Stopped at step {k} of {n}: {why}\n`run.to_cells()` gives the cells "
                                             "as data.")
            if k == n:
                return AssistantMessage(text=_final(mine, n))
            after = state.last_written.get(mine.id) or anchor
            names = ", ".join(cells[k]["metadata"]["nbagent"]["makes"]) or "what a later step needs"
            return AssistantMessage(
                text=f"Step {k + 1} of {n}: the code of call {cells[k]['metadata']['nbagent']['call']}, which makes "
                     f"{names}.",
                tool_calls=[ToolCall(id=f"to-cells-{k + 1}-{uuid.uuid4().hex[:6]}", name="insert_cell",
                                     arguments={"source": cells[k]["source"], "cell_type": "code", "after": after})])
        return respond

    model = ScriptedModel([turn(k) for k in range(n + 1)], name="to-cells")
    agent = _agent(session, model, mode, max_turns=n + 1)
    prompt = (f"Insert the {n} cell{'s' if n != 1 else ''} that make run {run.id}'s final state again, below its cell "
              "(each asked for; none runs)")
    here = session.notebook_runs.displays.cell_id
    mine = agent.start(prompt)
    _MADE.add(mine)
    holder["run"] = mine
    state.recreated[mine.id] = {c["source"]: provenance(run, step, k, n)
                                for k, (c, step) in enumerate(zip(cells, plan.steps), 1)}
    session.notebook_runs.shorten_error(mine)
    session.notebook_runs.show(mine, here)
    session.notebook_runs.add(mine)
    return mine


def _agent(session: NotebookSession, model: ScriptedModel, mode: str | None, max_turns: int) -> Any:
    from nbagent.agent.run import Agent

    from .resolve import builtin_tools

    tools = [t for t in builtin_tools(session.shell, session.workspace) if getattr(t, "name", None) == "insert_cell"]
    if not tools:
        raise UsageError("--to-cells needs the notebook tools (insert_cell), which this installation does not have")
    agent = Agent(model=model, tools=tools, instructions=None, mode=mode or "default", rules=list(session.config.rules),
                  approver=session.approver, max_turns=max_turns, workspace=session.workspace, name="notebook",
                  sandbox=session.config.sandbox, extensions=[session.agents.cells])
    agent.policy.grants = session.grants
    return agent


def _final(mine: AgentRun, n: int) -> str:
    inserted = [c for c in mine.calls if c.status == "ok"]
    denied = [c for c in mine.calls if c.status == "denied"]
    text = f"Inserted {len(inserted)} of {n} cell{'s' if n != 1 else ''}"
    if denied:
        text += f" ({len(denied)} rejected)"
    return text + ". Nothing has run: read them, then run them (Run All reruns the notebook with them)."
