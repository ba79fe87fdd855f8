"""The question on a call's row when the call needs consent: what it asks, and the Approve / Deny /
Always-allow buttons with a reason box.

    ┃   Needs your approval · <why>. The arguments above are exactly what will run.
    ┃   [Approve] [Deny] [Always allow write_file ./a.txt (this file only)] [reason…]

The panel only draws the question and hands clicks to the row (`CallRow.approve`, `.deny`, `.always_allow`),
which hands the decision to the run's loop; it knows nothing of runs or sessions.

The question names what it asks about for the page: `data-nba-run`, `data-nba-call` and `data-nba-digest` (the
digest of the call and its exact arguments, `approval.digest`). With nbagent's extension the page sends a click
on these buttons as a decision through its own `nbagent.panel` comm, bound to that digest (panel/hub.py), so the
decision still arrives when another page closed these widgets (Notebook 7's file-browser tab does); without the
extension the buttons' own messages carry it.
"""

from __future__ import annotations

from typing import Any, Callable

import ipywidgets as W

from nbagent.records import ApprovalRequest
from nbagent.safety.shown import shown, shown_html

from .approval import PendingApproval
from .widget_kit import html_part, make_button, set_traits, shared

__all__ = ["ApprovalPanel", "grant_label"]


class ApprovalPanel:
    """The widgets of one row's question, made when it is first asked and hidden once it is decided."""

    def __init__(self, on_approve: Callable[[], Any], on_deny: Callable[[str], Any],
                 on_always: Callable[[], Any]) -> None:
        self._on_approve = on_approve
        self._on_deny = on_deny
        self._on_always = on_always
        self.box: W.VBox | None = None
        """The question, once asked (added to the row's box then)."""
        self._text: W.HTML | None = None
        self._reason: W.Text | None = None
        self._always: W.Button | None = None
        self.buttons: dict[str, W.Widget] = {}
        """The question's widgets once it was asked: approve, deny, always (buttons) and reason (text)."""

    def render(self, row_box: W.VBox, pending: PendingApproval | None, run_id: str = "") -> int:
        """Show the question `pending` asks under the row (None: hide it), naming the run, the call and the digest
        a decision binds to; return the widget messages sent."""
        s = shared()
        if pending is None:
            return 0 if self.box is None else set_traits(self.box, layout=s.hidden)
        request: ApprovalRequest = pending.request
        grant = grant_label(request)
        scope = shown(grant.short) if grant is not None else ""
        always_layout = s.plain if grant is not None else s.hidden  # nothing to always allow (run_cell)
        binding = " ".join(f'data-nba-{name}="{shown_html(str(value))}"'
                           for name, value in (("run", run_id), ("call", request.call.id), ("digest", pending.digest)))
        question = (f'<div class="nba-ask-q" {binding}><b>Needs your approval</b> · {shown_html(request.reason)}. '
                    "The arguments above are exactly what will run.</div>")
        if self.box is None:
            approve = make_button("Approve", "check", "Run this call once", "nba-approve")
            deny = make_button("Deny", "times", "Do not run it; the model is told, with your reason if you give one",
                               "nba-deny")
            self._always = make_button(f"Always allow {scope}", "check-circle",
                                       f"Run it, and allow {shown(grant.full) if grant else scope} without asking for "
                                       "the rest of this session", "nba-always")
            self._always.layout = always_layout
            self._reason = W.Text(placeholder="Reason for denying (optional; the model reads it)",
                                  layout=s.plain, style=s.text)
            self.buttons = {"approve": approve, "deny": deny, "always": self._always, "reason": self._reason}
            approve.on_click(lambda _button: self._on_approve())
            deny.on_click(lambda _button: self._on_deny(self._reason.value if self._reason is not None else ""))
            self._always.on_click(lambda _button: self._on_always())
            self._text = html_part(question)
            buttons = W.HBox([approve, deny, self._always, self._reason], layout=s.plain,
                             _dom_classes=("nba-buttons",))
            self.box = W.VBox([self._text, buttons], layout=s.plain, _dom_classes=("nba-ask",))
            row_box.children = row_box.children + (self.box,)
            return 8
        sent = set_traits(self._text, value=question)
        sent += set_traits(self._always, description=f"Always allow {scope}", layout=always_layout)
        sent += set_traits(self.box, layout=s.plain)
        return sent

    def hide(self) -> None:
        """The kernel is stopping: no question can be answered any more."""
        if self.box is not None:
            set_traits(self.box, layout=shared().hidden)


def grant_label(request: Any) -> Any:
    """What "Always allow" would grant, exactly (`nbagent.calls.grants.grant_label`: a `GrantLabel`, whose `short`
    is the button's text and `full` its tooltip; None: this call cannot be always allowed, no button)."""
    from nbagent.calls.grants import grant_label as label

    return label(request)

