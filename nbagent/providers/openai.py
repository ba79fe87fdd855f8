"""OpenAI Chat Completions, and every server that speaks it (Ollama, vLLM, llama.cpp, LM Studio, Mistral...).

    tools     [{"type": "function", "function": {name, description, parameters, strict?}}]
    calls     assistant {"tool_calls": [{"id", "type": "function", "function": {name, arguments: "<JSON text>"}}]}
    results   {"role": "tool", "tool_call_id", "content": "<text>"}. Chat has no error flag, so a failed call's
              text starts with "Error: ". A tool message cannot carry images: a result's images follow in one
              user message after the results of the batch ("Images returned by the <tool> call <id>:").
    stream    SSE chunks: delta.content (a string, or a list of text / thinking parts); delta.reasoning_content
              or delta.reasoning (compatible servers); delta.tool_calls[] joined by `index` (id and name once,
              arguments in fragments, empty meaning {}); finish_reason; a last chunk with usage
              (`stream_options.include_usage`); then `data: [DONE]`. An error sent inside the stream is mapped
              through `OPENAI_ERROR_MAP` and retried like the others (before anything was shown).

What differs between servers is a `ChatProfile` (frozen, shared by every request): the field `max_tokens`
becomes, whether usage is asked for, the form call ids must have, message-order rules... `MistralModel`
(mistral.py) is this adapter with Mistral's profile. Tool names are projected onto `^[A-Za-z0-9_-]{1,64}$`
(`files.read` is sent as `files_read`) and mapped back in responses. A call cut off by the token limit comes
back with `incomplete=True`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Hashable, Mapping, Sequence
from urllib.parse import urlsplit

from .. import errors
from ..errors import ConfigurationError, ProviderError, StreamError
from ..events import ReasoningDelta, StreamEvent, TextDelta
from ..messages import (
    AssistantMessage, ImageBlock, Message, Reasoning, TextBlock, ToolResultMessage, Usage, UserMessage,
)
from ..tools.definition import Tool
from ._common import (
    CallIds, NameRule, ToolCallAccumulator, ToolNames, arguments_json, portable_messages, reasoning_for, usage_from,
)
from ._errors import stream_error
from ._model import HTTPModel
from ._schema import strict_schema
from ._sse import ServerSentEvent, loads

__all__ = ["OPENAI_ERROR_MAP", "ChatProfile", "OllamaModel", "OpenAIChatModel"]

_FINISH_REASON_MAP: dict[str, str] = {
    "stop": "end_turn",
    "eos": "end_turn",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "length": "max_tokens",
    "model_length": "max_tokens",
    "max_tokens": "max_tokens",
    "content_filter": "content_filter",
    "error": "error",
}
"""Chat Completions `finish_reason` -> `AssistantMessage.stop_reason`."""

OPENAI_ERROR_MAP: dict[str, type[ProviderError]] = {
    "rate_limit_exceeded": errors.RateLimitError,
    "insufficient_quota": errors.RateLimitError,
    "server_error": errors.ServerError,
    "api_error": errors.ServerError,
    "server_is_overloaded": errors.OverloadedError,
    "slow_down": errors.OverloadedError,
    "overloaded": errors.OverloadedError,
    "overloaded_error": errors.OverloadedError,
    "service_unavailable": errors.OverloadedError,
    "invalid_prompt": errors.BadRequestError,
    "invalid_request_error": errors.BadRequestError,
    "context_length_exceeded": errors.ContextLengthError,
    "invalid_api_key": errors.AuthenticationError,
    "authentication_error": errors.AuthenticationError,
    "model_not_found": errors.NotFoundError,
}
"""An error's `type` or `code` in an OpenAI-shaped error (Chat, Responses, compatible servers) -> exception."""

_CUT_OFF = frozenset({"length", "model_length", "max_tokens"})
_FRAGMENT_KEYS = {"index": 0, "function": 0}.keys()
_DONE: dict[str, Any] = {}
"""What `[DONE]` parses to (compared by identity)."""

NAME_RULE = NameRule(allowed="A-Za-z0-9_-", max_length=64)
"""What Chat Completions accepts as a function name."""

_RESERVED_SETTINGS = frozenset({"model", "messages", "tools", "stream"})


