"""The notebook's runs and their cells: each run's view, where it was started, how a run shows as a cell's
result, a cell run again while its run goes on, the list of live runs, and what the views become when a
run ends or the kernel shuts down.

A view is found by run (`view(run)`) or by call (`view_for(call)`, what the approver is handed to ask the
person); nothing here decides a call or builds an agent.
"""

from __future__ import annotations

import asyncio
import weakref
from typing import TYPE_CHECKING, Any

from IPython.display import display

from ..config import NBAgent
from .comm import frontend_for
from .document import Displays
from .kept import KeptDisplays
from .snapshots import Snapshots

if TYPE_CHECKING:  # pragma: no cover
    from IPython.core.interactiveshell import InteractiveShell

    from nbagent.agent.run import Agent, AgentRun
    from nbagent.records import CallRecord

__all__ = ["NotebookRuns", "RunList", "one_line_error", "status_of"]


class NotebookRuns:
    """The runs started with %agent in one kernel, oldest first, and the view of each."""

    def __init__(self, shell: InteractiveShell, config: NBAgent) -> None:
        self.shell = shell
        self.config = config
        self.runs: list[AgentRun] = []
        """Every run started with %agent, oldest first."""
        self._views: weakref.WeakKeyDictionary[AgentRun, Any] = weakref.WeakKeyDictionary()
        self.displays = Displays(shell)
        """Which cell is executing; display updates that reach the reader of that cell (see document.py)."""
        self.snapshots = Snapshots(lambda: frontend_for(shell))
        """What the frontend keeps of each live view, for when the kernel goes first (see snapshots.py)."""
        self.kept = KeptDisplays(self.displays, self.snapshots)
        """The live displays that are not run views: batch views and MCP trust prompts (see kept.py)."""
        self.styled_cell: str | None = None
        """The cell whose run's static rendering carries the stylesheet (once per notebook, not per run)."""
        self._style_looked: asyncio.Task | None = None
        watch_shutdown(self)

    def close(self) -> None:
        """`%unload_ext`: stop following cells (runs already started go on)."""
        self.displays.close()

    def again_in(self, cell: str | None) -> list[AgentRun]:
        """The live runs this cell started before: their views are shown again first, so they stay reachable."""
        again = [r for r in self.live_runs() if cell is not None and self.cell_of(r) == cell]
        for run in again:
            display(self._views[run])
        return again

    @staticmethod
    def shorten_error(run: AgentRun) -> None:
        """A run's error shows in one line when `await run` raises it (its view shows what happened)."""

        def on_event(event: Any, run: AgentRun = run) -> None:
            if event.kind == "run_finished" and run.error is not None:
                one_line_error(run.error)  # before `await run` raises it

        run.subscribe(on_event)

    def show(self, run: AgentRun, cell: str | None) -> None:
        """Show a run started on the kernel's loop in the executing cell (a run whose view fails is stopped)."""
        if cell is not None and cell == self.styled_cell:
            self.styled_cell = None  # that cell's output is being replaced: the next rendering carries the styles
        if self._style_looked is None:
            self._style_looked = asyncio.get_running_loop().create_task(self._find_styled(cell))
        try:
            view = self._make_view(run)
            self._views[run] = view
            view.cell_id = cell
            view.displayed_in = self.shell.execution_count
            if hasattr(view, "widget"):
                view.on_end = self._ended
                display(view)
                self.snapshots.follow(view)
        except BaseException:
            run.cancel("the live view could not be shown")
            raise

    def add(self, run: AgentRun) -> None:
        self.runs.append(run)

    async def wait(self, run: AgentRun) -> AgentRun:
        """`%agent --wait`: wait for the run. If it fails, or the interrupt button stops it, the cell ends with
        one line (the error, or that it was stopped): the view above already shows what happened, and the
        run's error keeps its whole traceback (`run.error`)."""
        try:
            return await run
        except asyncio.CancelledError as exc:
            exc._render_traceback_ = lambda: [  # type: ignore[attr-defined]
                "Interrupted: the run was stopped (calls in flight were cancelled; the transcript stays valid)."]
            raise
        except Exception as exc:
            if exc is run.error:
                one_line_error(exc)
            raise
        finally:
            # The view's last update (its static rendering in place of the widget) goes out now, while this
            # cell still executes: a reader that hears only this cell's messages (nbclient) gets it too.
            view = self._views.get(run)
            throttle = getattr(view, "throttle", None)
            if run.done and throttle is not None:
                throttle.flush_now()

    def _ended(self, view: Any) -> None:
        """A run ended: every display of its view becomes the static rendering, and the widgets go."""
        if view.shown:
            bundle = view.static_bundle(style=self._carries_style(view))
            self.displays.update(view.display_id, bundle)
            self.displays.settle(getattr(getattr(view, "widget", None), "model_id", None), bundle)
        view.close()

    async def _find_styled(self, starting: str | None) -> None:
        """The first run of a kernel session: a cell whose output carries the stylesheet already (from an earlier
        kernel session: the notebook is saved with it) is the one that carries it, so the notebook holds one copy
        however many times its kernel restarts. Asks the page (nothing where none answers)."""
        from nbagent import render

        from .comm import FrontendError, NoFrontend

        frontend = frontend_for(self.shell)
        try:
            notebook = await frontend.request("read", timeout=10.0)
        except (NoFrontend, FrontendError):
            if not frontend.connected:
                frontend._absent_until = 0.0  # the notebook tools ask for themselves (as snapshots.py leaves it)
            return
        except Exception:  # pragma: no cover - a rendering never fails for this
            return
        marker = "<style>" + render.css()[:60]
        for cell in notebook.get("cells") or ():
            held = any(marker in str((out.get("data") or {}).get("text/html") or "") for out in cell.get("outputs") or ()
                       if isinstance(out, dict))
            if held and cell.get("id") != starting and self.styled_cell is None:
                self.styled_cell = str(cell.get("id"))
                return

    def _carries_style(self, view: Any) -> bool:
        """Whether this static rendering carries the stylesheet: once per notebook (per kernel session), in
        the first run's cell, and again when that cell's output is replaced; the others rely on it (the
        notebook is one page when exported or reopened) and on the frontend part, which ships it too."""
        if self.styled_cell is not None and self.styled_cell != getattr(view, "cell_id", None):
            return False
        self.styled_cell = getattr(view, "cell_id", None) or "?"
        return True

    def cell_of(self, run: AgentRun) -> str | None:
        view = self._views.get(run)
        return getattr(view, "cell_id", None)

    def where(self, run: AgentRun) -> str:
        view = self._views.get(run)
        return f"started in {_cell_label(view)}"

    def live_runs(self) -> list[AgentRun]:
        """The runs started with %agent that are still going, oldest first."""
        return [r for r in self.runs if not r.done]

    def stop_showing(self, reason: str = "the kernel stopped while the run was going on") -> None:
        """The kernel is going away: draw every live run's view as stopped, and replace its displays with that
        static rendering (what still reaches a frontend, see document.py)."""
        for run in self.live_runs():
            view = self._views.get(run)
            if view is None or not hasattr(view, "stop_showing") or view.stopped is not None:
                continue
            try:
                view.stop_showing(reason)
                if view.shown:
                    self.displays.update(view.display_id, view.static_bundle(style=self._carries_style(view)))
            except Exception:  # the kernel is going away: do what can be done
                pass
        self.kept.stop_showing()

    def run_here(self, agent: Agent, prompt: str, history: Any, *, compact: bool = False,
                 previous: AgentRun | None = None) -> AgentRun:
        """No event loop (terminal IPython): run to the end now, printing as it goes."""
        from ..live.text import TextView

        async def go() -> AgentRun:
            run = (agent.start_compaction(history, previous=previous) if compact
                   else agent.start(prompt, history=history, previous=previous))
            view = TextView(run)
            view.displayed_in = self.shell.execution_count
            self._views[run] = view
            try:
                await run
            except Exception:
                pass  # the run keeps its error; the view printed it
            return run

        return asyncio.run(go())

    def _make_view(self, run: AgentRun) -> Any:
        kind = self.config.view
        if kind == "auto":
            kind = "widget" if getattr(self.shell, "kernel", None) is not None else "text"
        if kind == "widget":
            try:
                from ..live.widgets import RunView
            except ImportError:  # a kernel without ipywidgets: printed lines instead
                pass
            else:
                return RunView(run, rate=self.config.update_rate)
        from ..live.text import TextView

        return TextView(run)

    def view_for(self, call: CallRecord) -> Any:
        """The view showing the run a call belongs to (None if there is none)."""
        for run, view in list(self._views.items()):
            if any(c is call for c in run.calls):
                return view
        return None

    def view(self, run: AgentRun) -> Any:
        """The live view of a run started with %agent, or made by `view_of` (None for other runs)."""
        return self._views.get(run)

    def view_of(self, run: AgentRun) -> Any:
        """What `nbagent.jupyter.view(run)` shows: the live view of a run started with %agent; for another run
        (`agent.run(...)` in a cell, say), a live view made now while it goes on (it replays what the run did
        so far), and once it ended the run itself, which displays whole (`display_run`)."""
        view = self._views.get(run)
        if view is not None:
            return view
        if run.done:
            return run
        view = self._make_view(run)
        self._views[run] = view
        if hasattr(view, "widget"):
            view.on_end = self._ended
            self.snapshots.follow(view)  # kept by the page too, once displayed
        return view

    def display_run(self, run: AgentRun) -> None:
        """How a run shows as a cell's result (`await run`) or with display(run).

        - in the cell that started it: nothing more (the view is there);
        - while it runs: its live view again (that display too ends up holding the static rendering);
        - once it ended, if its view was shown (the starting cell holds the whole run): one line, its status
          and answer, saying where the whole run is; `view(run)` shows it whole again;
        - else (a run nbagent did not show): the whole run, HTML and plain text.
        """
        from nbagent import render

        view = self._views.get(run)
        if view is not None and view.displayed_in == self.shell.execution_count:
            return
        if view is not None and hasattr(view, "widget") and view.shown:
            if not run.done:
                display(view)
                return
            where = _cell_label(view)  # (no stylesheet: the starting cell's rendering, or an earlier one, has it)
            display({"text/html": render.run_line_html(run, where, style=False),
                     "text/plain": render.run_line_text(run, where)}, raw=True)
            return
        display({"text/html": run._repr_html_(), "text/plain": render.run_text(run)}, raw=True)


