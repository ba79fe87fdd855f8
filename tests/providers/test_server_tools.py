"""Server-side tools (Anthropic server_tool_use and result blocks, Responses built-in tool items) replayed from
real recorded streams: never client calls, kept whole, sent back unchanged to the same provider only."""

from __future__ import annotations

import dataclasses
import json

import pytest

from nbagent.messages import AssistantMessage, TextBlock, ToolCall, ToolResultMessage, UserMessage
from nbagent.providers.anthropic import FINE_GRAINED_BETA, AnthropicModel
from nbagent.providers.google import GeminiModel
from nbagent.providers.mistral import MISTRAL, MistralModel
from nbagent.providers.openai import OpenAIChatModel
from nbagent.providers.openai_responses import OpenAIResponsesModel

from .fakeserver import FakeServer, Reply, load_stream
from .replay import collect, make_tool, recorded

KEY = "sk-server-tools-0123456789"


async def replay(server: FakeServer, model, provider: str, name: str):
    server.add(Reply.sse(recorded(provider, name)))
    return await collect(model, [UserMessage("question")])


def anthropic(server: FakeServer, **options) -> AnthropicModel:
    return AnthropicModel("claude-sonnet-4-5", base_url=server.url, api_key=KEY, **options)


# --------------------------------------------------------------------------------------------------
# Anthropic
# --------------------------------------------------------------------------------------------------
async def test_anthropic_web_search_is_not_a_client_call(fake_server: FakeServer) -> None:
    deltas, msg = await replay(fake_server, anthropic(fake_server), "anthropic", "web_search_tool")
    assert msg.tool_calls == [] and msg.stop_reason == "end_turn"
    assert not [d for d in deltas if type(d).__name__ == "ToolCallDelta"]
    use, result = msg.provider_data["server_blocks"]
    assert use["type"] == "server_tool_use" and use["name"] == "web_search"
    assert use["input"] == {"query": "tech news today September 26 2025"}  # the streamed input, parsed
    assert result["type"] == "web_search_tool_result" and result["tool_use_id"] == use["id"]
    assert result["content"][0]["encrypted_content"]  # kept whole, as it came
    assert msg.text.strip()


async def test_anthropic_server_and_client_tools_in_one_response(fake_server: FakeServer) -> None:
    model = anthropic(fake_server)
    _, msg = await replay(fake_server, model, "anthropic", "tool_search_regex")
    assert [c.name for c in msg.tool_calls] == ["get_temp_data"]  # the client call, and only it
    assert msg.tool_calls[0].id == "toolu_01UmPwkecewaEpMupy2ywk8b" and msg.stop_reason == "tool_use"
    assert [b["type"] for b in msg.provider_data["server_blocks"]] == ["server_tool_use", "tool_search_tool_result"]
    # the next request sends the blocks back unchanged, before the text and the tool_use
    result = ToolResultMessage(msg.tool_calls[0].id, "get_temp_data", [TextBlock("21 C")])
    body, _ = model.build_request([UserMessage("question"), msg, result], [make_tool("get_temp_data")])
    content = body["messages"][1]["content"]
    assert [b["type"] for b in content] == ["server_tool_use", "tool_search_tool_result", "text", "tool_use"]
    assert content[:2] == msg.provider_data["server_blocks"]
    # and the recorded answer to that request reads as usual
    fake_server.add(Reply.sse(recorded("anthropic", "tool_search_regex.followup")))
    _, answer = await collect(model, [UserMessage("question"), msg, result])
    assert answer.tool_calls == [] and answer.text


async def test_anthropic_code_execution_blocks_and_container(fake_server: FakeServer) -> None:
    _, msg = await replay(fake_server, anthropic(fake_server), "anthropic", "code_execution_20250825")
    assert msg.tool_calls == []
    kinds = [b["type"] for b in msg.provider_data["server_blocks"]]
    assert kinds == ["server_tool_use", "text_editor_code_execution_tool_result", "server_tool_use",
                     "bash_code_execution_tool_result"]
    assert msg.provider_data["container"]["id"].startswith("container_")


@pytest.mark.parametrize("target", [OpenAIChatModel, OpenAIResponsesModel, GeminiModel, MistralModel])
async def test_anthropic_server_blocks_never_reach_another_provider(fake_server: FakeServer, target) -> None:
    _, msg = await replay(fake_server, anthropic(fake_server), "anthropic", "tool_search_regex")
    result = ToolResultMessage(msg.tool_calls[0].id, "get_temp_data", [TextBlock("21 C")])
    body, _ = target("m").build_request([UserMessage("question"), msg, result], [make_tool("get_temp_data")])
    text = json.dumps(body)
    assert "server_tool_use" not in text and "tool_search_tool_result" not in text
    assert "get_temp_data" in text  # control: the client call and its result went


# --------------------------------------------------------------------------------------------------
# OpenAI Responses
# --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name, kind, n", [("web_search_tool", "web_search_call", 6),
                                           ("code_interpreter_tool", "code_interpreter_call", 3)])
