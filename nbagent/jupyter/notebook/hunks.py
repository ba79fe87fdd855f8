"""An edit as the smallest changes (hunks) anchored to the text the agent read, carried over to the text a cell
holds now, when others typed in it meanwhile.

`edit_cell(cell_id, old, new)` means: in the cell as the agent read it (`base`), the one occurrence of `old`
becomes `new`. `plan_edit` turns that into hunks, positions in `base`: the common start and end of `old` and
`new` are left alone and only what differs is deleted or inserted (`x = 1` -> `x = 2` replaces one character).
`rebase` carries the hunks over to the cell's text now (`live`): it finds what others changed between `base`
and `live`, and refuses (returns a `Conflict` with the text now) when one of their changes falls inside the text
the agent said it replaces (or touches its edges: someone typing on the same words); a change elsewhere in the
cell is kept, and the hunks move with it. Nothing is ever cleared and written again, so concurrent keystrokes
outside the hunks survive, and, applied as one transaction of a shared document, keystrokes the hunks did not
know of are kept by the document itself.

Positions are in characters (Python `str` indexes); a document that counts otherwise converts them.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass

__all__ = ["Conflict", "Hunk", "apply_hunks", "lands_apart", "others_changes", "plan_edit", "rebase"]


@dataclass(frozen=True)
class Hunk:
    """Replace `text[start:end]` with `insert` (start == end: a pure insertion; insert "": a deletion)."""

    start: int
    end: int
    insert: str


@dataclass(frozen=True)
class Conflict:
    """Someone changed the text the edit replaces since the agent read it: nothing may be written."""

    live: str
    """What the cell holds now."""
    span: tuple[int, int]
    """The part of the text as read that the edit replaces, and that someone changed."""


def _opcodes(a: str, b: str) -> list[tuple[str, int, int, int, int]]:
    """difflib's opcodes from `a` to `b`, by character, quick where the two share a long start and end."""
    head = 0
    limit = min(len(a), len(b))
    while head < limit and a[head] == b[head]:
        head += 1
    tail = 0
    while tail < limit - head and a[len(a) - 1 - tail] == b[len(b) - 1 - tail]:
        tail += 1
    mid_a, mid_b = a[head:len(a) - tail], b[head:len(b) - tail]
    ops: list[tuple[str, int, int, int, int]] = []
    if head:
        ops.append(("equal", 0, head, 0, head))
    if mid_a or mid_b:
        for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, mid_a, mid_b, autojunk=False).get_opcodes():
            ops.append((tag, i1 + head, i2 + head, j1 + head, j2 + head))
    if tail:
        ops.append(("equal", len(a) - tail, len(a), len(b) - tail, len(b)))
    return ops


def plan_edit(base: str, old: str, new: str) -> tuple[list[Hunk], tuple[int, int]]:
    """The hunks (positions in `base`) that turn the one occurrence of `old` in `base` into `new`, and the span
    of `base` they are anchored to (where `old` is). `old` must occur exactly once (edit_cell checks it)."""
    at = base.find(old)
    if at < 0 or base.find(old, at + 1) >= 0:
        raise ValueError("old must occur exactly once in the text")
    hunks = [Hunk(at + i1, at + i2, new[j1:j2]) for tag, i1, i2, j1, j2 in _opcodes(old, new) if tag != "equal"]
    return hunks, (at, at + len(old))


def others_changes(base: str, live: str) -> list[tuple[int, int]]:
    """The spans of `base` others changed to make `live` (a pure insertion is an empty span at its place)."""
    return [(i1, i2) for tag, i1, i2, _j1, _j2 in _opcodes(base, live) if tag != "equal"]


def _touches(change: tuple[int, int], span: tuple[int, int]) -> bool:
    c1, c2 = change
    s1, s2 = span
    if c1 == c2:  # an insertion: inside the span or right at its edges (someone typing on the same words)
        return s1 <= c1 <= s2
    return c1 < s2 and s1 < c2


def _map(ops: list[tuple[str, int, int, int, int]], pos: int, *, after_insertions: bool) -> int:
    """Where position `pos` of the base is in the live text (its equal neighbourhood; see `rebase`)."""
    found = None
    for tag, i1, i2, j1, j2 in ops:
        if tag == "equal" and i1 <= pos <= i2:
            found = j1 + (pos - i1)
            if not after_insertions:
                return found  # the first block that holds it: before an insertion made at `pos`
        elif tag != "equal" and i1 == pos == i2 and after_insertions and found is not None:
            found = j2  # step over the insertion made exactly here
    if found is None:  # pos is at the edge of a change (rebase only asks for those outside every change)
        for tag, i1, i2, j1, j2 in ops:
            if i1 <= pos <= i2:
                return j1 if pos == i1 else j2
        return pos
    return found


def rebase(base: str, live: str, hunks: list[Hunk], span: tuple[int, int]) -> list[Hunk] | Conflict:
    """The hunks moved onto `live`, or a `Conflict` when others changed `span` of `base` meanwhile.

    A hunk that deletes starts after, and ends before, anything others inserted exactly at its edges, so their
    text is never deleted; a pure insertion goes before theirs.
    """
    if base == live:
        return list(hunks)
    ops = _opcodes(base, live)
    for change in ((i1, i2) for tag, i1, i2, _j1, _j2 in ops if tag != "equal"):
        if _touches(change, span):
            return Conflict(live, span)
    moved = []
    for h in hunks:
        if h.start == h.end:
            at = _map(ops, h.start, after_insertions=False)
            moved.append(Hunk(at, at, h.insert))
        else:
            moved.append(Hunk(_map(ops, h.start, after_insertions=True), _map(ops, h.end, after_insertions=False),
                              h.insert))
    return moved


def apply_hunks(text: str, hunks: list[Hunk]) -> str:
    """`text` with the hunks applied (last first, so the earlier positions hold)."""
    for h in sorted(hunks, key=lambda h: (h.start, h.end), reverse=True):
        text = text[:h.start] + h.insert + text[h.end:]
    return text


def lands_apart(base: str, live: str, old: object, new: object) -> bool:
    """Whether replacing `old` with `new` in `base` still applies to `live` without touching what someone
    changed meanwhile (False for an edit that cannot be planned)."""
    try:
        hunks, span = plan_edit(base, str(old), str(new))
    except ValueError:
        return False
    return not isinstance(rebase(base, live, hunks, span), Conflict)
