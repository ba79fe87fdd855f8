"""OpenAI Chat Completions (and Ollama / compatible servers) against a real local server replaying recorded streams."""

from __future__ import annotations

import json

import pytest

from nbagent import Agent, AssistantMessage, ImageBlock, ToolCall, UserMessage, tool
from nbagent.errors import (
    AuthenticationError,
    ConfigurationError,
    OverloadedError,
    ProviderConnectionError,
    RateLimitError,
    ServerError,
    StreamError,
)
from nbagent.events import ReasoningDelta, TextDelta, ToolCallDelta
from nbagent.messages import Reasoning, TextBlock, ToolResultMessage, Usage
from nbagent.providers import load_model
from nbagent.providers._http import RetryPolicy
from nbagent.providers.openai import OllamaModel, OpenAIChatModel

from .fakeserver import FakeServer, Reply, chunks_to_sse, load_stream

KEY = "sk-openai-test-KEY-0123456789"


def model(server: FakeServer, cls=OpenAIChatModel, **kwargs) -> OpenAIChatModel:
    kwargs.setdefault("api_key", KEY)
    return cls("gpt-4o", base_url=server.url + "/v1", **kwargs)


async def collect(m, messages=None, **kwargs):
    return [item async for item in m.stream(messages or [UserMessage("hi")], **kwargs)]


def sse_chunks(name: str) -> list[str]:
    """The JSON chunks of a recorded stream (without the [DONE])."""
    out = []
    for block in load_stream("openai", name).decode().split("\n\n"):
        line = block.strip()
        if line.startswith("data: ") and line != "data: [DONE]":
            out.append(line[6:])
    return out


# --------------------------------------------------------------------------------------------------
# Recorded streams
# --------------------------------------------------------------------------------------------------
RECORDED = {
    "parallel-tool-calls": dict(
        text="",
        calls=[("GetWeatherArgs", "call_JMW1whyEaYG438VE1OIflxA2",
                {"city": "Edinburgh", "country": "GB", "units": "c"}),
               ("get_stock_price", "call_DNYTawLBoN8fj3KN6qU9N1Ou", {"ticker": "AAPL", "exchange": "NASDAQ"})],
        stop="tool_use", usage=Usage(149, 60, 0, 0), reasoning="", model="gpt-4o-2024-08-06"),
    "strict-tool-call": dict(
        text="", calls=[("get_weather", "call_CTf1nWJLqSeRgDqaCG27xZ74", {"city": "San Francisco", "state": "CA"})],
        stop="tool_use", usage=Usage(48, 19, 0, 0), reasoning="", model="gpt-4o-2024-08-06"),
    "text-and-empty-arguments": dict(
        text="PRE_TOOL", calls=[("weather", "call_NZa7xqfefoaMI2YYHowVXVlU", {})],
        stop="tool_use", usage=Usage(58, 12, 0, 0), reasoning="", model="gpt-4o-2024-08-06"),
    "final-answer": dict(text="POST_TOOL", calls=[], stop="end_turn", usage=Usage(86, 2, 0, 0), reasoning="",
                         model="gpt-4o-2024-08-06"),
    "max-tokens": dict(text='{"', calls=[], stop="max_tokens", usage=Usage(79, 1, 0, 0), reasoning="",
                       model="gpt-4o-2024-08-06"),
    "deepseek-reasoning-tool-call": dict(
        text="", calls=[("weather", "call_00_ioIn7yN9p1ZOMNpDLwd4MgAF", {"location": "San Francisco"})],
        stop="tool_use", usage=Usage(339, 83, 320, 0), reasoning="The user is asking for the weather in San",
        model="deepseek-reasoner"),
    "xai-reasoning-tool-call": dict(
        text="", calls=[("weather", "call_79382389", {"location": "San Francisco"})],
        stop="tool_use", usage=Usage(307, 26, 306, 0), reasoning="First, the user is asking about the weather",
        model="grok-3-mini"),
}


@pytest.mark.parametrize("name", sorted(RECORDED))
async def test_recorded_stream(fake_server: FakeServer, name: str) -> None:
    want = RECORDED[name]
    fake_server.add(Reply.sse(load_stream("openai", name)))
    items = await collect(model(fake_server))
    message = items[-1]
    assert isinstance(message, AssistantMessage) and all(not isinstance(i, AssistantMessage) for i in items[:-1])
    assert message.text == want["text"]
    assert [(c.name, c.id, c.arguments) for c in message.tool_calls] == want["calls"]
    assert not any(c.incomplete for c in message.tool_calls)
    assert message.stop_reason == want["stop"] and message.usage == want["usage"]
    assert message.model == want["model"] and message.provider == "openai"
    reasoning = "".join(r.text for r in message.reasoning)
    assert reasoning.startswith(want["reasoning"]) and (bool(reasoning) == bool(want["reasoning"]))
    assert all(r.provider == "openai" for r in message.reasoning)
    assert "".join(i.text for i in items if isinstance(i, TextDelta)) == message.text
    assert "".join(i.text for i in items if isinstance(i, ReasoningDelta)) == reasoning
    if reasoning:
        assert reasoning not in message.text  # reasoning never leaks into the text


