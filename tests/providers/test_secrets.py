"""API keys never leave through an error, a redirect, a log, a record or a request body (each with a control)."""

from __future__ import annotations

import json
import logging
import traceback

import pytest

from nbagent import UserMessage
from nbagent.errors import AuthenticationError, ConfigurationError, ProviderError, StreamError
from nbagent.messages import AssistantMessage, TextBlock, ToolCall, ToolResultMessage
from nbagent.providers.anthropic import AnthropicModel
from nbagent.providers.google import GeminiModel
from nbagent.providers.mistral import MistralModel
from nbagent.providers.openai import OpenAIChatModel
from nbagent.providers.openai_responses import OpenAIResponsesModel

from .fakeserver import FakeServer, Reply

KEY = "sk-test-secret-key-0123456789abcdef"
"""Shaped like an OpenAI key (redacted by shape too)."""
PLAIN = "plainsecretvalue42"
"""A key with no well-known shape: only registration or the environment makes it a secret."""


def everything(error: BaseException, *extra: str) -> str:
    """Every text an exception shows: str, repr, its body, the traceback with its causes."""
    body = getattr(error, "body", None)
    return "\n".join([str(error), repr(error), json.dumps(body, default=str),
                      "".join(traceback.format_exception(error)), *extra])


def chat(server: FakeServer, key: str = PLAIN, cls=OpenAIChatModel, **kwargs):
    return cls("m", base_url=server.url + "/v1", api_key=key, max_retries=0, **kwargs)


# --------------------------------------------------------------------------------------------------
# Errors
# --------------------------------------------------------------------------------------------------
def test_provider_error_redacts_its_message_and_body_where_it_is_made(monkeypatch) -> None:
    monkeypatch.setenv("SOME_SERVICE_TOKEN", "tok-0123456789-service")
    error = StreamError(f"said {KEY} and tok-0123456789-service", body={"echo": [KEY]})
    assert KEY not in everything(error) and "tok-0123456789-service" not in everything(error)
    assert "[REDACTED:SOME_SERVICE_TOKEN]" in str(error)  # control: the rest of the message stays
    error.message = f"{error.message} then {KEY}"  # added to later, as the retry loop does
    assert KEY not in str(error) and KEY not in error.message and "then" in error.message


async def test_http_error_body_echoing_a_passed_key(fake_server: FakeServer, caplog) -> None:
    caplog.set_level(logging.DEBUG)
    fake_server.add(Reply.json(400, {"error": {"message": f"bad header value {PLAIN}", "key": PLAIN}}))
    with pytest.raises(ProviderError) as info:
        await chat(fake_server).request([UserMessage("hi")])
    assert PLAIN not in everything(info.value, caplog.text)
    assert "bad header value" in str(info.value)
    assert fake_server.requests[0].headers["authorization"] == f"Bearer {PLAIN}"  # control: it was sent


ERRORS_IN_A_200_STREAM = {
    "openai": (OpenAIChatModel, f'data: {{"error": {{"message": "key {PLAIN} over quota", "type": "x"}}}}\n\n'),
    "mistral": (MistralModel, f'data: {{"object": "error", "message": "key {PLAIN} refused"}}\n\n'),
    "anthropic": (AnthropicModel, 'event: error\ndata: {"type": "error", "error": {"type": "invalid_request_error", '
                                  f'"message": "key {PLAIN} refused"}}}}\n\n'),
    "responses": (OpenAIResponsesModel, f'data: {{"type": "error", "code": "bad", "message": "key {PLAIN} refused"}}\n\n'),
    "google": (GeminiModel, f'data: {{"error": {{"code": 400, "message": "key {PLAIN} refused"}}}}\n\n'),
}


@pytest.mark.parametrize("name", ERRORS_IN_A_200_STREAM)
async def test_error_inside_a_200_stream_never_shows_the_key(fake_server: FakeServer, name: str) -> None:
    cls, body = ERRORS_IN_A_200_STREAM[name]
    fake_server.add(Reply.sse(body))
    with pytest.raises(ProviderError) as info:
        await chat(fake_server, cls=cls).request([UserMessage("hi")])
    assert PLAIN not in everything(info.value)
    assert "refused" in str(info.value) or "over quota" in str(info.value)  # control: the message is kept


async def test_connection_error_never_shows_the_key(caplog) -> None:
    caplog.set_level(logging.DEBUG)
    model = OpenAIChatModel("m", base_url="http://127.0.0.1:9/v1", api_key=PLAIN, max_retries=1,
                            retry=None)
    model.http.retry.sleep = _no_sleep
    with pytest.raises(ProviderError) as info:
        await model.request([UserMessage(f"my key is {PLAIN}")])
    assert PLAIN not in everything(info.value, caplog.text)
    assert "could not connect" in str(info.value)


async def _no_sleep(_: float) -> None:
    return None


# --------------------------------------------------------------------------------------------------
# Redirects
# --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("cls, header", [(OpenAIChatModel, "authorization"), (AnthropicModel, "x-api-key"),
                                         (GeminiModel, "x-goog-api-key")])
