"""Pieces of a run's view for what happens beside the calls: a tool's presentation payloads, the run's
background processes, a call still waiting for a decision, messages sent into the run, the way its notebook
tools reached the notebook.

`nbagent.render` composes them into a call's row and a run's header (the live view and the static rendering
alike). Everything shown is escaped: a presentation's markdown goes through `render_markdown.markdown_html`
(raw HTML escaped; `code_blocks=False`: a tool wrote it, so its code blocks get no Copy or Insert as cell
buttons), text and JSON are shown as text; secrets are redacted from what processes printed.
"""

from __future__ import annotations

import json
import time
from typing import Any, Callable

from ..safety.secrets import redact
from ..safety.shown import shown_html

__all__ = ["NOTEBOOK_PATHS", "approval_notice_html", "notebook_chip_html", "notebook_path", "presentation_html", "presentation_text", "processes_html", "processes_text",
           "steered_html"]


def _esc(text: Any) -> str:
    return shown_html(text)


def _seconds(value: float) -> str:
    if value < 60:
        return f"{value:.0f} s" if value >= 10 else f"{value:.1f} s"
    minutes, secs = divmod(int(value), 60)
    return f"{minutes} min {secs:02d} s" if minutes < 60 else f"{minutes // 60} h {minutes % 60:02d} min"


def _json_text(data: Any) -> str:
    try:
        return json.dumps(data, indent=2, ensure_ascii=False, default=repr)
    except (TypeError, ValueError):
        return repr(data)


# -- presentation payloads ----------------------------------------------------------------------------------
def presentation_html(items: list[Any], markdown: Callable[[str], str]) -> str:
    """A result's presentation payloads, as the view shows them (empty when there are none)."""
    parts = []
    for item in items or ():
        title = f'<div class="nba-presentation-title">{_esc(item.title)}</div>' if item.title else ""
        if item.kind == "markdown":
            body = f'<div class="nba-md">{markdown(redact(str(item.data or ""), fresh=False))}</div>'
        elif item.kind == "json":
            body = f'<pre class="nba-pre">{_esc(redact(_json_text(item.data), fresh=False))}</pre>'
        else:
            body = f'<pre class="nba-pre">{_esc(redact(str(item.data or ""), fresh=False))}</pre>'
        parts.append(f'<div class="nba-presentation" title="shown here only: the model does not see this">'
                     f'{title}{body}</div>')
    return f'<div class="nba-sub">{"".join(parts)}</div>' if parts else ""


def presentation_text(items: list[Any]) -> list[str]:
    lines = []
    for item in items or ():
        data = _json_text(item.data) if item.kind == "json" else str(item.data or "")
        head = f"[{item.title}] " if item.title else ""
        lines.append(f"    ({item.kind}, not sent to the model) {head}{redact(data, fresh=False)[:300]}")
    return lines


# -- a call waiting for a decision ------------------------------------------------------------------------
def approval_notice_html(rec: Any) -> str:
    waited = getattr(rec, "approval_waited", None)
    if rec is None or rec.status != "waiting_for_approval" or not waited:
        return ""
    return (f'<div class="nba-sub nba-note nba-still-waiting">still waiting for your approval '
            f'({_esc(_seconds(waited))})</div>')


# -- messages sent into the run -----------------------------------------------------------------------------
def steered_html(text: str) -> str:
    return f'<div class="nba-history nba-steered">↳ you, while it ran: {_esc(text)}</div>'


# -- background processes -----------------------------------------------------------------------------------
def _processes(run: Any) -> list[Any]:
    try:
        return list(getattr(run, "processes", ()) or ())
    except Exception:  # a view must not fail on a run it cannot read
        return []


def _last_line(p: Any) -> str:
    text = p.output.rstrip()
    line = text.rsplit("\n", 1)[-1] if text else ""
    return redact(line[-160:], fresh=False)


def processes_html(run: Any) -> str:
    """The run's background processes: id, status, command, time, the last line it printed."""
    procs = _processes(run)
    if not procs:
        return ""
    rows = []
    now = time.time()
    for p in procs:
        status = p.status
        state = "running" if status == "running" else f"{status} · exit {p.exit_code}"
        end = p.ended_at if p.ended_at is not None else now
        last = _last_line(p)
        rows.append(
            f'<div class="nba-process nba-process-{_esc(status)}"><span class="nba-code">{_esc(p.id)}</span> '
            f'<span class="nba-pill-mini">{_esc(state)}</span> <code>{_esc(p.command[:200])}</code> '
            f'<span class="nba-muted">{_esc(_seconds(max(0.0, end - p.started_at)))} · {_esc(p.sandbox)} sandbox</span>'
            + (f'<div class="nba-process-tail">{_esc(last)}</div>' if last else "") + "</div>")
    running = sum(1 for p in procs if p.status == "running")
    head = f"background processes · {running} running" if running else "background processes · none running"
    return f'<div class="nba-processes"><div class="nba-processes-head">{_esc(head)}</div>{"".join(rows)}</div>'


def processes_text(run: Any) -> list[str]:
    return [f"  process {p.summary()}" for p in _processes(run)]


NOTEBOOK_PATHS = {
    "shared document": "The notebook tools worked on the server's shared document (jupyter-collaboration): "
                       "everyone with the notebook open sees the changes; no tab is needed.",
    "this tab": "The notebook tools worked through the notebook page (nbagent's frontend part): they need it "
                "open.",
    "saved file": "No live notebook answered: the notebook tools read the saved file and could change nothing.",
}
"""How a run's notebook tools reached the notebook (the `via` of their results), as the header explains it."""


def notebook_path(run: Any) -> str | None:
    """How the run's latest notebook tool call reached the notebook ("shared document", "this tab", "saved
    file"), from its result's details; None when the run used no notebook tool."""
    for rec in reversed(list(run.calls)):
        via = getattr(getattr(getattr(rec, "result", None), "details", None), "via", None)
        if isinstance(via, str) and via in NOTEBOOK_PATHS:
            return via
    return None


def notebook_chip_html(run: Any) -> str:
    """The header's chip saying how the run's notebook tools reached the notebook (none: no such call)."""
    via = notebook_path(run)
    if via is None:
        return ""
    return f'<span class="nba-chip" title="{_esc(NOTEBOOK_PATHS[via])}">notebook: {_esc(via)}</span>'
