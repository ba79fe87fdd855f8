"""OpenAI Responses: request mapping, strict schemas, recorded streams over real HTTP, faults, a two-turn run."""

from __future__ import annotations

import json
import re
from typing import Optional

import pytest
from pydantic import BaseModel

from nbagent import Agent, tool
from nbagent.errors import (
    AuthenticationError,
    ProviderConnectionError,
    RateLimitError,
    ServerError,
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
from nbagent.providers.anthropic import AnthropicModel
from nbagent.providers.openai_responses import (
    OpenAIResponsesModel,
    _StreamState,
    strict_schema,
)
from nbagent.providers.scripted import ScriptedModel

from .fakeserver import FakeServer, Reply
from .replay import (
    PNG,
    accumulate,
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

KEY = "sk-proj-test-0123456789SECRETKEY"


def model_for(server: FakeServer, name: str = "gpt-5", policy=None, **options) -> OpenAIResponsesModel:
    if policy is not None:
        options["retry"] = policy
    return OpenAIResponsesModel(name, base_url=server.url + "/v1", api_key=KEY, **options)


def replay(name: str) -> tuple[list, AssistantMessage]:
    return accumulate(_StreamState(), "openai_responses", name)


# --------------------------------------------------------------------------------------------------
# Going out
# --------------------------------------------------------------------------------------------------
def test_tools_sorted_by_name_with_strict_flag() -> None:
    b, a = make_tool("zeta"), make_tool("files.read", strict=True)
    body, _ = OpenAIResponsesModel("gpt-5").build_request([UserMessage("hi")], [b, a], instructions="Be brief.")
    assert [t["name"] for t in body["tools"]] == ["files_read", "zeta"]
    assert body["tools"][1] == {"type": "function", "name": "zeta",
                                "description": "A tool that requires a password to retrieve a secret.",
                                "parameters": b.parameters, "strict": False}
    assert body["tools"][0]["strict"] is True
    assert body["instructions"] == "Be brief." and body["store"] is False and body["stream"] is True
    assert body["include"] == ["reasoning.encrypted_content"]
    assert body["input"] == [{"role": "user", "content": "hi"}]


def test_encrypted_reasoning_only_for_reasoning_models() -> None:
    assert "include" not in OpenAIResponsesModel("gpt-4o").build_request([UserMessage("x")])[0]
    assert "include" not in OpenAIResponsesModel("gpt-5-chat-latest").build_request([UserMessage("x")])[0]
    assert OpenAIResponsesModel("o4-mini").build_request([UserMessage("x")])[0]["include"]
    assert OpenAIResponsesModel("gpt-4o", reasoning=True).build_request([UserMessage("x")])[0]["include"]


def test_settings_mapping() -> None:
    body, _ = OpenAIResponsesModel("gpt-5", temperature=0).build_request(
        [UserMessage("x")], [make_tool("a.b")], max_tokens=500, reasoning_effort="low", reasoning_summary="auto",
        tool_choice="a.b")
    assert body["max_output_tokens"] == 500 and "max_tokens" not in body
    assert body["reasoning"] == {"effort": "low", "summary": "auto"} and body["temperature"] == 0
    assert body["tool_choice"] == {"type": "function", "name": "a_b"}


class Addr(BaseModel):
    street: str
    zip: Optional[str] = None


def test_strict_schema_normalisation() -> None:
    @tool(strict=True)
    def ship(to: Addr, items: list[Addr], note: str | None = None, count: int = 1) -> str:
        """Ship."""
        return ""

    original = json.loads(json.dumps(ship.parameters))
    schema = strict_schema(ship.parameters)
    assert ship.parameters == original  # the tool's own schema is not touched
    assert schema["required"] == ["to", "items", "note", "count"] and schema["additionalProperties"] is False
    assert schema["properties"]["count"] == {"default": 1, "type": ["integer", "null"]}
    assert schema["properties"]["note"]["anyOf"] == [{"type": "string"}, {"type": "null"}]
    addr = schema["$defs"]["Addr"]
    assert addr["required"] == ["street", "zip"] and addr["additionalProperties"] is False
    assert addr["properties"]["street"] == {"type": "string"}

    raw = {"type": "object", "properties": {
        "mode": {"type": "string", "enum": ["a", "b"]},
        "ref": {"$ref": "#/definitions/X", "description": "see X"},
        "nested": {"type": "object", "properties": {"k": {"type": "number"}}},
    }, "definitions": {"X": {"type": "object", "properties": {"v": {"type": ["string", "integer"]}}}}}
    s = strict_schema(raw)
    assert s["properties"]["mode"] == {"type": ["string", "null"], "enum": ["a", "b", None]}
    assert s["properties"]["ref"] == {"anyOf": [{"$ref": "#/definitions/X"}, {"type": "null"}], "description": "see X"}
    assert s["properties"]["nested"]["required"] == ["k"] and s["properties"]["nested"]["additionalProperties"] is False
    assert s["properties"]["nested"]["properties"]["k"] == {"type": ["number", "null"]}
    assert s["definitions"]["X"]["properties"]["v"] == {"type": ["string", "integer", "null"]}


def conversation() -> list:
    return [
        UserMessage([TextBlock("Look"), ImageBlock(PNG)]),
        AssistantMessage(
            text="Checking.",
            tool_calls=[ToolCall(name="files.read", arguments={"password": "a"}, id="call_A",
                                 provider_data={"item_id": "fc_A"}),
                        ToolCall(name="alpha", raw_arguments='{"password": "b"}', id="call_B")],
            reasoning=[Reasoning(text="Summary.", encrypted="gAAAA", id="rs_1", provider="openai-responses")],
            provider="openai-responses",
        ),
        ToolResultMessage("call_A", "files.read", [TextBlock("first")]),
        ToolResultMessage("call_B", "alpha", [TextBlock("see"), ImageBlock(PNG)], is_error=True),
    ]


def test_input_items_reasoning_message_calls_and_outputs() -> None:
    model = OpenAIResponsesModel("gpt-5")
    wire = model.to_wire(conversation())
    image = f"data:image/png;base64,{ImageBlock(PNG).base64}"
    assert wire == [
        {"role": "user", "content": [{"type": "input_text", "text": "Look"},
                                     {"type": "input_image", "image_url": image}]},
        {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "Summary."}],
         "encrypted_content": "gAAAA"},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Checking."}]},
        {"type": "function_call", "call_id": "call_A", "name": "files_read", "arguments": '{"password": "a"}'},
        {"type": "function_call", "call_id": "call_B", "name": "alpha", "arguments": '{"password": "b"}'},
        {"type": "function_call_output", "call_id": "call_A", "output": "first"},
        {"type": "function_call_output", "call_id": "call_B", "output": [
            {"type": "input_text", "text": "Error: see"}, {"type": "input_image", "image_url": image}]},
    ]
    assert model.wire_tool_result(conversation()[2]) == wire[5]
    body, _ = model.build_request(conversation(), [make_tool("alpha")])
    assert body["input"] == wire
    assert not any(i.get("type") == "reasoning" for i in OpenAIResponsesModel("gpt-4o").to_wire(conversation()))
    stored = OpenAIResponsesModel("gpt-5", store=True).to_wire(conversation())
    assert stored[3]["id"] == "fc_A" and "include" not in OpenAIResponsesModel("gpt-5", store=True).build_request(
        conversation())[0]


