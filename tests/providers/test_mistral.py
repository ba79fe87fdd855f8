"""Mistral: recorded streams, its stream quirks, its 9-character call ids, and a two-turn Agent run."""

from __future__ import annotations

import json
import re

import pytest

from nbagent import Agent, AssistantMessage, ImageBlock, ToolCall, UserMessage, tool
from nbagent.errors import AuthenticationError, StreamError
from nbagent.events import ReasoningDelta, ToolCallDelta
from nbagent.messages import TextBlock, ToolResultMessage, Usage
from nbagent.providers import load_model
from nbagent.providers.mistral import MistralModel

from .fakeserver import FakeServer, Reply, chunks_to_sse, load_stream

KEY = "mistral-test-KEY-abcdefghijkl"
NINE = re.compile(r"[A-Za-z0-9]{9}")


def model(server: FakeServer, **kwargs) -> MistralModel:
    return MistralModel("mistral-small-latest", base_url=server.url + "/v1", api_key=KEY, **kwargs)


async def collect(m, messages=None, **kwargs):
    return [item async for item in m.stream(messages or [UserMessage("hi")], **kwargs)]


RECORDED = {
    "tool-call": ("", [("weather", "gSIMJiOkT", {"location": "San Francisco"})], "tool_use", Usage(124, 22), ""),
    "large-2024-tool-call": ("", [("test-tool", "yfBEybNYi", {"value": "Sparkle Day"})], "tool_use",
                             Usage(183, 133), ""),
    "incremental-tool-call": ("", [("webSearchTool", "chatcmpl-tool-9f149c74c42f265b",
                                    {"query": "current Berlin weather"})], "tool_use", Usage(171, 14, 128), ""),
    "null-id-continuation": ("Some content", [("some_tool", "fake_id_1234", {"some_argument": "some_argument_value"})],
                             "tool_use", Usage(100, 200), ""),
    "reasoning": ("2 + 2 = 4", [], "end_turn", Usage(10, 46),
                  "The user is asking for 2+2. This is basic arithmetic. 2+2=4."),
}


@pytest.mark.parametrize("name", sorted(RECORDED))
async def test_recorded_stream(fake_server: FakeServer, name: str) -> None:
    text, calls, stop, usage, reasoning = RECORDED[name]
    fake_server.add(Reply.sse(load_stream("mistral", name)))
    items = await collect(model(fake_server))
    message = items[-1]
    assert message.text == text and message.stop_reason == stop and message.usage == usage
    assert [(c.name, c.id, c.arguments) for c in message.tool_calls] == calls
    assert "".join(r.text for r in message.reasoning) == reasoning
    assert "".join(i.text for i in items if isinstance(i, ReasoningDelta)) == reasoning
    assert message.provider == "mistral"


async def test_null_id_never_replaces_or_becomes_an_id(fake_server: FakeServer) -> None:
    fake_server.add(Reply.sse(load_stream("mistral", "null-id-continuation")))
    items = await collect(model(fake_server))
    assert all(d.id in ("fake_id_1234", None) for d in items if isinstance(d, ToolCallDelta))
    assert items[-1].tool_calls[0].id == "fake_id_1234"


async def test_null_id_only_gets_a_generated_id(fake_server: FakeServer) -> None:
    chunks = [
        {"id": "x", "model": "m", "choices": [{"index": 0, "delta": {"tool_calls": [
            {"id": "null", "function": {"name": "t", "arguments": '{"a": '}, "index": 0}]}, "finish_reason": None}]},
        {"id": "x", "model": "m", "choices": [{"index": 0, "delta": {"tool_calls": [
            {"id": "null", "function": {"name": "", "arguments": "1}"}, "index": 0}]}, "finish_reason": "tool_calls"}]},
    ]
    fake_server.add(Reply.sse(chunks_to_sse(json.dumps(c) for c in chunks)))
    call = (await collect(model(fake_server)))[-1].tool_calls[0]
    assert call.id and call.id != "null" and call.arguments == {"a": 1}


async def test_camel_case_object_arguments_and_parallel_calls_without_index(fake_server: FakeServer) -> None:
    # the shapes some Mistral streams take (derived from the recorded ones): `toolCalls`, no `index`,
    # arguments already an object, two calls in one chunk, `finishReason`
    chunks = [
        {"id": "c", "model": "mistral-large-latest", "choices": [{"index": 0, "delta": {"role": "assistant",
                                                                                        "content": ""}}]},
        {"id": "c", "model": "mistral-large-latest", "choices": [{"index": 0, "delta": {"content": None, "toolCalls": [
            {"id": "AbCdEf123", "function": {"name": "weather", "arguments": {"city": "Paris"}}},
            {"id": "ZyXwVu987", "function": {"name": "weather", "arguments": '{"city": "Lyon"}'}},
        ]}, "finishReason": "tool_calls"}], "usage": {"prompt_tokens": 10, "completion_tokens": 5}},
    ]
    fake_server.add(Reply.sse(chunks_to_sse(json.dumps(c) for c in chunks)))
    message = (await collect(model(fake_server)))[-1]
    assert [(c.id, c.arguments) for c in message.tool_calls] == [("AbCdEf123", {"city": "Paris"}),
                                                                  ("ZyXwVu987", {"city": "Lyon"})]
    assert message.stop_reason == "tool_use"


async def test_empty_arguments_mean_an_empty_object(fake_server: FakeServer) -> None:
    # the recorded mistral-small stream, with the call's arguments emptied (as for a tool without parameters)
    body = load_stream("mistral", "tool-call").replace(b'"arguments":"{\\"location\\": \\"San Francisco\\"}"',
                                                       b'"arguments":""')
    assert b'"arguments":""' in body
    fake_server.add(Reply.sse(body))
    call = (await collect(model(fake_server)))[-1].tool_calls[0]
    assert call.id == "gSIMJiOkT" and call.arguments == {} and not call.incomplete