async def test_responses_built_in_tool_items(fake_server: FakeServer, name, kind, n) -> None:
    model = OpenAIResponsesModel("gpt-5", base_url=fake_server.url + "/v1", api_key=KEY)
    deltas, msg = await replay(fake_server, model, "openai_responses", name)
    assert msg.tool_calls == [] and msg.stop_reason == "end_turn" and msg.text
    assert not [d for d in deltas if type(d).__name__ == "ToolCallDelta"]
    items = msg.provider_data["server_items"]
    assert [i["type"] for i in items] == [kind] * n
    body, _ = model.build_request([UserMessage("question"), msg, UserMessage("thanks")])
    sent = [i for i in body["input"] if i.get("type") == kind]
    assert sent == items  # unchanged
    types = [i.get("type") for i in body["input"][1:-1]]
    assert types.index(kind) < types.index("message")  # before the answer's text
    other = json.dumps(AnthropicModel("m").build_request([UserMessage("question"), msg, UserMessage("thanks")])[0],
                       ensure_ascii=False)
    assert kind not in other and json.dumps(msg.text[:40], ensure_ascii=False)[1:-1] in other  # control: text went


# --------------------------------------------------------------------------------------------------
# Fine-grained tool streaming
# --------------------------------------------------------------------------------------------------
def test_eager_input_streaming_per_tool_or_through_the_beta_header() -> None:
    tools = [make_tool("a"), make_tool("b")]
    eager = AnthropicModel("m", eager_input_streaming=True)
    body, _ = eager.build_request([UserMessage("x")], tools)
    assert all(t["eager_input_streaming"] is True for t in body["tools"])
    assert "anthropic-beta" not in eager.auth_headers(KEY)
    beta = AnthropicModel("m", eager_input_streaming="beta", beta="other-beta")
    body, _ = beta.build_request([UserMessage("x")], tools)
    assert not any("eager_input_streaming" in t for t in body["tools"])
    assert beta.auth_headers(KEY)["anthropic-beta"] == f"other-beta,{FINE_GRAINED_BETA}"
    plain = AnthropicModel("m")  # control: off by default
    assert not any("eager_input_streaming" in t for t in plain.build_request([UserMessage("x")], tools)[0]["tools"])
    assert "anthropic-beta" not in plain.auth_headers(KEY)


async def test_eager_input_streaming_invalid_json_is_kept_raw_not_guessed(fake_server: FakeServer) -> None:
    events = [
        {"type": "message_start", "message": {"id": "m", "model": "x", "usage": {}}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "tool_use", "id": "t", "name": "a",
                                                                       "input": {}}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta",
                                                              "partial_json": '{"password": "x'}},
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "tool_use"}},
        {"type": "message_stop"},
    ]
    fake_server.add(Reply.sse("".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events)))
    _, msg = await collect(anthropic(fake_server, eager_input_streaming=True), [UserMessage("x")], [make_tool("a")])
    call = msg.tool_calls[0]
    assert call.arguments is None and call.raw_arguments == '{"password": "x'  # the repair ladder decides


# --------------------------------------------------------------------------------------------------
# Mistral: a stateless profile
# --------------------------------------------------------------------------------------------------
async def test_mistral_model_holds_no_request_state(fake_server: FakeServer) -> None:
    model = MistralModel("mistral-large-latest", base_url=fake_server.url + "/v1", api_key=KEY)
    before = dict(vars(model))
    foreign = AssistantMessage(tool_calls=[ToolCall(name="a", arguments={}, id="call_from_elsewhere_1")],
                               provider="openai")
    result = ToolResultMessage("call_from_elsewhere_1", "a", [TextBlock("ok")])
    fake_server.add(Reply.sse(load_stream("mistral", "tool-call")))
    await collect(model, [UserMessage("x"), foreign, result], [make_tool("a")])
    model.wire_tool_result(result)
    model.to_wire([UserMessage("x"), foreign, result])
    assert vars(model).keys() == before.keys() and all(vars(model)[k] is before[k] for k in before if k != "http")
    with pytest.raises(dataclasses.FrozenInstanceError):
        MISTRAL.call_id_length = 3  # type: ignore[misc]
    sent = fake_server.requests[0].json()["messages"]
    assert sent[1]["tool_calls"][0]["id"] == sent[2]["tool_call_id"] == model.wire_tool_result(result)["tool_call_id"]


async def test_mistral_error_inside_the_stream_is_retried_like_the_others(fake_server: FakeServer, no_wait) -> None:
    policy, sleeps = no_wait
    error = {"object": "error", "message": "Service unavailable, try again", "type": "service_unavailable"}
    fake_server.add(Reply.sse(f"data: {json.dumps(error)}\n\n"), Reply.sse(load_stream("mistral", "tool-call")))
    model = MistralModel("mistral-large-latest", base_url=fake_server.url + "/v1", api_key=KEY, retry=policy)
    _, msg = await collect(model, [UserMessage("x")], [make_tool("a")])
    assert msg.tool_calls and len(fake_server.requests) == 2 and len(sleeps.delays) == 1