class RunList(list):
    """Runs of the kernel (a plain list). Displayed: one line per run, then the live view of each run going."""

    def __init__(self, keeper: NotebookRuns, runs: list[AgentRun]) -> None:
        super().__init__(runs)
        self._keeper = keeper

    def _line(self, i: int, run: AgentRun) -> str:
        from nbagent.render import one_line, prompt_words

        prompt = prompt_words(run.prompt)[0]
        pending = ""
        view = self._keeper.view(run)
        if view is not None and getattr(view, "pending", None):
            pending = f", {len(view.pending)} waiting for you"
        return (f"[{i}] {status_of(run)}{pending} · {self._keeper.where(run)} · "
                f"{len(run.calls)} calls · {one_line(prompt or '', 80)}")

    def __repr__(self) -> str:
        if not self:
            return "(no %agent run is going)"
        return "\n".join(self._line(i, r) for i, r in enumerate(self))

    def _ipython_display_(self) -> None:
        print(repr(self))
        for run in self:
            view = self._keeper.view(run)
            if view is not None and hasattr(view, "widget") and not run.done:
                display(view)


def one_line_error(exc: BaseException) -> None:
    """Make IPython show a run's error in one line (`await run`, `--wait`): the view already shows what the
    run did, and the exception keeps its traceback (`run.error`)."""
    line = f"{type(exc).__name__}: {exc}"
    try:
        exc._render_traceback_ = lambda: [  # type: ignore[attr-defined]
            f"{line}  (the run failed: its view shows what it did; the exception, with its traceback, is run.error)"]
    except Exception:  # an exception type that refuses attributes keeps IPython's traceback
        pass


