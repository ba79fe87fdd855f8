"""OpenAI Responses: `OpenAIResponsesModel`, over httpx.

    POST {OPENAI_BASE_URL or https://api.openai.com/v1}/responses     "stream": true, "store": false

Going out (`_map_*`): tools are sorted by name, each `{"type": "function", name, description,
parameters, strict}`; a strict tool's schema is normalised the way strict mode demands (every property
required, the optional ones made nullable, `additionalProperties: false`, recursively, `$defs`
included). The transcript becomes `input` items: user messages, this provider's reasoning items (with
their `encrypted_content`, requested through `include` because nothing is stored server-side; only for
models that reason, the others refuse both), assistant `message` items, `function_call` and
`function_call_output` items joined by `call_id` (a failed call's output starts with "Error: ").

Coming in (`_process_*`): `_StreamState.process(event)` is a pure accumulator over the parsed events
(`response.output_item.added/done`, `response.output_text.delta`, `response.function_call_arguments.delta`
per item, reasoning summary deltas, `response.completed` / `response.incomplete` / `response.failed`,
`error`). A stream that ends without one of the three terminal events is a `StreamError`.

Built-in tools (web search, file search, code interpreter, image generation, MCP...): their output items
are never client tool calls. They are kept whole, in order, in `provider_data["server_items"]` and sent
back unchanged as input items to this provider (another provider never sees them).

The strict-mode schema normalisation (`strict_schema`) is in _schema.py.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Sequence

from ..errors import ConfigurationError, StreamError
from ..events import ReasoningDelta, StreamEvent, TextDelta
from ..messages import (
    AssistantMessage, Block, ImageBlock, Message, Reasoning, TextBlock, ToolResultMessage, UserMessage,
)
from ..tools.definition import Tool
from ._common import (
    CallIds, NameRule, ToolCallAccumulator, ToolNames, arguments_json, portable_messages, reasoning_for, usage_from,
)
from ._errors import stream_error
from ._model import HTTPModel
from ._schema import strict_schema
from .openai import OPENAI_ERROR_MAP

__all__ = ["OpenAIResponsesModel", "strict_schema"]

PROVIDER = "openai-responses"
DEFAULT_BASE_URL = "https://api.openai.com/v1"

_FINISH_REASON_MAP: dict[str, str] = {
    "completed": "end_turn",
    "max_output_tokens": "max_tokens",
    "content_filter": "content_filter",
    "failed": "error",
}
"""Response `status` / `incomplete_details.reason` -> nbagent's normalised stop reason."""

_ERROR_MAP = OPENAI_ERROR_MAP
"""Error `code` (or `type`) in an `error` event or a failed response -> the exception raised (OpenAI's)."""

_CLIENT_ITEMS = frozenset({"message", "reasoning", "function_call"})
"""Output items this adapter reads; every other item (a built-in tool's call) is kept opaque."""

NAME_RULE = NameRule(allowed="A-Za-z0-9_-", max_length=64)
"""Function names: `^[a-zA-Z0-9_-]{1,64}$`."""
ID_PATTERN = re.compile(r"[A-Za-z0-9_-]{1,64}")
"""Call ids kept as they are; others are rewritten."""

_REASONING_MODEL = re.compile(r"^(?:o\d|gpt-5(?!.*chat)|codex)", re.I)
"""Models that reason and accept `include: ["reasoning.encrypted_content"]` (gpt-4o and others refuse it)."""


