"""The shared HTTP layer: SSE decoding, retries, error mapping, keys kept out of everything."""

from __future__ import annotations

import asyncio
import email.utils
import json
import logging
import time
import traceback

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nbagent.errors import (
    AuthenticationError,
    BadRequestError,
    ContextLengthError,
    ModelError,
    NotFoundError,
    OverloadedError,
    PermissionDeniedError,
    ProviderConnectionError,
    RateLimitError,
    ServerError,
    StreamError,
)
from nbagent.providers._http import (
    ProviderHTTP,
    RetryPolicy,
    Secret,
    ServerSentEvent,
    SSEDecoder,
    error_message,
    is_context_length_message,
    map_http_error,
    parse_retry_after,
)
from nbagent.providers._model import HTTPModel
from tests.helpers import examples

from .fakeserver import FakeServer, Reply

KEY = "sk-test-0123456789abcdefSECRET"


# --------------------------------------------------------------------------------------------------
# SSE
# --------------------------------------------------------------------------------------------------
SAMPLE = (
    ": a comment\n"
    "event: message_start\n"
    'data: {"a": "h\u00e9llo \U0001F600"}\n'
    "\n"
    "data: line one\n"
    "data: line two\n"
    "id: 7\n"
    "\n"
    "event: ping\n"
    "data:no-space\n"
    "retry: 1500\n"
    "\n"
    "data\n"
    "\n"
    "event: no-data\n"
    "\n"
    "data: [DONE]\n"
    "\n"
)
EXPECTED = [
    ServerSentEvent("message_start", '{"a": "h\u00e9llo \U0001F600"}'),
    ServerSentEvent("message", "line one\nline two", "7"),
    ServerSentEvent("ping", "no-space", "7", 1500),
    ServerSentEvent("message", "", "7"),
    ServerSentEvent("message", "[DONE]", "7"),
]


def decode_all(chunks: list[bytes]) -> list[ServerSentEvent]:
    decoder = SSEDecoder()
    out: list[ServerSentEvent] = []
    for chunk in chunks:
        out.extend(decoder.feed(chunk))
    out.extend(decoder.end())
    return out


@pytest.mark.parametrize("newline", ["\n", "\r\n", "\r"])
def test_sse_every_split_point(newline: str) -> None:
    raw = SAMPLE.replace("\n", newline).encode("utf-8")
    for cut in range(len(raw) + 1):
        assert decode_all([raw[:cut], raw[cut:]]) == EXPECTED, (newline, cut)


def test_sse_one_byte_at_a_time_splits_utf8() -> None:
    raw = SAMPLE.replace("\n", "\r\n").encode("utf-8")
    assert decode_all([raw[i : i + 1] for i in range(len(raw))]) == EXPECTED


def test_sse_crlf_split_between_cr_and_lf() -> None:
    assert decode_all([b"data: a\r", b"\n\r", b"\ndata: b\r\n\r\n"]) == [ServerSentEvent(data="a"),
                                                                         ServerSentEvent(data="b")]


def test_sse_last_event_without_blank_line_is_flushed() -> None:
    decoder = SSEDecoder()
    assert decoder.feed(b"data: {\"x\": 1}") == []
    assert decoder.pending
    assert decoder.end() == [ServerSentEvent(data='{"x": 1}')]


def test_sse_invalid_utf8_is_replaced() -> None:
    assert decode_all([b"data: \xff\xfe ok\n\n"]) == [ServerSentEvent(data="\ufffd\ufffd ok")]


def test_sse_unicode_line_separators_inside_data_are_kept() -> None:
    # U+2028 is valid unescaped inside JSON strings; str.splitlines() would break the line there
    assert decode_all(['data: {"t": "a\u2028b\x85c"}\n\n'.encode()]) == [ServerSentEvent(data='{"t": "a\u2028b\x85c"}')]


_field_text = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\r\n"), max_size=12)