async def test_deltas_carry_live_arguments(fake_server: FakeServer) -> None:
    fake_server.add(Reply.sse(load_stream("openai", "parallel-tool-calls")))
    items = await collect(model(fake_server))
    deltas = [i for i in items if isinstance(i, ToolCallDelta)]
    final = {c.id: c.arguments for c in items[-1].tool_calls}
    assert {d.index for d in deltas} == {0, 1}
    first = [d for d in deltas if d.index == 0]
    assert first[0].name == "GetWeatherArgs" and first[0].id == "call_JMW1whyEaYG438VE1OIflxA2"
    assert json.loads("".join(d.arguments_delta for d in first)) == final[first[0].id]
    seen = []
    for d in first:
        snap = d.partial_arguments
        if snap is not None:
            for key, value in snap.items():
                want = final[first[0].id][key]
                assert want == value or (isinstance(value, str) and want.startswith(value))
            seen.append(snap)
    assert seen[-1] == final[first[0].id]
    assert any(s.get("city") == "Edinb" for s in seen)  # "writing city=Edinb..." before the call completes


async def test_partial_arguments_can_be_switched_off(fake_server: FakeServer) -> None:
    fake_server.add(Reply.sse(load_stream("openai", "strict-tool-call")))
    items = await collect(model(fake_server, partial_arguments=False))
    assert all(d.partial_arguments is None for d in items if isinstance(d, ToolCallDelta))
    assert items[-1].tool_calls[0].arguments == {"city": "San Francisco", "state": "CA"}


async def test_one_byte_chunks_give_the_same_message(fake_server: FakeServer) -> None:
    place = "S\u00e3o Paulo \U0001F600".encode()
    body = load_stream("openai", "xai-reasoning-tool-call").replace(b"San Francisco", place)
    fake_server.add(Reply.sse(body), Reply.sse(body, chunk_size=1))
    m = model(fake_server)
    whole = (await collect(m))[-1]
    split = (await collect(m))[-1]
    assert split.tool_calls[0].arguments == whole.tool_calls[0].arguments == {"location": "S\u00e3o Paulo \U0001F600"}
    assert split.reasoning == whole.reasoning and split.usage == whole.usage


def cut_off_stream() -> bytes:
    """The recorded parallel-call stream, cut in the middle of the second call, then `length`."""
    chunks = sse_chunks("parallel-tool-calls")
    keep = []
    for raw in chunks:
        keep.append(raw)
        if 'AAP' in raw:  # the second call's arguments are half written
            break
    last = json.loads(keep[-1])
    last["choices"] = [{"index": 0, "delta": {}, "logprobs": None, "finish_reason": "length"}]
    return chunks_to_sse(keep + [json.dumps(last)])


async def test_call_cut_off_by_max_tokens_is_incomplete(fake_server: FakeServer) -> None:
    fake_server.add(Reply.sse(cut_off_stream()))
    message = (await collect(model(fake_server)))[-1]
    assert message.stop_reason == "max_tokens"
    assert [c.incomplete for c in message.tool_calls] == [False, True]
    assert message.tool_calls[0].arguments == {"city": "Edinburgh", "country": "GB", "units": "c"}
    assert message.tool_calls[1].arguments is None and message.tool_calls[1].raw_arguments.startswith('{"ticker')


# --------------------------------------------------------------------------------------------------
# Faults
# --------------------------------------------------------------------------------------------------
def no_wait_model(server: FakeServer, **kwargs):
    delays: list[float] = []

    async def sleep(seconds: float) -> None:
        delays.append(seconds)

    return model(server, retry=RetryPolicy(max_retries=3, sleep=sleep), **kwargs), delays


async def test_429_with_retry_after_then_529_then_success(fake_server: FakeServer) -> None:
    fake_server.add(
        Reply.json(429, {"error": {"message": "Rate limit reached for gpt-4o", "type": "requests"}},
                   headers={"retry-after": "2"}),
        Reply.json(529, {"error": {"message": "overloaded", "type": "overloaded_error"}}),
        Reply.sse(load_stream("openai", "final-answer")),
    )
    m, delays = no_wait_model(fake_server)
    message = await m.request([UserMessage("hi")])
    assert message.text == "POST_TOOL" and delays[0] == 2.0 and len(delays) == 2
    assert len(fake_server.requests) == 3


