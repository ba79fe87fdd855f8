"""Gemini: request mapping, schema sanitising, recorded streams over real HTTP, faults, a two-turn run."""

from __future__ import annotations

import json
import re
from typing import Literal, Optional

import pytest
from pydantic import BaseModel

from nbagent import Agent, tool
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
from nbagent.providers.google import (
    SKIP_SIGNATURE,
    GeminiModel,
    _StreamState,
    openapi_schema,
)
from nbagent.providers.openai_responses import OpenAIResponsesModel
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

KEY = "AIzaSyTEST0123456789SECRETKEY"


def model_for(server: FakeServer, name: str = "gemini-2.5-flash", policy=None, **options) -> GeminiModel:
    if policy is not None:
        options["retry"] = policy
    return GeminiModel(name, base_url=server.url, api_key=KEY, **options)


def replay(name: str) -> tuple[list, AssistantMessage]:
    return accumulate(_StreamState(), "google", name)


class Point(BaseModel):
    x: float
    label: Optional[str] = None


class Shape(BaseModel):
    kind: Literal["circle", "square"]
    points: list[Point]
    parent: Optional["Shape"] = None


# --------------------------------------------------------------------------------------------------
# Going out
# --------------------------------------------------------------------------------------------------
def test_function_declarations_system_and_generation_config() -> None:
    long_name = "namespace__" + "x" * 60
    a, b = make_tool("alpha"), make_tool(long_name)
    model = GeminiModel("models/gemini-2.5-flash", temperature=0.1, thinking=1024)
    body, names = model.build_request([UserMessage("hi")], [a, b], instructions="Be brief.", max_tokens=300,
                                      tool_choice="required", safetySettings=[{"category": "X"}])
    assert model.name == "gemini-2.5-flash"
    assert body["tools"] == [{"functionDeclarations": [
        {"name": "alpha", "description": "A tool that requires a password to retrieve a secret.",
         "parametersJsonSchema": a.parameters},
        {"name": names.wire(long_name), "description": "A tool that requires a password to retrieve a secret.",
         "parametersJsonSchema": b.parameters},
    ]}]
    wire = body["tools"][0]["functionDeclarations"][1]["name"]
    assert len(wire) == 64 and wire.startswith("namespace__x") and names.internal(wire) == long_name
    assert body["systemInstruction"] == {"parts": [{"text": "Be brief."}]}
    assert body["contents"] == [{"role": "user", "parts": [{"text": "hi"}]}]
    assert body["generationConfig"] == {"temperature": 0.1, "maxOutputTokens": 300,
                                        "thinkingConfig": {"thinkingBudget": 1024, "includeThoughts": True}}
    assert body["toolConfig"] == {"functionCallingConfig": {"mode": "ANY"}}
    assert body["safetySettings"] == [{"category": "X"}]
    assert model.path == "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"


def test_older_parameters_field_is_sanitised() -> None:
    @tool
    def draw(shape: Shape, scale: int | None = None, mode: Literal[1, 2] = 1) -> str:
        """Draw."""
        return ""

    @tool
    def ping() -> str:
        """Ping."""
        return ""

    body, _ = GeminiModel("gemini-2.5-flash", use_parameters=True).build_request([UserMessage("x")], [draw, ping])
    decls = body["tools"][0]["functionDeclarations"]
    assert decls[1] == {"name": "ping", "description": "Ping."}  # no properties: no parameters at all
    params = decls[0]["parameters"]
    text = json.dumps(params)
    for banned in ("$ref", "$defs", "additionalProperties", "const", '"null"', "$schema"):
        assert banned not in text
    shape = params["properties"]["shape"]
    assert shape["type"] == "object" and shape["properties"]["kind"] == {
        "type": "string", "enum": ["circle", "square"], "format": "enum"}
    assert shape["properties"]["points"]["items"]["properties"]["label"] == {"type": "string", "nullable": True}
    assert shape["properties"]["parent"] == {"type": "object", "nullable": True}  # recursion stops
    assert params["properties"]["scale"] == {"type": "integer", "nullable": True}
    assert params["properties"]["mode"] == {"default": 1, "type": "integer", "description": "One of: 1, 2"}


