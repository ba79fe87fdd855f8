"""Edits as hunks anchored to the text the agent read: the smallest change, carried over to what the cell holds
now; a collaborator's change apart from the edited text is kept, one on it (or touching it) refuses."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from nbagent.jupyter.notebook.hunks import Conflict, Hunk, apply_hunks, plan_edit, rebase
from tests.helpers import examples

BASE = "x = 1\ny = 2\nprint(x + y)\n"


def test_an_edit_is_the_smallest_change():
    hunks, span = plan_edit(BASE, "y = 2", "y = 3")
    assert hunks == [Hunk(10, 11, "3")]
    assert span == (6, 11)
    assert apply_hunks(BASE, hunks) == BASE.replace("y = 2", "y = 3")


def test_typing_elsewhere_is_kept_and_the_edit_moves_with_it():
    hunks, span = plan_edit(BASE, "y = 2", "y = 3")
    live = "# mine\n" + BASE.replace("print(x + y)", "print(x + y)  # checked")
    moved = rebase(BASE, live, hunks, span)
    assert not isinstance(moved, Conflict)
    assert apply_hunks(live, moved) == "# mine\nx = 1\ny = 3\nprint(x + y)  # checked\n"


def test_typing_on_the_edited_text_or_at_its_edge_refuses():
    hunks, span = plan_edit(BASE, "y = 2", "y = 3")
    for live in (BASE.replace("y = 2", "y = 25"), BASE.replace("y = 2", "yy = 2"), BASE.replace("y = 2", "y= 2"),
                 BASE.replace("x = 1\ny", "x = 1\n#y")):
        found = rebase(BASE, live, hunks, span)
        assert isinstance(found, Conflict), live
        assert found.live == live


def test_old_must_occur_once():
    for old in ("z", "x"):  # absent; twice ("x = 1", "print(x")
        try:
            plan_edit(BASE, old, "w")
        except ValueError:
            continue
        raise AssertionError(f"{old!r} was accepted")


def test_non_ascii_text_keeps_its_characters():
    base = "s = 'héllo 😀'\nt = 1\n"
    hunks, span = plan_edit(base, "t = 1", "t = 2")
    live = "# ünïcode 😀\n" + base
    assert apply_hunks(live, rebase(base, live, hunks, span)) == "# ünïcode 😀\ns = 'héllo 😀'\nt = 2\n"


words = st.text(alphabet="ab \n", min_size=0, max_size=12)


@settings(max_examples=examples(300), deadline=None)
@given(before=words, old_tail=words, after=words, new=words, typed=st.text(alphabet="XY", min_size=1, max_size=4),
       where=st.sampled_from(["before", "after"]))
def test_a_collaborators_text_apart_from_the_edit_is_always_kept(before, old_tail, after, new, typed, where):
    """For any cell and edit: a collaborator's insertion strictly before or after the edited text survives, the
    agent's edit applies exactly, and nothing else changes."""
    old = "OLD" + old_tail
    base = before + "|" + old + "|" + after
    hunks, span = plan_edit(base, old, new)
    live = (typed + base) if where == "before" else (base + typed)
    moved = rebase(base, live, hunks, span)
    assert not isinstance(moved, Conflict)
    expected = base.replace(old, new, 1)
    expected = (typed + expected) if where == "before" else (expected + typed)
    assert apply_hunks(live, moved) == expected


@settings(max_examples=examples(300), deadline=None)
@given(before=words, old=st.text(alphabet="ab", min_size=2, max_size=10), after=words, new=words,
       at=st.integers(min_value=0), typed=st.text(alphabet="XY", min_size=1, max_size=3))
def test_a_collaborators_text_inside_the_edited_text_always_refuses(before, old, after, new, at, typed):
    base = before + "|" + "O" + old + "|" + after
    target = "O" + old
    hunks, span = plan_edit(base, target, new)
    inside = span[0] + 1 + at % (len(target) - 1)
    live = base[:inside] + typed + base[inside:]
    assert isinstance(rebase(base, live, hunks, span), Conflict)
