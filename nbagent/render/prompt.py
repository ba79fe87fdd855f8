"""The person's prompt in a run's view: their own words, with the context a button or a mention sent with
them folded underneath (what the model read, whole), and how much conversation came before it.

Reads the prompt: the person's words, and the context added to them (a cell's source and error, a variable's
summary: anyone could have written those). Everything is escaped (`_esc`); nothing here is HTML of theirs.
"""

from __future__ import annotations

from typing import Any

from ..messages import TextBlock, UserMessage
from .base import _clip, _esc

__all__ = ["context_html", "history_count", "prompt_html", "prompt_words"]

AgentRun = Any


def history_count(run: AgentRun) -> int:
    """How many messages of conversation came before the run, as it started (a compaction during the run
    folds them into fewer; the view still says how long the conversation was)."""
    now = len(run.messages) - len(run.new_messages)
    folded = sum(max(0, len(c.replaced) - len(c.replacement)) for c in getattr(run, "compactions", ()) or ()
                 if c.start < now)
    return now + folded


def prompt_words(prompt: Any) -> tuple[str, str | None]:
    """(what the person said, the whole text the model was sent when it holds more: None otherwise)."""
    if isinstance(prompt, UserMessage):
        return (prompt.said, prompt.text) if prompt.said is not None else (prompt.text, None)
    if prompt is not None and not isinstance(prompt, str):
        return " ".join(b.text if isinstance(b, TextBlock) else "[image]" for b in prompt), None
    return prompt or "", None


def context_html(sent: str) -> str:
    """The context sent with the person's words, folded: what the model read, whole (it scrolls)."""
    lines = sent.count("\n") + 1
    return (f'<details class="nba-context"><summary>what nbagent was sent with it ({lines} line{"s" if lines != 1 else ""}'
            f')</summary><div class="nba-pre">{_esc(_clip(sent, 40_000))}</div></details>')


def prompt_html(prompt: Any, history: int = 0) -> str:
    """The person's prompt: their own words, with the context a button or a mention added folded under them
    (and how much conversation came before it)."""
    words, sent = prompt_words(prompt)
    before = ""
    if history:
        before = f'<div class="nba-history">continues a conversation of {history} message{"s" if history != 1 else ""}</div>'
    if not words and sent is None:
        return before
    fold = context_html(sent) if sent is not None else ""
    return (f'{before}<div class="nba-prompt"><span class="nba-who">You</span><span class="nba-said">'
            f'{_esc(_clip(words, 3000))}{fold}</span></div>')