def test_foreign_transcript_from_anthropic_is_valid_here() -> None:
    foreign = [
        UserMessage("hi"),
        AssistantMessage(text="", tool_calls=[ToolCall(name="ns.tool", arguments={"password": "x"},
                                                        id="toolu_01|weird")],
                         reasoning=[Reasoning(text="t", signature="sig", provider="anthropic")],
                         provider="anthropic", provider_data={"id": "msg_1"}),
        ToolResultMessage("toolu_01|weird", "ns.tool", [TextBlock("ok")]),
    ]
    body, names = OpenAIResponsesModel("gpt-5").build_request(foreign, [make_tool("ns.tool")])
    items = body["input"]
    assert [i.get("type", "message") for i in items] == ["message", "function_call", "function_call_output"]
    assert re.fullmatch(r"[A-Za-z0-9_-]{1,64}", items[1]["call_id"]) and items[1]["call_id"] == items[2]["call_id"]
    assert items[1]["name"] == "ns_tool" and names.internal("ns_tool") == "ns.tool"
    assert "sig" not in json.dumps(body)


# --------------------------------------------------------------------------------------------------
# Coming in
# --------------------------------------------------------------------------------------------------
def test_recorded_parallel_tool_calls() -> None:
    deltas, msg = replay("parallel_tool_calls")
    assert [(c.id, c.name, c.arguments, c.raw_arguments) for c in msg.tool_calls] == [
        ("call_sKC7OABqf2A2PTLCm0CLeRWV", "secret_retrieval_tool", {"password": "mellon"}, '{"password":"mellon"}'),
        ("call_OdR3s3xop0vtgkDyWRMLafuH", "secret_retrieval_tool", {"password": "radiance"},
         '{"password":"radiance"}'),
    ]
    assert msg.tool_calls[0].provider_data == {"item_id": "fc_0c3b09d20eedf2d30068f966bad8b88190af96d232f504ef1f"}
    assert msg.stop_reason == "tool_use" and msg.text == "" and msg.model == "gpt-4o-2024-08-06"
    assert (msg.usage.input_tokens, msg.usage.output_tokens) == (36, 54)
    calls = [d for d in deltas if isinstance(d, ToolCallDelta)]
    assert "".join(d.arguments_delta for d in calls if d.index == 0) == '{"password":"mellon"}'
    assert calls[-1].partial_arguments == {"password": "radiance"}


