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

This module is a run's frame: its header (status, model, tools, sandbox, cost, context), its footer and
the static rendering that puts the calls between them. The other pieces are beside it: a call's row
(`calls`), the small words (`base`), the model's Markdown (`markdown`), a tool's result (`results`), usage
(`usage`), what happens beside the calls (`live`); the public names the frame uses are re-exported here.
"""

from __future__ import annotations

import re
from typing import Any

from .. import reprs
from ..messages import AssistantMessage, UserMessage
from ..safety import sanitize
from .base import (
    _ICONS, _clip, _esc, _pill, _style, css, describe_object, one_line, plural, seconds, status_word,
)
from .calls import _call_div, args_html, call_inner_html, call_label, call_record_html, decision_note
from .lineage import kernel_only_html
from .live import notebook_chip_html, processes_html, steered_html
from .markdown import markdown_html
from .prompt import history_count, prompt_html
from .results import diff_html, result_html, tool_result_html
from .usage import compaction_html, cost_text, gauge_html, tokens_text

AgentRun = Any
"""A run handle (`nbagent.AgentRun`): render reads its public attributes only, and imports nothing above data."""

__all__ = [
    "args_html",
    "compaction_html",
    "call_inner_html",
    "call_label",
    "call_record_html",
    "css",
    "decision_note",
    "describe_object",
    "diff_html",
    "header_html",
    "markdown_html",
    "one_line",
    "plural",
    "result_html",
    "run_html",
    "seconds",
    "status_word",
    "tool_result_html",
    "tools_summary",
    "undelivered",
]

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


reprs.register(call_record_html=call_record_html, tool_result_html=tool_result_html)
