"""Anthropic Messages: `AnthropicModel`, over httpx.

    POST {ANTHROPIC_BASE_URL or https://api.anthropic.com}/v1/messages     "stream": true

Going out (`_map_*`): tools get `input_schema`; cache breakpoints (`cache_control`, at most four) go on the
last tool, the system prompt and the last block of the last two user messages; the system prompt is `system`; an assistant turn is its thinking blocks (sent back unchanged, signatures included), its text
and its `tool_use` blocks; every result of one turn goes back in ONE user message as `tool_result`
blocks (`tool_use_id`, `is_error`, text and image content). Names the API forbids are projected
(`^[a-zA-Z0-9_-]{1,64}$`) and ids from other providers rewritten; the response maps names back.
`eager_input_streaming=True` asks for fine-grained tool streaming (the per-tool field; `"beta"` sends
the `fine-grained-tool-streaming-2025-05-14` header instead, for platforms that refuse the field).

Coming in (`_process_*`): `_StreamState.process(event)` is a pure accumulator over the parsed SSE events
(message_start, content_block_start/delta/stop, message_delta, message_stop, error). It returns the
deltas to show and, at the end, one normalised `AssistantMessage`. A stream that ends before
`message_stop` is a `StreamError`; an `error` event becomes the matching typed exception.

Server-side tools (web search, web fetch, code execution, tool search, MCP): their `server_tool_use` and
result blocks are never client tool calls. They are kept whole, in order, in
`provider_data["server_blocks"]` and sent back unchanged to Anthropic (another provider never sees them:
`portable_messages` drops `provider_data`).

Why one module of about 560 lines: like every adapter it holds exactly one provider's request mapping and
stream state, and Anthropic has the most block kinds to map both ways (thinking, redacted thinking,
server tools, cache breakpoints); splitting it would put one wire format in two places.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Literal, Sequence

from .. import errors
from ..errors import ConfigurationError, ProviderError, StreamError
from ..events import ReasoningDelta, StreamEvent, TextDelta
from ..messages import (
    AssistantMessage, Block, ImageBlock, Message, Reasoning, TextBlock, ToolResultMessage, UserMessage,
)
from ..tools.definition import Tool
from ._common import (
    CallIds, NameRule, ToolCallAccumulator, ToolNames, arguments_object, portable_messages, reasoning_for, usage_from,
)
from ._errors import stream_error
from ._model import HTTPModel

__all__ = ["AnthropicModel"]

PROVIDER = "anthropic"
DEFAULT_BASE_URL = "https://api.anthropic.com"
API_VERSION = "2023-06-01"
DEFAULT_MAX_TOKENS = 8192
_EPHEMERAL = {"type": "ephemeral"}

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

FINE_GRAINED_BETA = "fine-grained-tool-streaming-2025-05-14"
"""The beta header of fine-grained tool streaming, for platforms that refuse `eager_input_streaming`."""

_OWN_BLOCKS = frozenset({"text", "thinking", "redacted_thinking", "tool_use"})
"""Content blocks this adapter reads; every other block (server tools and their results) is kept opaque."""

NAME_RULE = NameRule(allowed="A-Za-z0-9_-", max_length=64)
"""Anthropic tool names: `^[a-zA-Z0-9_-]{1,64}$`."""
ID_PATTERN = re.compile(r"[a-zA-Z0-9_-]{1,64}")
"""Anthropic `tool_use` ids."""


class AnthropicModel(HTTPModel):
    """A Claude model over the Anthropic Messages API.

    `AnthropicModel("claude-sonnet-4-5")` reads `ANTHROPIC_API_KEY` and `ANTHROPIC_BASE_URL` (without
    `/v1`, as the official SDK; default `https://api.anthropic.com`) when a request is made.

    Options: `max_tokens` (default 8192, raised above a thinking budget when not given), `thinking` (a
    budget in tokens, `True` for 4096, or the API's own dict), `cache` (default True: `cache_control`
    breakpoints on the last tool, the system prompt and the last user message), `beta` (values for the
    `anthropic-beta` header), `eager_input_streaming` (True: fine-grained tool streaming, arguments
    streamed unbuffered and unvalidated, the per-tool field; "beta": the same through the beta header),
    the transport options of `HTTPModel`, and any other request field (`temperature`, `top_p`,
    `stop_sequences`, `tool_choice`, `metadata`, server `tools` given as `extra_tools`...), sent as given.
    """

    provider = PROVIDER
    key_env = ("ANTHROPIC_API_KEY",)
    base_url_env = ("ANTHROPIC_BASE_URL",)
    default_base_url = DEFAULT_BASE_URL
    path = "/v1/messages"
    name_rule = NAME_RULE

    def __init__(
        self,
        name: str,
        *,
        cache: bool = True,
        beta: str | Sequence[str] | None = None,
        eager_input_streaming: bool | Literal["beta"] = False,
        **options: Any,
    ) -> None:
        super().__init__(name, **options)
        if self.base_url.endswith("/v1"):  # forgive the OpenAI habit: the path below adds /v1
            self.base_url = self.base_url[:-3]
            self.http.base_url = self.base_url
        self.cache = cache
        """Whether requests carry prompt-cache breakpoints."""
        self.beta = [beta] if isinstance(beta, str) else list(beta or ())
        """Values of the `anthropic-beta` header."""
        if eager_input_streaming not in (True, False, "beta"):
            raise ConfigurationError(f"eager_input_streaming is True, False or 'beta', not {eager_input_streaming!r}")
        self.eager_input_streaming = eager_input_streaming
        """Fine-grained tool streaming: True (the per-tool field), "beta" (the beta header) or False."""
        if eager_input_streaming == "beta" and FINE_GRAINED_BETA not in self.beta:
            self.beta.append(FINE_GRAINED_BETA)

    def auth_headers(self, key: str | None) -> dict[str, str]:
        headers = {"anthropic-version": API_VERSION}
        if key:
            headers["x-api-key"] = key
        if self.beta:
            headers["anthropic-beta"] = ",".join(self.beta)
        return headers

    # -- requests -------------------------------------------------------------------------------------
    def map_request(self, messages: Sequence[Message], tools: Sequence[Tool], names: ToolNames,
                    instructions: str | None, settings: dict[str, Any]) -> dict[str, Any]:
        body: dict[str, Any] = {"model": self.name}
        thinking = _map_thinking(settings.pop("thinking", None))
        if thinking is not None and thinking.get("type") == "enabled" and not _can_think(messages):
            # the tool loop under way began without thinking (on another provider, or with thinking off): the
            # API refuses to switch it on in the middle of that turn, so this request goes without
            thinking = None
        max_tokens = settings.pop("max_tokens", None)
        if max_tokens is None:
            max_tokens = DEFAULT_MAX_TOKENS
            budget = thinking.get("budget_tokens") if thinking else None
            if isinstance(budget, int) and budget >= max_tokens:
                max_tokens = budget + DEFAULT_MAX_TOKENS
        body["max_tokens"] = max_tokens
        if instructions:
            body["system"] = _map_system(instructions, cache=self.cache)
        body["messages"] = _map_messages(messages, names, cache=self.cache)
        extra_tools = list(settings.pop("extra_tools", None) or ())  # server tools, as the API takes them
        if tools or extra_tools:
            body["tools"] = [*_map_tools(tools, names, cache=self.cache, eager=self.eager_input_streaming is True),
                             *extra_tools]
        tool_choice = _map_tool_choice(settings.pop("tool_choice", None), names)
        if settings.pop("parallel_tool_calls", True) is False:
            tool_choice = {**(tool_choice or {"type": "auto"}), "disable_parallel_tool_use": True}
        if tool_choice is not None and tools:
            body["tool_choice"] = tool_choice
        if thinking is not None:
            body["thinking"] = thinking
        if "stop" in settings:
            stop = settings.pop("stop")
            settings.setdefault("stop_sequences", [stop] if isinstance(stop, str) else list(stop))
        body.update(settings)
        return body

    def map_tool_result(self, message: ToolResultMessage) -> dict[str, Any]:
        """The `tool_result` block this result is sent as (a request may add a cache breakpoint to it)."""
        return _map_tool_result(message, CallIds(ID_PATTERN, length=24))

    def map_messages(self, messages: Sequence[Message], names: ToolNames) -> list[dict[str, Any]]:
        """The transcript as the `messages` of a request."""
        return _map_messages(messages, names, cache=self.cache)


# --------------------------------------------------------------------------------------------------
# Going out
# --------------------------------------------------------------------------------------------------
def _can_think(messages: Sequence[Message]) -> bool:
    """Whether thinking may be on: not when the assistant turn being continued (the last one since the last
    real user message) made tool calls without a thinking block of this provider's."""
    for msg in reversed(messages):
        if isinstance(msg, UserMessage):
            return True
        if isinstance(msg, AssistantMessage) and msg.tool_calls:
            return any(r.signature or r.encrypted for r in reasoning_for(msg, PROVIDER))
    return True