def test_recorded_reasoning_text_and_call() -> None:
    deltas, msg = replay("reasoning_text_tool_call")
    [r] = msg.reasoning
    assert r.id == "rs_0fabc13af1ee0049006a691dfe60b081a1baa444d3cf19afba" and r.encrypted.startswith("gAAAAABqaR3-")
    assert r.provider == "openai-responses" and r.text == ""
    assert msg.text == "I’ll check the capital lookup tool for “PotatoLand.”"
    assert msg.tool_calls[0].arguments == {"country": "PotatoLand"}
    assert "".join(d.text for d in deltas if isinstance(d, TextDelta)) == msg.text


def test_recorded_reasoning_summary_streamed() -> None:
    deltas, msg = replay("reasoning_summary_tool_call")
    [r] = msg.reasoning
    assert r.text.startswith("**Calculating step-by-step") and r.encrypted.startswith("gAAAAABpPDIV")  # the final item's
    assert "".join(d.text for d in deltas if isinstance(d, ReasoningDelta)) == r.text
    assert msg.tool_calls[0].arguments == {"a": 12, "b": 7, "op": "add"}


def test_recorded_call_then_text() -> None:
    _, first = replay("tool_call_then_text")
    _, second = replay("tool_call_then_text.followup")
    assert first.tool_calls[0].arguments == {"country": "France"} and first.stop_reason == "tool_use"
    assert second.text == "The capital of France is Paris." and second.stop_reason == "end_turn"


def test_recorded_incomplete_response() -> None:
    _, msg = replay("incomplete_max_tokens")
    assert msg.stop_reason == "max_tokens" and msg.text.startswith("Sure! Here is a list of all 50 U.S. states")


def test_recorded_error_event_is_typed() -> None:
    state = _StreamState()
    with pytest.raises(RateLimitError, match="insufficient_quota"):
        for event in recorded_events("openai_responses", "error_event"):
            state.process(event)