async def test_rate_limit_exhausted(fake_server: FakeServer) -> None:
    fake_server.add(*[Reply.json(429, {"error": {"message": "slow down"}}, headers={"retry-after": "1"})] * 4)
    m, delays = no_wait_model(fake_server)
    with pytest.raises(RateLimitError, match="slow down") as info:
        await m.request([UserMessage("hi")])
    assert info.value.status == 429 and info.value.retry_after == 1.0 and delays == [1.0, 1.0, 1.0]


async def test_overloaded_is_typed(fake_server: FakeServer) -> None:
    fake_server.add(*[Reply.json(529, {"error": {"message": "Overloaded"}})] * 4)
    m, _ = no_wait_model(fake_server)
    with pytest.raises(OverloadedError):
        await m.request([UserMessage("hi")])


async def test_connection_dropped_mid_stream(fake_server: FakeServer) -> None:
    body = load_stream("openai", "parallel-tool-calls")
    fake_server.add(Reply.sse(body, drop_after=len(body) // 2), Reply.sse(body))
    m, delays = no_wait_model(fake_server)
    seen = []
    with pytest.raises(ProviderConnectionError, match="dropped after"):
        async for item in m.stream([UserMessage("hi")]):
            seen.append(item)
    assert seen and not any(isinstance(i, AssistantMessage) for i in seen)  # never a silent partial message
    assert len(fake_server.requests) == 1 and delays == []


async def test_body_cut_before_the_end(fake_server: FakeServer) -> None:
    chunks = sse_chunks("parallel-tool-calls")
    fake_server.add(Reply.sse(chunks_to_sse(chunks[:10], done=None)))
    with pytest.raises(StreamError, match="without finishing"):
        await model(fake_server).request([UserMessage("hi")])


async def test_body_cut_inside_an_event(fake_server: FakeServer) -> None:
    body = load_stream("openai", "parallel-tool-calls")
    fake_server.add(Reply.sse(body[: body.index(b"Edinb") + 3]))
    with pytest.raises(StreamError, match="not JSON"):
        await model(fake_server).request([UserMessage("hi")])


async def test_malformed_event(fake_server: FakeServer) -> None:
    fake_server.add(Reply.sse(b'data: {"choices": [}\n\ndata: [DONE]\n\n'))
    with pytest.raises(StreamError, match="an event is not JSON"):
        await model(fake_server).request([UserMessage("hi")])


SERVER_ERROR = json.dumps({"error": {"message": "The server had an error while processing your request.",
                                     "type": "server_error"}})


async def test_error_event_in_stream_before_any_content_is_retried(fake_server: FakeServer, no_wait) -> None:
    policy, sleeps = no_wait
    first = sse_chunks("final-answer")[0]
    fake_server.add(Reply.sse(chunks_to_sse([first, SERVER_ERROR], done=None)),
                    Reply.sse(load_stream("openai", "final-answer")))
    message = await model(fake_server, retry=policy).request([UserMessage("hi")])
    assert message.text and len(fake_server.requests) == 2 and len(sleeps.delays) == 1


async def test_error_event_in_stream_after_content_is_typed_and_raised(fake_server: FakeServer, no_wait) -> None:
    policy, _ = no_wait
    shown = sse_chunks("final-answer")[:2]  # the role, then the text "POST"
    fake_server.add(Reply.sse(chunks_to_sse([*shown, SERVER_ERROR], done=None)))
    with pytest.raises(ServerError, match="stream error \\(server_error\\): The server had an error") as info:
        await model(fake_server, retry=policy).request([UserMessage("hi")])
    assert info.value.status is None and len(fake_server.requests) == 1


async def test_missing_key_at_request_time_only(fake_server: FakeServer) -> None:
    m = load_model("openai:gpt-4.1", base_url=fake_server.url + "/v1")
    assert m.to_wire([UserMessage("hi")]) == [{"role": "user", "content": "hi"}]
    with pytest.raises(AuthenticationError, match="OPENAI_API_KEY"):
        await m.request([UserMessage("hi")])
    assert fake_server.requests == []


async def test_refused_key(fake_server: FakeServer) -> None:
    fake_server.add(Reply.json(401, {"error": {"message": f"Incorrect API key provided: {KEY}.",
                                               "type": "invalid_request_error", "code": "invalid_api_key"}}))
    bodies = []
    with pytest.raises(AuthenticationError) as info:
        await model(fake_server).request([UserMessage("hi")], on_request=bodies.append)
    assert "OPENAI_API_KEY" in str(info.value) and KEY not in str(info.value) and KEY not in json.dumps(info.value.body)
    assert KEY not in json.dumps(bodies) and KEY not in repr(model(fake_server))
    assert fake_server.requests[0].headers["authorization"] == f"Bearer {KEY}"


def test_environment(monkeypatch) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", "http://proxy.invalid/v1")
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    m = load_model("openai:gpt-4.1")
    assert isinstance(m, OpenAIChatModel) and m.base_url == "http://proxy.invalid/v1"
    assert m.api_key().value == KEY and KEY not in repr(m)
    assert load_model("openai:gpt-4.1", base_url="http://other.invalid/v1").base_url == "http://other.invalid/v1"


# --------------------------------------------------------------------------------------------------
# The request
# --------------------------------------------------------------------------------------------------
@tool
def read_file(path: str) -> str:
    """Read a file."""
    return path


@tool(name="files.write", strict=True)
def write_file(path: str, content: str) -> str:
    """Write a file."""
    return "ok"


def test_request_body_tools_settings_and_name_projection() -> None:
    m = OpenAIChatModel("gpt-4.1", api_key=KEY, temperature=0)
    body = m.request_body([UserMessage("hi")], [read_file, write_file], instructions="Be brief.",
                          max_tokens=100, tool_choice="files.write", parallel_tool_calls=False)
    assert body["model"] == "gpt-4.1" and body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert body["messages"] == [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}]
    assert body["tools"] == [
        {"type": "function", "function": {"name": "read_file", "description": "Read a file.",
                                          "parameters": read_file.parameters}},
        {"type": "function", "function": {"name": "files_write", "description": "Write a file.",
                                          "parameters": write_file.parameters, "strict": True}},
    ]
    assert body["max_completion_tokens"] == 100 and "max_tokens" not in body and body["temperature"] == 0
    assert body["tool_choice"] == {"type": "function", "function": {"name": "files_write"}}
    assert body["parallel_tool_calls"] is False
    body = m.request_body([UserMessage("hi")], extra_body={"service_tier": "flex"}, temperature=None)
    assert "tools" not in body and body["service_tier"] == "flex" and "temperature" not in body
    with pytest.raises(ConfigurationError):
        m.request_body([UserMessage("hi")], stream=False)


async def test_projected_names_are_mapped_back(fake_server: FakeServer) -> None:
    chunks = [c.replace('"GetWeatherArgs"', '"files_write"') for c in sse_chunks("parallel-tool-calls")]
    fake_server.add(Reply.sse(chunks_to_sse(chunks)))
    items = await collect(model(fake_server), tools=[write_file])
    assert items[-1].tool_calls[0].name == "files.write"
    assert next(i for i in items if isinstance(i, ToolCallDelta)).name == "files.write"


def test_messages_to_wire() -> None:
    png = ImageBlock(b"\x89PNG fake", "image/png")
    history = [
        UserMessage([TextBlock("look"), png]),
        AssistantMessage(
            "Let me check.",
            tool_calls=[ToolCall(name="files.write", id="c1", arguments={"path": "a"}),
                        ToolCall(name="shot", id="c2", raw_arguments='{"x": 1}')],
            reasoning=[Reasoning("thinking...", signature="sig", provider="anthropic")],
            provider="anthropic",
        ),
        ToolResultMessage("c1", "files.write", [TextBlock("permission denied")], is_error=True),
        ToolResultMessage("c2", "shot", [TextBlock("here"), png]),
        UserMessage("thanks"),
        AssistantMessage("", tool_calls=[ToolCall(name="read_file", id="c3")], provider="openai"),
        ToolResultMessage("c3", "read_file", [TextBlock("Error: already marked")], is_error=True),
    ]
    wire = OpenAIChatModel("gpt-4.1").to_wire(history)
    data_url = f"data:image/png;base64,{png.base64}"
    assert wire == [
        {"role": "user", "content": [{"type": "text", "text": "look"},
                                     {"type": "image_url", "image_url": {"url": data_url}}]},
        {"role": "assistant", "content": "Let me check.", "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "files_write", "arguments": '{"path": "a"}'}},
            {"id": "c2", "type": "function", "function": {"name": "shot", "arguments": '{"x": 1}'}},
        ]},
        {"role": "tool", "tool_call_id": "c1", "content": "Error: permission denied"},
        {"role": "tool", "tool_call_id": "c2", "content": "here\n[image 1 of 1: sent in the next message]"},
        {"role": "user", "content": [{"type": "text", "text": "Images returned by the shot call c2:"},
                                     {"type": "image_url", "image_url": {"url": data_url}}]},
        {"role": "user", "content": "thanks"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c3", "type": "function", "function": {"name": "read_file", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c3", "content": "Error: already marked"},
    ]


