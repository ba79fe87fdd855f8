"""A tool call's row: its name and activity label, its arguments (the streamed ones while they arrive), the
permission badge and decision note, and its result. The static rendering (`runs`), the text form and the
live view all draw a call with these; a call's row is also where a consent is shown (a call waiting for
approval), so every value on it goes through `_esc` / `sanitize` like the rest of this wing.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from .base import (
    _clip, _esc, _esc_output, _icon, _style, frozen_status, hidden_warnings, one_line, shown_status, status_word,
    time_words,
)
from .live import approval_notice_html, presentation_html
from .markdown import markdown_html
from .results import diff_html, result_html

if TYPE_CHECKING:  # pragma: no cover
    from ..decisions import Decision
    from ..records import CallRecord

__all__ = ["args_html", "call_inner_html", "call_label", "call_record_html", "decision_note"]


# --------------------------------------------------------------------------------------------------
# Arguments
# --------------------------------------------------------------------------------------------------
def _value_html(value: Any, limit: int | None) -> str:
    if isinstance(value, str):
        if "\n" in value or len(value) > 80:
            return f'<div class="nba-pre">{_esc(_clip(value, limit))}</div>'
        return _esc(json.dumps(value, ensure_ascii=False))
    try:
        text = json.dumps(value, ensure_ascii=False, default=repr)
    except (TypeError, ValueError):
        text = repr(value)
    if len(text) > 80:
        nested = isinstance(value, dict) or (isinstance(value, (list, tuple)) and any(
            isinstance(v, (dict, list, tuple)) for v in value))
        if nested:  # structure reads better indented; a flat list reads better wrapped
            try:
                text = json.dumps(value, ensure_ascii=False, default=repr, indent=2)
            except (TypeError, ValueError):
                pass
        return f'<div class="nba-pre">{_esc(_clip(text, limit))}</div>'
    return _esc(text)


def _shown_arguments(rec: CallRecord) -> dict[str, Any]:
    """A call's validated arguments without the defaults the model left out (`timeout 120.0`, `yield_ms
    null`): what the model chose, and what code filled in (run_cell's pinned code) whenever it is not the
    parameter's declared default."""
    args = dict(rec.arguments or {})
    sent = rec.raw_arguments
    if isinstance(sent, str):
        try:
            sent = json.loads(sent)
        except ValueError:
            return args
    if getattr(rec.tool, "trusted", True) is False:
        return args  # an untrusted MCP server's declared default is only its word: every argument sent shows
    props = (getattr(rec.tool, "parameters", None) or {}).get("properties", {})
    if not isinstance(sent, dict) or not isinstance(props, dict):
        return args
    return {k: v for k, v in args.items()
            if k in sent or not isinstance(props.get(k), dict) or "default" not in props[k]
            or not _same_value(props[k]["default"], v)}


def _same_value(a: Any, b: Any) -> bool:
    """Equal and of the same kind all the way down: `1` is not `True` nor `1.0`, `-0.0` is not `0.0`, in a
    nested dict or list too (Python's `==` says they are)."""
    try:
        return json.dumps(a, sort_keys=True, allow_nan=True) == json.dumps(b, sort_keys=True, allow_nan=True)
    except (TypeError, ValueError):
        return False


def args_html(args: Any, *, limit: int | None = 600, streaming: bool = False) -> str:
    """Arguments as labelled rows (a block of text when they are not an object); `limit` characters per value
    (None: every character, as an approval shows them: a long value scrolls, it is never clipped).

    Plain `div`s in a grid, not a `<table>`: a notebook's own table and `<pre>` styles do not reach them.
    """
    typing = '<div class="nba-typing">receiving arguments…</div>' if streaming else ""
    if args is None or args == {}:
        return typing
    if not isinstance(args, dict):
        return f'<div class="nba-pre">{_esc(_clip(str(args), limit))}</div>{typing}'
    rows = "".join(f'<div class="nba-k">{_esc(k)}</div><div class="nba-v">{_value_html(v, limit)}</div>'
                   for k, v in args.items())
    return f'<div class="nba-args">{rows}</div>{typing}'


# --------------------------------------------------------------------------------------------------
# Tool calls
# --------------------------------------------------------------------------------------------------
def _badge(tool: Any, decision: Decision | None) -> str:
    """What kind of call this is, honestly: `read-only` when it ran as one (a shell command that only
    reads is not 'destructive'), else the tool's own word (`tool.badge`: the python and shell tools say
    "runs code"), else destructive, or writes."""
    if tool is None:
        return ""
    own = getattr(tool, "badge", None)
    if decision is not None and decision.allow and decision.source == "read_only":
        word, title, cls = "read-only", "It was judged to only read, so it ran without asking", "nba-flag nba-flag-ro"
    elif own:
        word, title, cls = own, "What it does depends on its arguments: read them", "nba-flag"
    elif tool.destructive:
        word, title, cls = "destructive", "Its tool can delete or overwrite things", "nba-flag"
    elif getattr(tool, "capability", None) == "write":
        word, title, cls = "writes", "It changes files or cells", "nba-flag"
    else:
        return ""
    return f'<span class="{cls}" title="{_esc(title)}">{_esc(word)}</span>'


def decision_note(decision: Decision | None) -> str:
    """Who allowed or denied a call and why, in words (a call that ran without asking says why too)."""
    if decision is None:
        return ""
    if decision.source == "read_only":
        return "ran without asking: " + _esc(decision.reason if decision.reason != "read-only calls are allowed"
                                              else "it only reads")
    verdict = "allowed" if decision.allow else "denied"
    if decision.source == "user":
        if decision.allow:
            text = "always allowed by you (remembered for this session)" if decision.remember else "approved by you"
        else:
            reason = decision.reason if decision.reason and decision.reason != "denied by the user" else ""
            text = "denied by you" + (f": “{reason}”" if reason else "")
        return f"<b>{_esc(text)}</b>"
    if decision.source == "grant":
        return f"<b>allowed</b>: {_esc(decision.reason)}"
    if decision.source == "hook":
        if decision.reason and decision.reason != "blocked by a hook":
            return f"<b>not run</b>: {_esc(decision.reason)}"  # the hook's own words say why
        return "<b>blocked by a hook</b>"
    reason = decision.reason or ""
    if reason.startswith(verdict + " "):  # "allowed by rule 'allow: x'" reads as one phrase
        return f"<b>{verdict}</b> {_esc(reason[len(verdict) + 1:])}"
    return f"<b>{verdict}</b>: {_esc(reason)}"


def call_label(rec: CallRecord) -> str:
    """The activity label of a call, in the past tense once it ended when it is the default one."""
    label = rec.label
    if rec.done and rec.completed_activity is None and label == f"Calling {rec.name}":
        if rec.status in ("ok", "error", "timeout"):
            return f"Called {rec.name}"
        return f"Did not run {rec.name}"
    return label


def call_inner_html(
    rec: CallRecord | None,
    *,
    name: str = "",
    partial: Any = None,
    index: int | None = None,
    waiting: bool = False,
    frozen: bool = False,
    output: bool = False,
    waited: float | None = None,
) -> str:
    """The body of one call's row: activity label, status, time, progress, arguments, decision, result.

    `rec` is None while the model is still streaming the call (then `name` and `partial` arguments are
    shown); `waiting` shows the exact arguments in full, as they are being approved.
    """
    if rec is None:
        status, label, tool_name = "streaming", f"Preparing {name or 'a tool call'}", name
        elapsed, tool = None, None
    else:
        status, label, tool_name, tool = shown_status(rec), call_label(rec), rec.name, rec.tool
        elapsed = rec.elapsed
    if frozen:
        status = frozen_status(status)
    flags = _badge(tool, rec.decision if rec is not None else None)
    head = (f'<div class="nba-call-head"><span class="nba-icon">{_icon(status)}</span>'
            f'<span class="nba-label" title="{_esc(label)}">{_esc(label)}</span>'
            f'<span class="nba-tool">{_esc(tool_name)}</span>{flags}<span class="nba-grow"></span>'
            f'<span class="nba-status">{_esc(status_word(status))}</span>'
            f'<span class="nba-time">{_time_html(rec, waited)}</span></div>')
    parts = [head]
    if rec is None:
        args: Any = partial
    elif rec.arguments is not None:
        args = _shown_arguments(rec)
    else:
        args = rec.raw_arguments
    limit = None if waiting else 600  # what is being approved is shown whole (it scrolls), never clipped
    args_part = args_html(args, limit=limit, streaming=rec is None)
    if args_part:
        parts.append(f'<div class="nba-sub">{args_part}</div>')
    if waiting:
        warnings = hidden_warnings(tool_name, args)
        if warnings:
            parts.append('<div class="nba-sub nba-note nba-hidden-warn"><b>⚠ Look closely</b>: '
                         + " ".join(_esc(w) for w in warnings) + "</div>")
    preview = getattr(tool, "preview", None)  # a tool's picture of what a call will change (a diff)
    if preview is not None and rec is not None and rec.arguments is not None and not rec.done:
        try:
            shown = preview(rec.arguments)
        except Exception:
            shown = None
        if shown:
            parts.append(f'<div class="nba-sub">{diff_html(str(shown))}</div>')
    if rec is not None and status == "running" and rec.progress_count:
        # the latest update that says something: output lines a tool prints do not hide its message
        last = next((u for u in reversed(rec.progress) if u.message), None)
        words = []
        if rec.fraction is not None:
            words.append(f"{rec.fraction:.0%}")
        if last is not None and last.message:
            words.append(one_line(last.message, 120))
        bar = ""
        if rec.fraction is not None:
            bar = f'<div class="nba-bar"><div style="width:{rec.fraction * 100:.1f}%"></div></div>'
        parts.append(f'<div class="nba-sub">{bar}<div class="nba-progress-text">{_esc(" · ".join(words))}</div></div>')
    notes = []
    if rec is not None:
        note = decision_note(rec.decision)
        if note:
            notes.append(note)
        stopped = getattr(getattr(rec.result, "details", None), "sandbox_stopped", None)
        if isinstance(stopped, str) and stopped:  # a wall, not an ordinary failure: said apart, in amber
            notes.append(f'<span class="nba-sandboxed">{_esc(stopped)}</span>')
        if rec.repairs:
            notes.append("arguments repaired: " + _esc("; ".join(rec.repairs)))
        for problem in rec.hook_errors:
            notes.append(_esc(problem))
    if notes:
        parts.append(f'<div class="nba-sub nba-note">{" · ".join(notes)}</div>')
    parts.append(approval_notice_html(rec))
    if output and rec is not None and rec.progress_count and rec.output_tail.total:
        text = rec.output_tail.text
        cut = rec.output_tail.total - len(text)
        if len(text) > 2400:
            cut += len(text) - 2400
            text = text[-2400:]
        head = f"… {cut:,} earlier characters\n" if cut > 0 else ""
        notice = next((u.data["keep_open"] for u in rec.progress if u.data.get("keep_open")), None)
        label = _esc(notice) if notice else f"output · {rec.output_tail.total:,} characters"
        parts.append(f'<div class="nba-sub"><details class="nba-result"{" open" if notice else ""}><summary>{label}'
                     f'</summary><pre class="nba-tail">{_esc_output(head + text)}</pre></details></div>')
    if rec is not None and rec.done and rec.result is not None:
        if status in ("error", "not_found", "invalid_arguments", "timeout"):
            parts.append(f'<div class="nba-sub"><div class="nba-pre nba-errtext">{_esc_output(_clip(rec.result.text, 1500))}'
                         "</div></div>")
            if rec.result.details is not None and not isinstance(rec.result.details, BaseException):
                parts.append(f'<div class="nba-sub">{result_html(rec.result, index=index)}</div>')
        elif status in ("ok", "sandboxed"):
            parts.append(f'<div class="nba-sub">{result_html(rec.result, index=index)}</div>')
        parts.append(presentation_html(rec.result.presentation, _tool_markdown))
    return "".join(parts)


def _tool_markdown(text: str) -> str:
    """A tool's Markdown (a presentation): rendered as the model's is, but its code blocks are not the model's."""
    return markdown_html(text, code_blocks=False)


def _time_html(rec: CallRecord | None, waited: float | None) -> str:
    """The call's time (`time_words`): its own, then apart what it queued and waited for a decision."""
    if rec is None:
        return ""
    own, *apart = time_words(rec, waited)
    extra = "".join(f' <span class="nba-waited" title="{_esc(title)}">+ {_esc(words)}</span>' for words, title in apart)
    return f"{_esc(own[0])}{extra}"


def call_record_html(rec: CallRecord, index: int | None = None) -> str:
    """`CallRecord._repr_html_`: the call's row, with the JSON the model received for it."""
    wire = ""
    if rec.message is not None:
        wire = (f'<div class="nba-sub"><details class="nba-result nba-wire"><summary>wire: the JSON the model '
                f'received</summary><div class="nba-pre">{_esc(_clip(_json(rec.wire)))}</div></details></div>')
    return (f'{_style()}<div class="nba nba-bare"><div class="nba-call nba-s-{_esc(rec.status)}">'
            f"{call_inner_html(rec, index=index)}{wire}</div></div>")


def _json(value: Any) -> str:
    try:
        return json.dumps(value, indent=2, ensure_ascii=False, default=repr)
    except Exception:
        return repr(value)


def _call_div(rec: CallRecord, index: int, frozen: bool, waited: float | None = None) -> str:
    status = frozen_status(rec.status) if frozen else shown_status(rec)
    body = call_inner_html(rec, index=index, frozen=frozen, output=True, waited=waited)
    return f'<div class="nba-call nba-s-{_esc(status)}">{body}</div>'
