"""Running Python code in a namespace: the seam between the `python` tool and where code lives.

`PythonRunner` runs code in a namespace dict and returns an `Execution`: what it printed (stdout, stderr),
what it displayed, the matplotlib figures it made, the value of its last expression (kept as the live
object) or the exception it raised, with a traceback trimmed to the code's own frames. Headless, the
namespace is the agent's own dict; in a notebook `nbagent.jupyter.notebook.kernel_tools.KernelRunner` subclasses
it to run in the kernel's `user_ns`, with IPython's input transformations (`%magic`, `!cmd`) and the
display publisher captured. A `HistorySource` says what was run before (`history` tool).

Where the code runs. The tool is synchronous, so the runtime runs it on one of its worker threads, and
that is deliberate:

- the event loop (the kernel's main thread, in a notebook) stays free while code runs: the live view
  updates, Approve / Deny / Stop buttons work, other calls' progress streams;
- a timeout or a cancellation can stop the code: the runtime injects an exception into the worker
  thread (`PyThreadState_SetAsyncExc`), which takes effect at the next Python instruction. This works
  only on another thread than the loop's; code blocked inside C (a long `time.sleep`, a C extension, a
  socket read) is interrupted only when it returns to Python, and the result then says the code could
  not be stopped;
- output is captured per thread (`_capture`), so what the notebook's own cells print is left alone;
- matplotlib: figures made by the code are rendered with the Agg canvas (the inline backend in a
  kernel uses Agg too), which works from any thread; they are then closed in pyplot, so they are not
  shown again by the inline backend under the user's next cell, and kept alive in the result. GUI
  backends (Qt, Tk) must only be driven from the main thread: with one of those active, plot with the
  object API (`Figure()`), not `pyplot`.

Calls to one runner are serialised by a lock (and the `python` tool is `sequential`), so the agent's
code never races itself over the namespace. The user's own cells may still run meanwhile, as they would
next to any background thread.
"""

from __future__ import annotations

import ast
import asyncio
import builtins
import inspect
import itertools
import linecache
import sys
import threading
import time
import traceback
from abc import ABC, abstractmethod
from collections import deque
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import Any, Callable, ContextManager

from ..lineage import NamespaceWatch
from ._capture import StreamSink, route_thread
from ._values import cut, text_form

__all__ = ["Execution", "HistoryEntry", "HistorySource", "PythonRunner", "RunnerHistory"]

_TOP_LEVEL_AWAIT = getattr(ast, "PyCF_ALLOW_TOP_LEVEL_AWAIT", 0)
_CO_COROUTINE = inspect.CO_COROUTINE
_runner_ids = itertools.count(1)


@dataclass(eq=False)
class Execution:
    """One run of code: what it printed, displayed and returned, or how it failed."""

    number: int
    """Its number in this runner (the `N` in `<agent-N>` in tracebacks)."""
    code: str
    """The code as given."""
    stdout: str = ""
    stderr: str = ""
    outputs: list[dict[str, Any]] = field(default_factory=list)
    """Display outputs, as `{"data": mime bundle, "metadata": {...}}` (from `display(...)` in a kernel)."""
    figures: list[Any] = field(default_factory=list)
    """Matplotlib figures the code made (live objects; closed in pyplot)."""
    value: Any = None
    """The value of the last expression (the live object)."""
    has_value: bool = False
    """The code ended with an expression whose value is not None (and no `;` after it)."""
    error: BaseException | None = None
    """The exception the code raised, if any."""
    traceback: str = ""
    """The traceback, trimmed to the code's own frames."""
    duration: float = 0.0
    """Seconds the code ran."""
    state_change: Any = None
    """What the code did to the namespace's names (`nbagent.lineage.StateChange`; None when not watched)."""

    @property
    def ok(self) -> bool:
        return self.error is None

    def __repr__(self) -> str:
        state = f"error={type(self.error).__name__}" if self.error else (
            f"value={type(self.value).__name__}" if self.has_value else "no value")
        return (f"<Execution #{self.number} {state} stdout={len(self.stdout)} chars "
                f"outputs={len(self.outputs)} figures={len(self.figures)} {self.duration:.3f}s>")


@dataclass(slots=True)
class HistoryEntry:
    """One input of the history, with a short text of its output."""

    number: int
    source: str
    output: str | None = None
    kind: str = "user"
    """`user` (a notebook cell) or `agent` (code the agent ran)."""


class HistorySource(ABC):
    """What was run before, most recent first: the notebook's cells, or the agent's own code."""

    @abstractmethod
    def page(self, limit: int, offset: int = 0) -> tuple[list[HistoryEntry], int]:
        """Up to `limit` entries, skipping the `offset` most recent; and how many there are in all."""


