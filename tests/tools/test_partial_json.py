"""The incremental partial-JSON parser behind live tool-call arguments."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from nbagent.events import ToolCallDelta
from nbagent.tools.partial_json import PartialJSON, parse_partial_json
from tests.helpers import examples

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-10**12, 10**12)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda children: st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=8), children, max_size=5),
    max_leaves=25,
)


def consistent(snap: Any, final: Any) -> bool:
    """`snap` could be what `final` looked like part-way: strings are prefixes, lists prefixes (the last
    item possibly partial), objects subsets, scalars equal."""
    if isinstance(snap, str):
        return isinstance(final, str) and final.startswith(snap)
    if isinstance(snap, list):
        if not isinstance(final, list) or len(snap) > len(final):
            return False
        last_ok = not snap or consistent(snap[-1], final[len(snap) - 1])
        return last_ok and all(s == f for s, f in zip(snap[:-1], final))
    if isinstance(snap, dict):
        return isinstance(final, dict) and all(k in final and consistent(v, final[k]) for k, v in snap.items())
    return type(snap) is type(final) and snap == final


def split_at(text: str, cuts: list[int]) -> list[str]:
    points = sorted({c % (len(text) + 1) for c in cuts})
    pieces, last = [], 0
    for p in points + [len(text)]:
        pieces.append(text[last:p])
        last = p
    return pieces


@settings(max_examples=examples(300), deadline=None)
@given(value=json_values, cuts=st.lists(st.integers(0, 10**6), max_size=12), ascii_=st.booleans(),
       indent=st.sampled_from([None, 2]))
def test_any_split_gives_json_loads_value_and_consistent_snapshots(value, cuts, ascii_, indent) -> None:
    text = json.dumps(value, ensure_ascii=ascii_, indent=indent)
    parser = PartialJSON()
    snapshots = []
    for piece in split_at(text, cuts):
        parser.feed(piece)
        snapshots.append(parser.snapshot())
    parser.end()
    snapshots.append(parser.snapshot())
    final = json.loads(text)
    assert parser.value() == final
    assert parser.complete and not parser.failed
    for i, snap in enumerate(snapshots):
        if snap is not None:
            assert consistent(snap, final), (text, i, snap)
    # and every snapshot is consistent with every later one
    seen = [s for s in snapshots if s is not None]
    for earlier, later in zip(seen, seen[1:]):
        assert consistent(earlier, later), (text, earlier, later)
    assert snapshots[-1] == final


@settings(max_examples=examples(200), deadline=None)
@given(value=st.dictionaries(st.text(max_size=6), json_values, max_size=4))
def test_snapshot_after_every_character(value) -> None:
    text = json.dumps(value, ensure_ascii=False)
    parser = PartialJSON()
    for ch in text:
        parser.feed(ch)
        snap = parser.snapshot()
        assert snap is None or consistent(snap, value)
    assert parser.snapshot() == value


def test_marks_are_snapshots_of_their_moment() -> None:
    parser = PartialJSON()
    marks = []
    for piece in ['{"path": "no', 'tes.md", "content": "# Ti', 'tle\\n', 'body"}']:
        parser.feed(piece)
        marks.append(parser.mark())
    assert [parser.snapshot_at(m) for m in marks] == [
        {"path": "no"},
        {"path": "notes.md", "content": "# Ti"},
        {"path": "notes.md", "content": "# Title\n"},
        {"path": "notes.md", "content": "# Title\nbody"},
    ]


def test_partial_values_are_left_out_until_complete() -> None:
    cases = {
        '{"a": 12': {},
        '{"a": 12,': {"a": 12},
        '{"a": tr': {},
        '{"a": true}': {"a": True},
        '{"ke': {},
        '{"key"': {},
        '{"key":': {},
        '{"key": [': {"key": []},
        '{"key": [1, {"b": "x': {"key": [1, {"b": "x"}]},
        '{"a": "x\\': {"a": "x"},
        '{"a": "x\\u00': {"a": "x"},
        '{"a": "\\ud83d': {"a": ""},
        '{"a": "\\ud83d\\ude00': {"a": "\U0001F600"},
    }
    for text, expected in cases.items():
        parser = PartialJSON()
        parser.feed(text)
        assert parser.snapshot() == expected, text


def test_not_json_fails_quietly() -> None:
    parser = PartialJSON()
    parser.feed('{"a": 1} trailing')
    assert parser.failed and parser.snapshot() is None
    parser = PartialJSON()
    parser.feed("```json\n{")
    assert parser.failed and parser.snapshot() is None


def test_raw_control_characters_in_strings_are_tolerated_in_snapshots() -> None:
    parser = PartialJSON()
    parser.feed('{"code": "line1\nline2')
    assert parser.snapshot() == {"code": "line1\nline2"}


def test_long_string_work_is_per_fragment() -> None:
    # a 1 MB string in 20,000 fragments: the parser's text grows, but no fragment re-reads it
    parser = PartialJSON()
    parser.feed('{"content": "')
    fragment = "abcdefghij" * 5
    for _ in range(20_000):
        parser.feed(fragment)
    parser.feed('"}')
    assert parser.complete and len(parser.value()["content"]) == 1_000_000


def test_parse_partial_json_one_shot() -> None:
    assert parse_partial_json('{"a": [1, 2') == {"a": [1]}
    assert parse_partial_json("123") == 123
    assert parse_partial_json("") is None


def test_tool_call_delta_is_lazy_and_memoised() -> None:
    calls = []

    def compute():
        calls.append(1)
        return {"path": "notes.md"}

    delta = ToolCallDelta.lazy(0, "c1", "write", '"notes.md"', compute)
    assert calls == [] and "not computed" in repr(delta)
    assert delta.partial_arguments == {"path": "notes.md"}
    assert delta.partial_arguments == {"path": "notes.md"} and calls == [1]
    assert ToolCallDelta(0, "c1", "write", '"notes.md"', {"path": "notes.md"}) == delta
    lazy_list = ToolCallDelta.lazy(1, None, None, "[", lambda: [1])
    assert lazy_list.partial_arguments is None  # only objects are arguments


async def test_scripted_model_streams_lazy_live_arguments() -> None:
    from nbagent import AssistantMessage, ScriptedModel, ToolCall

    args = {"path": "notes.md", "content": "# Title\n" + "x" * 200}
    model = ScriptedModel([AssistantMessage(tool_calls=[ToolCall(name="write", id="c1", arguments=args)])],
                          delay=0.0001, chunk_size=8)
    deltas = [d async for d in model.stream([]) if isinstance(d, ToolCallDelta)]
    assert "".join(d.arguments_delta for d in deltas) == json.dumps(args)
    snapshots = [d.partial_arguments for d in deltas]
    assert snapshots[0] is None and snapshots[-1] == args
    assert all(s is None or consistent(s, args) for s in snapshots)
    assert any(s == {"path": "notes.md"} for s in snapshots)  # "writing notes.md" before the call is complete