@settings(max_examples=examples(200), deadline=None)
@given(
    events=st.lists(st.tuples(st.sampled_from(["", "message_start", "ping", "delta"]),
                              st.lists(_field_text, min_size=1, max_size=3)), min_size=1, max_size=6),
    newline=st.sampled_from(["\n", "\r\n", "\r"]),
    cuts=st.lists(st.integers(0, 10**6), max_size=10),
)
def test_sse_random_streams_and_splits(events, newline, cuts) -> None:
    text = ""
    for name, lines in events:
        if name:
            text += f"event: {name}{newline}"
        text += "".join(f"data: {line}{newline}" for line in lines) + newline
    raw = text.encode("utf-8")
    points = sorted({c % (len(raw) + 1) for c in cuts})
    pieces = [raw[a:b] for a, b in zip([0] + points, points + [len(raw)])]
    expected = [ServerSentEvent(name or "message", "\n".join(lines)) for name, lines in events]
    assert decode_all(pieces) == expected


# --------------------------------------------------------------------------------------------------
# Retry-After and errors
# --------------------------------------------------------------------------------------------------
def test_retry_after_forms() -> None:
    now = time.time()
    date = email.utils.formatdate(now + 30, usegmt=True)
    assert parse_retry_after({"retry-after": "7"}) == 7.0
    assert parse_retry_after({"retry-after": "1.5"}) == 1.5
    assert 28 <= parse_retry_after({"retry-after": date}, now=now) <= 31
    assert parse_retry_after({"retry-after": email.utils.formatdate(now - 60, usegmt=True)}, now=now) == 0.0
    assert parse_retry_after({"retry-after-ms": "250", "retry-after": "9"}) == 0.25
    assert parse_retry_after({"retry-after": "soon"}) is None
    assert parse_retry_after({}) is None


def test_backoff_grows_with_jitter_and_is_capped() -> None:
    policy = RetryPolicy(base_delay=1.0, max_delay=5.0, jitter=0.25)
    for retry, full in [(1, 1.0), (2, 2.0), (3, 4.0), (4, 5.0), (9, 5.0)]:
        for _ in range(20):
            assert full * 0.75 <= policy.backoff(retry) <= full
    assert policy.backoff(3, retry_after=12.0) == 12.0


@pytest.mark.parametrize(
    ("status", "payload", "exc"),
    [
        (401, {"error": {"message": "Incorrect API key provided", "type": "invalid_request_error"}},
         AuthenticationError),
        (403, {"error": {"type": "permission_error", "message": "no access to model"}}, PermissionDeniedError),
        (404, {"error": {"message": "The model `gpt-9` does not exist"}}, NotFoundError),
        (429, {"error": {"message": "Rate limit reached", "type": "requests"}}, RateLimitError),
        (529, {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}, OverloadedError),
        (503, {"error": {"message": "Service Unavailable"}}, OverloadedError),
        (500, {"error": {"message": "boom"}}, ServerError),
        (502, "<html>Bad Gateway</html>", ServerError),
        (400, {"error": {"message": "This model's maximum context length is 128000 tokens. However, your messages "
                                    "resulted in 130000 tokens.", "code": "context_length_exceeded"}},
         ContextLengthError),
        (400, {"type": "error", "error": {"type": "invalid_request_error",
                                          "message": "prompt is too long: 210000 tokens > 200000 maximum"}},
         ContextLengthError),
        (400, {"error": {"code": 400, "message": "The input token count (1200000) exceeds the maximum number of "
                                                 "tokens allowed (1048576).", "status": "INVALID_ARGUMENT"}},
         ContextLengthError),
        (400, {"error": {"message": "Invalid schema for function 'add': 'integer' is not valid"}}, BadRequestError),
        (422, {"object": "error", "message": {"detail": [{"loc": ["body", "messages", 1, "role"],
                                                          "msg": "Unexpected role"}]}, "type": "invalid_request_error"},
         BadRequestError),
        (422, {"detail": [{"loc": ["body", "tools", 0], "msg": "field required"}]}, BadRequestError),
    ],
)
def test_map_http_error(status, payload, exc) -> None:
    error = map_http_error("prov", status, payload, key_env=["PROV_API_KEY"])
    assert type(error) is exc
    assert error.status == status and error.provider == "prov" and error.body == payload
    message = error_message(payload)
    assert message and message in str(error)