class PythonRunner:
    """Runs code in a namespace (the agent's own dict unless one is given).

    Args:
        namespace: the dict code runs in (globals). Default: a fresh one, with `__name__ == "__main__"`.
        name: a label for tracebacks (`<agent-3>`).
    """

    MAX_EXECUTIONS = 500
    """How many past executions are kept (for the history)."""
    watch_state = True
    """Watch what each run of code does to the namespace (`Execution.state_change`): what the python tool's
    records say, and what `AgentRun.kernel_only` and `to_cells()` read. Off: nothing is recorded."""

    def __init__(self, namespace: dict[str, Any] | None = None, *, name: str = "agent") -> None:
        if namespace is None:
            namespace = {"__name__": "__main__", "__builtins__": builtins}
        self.namespace: dict[str, Any] = namespace
        self.name = name
        self.executions: deque[Execution] = deque(maxlen=self.MAX_EXECUTIONS)
        """The code this runner ran, oldest first (bounded)."""
        self._lock = threading.Lock()
        self._count = itertools.count(1)
        self._id = next(_runner_ids)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {len(self.namespace)} names, {len(self.executions)} runs>"

    # -- for subclasses ----------------------------------------------------------------------------------
    def transform(self, code: str) -> str:
        """Turn the code into plain Python (a kernel handles `%magics` and `!commands` here)."""
        return code

    def transform_tree(self, tree: ast.Module) -> ast.Module:
        """Rewrite the parsed code before it runs (a kernel applies its AST transformers here)."""
        return tree

    def display_capture(self, outputs: list[dict[str, Any]],
                        on_display: Callable[[dict[str, Any]], None] | None = None) -> ContextManager[Any]:
        """While the code runs, route what the current thread displays into `outputs`."""
        return nullcontext()

    def hidden_names(self) -> set[str]:
        """Names in the namespace that are not the user's variables."""
        return {"__builtins__", "__name__", "__doc__", "__package__", "__loader__", "__spec__"}

    def history_source(self) -> HistorySource:
        """Where the `history` tool looks when no other source is given: the code run here."""
        return RunnerHistory(self)

    # -- the namespace -------------------------------------------------------------------------------------
    def variables(self) -> dict[str, Any]:
        """The user's variables: public names that are not hidden (modules included)."""
        hidden = self.hidden_names()
        return {k: v for k, v in list(self.namespace.items()) if not k.startswith("_") and k not in hidden}

    # -- running ---------------------------------------------------------------------------------------------
    def run(self, code: str, ctx: Any = None) -> Execution:
        """Run `code` in the namespace on the current thread; never raises for the code's own errors.

        With a `ToolContext`, output streams as progress (`ctx.progress(output=...)`) and displays as
        progress data (`display=bundle`).
        """
        execution = Execution(next(self._count), code)
        self._acquire(ctx)
        try:
            self._run_locked(execution, ctx)
        finally:
            self._lock.release()
        self.executions.append(execution)
        return execution

    def _acquire(self, ctx: Any) -> None:
        while not self._lock.acquire(timeout=0.1):
            if ctx is not None and getattr(ctx, "cancelled", False):
                from ..context import ToolCancelled

                raise ToolCancelled("cancelled while waiting for another run of code to finish")

    def _run_locked(self, execution: Execution, ctx: Any) -> None:
        filename = f"<{self.name}-{execution.number}>" if self._id == 1 else f"<{self.name}{self._id}-{execution.number}>"
        progress = getattr(ctx, "progress", None)

        def on_output(stream: str, text: str) -> None:
            if progress is not None:
                progress(output=text, stream=stream)

        def on_display(output: dict[str, Any]) -> None:
            if progress is not None:
                progress(display=output.get("data", {}))

        sink = StreamSink(on_output if progress is not None else None)
        before = _figure_numbers()
        watch = self._watch(execution.code)
        started = time.monotonic()
        try:
            with route_thread(sink), self.display_capture(execution.outputs, on_display):
                try:
                    source = self.transform(execution.code)
                    value, has_value = self._execute(source, filename)
                    execution.value, execution.has_value = value, has_value
                except (Exception, SystemExit, KeyboardInterrupt) as exc:
                    execution.error = exc
                    execution.traceback = _trimmed_traceback(exc, filename)
        finally:
            execution.duration = time.monotonic() - started
            sink.close()
            execution.stdout = sink.text("stdout")
            execution.stderr = sink.text("stderr")
            execution.figures = _new_figures(before)
            if watch is not None:
                execution.state_change = watch.finish(execution.error)

    def _watch(self, code: str) -> NamespaceWatch | None:
        """A watch over the namespace for this run of `code` (None: watching is off, or failed: the code still
        runs, its record then says nothing of the names)."""
        if not self.watch_state:
            return None
        try:
            return NamespaceWatch(self.namespace, code, hidden=self.hidden_names(), transform=self.transform)
        except Exception:  # pragma: no cover - a namespace that cannot be looked at
            return None

    def _execute(self, source: str, filename: str) -> tuple[Any, bool]:
        linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
        flags = ast.PyCF_ONLY_AST | _TOP_LEVEL_AWAIT
        tree = self.transform_tree(compile(source, filename, "exec", flags=flags, dont_inherit=True))
        body: list[ast.stmt] = list(tree.body)
        last: ast.expr | None = None
        if body and isinstance(body[-1], ast.Expr):
            last = body.pop().value  # type: ignore[union-attr]
        module = ast.fix_missing_locations(ast.Module(body=body, type_ignores=[]))
        code_body = compile(module, filename, "exec", flags=_TOP_LEVEL_AWAIT, dont_inherit=True)
        code_last = None
        if last is not None:
            code_last = compile(ast.fix_missing_locations(ast.Expression(last)), filename, "eval", flags=_TOP_LEVEL_AWAIT, dont_inherit=True)
        ns = self.namespace
        if (code_body.co_flags & _CO_COROUTINE) or (code_last is not None and code_last.co_flags & _CO_COROUTINE):
            value = _run_coroutine(_body_then_value(code_body, code_last, ns))
        else:
            exec(code_body, ns)
            value = eval(code_last, ns) if code_last is not None else None
        has_value = code_last is not None and value is not None and not source.rstrip().endswith(";")
        return value, has_value


