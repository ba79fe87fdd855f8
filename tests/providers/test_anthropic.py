"""Anthropic Messages: request mapping, recorded streams replayed over real HTTP, faults, a two-turn run."""

from __future__ import annotations

import json
import re

import pytest

from nbagent import Agent
from nbagent.errors import (
    AuthenticationError,
    OverloadedError,
    ProviderConnectionError,
    RateLimitError,
    StreamError,
)
from nbagent.events import ReasoningDelta, TextDelta, ToolCallDelta
from nbagent.messages import (
    AssistantMessage,
    ImageBlock,
    Reasoning,
    TextBlock,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from nbagent.providers import load_model
from nbagent.providers.anthropic import AnthropicModel, _StreamState
from nbagent.providers.scripted import ScriptedModel

from .fakeserver import FakeServer, Reply
from .replay import (
    PNG,
    collect,
    cut_before,
    fixture_json,
    make_tool,
    recorded,
    recorded_events,
    replace_event,
    same_in_one_byte_chunks,
    stream_fails,
)

KEY = "sk-ant-test-0123456789SECRETKEY"


def model_for(server: FakeServer, policy=None, **options) -> AnthropicModel:
    if policy is not None:
        options["retry"] = policy
    return AnthropicModel("claude-sonnet-4-5", base_url=server.url, api_key=KEY, **options)


def feed(state: _StreamState, events) -> list:
    """The deltas the accumulator returns for these events (at most one per event)."""
    out = [state.process(e) for e in events]
    assert all(len(d) <= 1 for d in out)
    return [d for ds in out for d in ds]


def replay(provider: str, name: str) -> tuple[list, AssistantMessage]:
    state = _StreamState()
    deltas = feed(state, recorded_events(provider, name))
    return deltas, state.result()


# --------------------------------------------------------------------------------------------------
# Going out
# --------------------------------------------------------------------------------------------------
def test_tools_carry_input_schema_and_cache_control_on_the_last() -> None:
    a, b = make_tool("alpha"), make_tool("files.read", strict=True)
    body, _ = AnthropicModel("claude-sonnet-4-5").build_request([UserMessage("hi")], [a, b], instructions="Be brief.")
    assert body["tools"] == [
        {"name": "alpha", "description": "A tool that requires a password to retrieve a secret.",
         "input_schema": a.parameters},
        {"name": "files_read", "description": "A tool that requires a password to retrieve a secret.",
         "input_schema": b.parameters, "strict": True, "cache_control": {"type": "ephemeral"}},
    ]
    assert body["system"] == [{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}]
    assert body["model"] == "claude-sonnet-4-5" and body["max_tokens"] == 8192 and body["stream"] is True
    assert list(body)[:3] == ["model", "max_tokens", "system"]


def test_without_cache_there_are_no_breakpoints() -> None:
    body, _ = AnthropicModel("m", cache=False).build_request([UserMessage("hi")], [make_tool("a")], instructions="S")
    assert "cache_control" not in json.dumps(body)
    assert body["system"] == "S" and body["messages"] == [{"role": "user", "content": "hi"}]


def test_settings_thinking_and_max_tokens() -> None:
    model = AnthropicModel("m", temperature=0.2, thinking=10000)
    body, _ = model.build_request([UserMessage("hi")], [], stop="END", top_k=5)
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 10000}
    assert body["max_tokens"] > 10000  # raised above the budget, as the API requires
    assert body["temperature"] == 0.2 and body["top_k"] == 5 and body["stop_sequences"] == ["END"]
    body, _ = model.build_request([UserMessage("hi")], [], max_tokens=20000, thinking=None)
    assert body["max_tokens"] == 20000 and "thinking" not in body


def test_tool_choice_and_parallel_switch() -> None:
    t = make_tool("files.read")
    body, _ = AnthropicModel("m").build_request([UserMessage("x")], [t], tool_choice="files.read",
                                                parallel_tool_calls=False)
    assert body["tool_choice"] == {"type": "tool", "name": "files_read", "disable_parallel_tool_use": True}
    body, _ = AnthropicModel("m").build_request([UserMessage("x")], [t], tool_choice="required")
    assert body["tool_choice"] == {"type": "any"}