@dataclass(frozen=True)
class ChatProfile:
    """What one Chat Completions server does differently. Frozen: a model is shared by concurrent requests."""

    max_tokens_field: str = "max_completion_tokens"
    """The request field that `max_tokens` becomes."""
    stream_usage: bool = True
    """Ask for a final usage chunk (`stream_options.include_usage`)."""
    call_id: re.Pattern[str] | None = None
    """The only call ids the server accepts (others are rewritten per request, deterministically)."""
    call_id_length: int = 24
    """The length of a rewritten id."""
    assistant_between_tool_and_user: bool = False
    """Put an assistant "OK" between a tool message and a user message (servers that refuse the pair)."""
    empty_content: str | None = None
    """The content of an assistant message that only calls tools (None: null)."""
    tool_message_name: bool = False
    """Tool messages carry the tool's `name`."""
    required_choice: str = "required"
    """What `tool_choice="required"` is sent as."""

    def call_ids(self) -> CallIds | None:
        """A fresh id map for one request (None when ids are sent as they are)."""
        return None if self.call_id is None else CallIds(self.call_id, length=self.call_id_length)


class OpenAIChatModel(HTTPModel):
    """OpenAI Chat Completions (`openai:gpt-4.1`). Key from `OPENAI_API_KEY`, base URL from `OPENAI_BASE_URL`
    (with `/v1`, as the official SDK), default `https://api.openai.com/v1`.

    Settings: `max_tokens` (sent as `max_completion_tokens`), `temperature`, `top_p`, `stop`, `seed`,
    `tool_choice` (`"auto"`, `"none"`, `"required"` or a tool name), `parallel_tool_calls`,
    `reasoning_effort`, `extra_body` (merged into the request as is); any other setting is sent as is.
    `reasoning_field="reasoning_content"` sends this provider's own reasoning back in that field, for
    compatible servers that ask for it during tool use.
    """

    provider = "openai"
    key_env = ("OPENAI_API_KEY",)
    base_url_env = ("OPENAI_BASE_URL",)
    default_base_url = "https://api.openai.com/v1"
    path = "/chat/completions"
    name_rule = NAME_RULE
    profile = ChatProfile()
    """The server's differences (see `ChatProfile`)."""

    def __init__(self, name: str, *, reasoning_field: str | None = None, **options: Any) -> None:
        super().__init__(name, **options)
        self.reasoning_field = reasoning_field

    # -- going out ---------------------------------------------------------------------------------------
    def map_request(self, messages: Sequence[Message], tools: Sequence[Tool], names: ToolNames,
                    instructions: str | None, settings: dict[str, Any]) -> dict[str, Any]:
        body: dict[str, Any] = {"model": self.name, "messages": self.map_messages(messages, names, instructions)}
        if tools:
            body["tools"] = [_map_tool(t, names) for t in tools]
        stream_options = settings.pop("stream_options", {"include_usage": True} if self.profile.stream_usage else None)
        if stream_options:  # False sends none
            body["stream_options"] = stream_options
        extra = settings.pop("extra_body", None) or {}
        body.update(_map_settings(settings, names, bool(tools), self.profile))
        body.update(extra)
        return body

    def request_body(self, messages: Sequence[Message], tools: Sequence[Tool] = (), *,
                     instructions: str | None = None, **settings: Any) -> dict[str, Any]:
        """The exact JSON body of a streamed request."""
        return self.build_request(messages, tools, instructions=instructions, **settings)[0]

    def map_messages(
        self, messages: Sequence[Message], names: ToolNames, instructions: str | None = None
    ) -> list[dict[str, Any]]:
        """The transcript as the `messages` of a request."""
        return _map_messages(messages, names, instructions, self.provider, self.profile, self.reasoning_field)

    def map_tool_result(self, message: ToolResultMessage) -> Any:
        """The tool message for one result; with images, `[tool message, the user message carrying them]`."""
        tool_message, images = _map_tool_result(message, self.profile, self.profile.call_ids())
        return [tool_message, _images_message(images)] if images else tool_message

    # -- coming in ---------------------------------------------------------------------------------------
    def new_state(self, names: ToolNames) -> _ChatState:
        return _ChatState(self.provider, self.name, names, partial=self.partial_arguments)

    def parse_event(self, sse: ServerSentEvent) -> dict[str, Any] | None:
        return _parse_event(sse, self.provider)