def test_authentication_error_names_the_variable() -> None:
    error = map_http_error("openai", 401, {"error": {"message": "bad key"}}, key_env=["OPENAI_API_KEY"])
    assert "OPENAI_API_KEY" in str(error) and "bad key" in str(error)


def test_unprocessable_detail_list_is_readable() -> None:
    error = map_http_error("mistral", 422, {"detail": [{"loc": ["body", "tools", 0, "name"], "msg": "bad name"}]})
    assert "body.tools.0.name: bad name" in str(error)


def test_context_length_detection() -> None:
    assert is_context_length_message("Please reduce the length of the messages or completion.")
    assert is_context_length_message("input is too long for requested model")
    assert not is_context_length_message("Invalid value for 'temperature'")


def test_errors_scrub_the_key() -> None:
    payload = {"error": {"message": f"Incorrect API key provided: {KEY}."}}
    error = map_http_error("openai", 401, payload, secrets=[KEY])
    assert KEY not in str(error) and KEY not in repr(error) and KEY not in json.dumps(error.body)


# --------------------------------------------------------------------------------------------------
# The client against a real local server
# --------------------------------------------------------------------------------------------------
def http(server: FakeServer, policy: RetryPolicy | None = None, **kwargs) -> ProviderHTTP:
    return ProviderHTTP("prov", server.url + "/v1", headers=lambda: {"authorization": f"Bearer {KEY}"},
                        secrets=lambda: [KEY], key_env=["PROV_API_KEY"], retry=policy, **kwargs)


async def collect(client: ProviderHTTP, body=None, **kwargs) -> list[ServerSentEvent]:
    return [e async for e in client.stream_events("/chat", body or {"x": 1}, **kwargs)]


STREAM = b'data: {"n": 1}\n\ndata: {"n": 2}\n\ndata: [DONE]\n\n'


async def test_stream_events_and_request_recorded(fake_server: FakeServer) -> None:
    fake_server.add(Reply.sse(STREAM))
    bodies = []
    client = http(fake_server)
    events = await collect(client, {"model": "m"}, on_request=bodies.append)
    assert [e.data for e in events] == ['{"n": 1}', '{"n": 2}', "[DONE]"]
    assert bodies == [{"model": "m"}]
    req = fake_server.requests[0]
    assert req.path == "/v1/chat" and req.json() == {"model": "m"}
    assert req.headers["authorization"] == f"Bearer {KEY}" and req.headers["accept"] == "text/event-stream"
    await client.aclose()


async def test_one_byte_chunks(fake_server: FakeServer, monkeypatch) -> None:
    body = 'data: {"t": "h\u00e9llo \U0001F600 \u4e16\u754c"}\r\n\r\ndata: [DONE]\r\n\r\n'.encode()
    fake_server.add(Reply.sse(body, chunk_size=1))
    fed: list[bytes] = []
    feed = SSEDecoder.feed
    monkeypatch.setattr(SSEDecoder, "feed", lambda self, data: fed.append(data) or feed(self, data))
    events = await collect(http(fake_server))
    assert fed == [body[i:i + 1] for i in range(len(body))]  # the decoder is given one byte at a time
    assert [e.data for e in events] == ['{"t": "h\u00e9llo \U0001F600 \u4e16\u754c"}', "[DONE]"]


