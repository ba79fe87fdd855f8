"""The one way nbagent shows a value to a person: every surface that asks for consent or shows what will run
(the call's row in the cell's view and its text view, the panel, the Trust prompt, the batch view, every grant
label) and every other piece of HTML nbagent writes goes through here.

- `shown(value)`: text (a button's label, a tooltip, a line of a terminal view): every hidden character
  (control, bidi, invisible: the one list, hidden.json, which the page's list is made from too) shown as
  `⟨U+XXXX NAME⟩`, nothing removed, nothing cut.
- `shown_html(value)`: the same, escaped for HTML (attribute values too).
- `output_html(text)`: a program's output as HTML: terminal escapes (colours) removed, every other hidden
  character shown, escaped.
- `hidden_warnings(*values)`: one sentence per kind of hidden character in any text of `values` (nested in
  dicts and lists too), to show beside what is approved.

Nothing here cuts a value: a surface that shows what will run shows all of it (it scrolls). Where a view
shortens something that is not being approved (a summary line), it says so itself.

No module of nbagent but this one (and the sanitizer) escapes HTML: tests/security/test_consent_renderer.py
checks every module, and every consent surface's output.
"""

from __future__ import annotations

import html
from typing import Any

from .sanitize import terminal_safe, visible

__all__ = ["hidden_warnings", "output_html", "shown", "shown_html"]


def shown(value: Any) -> str:
    """`value` as text a person reads: whole, every hidden character shown as `⟨U+XXXX NAME⟩`."""
    return visible(value if isinstance(value, str) else str(value))[0]


def shown_html(value: Any) -> str:
    """`value` as HTML text (or an attribute's value): whole, hidden characters shown, escaped."""
    return html.escape(shown(value), quote=True)


def output_html(text: Any) -> str:
    """A program's output as HTML: terminal escapes removed, other hidden characters shown, escaped."""
    return html.escape(terminal_safe(text), quote=True)


def hidden_warnings(*values: Any) -> list[str]:
    """The warnings `visible` gives for any text in `values` (nested in dicts, lists and tuples too, keys as
    well), each once: what a person approving these values must be told they cannot see as-is."""
    found: list[str] = []

    def walk(value: Any) -> None:
        if isinstance(value, str):
            for w in visible(value)[1]:
                if w not in found:
                    found.append(w)
        elif isinstance(value, dict):
            for k, v in value.items():
                walk(k)
                walk(v)
        elif isinstance(value, (list, tuple)):
            for v in value:
                walk(v)

    for value in values:
        walk(value)
    return found
