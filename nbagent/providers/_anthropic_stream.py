"""Anthropic Messages coming in: `_StreamState.process(event)` is a pure accumulator over the parsed SSE
events (message_start, content_block_start/delta/stop, message_delta, message_stop, error). It returns the
deltas to show and, at the end, one normalised `AssistantMessage`. A stream that ends before `message_stop`
is a `StreamError`; an `error` event becomes the matching typed exception.

Server-side tools' blocks (`server_tool_use` and their results) are kept whole, in order, in
`provider_data["server_blocks"]`, never read as client tool calls. The request side, and the model that
uses this state, is `nbagent.providers.anthropic`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from .. import errors
from ..errors import ProviderError, StreamError
from ..events import ReasoningDelta, StreamEvent, TextDelta
from ..messages import AssistantMessage, Reasoning
from ._common import ToolCallAccumulator, ToolNames, usage_from
from ._errors import stream_error

__all__ = ["PROVIDER", "_StreamState"]

PROVIDER = "anthropic"

_FINISH_REASON_MAP: dict[str, str] = {
    "end_turn": "end_turn",
    "tool_use": "tool_use",
    "max_tokens": "max_tokens",
    "model_context_window_exceeded": "max_tokens",
    "stop_sequence": "end_turn",
    "pause_turn": "pause_turn",
    "refusal": "content_filter",
}
"""Anthropic `stop_reason` -> nbagent's normalised stop reason (unknown ones pass through)."""

_CUT_OFF = {"max_tokens", "model_context_window_exceeded"}
"""Stop reasons after which an unfinished `tool_use` block is an incomplete call."""

_ERROR_MAP: dict[str, type[ProviderError]] = {
    "overloaded_error": errors.OverloadedError,
    "rate_limit_error": errors.RateLimitError,
    "api_error": errors.ServerError,
    "authentication_error": errors.AuthenticationError,
    "permission_error": errors.PermissionDeniedError,
    "not_found_error": errors.NotFoundError,
    "invalid_request_error": errors.BadRequestError,
    "request_too_large": errors.BadRequestError,
}
"""Anthropic error `type` (in an `error` event) -> the exception raised."""

_OWN_BLOCKS = frozenset({"text", "thinking", "redacted_thinking", "tool_use"})
"""Content blocks this adapter reads; every other block (server tools and their results) is kept opaque."""


@dataclass
class _Block:
    """One content block as it arrives."""

    type: str
    text: list[str] = field(default_factory=list)
    signature: str = ""
    data: str | None = None
    start_input: dict[str, Any] | None = None
    opaque: dict[str, Any] | None = None
    """A block this adapter does not read (a server tool's use or result), kept whole."""
    got_json: bool = False
    stopped: bool = False
    separate: bool = False


