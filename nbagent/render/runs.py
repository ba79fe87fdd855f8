"""How runs, tool calls and results look: HTML for notebooks, plain text for scripts and logs.

No IPython needed: these are strings. `AgentRun`, `CallRecord` and `ToolResult` use them for `_repr_html_`;
the live view in `nbagent.jupyter` builds its rows from the same pieces, so a run looks the same live and
after the fact. The stylesheet is `render.css`, next to this module. Data objects reach these functions
through `nbagent.reprs` (registered at the end of this module): data never imports render.

Reads what someone else wrote: the model's text and arguments, tool names (an MCP server chose them),
results and their objects' `_repr_html_()`, error text, tool output. What reaches the page goes through
`nbagent.safety.sanitize`: every piece of text through `_esc` (HTML-escaped, controls, bidi and invisible
characters shown as `⟨U+XXXX NAME⟩`) or `_esc_output` (escaped, terminal escapes removed), every piece of
HTML that is not this module's own through `sanitize_html` (`_rich_html`, `_link_html`, `markdown_html`),
and the plain text forms (`run_text`, `call_text`, `one_line`) through `terminal_safe`.

Why one module of about 600 lines: its pieces (a call's row, a run's header and footer)
are one small HTML vocabulary that the static rendering, the text form and the live view all compose. The
parts with a seam of their own are beside it: the small words (`render_base`), the model's Markdown
(`render_markdown`), a tool's result (`render_results`), usage (`render_usage`), what happens beside the
calls (`render_live`); their public names are re-exported here.
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any

from .. import reprs
from ..messages import AssistantMessage, UserMessage
from ..safety import sanitize
from .base import (
    _ICONS, _LIVE_STATUSES, MAX_RICH, MAX_TEXT, _clip, _esc, _esc_output, _icon, _pill, _style, css, describe_object,
    frozen_status, hidden_warnings, one_line, plural, seconds, shown_status, status_word, time_words,
)
from .lineage import kernel_only_html
from .live import (
    approval_notice_html, notebook_chip_html, presentation_html, presentation_text, processes_html, processes_text,
    steered_html,
)
from .markdown import markdown_html
from .prompt import history_count, prompt_html
from .results import diff_html, result_html, tool_result_html
from .usage import compaction_html, context_text, cost_text, gauge_html, tokens_text

if TYPE_CHECKING:  # pragma: no cover
    from ..decisions import Decision
    from ..records import CallRecord

AgentRun = Any
"""A run handle (`nbagent.AgentRun`): render reads its public attributes only, and imports nothing above data."""

__all__ = [
    "args_html",
    "compaction_html",
    "call_inner_html",
    "call_label",
    "call_record_html",
    "css",
    "describe_object",
    "header_html",
    "markdown_html",
    "one_line",
    "result_html",
    "run_html",
    "seconds",
    "status_word",
    "tool_result_html",
    "tools_summary",
    "undelivered",
]

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


# --------------------------------------------------------------------------------------------------
# Runs
# --------------------------------------------------------------------------------------------------
STALE_NOTE = ("waiting for the kernel: another cell is running (or the kernel stopped); the run goes on when "
              "the kernel is free")
"""What the live view's header says, by itself, when its updates stop coming (see `header_html(live=True)`)."""


