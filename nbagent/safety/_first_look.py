"""The first looks of redaction (`nbagent.safety.secrets`): cheap checks that tell a text holds nothing the full
passes would find, never wrong the other way (False, or a look that finds something, only sends the text on to
the full passes, which decide).

- `_may_hold_secret`: whether a run of the secrets' characters in a text holds one of their heads (the first
  `PIECE_LENGTH` characters of a value, or a piece); each run is looked through once for the secrets known.
- `_glance`: both first looks at once (the secrets' heads, the credential shapes' needles) over an ASCII text cut
  at its commas, remembering the parts found clean: the store's lines repeat their words from batch to batch.
- `_skeleton`: a text with its gaps (line breaks, spaces, quotes, backslashes) left out, where a wrapped key's
  pieces lie whole.

What is a secret, and what is replaced, is decided in `secrets` alone; this module imports nothing from nbagent
but the safety wing's own `shapes` and `_forms`.
"""

from __future__ import annotations

import re
from itertools import filterfalse
from typing import Any

from . import shapes as _shapes
from ._forms import trie as _trie

PIECE_LENGTH = 6
"""Runs of this many characters of a secret are redacted wherever they appear."""

_GAPS = re.compile(r"[\s\"'\\]+")
"""What may sit inside a wrapped secret: line breaks, spaces, quotes and backslashes."""
_ASCII_GAPS = bytes(c for c in range(128) if _GAPS.match(chr(c)))
"""The ASCII characters `_GAPS` matches, for `bytes.translate` to leave out."""


def _skeleton(text: str) -> str:
    """`text` with its gaps left out (`_GAPS.sub("", text)`): for ASCII text one `bytes.translate`, about a
    fiftieth of the regular expression's time on JSON (where every quote is a match)."""
    if text.isascii():
        return text.encode("ascii").translate(None, _ASCII_GAPS).decode("ascii")
    return _GAPS.sub("", text)


def _glance(text: str | bytes, compiled: Any) -> bool:
    """True when ASCII `text` holds nothing `_spans` could find: one look for both first looks below (the
    secrets' heads, the shapes' needles), cheap on the store's lines, whose words repeat from one batch to the
    next. Never wrong the other way: False only sends the text on to the full first looks.

    The text with its gaps left out (`_skeleton`, by one `bytes.translate`) is cut at its commas (one split:
    a JSON line falls into its fields) and each part is looked through once: `_glanced` remembers those found
    clean, for these secrets and needles. Why nothing is missed: a head `_may_hold_secret` would find in the
    text with its gaps left out lies in one part (no secret's character is a comma, or there is no glance); a
    token shape's marker (`shapes._ANY_MARKER`) or what a shape no name opens holds (`shapes._LITERAL`) lies, with
    its gaps left out, in the text with its gaps left out, in one part (no needle holds a comma: checked when the
    needles are taken); and where a shape a name opens matches (`shapes._KEYED`), the text with its gaps left out
    holds the name followed by its separator, in one part (neither holds a comma or a gap). So a word such as
    `token` is looked at only where a value could follow it (`"input_tokens":120` is clean at a glance). Not for
    a text a gap-holding value could be in whole (`_spans` looks at the text itself then): that and non-ASCII
    text take the full looks.

    Numbers: with no digit in any needle or head (no secret known), digits are read as `0` (same `translate`):
    a part new only in its numbers (a duration, a count, an id's counter) is clean from memory. Nothing is
    missed: a needle or head found in the text is found, unchanged, with its digits so read (it holds none,
    and its run keeps its characters). A head with a digit (a random key's pieces, its hex): numbers are read as
    they are (read as 0s, such heads would be found in every number and id)."""
    state = _glanced
    if state[0] is not compiled or state[1] is not _shapes._NEEDLES:
        state = _glance_state(compiled)
    _, _, clean, usable, needles, runs, heads, digits = state
    if not usable:
        return False
    data = (text if type(text) is bytes else text.encode("ascii")).translate(digits, _ASCII_GAPS)
    new = set(filterfalse(clean.__contains__, data.split(b",")))
    if not new:
        return True
    joined = b",".join(new)
    if needles.search(joined.lower()) is not None:  # (every needle at once: a `_trie`)
        return False
    if runs is not None and _may_hold_secret(joined.decode("ascii"), runs, heads):  # (its runs: the new parts'
        return False  # own, as a comma is none of the secrets' characters)
    _keep(clean, new)
    return True


