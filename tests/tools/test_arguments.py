"""The repair ladder: each step, what it records, and a fuzz test that nothing escapes."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nbagent import tool
from nbagent.tools import ArgumentsError
from nbagent.tools.arguments import parse_arguments
from tests.helpers import examples


@pytest.mark.parametrize(
    "raw, expected, repairs",
    [
        ('{"a": 1}', {"a": 1}, []),
        ("", {}, []),
        ("   ", {}, []),
        (None, {}, []),
        ({"a": 1}, {"a": 1}, []),
        ('```json\n{"a": 1}\n```', {"a": 1}, ["stripped a Markdown code fence"]),
        ('```\n{"a": 1}\n```', {"a": 1}, ["stripped a Markdown code fence"]),
        ('Here you go: {"a": 1} hope that helps', {"a": 1}, ["took the JSON object out of surrounding text"]),
        ('{"a": 1, "b": [1, 2,],}', {"a": 1, "b": [1, 2]}, ["removed trailing commas"]),
        ("{'a': 'it''s', 'b': True, 'c': None}", {"a": "its", "b": True, "c": None},
         ["read single quotes and Python literals as JSON"]),
        ("{'a': \"say \\\"hi\\\"\", 'b': true}", {"a": 'say "hi"', "b": True},
         ["read single quotes and Python literals as JSON"]),
        ('{"a": 1}}', {"a": 1}, ["removed closing braces that closed nothing"]),
        ('{"a": {"b": 1}}]', {"a": {"b": 1}}, ["took the JSON object out of surrounding text"]),
        ('[{"a": 1}]]', {"a": 1}, ["took the JSON object out of surrounding text"]),
        ('[1, 2]', None, None),
        ('{"path": "notes.md", "content": "hel', {"path": "notes.md", "content": "hel"}, ["closed truncated JSON"]),
        ('{"a": [1, 2', {"a": [1, 2]}, ["closed truncated JSON"]),
        ('{"a": 1, "b"', {"a": 1}, ["closed truncated JSON"]),
        ('{"a": 1, "b":', {"a": 1}, ["closed truncated JSON"]),
        ('{"a": 1, "b": tru', {"a": 1}, ["closed truncated JSON"]),
        ('{"a": {"b": 1}', {"a": {"b": 1}}, ["closed truncated JSON"]),
        ('"{\\"a\\": 1}"', {"a": 1}, ["decoded arguments that were JSON-encoded twice"]),
        ('```json\n{"a": 1,}\n```', {"a": 1}, ["stripped a Markdown code fence", "removed trailing commas"]),
    ],
)
def test_ladder_steps(raw, expected, repairs):
    if expected is None:  # not an object even after repair: validation refuses it
        value, _ = parse_arguments(raw)
        assert not isinstance(value, dict)
        return
    value, applied = parse_arguments(raw)
    assert value == expected
    assert applied == repairs


@pytest.mark.parametrize("raw", ["not json at all", "{{{{", "[1, 2", "}", "```\n```", "{'a': }"])
def test_unrepairable_input_says_what_is_wrong(raw):
    try:
        value, _ = parse_arguments(raw)
    except ArgumentsError as exc:
        text = str(exc)
        assert "not valid JSON" in text and "Received:" in text
    else:  # some are "repaired" into a non-object, which validation then refuses
        assert not isinstance(value, dict) or value == {}


def test_large_valid_arguments_parse_directly():
    big = {"content": "x" * 3_000_000}
    value, repairs = parse_arguments(json.dumps(big))
    assert value == big and repairs == []


def test_large_broken_arguments_are_not_repaired():
    with pytest.raises(ArgumentsError, match="too long to repair"):
        parse_arguments('{"content": "' + "x" * 2_100_000)


@tool
def write(path: str, content: str = "", mode: int = 0) -> str:
    return path


def _outcome(raw: str) -> str:
    """Parse + validate like the runtime: either validated arguments or a clear error, nothing else."""
    try:
        value, _ = parse_arguments(raw)
        write.validate(value)
        return "ok"
    except ArgumentsError as exc:
        assert str(exc).strip(), "an error must say what is wrong"
        return "error"


_json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=12,
)


@settings(max_examples=examples(1500), suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(st.text(max_size=200))
def test_fuzz_arbitrary_text_never_escapes(raw):
    assert _outcome(raw) in ("ok", "error")


@settings(max_examples=examples(1500), suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(
    _json_values,
    st.integers(min_value=0, max_value=400),
    st.sampled_from(["cut", "fence", "comma", "quote", "brace", "prose", "none"]),
)
def test_fuzz_damaged_json_never_escapes(value, cut, damage):
    text = json.dumps({"path": "a.txt", "content": json.dumps(value), "mode": 1})
    if damage == "cut":
        text = text[: cut % (len(text) + 1)]
    elif damage == "fence":
        text = f"```json\n{text}\n```"
    elif damage == "comma":
        text = text[:-1] + ",}"
    elif damage == "quote":
        text = text.replace('"', "'")
    elif damage == "brace":
        text = text + "}" * (1 + cut % 3)
    elif damage == "prose":
        text = f"Sure! {text} Done."
    outcome = _outcome(text)
    if damage in ("fence", "comma", "brace", "prose", "none"):
        assert outcome == "ok", text


@settings(max_examples=examples(500), deadline=None)
@given(_json_values.filter(lambda v: isinstance(v, dict)))
def test_valid_json_objects_are_never_changed(value):
    parsed, repairs = parse_arguments(json.dumps(value))
    assert parsed == value and repairs == []
