"""Steering a running run from the notebook: `%agent --steer TEXT` in a cell, and a text box in the live view.

Both call `AgentRun.steer`: the message joins the run's transcript at its next turn boundary. What is typed
is the person's own message to their own run; it is sent as a user message, like a prompt. `--steer` prints
one line saying where it went and returns nothing (the run's view is already on the page: returning the run
would show a second copy of it under the cell).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import ipywidgets as W
from IPython.core.error import UsageError

if TYPE_CHECKING:  # pragma: no cover
    from nbagent.agent.run import AgentRun

__all__ = ["SteerBox", "steer_latest"]


def steer_latest(session: Any, text: str) -> None:
    """`%agent --steer TEXT`: send `text` into the latest run of this notebook that is still going."""
    text = (text or "").strip()
    if not text:
        raise UsageError("%agent --steer needs the message: %agent --steer also plot the monthly totals")
    live = session.live_runs()
    if not live:
        raise UsageError("no %agent run is going on to steer: start one with %agent PROMPT")
    run = live[-1]
    if not run.steer(text):
        raise UsageError("that run has just ended: start another with %agent PROMPT")
    print(f"Sent to the running run ({session.where(run)}; it joins at its next turn): {text}")


class SteerBox:
    """A one-line text box and a Send button under a live run's view: Enter or Send steers the run.

    With nbagent's extension the page sends what was typed through its own `nbagent.panel` comm (`steer`,
    panel/hub.py) into this view's run, so it arrives where another page closed the widgets; the box's own
    widget messages carry it otherwise. Either way `send` takes it, once."""

    def __init__(self, run: AgentRun) -> None:
        self.run = run
        self.sent: list[str] = []
        self.note_text = ""
        """What the box says under it (plain text): what was sent, or why nothing was."""
        self.text = W.Text(placeholder="Tell the agent something while it works (joins at its next turn)…",
                           continuous_update=False, layout=W.Layout(flex="1 1 auto", width="auto"),
                           _dom_classes=("nba-steer-text",))
        self.button = W.Button(description="Send", icon="paper-plane", tooltip="Send into the running run",
                               layout=W.Layout(width="auto"), _dom_classes=("nba-steer-send",))
        self.note = W.HTML("")
        self.button.on_click(lambda _: self.send())
        self.text.observe(self._on_submit, names="value")
        self.widget = W.VBox([W.HBox([self.text, self.button]), self.note], _dom_classes=("nba-steer",))

    def _on_submit(self, change: dict[str, Any]) -> None:
        if change.get("new"):
            self.send()

    def send(self, text: str | None = None) -> bool:
        """Send `text` (None: what the box holds) into the run; say under the box what came of it."""
        text = (self.text.value if text is None else text).strip()
        if not text:
            return False
        sent = self.run.steer(text)
        if sent:
            self.sent.append(text)
            self.note_text = f"sent: {text}"
        else:
            self.note_text = "the run is over: start another with %agent"
        self.note.value = f'<span class="nba-history">{_esc(self.note_text)}</span>'
        self.text.unobserve(self._on_submit, names="value")
        self.text.value = ""
        self.text.observe(self._on_submit, names="value")
        return sent

    def close(self) -> None:
        self.widget.layout.display = "none"
        self.text.disabled = self.button.disabled = True


def _esc(text: str) -> str:
    from nbagent.safety.shown import shown_html

    return shown_html(text)
