"""Helpers shared by the provider adapters: names, ids, portability, the tool-call accumulator, usage."""

from __future__ import annotations

import json
import re

from nbagent.messages import AssistantMessage, Reasoning, ToolCall, ToolResultMessage, Usage, UserMessage
from nbagent.providers._common import (
    CallIds,
    NameRule,
    ToolCallAccumulator,
    ToolNames,
    arguments_json,
    arguments_object,
    portable_messages,
    sum_usage,
    usage_from,
)

OPENAI_RULE = NameRule(allowed="A-Za-z0-9_-", max_length=64)


def test_valid_names_are_kept_and_others_projected_reversibly() -> None:
    long = "x" * 80
    names = ToolNames(["add", "files.read", "files_read", "shell", long, "sp ace"], OPENAI_RULE)
    assert names.wire("add") == "add" and names.wire("files_read") == "files_read"
    projected = {n: names.wire(n) for n in ["files.read", long, "sp ace"]}
    for internal, wire in projected.items():
        assert OPENAI_RULE.accepts(wire), wire
        assert names.internal(wire) == internal
    assert projected["files.read"] != "files_read"  # taken by a real tool: a hashed name instead
    assert len(projected[long]) == 64
    assert names.wire("sp ace") == "sp_ace"
    assert names.internal("unknown_tool") == "unknown_tool"
    assert set(names.renamed) == {"files.read", long, "sp ace"}


def test_projection_is_stable_across_requests() -> None:
    a = ToolNames(["a.b", "c"], OPENAI_RULE)
    b = ToolNames(["c", "a.b"], OPENAI_RULE)
    assert a.wire("a.b") == b.wire("a.b") == "a_b"


def test_reserved_names_and_first_character() -> None:
    rule = NameRule(allowed="A-Za-z0-9_.:-", first="A-Za-z_", max_length=64, reserved=frozenset({"web_search"}))
    names = ToolNames(["web_search", "1st", "ok.name"], rule)
    assert names.wire("ok.name") == "ok.name"
    assert names.wire("web_search") != "web_search" and names.internal(names.wire("web_search")) == "web_search"
    assert names.wire("1st").startswith("t_") and names.internal(names.wire("1st")) == "1st"


def test_history_names_join_the_map() -> None:
    names = ToolNames(["current"], OPENAI_RULE)
    old = names.wire("removed.tool")
    assert names.internal(old) == "removed.tool"


def test_call_ids_mistral_rule() -> None:
    rule = re.compile(r"[A-Za-z0-9]{9}")
    ids = CallIds(rule, length=9)
    assert ids.wire("abcDEF123") == "abcDEF123"
    foreign = ["call_1234567890abcdef", "toolu_01A09q90qw90lq917835lq9", "call_a1b2c3000001", "x"]
    wires = [ids.wire(f) for f in foreign]
    assert all(rule.fullmatch(w) for w in wires) and len(set(wires)) == len(wires)
    assert [ids.internal(w) for w in wires] == foreign
    assert CallIds(rule, length=9).wire(foreign[0]) == wires[0]  # deterministic across requests
    assert ids.wire(foreign[0]) == wires[0]


def test_portable_messages_drop_foreign_reasoning_and_data() -> None:
    mine = AssistantMessage("a", reasoning=[Reasoning("r1", signature="s", provider="anthropic")],
                            provider="anthropic", provider_data={"id": "m1"})
    theirs = AssistantMessage(
        "b", tool_calls=[ToolCall(name="t", id="c1", provider_data={"thoughtSignature": "x"})],
        reasoning=[Reasoning("r2", provider="google")], provider="google", provider_data={"k": 1})
    user = UserMessage("hi")
    result = ToolResultMessage("c1", "t", [])
    out = portable_messages([user, mine, theirs, result], "anthropic")
    assert out[0] is user and out[1] is mine and out[3] is result
    assert out[2].reasoning == [] and out[2].provider_data == {} and out[2].tool_calls[0].provider_data == {}
    assert out[2].tool_calls[0].id == "c1" and out[2].text == "b"
    assert theirs.reasoning and theirs.tool_calls[0].provider_data  # the original is untouched