def conversation() -> list:
    return [
        UserMessage("Look at these."),
        AssistantMessage(
            text="Checking both.",
            tool_calls=[ToolCall(name="files.read", arguments={"password": "a"}, id="toolu_01A"),
                        ToolCall(name="alpha", raw_arguments='{"password": "b",}', id="toolu_01B")],
            reasoning=[Reasoning(text="Two calls.", signature="sig-1", provider="anthropic"),
                       Reasoning(encrypted="REDACTED", provider="anthropic")],
            provider="anthropic",
        ),
        ToolResultMessage("toolu_01A", "files.read", [TextBlock("first")]),
        ToolResultMessage("toolu_01B", "alpha", [TextBlock("bad"), ImageBlock(PNG)], is_error=True),
        UserMessage("Now answer."),
    ]


def test_messages_thinking_text_calls_and_all_results_in_one_user_message() -> None:
    model = AnthropicModel("m", cache=False)
    wire = model.to_wire(conversation())
    assert wire == [
        {"role": "user", "content": "Look at these."},
        {"role": "assistant", "content": [
            {"type": "thinking", "thinking": "Two calls.", "signature": "sig-1"},
            {"type": "redacted_thinking", "data": "REDACTED"},
            {"type": "text", "text": "Checking both."},
            {"type": "tool_use", "id": "toolu_01A", "name": "files_read", "input": {"password": "a"}},
            {"type": "tool_use", "id": "toolu_01B", "name": "alpha", "input": {"password": "b"}},
        ]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_01A", "content": "first", "is_error": False},
            {"type": "tool_result", "tool_use_id": "toolu_01B", "is_error": True, "content": [
                {"type": "text", "text": "bad"},
                {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                             "data": ImageBlock(PNG).base64}},
            ]},
            {"type": "text", "text": "Now answer."},
        ]},
    ]
    # wire_tool_result is exactly the block the request carries
    assert model.wire_tool_result(conversation()[3]) == wire[2]["content"][1]


def test_request_messages_equal_to_wire_and_cache_marks_the_last_user_block() -> None:
    model = AnthropicModel("m")
    body, _ = model.build_request(conversation(), [make_tool("alpha")])
    assert body["messages"] == model.to_wire(conversation())
    assert body["messages"][-1]["content"][-1] == {"type": "text", "text": "Now answer.",
                                                   "cache_control": {"type": "ephemeral"}}
    # the last tool, the last user block, and the user block before (where the previous request wrote)
    assert json.dumps(body).count('"cache_control"') == 3


def test_foreign_transcript_is_made_valid_for_anthropic() -> None:
    """A conversation begun elsewhere: foreign reasoning dropped, ids and names made acceptable."""
    foreign = [
        UserMessage("hi"),
        AssistantMessage(
            text="",
            tool_calls=[ToolCall(name="ns.tool", arguments={"password": "x"}, id="call_abc|fc_123"),
                        ToolCall(name="alpha", arguments={}, id="x" * 80)],
            reasoning=[Reasoning(encrypted="gAAAA", id="rs_1", provider="openai-responses")],
            provider="openai-responses", provider_data={"id": "resp_1"},
        ),
        ToolResultMessage("call_abc|fc_123", "ns.tool", [TextBlock("ok")]),
        ToolResultMessage("x" * 80, "alpha", [TextBlock("ok2")]),
    ]
    body, names = AnthropicModel("m").build_request(foreign, [make_tool("alpha")])
    assistant = body["messages"][1]["content"]
    assert [b["type"] for b in assistant] == ["tool_use", "tool_use"]  # no foreign reasoning, no empty text
    ids = [b["id"] for b in assistant]
    assert all(re.fullmatch(r"[a-zA-Z0-9_-]{1,64}", i) for i in ids)
    assert [b["tool_use_id"] for b in body["messages"][2]["content"]] == ids
    assert assistant[0]["name"] == "ns_tool" and names.internal("ns_tool") == "ns.tool"


