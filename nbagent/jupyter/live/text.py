"""A run shown as printed lines: for terminal IPython (no widgets there) or `NBAgent.view = "text"`.

Prints what the model and tools wrote (streamed text, results, arguments to approve): all of it passes
`nbagent.safety.sanitize` (`terminal_safe`, or `visible` with its warnings for what is approved) first, so no
escape sequence reaches the terminal and no bidi control hides what is approved.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import TYPE_CHECKING, Any, TextIO

from nbagent import render
from nbagent.calls.grants import grant_label
from nbagent.decisions import Decision
from nbagent.records import ApprovalRequest
from nbagent.safety.sanitize import terminal_safe
from nbagent.safety.shown import hidden_warnings, shown

if TYPE_CHECKING:  # pragma: no cover
    from nbagent.agent.run import AgentRun

__all__ = ["TextView"]


class TextView:
    """Prints the model's text as it streams and one line per finished tool call; asks approvals on stdin."""

    def __init__(self, run: AgentRun, out: TextIO | None = None) -> None:
        self.run = run
        self.out = out or sys.stdout
        self.displayed_in: int | None = None
        self._at_line_start = True
        self._unsubscribe = run.subscribe(self._on_event)

    def _write(self, text: str) -> None:
        self.out.write(text)
        self.out.flush()
        if text:
            self._at_line_start = text.endswith("\n")

    def _line(self, text: str) -> None:
        self._write(("" if self._at_line_start else "\n") + text + "\n")

    def _on_event(self, event: Any) -> None:
        kind = event.kind
        if kind == "text_delta":
            self._write(terminal_safe(event.text))
        elif kind == "model_retrying" or kind == "model_silent" and event.seconds:
            self._line(terminal_safe(f"[{event}]"))
        elif kind == "tool_call_finished":
            self._line("  " + render.call_text(event.call).replace("\n", "\n  "))
        elif kind == "compacted":
            self._line(terminal_safe(f"  [{event.compaction}]"))
        elif kind == "run_finished":
            run = self.run
            cost, _ = render.cost_text(run)
            end = f"[{render.status_word(run.status)} · {render.plural(run.turns, 'turn')} · {render.plural(len(run.calls), 'call')} · " \
                  f"{render.seconds(run.elapsed)}{' · ' + cost if cost else ''}]"
            if run.stop_reason and run.error is None:
                end += f" stopped: {run.stop_reason}"
            if run.error is not None:
                end += f" {type(run.error).__name__}: {run.error}"
            self._line(terminal_safe(end))
            self._unsubscribe()

    async def ask(self, request: ApprovalRequest) -> Decision:
        """Ask on stdin: yes, no (with a reason), or always."""
        call = f"{request.name}({json.dumps(request.arguments, ensure_ascii=False, default=repr)})"
        args, warnings = shown(call), hidden_warnings(call)
        look = "".join(f"\n  ! {w}" for w in warnings)
        grant = grant_label(request)
        always = f" / [a]lways allow {shown(grant.short)}" if grant is not None else ""
        prompt = f"\n? {args} needs approval ({shown(request.reason)}).{look}\n  [y]es / [n]o{always}: "
        answer = (await asyncio.to_thread(input, prompt)).strip().lower()
        if answer in ("a", "always") and grant is not None:
            return Decision(True, remember=True, reason="always allowed at the prompt")
        if answer in ("y", "yes"):
            return Decision(True, reason="approved at the prompt")
        reason = answer[1:].strip(" :") if answer.startswith("n ") else ""
        return Decision(False, reason=reason or "denied by the user")
