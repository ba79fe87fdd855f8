"""The SSE decoder's fast path for chunks holding one `event:` line and one `data:` line agrees with the
general path (Anthropic and OpenAI Responses send every event that way)."""

from __future__ import annotations

from nbagent.providers._http import ServerSentEvent, SSEDecoder

from .replay import recorded


def slow(body: bytes) -> list[ServerSentEvent]:
    decoder = SSEDecoder()
    out = []
    for i in range(len(body)):  # one byte at a time never takes a fast path
        out.extend(decoder.feed(body[i : i + 1]))
    return out + decoder.end()


def by_event(body: bytes) -> list[ServerSentEvent]:
    decoder = SSEDecoder()
    out = []
    for part in body.split(b"\n\n")[:-1]:
        out.extend(decoder.feed(part + b"\n\n"))
    return out + decoder.end()


def test_event_and_data_chunks_decode_alike() -> None:
    for provider, name in [("anthropic", "thinking_signature"), ("anthropic", "parallel_tool_calls"),
                           ("openai_responses", "reasoning_text_tool_call")]:
        body = recorded(provider, name)
        fast = by_event(body)
        assert fast == slow(body) and fast and fast[0].event != "message"


def test_unusual_event_chunks_fall_back() -> None:
    body = (b"event: a\ndata: 1\n\n"            # the fast path
            b"event:b\ndata: 2\n\n"             # no space after the colon
            b"event: c\ndata: 3\ndata: 4\n\n"   # two data lines
            b"event: \ndata: 5\n\n"             # an empty name means "message"
            b"event: d\nid: 9\ndata: 6\n\n")    # another field in between
    assert by_event(body) == slow(body) == [
        ServerSentEvent("a", "1"), ServerSentEvent("b", "2"), ServerSentEvent("c", "3\n4"),
        ServerSentEvent("message", "5"), ServerSentEvent("d", "6", "9")]
