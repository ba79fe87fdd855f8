"""One tool call in a run's view: its label, status, time, arguments, live output and result, and the
approval question while the call waits for a decision (approval_panel.py draws that part).

    ┃ ✓ Read 120 rows of data.csv      read_file      done   0.02 s
    ┃   path  "data.csv"                                   <- arguments (partial while they stream)
    ┃   ▸ Result · DataFrame, 120 rows × 5 columns · calls[0].details
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import ipywidgets as W

from nbagent import render
from nbagent.decisions import Decision
from nbagent.safety.shown import output_html, shown_html

from .approval import PendingApproval
from .approval_panel import ApprovalPanel
from .widget_kit import html_part, set_traits, shared

if TYPE_CHECKING:  # pragma: no cover
    from nbagent.records import CallRecord

__all__ = ["LIVE", "TAIL_CHARS", "TAIL_LINES", "CallRow"]

TAIL_LINES = 8
"""Lines of a tool's live output shown in its row."""
TAIL_CHARS = 2400
LIVE = ("running", "waiting_for_approval", "pending", "streaming")
"""The statuses of a call still going (the view redraws their rows every second: the time moves on)."""


class CallRow:
    """One tool call in the view: its label, status, time, progress, arguments, output, result, and the
    Approve / Deny / Always-allow question when the call needs consent."""

    def __init__(self, view: Any, key: tuple[int, int], name: str) -> None:
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
        self.approval = ApprovalPanel(self.approve, self.deny, self.always_allow)
        """The Approve / Deny / Always-allow question, drawn under the row while the call waits."""
        self.waited: float | None = None
        """Seconds the call waited for a decision in this view (shown apart from the time it took)."""

    @property
    def status(self) -> str:
        return render.shown_status(self.record) if self.record is not None else "streaming"

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

    @property
    def buttons(self) -> dict[str, W.Widget]:
        """The question's widgets once it was asked: approve, deny, always (buttons) and reason (text)."""
        return self.approval.buttons

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
            self._body = html_part(body)
            self.box = W.VBox([self._body], layout=shared().plain, _dom_classes=classes)
            view._add(self.box)
            sent += 2
        else:
            sent += set_traits(self._body, value=body)
            sent += set_traits(self.box, _dom_classes=classes)
        sent += self._render_tail()
        sent += self.approval.render(self.box, self.pending if waiting else None, view.run.id)
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
        value = f'<pre class="nba-tail">{output_html(head + shown)}</pre>'
        # a call that went well folds its output away when it ends, unless the output says something the
        # person must see (a replay whose result differs from the record)
        notice = next((u.data["keep_open"] for u in rec.progress if u.data.get("keep_open")), None)
        fold = rec.done and rec.status == "ok" and notice is None
        if fold:
            label = f"output · {rec.output_tail.total:,} characters"
        else:
            label = notice or ("live output" if not rec.done else "output")
        toggle = (f'<label class="nba-toggle"><input type="checkbox"{"" if fold else " checked"}>'
                  f"{shown_html(label)}</label>")
        if self._tail is None:
            self._tail_toggle = html_part(toggle, "nba-tail-wrap")
            self._tail = html_part(value, "nba-tail-wrap")
            self.box.children = self.box.children + (self._tail_toggle, self._tail)
            self._tail_folded = fold
            return 3
        sent = set_traits(self._tail, value=value)
        if rec.done and not self._tail_folded:  # once, when the call ends: the person may unfold it again
            self._tail_folded = True
            sent += set_traits(self._tail_toggle, value=toggle)
        return sent
