"""Helpers for replaying recorded streams: as parsed events (for the pure accumulators) or as bytes
(for the fake server), plus fault injection on the recorded bytes and the checks every provider's stream
reader passes (a faulty stream fails with a named error; one-byte chunks read the same as whole ones)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

import pytest

from nbagent import AssistantMessage, Tool, UserMessage, tool
from nbagent.providers._http import SSEDecoder

from .fakeserver import FIXTURES, FakeServer, Reply

__all__ = ["cut_before", "fixture_json", "recorded", "recorded_events", "replace_event"]


def recorded(provider: str, name: str) -> bytes:
    """A recorded stream as SSE bytes: `<name>.sse` unchanged, or `<name>.chunks.txt` framed as `data:` events."""
    base = FIXTURES / provider
    sse = base / f"{name}.sse"
    if sse.exists():
        return sse.read_bytes()
    lines = (base / f"{name}.chunks.txt").read_text("utf-8").splitlines()
    return "".join(f"data: {line.strip()}\n\n" for line in lines if line.strip()).encode("utf-8")


def recorded_events(provider: str, name: str) -> list[dict[str, Any]]:
    """The JSON payloads of a recorded stream, in order."""
    decoder = SSEDecoder()
    events = decoder.feed(recorded(provider, name)) + decoder.end()
    return [json.loads(e.data) for e in events if e.data and e.data != "[DONE]"]


def fixture_json(provider: str, name: str) -> Any:
    return json.loads((FIXTURES / provider / name).read_text("utf-8"))


def cut_before(body: bytes, marker: bytes) -> bytes:
    """The stream up to (not including) the SSE event containing `marker`: a body cut before its end."""
    at = body.index(marker)
    start = body.rfind(b"\n\n", 0, at)
    return body[: start + 2] if start >= 0 else b""


def replace_event(body: bytes, marker: bytes, new: Callable[[bytes], bytes]) -> bytes:
    """The stream with the event containing `marker` replaced by `new(event)`."""
    at = body.index(marker)
    start = body.rfind(b"\n\n", 0, at)
    start = start + 2 if start >= 0 else 0
    end = body.find(b"\n\n", at)
    end = len(body) if end < 0 else end + 2
    return body[:start] + new(body[start:end]) + body[end:]


def fixture_path(provider: str, name: str) -> Path:
    return FIXTURES / provider / name


def make_tool(name: str, **kwargs) -> Tool:
    """A one-parameter tool under any name (names are what the adapters project)."""

    def fn(password: str) -> str:
        """A tool that requires a password to retrieve a secret."""
        return "secret"

    return tool(name=name, read_only=True, **kwargs)(fn)


async def collect(model, messages, tools=(), **kwargs):
    """Stream one response: (the deltas, the final AssistantMessage)."""
    deltas, final = [], None
    async for item in model.stream(messages, tools, **kwargs):
        if isinstance(item, AssistantMessage):
            final = item
        else:
            deltas.append(item)
    return deltas, final


PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 16
"""The bytes of a PNG image, as the adapters send them (they do not decode it)."""


def accumulate(state, provider: str, name: str) -> tuple[list, AssistantMessage]:
    """A recorded stream's events fed to a provider's accumulator (its `_StreamState`): the deltas it returned,
    and the message it made of them."""
    deltas = [d for event in recorded_events(provider, name) for d in state.process(event)]
    return deltas, state.result()


async def stream_fails(server: FakeServer, model, reply: Reply, error: type[Exception],
                       match: str | None = None) -> Exception:
    """`model` reading `reply` (served once) raises `error` (its message matching `match`): returned."""
    server.add(reply)
    with pytest.raises(error, match=match) as info:
        await collect(model, [UserMessage("x")])
    return info.value


async def same_in_one_byte_chunks(server: FakeServer, model, body: bytes) -> AssistantMessage:
    """`body` served in one-byte HTTP chunks (which split multi-byte characters), then whole: `model` reads the
    same message from both, which is returned."""
    server.add(Reply.sse(body, chunk_size=1), Reply.sse(body))
    _, slow = await collect(model, [UserMessage("x")])
    _, fast = await collect(model, [UserMessage("x")])
    assert slow == fast
    return slow