def test_wire_tool_result() -> None:
    m = OpenAIChatModel("gpt-4.1")
    assert m.wire_tool_result(ToolResultMessage("c1", "t", [TextBlock("42")])) == {
        "role": "tool", "tool_call_id": "c1", "content": "42"}
    with_image = m.wire_tool_result(ToolResultMessage("c1", "t", [ImageBlock(b"x", "image/jpeg")]))
    assert with_image[0]["content"] == "[image 1 of 1: sent in the next message]" and with_image[1]["role"] == "user"


def test_own_reasoning_can_be_sent_back_to_compatible_servers() -> None:
    msg = AssistantMessage("", tool_calls=[ToolCall(name="t", id="c1")],
                           reasoning=[Reasoning("because", provider="openai")], provider="openai")
    plain = OpenAIChatModel("deepseek-reasoner").to_wire([msg])[0]
    assert "reasoning_content" not in plain
    sent = OpenAIChatModel("deepseek-reasoner", reasoning_field="reasoning_content").to_wire([msg])[0]
    assert sent["reasoning_content"] == "because"


# --------------------------------------------------------------------------------------------------
# End to end: an Agent run through two turns
# --------------------------------------------------------------------------------------------------
@tool(read_only=True)
def weather(location: str = "Paris") -> str:
    """The weather somewhere."""
    return f"Sunny in {location}, 21 C"


