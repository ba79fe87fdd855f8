"""The one source of hidden characters: what a person cannot see as it is, and how nbagent shows it.

The list is nbagent/safety/hidden.json (control, bidi, invisible, the parts of emoji, line separators); the
kernel reads it here, and frontend/scripts/hidden.mjs makes the page's list (frontend/src/hidden.ts) from it.
No other module keeps a list of such characters (tests/security/test_hidden_source.py reads every module):
what needs one takes it from here.

- `visible(text) -> (shown, warnings)`: for text a person approves: nothing removed, every control, bidi
  and invisible character shown as `⟨U+XXXX NAME⟩`, and one warning per kind found, to show beside it.
- `terminal_safe(text)`: for text that goes to a terminal or a log: terminal escape sequences removed, every
  other hidden character shown as a visible `⟨U+XXXX⟩`.
- `has_hidden_characters(text)`: whether `visible` would show anything.
- `ANY_HIDDEN`: a pattern matching one character of any kind of the list (a carriage return included): for
  code that drops or escapes such characters itself (a file name's folded form, a shell word's check).

No IPython here, and nothing from nbagent.
"""

from __future__ import annotations

import json
import re
import unicodedata
from importlib import resources
from typing import Any

__all__ = ["ANY_HIDDEN", "has_hidden_characters", "terminal_safe", "visible"]


def _kinds() -> dict[str, str]:
    """The one list of hidden characters (hidden.json, which the page's list is made from too), as regular
    expression character classes by kind."""
    source = json.loads(resources.files("nbagent.safety").joinpath("hidden.json").read_text(encoding="utf-8"))

    def char(code: str) -> str:
        return re.escape(chr(int(code, 16)))

    return {kind: "".join("-".join(char(end) for end in span.split("-")) for span in spans)
            for kind, spans in source["kinds"].items()}


_KINDS = _kinds()
_BIDI = _KINDS["bidi"]
_INVISIBLE = _KINDS["invisible"]
# every Default_Ignorable_Code_Point (what a browser draws as nothing), the variation selectors supplement
# (E0100-E01EF) and the format characters of music and shorthand too, but the joiner and the variation
# selectors emoji are made of (_EMOJI_PARTS)
_EMOJI_PARTS = _KINDS["emoji_parts"]  # the joiner and the variation selectors: invisible, and inside emoji
_CONTROL = _KINDS["control"]  # every C0 but tab, newline and CR, DEL, every C1
_SEPARATORS = _KINDS["separators"]
ANY_HIDDEN = re.compile("[\r" + "".join(_KINDS.values()) + "]")
"""One character of any kind of the list, a carriage return included (alone or not)."""
# a carriage return counts only alone: before a newline it is a Windows line end, and hides nothing
_HIDDEN = re.compile(f"\r(?!\n)|[{_CONTROL}{_BIDI}{_INVISIBLE}{_EMOJI_PARTS}{_SEPARATORS}]")
_HIDDEN_PROSE = re.compile(f"\r(?!\n)|[{_CONTROL}{_BIDI}{_INVISIBLE}{_SEPARATORS}]")
_IS_BIDI = re.compile(f"[{_BIDI}]")
_IS_CONTROL = re.compile(f"[{_CONTROL}]")
_IS_SEPARATOR = re.compile(f"[{_SEPARATORS}]")
_ESCAPE_SEQUENCE = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]"              # CSI: colours, cursor moves, clearing
    r"|\x1b[\]PX^_][^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)?"  # OSC (title, hyperlinks, clipboard), DCS, SOS, PM, APC
    r"|\x1b[ -/]*[0-~]"                     # the other escapes (charset, keypad, reset)
    r"|\x9b[0-?]*[ -/]*[@-~]"               # 8-bit CSI
    r"|[\x90\x9d-\x9f][^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)?")  # 8-bit OSC, DCS, ...
_NAMES = {"\x1b": "ESC", "\r": "CR", "\x07": "BEL", "\x08": "BS", "\x00": "NUL", "\x7f": "DEL", "\x0c": "FF",
          "\x0b": "VT", "\x9b": "CSI"}


def _name(ch: str) -> str:
    name = _NAMES.get(ch) or unicodedata.name(ch, "")
    if not name:
        return "CONTROL"
    return name


def _code(ch: str) -> str:
    return f"U+{ord(ch):04X}"


def has_hidden_characters(text: str) -> bool:
    """Whether `text` holds a control, bidi or invisible character (what `visible` would show)."""
    return isinstance(text, str) and _HIDDEN.search(text) is not None


def _kind(ch: str) -> str:
    if _IS_BIDI.match(ch):
        return ("bidi controls (they change the order in which text is shown, so what you read is not the "
                "order it runs in)")
    if ch == "\x1b" or ch == "\x9b":
        return "terminal escape sequences (they can rewrite what a terminal shows)"
    if _IS_SEPARATOR.match(ch):
        return "line or paragraph separators (a line break that some programs do not count as one)"
    if ch == "\r" or _IS_CONTROL.match(ch):
        return "control characters"
    return "invisible characters (zero-width and the like: text that looks the same can differ)"


def visible(text: str, *, prose: bool = False) -> tuple[str, list[str]]:
    """Text a person is about to approve, with nothing hidden: `(shown, warnings)`.

    Every control character (C0 but newline and tab, a carriage return not before a newline, DEL, C1), bidi control (U+202A-202E, U+2066-2069,
    U+200E/200F, U+061C), invisible character (U+200B-200D, U+2060-2064, U+FEFF, soft hyphen, variation
    selectors, tags) and line/paragraph separator is shown as `⟨U+202E RIGHT-TO-LEFT OVERRIDE⟩`; nothing is
    removed, so every character that will run is there to see. `warnings` has one sentence per kind found
    ("bidi controls (...)"), to show beside the text; it is empty for ordinary text.

    `prose=True` (text to read, not to approve: the model's Markdown) leaves the joiner and the variation
    selectors that emoji are made of (U+200D, U+FE00-FE0F) as they are.
    """
    if not isinstance(text, str):
        text = str(text)
    pattern = _HIDDEN_PROSE if prose else _HIDDEN
    if pattern.search(text) is None:
        return text, []
    kinds: dict[str, int] = {}

    def show(m: re.Match[str]) -> str:
        ch = m.group(0)
        kind = _kind(ch)
        kinds[kind] = kinds.get(kind, 0) + 1
        return f"⟨{_code(ch)} {_name(ch)}⟩"

    shown = pattern.sub(show, text)
    warnings = [f"It contains {kind}: {count} shown as ⟨U+XXXX NAME⟩." for kind, count in kinds.items()]
    return shown, warnings


def terminal_safe(text: Any) -> str:
    """Text for a terminal or a log: escape sequences removed, every other control, bidi or invisible
    character shown as `⟨U+XXXX⟩` (newline and tab kept; a carriage return alone becomes a newline)."""
    if not isinstance(text, str):
        text = str(text)
    if _HIDDEN.search(text) is None:
        return text
    text = _ESCAPE_SEQUENCE.sub("", text)
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    return _HIDDEN.sub(lambda m: f"⟨{_code(m.group(0))}⟩", text)