def header_html(run: AgentRun, *, waiting: int = 0, live: bool = False, stopped: str | None = None,
                retrying: Any = None, step: str = "") -> str:
    """The run's header line: status, model, mode, turns, calls, tokens, time, the context gauge, the cost.

    `live` (the live view's header, redrawn at least once a second while the run goes on) adds a note that
    only CSS reveals, a few seconds after the header was last drawn: when updates stop coming (another cell
    blocks the kernel, the kernel was restarted or died), the view says so instead of spinning on. `stopped`
    says why a run that was still going can no longer go on (the kernel stopped). `step`: the chip of the
    plan step the run says it is on (steps.py `step_html`; already HTML).
    """
    status = run.status
    text = status_word(status)
    if status == "waiting_for_approval":
        text = "waiting for you" if waiting <= 1 else f"{waiting} calls wait for you"
    elif retrying is not None and status == "running":
        text = str(retrying)  # "retrying (2 of 5) in 3 s: rate limited"
    over = run.done or stopped is not None
    if stopped is not None and not run.done:
        status, text = "cancelled", "stopped"
    stats = [f"turn {run.turns}" if not over else f"{run.turns} turn{'s' if run.turns != 1 else ''}",
             f"{len(run.calls)} call{'s' if len(run.calls) != 1 else ''}"]
    tokens = tokens_text(run)
    if tokens:
        stats.append(tokens)
    stats.append(seconds(run.elapsed))
    cost, cost_title = cost_text(run)
    # dollar signs are money, not TeX: the notebook's MathJax is told to leave them alone
    cost_html = (f'<span class="nba-cost tex2jax_ignore mathjax_ignore" title="{_esc(cost_title)}">'
                 f'{_esc(cost)}</span>') if cost else ""
    stale = ""
    if live and not over:
        stale = f'<span class="nba-stale" title="{_esc(STALE_NOTE)}">{_esc(STALE_NOTE)}</span>'
    cls = "nba-headinfo nba-live" if stale else "nba-headinfo"
    return (f'<div class="{cls}"><span class="nba-brand">nbagent</span>{_pill(status, text)}'
            f'<span class="nba-model">{_esc(run.model.spec)}</span>'
            f'<span class="nba-chip">{_esc(run.agent.mode)} mode</span>{_tools_chip(run)}{_sandbox_chip(run)}'
            f'{step}<span class="nba-stats">{_esc(" · ".join(stats))}</span>{gauge_html(run)}{cost_html}{stale}</div>'
            + processes_html(run) + kernel_only_html(run))


def _is_builtin(tool: Any) -> bool:
    module = getattr(getattr(tool, "fn", None), "__module__", None) or ""
    return module.startswith(("nbagent.toolbox", "nbagent.jupyter.notebook."))  # the toolbox, the notebook room


def _run_tools(run: AgentRun) -> list[Any]:
    """The run's tool catalogue (its own, else its agent's)."""
    own = getattr(run, "tools", None)
    return list(own) if isinstance(own, list) else list(getattr(run.agent, "tools", []) or [])


def _tool_name(tool: Any) -> str:
    """A tool's name; MCP servers (a toolset of their tools) by the names of those up or not tried yet: "MCP
    time, git" (`MCPServers.failed`, those that failed to start, are named apart by `_mcp_down`)."""
    active = getattr(tool, "active", None)  # MCPServers.active: the servers a run gets
    if isinstance(active, list) and all(isinstance(getattr(c, "name", None), str) for c in active):
        down = {c.name for c in _mcp_failed(tool)}
        up = [c.name for c in active if c.name not in down]
        return "MCP " + ", ".join(up) if up else "no MCP server"
    return tool.name


def _mcp_failed(tool: Any) -> list[Any]:
    failed = getattr(tool, "failed", None)
    return failed if isinstance(failed, list) else []


def _mcp_down(tools: list[Any]) -> str:
    """The MCP servers of a run that failed to start, as a sentence ("" when none did)."""
    down = [c.name for t in tools for c in _mcp_failed(t) if isinstance(getattr(c, "name", None), str)]
    return f" MCP servers that failed to start (left out): {', '.join(down)}." if down else ""


def tools_summary(run: AgentRun) -> tuple[str, str]:
    """What tools the run was offered: a short form ("tools: add + 15 built-in") and every name."""
    tools = [t for t in _run_tools(run) if getattr(t, "name", None)]
    if not tools:
        return "no tools", "This run was offered no tools."
    own = [_tool_name(t) for t in tools if not _is_builtin(t)]
    builtin = [t.name for t in tools if _is_builtin(t)]
    parts = []
    if own:
        parts.append(", ".join(own) if len(own) <= 3 else plural(len(own), "tool"))
    if builtin:
        parts.append(f"{len(builtin)} built-in")
    full = "Tools offered: " + ", ".join(own + builtin) + _mcp_down(tools)
    return "tools: " + " + ".join(parts), full