async def test_scripted_transcript_continues_on_anthropic(fake_server: FakeServer) -> None:
    """Turn one by ScriptedModel, turn two by Anthropic: the second body pairs every call with its result."""
    add = make_tool("lookup")
    scripted = ScriptedModel([AssistantMessage(tool_calls=[ToolCall(name="lookup", arguments={"password": "p"})]),
                              "done"])
    first = await Agent(scripted, tools=[add]).run("go")
    fake_server.add(Reply.sse(recorded("anthropic", "parallel_tool_calls.followup")))
    run = await Agent(model_for(fake_server), tools=[add]).run("again", history=first)
    sent = fake_server.requests[0].json()
    call = sent["messages"][1]["content"][0]
    assert call["type"] == "tool_use" and call["name"] == "lookup" and call["input"] == {"password": "p"}
    assert sent["messages"][2]["content"][0]["tool_use_id"] == call["id"]
    assert run.output.startswith("Here are the secrets")


# --------------------------------------------------------------------------------------------------
# Coming in: the recorded streams through the pure accumulator
# --------------------------------------------------------------------------------------------------
def test_recorded_parallel_tool_calls() -> None:
    deltas, msg = replay("anthropic", "parallel_tool_calls")
    assert msg.text == "I'll retrieve the secrets for both passwords you provided."
    assert [(c.id, c.name, c.arguments) for c in msg.tool_calls] == [
        ("toolu_015cUijgET79LXjgeYQerN2h", "secret_retrieval_tool", {"password": "mellon"}),
        ("toolu_01XZTimPexA7h3EVKesnKt5T", "secret_retrieval_tool", {"password": "radiance"}),
    ]
    assert msg.stop_reason == "tool_use" and not any(c.incomplete for c in msg.tool_calls)
    assert msg.usage.input_tokens == 416 and msg.usage.output_tokens == 109
    assert msg.provider == "anthropic" and msg.model == "claude-sonnet-4-20250514"
    assert msg.provider_data == {"id": "msg_013zKrzHmx2EAPhcF2gQKQ4k"}
    text = "".join(d.text for d in deltas if isinstance(d, TextDelta))
    assert text == msg.text
    calls = [d for d in deltas if isinstance(d, ToolCallDelta)]
    assert {d.index for d in calls} == {0, 1}
    assert "".join(d.arguments_delta for d in calls if d.index == 1) == '{"password": "radiance"}'
    assert calls[-1].partial_arguments == {"password": "radiance"}


def test_recorded_text_then_tool_call() -> None:
    _, msg = replay("anthropic", "text_then_tool_call")
    assert msg.text == "I'll check the current weather in Paris for you."
    assert msg.tool_calls[0].arguments == {"location": "Paris"}
    assert msg.tool_calls[0].raw_arguments == '{"location": "Paris"}'


def test_recorded_empty_arguments_are_an_empty_object() -> None:
    _, msg = replay("anthropic", "tool_call_no_arguments")
    call = msg.tool_calls[0]
    assert (call.name, call.arguments, call.raw_arguments, call.incomplete) == ("updateIssueList", {}, None, False)
    assert msg.usage.input_tokens == 565 and msg.usage.output_tokens == 48  # message_delta updates usage


def test_recorded_thinking_with_signature() -> None:
    deltas, msg = replay("anthropic", "thinking_signature")
    [r] = msg.reasoning
    assert r.provider == "anthropic" and r.signature.startswith("Eq0TCkYICx") and r.text.startswith("I need to")
    assert "".join(d.text for d in deltas if isinstance(d, ReasoningDelta)) == r.text
    assert r.text not in msg.text and msg.text.startswith("Looking at numbers below 400")


def test_recorded_redacted_thinking() -> None:
    _, msg = replay("anthropic", "redacted_thinking")
    assert [(r.text, r.signature, r.encrypted[:10]) for r in msg.reasoning] == [
        ("", None, "EqkECkYIBx"), ("", None, "EtgBCkYIBx")]


def test_recorded_max_tokens_inside_a_tool_call_marks_it_incomplete() -> None:
    _, msg = replay("anthropic", "max_tokens_in_tool_call")
    [call] = msg.tool_calls
    assert msg.stop_reason == "max_tokens" and call.incomplete and call.name == "make_file"
    assert call.arguments is None and call.raw_arguments.startswith('{"filename": "taxes.txt"')