async def test_retries_429_honouring_retry_after_then_succeeds(fake_server: FakeServer, no_wait) -> None:
    policy, slept = no_wait
    fake_server.add(
        Reply.json(429, {"error": {"message": "slow down"}}, headers={"retry-after": "3"}),
        Reply.json(529, {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
        Reply.json(503, {"error": {"message": "unavailable"}}, headers={"retry-after-ms": "1500"}),
        Reply.sse(STREAM),
    )
    events = await collect(http(fake_server, policy))
    assert len(events) == 3 and len(fake_server.requests) == 4
    assert slept.delays[0] == 3.0 and slept.delays[2] == 1.5
    assert 0.5 * 0.75 * 2 <= slept.delays[1] <= 1.0  # the second retry's backoff, with jitter
    assert all(r.body == fake_server.requests[0].body for r in fake_server.requests)


async def test_retry_after_as_http_date(fake_server: FakeServer, no_wait) -> None:
    policy, slept = no_wait
    date = email.utils.formatdate(time.time() + 20, usegmt=True)
    fake_server.add(Reply.json(429, {"error": {"message": "later"}}, headers={"retry-after": date}), Reply.sse(STREAM))
    await collect(http(fake_server, policy))
    assert 17 <= slept.delays[0] <= 21


async def test_retries_are_bounded(fake_server: FakeServer, no_wait) -> None:
    policy, slept = no_wait
    policy.max_retries = 2
    fake_server.add(*[Reply.json(500, {"error": {"message": "boom"}}) for _ in range(5)])
    with pytest.raises(ServerError, match="boom.*after 3 attempts") as info:
        await collect(http(fake_server, policy))
    assert len(fake_server.requests) == 3 and len(slept.delays) == 2
    assert info.value.status == 500


async def test_long_retry_after_is_not_waited_for(fake_server: FakeServer, no_wait) -> None:
    policy, slept = no_wait
    fake_server.add(Reply.json(429, {"error": {"message": "quota"}}, headers={"retry-after": "3600"}))
    with pytest.raises(RateLimitError) as info:
        await collect(http(fake_server, policy))
    assert info.value.retry_after == 3600 and slept.delays == []


async def test_insufficient_quota_is_not_retried(fake_server: FakeServer, no_wait) -> None:
    policy, slept = no_wait
    fake_server.add(Reply.json(429, {"error": {"message": "You exceeded your quota", "type": "insufficient_quota"}}))
    with pytest.raises(RateLimitError, match="exceeded your quota"):
        await collect(http(fake_server, policy))
    assert slept.delays == []


async def test_client_errors_are_not_retried(fake_server: FakeServer, no_wait) -> None:
    policy, slept = no_wait
    fake_server.add(Reply.json(400, {"error": {"message": "Invalid 'messages[1].role'"}}))
    with pytest.raises(BadRequestError, match=r"Invalid 'messages\[1\].role'"):
        await collect(http(fake_server, policy))
    assert slept.delays == [] and len(fake_server.requests) == 1


async def test_retry_sleep_is_cancellable(fake_server: FakeServer) -> None:
    fake_server.add(Reply.json(429, {"error": {"message": "wait"}}, headers={"retry-after": "30"}))
    client = http(fake_server, RetryPolicy())
    task = asyncio.create_task(collect(client))
    for _ in range(200):
        await asyncio.sleep(0.01)
        if fake_server.requests:
            break
    await asyncio.sleep(0.05)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert len(fake_server.requests) == 1


async def test_connection_refused_is_retried_then_raised(no_wait) -> None:
    policy, slept = no_wait
    policy.max_retries = 1
    server = await FakeServer().start()
    url = server.url
    await server.close()
    client = ProviderHTTP("prov", url, headers=dict, retry=policy)
    with pytest.raises(ProviderConnectionError, match="could not connect"):
        await collect(client)
    assert len(slept.delays) == 1


async def test_drop_before_first_byte_is_retried(fake_server: FakeServer, no_wait) -> None:
    policy, slept = no_wait
    fake_server.add(Reply.sse(STREAM, drop_after=0), Reply.sse(STREAM))
    events = await collect(http(fake_server, policy))
    assert len(events) == 3 and len(fake_server.requests) == 2 and len(slept.delays) == 1


async def test_drop_mid_stream_is_not_retried(fake_server: FakeServer, no_wait) -> None:
    policy, slept = no_wait
    fake_server.add(Reply.sse(STREAM, drop_after=20), Reply.sse(STREAM))
    seen = []
    with pytest.raises(ProviderConnectionError, match="dropped after 20 bytes.*not retried"):
        async for event in http(fake_server, policy).stream_events("/chat", {}):
            seen.append(event)
    assert len(fake_server.requests) == 1 and slept.delays == []
    assert [e.data for e in seen] == ['{"n": 1}']


async def test_stall_is_a_connection_error(fake_server: FakeServer, no_wait) -> None:
    policy, _ = no_wait
    fake_server.add(Reply.sse(STREAM, delay=1.0))
    client = http(fake_server, policy, timeout=httpx.Timeout(5.0, read=0.2))
    with pytest.raises(ProviderConnectionError, match="stalled"):
        await collect(client)


async def test_a_provider_that_sends_nothing_for_a_while_is_reported_until_it_answers(fake_server: FakeServer) -> None:
    from nbagent.events import ModelSilent, retry_listener

    fake_server.add(Reply.sse(STREAM, before=0.5))
    client = http(fake_server)
    client.silence_after = client.silence_every = 0.05
    heard: list = []
    token = retry_listener.set(heard.append)
    try:
        events = await collect(client)
    finally:
        retry_listener.reset(token)
    assert len(events) == 3
    silent = [e for e in heard if isinstance(e, ModelSilent)]
    host = fake_server.url.split("//")[1]
    assert silent and silent[0].seconds > 0 and str(silent[0]).startswith(f"no answer from {host} for ")
    assert silent[-1].seconds == 0  # then that it answers again
    assert all(e.seconds >= silent[0].seconds for e in silent[:-1])  # the time it has lasted, growing


async def test_a_read_timeout_before_any_byte_names_the_host_and_is_not_retried(fake_server: FakeServer, no_wait) -> None:
    policy, slept = no_wait
    fake_server.add(Reply(hang=True), Reply.sse(STREAM))
    client = http(fake_server, policy, timeout=httpx.Timeout(5.0, read=0.3))
    host = fake_server.url.split("//")[1]
    with pytest.raises(ProviderConnectionError, match=rf"no answer from {host} for 0.3 s: it accepted the request"):
        await collect(client)
    assert len(fake_server.requests) == 1 and slept.delays == []


async def test_json_error_with_status_200(fake_server: FakeServer) -> None:
    fake_server.add(Reply.json(200, {"error": {"message": "model is loading"}}))
    with pytest.raises(StreamError, match="model is loading"):
        await collect(http(fake_server))


async def test_client_is_per_model_lazy_and_closed(fake_server: FakeServer) -> None:
    client = http(fake_server)
    assert client._client is None
    fake_server.add(Reply.sse(STREAM), Reply.sse(STREAM))
    await collect(client)
    first = client._client
    await collect(client)
    assert client._client is first and fake_server.connections == 1  # kept alive
    await client.aclose()
    assert first.is_closed and client._client is None


# --------------------------------------------------------------------------------------------------
# Keys
# --------------------------------------------------------------------------------------------------
class EchoModel(HTTPModel):
    """The smallest HTTP model: sends the messages' count, yields nothing."""

    provider = "echo"
    key_env = ("ECHO_API_KEY",)
    base_url_env = ("ECHO_BASE_URL",)
    default_base_url = "https://echo.invalid/v1"

    async def stream(self, messages, tools=(), *, instructions=None, on_request=None, **settings):
        async for _ in self.http.stream_events("/echo", {"n": len(messages), **self.request_settings(settings)},
                                               on_request=on_request):
            pass
        return
        yield  # pragma: no cover


async def test_missing_key_raises_at_request_time_not_construction(monkeypatch, fake_server) -> None:
    model = EchoModel("m", base_url=fake_server.url)  # no key: building it is fine
    with pytest.raises(AuthenticationError, match="ECHO_API_KEY"):
        await model.request([])
    assert fake_server.requests == []
    monkeypatch.setenv("ECHO_API_KEY", KEY)  # read when the request is made
    fake_server.add(Reply.sse(STREAM))
    with pytest.raises(ModelError, match="without a message"):
        await model.request([])  # the stream has no message: the base class says so
    assert fake_server.requests[0].headers["authorization"] == f"Bearer {KEY}"


def test_base_url_from_environment(monkeypatch) -> None:
    monkeypatch.setenv("ECHO_BASE_URL", "http://example.invalid:1234/v1/")
    assert EchoModel("m").base_url == "http://example.invalid:1234/v1"
    assert EchoModel("m", base_url="http://other.invalid").base_url == "http://other.invalid"
    assert EchoModel("m", temperature=0).settings == {"temperature": 0}


async def test_key_never_in_bodies_reprs_logs_or_errors(fake_server: FakeServer, caplog, no_wait) -> None:
    policy, _ = no_wait
    caplog.set_level(logging.DEBUG)
    model = EchoModel("m", base_url=fake_server.url, api_key=KEY, retry=policy)
    fake_server.add(
        Reply.json(429, {"error": {"message": f"bad {KEY}"}}),
        Reply.json(401, {"error": {"message": f"Incorrect API key provided: {KEY}"}}),
    )
    bodies = []
    with pytest.raises(AuthenticationError) as info:
        await model.request([], on_request=bodies.append)
    error = info.value
    text = "\n".join([
        json.dumps(bodies), repr(model), str(model), repr(model.http), repr(model.api_key()), str(model.api_key()),
        str(error), repr(error), json.dumps(error.body), "".join(traceback.format_exception(error)),
        caplog.text, repr(vars(model)),
    ])
    assert KEY not in text
    assert "ECHO_API_KEY" in str(error)
    assert all(KEY not in r.body.decode() for r in fake_server.requests)
    assert fake_server.requests[0].headers["authorization"] == f"Bearer {KEY}"  # it did go, in the header


def test_secret_hides_its_value() -> None:
    secret = Secret(KEY)
    assert secret.value == KEY and KEY not in repr(secret) and KEY not in f"{secret}"
    with pytest.raises(TypeError):
        __import__("pickle").dumps(secret)


async def test_bad_base_urls_are_configuration_errors() -> None:
    from nbagent.errors import ConfigurationError

    with pytest.raises(ConfigurationError, match="http:// or https://"):
        await collect(ProviderHTTP("prov", "localhost:11434/v1", headers=dict))
    with pytest.raises(ConfigurationError, match="not valid"):
        await collect(ProviderHTTP("prov", "http://[::1", headers=dict))


async def test_undecodable_body_is_a_stream_error(fake_server: FakeServer) -> None:
    fake_server.add(Reply.sse(b"not gzip at all", headers={"content-encoding": "gzip"}))
    with pytest.raises(StreamError, match="could not be read"):
        await collect(http(fake_server))


def test_secret_survives_copies() -> None:
    import copy

    secret = Secret(KEY)
    assert copy.deepcopy(secret) is secret and copy.copy(secret) is secret


async def test_a_stream_read_to_its_done_event_gives_its_connection_back():
    """The model stops reading at the stream's last event; what is left of the body (`data: [DONE]`) is read so
    the connection goes back to the pool: ten requests in a row use one connection, not ten."""
    from nbagent.messages import UserMessage
    from nbagent.providers.openai import OpenAIChatModel
    from tests.providers.ratelimited import RateLimitedServer

    class Counting(RateLimitedServer):
        connections = 0

        async def _serve(self, reader, writer):
            self.connections += 1
            return await super()._serve(reader, writer)

    async with Counting() as server:
        model = OpenAIChatModel("gpt-4o-mini", base_url=server.url + "/v1", api_key="sk-http-test-0123456789abcdef")
        for i in range(10):
            answer = await model.request([UserMessage(f"q{i}")])
            assert answer.text == f"echo: q{i}"
        await model.aclose()
    assert server.requests == 10 and server.connections == 1
