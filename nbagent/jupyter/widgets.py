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
"""

from __future__ import annotations

import asyncio
import functools
import html
import uuid
from typing import TYPE_CHECKING, Any, Callable

import ipywidgets as W
from ipywidgets.widgets.widget_string import HTMLStyle, TextStyle

from .. import render
from ..decisions import Decision
from ..messages import AssistantMessage
from ..records import ApprovalRequest
from .approval import PendingApproval
from .capture import close_figure, is_figure
from .steering import SteerBox
from .throttle import Throttle

if TYPE_CHECKING:  # pragma: no cover
    from ..records import CallRecord
    from ..run import AgentRun

__all__ = ["CallRow", "RunView"]

TAIL_LINES = 8
"""Lines of a tool's live output shown in its row."""
TAIL_CHARS = 2400
_LIVE = ("running", "waiting_for_approval", "pending", "streaming")


@functools.cache
def _shared() -> Any:
    """Layout and style objects every view shares: a row costs two widget models, not six."""

    class Shared:
        plain = W.Layout()
        hidden = W.Layout(display="none")
        html = HTMLStyle()
        button = W.ButtonStyle()
        text = TextStyle()

    return Shared


def _set(widget: W.Widget, **values: Any) -> int:
    """Set traits that differ, in one message; return how many messages that was (0 or 1)."""
    changed = {k: v for k, v in values.items() if getattr(widget, k) != v}
    if not changed:
        return 0
    with widget.hold_sync():
        for key, value in changed.items():
            setattr(widget, key, value)
    return 1


def _html(value: str = "", *classes: str) -> W.HTML:
    s = _shared()
    return W.HTML(value, layout=s.plain, style=s.html, _dom_classes=classes)


def _button(description: str, icon: str, tooltip: str, cls: str) -> W.Button:
    s = _shared()
    return W.Button(description=description, icon=icon, tooltip=tooltip, layout=s.plain, style=s.button,
                    _dom_classes=(cls,))


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
            self.widget = _html(value)
            self.view._add(self.widget)
            return 1
        return _set(self.widget, value=value)


class _Note:
    """A compaction of the transcript: what it replaced, and the summary on demand."""

    def __init__(self, view: RunView, compaction: Any) -> None:
        self.view = view
        self.compaction = compaction
        self.widget: W.HTML | None = None

    def render(self) -> int:
        if self.widget is not None:
            return 0
        self.widget = _html(render.compaction_html(self.compaction))
        self.view._add(self.widget)
        return 1


