"""Small helpers for tests."""

from __future__ import annotations

from nbagent import AssistantMessage, ToolCall
from nbagent.transcript import check_transcript


def calls(*items: ToolCall, text: str = "") -> AssistantMessage:
    """An assistant message making these tool calls."""
    return AssistantMessage(text=text, tool_calls=list(items))


def call(tool_name: str, /, **arguments) -> ToolCall:
    return ToolCall(name=tool_name, arguments=arguments)


def raw(name: str, raw_arguments: str) -> ToolCall:
    return ToolCall(name=name, raw_arguments=raw_arguments)


def assert_valid(run) -> None:
    problems = check_transcript(run.messages)
    assert problems == [], problems