def test_openapi_schema_cases() -> None:
    raw = {"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object", "additionalProperties": False,
           "properties": {"c": {"const": "fixed"}, "t": {"type": ["string", "null"]}, "u": {"type": ["string", "integer"]},
                          "o": {"oneOf": [{"type": "string"}, {"type": "number"}]},
                          "a": {"allOf": [{"type": "string", "minLength": 2}], "description": "d"},
                          "f": {"type": "string", "format": "uri"}, "tup": {"type": "array", "prefixItems": [{"type": "integer"}]}},
           "required": ["c", "missing"]}
    s = openapi_schema(raw)
    assert s["properties"]["c"] == {"enum": ["fixed"], "type": "string", "format": "enum"}
    assert s["properties"]["t"] == {"type": "string", "nullable": True}
    assert s["properties"]["u"] == {"anyOf": [{"type": "string"}, {"type": "integer"}]}
    assert s["properties"]["o"] == {"anyOf": [{"type": "string"}, {"type": "number"}]}
    assert s["properties"]["a"] == {"type": "string", "minLength": 2, "description": "d"}
    assert s["properties"]["f"] == {"type": "string"}
    assert s["properties"]["tup"] == {"type": "array", "items": {"type": "integer"}}
    assert s["required"] == ["c"] and "additionalProperties" not in s and "$schema" not in s


def conversation() -> list:
    return [
        UserMessage([TextBlock("Look"), ImageBlock(PNG)]),
        AssistantMessage(
            text="Checking.",
            tool_calls=[ToolCall(name="files.read", arguments={"password": "a"}, id="call_A",
                                 provider_data={"thoughtSignature": "SIG-A"}),
                        ToolCall(name="alpha", raw_arguments='{"password": "b"}', id="call_B")],
            reasoning=[Reasoning(text="Thinking.", signature="SIG-T", provider="google")],
            provider="google", provider_data={"text_signature": "SIG-X"},
        ),
        ToolResultMessage("call_A", "files.read", [TextBlock("first")]),
        ToolResultMessage("call_B", "alpha", [TextBlock("bad"), ImageBlock(PNG)], is_error=True),
        UserMessage("Now answer."),
    ]


def test_contents_thoughts_signatures_calls_and_one_result_turn() -> None:
    model = GeminiModel("gemini-2.5-flash")
    wire = model.to_wire(conversation())
    image = {"inlineData": {"mimeType": "image/png", "data": ImageBlock(PNG).base64}}
    assert wire == [
        {"role": "user", "parts": [{"text": "Look"}, image]},
        {"role": "model", "parts": [
            {"text": "Thinking.", "thought": True, "thoughtSignature": "SIG-T"},
            {"text": "Checking.", "thoughtSignature": "SIG-X"},
            {"functionCall": {"id": "call_A", "name": "files.read", "args": {"password": "a"}},
             "thoughtSignature": "SIG-A"},
            {"functionCall": {"id": "call_B", "name": "alpha", "args": {"password": "b"}}},
        ]},
        {"role": "user", "parts": [
            {"functionResponse": {"id": "call_A", "name": "files.read", "response": {"output": "first"}}},
            {"functionResponse": {"id": "call_B", "name": "alpha", "response": {"error": "bad"}}},
            image,
            {"text": "Now answer."},
        ]},
    ]
    assert model.wire_tool_result(conversation()[3]) == wire[2]["parts"][1]
    body, _ = model.build_request(conversation(), [make_tool("alpha")])
    assert body["contents"] == wire