async def two_turns(server: FakeServer, m) -> None:
    server.add(Reply.sse(load_stream("openai", "text-and-empty-arguments")),
               Reply.sse(load_stream("openai", "final-answer")))
    agent = Agent(m, tools=[weather], instructions="You report the weather.", model_settings={"temperature": 0})
    run = await agent.run("What is the weather?")
    assert run.output == "POST_TOOL" and run.status == "done"
    assert [c.name for c in run.calls] == ["weather"] and run.calls[0].status == "ok"
    assert run.usage.input_tokens == 58 + 86
    assert [r.json() for r in server.requests] == run.requests  # on_request saw exactly what was sent

    first, second = (r.json() for r in server.requests)
    assert first["messages"] == [{"role": "system", "content": "You report the weather."},
                                 {"role": "user", "content": "What is the weather?"}]
    assert second["model"] == m.name and second["stream"] is True and second["temperature"] == 0
    assert second["tools"] == first["tools"] == [
        {"type": "function", "function": {"name": "weather", "description": "The weather somewhere.",
                                          "parameters": weather.parameters}}]
    system, user, assistant, result = second["messages"]
    assert system == first["messages"][0] and user == first["messages"][1]
    assert assistant == {"role": "assistant", "content": "PRE_TOOL", "tool_calls": [
        {"id": "call_NZa7xqfefoaMI2YYHowVXVlU", "type": "function",
         "function": {"name": "weather", "arguments": "{}"}}]}
    assert result == {"role": "tool", "tool_call_id": "call_NZa7xqfefoaMI2YYHowVXVlU",
                      "content": "Sunny in Paris, 21 C"}
    assert run.calls[0].wire == result
    await m.aclose()


async def test_agent_two_turns_openai(fake_server: FakeServer) -> None:
    m = model(fake_server)
    await two_turns(fake_server, m)
    second = fake_server.requests[1].json()
    assert second["stream_options"] == {"include_usage": True}
    assert fake_server.requests[1].path == "/v1/chat/completions"
    assert fake_server.requests[1].headers["authorization"] == f"Bearer {KEY}"


async def test_agent_two_turns_ollama(fake_server: FakeServer, monkeypatch) -> None:
    monkeypatch.setenv("OLLAMA_BASE_URL", fake_server.url)  # no /v1: it is added
    m = load_model("ollama:llama3.2")
    assert isinstance(m, OllamaModel) and m.base_url == fake_server.url + "/v1"
    await two_turns(fake_server, m)
    assert "authorization" not in fake_server.requests[0].headers  # no key needed
    assert fake_server.requests[0].path == "/v1/chat/completions"


def test_ollama_defaults() -> None:
    m = OllamaModel("qwen3")
    assert m.base_url == "http://localhost:11434/v1" and m.spec == "ollama:qwen3"
    assert m.request_body([UserMessage("hi")], max_tokens=5)["max_tokens"] == 5
    assert OllamaModel("q", base_url="http://gpu:8000/v1", api_key="vllm-key")._request_headers()["authorization"] \
        == "Bearer vllm-key"