class CallRow:
    """One tool call in the view: its label, status, time, progress, arguments, output, result, and the
    Approve / Deny / Always-allow question when the call needs consent."""

    def __init__(self, view: RunView, key: tuple[int, int], name: str) -> None:
        self.view = view
        self.key = key
        self.name = name
        self.partial_event: Any = None
        """The latest `ToolCallDelta` of this call; its snapshot of the arguments is taken only when drawn."""
        self.record: CallRecord | None = None
        self.pending: PendingApproval | None = None
        """The question waiting for a click, if any."""
        self.box: W.VBox | None = None
        self._body: W.HTML | None = None
        self._tail: W.HTML | None = None
        self._tail_toggle: W.HTML | None = None
        self._tail_folded = False
        self._ask: W.VBox | None = None
        self._ask_text: W.HTML | None = None
        self._reason: W.Text | None = None
        self._always: W.Button | None = None
        self.waited: float | None = None
        """Seconds the call waited for a decision in this view (shown apart from the time it took)."""
        self.buttons: dict[str, W.Widget] = {}
        """The question's widgets once it was asked: approve, deny, always (buttons) and reason (text)."""

    @property
    def status(self) -> str:
        return self.record.status if self.record is not None else "streaming"

    @property
    def done(self) -> bool:
        return self.record is not None and self.record.done

    # -- decisions (clicks, or code) --------------------------------------------------------------------
    def approve(self) -> bool:
        """Approve the pending call (what the Approve button does). False if nothing is pending."""
        return self._decide(Decision(True, reason="approved in the notebook"))

    def deny(self, reason: str = "") -> bool:
        """Deny the pending call; the reason is told to the model (what the Deny button does)."""
        return self._decide(Decision(False, reason=reason.strip() or "denied by the user"))

    def always_allow(self) -> bool:
        """Approve, and remember the approval for this session (what the Always-allow button does)."""
        return self._decide(Decision(True, remember=True, reason="always allowed in the notebook"))

    def _decide(self, decision: Decision) -> bool:
        pending = self.pending
        return pending is not None and pending.decide(decision)

    def _on_approve(self, _button: W.Button) -> None:
        self.approve()

    def _on_deny(self, _button: W.Button) -> None:
        self.deny(self._reason.value if self._reason is not None else "")

    def _on_always(self, _button: W.Button) -> None:
        self.always_allow()

    # -- rendering ------------------------------------------------------------------------------------------
    @property
    def partial(self) -> Any:
        """The arguments parsed so far while the model streams them (None before any arrived)."""
        event = self.partial_event
        return None if event is None else event.partial_arguments

    def _partial(self) -> Any:
        return self.partial if self.record is None else None  # once the call exists, its arguments are drawn

    def _index(self) -> int | None:
        try:
            return self.view.run.calls.index(self.record)
        except ValueError:
            return None

    def render(self) -> int:
        sent = 0
        view = self.view
        waiting = self.pending is not None
        body = render.call_inner_html(self.record, name=self.name, partial=self._partial(),
                                      index=self._index() if self.done else None, waiting=waiting,
                                      waited=self.waited)
        classes = ("nba-call", f"nba-s-{self.status}")
        if self.box is None:
            self._body = _html(body)
            self.box = W.VBox([self._body], layout=_shared().plain, _dom_classes=classes)
            view._add(self.box)
            sent += 2
        else:
            sent += _set(self._body, value=body)
            sent += _set(self.box, _dom_classes=classes)
        sent += self._render_tail()
        sent += self._render_ask(waiting)
        return sent

    def _render_tail(self) -> int:
        rec = self.record
        if rec is None or not rec.progress_count or not rec.output_tail.total:
            return 0
        text = rec.output_tail.text
        cut = rec.output_tail.total - len(text)
        lines = text.splitlines()
        if len(lines) > TAIL_LINES:
            cut += sum(len(line) + 1 for line in lines[:-TAIL_LINES])
            lines = lines[-TAIL_LINES:]
        shown = "\n".join(lines)
        if len(shown) > TAIL_CHARS:
            cut += len(shown) - TAIL_CHARS
            shown = shown[-TAIL_CHARS:]
        head = f"… {cut:,} earlier characters\n" if cut > 0 else ""
        value = f'<pre class="nba-tail">{html.escape(head + shown)}</pre>'
        fold = rec.done and rec.status == "ok"  # a call that went well folds its output away when it ends
        if fold:
            label = f"output · {rec.output_tail.total:,} characters"
        else:
            label = "live output" if not rec.done else "output"
        toggle = (f'<label class="nba-toggle"><input type="checkbox"{"" if fold else " checked"}>'
                  f"{html.escape(label)}</label>")
        if self._tail is None:
            self._tail_toggle = _html(toggle, "nba-tail-wrap")
            self._tail = _html(value, "nba-tail-wrap")
            self.box.children = self.box.children + (self._tail_toggle, self._tail)
            self._tail_folded = fold
            return 3
        sent = _set(self._tail, value=value)
        if rec.done and not self._tail_folded:  # once, when the call ends: the person may unfold it again
            self._tail_folded = True
            sent += _set(self._tail_toggle, value=toggle)
        return sent

    def _render_ask(self, waiting: bool) -> int:
        s = _shared()
        if not waiting:
            return 0 if self._ask is None else _set(self._ask, layout=s.hidden)
        request = self.pending.request
        scope = _grant_label(request)
        question = (f'<div class="nba-ask-q"><b>Needs your approval</b> · {html.escape(request.reason)}. '
                    "The arguments above are exactly what will run.</div>")
        if self._ask is None:
            approve = _button("Approve", "check", "Run this call once", "nba-approve")
            deny = _button("Deny", "times", "Do not run it; the model is told, with your reason if you give one",
                           "nba-deny")
            self._always = _button(f"Always allow {scope}", "check-circle",
                                   f"Run it, and allow {scope} without asking for the rest of this session",
                                   "nba-always")
            self._reason = W.Text(placeholder="Reason for denying (optional; the model reads it)",
                                  layout=s.plain, style=s.text)
            self.buttons = {"approve": approve, "deny": deny, "always": self._always, "reason": self._reason}
            approve.on_click(self._on_approve)
            deny.on_click(self._on_deny)
            self._always.on_click(self._on_always)
            self._ask_text = _html(question)
            buttons = W.HBox([approve, deny, self._always, self._reason], layout=s.plain,
                             _dom_classes=("nba-buttons",))
            self._ask = W.VBox([self._ask_text, buttons], layout=s.plain, _dom_classes=("nba-ask",))
            self.box.children = self.box.children + (self._ask,)
            return 8
        sent = _set(self._ask_text, value=question)
        sent += _set(self._always, description=f"Always allow {scope}")
        sent += _set(self._ask, layout=s.plain)
        return sent