class _StreamState:
    """The pure accumulator of one streamed response: `process(event)` returns the deltas to show (an event
    never makes more than one); `result()` the finished message (a `StreamError` if `message_stop` never
    came)."""

    def __init__(self, names: ToolNames | None = None, *, partial: bool = True) -> None:
        self.names = names
        self.calls = ToolCallAccumulator(partial=partial, names=names)
        self.blocks: dict[int, _Block] = {}
        self.usage: dict[str, Any] = {}
        self.stop_reason: str | None = None
        self.id: str | None = None
        self.model: str | None = None
        self.started = False
        self.done = False
        self.container: Any = None
        self._has_text = False
        self._last_kind = ""
        self._add_arguments = self.calls.add_arguments

    def process(self, event: dict[str, Any]) -> tuple[StreamEvent, ...]:
        kind = event.get("type")
        if kind == "content_block_delta":
            delta = event.get("delta")
            if delta.__class__ is dict and delta.get("type") == "input_json_delta":  # the hot path: arguments
                fragment = delta.get("partial_json")
                if not fragment:
                    return ()
                index = event.get("index")
                block = self.blocks.get(index)
                if block is None:
                    raise StreamError(f"anthropic sent a delta for block {index}, which never started",
                                      provider=PROVIDER, body=event)
                block.got_json = True
                if block.opaque is not None:  # a server tool's input: never a client call
                    block.text.append(fragment)
                    return ()
                out = self._add_arguments(index, fragment)
                return () if out is None else (out,)
            out = self._delta(event)
        elif kind == "content_block_start":
            out = self._start(event)
        elif kind == "content_block_stop":
            out = self._stop(event)
        else:
            self._message_event(kind, event)
            return ()
        return () if out is None else (out,)

    def _message_event(self, kind: Any, event: dict[str, Any]) -> None:
        if kind == "message_start":
            if self.started:
                raise StreamError("anthropic sent a second message_start in one stream", provider=PROVIDER,
                                  body=event)
            self.started = True
            message = event.get("message") or {}
            self.id = message.get("id")
            self.model = message.get("model")
            self._usage(message.get("usage"))
        elif kind == "message_delta":
            delta = event.get("delta") or {}
            if delta.get("stop_reason"):
                self.stop_reason = delta["stop_reason"]
            if delta.get("container"):
                self.container = delta["container"]
            self._usage(event.get("usage"))
        elif kind == "message_stop":
            self.done = True
        elif kind == "error":
            raise stream_error(PROVIDER, event, _ERROR_MAP)
        # ping and events this adapter does not use

    def _usage(self, usage: Any) -> None:
        if isinstance(usage, dict):
            self.usage.update({k: v for k, v in usage.items() if v is not None})

    def _start(self, event: dict[str, Any]) -> StreamEvent | None:
        index = event.get("index")
        cb = event.get("content_block") or {}
        kind = cb.get("type", "")
        block = _Block(kind)
        self.blocks[index] = block
        if kind not in _OWN_BLOCKS:
            block.opaque = dict(cb)
            return None
        last, self._last_kind = self._last_kind, kind
        if kind == "text":
            # text split by a tool call or thinking reads as two paragraphs; text split by citations does not
            block.separate = self._has_text and last != "text"
            return self._add_text(block, cb.get("text") or "")
        if kind == "thinking":
            block.signature = cb.get("signature") or ""
            if cb.get("thinking"):
                block.text.append(cb["thinking"])
                return ReasoningDelta(cb["thinking"])
        elif kind == "redacted_thinking":
            block.data = cb.get("data") or ""
        elif kind == "tool_use":
            given = cb.get("input")
            block.start_input = given if isinstance(given, dict) and given else None
            return self.calls.add(index, id=cb.get("id"), name=cb.get("name"))
        return None

    def _add_text(self, block: _Block, text: str) -> StreamEvent | None:
        if not text:
            return None
        if block.separate and not block.text:
            text = "\n\n" + text
        block.text.append(text)
        self._has_text = True
        return TextDelta(text)

    def _delta(self, event: dict[str, Any]) -> StreamEvent | None:
        index = event.get("index")
        block = self.blocks.get(index)
        if block is None:
            raise StreamError(f"anthropic sent a delta for block {index}, which never started", provider=PROVIDER,
                              body=event)
        delta = event.get("delta") or {}
        kind = delta.get("type")
        if kind == "text_delta":
            return self._add_text(block, delta.get("text") or "")
        if kind == "thinking_delta":
            text = delta.get("thinking") or ""
            if text:
                block.text.append(text)
                return ReasoningDelta(text)
        elif kind == "signature_delta":
            block.signature += delta.get("signature") or ""
        elif kind == "input_json_delta":  # not a dict delta, or an empty fragment: see process()
            fragment = delta.get("partial_json") or ""
            if fragment:
                block.got_json = True
                return self._add_arguments(index, fragment)
        return None

    def _stop(self, event: dict[str, Any]) -> StreamEvent | None:
        block = self.blocks.get(event.get("index"))
        if block is None:
            return None
        block.stopped = True
        if block.opaque is not None and block.text:  # a server tool's input, streamed: parse it now
            try:
                block.opaque["input"] = json.loads("".join(block.text))
            except ValueError:
                block.opaque["input"] = {}
        if block.type == "tool_use" and not block.got_json and block.start_input:
            # arguments given whole at the start and no fragments after them
            return self.calls.add(event.get("index"), arguments=block.start_input)
        return None

    def result(self) -> AssistantMessage:
        if not self.done:
            raise StreamError(
                "the anthropic stream ended before message_stop"
                + (" (it never started)" if not self.started else f" (stop reason so far: {self.stop_reason})"),
                provider=PROVIDER,
            )
        cut_off = self.stop_reason in _CUT_OFF
        calls = self.calls.finish()
        tool_blocks = [b for _, b in sorted(self.blocks.items()) if b.type == "tool_use"]
        for call, block in zip(calls, tool_blocks):
            if not block.got_json and block.start_input:
                call.raw_arguments = None  # given as an object, not as text
            if cut_off and (not block.stopped or (call.raw_arguments is not None and call.arguments is None)):
                call.incomplete = True
        reasoning: list[Reasoning] = []
        text: list[str] = []
        server_blocks: list[dict[str, Any]] = []
        for _, block in sorted(self.blocks.items()):
            if block.opaque is not None:
                server_blocks.append(block.opaque)
            elif block.type == "text":
                text.extend(block.text)
            elif block.type == "thinking":
                reasoning.append(Reasoning(text="".join(block.text), signature=block.signature or None,
                                           provider=PROVIDER))
            elif block.type == "redacted_thinking":
                reasoning.append(Reasoning(encrypted=block.data, provider=PROVIDER))
        u = self.usage
        cache_read = u.get("cache_read_input_tokens") or 0
        cache_write = u.get("cache_creation_input_tokens") or 0
        usage = usage_from((u.get("input_tokens") or 0) + cache_read + cache_write, u.get("output_tokens"),
                           cache_read, cache_write) if u else None
        raw = self.stop_reason
        stop = _FINISH_REASON_MAP.get(raw, raw) if raw else ("tool_use" if calls else "end_turn")
        if stop == "tool_use" and not calls:
            stop = "end_turn"  # only server tools were used: nothing for the client to run
        data: dict[str, Any] = {"id": self.id} if self.id else {}
        if server_blocks:
            data["server_blocks"] = server_blocks
        if self.container:
            data["container"] = self.container
        # text, tool calls, reasoning, usage, stop reason, model, provider, provider data
        return AssistantMessage("".join(text), calls, reasoning, usage, stop, self.model, PROVIDER, data)
