"""The question on a call's row when the call needs consent: what it asks, and the Approve / Deny /
Always-allow buttons with a reason box.

    ┃   Needs your approval · <why>. The arguments above are exactly what will run.
    ┃   [Approve] [Deny] [Always allow write_file `./a.txt`] [reason…]

The panel only draws the question and hands clicks to the row (`CallRow.approve`, `.deny`, `.always_allow`),
which hands the decision to the run's loop; it knows nothing of runs or sessions.
"""

from __future__ import annotations

import html
from typing import Any, Callable

import ipywidgets as W

from ..records import ApprovalRequest
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

    def render(self, row_box: W.VBox, request: ApprovalRequest | None) -> int:
        """Show the question for `request` under the row (None: hide it); return the widget messages sent."""
        s = shared()
        if request is None:
            return 0 if self.box is None else set_traits(self.box, layout=s.hidden)
        scope = grant_label(request)
        question = (f'<div class="nba-ask-q"><b>Needs your approval</b> · {html.escape(request.reason)}. '
                    "The arguments above are exactly what will run.</div>")
        if self.box is None:
            approve = make_button("Approve", "check", "Run this call once", "nba-approve")
            deny = make_button("Deny", "times", "Do not run it; the model is told, with your reason if you give one",
                               "nba-deny")
            self._always = make_button(f"Always allow {scope}", "check-circle",
                                       f"Run it, and allow {scope} without asking for the rest of this session",
                                       "nba-always")
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
        sent += set_traits(self._always, description=f"Always allow {scope}")
        sent += set_traits(self.box, layout=s.plain)
        return sent

    def hide(self) -> None:
        """The kernel is stopping: no question can be answered any more."""
        if self.box is not None:
            set_traits(self.box, layout=shared().hidden)


def grant_label(request: Any) -> str:
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

