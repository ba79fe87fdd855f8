"""One source of hidden characters: no module of nbagent keeps a list of its own.

A list of invisible characters written into a module (a file-name fold, a shell word's check) is a second
list: the one source (nbagent/safety/hidden.json, read by `nbagent.safety.hidden`, made into the page's
frontend/src/hidden.ts) grows, the copy does not, and a name or a command written with a character only the
copy misses passes for what it is not. This reads every module of nbagent for such characters, written
raw or as escapes (`\\u200b`, `\\U000e0041`, `\\xad`, `\\N{...}`, a range whose ends bracket one), and
fails on any outside the one source; then it shows members of the old copies are covered by the source.
"""

from __future__ import annotations

import json
import re
import unicodedata
from importlib import resources
from pathlib import Path

import pytest

from nbagent.safety import protected
from nbagent.safety.hidden import ANY_HIDDEN
from nbagent.toolbox._shellwords import parse

ROOT = Path(__file__).resolve().parents[2] / "nbagent"
SOURCE = json.loads(resources.files("nbagent.safety").joinpath("hidden.json").read_text(encoding="utf-8"))
ALLOWED = {ROOT / "safety" / "hidden.py"}
"""The one module that reads the list (and names characters of it in its own docstrings)."""
KINDS = ("bidi", "invisible", "emoji_parts", "separators")
"""The kinds nobody writes by accident (control characters such as ESC are also plain text handling)."""


def _points(kinds=KINDS) -> set[int]:
    out: set[int] = set()
    for kind in kinds:
        for span in SOURCE["kinds"][kind]:
            first, _, last = span.partition("-")
            out.update(range(int(first, 16), int(last or first, 16) + 1))
    return out


HIDDEN = _points()
_RANGE = re.compile(r"-|['\"]?\s*<=?\s*\w+\s*<=?\s*['\"]?")
"""What joins two escapes into a range: `\\u2000-\\u200f` in a class, `"\\u2000" <= c <= "\\u200f"` in code."""
_ESCAPE = re.compile(r"\\(?:u([0-9a-fA-F]{4})|U([0-9a-fA-F]{8})|x([0-9a-fA-F]{2})|N\{([^}]+)\})")


def _code(m: re.Match[str]) -> int | None:
    if m.group(4):
        try:
            return ord(unicodedata.lookup(m.group(4)))
        except KeyError:
            return None
    return int(next(g for g in m.groups()[:3] if g), 16)


def hidden_literals(text: str) -> list[str]:
    """Every hidden character `text` spells: raw, as an escape, or inside a range of escapes."""
    found = [f"U+{ord(c):04X} raw" for c in text if ord(c) in HIDDEN]
    escapes = list(_ESCAPE.finditer(text))
    for i, m in enumerate(escapes):
        code = _code(m)
        if code is None:
            continue
        if code in HIDDEN:
            found.append(f"{m.group(0)}")
        nxt = escapes[i + 1] if i + 1 < len(escapes) else None
        if nxt is not None and _RANGE.fullmatch(text[m.end():nxt.start()]):
            end = _code(nxt)
            if end is not None and any(code <= p <= end for p in HIDDEN):
                found.append(f"{m.group(0)}-{nxt.group(0)}")
    return found


def test_no_module_keeps_its_own_list_of_hidden_characters():
    offenders = {}
    for path in sorted(ROOT.rglob("*.py")):
        if path in ALLOWED:
            continue
        found = hidden_literals(path.read_text(encoding="utf-8"))
        if found:
            offenders[str(path.relative_to(ROOT.parent))] = found[:5]
    assert not offenders, f"a list of hidden characters outside nbagent/safety/hidden.json: {offenders}"


def test_the_check_finds_a_list_when_one_is_written():
    """The mechanism on a copy like the ones that were replaced: each way of writing one is found."""
    assert hidden_literals('re.compile("[\\u00ad\\u034f\\u200b-\\u200f\\ufeff]")')
    assert hidden_literals('"\\u2000" <= c <= "\\u2010"')  # a range whose ends are not hidden, around some that are
    assert hidden_literals("x = '\u200b'")
    assert hidden_literals('"\\N{ZERO WIDTH SPACE}"')
    assert hidden_literals('"\\U000e0041"')
    assert not hidden_literals('"\\u00e9\\x1b\\n"')  # é, ESC and a newline are not on the list


def _samples() -> list[str]:
    """The first, middle and last character of every span of the source."""
    out: set[str] = set()
    for spans in SOURCE["kinds"].values():
        for span in spans:
            first, _, last = span.partition("-")
            a, b = int(first, 16), int(last or first, 16)
            out.update(chr(p) for p in (a, (a + b) // 2, b))
    return sorted(out)


SAMPLES = _samples()


@pytest.mark.parametrize("ch", SAMPLES, ids=lambda c: f"U+{ord(c):04X}")
def test_every_character_of_the_source_is_dropped_from_a_protected_name(ch):
    """`.git` written with any hidden character of the one list is still `.git` (the old copy missed some)."""
    assert protected.normalize_name(f".g{ch}it") == ".git"
    if ch != "\0":  # no path holds a NUL
        assert protected.write_reason([f".g{ch}it/hooks/pre-commit"], "/ws") is not None


@pytest.mark.parametrize("ch", SAMPLES, ids=lambda c: f"U+{ord(c):04X}")
def test_every_character_of_the_source_makes_a_shell_word_odd(ch):
    assert "a control or invisible character" in parse(f"ls{ch} -l").problems
    assert "a control or invisible character" in parse(f'echo "a{ch}b"').problems


def test_control_plain_names_and_commands_are_left_alone():
    assert protected.normalize_name("notes.md") == "notes.md"
    assert not parse("ls -l 'a b'").problems
    assert ANY_HIDDEN.search("plain text, é and 漢字") is None
