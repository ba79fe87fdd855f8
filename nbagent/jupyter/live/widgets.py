"""The live view of a run (ipywidgets): a header with a Stop button, the streamed text, one row per tool call.

    ┌ nbagent  ◐ running  scripted  default mode  turn 2 · 3 calls · 4.2 s ──────────── [■ Stop] ┐
    │ YOU  Clean the data in df                                                                 │
    │ I'll look at the columns first.                       <- the model's text, as Markdown    │
    │ ┃ ✓ Read 120 rows of data.csv      read_file      done   0.02 s                           │
    │ ┃   path  "data.csv"                                   <- arguments (partial while they stream)
    │ ┃   ▸ Result · DataFrame, 120 rows × 5 columns · calls[0].details                         │
    │ ┃ ◐ Writing report.md              write_file    needs approval                            │
    │ ┃   [Approve] [Deny] [Always allow write_file] [reason…]                                   │
    └───────────────────────────────────────────────────────────────────────────────────────────┘

The view listens to the run's events and only marks what changed; a `Throttle` renders the changes on the
run's loop within a budget of widget messages a second (`NBAgent.update_rate`). Every widget is created
and changed on the run's loop: click handlers (which may run on a kernel subshell's thread) only hand a
decision over with `call_soon_threadsafe`, or call the thread-safe `run.cancel()`.

A row is a `CallRow` (call_row.py), its question an `ApprovalPanel` (approval_panel.py); the parts they are
made of are in widget_kit.py.

Another page on the same kernel may close the view's widgets: a page without a widget manager answers every
widget's `comm_open` with `comm_close` (Notebook 7's file-browser tab, which keeps a connection to the
notebook it created). The kernel then forgets them: their updates still reach every page, but their buttons'
messages are dropped. The view notices (`closed_elsewhere`) and says so in one line, offering `view(run)`;
with nbagent's extension the buttons keep working, since the page sends their decisions (and Stop) through
its own `nbagent.panel` comm, found by the run's id in the view's classes (`nba-run-<id>`).
"""

from __future__ import annotations

import asyncio
import re
import uuid
from typing import TYPE_CHECKING, Any, Callable

import ipywidgets as W

from nbagent import render
from nbagent.decisions import Decision
from nbagent.messages import AssistantMessage, UserMessage
from nbagent.records import ApprovalRequest
from nbagent.render.steps import run_step, step_html

from .approval import PendingApproval
from .approval_panel import grant_label as _grant_label  # noqa: F401 - the name tests import from here
from .call_row import LIVE, CallRow
from .capture import close_figure, is_figure
from .steering import SteerBox
from .throttle import Throttle
from .widget_kit import html_part, make_button, set_traits, shared

if TYPE_CHECKING:  # pragma: no cover
    from nbagent.agent.run import AgentRun
    from nbagent.records import CallRecord

__all__ = ["CallRow", "RunView"]

CLOSED_ELSEWHERE = ("⚠ Another page closed this view's widgets (Notebook 7's file browser does). "
                    "If a button does nothing, use <code>view(run)</code> in a cell.")
"""The line a view shows once another page closed its widgets."""


class _Segment:
    """The text of one model response, rendered as Markdown while it streams."""

    def __init__(self, view: RunView, turn: int) -> None:
        self.view = view
        self.turn = turn
        self.text = ""
        self.streaming = True
        self.widget: W.HTML | None = None

    def render(self) -> int:
        cursor = '<span class="nba-cursor"></span>' if self.streaming and not self.view.run.done else ""
        value = f'<div class="nba-md">{render.markdown_html(self.text)}{cursor}</div>' if self.text else ""
        if self.widget is None:
            self.widget = html_part(value)
            self.view._add(self.widget)
            return 1
        return set_traits(self.widget, value=value)


class _Note:
    """A compaction of the transcript: what it replaced, and the summary on demand."""

    def __init__(self, view: RunView, compaction: Any) -> None:
        self.view = view
        self.compaction = compaction
        self.widget: W.HTML | None = None

    def render(self) -> int:
        if self.widget is not None:
            return 0
        self.widget = html_part(render.compaction_html(self.compaction))
        self.view._add(self.widget)
        return 1