class OpenAIResponsesModel(HTTPModel):
    """An OpenAI model over the Responses API.

    `OpenAIResponsesModel("gpt-5")` reads `OPENAI_API_KEY` and `OPENAI_BASE_URL` (with `/v1`, as the
    official SDK; default `https://api.openai.com/v1`) when a request is made.

    Options: `reasoning` (True/False; default: by model name, o-series and gpt-5) decides whether
    encrypted reasoning is requested and sent back; `reasoning_effort` and `reasoning_summary` fill the
    request's `reasoning` object; `max_tokens` is sent as `max_output_tokens`; `store` (default False);
    the transport options of `HTTPModel`; any other request field (`temperature`, `tool_choice`,
    `parallel_tool_calls`, `text`...) is sent as given.
    """

    provider = PROVIDER
    key_env = ("OPENAI_API_KEY",)
    base_url_env = ("OPENAI_BASE_URL",)
    default_base_url = DEFAULT_BASE_URL
    path = "/responses"
    name_rule = NAME_RULE

    def __init__(
        self,
        name: str,
        *,
        reasoning: bool | None = None,
        store: bool = False,
        **options: Any,
    ) -> None:
        super().__init__(name, **options)
        self.reasoning = reasoning if reasoning is not None else bool(_REASONING_MODEL.match(self.name.split("/")[-1]))
        """Whether the model reasons: encrypted reasoning is then requested and sent back."""
        self.store = store
        """Whether the provider keeps responses (then item ids are sent back too)."""

    # -- requests -------------------------------------------------------------------------------------
    def map_request(self, messages: Sequence[Message], tools: Sequence[Tool], names: ToolNames,
                    instructions: str | None, settings: dict[str, Any]) -> dict[str, Any]:
        body: dict[str, Any] = {"model": self.name}
        if instructions:
            body["instructions"] = instructions
        body["input"] = _map_messages(messages, names, store=self.store, reasoning=self.reasoning)
        extra_tools = list(settings.pop("extra_tools", None) or ())  # built-in tools, as the API takes them
        if tools or extra_tools:
            body["tools"] = [*_map_tools(tools, names), *extra_tools]
            choice = _map_tool_choice(settings.pop("tool_choice", None), names)
            if choice is not None:
                body["tool_choice"] = choice
        else:
            settings.pop("tool_choice", None)
        if "max_tokens" in settings:
            settings.setdefault("max_output_tokens", settings.pop("max_tokens"))
        reasoning = dict(settings.pop("reasoning", None) or {})
        if "reasoning_effort" in settings:
            reasoning["effort"] = settings.pop("reasoning_effort")
        if "reasoning_summary" in settings:
            reasoning["summary"] = settings.pop("reasoning_summary")
        if reasoning:
            body["reasoning"] = reasoning
        body["store"] = self.store
        if self.reasoning and not self.store:
            body["include"] = ["reasoning.encrypted_content"]
        body.update(settings)
        return body

    def map_tool_result(self, message: ToolResultMessage) -> dict[str, Any]:
        """The `function_call_output` item this result is sent as."""
        return _map_tool_result(message, CallIds(ID_PATTERN, length=24))

    def map_messages(self, messages: Sequence[Message], names: ToolNames) -> list[dict[str, Any]]:
        """The transcript as the `input` items of a request."""
        return _map_messages(messages, names, store=self.store, reasoning=self.reasoning)


# --------------------------------------------------------------------------------------------------
# Going out
# --------------------------------------------------------------------------------------------------
def _map_tools(tools: Sequence[Tool], names: ToolNames) -> list[dict[str, Any]]:
    """Function tools sorted by (wire) name, so the bytes are the same whatever order they came in."""
    out = []
    for tool in tools:
        strict = tool.strict is True
        out.append({
            "type": "function",
            "name": names.wire(tool.name),
            "description": tool.description or "",
            "parameters": strict_schema(tool.parameters) if strict else tool.parameters,
            "strict": strict,  # the Responses API treats a missing `strict` as true
        })
    return sorted(out, key=lambda t: t["name"])


def _map_tool_choice(value: Any, names: ToolNames) -> Any:
    if value is None or isinstance(value, dict) or value in ("auto", "none", "required"):
        return value
    if value == "any":
        return "required"
    if isinstance(value, str):
        return {"type": "function", "name": names.wire(value)}
    raise ConfigurationError(f"tool_choice must be 'auto', 'none', 'required', a tool name or a dict, not {value!r}")