class OllamaModel(OpenAIChatModel):
    """A local OpenAI-compatible server (`ollama:llama3.2`): Ollama by default at
    `http://localhost:11434/v1` (`OLLAMA_BASE_URL`), and just as well vLLM, llama.cpp or LM Studio given
    their `base_url`. No key is needed; one passed as `api_key`, or in `OLLAMA_API_KEY` (the environment, or
    stored with the panel's Settings), is sent as a bearer token. A base URL without a path gets `/v1`.
    """

    provider = "ollama"
    key_env = ("OLLAMA_API_KEY",)
    key_required = False
    base_url_env = ("OLLAMA_BASE_URL",)
    default_base_url = "http://localhost:11434/v1"
    profile = ChatProfile(max_tokens_field="max_tokens")

    def __init__(self, name: str, **options: Any) -> None:
        super().__init__(name, **options)
        if urlsplit(self.base_url).path in ("", "/"):
            self.base_url = self.base_url.rstrip("/") + "/v1"
            self.http.base_url = self.base_url


# --------------------------------------------------------------------------------------------------
# Going out
# --------------------------------------------------------------------------------------------------
def _map_settings(settings: Mapping[str, Any], names: ToolNames, has_tools: bool,
                  profile: ChatProfile) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in settings.items():
        if key in _RESERVED_SETTINGS:
            raise ConfigurationError(f"{key!r} is not a request setting: nbagent sets it")
        if key == "max_tokens":
            out[profile.max_tokens_field] = value
        elif key == "tool_choice":
            if has_tools:
                out["tool_choice"] = _map_tool_choice(value, names, profile)
        elif key == "parallel_tool_calls":
            if has_tools:
                out["parallel_tool_calls"] = bool(value)
        else:
            out[key] = value
    return out


def _map_tool_choice(value: Any, names: ToolNames, profile: ChatProfile) -> Any:
    if value in ("required", "any"):
        return profile.required_choice
    if value in ("auto", "none"):
        return value
    if isinstance(value, str):
        return {"type": "function", "function": {"name": names.wire(value)}}
    return value


def _map_tool(tool: Tool, names: ToolNames) -> dict[str, Any]:
    function: dict[str, Any] = {"name": names.wire(tool.name)}
    if tool.description:
        function["description"] = tool.description
    # strict mode demands every property required (optional ones nullable) and no additional properties
    function["parameters"] = strict_schema(tool.parameters) if tool.strict else tool.parameters
    if tool.strict is not None:
        function["strict"] = tool.strict
    return {"type": "function", "function": function}


def _map_messages(
    messages: Sequence[Message], names: ToolNames, instructions: str | None, provider: str, profile: ChatProfile,
    reasoning_field: str | None = None,
) -> list[dict[str, Any]]:
    ids = profile.call_ids()
    out: list[dict[str, Any]] = []
    if instructions:
        out.append({"role": "system", "content": instructions})
    pending_images: list[dict[str, Any]] = []
    for msg in portable_messages(messages, provider):
        if not isinstance(msg, ToolResultMessage) and pending_images:
            out.append(_images_message(pending_images))
            pending_images = []
        if isinstance(msg, UserMessage):
            out.append(_map_user(msg))
        elif isinstance(msg, AssistantMessage):
            out.append(_map_assistant(msg, names, ids, provider, profile, reasoning_field))
        elif isinstance(msg, ToolResultMessage):
            tool_message, images = _map_tool_result(msg, profile, ids)
            out.append(tool_message)
            pending_images.extend(images)
        else:
            raise TypeError(f"not a message: {msg!r}")
    if pending_images:
        out.append(_images_message(pending_images))
    if profile.assistant_between_tool_and_user:
        for i in range(len(out) - 1, 0, -1):
            if out[i]["role"] == "user" and out[i - 1]["role"] == "tool":
                out.insert(i, {"role": "assistant", "content": "OK"})
    return out


def _map_user(msg: UserMessage) -> dict[str, Any]:
    if isinstance(msg.content, str):
        return {"role": "user", "content": msg.content}
    return {"role": "user", "content": [_map_block(b) for b in msg.blocks]}


def _map_block(block: TextBlock | ImageBlock) -> dict[str, Any]:
    if isinstance(block, TextBlock):
        return {"type": "text", "text": block.text}
    return {"type": "image_url", "image_url": {"url": f"data:{block.mime_type};base64,{block.base64}"}}