def _grant_label(request: Any) -> str:
    """What "Always allow" would grant, exactly: `git config --get x` for a command, `write_file ./a.txt`
    for a file, the tool's name when it is the whole tool."""
    from ..toolbox._shellwords import literal_pattern

    scope = request.suggested_scope
    if not scope:
        return request.name
    literal = literal_pattern(scope)
    if literal is None:
        return f"{request.name}({scope})"
    return f"`{literal}`" if request.name == "shell" else f"{request.name} `{literal}`"


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
        self.ended = False
        """True once the run ended and the displays hold the static rendering: the widgets are closed."""
        s = _shared()
        self._head_info = _html(render.header_html(run, live=not run.done))
        self.stop_button = _button("Stop", "stop", "Stop this run (the same as run.cancel())", "nba-stop")
        self.stop_button.on_click(self._on_stop)
        self._head = W.HBox([self._head_info, self.stop_button], layout=s.plain, _dom_classes=("nba-head",))
        prompt = render.prompt_html(run.prompt, len(run.messages) - len(run.new_messages))
        self._body = W.VBox([_html(prompt)] if prompt else [], layout=s.plain, _dom_classes=("nba-body",))
        self._foot = _html("", "nba-footer")
        self._foot.layout = s.hidden
        style = _html(f"<style>{render.css()}</style>")
        style.layout = s.hidden
        self.steer = SteerBox(run)  # steering: a message into the running run (nbagent.jupyter.steering)
        if run.done:
            self.steer.close()
        self.widget = W.VBox([style, self._head, self._body, self.steer.widget, self._foot], layout=s.plain,
                             _dom_classes=("nba-view",))
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
        messages = run.new_messages[1:] if run.prompt is not None else run.new_messages
        by_id = {rec.id: rec for rec in run.calls}
        turn = 0
        for msg in messages:
            if isinstance(msg, AssistantMessage):
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
        self._items.extend(_Note(self, c) for c in getattr(run, "compactions", ()))
        self._dirty.update(self._items)
        self._dirty.add("head")
        self.throttle.request()

    # -- events (on the run's loop) ------------------------------------------------------------------------
    def _on_event(self, event: Any) -> None:
        kind = event.kind
        if kind == "model_retrying":
            self.retrying = event
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
        self._dirty.update(r for r in self.rows if r.status in _LIVE)
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
        if "head" in dirty or end:
            waiting = len(self.pending)
            sent += _set(self._head_info, value=render.header_html(self.run, waiting=waiting, live=not end,
                                                                   retrying=None if end else self.retrying))
        if end:
            s = _shared()
            foot = render.footer_html(self.run)
            sent += _set(self._foot, value=foot, layout=s.plain if foot else s.hidden)
            sent += _set(self.stop_button, layout=s.hidden)
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
        s = _shared()
        for row in self.rows:
            if row.box is not None and row.status in _LIVE:
                body = render.call_inner_html(row.record, name=row.name, partial=row._partial(), frozen=True)
                _set(row._body, value=body)
                _set(row.box, _dom_classes=("nba-call", "nba-s-unfinished"))
                if row._ask is not None:
                    _set(row._ask, layout=s.hidden)
        _set(self._head_info, value=render.header_html(self.run, stopped=reason))
        _set(self._foot, value=render.footer_html(self.run, stopped=reason), layout=s.plain)
        _set(self.stop_button, layout=s.hidden)

    def close(self) -> None:
        """Close every widget of the view (the shared layouts and styles stay): the frontend forgets them."""
        def walk(widget: W.Widget) -> None:
            for child in getattr(widget, "children", ()):
                walk(child)
            widget.close()

        walk(self.widget)
        self.ended = True

    # -- display --------------------------------------------------------------------------------------------
    def static_bundle(self) -> dict[str, str]:
        """The run as HTML and plain text: what the displays hold once it ended (or the kernel stopped)."""
        waits = self.waits
        return {"text/html": render.run_html(self.run, stopped=self.stopped, waits=waits),
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
