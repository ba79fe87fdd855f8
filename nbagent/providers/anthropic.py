"""Anthropic Messages: `AnthropicModel`, over httpx.

    POST {ANTHROPIC_BASE_URL or https://api.anthropic.com}/v1/messages     "stream": true

Going out (`_map_*`, here): tools get `input_schema`; cache breakpoints (`cache_control`, at most four) go
on the last tool, the system prompt and the last block of the last two user messages; the system prompt is
`system`; an assistant turn is its thinking blocks (sent back unchanged, signatures included), its text
and its `tool_use` blocks; every result of one turn goes back in ONE user message as `tool_result`
blocks (`tool_use_id`, `is_error`, text and image content). Names the API forbids are projected
(`^[a-zA-Z0-9_-]{1,64}$`) and ids from other providers rewritten; the response maps names back.
`eager_input_streaming=True` asks for fine-grained tool streaming (the per-tool field; `"beta"` sends
the `fine-grained-tool-streaming-2025-05-14` header instead, for platforms that refuse the field).

Coming in (`_StreamState`, in `_anthropic_stream`): a pure accumulator over the parsed SSE events that
returns the deltas to show and, at the end, one normalised `AssistantMessage`.

Server-side tools (web search, web fetch, code execution, tool search, MCP): their `server_tool_use` and
result blocks are never client tool calls. They are kept whole, in order, in
`provider_data["server_blocks"]` and sent back unchanged to Anthropic (another provider never sees them:
`portable_messages` drops `provider_data`).
"""

from __future__ import annotations

import re
from typing import Any, Literal, Sequence

from ..errors import ConfigurationError
from ..messages import AssistantMessage, Block, ImageBlock, Message, TextBlock, ToolResultMessage, UserMessage
from ..tools.definition import Tool
from ._anthropic_stream import PROVIDER, _StreamState
from ._common import CallIds, NameRule, ToolNames, arguments_object, portable_messages, reasoning_for
from ._model import HTTPModel

__all__ = ["AnthropicModel"]

DEFAULT_BASE_URL = "https://api.anthropic.com"
API_VERSION = "2023-06-01"
DEFAULT_MAX_TOKENS = 8192
_EPHEMERAL = {"type": "ephemeral"}

FINE_GRAINED_BETA = "fine-grained-tool-streaming-2025-05-14"
"""The beta header of fine-grained tool streaming, for platforms that refuse `eager_input_streaming`."""

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
    state_class = _StreamState
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