def test_empty_arguments_and_call_cut_by_max_output_tokens() -> None:
    """Derived from the recorded parallel stream: the first call's arguments made empty, the second cut."""
    events = recorded_events("openai_responses", "parallel_tool_calls")
    first = events[2]["item"]["id"]
    second_done = [i for i, e in enumerate(events) if e["type"] == "response.output_item.done"][1]
    edited = []
    for e in events[:second_done] + [events[-1]]:
        if e.get("item_id") == first and e["type"] == "response.function_call_arguments.delta":
            continue
        if e.get("item_id") == first and e["type"] == "response.function_call_arguments.done":
            e = {**e, "arguments": ""}
        if e["type"] == "response.output_item.done" and e["item"]["id"] == first:
            e = {**e, "item": {**e["item"], "arguments": ""}}
        if e["type"] == "response.completed":
            e = {**e, "type": "response.incomplete", "response": {
                **e["response"], "status": "incomplete", "incomplete_details": {"reason": "max_output_tokens"}}}
        edited.append(e)
    state = _StreamState()
    for e in edited:
        state.process(e)
    msg = state.result()
    assert msg.tool_calls[0].arguments == {} and not msg.tool_calls[0].incomplete
    assert msg.tool_calls[1].incomplete and msg.stop_reason == "max_tokens"


def test_stream_without_terminal_event() -> None:
    state = _StreamState()
    for event in recorded_events("openai_responses", "parallel_tool_calls")[:-1]:
        state.process(event)
    with pytest.raises(StreamError, match="before response.completed"):
        state.result()


def test_failed_response_is_typed() -> None:
    with pytest.raises(ServerError, match="server_error"):
        _StreamState().process({"type": "response.failed", "response": {
            "status": "failed", "error": {"code": "server_error", "message": "boom"}}})


# --------------------------------------------------------------------------------------------------
# Over HTTP, with faults
# --------------------------------------------------------------------------------------------------
async def test_request_over_http(fake_server: FakeServer) -> None:
    fake_server.add(Reply.sse(recorded("openai_responses", "parallel_tool_calls")))
    model = model_for(fake_server)
    sent = []
    _, msg = await collect(model, [UserMessage("hi")], [make_tool("secret_retrieval_tool")], on_request=sent.append)
    req = fake_server.requests[0]
    assert req.path == "/v1/responses" and req.headers["authorization"] == f"Bearer {KEY}"
    assert sent == [req.json()] and KEY not in req.body.decode() and KEY not in repr(model)
    assert len(msg.tool_calls) == 2


async def test_environment_and_load_model(monkeypatch, fake_server: FakeServer) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("OPENAI_BASE_URL", fake_server.url + "/v1")
    fake_server.add(Reply.sse(recorded("openai_responses", "tool_call_then_text")))
    model = load_model("openai-responses:gpt-4o")
    assert isinstance(model, OpenAIResponsesModel)
    msg = await model.request([UserMessage("capital?")])
    assert msg.tool_calls[0].name == "get_capital"


async def test_missing_key(fake_server: FakeServer) -> None:
    with pytest.raises(AuthenticationError, match="OPENAI_API_KEY"):
        await OpenAIResponsesModel("gpt-5", base_url=fake_server.url).request([UserMessage("x")])


async def test_429_with_retry_after(fake_server: FakeServer, no_wait) -> None:
    policy, slept = no_wait
    fake_server.add(Reply.json(429, {"error": {"message": "slow down", "type": "requests",
                                               "code": "rate_limit_exceeded"}}, headers={"retry-after": "1.5"}),
                    Reply.sse(recorded("openai_responses", "tool_call_then_text")))
    msg = await model_for(fake_server, policy=policy).request([UserMessage("x")])
    assert slept.delays == [1.5] and msg.tool_calls[0].arguments == {"country": "France"}