def test_foreign_calls_on_gemini_3_get_the_documented_placeholder_signature() -> None:
    foreign = [
        UserMessage("hi"),
        AssistantMessage(tool_calls=[ToolCall(name="a", arguments={}, id="toolu_1"),
                                     ToolCall(name="a", arguments={}, id="toolu|2")],
                         reasoning=[Reasoning(text="t", signature="anthropic-sig", provider="anthropic")],
                         provider="anthropic"),
        ToolResultMessage("toolu_1", "a", [TextBlock("1")]),
        ToolResultMessage("toolu|2", "a", [TextBlock("2")]),
    ]
    old = GeminiModel("gemini-2.5-flash").to_wire(foreign)
    new = GeminiModel("gemini-3-pro-preview").to_wire(foreign)
    assert "thoughtSignature" not in json.dumps(old) and "anthropic-sig" not in json.dumps(new)
    assert new[1]["parts"][0]["thoughtSignature"] == SKIP_SIGNATURE and "thoughtSignature" not in new[1]["parts"][1]
    ids = [p["functionCall"]["id"] for p in new[1]["parts"]]
    assert ids[0] == "toolu_1" and re.fullmatch(r"[A-Za-z0-9_.:-]{1,64}", ids[1])
    assert [p["functionResponse"]["id"] for p in new[2]["parts"]] == ids


# --------------------------------------------------------------------------------------------------
# Coming in
# --------------------------------------------------------------------------------------------------
def test_recorded_parallel_calls_without_ids() -> None:
    deltas, msg = replay("parallel_tool_calls")
    first, second = msg.tool_calls
    assert (first.name, first.arguments, second.arguments) == (
        "secret_retrieval_tool", {"password": "mellon"}, {"password": "radiance"})
    assert first.raw_arguments is None  # Gemini sends objects, not text
    assert first.id and second.id and first.id != second.id  # generated
    assert first.provider_data["thoughtSignature"].startswith("CikB0e2Kbw5t") and not second.provider_data
    assert msg.stop_reason == "tool_use" and (msg.usage.input_tokens, msg.usage.output_tokens) == (70, 101)
    assert [d.partial_arguments for d in deltas if isinstance(d, ToolCallDelta)] == [
        {"password": "mellon"}, {"password": "radiance"}]


def test_recorded_empty_arguments_with_signature() -> None:
    _, msg = replay("empty_args_thought_signature")
    [call] = msg.tool_calls
    assert (call.name, call.arguments, call.raw_arguments) == ("get_country", {}, None)
    assert call.provider_data["thoughtSignature"].startswith("EpwICpkI")


def test_recorded_call_without_args_and_calls_streamed_as_partial_args() -> None:
    deltas, msg = replay("no_args_and_partial_args")
    assert [(c.name, c.arguments, c.incomplete) for c in msg.tool_calls] == [
        ("read_theme", {}, False), ("read_screen", {"id": "A"}, False),
        ("read_screen", {"id": "B"}, False), ("read_screen", {"id": "C"}, False)]
    assert msg.reasoning[0].text.startswith("**Processing User Requests**") and msg.text == ""
    assert len({c.id for c in msg.tool_calls}) == 4
    live = [d for d in deltas if isinstance(d, ToolCallDelta) and d.partial_arguments]
    assert [d.index for d in live] == [1, 1, 2, 2, 3, 3] and live[0].partial_arguments == {"id": "A"}


def test_recorded_thoughts_never_reach_the_text() -> None:
    deltas, msg = replay("thinking")
    assert msg.text == "3" and msg.reasoning[0].text.startswith("**Analyzing Prime Substrings**")
    assert "".join(d.text for d in deltas if isinstance(d, ReasoningDelta)) == msg.reasoning[0].text
    assert "".join(d.text for d in deltas if isinstance(d, TextDelta)) == "3"
    assert msg.usage.output_tokens > 1900  # thoughts are output tokens


def test_recorded_text_signature_is_kept() -> None:
    _, msg = replay("text_thought_signature")
    assert msg.text.startswith('There are **3** "r"s in strawberry.')
    assert msg.provider_data["text_signature"].startswith("Eo0HCooHAb4+")