async def _body_then_value(code_body: Any, code_last: Any, ns: dict[str, Any]) -> Any:
    result = eval(code_body, ns)
    if inspect.iscoroutine(result):
        await result
    if code_last is None:
        return None
    value = eval(code_last, ns)
    if inspect.iscoroutine(value):
        value = await value
    return value


def _run_coroutine(coro: Any) -> Any:
    """Run top-level-await code on an event loop of this worker thread."""
    loop = asyncio.new_event_loop()
    try:
        return loop.run_until_complete(coro)
    finally:
        try:
            pending = asyncio.all_tasks(loop)
            for task in pending:
                task.cancel()
            if pending:
                loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        finally:
            loop.close()


def _trimmed_traceback(exc: BaseException, filename: str, limit: int = 6000) -> str:
    """The traceback from the code's first frame on (the runner's own frames left out)."""
    if isinstance(exc, SyntaxError) and exc.filename == filename:
        return cut("".join(traceback.format_exception_only(type(exc), exc)), limit)
    tb = exc.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename != filename:
        tb = tb.tb_next
    if tb is None:
        tb = exc.__traceback__
    text = "".join(traceback.format_exception(type(exc), exc, tb))
    return cut(text, limit)


# --------------------------------------------------------------------------------------------------
# Matplotlib figures
# --------------------------------------------------------------------------------------------------
def _figure_numbers() -> set[Any] | None:
    if "matplotlib.pyplot" not in sys.modules:
        return None
    try:
        from matplotlib._pylab_helpers import Gcf

        return {m.num for m in Gcf.get_all_fig_managers()}
    except Exception:
        return None


def _new_figures(before: set[Any] | None) -> list[Any]:
    """Figures pyplot holds that were not there before; closed in pyplot, returned alive."""
    if "matplotlib.pyplot" not in sys.modules:
        return []
    try:
        import matplotlib.pyplot as plt
        from matplotlib._pylab_helpers import Gcf

        figures = [m.canvas.figure for m in Gcf.get_all_fig_managers() if before is None or m.num not in before]
        for fig in figures:
            plt.close(fig)
        return figures
    except Exception:
        return []


# --------------------------------------------------------------------------------------------------
# History of a runner
# --------------------------------------------------------------------------------------------------
class RunnerHistory(HistorySource):
    """The code a runner ran (what the agent itself did, headless)."""

    def __init__(self, runner: PythonRunner) -> None:
        self.runner = runner

    def page(self, limit: int, offset: int = 0) -> tuple[list[HistoryEntry], int]:
        items = list(self.runner.executions)
        total = len(items)
        items.reverse()
        out = []
        for ex in items[offset : offset + limit]:
            if ex.error is not None:
                output = f"{type(ex.error).__name__}: {ex.error}"
            elif ex.has_value:
                output = text_form(ex.value, 400)
            else:
                output = ex.stdout.strip() or None
            out.append(HistoryEntry(ex.number, ex.code, cut(output, 400) if output else None, "agent"))
        return out, total