def _tools_chip(run: AgentRun) -> str:
    short, full = tools_summary(run)
    return f'<span class="nba-chip" title="{_esc(full)}">{_esc(short)}</span>' + notebook_chip_html(run)


def _sandbox_chip(run: AgentRun) -> str:
    """What the shell's commands run in, for runs that have a shell: "sandbox: workspace-write", or a
    warning that there is none (with the reason on hover). Read from the run (`run.sandbox`), never probed here."""
    state = getattr(run, "sandbox", None) if any(getattr(t, "name", None) == "shell" for t in _run_tools(run)) else None
    if state is None:
        return ""
    if state.enforced:
        return f'<span class="nba-chip" title="{_esc(state.description)}">sandbox: {_esc(state.policy)}</span>'
    return f'<span class="nba-chip nba-warn" title="{_esc(state.description)}">no sandbox</span>'


def _answer(run: AgentRun) -> str:
    """The run's own last text (not an earlier run's, for a run that continues a conversation)."""
    for m in reversed(run.new_messages):
        if isinstance(m, AssistantMessage) and m.text:
            return m.text
    return ""


_MD_MARKS = re.compile(r"(\*\*|__|(?<![\w*])\*(?=\S)|(?<=\S)\*(?![\w*])|`+)")
_MD_LINK = re.compile(r"!?\[([^\]]*)\]\([^)]*\)")


def plain_answer(text: str, limit: int = 200) -> str:
    """A Markdown answer as one line of plain words (`**done**` reads `done`, a link its text, no `#`)."""
    text = _MD_LINK.sub(r"\1", text)
    text = re.sub(r"^\s{0,3}(`{3,}|~{3,})[^\n]*$", "", text, flags=re.M)  # a code fence and its language
    text = re.sub(r"^\s{0,3}(#{1,6}|[-*+]|>)\s+", "", text, flags=re.M)
    return one_line(_MD_MARKS.sub("", text), limit)


def run_line_text(run: AgentRun, where: str) -> str:
    """A run in one line (and its answer's first line), saying where it is shown whole."""
    stats = [status_word(run.status), plural(run.turns, "turn"), plural(len(run.calls), "call"), seconds(run.elapsed)]
    icon = _ICONS.get(run.status, "•")
    out = f"{icon} nbagent run {' · '.join(stats)}: shown whole in the cell that started it ({where})"
    if _answer(run):
        out += "\n  answer: " + plain_answer(_answer(run))
    if run.error is not None:
        out += f"\n  {type(run.error).__name__}: {one_line(str(run.error), 200)}"
    return sanitize.terminal_safe(out)


def run_line_html(run: AgentRun, where: str, *, style: bool = True) -> str:
    """`run_line_text` as HTML (`style=False`: without the stylesheet, which another output carries)."""
    stats = [plural(run.turns, "turn"), plural(len(run.calls), "call"), seconds(run.elapsed)]
    extra = ""
    if _answer(run):
        extra = f'<div class="nba-line-answer">{_esc(plain_answer(_answer(run)))}</div>'
    if run.error is not None:
        extra += f'<div class="nba-line-answer nba-errtext">{_esc(type(run.error).__name__)}: {_esc(one_line(str(run.error), 200))}</div>'
    return (f'{_style() if style else ""}<div class="nba nba-line"><div class="nba-headinfo">{_pill(run.status)}'
            f'<span class="nba-stats">{_esc(" · ".join(stats))}</span><span class="nba-where">shown whole in the '
            f'cell that started it ({_esc(where)}); <span class="nba-code">view(run)</span> shows it here</span>'
            f"</div>{extra}</div>")


def undelivered(run: AgentRun) -> list[str]:
    """What the person sent into the run (`steer`) that never joined it: the run ended first."""
    if not run.done:
        return []
    return [one_line(m.text, 200) for m in getattr(run, "steering", None) or () if getattr(m, "text", None)]