def test_recorded_call_with_long_signature_and_max_tokens() -> None:
    _, msg = replay("tool_call_thought_signature")
    assert msg.tool_calls[0].arguments == {"location": "San Francisco"}
    assert len(msg.tool_calls[0].provider_data["thoughtSignature"]) > 1000
    _, cut = replay("max_tokens")
    assert cut.stop_reason == "max_tokens" and cut.text == "Here are all 50 U.S."


def test_partial_call_cut_by_max_tokens_is_incomplete() -> None:
    chunks = recorded_events("google", "no_args_and_partial_args")
    state = _StreamState()
    for chunk in chunks[:4]:  # read_theme whole, then read_screen started and its string still open
        state.process(chunk)
    state.process({"candidates": [{"content": {"parts": [], "role": "model"}, "finishReason": "MAX_TOKENS"}]})
    msg = state.result()
    assert msg.stop_reason == "max_tokens"
    assert [(c.name, c.incomplete) for c in msg.tool_calls] == [("read_theme", False), ("read_screen", True)]


def test_stream_without_finish_reason_is_cut() -> None:
    state = _StreamState()
    for chunk in recorded_events("google", "thinking")[:-1]:
        state.process(chunk)
    with pytest.raises(StreamError, match="finishReason"):
        state.result()


def test_malformed_call_keeps_the_finish_message() -> None:
    state = _StreamState()
    state.process({"candidates": [{"content": {"parts": [], "role": "model"}, "finishReason": "MALFORMED_FUNCTION_CALL",
                                   "finishMessage": "Malformed function call: print(x"}]})
    msg = state.result()
    assert msg.stop_reason == "error" and msg.provider_data["finish_message"].startswith("Malformed function call")


def test_error_chunk_and_blocked_prompt() -> None:
    with pytest.raises(OverloadedError, match="overloaded"):
        _StreamState().process({"error": {"code": 503, "message": "The model is overloaded.", "status": "UNAVAILABLE"}})
    state = _StreamState()
    state.process({"promptFeedback": {"blockReason": "SAFETY"}, "usageMetadata": {"promptTokenCount": 4}})
    assert state.result().stop_reason == "content_filter"


# --------------------------------------------------------------------------------------------------
# Over HTTP, with faults
# --------------------------------------------------------------------------------------------------
async def test_request_over_http(fake_server: FakeServer) -> None:
    fake_server.add(Reply.sse(recorded("google", "parallel_tool_calls")))
    model = model_for(fake_server)
    sent = []
    _, msg = await collect(model, [UserMessage("hi")], [make_tool("secret_retrieval_tool")], on_request=sent.append)
    req = fake_server.requests[0]
    assert req.path == "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
    assert req.headers["x-goog-api-key"] == KEY and KEY not in req.path
    assert sent == [req.json()] and KEY not in req.body.decode() and KEY not in repr(model)
    assert len(msg.tool_calls) == 2


@pytest.mark.parametrize("variable", ["GEMINI_API_KEY", "GOOGLE_API_KEY"])
async def test_environment_and_load_model(monkeypatch, fake_server: FakeServer, variable: str) -> None:
    monkeypatch.setenv(variable, KEY)
    monkeypatch.setenv("GOOGLE_GEMINI_BASE_URL", fake_server.url)
    fake_server.add(Reply.sse(recorded("google", "empty_args_thought_signature")))
    model = load_model("google:gemini-3-pro-preview")
    assert isinstance(model, GeminiModel)
    msg = await model.request([UserMessage("country?")])
    assert msg.tool_calls[0].name == "get_country" and fake_server.requests[0].headers["x-goog-api-key"] == KEY


async def test_missing_key(fake_server: FakeServer) -> None:
    with pytest.raises(AuthenticationError, match="GEMINI_API_KEY"):
        await GeminiModel("gemini-2.5-flash", base_url=fake_server.url).request([UserMessage("x")])