def _cell_label(view: Any) -> str:
    """'In [3]': `displayed_in` is the shell's execution count while the cell ran, one ahead of its number."""
    count = getattr(view, "displayed_in", None)
    return f"In [{count - 1}]" if isinstance(count, int) and count > 1 else "an earlier cell"


def status_of(run: AgentRun) -> str:
    return "waiting for your approval" if run.status == "waiting_for_approval" else run.status


def watch_shutdown(keeper: NotebookRuns) -> None:
    """Draw the live runs as stopped when the kernel shuts down: as soon as the shutdown request arrives (on
    the kernel's loop, which then still sends messages), and at the latest when the process exits."""
    import atexit
    import threading

    ref = weakref.ref(keeper)

    def at_exit() -> None:
        found = ref()
        if found is not None:
            found.stop_showing()

    atexit.register(at_exit)
    shell = keeper.shell
    try:
        loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
    except RuntimeError:  # terminal IPython: runs happen inside the cell, nothing outlives it
        loop = None

    def on_exit_now(change: Any) -> None:  # set by ipykernel's do_shutdown, on the control thread
        found = ref()
        if found is None or not change.get("new") or loop is None or loop.is_closed():
            return
        if threading.current_thread() is threading.main_thread():  # no control thread: this is the loop's
            found.stop_showing()
            return
        done = threading.Event()

        def stop() -> None:
            try:
                found.stop_showing()
            finally:
                done.set()

        try:
            loop.call_soon_threadsafe(stop)
        except RuntimeError:
            return
        # The shutdown goes on when this returns (the reply, then the loops stop): give the kernel's loop a
        # moment to draw the views as stopped first. A cell that blocks the loop leaves it to atexit.
        done.wait(2.0)

    if hasattr(shell, "observe") and shell.has_trait("exit_now"):
        shell.observe(on_exit_now, names="exit_now")


