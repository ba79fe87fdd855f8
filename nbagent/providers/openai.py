"""OpenAI Chat Completions, and every server that speaks it (Ollama, vLLM, llama.cpp, LM Studio...).

    tools     [{"type": "function", "function": {name, description, parameters, strict?}}]
    calls     assistant {"tool_calls": [{"id", "type": "function", "function": {name, arguments: "<JSON text>"}}]}
    results   {"role": "tool", "tool_call_id", "content": "<text>"}. Chat has no error flag, so a failed call's
              text starts with "Error: ". A tool message cannot carry images: a result's images follow in one
              user message after the results of the batch ("Images returned by the <tool> call <id>:").
    stream    SSE chunks: delta.content; delta.reasoning_content or delta.reasoning (compatible servers);
              delta.tool_calls[] joined by `index` (id and name once, arguments in fragments, empty meaning {});
              finish_reason; a last chunk with usage (`stream_options.include_usage`); then `data: [DONE]`.

Tool names are projected onto `^[A-Za-z0-9_-]{1,64}$` (`files.read` is sent as `files_read`) and mapped
back in responses. A call cut off by the token limit comes back with `incomplete=True`.
"""

from __future__ import annotations

from contextlib import aclosing
from typing import Any, AsyncIterator, Hashable, Mapping, Sequence
from urllib.parse import urlsplit