async def test_429_with_retry_after(fake_server: FakeServer, no_wait) -> None:
    policy, slept = no_wait
    fake_server.add(Reply.json(429, {"error": {"code": 429, "message": "Resource exhausted", "status":
                                               "RESOURCE_EXHAUSTED"}}, headers={"retry-after": "2"}),
                    Reply.sse(recorded("google", "parallel_tool_calls")))
    msg = await model_for(fake_server, policy=policy).request([UserMessage("x")])
    assert slept.delays == [2.0] and len(msg.tool_calls) == 2


async def test_503_overloaded_until_retries_run_out(fake_server: FakeServer, no_wait) -> None:
    policy, _ = no_wait
    fake_server.add(*[Reply.json(503, {"error": {"code": 503, "message": "The model is overloaded.",
                                                 "status": "UNAVAILABLE"}}) for _ in range(3)])
    with pytest.raises(OverloadedError) as info:
        await model_for(fake_server, policy=policy, max_retries=2).request([UserMessage("x")])
    assert info.value.status == 503 and KEY not in str(info.value)


async def test_rate_limit_error_inside_the_stream(fake_server: FakeServer) -> None:
    body = recorded("google", "thinking").split(b"\n\n")[0] + b"\n\n" + \
        b'data: {"error": {"code": 429, "message": "Quota exceeded", "status": "RESOURCE_EXHAUSTED"}}\n\n'
    await stream_fails(fake_server, model_for(fake_server), Reply.sse(body), RateLimitError, "Quota exceeded")


async def test_connection_dropped(fake_server: FakeServer) -> None:
    dropped = Reply.sse(recorded("google", "thinking"), drop_after=1500)
    await stream_fails(fake_server, model_for(fake_server), dropped, ProviderConnectionError)


async def test_cut_before_the_final_chunk(fake_server: FakeServer) -> None:
    body = cut_before(recorded("google", "thinking"), b'"finishReason"')
    await stream_fails(fake_server, model_for(fake_server), Reply.sse(body), StreamError, "finishReason")


async def test_malformed_chunk(fake_server: FakeServer) -> None:
    body = replace_event(recorded("google", "parallel_tool_calls.followup"), b'"finishReason"',
                         lambda _: b'data: {"candidates": [\n\n')
    await stream_fails(fake_server, model_for(fake_server), Reply.sse(body), StreamError, "malformed")


async def test_one_byte_chunks_split_utf8(fake_server: FakeServer) -> None:
    text = "Straße → 東京 🚀"
    body = (f'data: {json.dumps({"candidates": [{"content": {"parts": [{"text": text}], "role": "model"}}]})}\n\n'
            f'data: {json.dumps({"candidates": [{"content": {"parts": [{"text": "!"}], "role": "model"}, "finishReason": "STOP"}]})}\n\n'
            ).encode()
    message = await same_in_one_byte_chunks(fake_server, model_for(fake_server), body)
    assert message.text == text + "!"