def test_arguments_given_whole_at_block_start() -> None:
    events = [
        {"type": "message_start", "message": {"id": "m", "model": "x", "usage": {"input_tokens": 3}}},
        {"type": "content_block_start", "index": 0,
         "content_block": {"type": "tool_use", "id": "toolu_1", "name": "get", "input": {"q": "é"}}},
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 9}},
        {"type": "message_stop"},
    ]
    state = _StreamState()
    deltas = feed(state, events)
    call = state.result().tool_calls[0]
    assert call.arguments == {"q": "é"} and call.raw_arguments is None
    assert deltas[-1].partial_arguments == {"q": "é"}


def test_text_split_by_a_tool_call_becomes_two_paragraphs_and_deltas_agree() -> None:
    events = [
        {"type": "message_start", "message": {"id": "m", "model": "x", "usage": {}}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "One."}},
        {"type": "content_block_start", "index": 1, "content_block": {"type": "text", "text": "Cited"}},
        {"type": "content_block_start", "index": 2,
         "content_block": {"type": "tool_use", "id": "t", "name": "n", "input": {}}},
        {"type": "content_block_start", "index": 3, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 3, "delta": {"type": "text_delta", "text": "Two."}},
        {"type": "message_stop"},
    ]
    state = _StreamState()
    deltas = feed(state, events)
    assert state.result().text == "One.Cited\n\nTwo."
    assert "".join(d.text for d in deltas if isinstance(d, TextDelta)) == "One.Cited\n\nTwo."


def test_stream_without_message_stop_is_a_stream_error() -> None:
    state = _StreamState()
    for event in recorded_events("anthropic", "parallel_tool_calls")[:-1]:
        state.process(event)
    with pytest.raises(StreamError, match="before message_stop"):
        state.result()


@pytest.mark.parametrize("kind, exc", [("overloaded_error", OverloadedError), ("rate_limit_error", RateLimitError),
                                       ("mystery_error", StreamError)])
def test_error_events_are_typed(kind, exc) -> None:
    with pytest.raises(exc, match="Overloaded|slow"):
        _StreamState().process({"type": "error", "error": {"type": kind, "message": "Overloaded or slow"}})


# --------------------------------------------------------------------------------------------------
# Over HTTP, with faults
# --------------------------------------------------------------------------------------------------
async def test_request_over_http_headers_body_and_replay(fake_server: FakeServer) -> None:
    fake_server.add(Reply.sse(recorded("anthropic", "parallel_tool_calls")))
    model = model_for(fake_server)
    sent = []
    _, msg = await collect(model, [UserMessage("hi")], [make_tool("secret_retrieval_tool")],
                                on_request=sent.append)
    req = fake_server.requests[0]
    assert req.path == "/v1/messages" and req.headers["x-api-key"] == KEY
    assert req.headers["anthropic-version"] == "2023-06-01"
    assert sent == [req.json()]  # on_request got exactly the body sent
    assert KEY not in req.body.decode() and KEY not in repr(model)
    assert [c.arguments for c in msg.tool_calls] == [{"password": "mellon"}, {"password": "radiance"}]


async def test_base_url_from_environment_without_v1(monkeypatch, fake_server: FakeServer) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", fake_server.url)
    fake_server.add(Reply.sse(recorded("anthropic", "text_then_tool_call")))
    model = load_model("anthropic:claude-sonnet-4-5")
    assert isinstance(model, AnthropicModel) and model.base_url == fake_server.url
    msg = await model.request([UserMessage("weather?")])
    assert msg.tool_calls[0].name == "get_weather" and fake_server.requests[0].headers["x-api-key"] == KEY


async def test_missing_key_names_the_variable(fake_server: FakeServer) -> None:
    with pytest.raises(AuthenticationError, match="ANTHROPIC_API_KEY"):
        await AnthropicModel("m", base_url=fake_server.url).request([UserMessage("hi")])