def _keep(clean: set[Any], found: Any) -> None:
    """Remember `found` clean (but for long ones: an encoded blob is looked through each time), within bounds."""
    if len(clean) > _CLEAN_RUNS_KEPT:
        clean.clear()
    clean.update(item for item in found if len(item) <= _CLEAN_RUN_LENGTH)


def _glance_state(compiled: Any) -> tuple[Any, ...]:
    """`_glance`'s memory and what it looks for, for these secrets (`_compiled`) and needles."""
    global _glanced
    runs, heads = compiled[5], compiled[6] or frozenset()
    needles = glance_needles()
    usable = (all(_GAPS.search(n) is None and "," not in n and n.isascii() and n == n.lower() for n in needles)
              and (runs is None or runs.fullmatch("," * PIECE_LENGTH) is None))
    named = [name.lower() + sep for names, _, separator in _shapes._KEYED.values()
             for name in _shapes.spelled(names) for sep in _shapes.spelled(separator)]
    pattern = re.compile(_trie([*needles, *named]).encode("ascii") if usable else b"")
    digits = None if any(ch.isdigit() for word in (*needles, *named, *heads) for ch in word) else _ZEROS
    _glanced = (compiled, _shapes._NEEDLES, set(), usable, pattern, runs, heads, digits)
    return _glanced


def glance_needles() -> tuple[str, ...]:
    """What `_glance` looks for as it is (beside the named shapes' names followed by their separators, `shapes._KEYED`):
    every token shape's marker, in lower case with its gaps left out (`-----BEGIN PRIVATE KEY` holds `privatekey` in
    a text with its gaps left out), and what each shape no name opens holds (`shapes._LITERAL`)."""
    return tuple(sorted({_skeleton(m.lower()) for m in _shapes._ANY_MARKER} | set(_shapes._LITERAL.values())))


_ZEROS = bytes.maketrans(b"123456789", b"000000000")  # every digit read as 0 (`_glance`)
_glanced: tuple[Any, ...] = (None, None, set(), False, None, None, frozenset(), None)
"""`_glance`'s state: `(compiled secrets, needles, parts found clean, whether it can look, the needles' `_trie`
(bytes), the secrets' runs, their heads, the table reading digits as 0 (None: a needle or a head holds one))`."""


def _may_hold_secret(text: str, runs: re.Pattern[str], heads: frozenset[str]) -> bool:
    """Whether a secret's value or piece can be in `text`: one of its runs of the secrets' characters holds
    a `head` (the first characters of a value, or a piece). A first look for the passes that find known
    secrets, never wrong the other way: a text it passes over holds nothing they would find. `_spans` asks it
    of the text and of the text with its gaps left out (where a wrapped key's pieces are looked for). Each
    run is looked through once for the secrets known (`_clean_runs`): the store's lines repeat their words,
    and only a new run (an id, a number, a new result) costs its windows."""
    if not (found := runs.findall(text)):
        return False
    checked = _clean_runs
    if checked[0] is not heads:  # the secrets changed: what was clean before is looked at again
        checked = (heads, set(), any(head.isdigit() for head in heads))
        globals()["_clean_runs"] = checked
    _, clean, digits = checked
    for run in (new := set(found).difference(clean)):
        if not digits and run.isdigit():  # a number (a time, a duration): no head is one
            continue
        if not heads.isdisjoint([run[i : i + PIECE_LENGTH] for i in range(len(run) - PIECE_LENGTH + 1)]):
            return True
    _keep(clean, new)
    return False


_clean_runs: tuple[frozenset[str] | None, set[str], bool] = (None, set(), True)
"""`(heads, runs, whether a head is all digits)`: runs `_may_hold_secret` found no head in, for those heads (a
text's words repeat from one line to the next: the JSON keys, the tools' names, the same messages; each is
looked through once). A set made for other heads is never consulted: new secrets start an empty one."""
_CLEAN_RUNS_KEPT = 20_000
_CLEAN_RUN_LENGTH = 256
"""Longer runs (an encoded blob) are looked through each time, not kept."""