class RunView:
    """The live view of one `AgentRun`. Display it (`display(view)`); it updates itself until the run ends.

    `rows` holds one `CallRow` per tool call, in order; `pending` the rows waiting for a decision.
    """

    def __init__(self, run: AgentRun, *, rate: float = 30.0) -> None:
        self.run = run
        loop = run.loop
        if loop is None or loop.is_closed():  # a finished run whose loop is gone: render on this one
            loop = asyncio.get_running_loop()
        self.loop: asyncio.AbstractEventLoop = loop
        self.rows: list[CallRow] = []
        self._items: list[Any] = []  # segments and rows, in the order they appeared
        self._rows_by_key: dict[tuple[int, int], CallRow] = {}
        self._segments: dict[int, _Segment] = {}
        self._turn = run.turns
        self.retrying: Any = None
        """The model request being retried (a `ModelRetrying`), until the stream moves on."""
        self._dirty: set[Any] = set()
        self._new_children: list[W.Widget] = []
        self._closed = False
        self.displayed_in: int | None = None
        """The execution count of the cell that displayed the view (set by the magic)."""
        self.cell_id: str | None = None
        """The id of the cell that started the run, when the frontend says (JupyterLab and Notebook 7 do)."""
        self.display_id = uuid.uuid4().hex
        """Every display of this view shares this id: when the run ends, all of them are replaced by the run's
        static rendering (`on_end`), which is what a saved notebook keeps."""
        self.shown = 0
        """How many times the view was displayed."""
        self.on_end: Callable[[RunView], None] | None = None
        """Called once, on the run's loop, after the last update of the widgets (the session replaces the
        displays with the static rendering, then `close()`s the widgets)."""
        self.stopped: str | None = None
        """Why the run can no longer go on although it did not end (the kernel is shutting down)."""
        self.plan_steps: list[str] | None = None
        """A run carrying out an approved plan: its steps (the header then shows the step the model says it is
        on: render/steps.py)."""
        self.ended = False
        """True once the run ended and the displays hold the static rendering: the widgets are closed."""
        self.closed_elsewhere = False
        """True once another page closed the view's widgets (see the module's docstring)."""
        s = shared()
        self._head_info = html_part(render.header_html(run, live=not run.done))
        self.stop_button = make_button("Stop", "stop", "Stop this run (the same as run.cancel())", "nba-stop")
        self.stop_button.on_click(self._on_stop)
        self._head = W.HBox([self._head_info, self.stop_button], layout=s.plain, _dom_classes=("nba-head",))
        prompt = render.prompt_html(run.prompt, render.history_count(run))
        self._body = W.VBox([html_part(prompt)] if prompt else [], layout=s.plain, _dom_classes=("nba-body",))
        self._foot = html_part("", "nba-footer")
        self._foot.layout = s.hidden
        style = html_part(f"<style>{render.css()}</style>")
        style.layout = s.hidden
        self.steer = SteerBox(run)  # steering: a message into the running run (nbagent.jupyter.live.steering)
        if run.done:
            self.steer.close()
        self._notice = html_part("", "nba-notice")
        self._notice.layout = s.hidden
        classes = ("nba-view", f"nba-run-{run.id}") if re.fullmatch(r"[A-Za-z0-9_-]{1,64}", run.id) else ("nba-view",)
        self.widget = W.VBox([style, self._head, self._notice, self._body, self.steer.widget, self._foot],
                             layout=s.plain, _dom_classes=classes)
        self._watch_close(self.widget)
        self.throttle = Throttle(self.loop, self._flush, rate)
        self._replay()
        self._unsubscribe = run.subscribe(self._on_event)
        self._tick_handle: asyncio.TimerHandle | None = None
        if run.done:
            self._dirty.add("end")
            self.throttle.request()
        else:
            self._tick_handle = self.loop.call_later(1.0, self._tick)

    # -- what the run did before the view existed -----------------------------------------------------------
    def _replay(self) -> None:
        run = self.run
        by_id = {rec.id: rec for rec in run.calls}
        turn = 0
        for msg in render.shown_items(run):  # as it happened, however compaction rewrote the transcript since
            if not isinstance(msg, (AssistantMessage, UserMessage)):
                self._items.append(_Note(self, msg))
            elif isinstance(msg, AssistantMessage):
                turn += 1
                if msg.text:
                    seg = self._segment(turn)
                    seg.text, seg.streaming = msg.text, False
                for call in msg.tool_calls:
                    rec = by_id.get(call.id)
                    if rec is not None:
                        self._row_of(rec)
        for rec in run.calls:  # calls of a response still in flight
            self._row_of(rec)
        self._dirty.update(self._items)
        self._dirty.add("head")
        self.throttle.request()

    # -- events (on the run's loop) ------------------------------------------------------------------------
    def _on_event(self, event: Any) -> None:
        kind = event.kind
        if kind in ("model_retrying", "model_silent"):  # the header says it ("no answer from HOST for 30 s")
            self.retrying = event if kind == "model_retrying" or event.seconds else None
            self._mark("head")
            return
        if self.retrying is not None and kind != "tool_call_progress":
            self.retrying = None  # the stream moved on
        if kind == "tool_call_progress":
            self._mark(self._row_of(event.call))
            return
        if kind == "text_delta":
            seg = self._segment(self._turn)
            seg.text += event.text
            self._mark(seg)
        elif kind == "tool_call_delta":
            row = self._row(self._turn, event.index, event.name or "")
            if event.name:
                row.name = event.name
            # Reading `partial_arguments` costs the size of the arguments so far: keep the event and take
            # the snapshot when the row is drawn (at most ~30 times a second), not on every fragment.
            row.partial_event = event
            self._mark(row)
        elif kind == "turn_started":
            self._turn = event.turn
        elif kind == "model_response":
            message = event.message
            seg = self._segments.get(event.turn)
            if message.text and seg is None:
                seg = self._segment(event.turn)
            if seg is not None:
                seg.text, seg.streaming = message.text, False
                self._mark(seg)
        elif kind == "tool_call_started":
            rec = event.call
            row = self._row(rec.turn, rec.index, rec.name)
            row.record = rec
            row.name = rec.name
            self._mark(row)
        elif kind in ("approval_requested", "approval_decided", "tool_call_finished", "approval_still_waiting"):
            self._mark(self._row_of(event.call))
            if kind == "tool_call_finished":
                result = event.call.result
                if result is not None and is_figure(result.details):
                    close_figure(result.details)  # drawn in the row; not again under the next cell
        elif kind == "compacted":
            note = _Note(self, event.compaction)
            self._items.append(note)
            self._mark(note)
        elif kind == "run_finished":
            self.steer.close()
            self._dirty.update(self._segments.values())
            self._dirty.update(self.rows)
            self._dirty.add("end")
        self._mark("head")

    def follow_plan(self, steps: list[str]) -> None:
        """The run carries out an approved plan with these steps: the header shows the step it says it is on."""
        self.plan_steps = list(steps)
        self._mark("head")

    def _mark(self, item: Any) -> None:
        self._dirty.add(item)
        self.throttle.request()

    def _segment(self, turn: int) -> _Segment:
        seg = self._segments.get(turn)
        if seg is None:
            seg = self._segments[turn] = _Segment(self, turn)
            self._items.append(seg)
        return seg

    def _row(self, turn: int, index: int, name: str) -> CallRow:
        row = self._rows_by_key.get((turn, index))
        if row is None:
            row = self._rows_by_key[(turn, index)] = CallRow(self, (turn, index), name)
            self.rows.append(row)
            self._items.append(row)
        return row

    def _row_of(self, rec: CallRecord) -> CallRow:
        row = self._row(rec.turn, rec.index, rec.name)
        row.record = rec
        return row

    def _tick(self) -> None:
        self._tick_handle = None
        if self.run.done or self._closed:
            return
        self._dirty.add("head")
        self._dirty.update(r for r in self.rows if r.status in LIVE)
        self.throttle.request()
        self._tick_handle = self.loop.call_later(1.0, self._tick)

    # -- approvals ------------------------------------------------------------------------------------------
    @property
    def pending(self) -> list[CallRow]:
        """Rows whose call waits for a decision."""
        return [r for r in self.rows if r.pending is not None and not r.pending.decided]

    async def ask(self, request: ApprovalRequest) -> Decision:
        """Show the question on the call's row and wait for a click (or `row.approve()` / `row.deny()`)."""
        row = self._row_of(request.call)
        pending = PendingApproval(request, self.loop)
        row.pending = pending
        self._mark(row)
        self._mark("head")
        asked = self.loop.time()
        try:
            return await pending.future
        finally:
            row.waited = (row.waited or 0.0) + self.loop.time() - asked
            row.pending = None
            self._mark(row)
            self._mark("head")

    def _on_stop(self, _button: W.Button) -> None:
        self.run.cancel("stopped from the notebook")

    # -- another page closed the widgets -----------------------------------------------------------------------
    def _watch_close(self, widget: W.Widget) -> None:
        comm = getattr(widget, "comm", None)
        if comm is not None and hasattr(comm, "on_close"):
            comm.on_close(self._on_comm_close)  # a page's comm_close (our own close() does not call it)

    def _on_comm_close(self, _msg: Any = None) -> None:
        """A page closed the view's widget (on whatever thread the kernel handles it): tell the run's loop."""
        try:
            self.loop.call_soon_threadsafe(self._closed_by_a_page)
        except RuntimeError:  # the loop is gone: nothing left to say
            pass

    def _closed_by_a_page(self) -> None:
        if self._closed or self.ended or self.closed_elsewhere:
            return
        self.closed_elsewhere = True
        self._mark("notice")

    # -- rendering (on the run's loop, throttled) ---------------------------------------------------------
    def _add(self, widget: W.Widget) -> None:
        self._new_children.append(widget)

    def _flush(self) -> int:
        dirty, self._dirty = self._dirty, set()
        sent = 0
        end = "end" in dirty
        for item in self._items:  # in the order they appeared, so new ones are added in that order
            if item in dirty:
                sent += item.render()
        if self._new_children:
            self._body.children = self._body.children + tuple(self._new_children)
            self._new_children.clear()
            sent += 1
        if "notice" in dirty and not end:
            sent += set_traits(self._notice, value=f'<div class="nba-closed-elsewhere">{CLOSED_ELSEWHERE}</div>',
                               layout=shared().plain)
        if "head" in dirty or end:
            waiting = len(self.pending)
            step = step_html(run_step(self.run, self.plan_steps)) if self.plan_steps is not None else ""
            sent += set_traits(self._head_info, value=render.header_html(self.run, waiting=waiting, live=not end,
                                                                   retrying=None if end else self.retrying,
                                                                   step=step))
        if end:
            s = shared()
            foot = render.footer_html(self.run)
            sent += set_traits(self._foot, value=foot, layout=s.plain if foot else s.hidden)
            sent += set_traits(self.stop_button, layout=s.hidden)
            self._finish()
        return sent

    def _finish(self) -> None:
        self._closed = True
        self._unsubscribe()
        if self._tick_handle is not None:
            self._tick_handle.cancel()
            self._tick_handle = None
        self.throttle.close()
        if self.on_end is not None:
            on_end, self.on_end = self.on_end, None
            on_end(self)

    def stop_showing(self, reason: str) -> None:
        """The run cannot go on (the kernel is shutting down): draw it as stopped, now, and stop listening.

        Called on the kernel's main thread while nothing else runs on the loop. The widgets' last state is
        then honest too (no spinner, no Stop button, the reason in the footer), for a frontend that keeps
        showing them.
        """
        if self._closed or self.run.done:
            return
        self.stopped = reason
        self._closed = True
        self._unsubscribe()
        if self._tick_handle is not None:
            self._tick_handle.cancel()
            self._tick_handle = None
        self.throttle.close()
        s = shared()
        for row in self.rows:
            if row.box is not None and row.status in LIVE:
                body = render.call_inner_html(row.record, name=row.name, partial=row._partial(), frozen=True)
                set_traits(row._body, value=body)
                set_traits(row.box, _dom_classes=("nba-call", f"nba-s-{render.frozen_status(row.status)}"))
                row.approval.hide()
        set_traits(self._head_info, value=render.header_html(self.run, stopped=reason))
        set_traits(self._foot, value=render.footer_html(self.run, stopped=reason), layout=s.plain)
        set_traits(self.stop_button, layout=s.hidden)

    def close(self) -> None:
        """Close every widget of the view (the shared layouts and styles stay): the frontend forgets them."""
        def walk(widget: W.Widget) -> None:
            for child in getattr(widget, "children", ()):
                walk(child)
            widget.close()

        walk(self.widget)
        self.ended = True

    # -- display --------------------------------------------------------------------------------------------
    def static_bundle(self, *, style: bool = True) -> dict[str, str]:
        """The run as HTML and plain text: what the displays hold once it ended (or the kernel stopped);
        `style=False` leaves the stylesheet out (another output of the notebook carries it)."""
        waits = self.waits
        return {"text/html": render.run_html(self.run, stopped=self.stopped, waits=waits, style=style),
                "text/plain": render.run_text(self.run, stopped=self.stopped, waits=waits)}

    @property
    def waits(self) -> dict[str, float]:
        """Seconds each call (by id) waited for a decision here."""
        return {r.record.id: r.waited for r in self.rows if r.waited and r.record is not None}

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any]:
        if self.ended or self.stopped is not None:
            return self.static_bundle()
        data = self.widget._repr_mimebundle_(**kwargs)
        data["text/plain"] = render.run_text(self.run)  # the fallback of a frontend without widgets
        return data

    def _ipython_display_(self) -> None:
        """Displayed (by `%agent`, `view(run)`, `display(view)`): live, with the view's display id, so that this
        display too ends up holding the static rendering; once the run ended, the static rendering."""
        from IPython.display import display

        if self.ended or self.stopped is not None:
            display(self.static_bundle(), raw=True)
            return
        display(self._repr_mimebundle_(), raw=True, display_id=self.display_id)
        self.shown += 1

    def __repr__(self) -> str:
        return f"<RunView of {self.run!r}: {len(self.rows)} calls, {len(self.pending)} waiting>"