def _map_assistant(msg: AssistantMessage, names: ToolNames, ids: CallIds | None, provider: str,
                   profile: ChatProfile, reasoning_field: str | None) -> dict[str, Any]:
    empty = profile.empty_content if msg.tool_calls else ""
    out: dict[str, Any] = {"role": "assistant", "content": msg.text or empty}
    if reasoning_field and msg.provider == provider:
        text = "".join(r.text for r in reasoning_for(msg, provider))
        if text:
            out[reasoning_field] = text
    if msg.tool_calls:
        out["tool_calls"] = [
            {
                "id": ids.wire(call.id) if ids is not None else call.id,
                "type": "function",
                "function": {"name": names.wire(call.name), "arguments": arguments_json(call)},
            }
            for call in msg.tool_calls
        ]
    return out


def _tool_result_text(msg: ToolResultMessage) -> str:
    parts: list[str] = []
    n_images = sum(isinstance(b, ImageBlock) for b in msg.content)
    k = 0
    for block in msg.content:
        if isinstance(block, TextBlock):
            parts.append(block.text)
        else:
            k += 1
            parts.append(f"[image {k} of {n_images}: sent in the next message]")
    text = "\n".join(parts)
    if msg.is_error and not text.lstrip().lower().startswith("error"):
        text = f"Error: {text}" if text else "Error"
    return text


def _map_tool_result(msg: ToolResultMessage, profile: ChatProfile,
                     ids: CallIds | None) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    call_id = ids.wire(msg.tool_call_id) if ids is not None else msg.tool_call_id
    tool_message = {"role": "tool", "tool_call_id": call_id, "content": _tool_result_text(msg)}
    if profile.tool_message_name:
        tool_message["name"] = msg.name
    images = [b for b in msg.content if isinstance(b, ImageBlock)]
    parts: list[dict[str, Any]] = []
    if images:
        parts.append({"type": "text", "text": f"Images returned by the {msg.name} call {call_id}:"})
        parts.extend(_map_block(b) for b in images)
    return tool_message, parts


def _images_message(parts: list[dict[str, Any]]) -> dict[str, Any]:
    return {"role": "user", "content": parts}


# --------------------------------------------------------------------------------------------------
# Coming in
# --------------------------------------------------------------------------------------------------
def _parse_event(sse: ServerSentEvent, provider: str) -> dict[str, Any] | None:
    data = sse.data
    if data == "[DONE]":
        return _DONE
    if not data:
        return None
    try:
        chunk = loads(data)
    except ValueError:
        raise StreamError(f"{provider}: an event is not JSON (the stream may have been cut): {data[:200]!r}",
                          provider=provider) from None
    if chunk.__class__ is not dict:
        raise StreamError(f"{provider}: an event is not a JSON object: {data[:200]!r}", provider=provider)
    if sse.event == "error" and "error" not in chunk:
        chunk = {"error": chunk}
    return chunk


