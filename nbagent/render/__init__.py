"""How runs, tool calls and results look: HTML for notebooks, plain text for scripts and logs.

    runs           a run's header and footer, the static rendering
    calls          a tool call's row: its arguments, permission badge, decision and result
    text           the text form of runs and calls
    base           the small words: escaping, statuses, durations, the stylesheet (`render.css`)
    markdown       the model's Markdown, raw HTML escaped, nothing remote loaded
    results        a tool's result: text, images, rich reprs (sanitized), diffs
    usage          tokens, cost and the context gauge
    live           what happens beside the calls: steering, processes, approval notices
    lineage        names that exist only in the kernel; the table of a reproducibility check
    prompt         the person's words, with the context sent with them folded
    batch          a batch's progress and items

The rule: this wing imports only the vocabulary at the top of nbagent, `safety` (every piece of HTML that
is not its own passes `safety.sanitize`) and `budget` (prices). Data never imports it: importing this
package registers its functions with `nbagent.reprs`, which data objects call for `_repr_html_`.
"""

from __future__ import annotations

from .base import _esc, _style, frozen_status, plural, shown_status
from .prompt import prompt_words
from .calls import args_html, call_inner_html, call_label, call_record_html, decision_note
from .runs import (
    compaction_html, cost_text, css, describe_object, footer_html, header_html, history_count, markdown_html, one_line,
    plain_answer, prompt_html, result_html, run_html, run_line_html, run_line_text, seconds, shown_items, status_word, tool_result_html,
    tools_summary,
)
from .text import call_text, run_text

__all__ = [
    "args_html",
    "call_inner_html",
    "call_label",
    "call_record_html",
    "call_text",
    "compaction_html",
    "cost_text",
    "css",
    "decision_note",
    "describe_object",
    "footer_html",
    "frozen_status",
    "header_html",
    "history_count",
    "markdown_html",
    "one_line",
    "plain_answer",
    "plural",
    "prompt_html",
    "prompt_words",
    "result_html",
    "run_html",
    "run_line_html",
    "run_line_text",
    "run_text",
    "seconds",
    "shown_items",
    "shown_status",
    "status_word",
    "tool_result_html",
    "tools_summary",
]