async def test_429_with_retry_after_then_success(fake_server: FakeServer, no_wait) -> None:
    policy, slept = no_wait
    fake_server.add(
        Reply.json(429, {"type": "error", "error": {"type": "rate_limit_error", "message": "slow"}},
                   headers={"retry-after": "3"}),
        Reply.sse(recorded("anthropic", "text_then_tool_call")),
    )
    sent = []
    msg = await model_for(fake_server, policy).request([UserMessage("x")], on_request=sent.append)
    assert slept.delays == [3.0] and len(fake_server.requests) == 2 and len(sent) == 1
    assert msg.tool_calls[0].arguments == {"location": "Paris"}


async def test_529_overloaded_is_retried_then_raised_typed(fake_server: FakeServer, no_wait) -> None:
    policy, _ = no_wait
    overloaded = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    fake_server.add(*[Reply.json(529, overloaded) for _ in range(6)])
    with pytest.raises(OverloadedError, match="Overloaded") as info:
        await model_for(fake_server, policy, max_retries=2).request([UserMessage("x")])
    assert info.value.status == 529 and len(fake_server.requests) == 3 and KEY not in str(info.value)


async def test_overloaded_event_before_any_content_is_retried(fake_server: FakeServer, no_wait) -> None:
    policy, _ = no_wait
    body = (b'event: message_start\ndata: {"type":"message_start","message":{"id":"m","model":"x","usage":{}}}\n\n'
            b'event: error\ndata: {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}\n\n')
    fake_server.add(Reply.sse(body), Reply.sse(recorded("anthropic", "text_then_tool_call")))
    sent = []
    msg = await model_for(fake_server, policy).request([UserMessage("x")], on_request=sent.append)
    assert msg.tool_calls[0].name == "get_weather" and len(fake_server.requests) == 2 and len(sent) == 1


async def test_overloaded_event_after_content_is_raised(fake_server: FakeServer, no_wait) -> None:
    policy, _ = no_wait
    body = replace_event(recorded("anthropic", "text_then_tool_call"), b'"type":"content_block_stop","index":1',
                         lambda _: b'event: error\ndata: {"type":"error","error":{"type":"overloaded_error",'
                                   b'"message":"Overloaded"}}\n\n')
    fake_server.add(Reply.sse(body))
    with pytest.raises(OverloadedError):
        await collect(model_for(fake_server, policy), [UserMessage("x")])
    assert len(fake_server.requests) == 1


async def test_connection_dropped_mid_stream(fake_server: FakeServer) -> None:
    dropped = Reply.sse(recorded("anthropic", "parallel_tool_calls"), drop_after=1500)
    await stream_fails(fake_server, model_for(fake_server), dropped, ProviderConnectionError, "dropped")


async def test_body_cut_before_message_stop(fake_server: FakeServer) -> None:
    body = cut_before(recorded("anthropic", "parallel_tool_calls"), b'"type":"message_delta"')
    await stream_fails(fake_server, model_for(fake_server), Reply.sse(body), StreamError, "before message_stop")


async def test_malformed_event(fake_server: FakeServer) -> None:
    body = replace_event(recorded("anthropic", "text_then_tool_call"), b'"partial_json":"ar"',
                         lambda _: b'event: content_block_delta\ndata: {"type":"content_block_delta",\n\n')
    await stream_fails(fake_server, model_for(fake_server), Reply.sse(body), StreamError, "malformed")


async def test_one_byte_chunks_split_utf8_and_give_the_same_message(fake_server: FakeServer) -> None:
    body = recorded("anthropic", "thinking_signature")
    message = await same_in_one_byte_chunks(fake_server, model_for(fake_server), body)
    assert "≥ 790" in message.reasoning[0].text  # multi-byte characters were split across chunks