async def test_error_object_in_stream(fake_server: FakeServer) -> None:
    body = chunks_to_sse([json.dumps({"object": "error", "message": "Service tier capacity exceeded for this model.",
                                      "type": "service_tier_capacity_exceeded", "code": "3505"})], done=None)
    fake_server.add(Reply.sse(body))
    with pytest.raises(StreamError, match="capacity exceeded"):
        await model(fake_server).request([UserMessage("hi")])


async def test_missing_key(fake_server: FakeServer) -> None:
    m = load_model("mistral:mistral-large-latest", base_url=fake_server.url + "/v1")
    with pytest.raises(AuthenticationError, match="MISTRAL_API_KEY"):
        await m.request([UserMessage("hi")])


def test_environment(monkeypatch) -> None:
    assert MistralModel("m").base_url == "https://api.mistral.ai/v1"
    monkeypatch.setenv("MISTRAL_BASE_URL", "http://eu.invalid/v1")
    assert load_model("mistral:m").base_url == "http://eu.invalid/v1"


# --------------------------------------------------------------------------------------------------
# Going out
# --------------------------------------------------------------------------------------------------
def test_foreign_ids_are_rewritten_consistently_and_user_after_tool_is_bridged() -> None:
    png = ImageBlock(b"img", "image/png")
    history = [
        UserMessage("hi"),
        AssistantMessage("", tool_calls=[ToolCall(name="a.b", id="toolu_01A09q90qw90lq917835lq9", arguments={}),
                                         ToolCall(name="c", id="gSIMJiOkT", arguments={"x": 1})],
                         provider="anthropic"),
        ToolResultMessage("toolu_01A09q90qw90lq917835lq9", "a.b", [TextBlock("r1")]),
        ToolResultMessage("gSIMJiOkT", "c", [TextBlock("r2"), png], is_error=True),
        UserMessage("and now?"),
    ]
    m = MistralModel("mistral-large-latest")
    wire = m.to_wire(history)
    assistant = wire[1]
    foreign, own = (c["id"] for c in assistant["tool_calls"])
    assert NINE.fullmatch(foreign) and own == "gSIMJiOkT"
    assert assistant["content"] == "" and assistant["tool_calls"][0]["function"]["name"] == "a_b"
    assert wire[2] == {"role": "tool", "tool_call_id": foreign, "content": "r1", "name": "a.b"}
    assert wire[3]["tool_call_id"] == own and wire[3]["content"].startswith("Error: r2")
    assert wire[4] == {"role": "assistant", "content": "OK"}  # Mistral refuses user right after tool
    assert wire[5]["role"] == "user" and wire[5]["content"][1]["type"] == "image_url"
    assert wire[6] == {"role": "user", "content": "and now?"}
    assert m.to_wire(history) == wire  # the same ids in every request
    assert m.wire_tool_result(history[2])["tool_call_id"] == foreign


def test_request_body() -> None:
    @tool
    def pick(x: int) -> int:
        return x

    body = MistralModel("mistral-large-latest").request_body([UserMessage("hi")], [pick], max_tokens=50,
                                                             tool_choice="required")
    assert "stream_options" not in body and body["max_tokens"] == 50 and body["tool_choice"] == "any"
    assert body["tools"][0]["function"]["name"] == "pick"


# --------------------------------------------------------------------------------------------------
# End to end
# --------------------------------------------------------------------------------------------------
@tool(read_only=True)
def some_tool(some_argument: str) -> str:
    """A tool."""
    return f"got {some_argument}"


async def test_agent_two_turns_mistral(fake_server: FakeServer) -> None:
    final = [
        {"id": "f", "object": "chat.completion.chunk", "created": 1, "model": "devstral-latest",
         "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}]},
        {"id": "f", "object": "chat.completion.chunk", "created": 1, "model": "devstral-latest",
         "choices": [{"index": 0, "delta": {"content": "Done."}, "finish_reason": "stop"}],
         "usage": {"prompt_tokens": 120, "total_tokens": 122, "completion_tokens": 2}},
    ]
    fake_server.add(Reply.sse(load_stream("mistral", "null-id-continuation")),
                    Reply.sse(chunks_to_sse(json.dumps(c) for c in final)))
    m = model(fake_server)
    run = await Agent(m, tools=[some_tool]).run("use the tool")
    assert run.output == "Done." and run.calls[0].status == "ok"
    assert [r.json() for r in fake_server.requests] == run.requests
    second = fake_server.requests[1].json()
    assert second["model"] == "mistral-small-latest" and second["stream"] is True
    assert "stream_options" not in second
    assert second["tools"] == [{"type": "function", "function": {
        "name": "some_tool", "description": "A tool.", "parameters": some_tool.parameters}}]
    user, assistant, result = second["messages"]
    assert user == {"role": "user", "content": "use the tool"}
    wire_id = assistant["tool_calls"][0]["id"]
    assert NINE.fullmatch(wire_id)  # "fake_id_1234" is not a Mistral id: rewritten
    assert assistant == {"role": "assistant", "content": "Some content", "tool_calls": [
        {"id": wire_id, "type": "function",
         "function": {"name": "some_tool", "arguments": '{"some_argument": "some_argument_value"}'}}]}
    assert result == {"role": "tool", "tool_call_id": wire_id, "content": "got some_argument_value",
                      "name": "some_tool"}
    assert run.calls[0].id == "fake_id_1234"  # the runtime keeps the id the model gave
    assert fake_server.requests[1].headers["authorization"] == f"Bearer {KEY}"
    await m.aclose()
