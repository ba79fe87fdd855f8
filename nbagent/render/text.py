"""Runs and calls as plain text, for scripts, logs and the text/plain side of every rendering: the same
pieces and the same words as the HTML in runs.py (a call's time by `base.time_words`, as the live view's row).

Reads what someone else wrote (the model's text and arguments, results, tool output): every line passes
`nbagent.safety.sanitize.terminal_safe`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .. import reprs
from ..safety import sanitize
from .base import _ICONS, _clip, frozen_status, one_line, plural, seconds, shown_status, status_word, time_words
from .lineage import kernel_only_text
from .prompt import prompt_words
from .live import notebook_path, presentation_text, processes_text
from .runs import _answer, call_label, tools_summary, undelivered
from .usage import context_text, cost_text, tokens_text

if TYPE_CHECKING:  # pragma: no cover
    from ..records import CallRecord

AgentRun = Any

__all__ = ["call_text", "run_text"]


def call_text(rec: CallRecord, *, frozen: bool = False, waited: float | None = None) -> str:
    """One line for a call: status, label, tool, time (and apart, the time it waited for a decision), decision."""
    status = frozen_status(rec.status) if frozen else shown_status(rec)
    icon = _ICONS.get(status, "•") if rec.done or frozen else "…"
    out = f"{icon} {call_label(rec)}  [{rec.name} · {status_word(status)}"
    if rec.duration is not None:
        out += " · " + " + ".join(words for words, _title in time_words(rec, waited))
    out += "]"
    if rec.decision is not None and rec.decision.source != "read_only":
        out += f"  ({rec.decision})"
    if rec.done and rec.result is not None and rec.status != "denied":
        out += f"\n    -> {one_line(rec.result.text, 150)}"
        for line in presentation_text(rec.result.presentation):
            out += "\n" + line
    elif rec.status == "waiting_for_approval" and getattr(rec, "approval_waited", None):
        out += f"\n    still waiting for your approval ({seconds(rec.approval_waited)})"
    return sanitize.terminal_safe(out)


def _answer_lines(answer: str, max_lines: int = 40) -> list[str]:
    """The answer in the text form: one line when it is one, else its own lines (Markdown is text), indented."""
    rows = [r.rstrip() for r in answer.strip().splitlines()]
    if len(rows) <= 1:
        return ["  answer: " + one_line(answer, 400)]
    shown = [("    " + _clip(r, 400)) if r else "" for r in rows[:max_lines]]
    if len(rows) > max_lines:
        shown.append(f"    … {len(rows) - max_lines} more lines (run.output has them all)")
    return ["  answer:", *shown]


def run_text(run: AgentRun, *, stopped: str | None = None, waits: dict[str, float] | None = None) -> str:
    """A run as plain text: header, prompt, each call, the answer, and how it ended.

    `stopped`: why a run that was still going can no longer go on.
    """
    frozen = stopped is not None and not run.done
    word = "stopped" if frozen else status_word(run.status)
    stats = [word, plural(run.turns, "turn"), plural(len(run.calls), "call"), seconds(run.elapsed)]
    tokens = tokens_text(run)
    if tokens:
        stats.insert(3, tokens)
    lines = [f"nbagent run · {run.model.spec} · {run.agent.mode} mode · {' · '.join(stats)}"]
    cost, _ = cost_text(run)
    context, _, _ = context_text(run)
    if cost or context:
        lines.append("  " + " · ".join(x for x in (context and f"context {context}", cost and f"cost {cost}") if x))
    for c in getattr(run, "compactions", ()):
        lines.append(f"  {c}")
    if run.prompt is not None:
        words, sent = prompt_words(run.prompt)
        lines.append(f"  you: {one_line(words, 200)}")
        if sent is not None:
            lines.append(f"    (sent with {len(sent):,} characters of context from the notebook)")
    lines.append(f"  {tools_summary(run)[0]}" + (f"\n  notebook: {notebook_path(run)}" if notebook_path(run) else ""))
    for rec in run.calls:
        waited = (waits or {}).get(rec.id)
        lines.extend("  " + line for line in call_text(rec, frozen=frozen, waited=waited).splitlines())
    lines.extend(processes_text(run) + kernel_only_text(run))
    for event in getattr(run, "events", ()):
        if getattr(event, "kind", "") == "steered":
            lines.append(f"  you, while it ran: {one_line(event.text, 200)}")
    if _answer(run):
        lines.extend(_answer_lines(_answer(run)))
    if run.error is not None:
        lines.append(f"  {type(run.error).__name__}: {run.error}")
    if frozen:
        lines.append(f"  stopped: {stopped}")
    elif run.done and run.stop_reason:
        lines.append(f"  stopped: {run.stop_reason}")
    lines.extend(f"  not delivered (the run ended before its next turn): {text}" for text in undelivered(run))
    return sanitize.terminal_safe("\n".join(lines))


reprs.register(call_text=call_text)