from ..errors import ConfigurationError, StreamError
from ..events import ReasoningDelta, StreamEvent, TextDelta
from ..messages import (
    AssistantMessage,
    ImageBlock,
    Message,
    Reasoning,
    TextBlock,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from ..tools import Tool
from ._common import (
    NameRule,
    ToolCallAccumulator,
    ToolNames,
    arguments_json,
    portable_messages,
    reasoning_for,
    usage_from,
)
from ._http import HTTPModel, ServerSentEvent, error_message, loads
from .base import OnRequest

__all__ = ["OllamaModel", "OpenAIChatModel"]

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

_CUT_OFF = frozenset({"length", "model_length", "max_tokens"})
_FRAGMENT_KEYS = {"index": 0, "function": 0}.keys()

NAME_RULE = NameRule(allowed="A-Za-z0-9_-", max_length=64)
"""What Chat Completions accepts as a function name."""

_RESERVED_SETTINGS = frozenset({"model", "messages", "tools", "stream"})


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
    max_tokens_field = "max_completion_tokens"
    """The request field that `max_tokens` becomes."""
    stream_usage = True
    """Ask for a final usage chunk (`stream_options.include_usage`)."""
    name_rule = NAME_RULE
    path = "/chat/completions"
    camel_case = False
    """Also read `toolCalls` and `finishReason` (some Mistral streams)."""

    def __init__(self, name: str, *, reasoning_field: str | None = None, **options: Any) -> None:
        super().__init__(name, **options)
        self.reasoning_field = reasoning_field

    # -- going out ---------------------------------------------------------------------------------------
    def tool_names(self, tools: Sequence[Tool], messages: Sequence[Message] = ()) -> ToolNames:
        """The name projection for one request: the tools offered and the tools called in the history."""
        names = [t.name for t in tools]
        for msg in messages:
            if isinstance(msg, AssistantMessage):
                names.extend(c.name for c in msg.tool_calls)
        return ToolNames(names, self.name_rule)

    def request_body(
        self,
        messages: Sequence[Message],
        tools: Sequence[Tool] = (),
        *,
        instructions: str | None = None,
        names: ToolNames | None = None,
        **settings: Any,
    ) -> dict[str, Any]:
        """The exact JSON body of a streamed request."""
        names = names or self.tool_names(tools, messages)
        body: dict[str, Any] = {"model": self.name, "messages": self._map_messages(messages, names, instructions)}
        if tools:
            body["tools"] = [self._map_tool(t, names) for t in tools]
        body["stream"] = True
        merged = {**self.settings, **settings}
        stream_options = merged.pop("stream_options", {"include_usage": True} if self.stream_usage else None)
        if stream_options is not None:
            body["stream_options"] = stream_options
        extra = merged.pop("extra_body", None) or {}
        body.update(self._map_settings({k: v for k, v in merged.items() if v is not None}, names, bool(tools)))
        body.update(extra)
        return body

    def _map_settings(self, settings: Mapping[str, Any], names: ToolNames, has_tools: bool) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in settings.items():
            if key in _RESERVED_SETTINGS:
                raise ConfigurationError(f"{key!r} is not a request setting: nbagent sets it")
            if key == "max_tokens":
                out[self.max_tokens_field] = value
            elif key == "tool_choice":
                if has_tools:
                    out["tool_choice"] = self._map_tool_choice(value, names)
            elif key == "parallel_tool_calls":
                if has_tools:
                    out["parallel_tool_calls"] = bool(value)
            else:
                out[key] = value
        return out

    def _map_tool_choice(self, value: Any, names: ToolNames) -> Any:
        if value in ("auto", "none", "required"):
            return value
        if value == "any":
            return "required"
        if isinstance(value, str):
            return {"type": "function", "function": {"name": names.wire(value)}}
        return value

    def _map_tool(self, tool: Tool, names: ToolNames) -> dict[str, Any]:
        function: dict[str, Any] = {"name": names.wire(tool.name)}
        if tool.description:
            function["description"] = tool.description
        function["parameters"] = tool.parameters
        if tool.strict is not None:
            function["strict"] = tool.strict
        return {"type": "function", "function": function}

    def _map_messages(
        self, messages: Sequence[Message], names: ToolNames, instructions: str | None = None
    ) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        if instructions:
            out.append({"role": "system", "content": instructions})
        pending_images: list[dict[str, Any]] = []
        for msg in portable_messages(messages, self.provider):
            if not isinstance(msg, ToolResultMessage) and pending_images:
                out.append(self._images_message(pending_images))
                pending_images = []
            if isinstance(msg, UserMessage):
                out.append(self._map_user(msg))
            elif isinstance(msg, AssistantMessage):
                out.append(self._map_assistant(msg, names))
            elif isinstance(msg, ToolResultMessage):
                tool_message, images = self._map_tool_result(msg)
                out.append(tool_message)
                pending_images.extend(images)
            else:
                raise TypeError(f"not a message: {msg!r}")
        if pending_images:
            out.append(self._images_message(pending_images))
        return out

    def _map_user(self, msg: UserMessage) -> dict[str, Any]:
        if isinstance(msg.content, str):
            return {"role": "user", "content": msg.content}
        return {"role": "user", "content": [self._map_block(b) for b in msg.blocks]}

    @staticmethod
    def _map_block(block: TextBlock | ImageBlock) -> dict[str, Any]:
        if isinstance(block, TextBlock):
            return {"type": "text", "text": block.text}
        return {"type": "image_url", "image_url": {"url": f"data:{block.mime_type};base64,{block.base64}"}}

    def _map_assistant(self, msg: AssistantMessage, names: ToolNames) -> dict[str, Any]:
        out: dict[str, Any] = {"role": "assistant", "content": msg.text or (None if msg.tool_calls else "")}
        if self.reasoning_field and msg.provider == self.provider:
            text = "".join(r.text for r in reasoning_for(msg, self.provider))
            if text:
                out[self.reasoning_field] = text
        if msg.tool_calls:
            out["tool_calls"] = [
                {
                    "id": self._wire_call_id(call.id),
                    "type": "function",
                    "function": {"name": names.wire(call.name), "arguments": arguments_json(call)},
                }
                for call in msg.tool_calls
            ]
        return out

    def _wire_call_id(self, call_id: str) -> str:
        return call_id

    def _tool_result_text(self, msg: ToolResultMessage) -> str:
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

    def _map_tool_result(self, msg: ToolResultMessage) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        tool_message = {"role": "tool", "tool_call_id": self._wire_call_id(msg.tool_call_id),
                        "content": self._tool_result_text(msg)}
        images = [b for b in msg.content if isinstance(b, ImageBlock)]
        parts: list[dict[str, Any]] = []
        if images:
            call_id = tool_message["tool_call_id"]
            parts.append({"type": "text", "text": f"Images returned by the {msg.name} call {call_id}:"})
            parts.extend(self._map_block(b) for b in images)
        return tool_message, parts

    @staticmethod
    def _images_message(parts: list[dict[str, Any]]) -> dict[str, Any]:
        return {"role": "user", "content": parts}

    def wire_tool_result(self, message: ToolResultMessage) -> Any:
        """The tool message for one result; with images, `[tool message, the user message carrying them]`."""
        tool_message, images = self._map_tool_result(message)
        return [tool_message, self._images_message(images)] if images else tool_message

    def to_wire(self, messages: Sequence[Message]) -> list[dict[str, Any]]:
        """The transcript as the `messages` of a request."""
        return self._map_messages(messages, self.tool_names((), messages))

    # -- coming in ---------------------------------------------------------------------------------------
    def stream(
        self,
        messages: Sequence[Message],
        tools: Sequence[Tool] = (),
        *,
        instructions: str | None = None,
        on_request: OnRequest | None = None,
        **settings: Any,
    ) -> AsyncIterator[StreamEvent | AssistantMessage]:
        tools = tuple(tools)
        names = self.tool_names(tools, messages)
        body = self.request_body(messages, tools, instructions=instructions, names=names, **settings)
        # Nothing is sent until the first item is asked for.
        return self._process_streamed_response(self.http.stream_events(self.path, body, on_request=on_request), names)

    def _content_parts(self, content: Any, text: list[str], reasoning: list[str]) -> list[StreamEvent]:
        """Content that is not a plain string (a list of parts, as some servers send)."""
        events: list[StreamEvent] = []
        if isinstance(content, list):
            for part in content:
                if isinstance(part, str):
                    piece = part
                elif isinstance(part, dict) and part.get("type") in (None, "text"):
                    piece = part.get("text") or ""
                else:
                    continue
                if piece:
                    text.append(piece)
                    events.append(TextDelta(piece))
        return events

    async def _process_streamed_response(
        self, events: AsyncIterator[ServerSentEvent], names: ToolNames
    ) -> AsyncIterator[StreamEvent | AssistantMessage]:
        text: list[str] = []
        reasoning: list[str] = []
        calls = ToolCallAccumulator(partial=self.partial_arguments, names=names)
        keys_by_id: dict[str, Hashable] = {}
        finish: str | None = None
        usage: Usage | None = None
        model: str | None = None
        response_id: str | None = None
        done = False
        count = 0
        add_arguments = calls.add_arguments
        camel = self.camel_case
        async with aclosing(events):
            async for event in events:
                data = event.data
                count += 1
                if data == "[DONE]":
                    done = True
                    break
                if not data:
                    continue
                try:
                    chunk = loads(data)
                except ValueError:
                    raise StreamError(
                        f"{self.provider}: event {count} is not JSON (the stream may have been cut): {data[:200]!r}",
                        provider=self.provider,
                    ) from None
                if not isinstance(chunk, dict):
                    raise StreamError(f"{self.provider}: event {count} is not a JSON object: {data[:200]!r}",
                                      provider=self.provider)
                if event.event == "error" or chunk.get("error") or chunk.get("object") == "error":
                    message = error_message(chunk) or data[:500]
                    raise StreamError(f"{self.provider} reported an error in the stream: {message}",
                                      provider=self.provider, body=chunk)
                if model is None:
                    model = chunk.get("model")
                    response_id = chunk.get("id")
                raw_usage = chunk.get("usage")
                if raw_usage:
                    usage = self._usage(raw_usage)
                for choice in chunk.get("choices") or ():
                    if choice.get("index", 0) != 0:
                        continue  # only the first choice is kept (nbagent never asks for n > 1)
                    delta = choice.get("delta")
                    if delta:
                        content = delta.get("content")
                        if content:
                            if isinstance(content, str):
                                text.append(content)
                                yield TextDelta(content)
                            else:
                                for item in self._content_parts(content, text, reasoning):
                                    yield item
                        thought = delta.get("reasoning_content") or delta.get("reasoning")
                        if thought and isinstance(thought, str):
                            reasoning.append(thought)
                            yield ReasoningDelta(thought)
                        tool_calls = delta.get("tool_calls")
                        if tool_calls is None and camel:
                            tool_calls = delta.get("toolCalls")
                        if tool_calls:
                            for tc in tool_calls:
                                if (tc.__class__ is dict and tc.keys() == _FRAGMENT_KEYS
                                        and tc["function"].__class__ is dict and tc["index"].__class__ is int):
                                    # the common case: one more fragment of a known call's arguments
                                    out = add_arguments(tc["index"], tc["function"].get("arguments"))
                                else:
                                    out = self._add_tool_call(calls, keys_by_id, tc, tool_calls.index(tc))
                                if out is not None:
                                    yield out
                    reason = choice.get("finish_reason")
                    if reason is None and camel:
                        reason = choice.get("finishReason")
                    if reason:
                        finish = reason
        if not done and finish is None:
            raise StreamError(
                f"{self.provider}: the stream ended after {count} events without finishing (no finish_reason, "
                "no [DONE]); the response is incomplete", provider=self.provider,
            )
        tool_calls = calls.finish(cut_off=finish in _CUT_OFF)
        if finish is None:
            stop = "tool_use" if tool_calls else "end_turn"
        else:
            stop = _FINISH_REASON_MAP.get(finish, finish)
            if tool_calls and stop == "end_turn":
                stop = "tool_use"  # some servers say "stop" after tool calls
        yield AssistantMessage(
            text="".join(text),
            tool_calls=tool_calls,
            reasoning=[Reasoning("".join(reasoning), provider=self.provider)] if reasoning else [],
            usage=usage,
            stop_reason=stop,
            model=model or self.name,
            provider=self.provider,
            provider_data={"id": response_id} if response_id else {},
        )

    def _add_tool_call(
        self, calls: ToolCallAccumulator, keys_by_id: dict[str, Hashable], tc: Any, position: int
    ) -> Any:
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
        if isinstance(index, int):
            key: Hashable = index
        elif call_id is not None:
            key = keys_by_id.get(call_id, ("id", call_id))
        elif calls.last_key is not None:
            key = calls.last_key
        else:
            key = ("position", position)
        if call_id is not None:
            keys_by_id.setdefault(call_id, key)
        return calls.add(key, id=call_id, name=fn.get("name") or None, arguments=fn.get("arguments"))

    def _usage(self, raw: Mapping[str, Any]) -> Usage:
        details = raw.get("prompt_tokens_details") or {}
        cached = details.get("cached_tokens") if isinstance(details, dict) else None
        if cached is None:
            cached = raw.get("prompt_cache_hit_tokens")  # DeepSeek
        out = raw.get("completion_tokens_details") or {}
        reasoning = out.get("reasoning_tokens") if isinstance(out, dict) else None
        return usage_from(raw.get("prompt_tokens"), raw.get("completion_tokens"), cached, 0, reasoning)


class OllamaModel(OpenAIChatModel):
    """A local OpenAI-compatible server (`ollama:llama3.2`): Ollama by default at
    `http://localhost:11434/v1` (`OLLAMA_BASE_URL`), and just as well vLLM, llama.cpp or LM Studio given
    their `base_url`. No key is needed; one passed as `api_key` is sent as a bearer token. A base URL
    without a path gets `/v1`.
    """

    provider = "ollama"
    key_env = ()
    key_required = False
    base_url_env = ("OLLAMA_BASE_URL",)
    default_base_url = "http://localhost:11434/v1"
    max_tokens_field = "max_tokens"

    def __init__(self, name: str, **options: Any) -> None:
        super().__init__(name, **options)
        if urlsplit(self.base_url).path in ("", "/"):
            self.base_url = self.base_url.rstrip("/") + "/v1"
            self.http.base_url = self.base_url
