"""Plain HTML renderings of results, call records and runs (no IPython needed: just strings).

Notebooks show them through `_repr_html_`; the live view in `nbagent.jupyter` is richer.
"""

from __future__ import annotations

import html
import json
from typing import TYPE_CHECKING, Any

from .messages import ImageBlock, TextBlock

if TYPE_CHECKING:  # pragma: no cover
    from .messages import ToolResult
    from .records import CallRecord
    from .run import AgentRun

__all__ = ["call_record_html", "run_html", "tool_result_html"]

_STATUS_COLOURS = {
    "ok": "#1a7f37", "done": "#1a7f37", "error": "#cf222e", "failed": "#cf222e", "denied": "#9a6700",
    "blocked": "#9a6700", "not_found": "#cf222e", "invalid_arguments": "#cf222e", "cancelled": "#6e7781",
    "timeout": "#cf222e", "running": "#0969da", "waiting_for_approval": "#9a6700", "pending": "#6e7781",
}
_MAX_TEXT = 4000


def _esc(text: Any) -> str:
    return html.escape(str(text), quote=True)


def _clip(text: str, limit: int = _MAX_TEXT) -> str:
    return text if len(text) <= limit else text[:limit] + f"\n… ({len(text) - limit:,} more characters)"


def status_badge(status: str) -> str:
    colour = _STATUS_COLOURS.get(status, "#6e7781")
    return (f'<span style="color:{colour};border:1px solid {colour};border-radius:8px;'
            f'padding:0 6px;font-size:85%">{_esc(status)}</span>')


def blocks_html(blocks: list) -> str:
    parts = []
    for b in blocks:
        if isinstance(b, TextBlock):
            parts.append(f'<pre style="white-space:pre-wrap;margin:2px 0">{_esc(_clip(b.text))}</pre>')
        elif isinstance(b, ImageBlock):
            parts.append(f'<img src="data:{_esc(b.mime_type)};base64,{b.base64}" style="max-width:480px"/>')
    return "".join(parts)


def tool_result_html(result: ToolResult) -> str:
    head = "ToolResult" + (" (error)" if result.is_error else "") + (" terminate" if result.terminate else "")
    details = ""
    if result.details is not None:
        details = f"<div><small>details: <code>{_esc(type(result.details).__name__)}</code></small></div>"
    return f"<div><b>{_esc(head)}</b>{blocks_html(result.content)}{details}</div>"


def _json(value: Any) -> str:
    try:
        return json.dumps(value, indent=2, ensure_ascii=False, default=repr)
    except Exception:
        return repr(value)


def call_record_html(rec: CallRecord) -> str:
    dur = f"{rec.duration:.2f}s" if rec.duration is not None else f"{rec.elapsed:.1f}s…"
    args = rec.arguments if rec.arguments is not None else rec.raw_arguments
    rows = [
        f"<div><b>{_esc(rec.label)}</b> {status_badge(rec.status)} <small>{_esc(rec.name)} · {dur}</small></div>",
        f"<details><summary>arguments</summary><pre>{_esc(_clip(_json(args)))}</pre></details>",
    ]
    if rec.repairs:
        rows.append(f"<div><small>repaired: {_esc('; '.join(rec.repairs))}</small></div>")
    if rec.decision is not None:
        rows.append(f"<div><small>{_esc(str(rec.decision))}</small></div>")
    if rec.result is not None:
        rows.append(f"<details><summary>result</summary>{tool_result_html(rec.result)}</details>")
    if rec.message is not None:
        rows.append(f"<details><summary>wire</summary><pre>{_esc(_clip(_json(rec.wire)))}</pre></details>")
    return '<div style="border-left:3px solid #d0d7de;padding-left:8px;margin:4px 0">' + "".join(rows) + "</div>"


def run_html(run: AgentRun) -> str:
    head = (f"<div><b>AgentRun</b> {status_badge(run.status)} <small>{_esc(run.model.spec)} · "
            f"{run.turns} turns · {len(run.calls)} calls · {run.elapsed:.1f}s · "
            f"{run.usage.input_tokens:,} in / {run.usage.output_tokens:,} out tokens</small></div>")
    body = "".join(call_record_html(c) for c in run.calls)
    output = ""
    if run.output is not None:
        text = run.output if isinstance(run.output, str) else _json(run.output)
        output = f'<div style="margin-top:6px"><pre style="white-space:pre-wrap">{_esc(_clip(text))}</pre></div>'
    error = f'<div style="color:#cf222e">{_esc(type(run.error).__name__)}: {_esc(run.error)}</div>' if run.error else ""
    return f"<div>{head}{body}{output}{error}</div>"