# --------------------------------------------------------------------------------------------------
# A whole run
# --------------------------------------------------------------------------------------------------
async def test_agent_two_turns_second_request_field_by_field(fake_server: FakeServer) -> None:
    secret = make_tool("secret_retrieval_tool")
    fake_server.add(Reply.sse(recorded("google", "parallel_tool_calls")),
                    Reply.sse(recorded("google", "parallel_tool_calls.followup")))
    agent = Agent(model_for(fake_server), tools=[secret], instructions="Use parallel tool calling.")
    run = await agent.run("Please retrieve the secrets associated with each of these passwords: mellon,radiance")
    assert run.output.startswith('The secrets associated with the passwords "mellon" and "radiance"')
    assert run.requests == [r.json() for r in fake_server.requests]

    second = fake_server.requests[1].json()
    assert second["systemInstruction"] == {"parts": [{"text": "Use parallel tool calling."}]}
    assert second["tools"] == [{"functionDeclarations": [{
        "name": "secret_retrieval_tool", "description": "A tool that requires a password to retrieve a secret.",
        "parametersJsonSchema": secret.parameters}]}]
    user, model_turn, results = second["contents"]
    assert user == {"role": "user", "parts": [{"text": "Please retrieve the secrets associated with each of these "
                                                       "passwords: mellon,radiance"}]}
    first_id, second_id = (c.id for c in run.messages[1].tool_calls)
    signature = recorded_events("google", "parallel_tool_calls")[0]["candidates"][0]["content"]["parts"][0][
        "thoughtSignature"]
    assert model_turn == {"role": "model", "parts": [
        {"functionCall": {"id": first_id, "name": "secret_retrieval_tool", "args": {"password": "mellon"}},
         "thoughtSignature": signature},
        {"functionCall": {"id": second_id, "name": "secret_retrieval_tool", "args": {"password": "radiance"}}},
    ]}
    assert results == {"role": "user", "parts": [
        {"functionResponse": {"id": first_id, "name": "secret_retrieval_tool", "response": {"output": "secret"}}},
        {"functionResponse": {"id": second_id, "name": "secret_retrieval_tool", "response": {"output": "secret"}}},
    ]}
    # the same shape the API accepted in the recording's own second request (which sent no ids)
    reference = fixture_json("google", "parallel_tool_calls.followup.request.json")["contents"]
    assert [p["functionCall"]["name"] for p in model_turn["parts"]] == \
        [p["functionCall"]["name"] for p in reference[1]["parts"]]
    assert ["thoughtSignature" in p for p in model_turn["parts"]] == ["thoughtSignature" in p
                                                                      for p in reference[1]["parts"]]
    assert [p["functionResponse"]["name"] for p in results["parts"]] == \
        [p["functionResponse"]["name"] for p in reference[2]["parts"]]
    assert run.calls[1].wire == results["parts"][1]
    assert all(KEY not in json.dumps(r) for r in run.requests)


async def test_transcripts_from_other_providers_continue_on_gemini(fake_server: FakeServer) -> None:
    """A ScriptedModel turn, then an OpenAI Responses run with reasoning, continued on Gemini 3."""
    secret = make_tool("get_capital")
    scripted = ScriptedModel([AssistantMessage(tool_calls=[ToolCall(name="get_capital", arguments={"password": "x"})]),
                              "noted"])
    first = await Agent(scripted, tools=[secret]).run("warm up")
    fake_server.add(Reply.sse(recorded("openai_responses", "reasoning_text_tool_call")),
                    Reply.sse(recorded("openai_responses", "reasoning_text_tool_call.followup")),
                    Reply.sse(recorded("google", "parallel_tool_calls.followup")))
    responses = OpenAIResponsesModel("gpt-5.5", base_url=fake_server.url + "/v1", api_key=KEY)
    second = await Agent(responses, tools=[secret]).run("capital of PotatoLand?", history=first)
    await Agent(model_for(fake_server, "gemini-3-pro-preview"), tools=[secret]).run("thanks", history=second)
    contents = fake_server.requests[2].json()["contents"]
    assert [c["role"] for c in contents] == ["user", "model", "user", "model", "user", "model", "user", "model",
                                            "user"]
    text = json.dumps(contents)
    assert "encrypted_content" not in text and "gAAAA" not in text  # OpenAI's reasoning stays with OpenAI
    calls = [p for c in contents if c["role"] == "model" for p in c["parts"] if "functionCall" in p]
    answers = [p for c in contents if c["role"] == "user" for p in c["parts"] if "functionResponse" in p]
    assert [c["functionCall"]["id"] for c in calls] == [a["functionResponse"]["id"] for a in answers]
    assert all(c["thoughtSignature"] == SKIP_SIGNATURE for c in calls)  # foreign calls, Gemini 3
    assert contents[5]["parts"][0] == {"text": "I’ll check the capital lookup tool for “PotatoLand.”"}