async def test_server_error_event_before_content_is_retried(fake_server: FakeServer, no_wait) -> None:
    policy, _ = no_wait
    body = (b'event: response.created\ndata: {"type":"response.created","response":{"id":"r","model":"m"}}\n\n'
            b'event: error\ndata: {"type":"error","code":"server_error","message":"try again"}\n\n')
    fake_server.add(Reply.sse(body), Reply.sse(recorded("openai_responses", "tool_call_then_text")))
    sent = []
    msg = await model_for(fake_server, policy=policy).request([UserMessage("x")], on_request=sent.append)
    assert msg.tool_calls[0].name == "get_capital" and len(sent) == 1 and len(fake_server.requests) == 2


async def test_quota_error_event_is_not_retried(fake_server: FakeServer, no_wait) -> None:
    policy, _ = no_wait
    fake_server.add(Reply.sse(recorded("openai_responses", "error_event")))
    with pytest.raises(RateLimitError, match="quota"):
        await model_for(fake_server, policy=policy).request([UserMessage("x")])
    assert len(fake_server.requests) == 1


async def test_connection_dropped(fake_server: FakeServer) -> None:
    dropped = Reply.sse(recorded("openai_responses", "parallel_tool_calls"), drop_after=3000)
    await stream_fails(fake_server, model_for(fake_server), dropped, ProviderConnectionError)


async def test_cut_before_completed(fake_server: FakeServer) -> None:
    body = cut_before(recorded("openai_responses", "parallel_tool_calls"), b'"type":"response.completed"')
    await stream_fails(fake_server, model_for(fake_server), Reply.sse(body), StreamError, "before response.completed")


async def test_malformed_event(fake_server: FakeServer) -> None:
    body = replace_event(recorded("openai_responses", "parallel_tool_calls"), b'"type":"response.in_progress"',
                         lambda _: b"event: response.in_progress\ndata: {not json\n\n")
    await stream_fails(fake_server, model_for(fake_server), Reply.sse(body), StreamError, "malformed")


async def test_one_byte_chunks(fake_server: FakeServer) -> None:
    body = recorded("openai_responses", "reasoning_text_tool_call")
    message = await same_in_one_byte_chunks(fake_server, model_for(fake_server), body)
    assert "“PotatoLand.”" in message.text  # curly quotes were split byte by byte


# --------------------------------------------------------------------------------------------------
# A whole run
# --------------------------------------------------------------------------------------------------
async def test_agent_two_turns_second_request_field_by_field(fake_server: FakeServer) -> None:
    @tool(read_only=True)
    def get_capital(country: str) -> str:
        """The capital of a country."""
        return "Potato City"

    fake_server.add(Reply.sse(recorded("openai_responses", "reasoning_text_tool_call")),
                    Reply.sse(recorded("openai_responses", "reasoning_text_tool_call.followup")))
    agent = Agent(model_for(fake_server, "gpt-5.5"), tools=[get_capital],
                  instructions="Briefly narrate what you are about to do before calling each tool.")
    run = await agent.run("What is the capital of PotatoLand?")
    assert run.output == "The capital of PotatoLand is **Potato City**."
    assert run.requests == [r.json() for r in fake_server.requests]

    second = fake_server.requests[1].json()
    assert second["model"] == "gpt-5.5" and second["stream"] is True and second["store"] is False
    assert second["include"] == ["reasoning.encrypted_content"]
    assert second["instructions"] == "Briefly narrate what you are about to do before calling each tool."
    assert second["tools"] == [{"type": "function", "name": "get_capital", "description": "The capital of a country.",
                                "parameters": get_capital.parameters, "strict": False}]
    user, reasoning, message, call, output = second["input"]
    assert user == {"role": "user", "content": "What is the capital of PotatoLand?"}
    reference = fixture_json("openai_responses", "reasoning_text_tool_call.followup.request.json")["input"]
    assert reasoning == {"type": "reasoning", "id": reference[1]["id"], "summary": [],
                         "encrypted_content": reference[1]["encrypted_content"]}
    assert message == {"type": "message", "role": "assistant",
                       "content": [{"type": "output_text", "text": "I’ll check the capital lookup tool for “PotatoLand.”"}]}
    assert call == {"type": "function_call", "call_id": "call_LabG58Uhrq9kZvR52BYKjToD", "name": "get_capital",
                    "arguments": '{"country":"PotatoLand"}'}
    assert {k: call[k] for k in ("call_id", "name", "arguments")} == {k: reference[3][k] for k in
                                                                      ("call_id", "name", "arguments")}
    assert output == {"type": "function_call_output", "call_id": "call_LabG58Uhrq9kZvR52BYKjToD",
                      "output": "Potato City"} == reference[4]
    assert run.calls[0].wire == output
    assert all(KEY not in json.dumps(r) for r in run.requests)