def _map_messages(
    messages: Sequence[Message], names: ToolNames, *, store: bool = False, reasoning: bool = True
) -> list[dict[str, Any]]:
    """The transcript as `input` items (reasoning items only for a model that reasons: others refuse them)."""
    ids = CallIds(ID_PATTERN, length=24)
    out: list[dict[str, Any]] = []
    for msg in portable_messages(messages, PROVIDER):
        if isinstance(msg, UserMessage):
            out.append({"role": "user", "content": _map_user_content(msg)})
        elif isinstance(msg, ToolResultMessage):
            out.append(_map_tool_result(msg, ids))
        elif isinstance(msg, AssistantMessage):
            out.extend(_map_assistant(msg, names, ids, store=store, reasoning=reasoning))
        else:
            raise TypeError(f"not a message: {msg!r}")
    return out


def _image_url(block: ImageBlock) -> str:
    return f"data:{block.mime_type};base64,{block.base64}"


def _map_user_content(msg: UserMessage) -> str | list[dict[str, Any]]:
    if isinstance(msg.content, str):
        return msg.content
    return _map_input_blocks(msg.blocks)


def _map_input_blocks(blocks: Sequence[Block]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for block in blocks:
        if isinstance(block, TextBlock):
            out.append({"type": "input_text", "text": block.text})
        elif isinstance(block, ImageBlock):
            out.append({"type": "input_image", "image_url": _image_url(block)})
    return out


def _map_tool_result(msg: ToolResultMessage, ids: CallIds) -> dict[str, Any]:
    """A `function_call_output`: plain text as a string, text with images as input content parts. The item
    has no error flag, so a failed call's text starts with "Error: " (as with Chat Completions)."""
    blocks = list(msg.content)
    if msg.is_error:
        first = next((b for b in blocks if isinstance(b, TextBlock)), None)
        if first is None or not first.text.lstrip().lower().startswith("error"):
            marked = TextBlock(f"Error: {first.text}" if first is not None and first.text else "Error")
            blocks = [marked if b is first else b for b in blocks] if first is not None else [marked, *blocks]
    output: str | list[dict[str, Any]]
    if any(isinstance(b, ImageBlock) for b in blocks):
        output = _map_input_blocks(blocks)
    else:
        output = "\n".join(b.text for b in blocks if isinstance(b, TextBlock))
    return {"type": "function_call_output", "call_id": ids.wire(msg.tool_call_id), "output": output}


def _map_assistant(
    msg: AssistantMessage, names: ToolNames, ids: CallIds, *, store: bool, reasoning: bool = True
) -> list[dict[str, Any]]:
    """This provider's reasoning items, then the text as an assistant `message`, then `function_call`s."""
    out: list[dict[str, Any]] = []
    for r in reasoning_for(msg, PROVIDER) if reasoning else ():
        if not r.encrypted and not (store and r.id):
            continue  # without encrypted content (or a stored item) there is nothing the API can use
        item: dict[str, Any] = {"type": "reasoning"}
        if r.id:
            item["id"] = r.id
        item["summary"] = [{"type": "summary_text", "text": r.text}] if r.text else []
        if r.encrypted:
            item["encrypted_content"] = r.encrypted
        out.append(item)
    if msg.provider == PROVIDER:
        out.extend(msg.provider_data.get("server_items") or ())
    if msg.text:
        out.append({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": msg.text}]})
    for call in msg.tool_calls:
        item = {"type": "function_call", "call_id": ids.wire(call.id), "name": names.wire(call.name),
                "arguments": arguments_json(call)}
        if store and call.provider_data.get("item_id"):
            item["id"] = call.provider_data["item_id"]
        out.append(item)
    return out


# --------------------------------------------------------------------------------------------------
# Coming in
# --------------------------------------------------------------------------------------------------
@dataclass
class _Item:
    """One output item as it arrives."""

    type: str
    text: list[str] = field(default_factory=list)
    summary: dict[int, list[str]] = field(default_factory=dict)
    done: dict[str, Any] | None = None


class _StreamState:
    """The pure accumulator of one streamed response: `process(event)` returns the deltas to show (an event
    never makes more than one); `result()` the finished message (a `StreamError` if no terminal event
    came)."""

    def __init__(self, names: ToolNames | None = None, *, partial: bool = True) -> None:
        self.calls = ToolCallAccumulator(partial=partial, names=names)
        self.items: dict[str, _Item] = {}
        self.order: list[str] = []
        self.final_arguments: dict[str, str] = {}
        self.id: str | None = None
        self.model: str | None = None
        self.status: str | None = None
        self.reason: str | None = None
        self.usage: dict[str, Any] | None = None
        self.done = False
        self._has_text = False
        self._add_arguments = self.calls.add_arguments

    def _key(self, event: dict[str, Any]) -> str:
        """Items are keyed by id; servers that omit ids are keyed by output index."""
        item = event.get("item") if isinstance(event.get("item"), dict) else {}
        key = event.get("item_id") or item.get("id")
        return str(key) if key else f"#{event.get('output_index', 0)}"

    def _item(self, event: dict[str, Any], kind: str) -> _Item:
        key = self._key(event)
        found = self.items.get(key)
        if found is None:
            found = self.items[key] = _Item(kind)
            self.order.append(key)
        return found

    def process(self, event: dict[str, Any]) -> tuple[StreamEvent, ...]:
        kind = event.get("type", "")
        if kind == "response.function_call_arguments.delta":  # the hot path
            item_id = event.get("item_id")
            key = item_id if item_id.__class__ is str and item_id else self._key(event)
            out = self._add_arguments(key, event.get("delta") or "")
        else:
            out = self._event(kind, event)
        return () if out is None else (out,)

    def _event(self, kind: str, event: dict[str, Any]) -> StreamEvent | None:
        if kind == "response.output_text.delta" or kind == "response.refusal.delta":
            return self._text(event, event.get("delta") or "")
        if kind in ("response.reasoning_summary_text.delta", "response.reasoning_text.delta"):
            return self._reasoning(event, event.get("delta") or "")
        if kind == "response.output_item.added":
            return self._added(event)
        if kind == "response.output_item.done":
            return self._item_done(event)
        if kind == "response.function_call_arguments.done":
            if isinstance(event.get("arguments"), str):
                self.final_arguments[self._key(event)] = event["arguments"]
        elif kind in ("response.created", "response.in_progress"):
            response = event.get("response") or {}
            self.id = response.get("id") or self.id
            self.model = response.get("model") or self.model
        elif kind in ("response.completed", "response.incomplete"):
            response = event.get("response") or {}
            self.id = response.get("id") or self.id
            self.model = response.get("model") or self.model
            self.status = response.get("status") or kind.rsplit(".", 1)[1]
            details = response.get("incomplete_details") or {}
            self.reason = details.get("reason") if isinstance(details, dict) else None
            self.usage = response.get("usage") or self.usage
            self.done = True
        elif kind == "response.failed":
            response = event.get("response") or {}
            raise stream_error(PROVIDER, response.get("error") or {}, _ERROR_MAP, what="response failed")
        elif kind == "error":
            raise stream_error(PROVIDER, event, _ERROR_MAP)
        return None

    def _text(self, event: dict[str, Any], text: str) -> StreamEvent | None:
        if not text:
            return None
        item = self._item(event, "message")
        if not item.text and self._has_text:
            text = "\n\n" + text  # a second message item (commentary, then the answer) is a new paragraph
        item.text.append(text)
        self._has_text = True
        return TextDelta(text)

    def _reasoning(self, event: dict[str, Any], text: str) -> StreamEvent | None:
        if not text:
            return None
        item = self._item(event, "reasoning")
        index = event.get("summary_index", event.get("content_index", 0))
        parts = item.summary.setdefault(index, [])
        if not parts and any(item.summary[i] for i in item.summary if i != index):
            text = "\n\n" + text
        parts.append(text)
        return ReasoningDelta(text)

    def _added(self, event: dict[str, Any]) -> StreamEvent | None:
        data = event.get("item") or {}
        kind = data.get("type", "")
        self._item(event, kind)
        if kind == "function_call":
            arguments = data.get("arguments") or None
            return self.calls.add(self._key(event), id=data.get("call_id") or data.get("id"), name=data.get("name"),
                                  arguments=arguments, provider_data={"item_id": data["id"]} if data.get("id") else None)
        return None

    def _item_done(self, event: dict[str, Any]) -> StreamEvent | None:
        data = event.get("item") or {}
        item = self._item(event, data.get("type", ""))
        item.done = data
        key = self._key(event)
        if item.type == "function_call":
            if isinstance(data.get("arguments"), str):
                self.final_arguments[key] = data["arguments"]
            if key not in self.calls:  # a call that arrived whole, without an `added` event
                return self.calls.add(key, id=data.get("call_id"), name=data.get("name"))
        elif item.type == "message" and not item.text:
            text = "".join(p.get("text") or p.get("refusal") or "" for p in data.get("content") or []
                           if isinstance(p, dict))
            return self._text(event, text)
        return None

    def result(self) -> AssistantMessage:
        if not self.done:
            raise StreamError("the openai-responses stream ended before response.completed", provider=PROVIDER)
        text: list[str] = []
        reasoning: list[Reasoning] = []
        server_items: list[dict[str, Any]] = []
        for key in self.order:
            item = self.items[key]
            if item.type == "message":
                text.extend(item.text)
            elif item.type == "reasoning":
                reasoning.append(self._reasoning_of(key, item))
            elif item.type not in _CLIENT_ITEMS and item.done:
                server_items.append(item.done)
        calls = self.calls.finish()
        cut_off = self.reason == "max_output_tokens"
        keyed = dict(zip([k for k in self.order if k in self.calls], calls))
        for key, call in keyed.items():
            final = self.final_arguments.get(key)
            if final is not None and final != (call.raw_arguments or ""):
                call.raw_arguments = final if final.strip() else None
                try:
                    value = json.loads(final) if final.strip() else {}
                except ValueError:
                    value = None
                call.arguments = value if isinstance(value, dict) else None
            if cut_off and (self.items[key].done is None or call.arguments is None):
                call.incomplete = True
        u = self.usage or {}
        details = u.get("input_tokens_details") or {}
        out = u.get("output_tokens_details") or {}
        usage = usage_from(u.get("input_tokens"), u.get("output_tokens"), details.get("cached_tokens"), 0,
                           out.get("reasoning_tokens")) if self.usage else None
        if self.status == "completed":
            stop = "tool_use" if calls else "end_turn"
        else:
            stop = _FINISH_REASON_MAP.get(self.reason or "", self.reason or self.status or "end_turn")
        data: dict[str, Any] = {"id": self.id} if self.id else {}
        if server_items:
            data["server_items"] = server_items
        # text, tool calls, reasoning, usage, stop reason, model, provider, provider data
        return AssistantMessage("".join(text), calls, reasoning, usage, stop, self.model, PROVIDER, data)

    def _reasoning_of(self, key: str, item: _Item) -> Reasoning:
        done = item.done or {}
        summary = done.get("summary")
        if isinstance(summary, list) and summary:
            text = "\n\n".join(p.get("text", "") for p in summary if isinstance(p, dict) and p.get("text"))
        else:
            text = "".join("".join(item.summary[i]) for i in sorted(item.summary))
        return Reasoning(text=text, encrypted=done.get("encrypted_content") or None,
                         id=done.get("id") or (key if not key.startswith("#") else None), provider=PROVIDER)


OpenAIResponsesModel.state_class = _StreamState  # here: the state is defined after the model