def footer_html(run: AgentRun, *, stopped: str | None = None) -> str:
    """What ended the run, when it did not just finish ('' while it runs or when it finished normally), and
    what was sent into it that it never read."""
    lost = undelivered(run) if stopped is None else []
    note = "".join(f'<div class="nba-foot">Not delivered (the run ended before its next turn): '
                   f'<span class="nba-steered">{_esc(text)}</span>; say it again with %agent.</div>' for text in lost)
    return _end_html(run, stopped) + note


def _end_html(run: AgentRun, stopped: str | None) -> str:
    if stopped is not None and not run.done:
        return (f'<div class="nba-foot nba-s-failed"><b>Stopped</b>: {_esc(stopped)}. What it did until then is '
                "above; a call that was still going did not finish.</div>")
    if run.status == "failed" and run.error is not None:
        return (f'<div class="nba-foot nba-s-failed"><b>{_esc(type(run.error).__name__)}</b>: '
                f"{_esc(_clip(str(run.error), 2000))}</div>")
    if run.status == "cancelled":
        reason = run.cancellation.reason or "cancelled"
        return f'<div class="nba-foot">Stopped: {_esc(reason)}. The transcript stays valid; every call has a result.</div>'
    if run.done and run.stop_reason:
        return f'<div class="nba-foot">Stopped: {_esc(run.stop_reason)}.</div>'
    return ""


def run_html(run: AgentRun, *, stopped: str | None = None, waits: dict[str, float] | None = None,
             style: bool = True) -> str:
    """`AgentRun._repr_html_`: the whole run as it stands, the same as its live view.

    `stopped`: why a run that was still going can no longer go on (its calls in flight show as unfinished);
    `waits`: seconds each call (by id) waited for a person's decision.
    """
    frozen = stopped is not None and not run.done
    waits = waits or {}
    parts = [prompt_html(run.prompt, history_count(run))]
    by_id = {c.id: (i, c) for i, c in enumerate(run.calls)}
    steered = {e.text for e in getattr(run, "events", ()) if getattr(e, "kind", "") == "steered"}
    for msg in shown_items(run):
        if not isinstance(msg, (AssistantMessage, UserMessage)):
            parts.append(compaction_html(msg))
        elif isinstance(msg, AssistantMessage):
            if msg.text:
                parts.append(f'<div class="nba-md">{markdown_html(msg.text)}</div>')
            for call in msg.tool_calls:
                found = by_id.get(call.id)
                if found is not None:
                    i, rec = found
                    parts.append(_call_div(rec, i, frozen, waits.get(rec.id)))
        elif isinstance(msg, UserMessage):
            parts.append(steered_html(one_line(msg.text, 200)) if msg.text in steered
                         else f'<div class="nba-history">{_esc(one_line(msg.words, 200))}</div>')
    committed = {c.id for m in shown_items(run) if isinstance(m, AssistantMessage) for c in m.tool_calls}
    for i, rec in enumerate(run.calls):  # calls of a response still in flight
        if rec.id not in committed:
            parts.append(_call_div(rec, i, frozen, waits.get(rec.id)))
    head = f'<div class="nba-head">{header_html(run, stopped=stopped)}</div>'
    foot = footer_html(run, stopped=stopped)
    return f'{_style() if style else ""}<div class="nba">{head}<div class="nba-body">{"".join(parts)}</div>{foot}</div>'


def shown_items(run: Any) -> list[Any]:
    """What a run shows, in order: its timeline (responses, messages it added, compactions where they
    happened), which a later compaction of the transcript does not rewrite; for a run without one (a
    stand-in), the messages it added, with its compactions first."""
    timeline = getattr(run, "timeline", None)
    if timeline:
        return list(timeline)
    messages = run.new_messages[1:] if run.prompt is not None else run.new_messages
    return [*getattr(run, "compactions", ()), *messages]


def _call_div(rec: CallRecord, index: int, frozen: bool, waited: float | None = None) -> str:
    status = frozen_status(rec.status) if frozen else shown_status(rec)
    body = call_inner_html(rec, index=index, frozen=frozen, output=True, waited=waited)
    return f'<div class="nba-call nba-s-{_esc(status)}">{body}</div>'


reprs.register(call_record_html=call_record_html, tool_result_html=tool_result_html)