async def test_conversation_moves_from_anthropic_to_responses(fake_server: FakeServer) -> None:
    """A run on Anthropic (two parallel calls, their results, an answer), continued here."""
    secret = make_tool("secret_retrieval_tool")
    fake_server.add(Reply.sse(recorded("anthropic", "parallel_tool_calls")),
                    Reply.sse(recorded("anthropic", "parallel_tool_calls.followup")),
                    Reply.sse(recorded("openai_responses", "parallel_tool_calls.followup")))
    anthropic = AnthropicModel("claude-sonnet-4-0", base_url=fake_server.url, api_key=KEY)
    first = await Agent(anthropic, tools=[secret]).run("secrets for mellon, radiance?")
    run = await Agent(model_for(fake_server, "gpt-4o"), tools=[secret]).run("and now?", history=first)
    items = fake_server.requests[2].json()["input"]
    kinds = [i.get("type", "user") for i in items]
    assert kinds == ["user", "message", "function_call", "function_call", "function_call_output",
                     "function_call_output", "message", "user"]
    calls = [i["call_id"] for i in items if i.get("type") == "function_call"]
    assert calls == [i["call_id"] for i in items if i.get("type") == "function_call_output"]
    assert calls == ["toolu_015cUijgET79LXjgeYQerN2h", "toolu_01XZTimPexA7h3EVKesnKt5T"]
    assert items[2]["arguments"] == '{"password": "mellon"}'  # exactly what Claude sent
    assert run.output.startswith("Here are the secrets")


def test_failed_result_text_says_error() -> None:
    model = OpenAIResponsesModel("gpt-5")
    assert model.wire_tool_result(ToolResultMessage("call_1", "a", [TextBlock("no such file")], is_error=True)) == {
        "type": "function_call_output", "call_id": "call_1", "output": "Error: no such file"}
    assert model.wire_tool_result(ToolResultMessage("call_1", "a", [TextBlock("Error: x")], is_error=True))[
        "output"] == "Error: x"


async def test_scripted_transcript_continues_on_responses(fake_server: FakeServer) -> None:
    secret = make_tool("secret_retrieval_tool")
    scripted = ScriptedModel([AssistantMessage(tool_calls=[
        ToolCall(name="secret_retrieval_tool", raw_arguments='{"password": "mellon"}'),
        ToolCall(name="secret_retrieval_tool", raw_arguments="{'password': 'radiance',}")]), "ok"])
    first = await Agent(scripted, tools=[secret]).run("go")
    fake_server.add(Reply.sse(recorded("openai_responses", "parallel_tool_calls.followup")))
    await Agent(model_for(fake_server, "gpt-4o"), tools=[secret]).run("again", history=first)
    items = fake_server.requests[0].json()["input"]
    calls = [i for i in items if i.get("type") == "function_call"]
    outputs = [i for i in items if i.get("type") == "function_call_output"]
    assert [c["call_id"] for c in calls] == [o["call_id"] for o in outputs] == [c.id for c in first.messages[1].tool_calls]
    assert [c["arguments"] for c in calls] == ['{"password": "mellon"}', "{'password': 'radiance',}"]  # as sent
    assert [o["output"] for o in outputs] == ["secret", "secret"]
