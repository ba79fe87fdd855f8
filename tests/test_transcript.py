"""Transcript validity and the JSONL store."""

from __future__ import annotations

import pytest

from nbagent import AssistantMessage, ImageBlock, TextBlock, ToolCall, ToolResultMessage, Usage, UserMessage
from nbagent.messages import Reasoning
from nbagent.transcript import TranscriptError, check_transcript, read_jsonl, write_jsonl

A = ToolCall(name="add", arguments={"a": 1}, id="a")
B = ToolCall(name="add", arguments={"a": 2}, id="b")


def res(call_id: str) -> ToolResultMessage:
    return ToolResultMessage(call_id, "add", [TextBlock("1")])


def test_valid_transcripts():
    assert check_transcript([]) == []
    assert check_transcript([UserMessage("hi"), AssistantMessage("hello")]) == []
    assert check_transcript([UserMessage("x"), AssistantMessage(tool_calls=[A, B]), res("b"), res("a"),
                             AssistantMessage("done")]) == []


@pytest.mark.parametrize("messages, problem", [
    ([AssistantMessage(tool_calls=[A])], "have no result"),
    ([AssistantMessage(tool_calls=[A]), res("a"), res("a")], "answered twice"),
    ([res("a")], "which no earlier message made"),
    ([AssistantMessage(tool_calls=[A, B]), res("a"), UserMessage("x"), res("b")], "comes before the results"),
    ([AssistantMessage(tool_calls=[A, A])], "used twice"),
    (["not a message"], "not a message"),
])
def test_invalid_transcripts(messages, problem):
    problems = check_transcript(messages)
    assert any(problem in p for p in problems), problems
    with pytest.raises(TranscriptError):
        check_transcript(messages, raise_=True)


def test_jsonl_round_trip(tmp_path):
    png = b"\x89PNG\r\n\x1a\n" + bytes(range(40))
    messages = [
        UserMessage([TextBlock("look"), ImageBlock(png)]),
        AssistantMessage(text="ok", tool_calls=[ToolCall(name="add", arguments={"a": 1}, id="c1",
                                                         provider_data={"thoughtSignature": "sig"})],
                         reasoning=[Reasoning(text="hmm", signature="s", provider="anthropic")],
                         usage=Usage(1, 2, 3, 4), stop_reason="tool_use", model="m", provider="p"),
        ToolResultMessage("c1", "add", [TextBlock("2"), ImageBlock(png)], is_error=True),
        AssistantMessage(text="done"),
    ]
    path = write_jsonl(messages, tmp_path / "t.jsonl")
    loaded = read_jsonl(path)
    assert loaded == messages
