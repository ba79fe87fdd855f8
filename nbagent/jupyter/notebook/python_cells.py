"""`NBAgent.python_in_cells`: the `python` tool, writing its code as a cell of the live notebook and running it
there (after the last cell the run wrote, else at the end), so the analysis stays in the notebook; where no live
notebook is reached, or a cell is running, it runs in the kernel as before and says why.
"""

from __future__ import annotations

import asyncio
import copy
from typing import Any

from nbagent.context import ToolContext
from nbagent.messages import TextBlock
from nbagent.tools.definition import Tool
from nbagent.tools.results import ToolResult

from .cells import CellRun, cells_idle, notebook_state, run_cell_in_notebook
from .comm import FrontendError, NoFrontend

__all__ = ["cell_python"]


def cell_python(shell: Any, original: Tool) -> Tool:
    """The `python` tool, which (while `NBAgent.python_in_cells` is on and the notebook is live) inserts
    its code as a cell and runs it there; otherwise it runs as before."""
    state = notebook_state(shell)

    def python(code: str, ctx: ToolContext = None) -> Any:  # type: ignore[assignment]
        if not state.config("python_in_cells", False):
            return original.fn(code=code, ctx=ctx)
        return _python_cell(code, ctx)

    async def _python_cell(code: str, ctx: ToolContext | None) -> Any:
        if not await cells_idle(state):
            return await _fallback(code, ctx, "a cell of the notebook is running (it runs one cell at a time)")
        rid = state.run_id(ctx)
        after = state.last_written.get(rid) if rid else None
        try:
            result = await state.request("insert", source=code, cell_type="code", after=after,
                                         mark=state.mark(ctx, "python"))
        except FrontendError as exc:
            if after:  # the cell it followed is gone: put it at the end
                try:
                    result = await state.request("insert", source=code, cell_type="code", after=None,
                                                 mark=state.mark(ctx, "python"))
                except (NoFrontend, FrontendError) as exc2:
                    return await _fallback(code, ctx, str(exc2))
            else:
                return await _fallback(code, ctx, str(exc))
        except NoFrontend as exc:
            return await _fallback(code, ctx, str(exc))
        new_id = str(result.get("cell_id"))
        state.seen[new_id] = code
        if rid:
            state.last_written[rid] = new_id
        return await run_cell_in_notebook(state, new_id, ctx, inserted=True, expected=code)

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