async def test_overloaded_error_inside_the_stream_before_content_is_retried(fake_server: FakeServer, no_wait) -> None:
    policy, slept = no_wait
    fake_server.add(Reply.sse(b'data: {"error": {"code": 503, "message": "The model is overloaded.", '
                              b'"status": "UNAVAILABLE"}}\n\n'),
                    Reply.sse(recorded("google", "parallel_tool_calls")))
    sent = []
    msg = await model_for(fake_server, policy=policy).request([UserMessage("x")], on_request=sent.append)
    assert len(msg.tool_calls) == 2 and len(fake_server.requests) == 2 and len(sent) == 1 and len(slept.delays) == 1


def test_text_then_calls_in_one_response() -> None:
    """Derived: the recorded answer text of one Gemini 3 stream followed by the recorded call of another."""
    text_chunks = recorded_events("google", "text_thought_signature")[:2]
    call_chunks = recorded_events("google", "tool_call_thought_signature")
    state = _StreamState()
    deltas = [d for chunk in [*text_chunks, *call_chunks] for d in state.process(chunk)]
    msg = state.result()
    assert msg.text.startswith('There are **3** "r"s') and msg.tool_calls[0].arguments == {"location": "San Francisco"}
    assert msg.stop_reason == "tool_use"
    assert [type(d).__name__ for d in deltas] == ["TextDelta", "TextDelta", "ToolCallDelta"]
    parts = GeminiModel("gemini-3-pro-preview").to_wire([UserMessage("q"), msg])[1]["parts"]
    assert [next(iter(p)) for p in parts] == ["text", "functionCall"]
    assert parts[1]["thoughtSignature"] == msg.tool_calls[0].provider_data["thoughtSignature"]


def test_partial_args_paths_values_and_consistent_snapshots() -> None:
    def part(fc: dict) -> dict:
        return {"candidates": [{"content": {"role": "model", "parts": [{"functionCall": fc}]}}]}

    pieces = [f"line {i}\n" for i in range(2000)]
    chunks = [part({"name": "write", "willContinue": True})]
    chunks.append(part({"partialArgs": [{"jsonPath": "$.meta.count", "numberValue": 3},
                                        {"jsonPath": "$.meta['a b']", "boolValue": True},
                                        {"jsonPath": "$.tags[1]", "stringValue": "y"},
                                        {"jsonPath": "$.tags[0]", "stringValue": "x"}], "willContinue": True}))
    for piece in pieces:
        chunks.append(part({"partialArgs": [{"jsonPath": "$.content", "stringValue": piece, "willContinue": True}],
                            "willContinue": True}))
    chunks.append(part({"partialArgs": [{"jsonPath": "$.content", "stringValue": ""},
                                        {"jsonPath": "$.note", "nullValue": None}], "willContinue": True}))
    chunks.append(part({}))
    chunks.append({"candidates": [{"content": {"role": "model", "parts": [{"text": ""}]}, "finishReason": "STOP"}]})
    state = _StreamState()
    deltas = [d for c in chunks for d in state.process(c)]
    [call] = state.result().tool_calls
    content = "".join(pieces)
    assert call.arguments == {"meta": {"count": 3, "a b": True}, "tags": ["x", "y"], "content": content, "note": None}
    assert not call.incomplete and call.raw_arguments is None
    live = [d for d in deltas if isinstance(d, ToolCallDelta) and d.arguments_delta]
    assert live[4].partial_arguments == {"meta": {"count": 3, "a b": True}, "tags": ["x", "y"], "content": "line 0\n"}
    middle = live[1000].partial_arguments["content"]
    assert content.startswith(middle) and middle.count("\n") == 997
    assert live[-1].partial_arguments == call.arguments


def test_live_deltas_carry_the_generated_ids_of_the_calls() -> None:
    deltas, msg = replay("no_args_and_partial_args")
    calls = [d for d in deltas if isinstance(d, ToolCallDelta)]
    assert {d.index: d.id for d in calls} == {i: c.id for i, c in enumerate(msg.tool_calls)}