def _map_tools(tools: Sequence[Tool], names: ToolNames, *, cache: bool = True,
               eager: bool = False) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for tool in tools:
        spec: dict[str, Any] = {"name": names.wire(tool.name)}
        if tool.description:
            spec["description"] = tool.description
        spec["input_schema"] = tool.parameters
        if tool.strict:
            spec["strict"] = True
        if eager:
            spec["eager_input_streaming"] = True
        out.append(spec)
    if cache and out:
        out[-1]["cache_control"] = dict(_EPHEMERAL)
    return out


def _map_system(instructions: str, *, cache: bool) -> str | list[dict[str, Any]]:
    if not cache:
        return instructions
    return [{"type": "text", "text": instructions, "cache_control": dict(_EPHEMERAL)}]


def _map_thinking(value: Any) -> dict[str, Any] | None:
    if value is None or value is False:
        return None
    if value is True:
        return {"type": "enabled", "budget_tokens": 4096}
    if isinstance(value, int):
        return {"type": "enabled", "budget_tokens": value}
    if isinstance(value, dict):
        return value
    raise ConfigurationError(f"thinking must be a token budget, True, or the API's dict, not {value!r}")


def _map_tool_choice(value: Any, names: ToolNames) -> dict[str, Any] | None:
    if value is None:
        return None
    if isinstance(value, dict):
        return value
    if value in ("auto", "any", "none"):
        return {"type": value}
    if value == "required":
        return {"type": "any"}
    if isinstance(value, str):
        return {"type": "tool", "name": names.wire(value)}
    raise ConfigurationError(f"tool_choice must be 'auto', 'any', 'none', a tool name or a dict, not {value!r}")


