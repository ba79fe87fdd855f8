"""A conversation begun on one provider continues on Anthropic, OpenAI Responses and Gemini.

Each source turn is a real recorded response read by its own adapter (or a `ScriptedModel` turn); the
target gets the transcript with results and must send a body its API accepts: ids and names in its
charset, every call answered right after it, no other provider's reasoning or signatures.
"""

from __future__ import annotations

import json
import re
from typing import Any, Callable

import pytest

from nbagent import Agent, tool
from nbagent.messages import (
    AssistantMessage,
    Message,
    TextBlock,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from nbagent.providers.anthropic import AnthropicModel
from nbagent.providers.google import SKIP_SIGNATURE, GeminiModel
from nbagent.providers.mistral import MistralModel
from nbagent.providers.openai import OpenAIChatModel
from nbagent.providers.openai_responses import OpenAIResponsesModel
from nbagent.providers.scripted import ScriptedModel
from nbagent.transcript import check_transcript

from .fakeserver import FakeServer, Reply, load_stream
from .replay import recorded

KEY = "sk-cross-provider-0123456789SECRET"


@tool(read_only=True)
def lookup(password: str = "") -> str:
    """Look something up."""
    return "found"


SOURCES: dict[str, tuple[Callable[[str], Any], bytes | None]] = {
    "openai-deepseek-reasoning": (lambda url: OpenAIChatModel("deepseek-reasoner", base_url=url + "/v1", api_key=KEY),
                                  load_stream("openai", "deepseek-reasoning-tool-call")),
    "openai-parallel": (lambda url: OpenAIChatModel("gpt-4o", base_url=url + "/v1", api_key=KEY),
                        load_stream("openai", "parallel-tool-calls")),
    "mistral": (lambda url: MistralModel("mistral-small-latest", base_url=url + "/v1", api_key=KEY),
                load_stream("mistral", "null-id-continuation")),
    "anthropic": (lambda url: AnthropicModel("claude", base_url=url, api_key=KEY),
                  recorded("anthropic", "parallel_tool_calls")),
    "openai-responses": (lambda url: OpenAIResponsesModel("gpt-5", base_url=url + "/v1", api_key=KEY),
                         recorded("openai_responses", "reasoning_summary_tool_call")),
    "google": (lambda url: GeminiModel("gemini-3-pro-preview", base_url=url, api_key=KEY),
               recorded("google", "no_args_and_partial_args")),
    "scripted": (lambda url: ScriptedModel([AssistantMessage(text="Let me see.", tool_calls=[
        ToolCall(name="files.read", arguments={"password": "x"}),
        ToolCall(name="lookup", raw_arguments='{"password": "y",}')])]), None),
}

TARGETS: dict[str, tuple[Callable[[str], Any], bytes]] = {
    "anthropic": (lambda url: AnthropicModel("claude-sonnet-4-5", base_url=url, api_key=KEY, thinking=1024),
                  recorded("anthropic", "parallel_tool_calls.followup")),
    "openai-responses": (lambda url: OpenAIResponsesModel("gpt-5", base_url=url + "/v1", api_key=KEY),
                         recorded("openai_responses", "parallel_tool_calls.followup")),
    "google": (lambda url: GeminiModel("gemini-3-pro-preview", base_url=url, api_key=KEY),
               recorded("google", "parallel_tool_calls.followup")),
}


async def source_transcript(server: FakeServer, name: str) -> list[Message]:
    """The user's question, the source's real response, and a result for each of its calls."""
    make, stream = SOURCES[name]
    if stream is not None:
        server.add(Reply.sse(stream))
    model = make(server.url)
    response = await model.request([UserMessage("Question?")], [lookup])
    assert response.tool_calls, f"{name}: the recorded response has no tool call"
    results = [ToolResultMessage(c.id, c.name, [TextBlock(f"result {i}")], is_error=i == 1)
               for i, c in enumerate(response.tool_calls)]
    return [UserMessage("Question?"), response, *results]


def check_anthropic(body: dict[str, Any], source: list[Message]) -> None:
    messages = body["messages"]
    roles = [m["role"] for m in messages]
    assert all(a != b for a, b in zip(roles, roles[1:])), roles  # alternating
    uses = [b for b in messages[1]["content"] if b["type"] == "tool_use"]
    results = [b for b in messages[2]["content"] if b["type"] == "tool_result"]
    assert [u["id"] for u in uses] == [r["tool_use_id"] for r in results]
    assert all(re.fullmatch(r"[a-zA-Z0-9_-]{1,64}", u["id"]) for u in uses)
    assert all(re.fullmatch(r"[a-zA-Z0-9_-]{1,64}", u["name"]) for u in uses)
    assert all(isinstance(u["input"], dict) for u in uses)
    assert messages[2]["content"][0]["type"] == "tool_result"  # results first in their message
    foreign = source[1].provider != "anthropic"
    if foreign:
        assert not any(b["type"] in ("thinking", "redacted_thinking") for b in messages[1]["content"])
        assert "thinking" not in body  # the tool loop began without thinking


def check_responses(body: dict[str, Any], source: list[Message]) -> None:
    items = body["input"]
    calls = [i for i in items if i.get("type") == "function_call"]
    outputs = [i for i in items if i.get("type") == "function_call_output"]
    assert [c["call_id"] for c in calls] == [o["call_id"] for o in outputs]
    assert all(re.fullmatch(r"[A-Za-z0-9_-]{1,64}", c["name"]) for c in calls)
    assert all(isinstance(c["arguments"], str) for c in calls)
    if source[1].provider != "openai-responses":
        assert not any(i.get("type") == "reasoning" for i in items)
    else:
        assert any(i.get("type") == "reasoning" and i.get("encrypted_content") for i in items)
    assert outputs[1]["output"].startswith("Error: ") if len(outputs) > 1 else True


def check_google(body: dict[str, Any], source: list[Message]) -> None:
    contents = body["contents"]
    assert [c["role"] for c in contents] == ["user", "model", "user"]
    calls = [p for p in contents[1]["parts"] if "functionCall" in p]
    answers = [p for p in contents[2]["parts"] if "functionResponse" in p]
    assert [c["functionCall"]["id"] for c in calls] == [a["functionResponse"]["id"] for a in answers]
    assert [c["functionCall"]["name"] for c in calls] == [a["functionResponse"]["name"] for a in answers]
    assert all(re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.:-]{0,63}", c["functionCall"]["name"]) for c in calls)
    assert "thoughtSignature" in calls[0]  # Gemini 3 wants one on the first call of a turn
    if source[1].provider != "google":
        assert calls[0]["thoughtSignature"] == SKIP_SIGNATURE
        assert not any(p.get("thought") for p in contents[1]["parts"])
    if len(answers) > 1:
        assert "error" in answers[1]["functionResponse"]["response"]


CHECKS = {"anthropic": check_anthropic, "openai-responses": check_responses, "google": check_google}


@pytest.mark.parametrize("target", list(TARGETS))
@pytest.mark.parametrize("source", list(SOURCES))
async def test_conversation_continues_on_another_provider(fake_server: FakeServer, source: str, target: str) -> None:
    history = await source_transcript(fake_server, source)
    assert check_transcript(history) == []
    make, answer = TARGETS[target]
    fake_server.add(Reply.sse(answer))
    run = await Agent(make(fake_server.url), tools=[lookup]).run(None, history=history)
    body = fake_server.requests[-1].json()
    assert run.requests[-1] == body
    CHECKS[target](body, history)
    assert run.output  # the target's recorded answer was read
    assert KEY not in json.dumps(body)
    # nothing of another provider's reasoning travels: no signature or encrypted blob of the source
    for r in history[1].reasoning:
        if (r.provider or history[1].provider) != TARGETS_PROVIDER[target]:
            for secret in (r.signature, r.encrypted):
                assert not secret or secret not in json.dumps(body)


TARGETS_PROVIDER = {"anthropic": "anthropic", "openai-responses": "openai-responses", "google": "google"}