# --------------------------------------------------------------------------------------------------
# A whole run: tool call, result, answer; the second request checked field by field
# --------------------------------------------------------------------------------------------------
async def test_agent_two_turns_second_request_field_by_field(fake_server: FakeServer) -> None:
    secret = make_tool("secret_retrieval_tool")
    fake_server.add(Reply.sse(recorded("anthropic", "parallel_tool_calls")),
                    Reply.sse(recorded("anthropic", "parallel_tool_calls.followup")))
    agent = Agent(model_for(fake_server), tools=[secret], instructions="Use parallel tool calling.")
    run = await agent.run("Please retrieve the secrets associated with each of these passwords: mellon,radiance")
    assert run.output.startswith("Here are the secrets retrieved for each password")
    assert len(run.requests) == 2 and run.requests == [r.json() for r in fake_server.requests]

    second = fake_server.requests[1].json()
    assert second["model"] == "claude-sonnet-4-5" and second["stream"] is True and second["max_tokens"] == 8192
    assert second["system"] == [{"type": "text", "text": "Use parallel tool calling.",
                                 "cache_control": {"type": "ephemeral"}}]
    assert second["tools"] == [{"name": "secret_retrieval_tool",
                                "description": "A tool that requires a password to retrieve a secret.",
                                "input_schema": secret.parameters, "cache_control": {"type": "ephemeral"}}]
    user, assistant, results = second["messages"]
    assert user == {"role": "user", "content": [{  # the previous request's cache breakpoint, read back
        "type": "text", "text": "Please retrieve the secrets associated with each of these passwords: mellon,radiance",
        "cache_control": {"type": "ephemeral"}}]}
    assert assistant == {"role": "assistant", "content": [
        {"type": "text", "text": "I'll retrieve the secrets for both passwords you provided."},
        {"type": "tool_use", "id": "toolu_015cUijgET79LXjgeYQerN2h", "name": "secret_retrieval_tool",
         "input": {"password": "mellon"}},
        {"type": "tool_use", "id": "toolu_01XZTimPexA7h3EVKesnKt5T", "name": "secret_retrieval_tool",
         "input": {"password": "radiance"}},
    ]}
    assert results == {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "toolu_015cUijgET79LXjgeYQerN2h", "content": "secret",
         "is_error": False},
        {"type": "tool_result", "tool_use_id": "toolu_01XZTimPexA7h3EVKesnKt5T", "content": "secret",
         "is_error": False, "cache_control": {"type": "ephemeral"}},
    ]}
    # the same shape the API accepted in the recording's own second request
    reference = fixture_json("anthropic", "parallel_tool_calls.followup.request.json")
    strip = lambda blocks: [{k: v for k, v in b.items() if k not in ("cache_control", "is_error", "content")}
                            for b in blocks]
    assert strip(assistant["content"]) == strip(reference["messages"][1]["content"])
    assert strip(results["content"]) == strip(reference["messages"][2]["content"])
    assert run.calls[0].wire == results["content"][0]
    for request in run.requests:
        assert KEY not in json.dumps(request)


async def test_agent_thinking_signature_goes_back_unchanged(fake_server: FakeServer) -> None:
    """A thinking block with its signature, then a tool call; the next turn starts with that block."""
    thinking = recorded_events("anthropic", "thinking_signature")
    signature = next(e["delta"]["signature"] for e in thinking if e.get("delta", {}).get("type") == "signature_delta")
    stream = "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in [
        {"type": "message_start", "message": {"id": "msg_1", "model": "claude", "usage": {"input_tokens": 5}}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": "",
                                                                         "signature": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "Primes."}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "signature_delta", "signature": signature}},
        {"type": "content_block_stop", "index": 0},
        {"type": "content_block_start", "index": 1, "content_block": {"type": "tool_use", "id": "toolu_9",
                                                                         "name": "secret_retrieval_tool", "input": {}}},
        {"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta",
                                                              "partial_json": '{"password": "79"}'}},
        {"type": "content_block_stop", "index": 1},
        {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 30}},
        {"type": "message_stop"},
    ])
    fake_server.add(Reply.sse(stream), Reply.sse(recorded("anthropic", "thinking_signature.followup")))
    agent = Agent(model_for(fake_server, thinking=2048), tools=[make_tool("secret_retrieval_tool")])
    run = await agent.run("Which primes contain 79?")
    second = fake_server.requests[1].json()
    assert second["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assert second["messages"][1]["content"][:2] == [
        {"type": "thinking", "thinking": "Primes.", "signature": signature},
        {"type": "tool_use", "id": "toolu_9", "name": "secret_retrieval_tool", "input": {"password": "79"}},
    ]
    assert run.messages[-1].reasoning[0].signature.startswith("Ep0DCkYICx")