def _map_messages(messages: Sequence[Message], names: ToolNames, *, cache: bool = False) -> list[dict[str, Any]]:
    """The transcript as Anthropic `messages`: consecutive user-side messages (tool results, then text)
    become one user message, so all results of one turn travel together."""
    ids = CallIds(ID_PATTERN, length=24)
    out: list[dict[str, Any]] = []
    for msg in portable_messages(messages, PROVIDER):
        if isinstance(msg, AssistantMessage):
            content = _map_assistant(msg, names, ids)
            if content:
                out.append({"role": "assistant", "content": content})
            continue
        if isinstance(msg, ToolResultMessage):
            blocks: list[dict[str, Any]] = [_map_tool_result(msg, ids)]
        elif isinstance(msg, UserMessage):
            blocks = _map_blocks(msg.blocks) or [{"type": "text", "text": msg.text or " "}]
        else:
            raise TypeError(f"not a message: {msg!r}")
        if out and out[-1]["role"] == "user":
            out[-1]["content"].extend(blocks)
        else:
            out.append({"role": "user", "content": blocks})
    for m in out:  # a single plain text reads best as a string
        content = m["content"]
        if m["role"] == "user" and len(content) == 1 and content[0].get("type") == "text" and len(content[0]) == 2:
            m["content"] = content[0]["text"]
    if cache:
        _mark_last_user_message(out)
    return out


def _mark_last_user_message(messages: list[dict[str, Any]]) -> None:
    """Cache breakpoints on the last block of the last two user messages: the last one writes the conversation
    so far to the cache; the one before is where the previous request wrote it, so it is read back even when a
    large batch of results lies between them (the API looks back only 20 blocks from a breakpoint). With the
    system prompt's and the tools' that makes four, the API's limit."""
    marked = 0
    for m in reversed(messages):
        if m["role"] != "user":
            continue
        if isinstance(m["content"], str):
            m["content"] = [{"type": "text", "text": m["content"]}]
        if m["content"]:
            m["content"][-1]["cache_control"] = dict(_EPHEMERAL)
            marked += 1
        if marked == 2:
            return


def _map_blocks(blocks: Sequence[Block]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for block in blocks:
        if isinstance(block, TextBlock):
            if block.text:  # the API refuses empty text blocks
                out.append({"type": "text", "text": block.text})
        elif isinstance(block, ImageBlock):
            out.append({"type": "image", "source": {"type": "base64", "media_type": block.mime_type,
                                                    "data": block.base64}})
    return out


def _map_tool_result(msg: ToolResultMessage, ids: CallIds) -> dict[str, Any]:
    block: dict[str, Any] = {"type": "tool_result", "tool_use_id": ids.wire(msg.tool_call_id)}
    content = _map_blocks(msg.content)
    if len(content) == 1 and content[0]["type"] == "text":
        block["content"] = content[0]["text"]
    elif content:
        block["content"] = content
    block["is_error"] = msg.is_error
    return block


def _map_assistant(msg: AssistantMessage, names: ToolNames, ids: CallIds) -> list[dict[str, Any]]:
    """Thinking blocks (this provider's, unchanged), server-tool blocks (unchanged), then the text, then the
    `tool_use` blocks."""
    out: list[dict[str, Any]] = []
    for r in reasoning_for(msg, PROVIDER):
        if r.signature:
            out.append({"type": "thinking", "thinking": r.text, "signature": r.signature})
        elif r.encrypted:
            out.append({"type": "redacted_thinking", "data": r.encrypted})
        # thinking without a signature (a stream cut short) cannot be sent back: the API would refuse it
    if msg.provider == PROVIDER:
        out.extend(msg.provider_data.get("server_blocks") or ())
    if msg.text:
        out.append({"type": "text", "text": msg.text})
    for call in msg.tool_calls:
        out.append({"type": "tool_use", "id": ids.wire(call.id), "name": names.wire(call.name),
                    "input": arguments_object(call)})
    return out


# --------------------------------------------------------------------------------------------------
# Coming in
# --------------------------------------------------------------------------------------------------
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


AnthropicModel.state_class = _StreamState  # here: the state is defined after the model