async def test_credentials_never_follow_a_redirect_to_another_origin(fake_server: FakeServer, cls, header) -> None:
    other = await FakeServer().start()
    try:
        other.add(Reply.sse("data: {}\n\n"))
        fake_server.add(Reply(307, b"", headers={"location": other.url + "/v1/steal"}, content_type="text/plain"))
        model = cls("m", base_url=fake_server.url + ("/v1" if cls is OpenAIChatModel else ""), api_key=PLAIN,
                    max_retries=0)
        with pytest.raises(ProviderError, match="another origin") as info:
            await model.request([UserMessage("hi")])
        assert PLAIN not in everything(info.value)
        assert all(PLAIN not in json.dumps(r.headers) for r in other.requests)
        assert other.requests == []
        assert fake_server.requests[0].headers[header].endswith(PLAIN)  # control: the first origin got it
    finally:
        await other.close()


async def test_a_redirect_to_the_same_origin_is_followed_with_the_key(fake_server: FakeServer) -> None:
    fake_server.add(
        Reply(307, b"", headers={"location": fake_server.url + "/v2/chat/completions"}, content_type="text/plain"),
        Reply.sse('data: {"choices": [{"index": 0, "delta": {"content": "ok"}, "finish_reason": "stop"}]}\n\n'
                  "data: [DONE]\n\n"),
    )
    message = await chat(fake_server).request([UserMessage("hi")])
    assert message.text == "ok"
    assert fake_server.requests[1].path == "/v2/chat/completions"
    assert fake_server.requests[1].headers["authorization"] == f"Bearer {PLAIN}"


# --------------------------------------------------------------------------------------------------
# Loading keys
# --------------------------------------------------------------------------------------------------
async def test_key_from_the_environment_is_stripped(monkeypatch, fake_server: FakeServer) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", f"  {PLAIN}\n")
    fake_server.add(Reply.sse('data: {"choices": [{"index": 0, "delta": {"content": "ok"}, "finish_reason": '
                              '"stop"}]}\n\ndata: [DONE]\n\n'))
    model = OpenAIChatModel("m", base_url=fake_server.url + "/v1")
    assert (await model.request([UserMessage("hi")])).text == "ok"
    assert fake_server.requests[0].headers["authorization"] == f"Bearer {PLAIN}"


@pytest.mark.parametrize("bad", [f"{PLAIN[:5]}\n{PLAIN[5:]}", f"{PLAIN[:5]} {PLAIN[5:]}", f"{PLAIN}\x07x",
                                 f"{PLAIN}é"])
async def test_key_with_whitespace_controls_or_non_ascii_inside_is_refused(monkeypatch, fake_server, bad) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", bad)
    model = AnthropicModel("m", base_url=fake_server.url)
    with pytest.raises(AuthenticationError, match="ANTHROPIC_API_KEY") as info:
        await model.request([UserMessage("hi")])
    assert PLAIN[5:] not in everything(info.value) and bad not in everything(info.value)
    assert fake_server.requests == []
    with pytest.raises(ConfigurationError, match="api_key=") as info2:
        AnthropicModel("m", base_url=fake_server.url, api_key=bad)
    assert PLAIN[5:] not in everything(info2.value)
    AnthropicModel("m", base_url=fake_server.url, api_key=f"{PLAIN}\n")  # control: a trailing newline is fine


# --------------------------------------------------------------------------------------------------
# Request bodies
# --------------------------------------------------------------------------------------------------
async def test_secrets_in_the_transcript_are_redacted_in_the_body_sent_and_recorded(monkeypatch, fake_server) -> None:
    monkeypatch.setenv("WAREHOUSE_PASSWORD", "hunter2-warehouse-pw")
    fake_server.add(Reply.sse('data: {"choices": [{"index": 0, "delta": {"content": "ok"}, "finish_reason": '
                              '"stop"}]}\n\ndata: [DONE]\n\n'))
    call = ToolCall(name="read_env", arguments={}, id="call_1")
    messages = [
        UserMessage("what is in .env?"),
        AssistantMessage(tool_calls=[call], provider="openai"),
        ToolResultMessage("call_1", "read_env", [TextBlock(f"KEY={PLAIN}\nPW=hunter2-warehouse-pw\nUSER=ann")]),
    ]
    recorded = []
    await chat(fake_server).request(messages, on_request=recorded.append)
    sent = fake_server.requests[0].body.decode()
    for text in (sent, json.dumps(recorded)):
        # known secrets (the environment's, keys given in code) never leave in a body; a value that only has a
        # key's shape is the secret gate's to stop when a tool's result is made (tests/security/
        # test_secrets_gate.py), and a body sends the conversation's earlier turns as they were
        assert "hunter2-warehouse-pw" not in text and PLAIN not in text
        assert "USER=ann" in text and "[REDACTED:WAREHOUSE_PASSWORD]" in text  # control: the rest stays