def test_thinking_is_left_off_while_a_tool_loop_begun_without_it_continues() -> None:
    """The API refuses thinking switched on in the middle of a tool-use turn that started without it."""
    model = AnthropicModel("m", thinking=2048)
    begun_elsewhere = [UserMessage("go"),
                       AssistantMessage(tool_calls=[ToolCall(name="alpha", arguments={}, id="call_1")],
                                        provider="openai"),
                       ToolResultMessage("call_1", "alpha", [TextBlock("ok")])]
    body, _ = model.build_request(begun_elsewhere, [make_tool("alpha")])
    assert "thinking" not in body and body["max_tokens"] == 8192
    body, _ = model.build_request([*begun_elsewhere, AssistantMessage(text="done"), UserMessage("next")])
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    own = [UserMessage("go"), AssistantMessage(tool_calls=[ToolCall(name="alpha", arguments={}, id="toolu_1")],
                                               reasoning=[Reasoning(text="t", signature="s", provider="anthropic")],
                                               provider="anthropic"),
           ToolResultMessage("toolu_1", "alpha", [TextBlock("ok")])]
    assert model.build_request(own)[0]["thinking"]["budget_tokens"] == 2048


def test_usage_counts_the_whole_prompt_and_the_cache() -> None:
    state = _StreamState()
    for event in [
        {"type": "message_start", "message": {"id": "m", "model": "x", "usage": {
            "input_tokens": 12, "cache_read_input_tokens": 3000, "cache_creation_input_tokens": 200,
            "output_tokens": 1}}},
        {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 40}},
        {"type": "message_stop"},
    ]:
        state.process(event)
    usage = state.result().usage
    assert (usage.input_tokens, usage.output_tokens, usage.cache_read_tokens, usage.cache_write_tokens) == (
        3212, 40, 3000, 200)


async def test_the_key_stays_out_of_errors_and_logs(fake_server: FakeServer, no_wait, caplog) -> None:
    policy, _ = no_wait
    echo = {"type": "error", "error": {"type": "authentication_error", "message": f"invalid x-api-key {KEY}"}}
    fake_server.add(Reply.json(529, {"type": "error", "error": {"type": "overloaded_error",
                                                               "message": f"busy ({KEY})"}}),
                    Reply.json(401, echo))
    caplog.set_level("DEBUG")
    with pytest.raises(AuthenticationError) as info:
        await model_for(fake_server, policy).request([UserMessage("x")])
    assert "ANTHROPIC_API_KEY" in str(info.value)
    assert KEY not in str(info.value) and KEY not in json.dumps(info.value.body) and KEY not in repr(info.value)
    assert "busy" in caplog.text and KEY not in caplog.text


async def test_a_run_reports_each_retry_and_the_view_says_so(fake_server: FakeServer, no_wait) -> None:
    from nbagent import Agent
    from nbagent.events import ModelRetrying
    from nbagent.render import header_html

    policy, _ = no_wait
    fake_server.add(
        Reply.json(429, {"type": "error", "error": {"type": "rate_limit_error", "message": "slow"}},
                   headers={"retry-after": "3"}),
        Reply.json(529, {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
        Reply.sse(recorded("anthropic", "text_then_tool_call")),
        Reply.sse(recorded("anthropic", "text_then_tool_call")),
    )
    seen = []
    agent = Agent(model=model_for(fake_server, policy), max_turns=1)
    run = agent.start("x", on_event=lambda e: seen.append(e) if isinstance(e, ModelRetrying) else None)
    try:
        await run
    except Exception:  # max_turns=1 with a tool call: the run fails after the first turn; the retries are what count
        pass
    assert [(e.attempt, e.reason) for e in seen] == [(1, "rate limited"), (2, "the provider is overloaded")]
    assert str(seen[0]) == f"retrying (1 of {policy.max_retries}) in 3 s: rate limited"
    assert seen[0] in run.events  # kept in the run's record

    from types import SimpleNamespace

    running = SimpleNamespace(status="running", done=False, turns=1, calls=[], elapsed=1.0, usage=run.usage,
                              agent=agent, model=agent.model)  # the header while a retry waits
    assert "retrying (1 of" in header_html(running, retrying=seen[0])