def test_arguments_helpers() -> None:
    assert arguments_json(ToolCall(name="t", raw_arguments='{"a":1}')) == '{"a":1}'
    assert arguments_json(ToolCall(name="t", raw_arguments="")) == "{}"
    assert json.loads(arguments_json(ToolCall(name="t", arguments={"a": "é"}))) == {"a": "é"}
    assert arguments_object(ToolCall(name="t", raw_arguments="{'a': 1,}")) == {"a": 1}
    assert arguments_object(ToolCall(name="t", raw_arguments="not json at all [")) == {}


def test_accumulator_streams_deltas_and_finishes_calls() -> None:
    names = ToolNames(["files.write"], OPENAI_RULE)
    acc = ToolCallAccumulator(names=names)
    d0 = acc.add(0, id="call_a", name=names.wire("files.write"), arguments="")
    assert (d0.index, d0.id, d0.name, d0.arguments_delta) == (0, "call_a", "files.write", "")
    d1 = acc.add(0, arguments='{"path": "notes.md", "content": "# Ti')
    d2 = acc.add(1, id="call_b", name="other", arguments="")
    d3 = acc.add(0, arguments='tle"}')
    assert acc.add(0, arguments="") is None
    assert d1.partial_arguments == {"path": "notes.md", "content": "# Ti"}
    assert d3.partial_arguments == {"path": "notes.md", "content": "# Title"}
    assert d2.index == 1 and d2.partial_arguments is None
    calls = acc.finish()
    assert [c.name for c in calls] == ["files.write", "other"]
    assert calls[0].arguments == {"path": "notes.md", "content": "# Title"} and calls[0].id == "call_a"
    assert calls[1].arguments == {} and calls[1].raw_arguments is None  # empty arguments mean {}
    assert not any(c.incomplete for c in calls)


def test_accumulator_cut_off_and_malformed() -> None:
    acc = ToolCallAccumulator()
    acc.add("a", id="1", name="t", arguments='{"x": 1}')
    acc.add("b", id="2", name="t", arguments='{"x": [1, 2')
    calls = acc.finish(cut_off=True)
    assert [c.incomplete for c in calls] == [False, True]
    assert calls[1].arguments is None and calls[1].raw_arguments == '{"x": [1, 2'
    acc = ToolCallAccumulator()
    acc.add(0, name="t", arguments="{'x': 1}")
    call = acc.finish()[0]
    assert call.arguments is None and call.raw_arguments == "{'x': 1}" and not call.incomplete
    assert call.id  # a generated id when the provider sent none


def test_accumulator_objects_and_no_partial() -> None:
    acc = ToolCallAccumulator(partial=False)
    delta = acc.add(0, id="1", name="t", arguments={"city": "Paris"})
    assert delta.partial_arguments is None and json.loads(delta.arguments_delta) == {"city": "Paris"}
    assert acc.finish()[0].arguments == {"city": "Paris"}


def test_usage() -> None:
    assert sum_usage([None, Usage(1, 2), Usage(3, 4, 1, 0)]) == Usage(4, 6, 1, 0)
    assert sum_usage([]) is None
    assert usage_from(10, None, "x", 2.0) == Usage(10, 0, 0, 2)


def test_live_arguments_are_parsed_only_when_read_and_each_delta_keeps_its_moment() -> None:
    acc = ToolCallAccumulator(partial=True)
    acc.add(0, id="c", name="write")
    deltas = [acc.add_arguments(0, piece) for piece in ['{"path": "a', '.md", "body": "x', 'yz"}']]
    call = acc._calls[0]
    assert call.parser is None  # nobody read a snapshot: nothing was parsed
    assert deltas[2].partial_arguments == {"path": "a.md", "body": "xyz"}
    assert deltas[0].partial_arguments == {"path": "a"}  # an earlier delta, read later, as it stood then
    assert deltas[1].partial_arguments == {"path": "a.md", "body": "x"}
    assert len(call.marks) == 3  # each fragment parsed once
    assert acc.finish()[0].arguments == {"path": "a.md", "body": "xyz"}
