"""The small words of every rendering: escaping, statuses and their pills, durations, counts, an object's
short description, the stylesheet. `nbagent.render` and the modules beside it compose them; `render`
re-exports the public ones.

Reads what someone else wrote only to make it inert: `_esc` shows text as HTML (escaped, every control,
bidi or invisible character shown as `⟨U+XXXX NAME⟩`), `_esc_output` a program's output (escaped, terminal
escapes removed), `one_line` text for one line (terminal escapes removed), all through `nbagent.safety.sanitize`.
"""

from __future__ import annotations

import functools
from importlib import resources
from typing import Any

from ..reprs import short_line
from ..safety import sanitize
from ..safety.shown import hidden_warnings, output_html, shown_html  # noqa: F401 (hidden_warnings: runs.py reads it here)

MAX_TEXT = 4000
"""Characters of a result's text shown before it is cut (the whole text stays on the object)."""
MAX_RICH = 200_000
"""An object's own HTML (a DataFrame's table, say) longer than this is shown as text instead."""

_WORDS = {
    "ok": "done", "done": "done", "error": "error", "failed": "failed", "denied": "denied", "blocked": "blocked",
    "not_found": "unknown tool", "invalid_arguments": "invalid arguments", "cancelled": "cancelled",
    "timeout": "timed out", "running": "running", "waiting_for_approval": "needs approval", "pending": "queued",
    "streaming": "preparing", "unfinished": "did not finish", "not_run": "never ran",
    "sandboxed": "hit the sandbox",
}
_ICONS = {
    "ok": "✓", "done": "✓", "error": "✕", "failed": "✕", "denied": "⊘", "blocked": "⊘", "not_found": "?",
    "invalid_arguments": "!", "cancelled": "■", "timeout": "✕", "waiting_for_approval": "!", "pending": "○",
    "unfinished": "■", "not_run": "■", "sandboxed": "⊘",
}
_LIVE_STATUSES = frozenset({"running", "waiting_for_approval", "pending", "streaming"})


def shown_status(rec: Any) -> str:
    """The status a call shows: its own, except that one which ended well by its exit code but hit the
    sandbox's walls on the way (a network call refused, say: `details.sandbox_stopped`) is "sandboxed",
    never a green "done"."""
    status = rec.status
    if status == "ok":
        stopped = getattr(getattr(getattr(rec, "result", None), "details", None), "sandbox_stopped", None)
        if isinstance(stopped, str) and stopped:
            return "sandboxed"
    return status


def frozen_status(status: str) -> str:
    """The status a call shows once its run can no longer go on (the kernel stopped, say): one that had
    started did not finish; one still waiting for a decision or its turn never ran."""
    if status in ("waiting_for_approval", "pending"):
        return "not_run"
    return "unfinished" if status in _LIVE_STATUSES else status


@functools.cache
def css() -> str:
    """The stylesheet every nbagent rendering uses."""
    return resources.files("nbagent.render").joinpath("render.css").read_text(encoding="utf-8")


def _style() -> str:
    return f"<style>{css()}</style>"


def _esc(text: Any) -> str:
    """Text as HTML: escaped, and every control, bidi or invisible character shown as what it is."""
    return shown_html(text)


def _esc_output(text: Any) -> str:
    """A program's output as HTML: escaped, terminal escapes (colours) removed, other controls shown."""
    return output_html(text)


def _clip(text: str, limit: int | None = MAX_TEXT) -> str:
    return text if limit is None or len(text) <= limit else text[:limit] + f"\n… ({len(text) - limit:,} more characters)"


def one_line(text: str, limit: int = 110) -> str:
    """Text on one line (whitespace collapsed, terminal escapes removed), cut with an ellipsis at `limit`."""
    return short_line(sanitize.terminal_safe(text), limit)


def seconds(value: float | None) -> str:
    """A duration as people read it: 0.02 s, 3.4 s, 42 s, 2 min 05 s."""
    if value is None:
        return ""
    if value < 0.1:
        return f"{value:.2f} s"
    if value < 10:
        return f"{value:.1f} s"
    if value < 60:
        return f"{value:.0f} s"
    minutes, secs = divmod(int(value), 60)
    return f"{minutes} min {secs:02d} s"


def time_words(rec: Any, waited: float | None = None) -> list[tuple[str, str]]:
    """A call's time as parts, each with a title: its own time first, then (apart) the time it queued behind
    other calls and the time it waited for a decision. One formula (`CallRecord.own_time`) for the record's text,
    the run's text and the view's row. `waited`: a wait measured elsewhere, for a record that has none."""
    queued = getattr(rec, "queued", None)
    wait = getattr(rec, "decision_wait", None)
    if wait is None:
        wait = waited
    if rec.duration is None:  # still going: the time since its turn came (or that it is still queued)
        if queued is None and rec.status == "pending":
            return [(f"queued {seconds(rec.elapsed)}", "waiting for the calls before it to finish")]
        return [(seconds(rec.elapsed), "")]
    parts = [(seconds(max(0.0, rec.duration - (wait or 0.0))), "the time the call itself took")]
    if queued is not None and queued >= 0.05:
        parts.append((f"{seconds(queued)} queued", "time spent waiting for the calls before it (their approvals "
                                                   "included), apart from the time the call took"))
    if wait and wait >= 0.05:
        decision = getattr(rec, "decision", None)
        who = "you" if decision is None or decision.source == "user" else "a decision"
        parts.append((f"{seconds(wait)} waiting for {who}", "time spent waiting for a decision, apart from the "
                                                            "time the call took"))
    return parts


def plural(n: int, word: str) -> str:
    """`1 call`, `2 calls`."""
    return f"{n:,} {word}" if n == 1 else f"{n:,} {word}s"


def status_word(status: str) -> str:
    """The word shown for a status."""
    return _WORDS.get(status, status.replace("_", " "))


def _icon(status: str) -> str:
    if status in ("running", "streaming"):
        return '<span class="nba-spin"></span>'
    if status == "waiting_for_approval":
        return '<span class="nba-dot"></span>'
    return _esc(_ICONS.get(status, "•"))


def _pill(status: str, text: str | None = None) -> str:
    return f'<span class="nba-pill nba-s-{_esc(status)}">{_icon(status)} {_esc(text or status_word(status))}</span>'


def describe_object(obj: Any) -> str:
    """A short description of a Python object: its type, and its shape or size when it has one."""
    name = type(obj).__name__
    shape = getattr(obj, "shape", None)
    if isinstance(shape, tuple):
        if len(shape) == 2 and all(isinstance(n, int) for n in shape):
            return f"{name}, {shape[0]:,} rows × {shape[1]:,} columns"
        return f"{name} {shape}"
    if isinstance(obj, (str, bytes, list, tuple, dict, set, frozenset)):
        unit = "character" if isinstance(obj, str) else "byte" if isinstance(obj, bytes) else "item"
        return f"{name} of {plural(len(obj), unit)}"
    return name