class _ChatState:
    """The pure accumulator of one streamed Chat Completions response: `process(chunk)` returns the deltas to
    show; `result()` the finished message (a `StreamError` if neither a finish_reason nor `[DONE]` came)."""

    def __init__(self, provider: str, model: str, names: ToolNames | None = None, *, partial: bool = True) -> None:
        self.provider = provider
        self.calls = ToolCallAccumulator(partial=partial, names=names)
        self.text: list[str] = []
        self.reasoning: list[str] = []
        self.keys_by_id: dict[str, Hashable] = {}
        self.finish: str | None = None
        self.usage: Usage | None = None
        self.model: str | None = None
        self.fallback_model = model
        self.response_id: str | None = None
        self.done = False
        self.count = 0
        self._add_arguments = self.calls.add_arguments

    def process(self, chunk: dict[str, Any]) -> list[StreamEvent]:
        self.count += 1
        if chunk is _DONE:
            self.done = True
            return []
        if "error" in chunk and chunk["error"] or chunk.get("object") == "error":
            raise stream_error(self.provider, chunk, OPENAI_ERROR_MAP)
        if self.model is None:
            self.model = chunk.get("model")
            self.response_id = chunk.get("id")
        raw_usage = chunk.get("usage")
        if raw_usage:
            self.usage = _usage(raw_usage)
        out: list[StreamEvent] = []
        for choice in chunk.get("choices") or ():
            if choice.get("index", 0) != 0:
                continue  # only the first choice is kept (nbagent never asks for n > 1)
            delta = choice.get("delta")
            if delta:
                self._delta(delta, out)
            reason = choice.get("finish_reason") or choice.get("finishReason")
            if reason:
                self.finish = reason
        return out

    def _delta(self, delta: dict[str, Any], out: list[StreamEvent]) -> None:
        content = delta.get("content")
        if content:
            if content.__class__ is str:
                self.text.append(content)
                out.append(TextDelta(content))
            else:
                self._content_parts(content, out)
        thought = delta.get("reasoning_content") or delta.get("reasoning")
        if thought and isinstance(thought, str):
            self.reasoning.append(thought)
            out.append(ReasoningDelta(thought))
        tool_calls = delta.get("tool_calls") or delta.get("toolCalls")  # camelCase: some Mistral streams
        if tool_calls:
            for position, tc in enumerate(tool_calls):
                if (tc.__class__ is dict and tc.keys() == _FRAGMENT_KEYS
                        and tc["function"].__class__ is dict and tc["index"].__class__ is int):
                    # the hot path: one more fragment of a known call's arguments
                    item = self._add_arguments(tc["index"], tc["function"].get("arguments"))
                else:
                    item = self._add_tool_call(tc, position)
                if item is not None:
                    out.append(item)

    def _content_parts(self, content: Any, out: list[StreamEvent]) -> None:
        """Content that is not a plain string: a list of text parts, or thinking parts (Mistral)."""
        if not isinstance(content, list):
            return
        for part in content:
            if isinstance(part, str):
                pieces, thinking = [part], False
            elif isinstance(part, dict) and part.get("type") in (None, "text"):
                pieces, thinking = [part.get("text") or ""], False
            elif isinstance(part, dict) and part.get("type") == "thinking":
                pieces = [p.get("text") if isinstance(p, dict) else p for p in part.get("thinking") or ()]
                thinking = True
            else:
                continue
            for piece in pieces:
                if piece and isinstance(piece, str):
                    (self.reasoning if thinking else self.text).append(piece)
                    out.append(ReasoningDelta(piece) if thinking else TextDelta(piece))

    def _add_tool_call(self, tc: Any, position: int) -> Any:
        if not isinstance(tc, dict):
            raise StreamError(f"{self.provider}: a tool call delta is not an object: {tc!r}"[:300],
                              provider=self.provider)
        fn = tc.get("function") or {}
        if not isinstance(fn, dict):
            raise StreamError(f"{self.provider}: a tool call's function is not an object: {fn!r}"[:300],
                              provider=self.provider)
        call_id = tc.get("id")
        if not isinstance(call_id, str) or not call_id or call_id == "null":
            call_id = None  # Mistral sends the string "null" in continuation chunks
        index = tc.get("index")
        calls = self.calls
        if isinstance(index, int):
            key: Hashable = index
        elif call_id is not None:
            key = self.keys_by_id.get(call_id, ("id", call_id))
        elif calls.last_key is not None:
            key = calls.last_key
        else:
            key = ("position", position)
        if call_id is not None:
            self.keys_by_id.setdefault(call_id, key)
        return calls.add(key, id=call_id, name=fn.get("name") or None, arguments=fn.get("arguments"))

    def result(self) -> AssistantMessage:
        finish = self.finish
        if not self.done and finish is None:
            raise StreamError(
                f"{self.provider}: the stream ended after {self.count} events without finishing (no "
                "finish_reason, no [DONE]); the response is incomplete", provider=self.provider,
            )
        tool_calls = self.calls.finish(cut_off=finish in _CUT_OFF)
        if finish is None:
            stop = "tool_use" if tool_calls else "end_turn"
        else:
            stop = _FINISH_REASON_MAP.get(finish, finish)
            if tool_calls and stop == "end_turn":
                stop = "tool_use"  # some servers say "stop" after tool calls
        reasoning = [Reasoning("".join(self.reasoning), provider=self.provider)] if self.reasoning else []
        data = {"id": self.response_id} if self.response_id else {}
        # text, tool calls, reasoning, usage, stop reason, model, provider, provider data
        return AssistantMessage("".join(self.text), tool_calls, reasoning, self.usage, stop,
                                self.model or self.fallback_model, self.provider, data)


def _usage(raw: Mapping[str, Any]) -> Usage:
    details = raw.get("prompt_tokens_details") or {}
    cached = details.get("cached_tokens") if isinstance(details, dict) else None
    if cached is None:
        cached = raw.get("prompt_cache_hit_tokens")  # DeepSeek
    out = raw.get("completion_tokens_details") or {}
    reasoning = out.get("reasoning_tokens") if isinstance(out, dict) else None
    return usage_from(raw.get("prompt_tokens"), raw.get("completion_tokens"), cached, 0, reasoning)
