"""The usage parts of a run's views: tokens, the context gauge, the cost, what a compaction replaced.

Pure functions of the run's record (its `usage`, `spend`, `context_tokens`, `compactions`), used by
`nbagent.render` for the header, the static HTML and the plain text.
"""

from __future__ import annotations

from typing import Any

from ..budget.pricing import format_cost
from ..safety.shown import shown_html

AgentRun = Any
"""A run handle: read through its public attributes only."""

__all__ = ["compaction_html", "context_text", "cost_text", "gauge_html", "short_tokens", "tokens_text"]


def _esc(text: Any) -> str:
    return shown_html(text)


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def short_tokens(n: int) -> str:
    """12,345 -> 12.3k; 1,234,567 -> 1.23M."""
    if n >= 1_000_000:
        return f"{n / 1_000_000:.2f}".rstrip("0").rstrip(".") + "M"
    if n >= 10_000:
        return f"{n / 1000:.1f}".removesuffix(".0") + "k"
    return f"{n:,}"


def tokens_text(run: AgentRun) -> str:
    u = run.usage
    if not (u.input_tokens or u.output_tokens):
        return ""
    cached = f" ({short_tokens(u.cache_read_tokens)} cached)" if u.cache_read_tokens else ""
    reasoning = f" ({short_tokens(u.reasoning_tokens)} reasoning)" if u.reasoning_tokens else ""
    return (f"{short_tokens(u.input_tokens)} in{cached} · {short_tokens(u.output_tokens)} out{reasoning} tokens")


def cost_text(run: AgentRun) -> tuple[str, str]:
    """(the short text, the long one) of what the run and its conversation cost."""
    spend, whole = getattr(run, "spend", None), getattr(run, "conversation_spend", None)
    if spend is None or whole is None or (not spend.responses and not whole.responses):
        return "", ""
    text = format_cost(spend.cost)
    if whole.responses > spend.responses and spend.cost is not None:
        text += f" · {format_cost(whole.cost)} conversation"
    title = f"this run: {spend}\nthe conversation: {whole}"
    return text, title


def context_text(run: AgentRun) -> tuple[str, str, float | None]:
    """(the short text, the long one, the fraction) of how full the context window is."""
    tokens = getattr(run, "context_tokens", 0)
    window = getattr(run, "context_window", None)
    how = "as the provider counted it" if getattr(run, "context_measured", False) else "estimated"
    if not window:
        return (f"{short_tokens(tokens)} tokens" if tokens else "",
                f"the conversation takes {tokens:,} tokens ({how}); the model's context window is unknown "
                "(set Agent(context_window=N))", None)
    fraction = tokens / window
    policy = getattr(run.agent, "compaction", None)
    when = (f"; compacts at {policy.threshold:.0%}" if policy is not None and policy.auto else
            "; automatic compaction is off")
    compactions = getattr(run, "compactions", ())
    compacted = f"; compacted {_plural(len(compactions), 'time')} in this run" if compactions else ""
    return (f"{fraction:.0%} of {short_tokens(window)}",
            f"context: {tokens:,} of {window:,} tokens ({how}){when}{compacted}", fraction)


def gauge_html(run: AgentRun) -> str:
    text, title, fraction = context_text(run)
    if not text:
        return ""
    if fraction is None:
        return f'<span class="nba-gauge" title="{_esc(title)}">{_esc(text)}</span>'
    policy = getattr(run.agent, "compaction", None)
    high = policy.threshold if policy is not None else 0.9
    level = "nba-high" if fraction >= high else "nba-mid" if fraction >= 0.6 else ""
    width = max(0.0, min(fraction, 1.0)) * 100
    return (f'<span class="nba-gauge {level}" title="{_esc(title)}"><span class="nba-gauge-bar">'
            f'<span class="nba-gauge-fill" style="width:{width:.1f}%"></span></span>{_esc(text)}</span>')


def compaction_html(compaction: Any) -> str:
    """What a compaction replaced, in the view: a line, and the summary on demand."""
    summary = ""
    if compaction.summary:
        summary = (f"<details><summary>the summary the model wrote</summary>"
                   f"<pre>{_esc(compaction.summary[:8000])}</pre></details>")
    return (f'<div class="nba-compacted">{_esc(str(compaction))}. The replaced messages are kept whole in '
            f"<code>run.compactions</code> and in the session's record.{summary}</div>")
