"""Google Gemini API: `GeminiModel`, over httpx.

    POST {GOOGLE_GEMINI_BASE_URL or https://generativelanguage.googleapis.com}
         /v1beta/models/{model}:streamGenerateContent?alt=sse          x-goog-api-key: ...

Going out (`_map_*`): tools are `[{"functionDeclarations": [...]}]`, each with its JSON Schema as
`parametersJsonSchema`, or (`use_parameters=True`, for endpoints that only know the older field) as
`parameters` in the OpenAPI 3.0 subset, sanitised by `openapi_schema`. The system prompt is
`systemInstruction`. A model turn is its thought parts and text (with their `thoughtSignature`s) and its
`functionCall` parts, objects as `args`, each with the `thoughtSignature` it came with (a call another
provider made gets Google's documented placeholder signature on Gemini 3 and later). Results go back as
`functionResponse` parts of one user turn, in call order, named and numbered like their call (`id` is
sent on both sides, as the API accepts).

Coming in (`_process_*`): `_StreamState.process(chunk)` is a pure accumulator over the streamed
`GenerateContentResponse` chunks. Thought parts (`thought: true`) become reasoning, never text. Calls
come whole (`args`) or, on endpoints that stream them, as `partialArgs` by JSON path. Gemini calls
usually have no id: one is made as the call arrives, so live deltas carry it. The stream has no terminal
event: a stream whose last chunk carries no `finishReason` was cut short (`StreamError`); an error
object inside the stream is mapped like the HTTP status it carries.
"""

from __future__ import annotations

import functools
import json
import re
from typing import Any, Sequence
from urllib.parse import quote

from ..errors import ConfigurationError, ProviderError, StreamError
from ..events import ReasoningDelta, StreamEvent, TextDelta, ToolCallDelta
from ..messages import (
    AssistantMessage, Block, ImageBlock, Message, Reasoning, TextBlock, ToolResultMessage, UserMessage, new_call_id,
)
from ..tools.definition import Tool
from ._common import (
    CallIds, NameRule, ToolCallAccumulator, ToolNames, arguments_object, portable_messages, reasoning_for, usage_from,
)
from ._errors import stream_error
from ._gemini_args import APPEND, SET, START, StreamedCall, json_path
from ._model import HTTPModel
from ._schema import openapi_schema

__all__ = ["GeminiModel", "openapi_schema"]

PROVIDER = "google"
DEFAULT_BASE_URL = "https://generativelanguage.googleapis.com"
SKIP_SIGNATURE = "skip_thought_signature_validator"
"""The placeholder signature Google documents for calls that Gemini did not make (another provider's)."""

_FINISH_REASON_MAP: dict[str, str] = {
    "STOP": "end_turn",
    "MAX_TOKENS": "max_tokens",
    "SAFETY": "content_filter",
    "RECITATION": "content_filter",
    "BLOCKLIST": "content_filter",
    "PROHIBITED_CONTENT": "content_filter",
    "SPII": "content_filter",
    "IMAGE_SAFETY": "content_filter",
    "LANGUAGE": "content_filter",
    "MALFORMED_FUNCTION_CALL": "error",
    "UNEXPECTED_TOOL_CALL": "error",
    "TOO_MANY_TOOL_CALLS": "error",
    "OTHER": "error",
}
"""Gemini `finishReason` -> nbagent's normalised stop reason (unknown ones pass through, lower-cased)."""

_ERROR_MAP: dict[str, type[ProviderError]] = {}
"""Gemini's errors carry their HTTP status (`code: 429`), and are mapped like it; no status name is needed."""

NAME_RULE = NameRule(allowed="A-Za-z0-9_.:-", max_length=64, first="A-Za-z_")
"""Function names: a letter or underscore, then letters, digits, `_ . : -`; at most 64."""
ID_PATTERN = re.compile(r"[A-Za-z0-9_.:-]{1,64}")
"""Call ids sent as they are (Gemini's own, nbagent's, most other providers'); others are rewritten."""

_GENERATION_KEYS = {
    "max_tokens": "maxOutputTokens",
    "max_output_tokens": "maxOutputTokens",
    "top_p": "topP",
    "top_k": "topK",
    "stop": "stopSequences",
    "stop_sequences": "stopSequences",
    "presence_penalty": "presencePenalty",
    "frequency_penalty": "frequencyPenalty",
    "candidate_count": "candidateCount",
    "response_mime_type": "responseMimeType",
    "response_schema": "responseSchema",
    "response_json_schema": "responseJsonSchema",
}
"""Setting names (OpenAI-like or snake_case) -> `generationConfig` fields."""

_TOP_LEVEL = {"safetySettings", "toolConfig", "cachedContent", "labels"}
"""Request fields that are not part of `generationConfig`."""


class GeminiModel(HTTPModel):
    """A Gemini model over the Gemini API (`streamGenerateContent?alt=sse`).

    `GeminiModel("gemini-2.5-flash")` reads `GEMINI_API_KEY` (or `GOOGLE_API_KEY`) and
    `GOOGLE_GEMINI_BASE_URL` when a request is made.

    Options: `use_parameters` (send schemas as the older OpenAPI-subset `parameters`), `api_version`
    (default `v1beta`), `thinking` (a token budget; thoughts are then included), `thinking_level`,
    `max_tokens`, `temperature`, `tool_choice`, the transport options of `HTTPModel`; other settings go
    into `generationConfig` (or the top level for `safetySettings`, `toolConfig`, `cachedContent`).
    """

    provider = PROVIDER
    key_env = ("GEMINI_API_KEY", "GOOGLE_API_KEY")
    base_url_env = ("GOOGLE_GEMINI_BASE_URL",)
    default_base_url = DEFAULT_BASE_URL
    name_rule = NAME_RULE
    stop_when_done = False
    """The whole stream is read: usage may follow the chunk that finishes."""
    stream_field = False
    """Streaming is the endpoint's (`streamGenerateContent`), not a field of the body."""

    def __init__(
        self,
        name: str,
        *,
        use_parameters: bool = False,
        api_version: str = "v1beta",
        **options: Any,
    ) -> None:
        super().__init__(name.removeprefix("models/") if isinstance(name, str) else name, **options)
        self.use_parameters = use_parameters
        """Send tool schemas as `parameters` (sanitised OpenAPI 3.0 subset) instead of `parametersJsonSchema`."""
        self.api_version = api_version

    def auth_headers(self, key: str | None) -> dict[str, str]:
        return {"x-goog-api-key": key} if key else {}

    @property
    def path(self) -> str:
        return f"/{self.api_version}/models/{quote(self.name, safe='.-_')}:streamGenerateContent?alt=sse"

    @property
    def validates_signatures(self) -> bool:
        """Gemini 3 and later refuse a model turn's function calls without a thought signature."""
        match = re.search(r"gemini-(\d+)", self.name)
        return bool(match) and int(match.group(1)) >= 3

    # -- requests -------------------------------------------------------------------------------------
    def map_request(self, messages: Sequence[Message], tools: Sequence[Tool], names: ToolNames,
                    instructions: str | None, settings: dict[str, Any]) -> dict[str, Any]:
        body: dict[str, Any] = {"contents": _map_messages(messages, names, sign_foreign=self.validates_signatures)}
        if instructions:
            body["systemInstruction"] = {"parts": [{"text": instructions}]}
        if tools:
            body["tools"] = _map_tools(tools, names, use_parameters=self.use_parameters)
            choice = _map_tool_choice(settings.pop("tool_choice", None), names)
            if choice is not None:
                body["toolConfig"] = {"functionCallingConfig": choice}
        else:
            settings.pop("tool_choice", None)
        generation: dict[str, Any] = dict(settings.pop("generationConfig", None) or {})
        thinking: dict[str, Any] = dict(settings.pop("thinkingConfig", None) or {})
        budget = settings.pop("thinking", None)
        if budget is not None and budget is not False:
            thinking.setdefault("thinkingBudget", -1 if budget is True else budget)
            thinking.setdefault("includeThoughts", True)
        if "thinking_level" in settings:
            thinking["thinkingLevel"] = settings.pop("thinking_level")
            thinking.setdefault("includeThoughts", True)
        if "include_thoughts" in settings:
            thinking["includeThoughts"] = bool(settings.pop("include_thoughts"))
        for key, value in settings.items():
            if key in _TOP_LEVEL:
                body[key] = value
            elif key in ("stop", "stop_sequences") and isinstance(value, str):
                generation["stopSequences"] = [value]
            else:
                generation[_GENERATION_KEYS.get(key, key)] = value
        if thinking:
            generation["thinkingConfig"] = thinking
        if generation:
            body["generationConfig"] = generation
        return body

    def map_tool_result(self, message: ToolResultMessage) -> dict[str, Any]:
        """The `functionResponse` part this result is sent as."""
        return _function_response(message, self.tool_names([]), CallIds(ID_PATTERN, length=24))

    def map_messages(self, messages: Sequence[Message], names: ToolNames) -> list[dict[str, Any]]:
        """The transcript as the `contents` of a request."""
        return _map_messages(messages, names, sign_foreign=self.validates_signatures)


# --------------------------------------------------------------------------------------------------
# Going out
# --------------------------------------------------------------------------------------------------
def _map_tools(tools: Sequence[Tool], names: ToolNames, *, use_parameters: bool = False) -> list[dict[str, Any]]:
    declarations = []
    for tool in tools:
        decl: dict[str, Any] = {"name": names.wire(tool.name)}
        if tool.description:
            decl["description"] = tool.description
        if use_parameters:
            schema = openapi_schema(tool.parameters)
            if schema.get("properties"):  # the older field refuses an object without properties
                decl["parameters"] = schema
        else:
            decl["parametersJsonSchema"] = tool.parameters
        declarations.append(decl)
    return [{"functionDeclarations": declarations}]


def _map_tool_choice(value: Any, names: ToolNames) -> dict[str, Any] | None:
    if value is None:
        return None
    if isinstance(value, dict):
        return value
    modes = {"auto": "AUTO", "none": "NONE", "required": "ANY", "any": "ANY"}
    if value in modes:
        return {"mode": modes[value]}
    if isinstance(value, str):
        return {"mode": "ANY", "allowedFunctionNames": [names.wire(value)]}
    raise ConfigurationError(f"tool_choice must be 'auto', 'none', 'required', a tool name or a dict, not {value!r}")


def _map_messages(messages: Sequence[Message], names: ToolNames, *, sign_foreign: bool = False) -> list[dict[str, Any]]:
    """The transcript as `contents`; consecutive user-side messages (results, then text) share one turn."""
    ids = CallIds(ID_PATTERN, length=24)
    out: list[dict[str, Any]] = []
    for msg in portable_messages(messages, PROVIDER):
        if isinstance(msg, AssistantMessage):
            parts = _map_assistant(msg, names, ids, sign_foreign=sign_foreign)
            if parts:
                out.append({"role": "model", "parts": parts})
            continue
        if isinstance(msg, ToolResultMessage):
            parts = [_function_response(msg, names, ids)]
            parts.extend(_map_blocks([b for b in msg.content if isinstance(b, ImageBlock)]))
        elif isinstance(msg, UserMessage):
            parts = _map_blocks(msg.blocks) or [{"text": " "}]
        else:
            raise TypeError(f"not a message: {msg!r}")
        if out and out[-1]["role"] == "user":
            # results first, then text; images of results follow all the function responses of the turn
            prev = out[-1]["parts"]
            if isinstance(msg, ToolResultMessage) and prev and "functionResponse" in prev[0]:
                at = max(i for i, p in enumerate(prev) if "functionResponse" in p) + 1
                prev[at:at] = parts[:1]
                prev.extend(parts[1:])
            else:
                prev.extend(parts)
        else:
            out.append({"role": "user", "parts": parts})
    return out


def _map_blocks(blocks: Sequence[Block]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for block in blocks:
        if isinstance(block, TextBlock):
            if block.text:
                out.append({"text": block.text})
        elif isinstance(block, ImageBlock):
            out.append({"inlineData": {"mimeType": block.mime_type, "data": block.base64}})
    return out


def _function_response(msg: ToolResultMessage, names: ToolNames, ids: CallIds) -> dict[str, Any]:
    """`{"functionResponse": {id, name, response: {"output"|"error": text}}}`, named and numbered like its
    call; images travel as parts after the turn's function responses."""
    text = "\n".join(b.text for b in msg.content if isinstance(b, TextBlock))
    return {"functionResponse": {"id": ids.wire(msg.tool_call_id), "name": names.wire(msg.name),
                                 "response": {"error" if msg.is_error else "output": text}}}


def _map_assistant(msg: AssistantMessage, names: ToolNames, ids: CallIds, *, sign_foreign: bool) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = []
    for r in reasoning_for(msg, PROVIDER):
        if r.text or r.signature:
            part: dict[str, Any] = {"text": r.text, "thought": True}
            if r.signature:
                part["thoughtSignature"] = r.signature
            parts.append(part)
    signature = msg.provider_data.get("text_signature") if msg.provider == PROVIDER else None
    if msg.text or signature:
        part = {"text": msg.text}
        if signature:
            part["thoughtSignature"] = signature
        parts.append(part)
    foreign = msg.provider != PROVIDER
    for i, call in enumerate(msg.tool_calls):
        part = {"functionCall": {"id": ids.wire(call.id), "name": names.wire(call.name),
                                 "args": arguments_object(call)}}
        sig = call.provider_data.get("thoughtSignature")
        if sig:
            part["thoughtSignature"] = sig
        elif sign_foreign and foreign and i == 0:
            part["thoughtSignature"] = SKIP_SIGNATURE
        parts.append(part)
    return parts


# --------------------------------------------------------------------------------------------------
# Coming in
# --------------------------------------------------------------------------------------------------
class _StreamState:
    """The pure accumulator of one streamed response: `process(chunk)` returns the deltas to show;
    `result()` the finished message (a `StreamError` if no chunk carried a `finishReason`)."""

    def __init__(self, names: ToolNames | None = None, *, partial: bool = True) -> None:
        self.names = names
        self.calls = ToolCallAccumulator(partial=partial, names=names)
        self.text: list[str] = []
        self.text_signature: str | None = None
        self.thoughts: list[str] = []
        self.thought_signature: str | None = None
        self.streamed: dict[int, StreamedCall] = {}
        self.whole: dict[int, dict[str, Any]] = {}
        self.current: StreamedCall | None = None
        self.finish_reason: str | None = None
        self.finish_message: str | None = None
        self.block_reason: str | None = None
        self.usage: dict[str, Any] | None = None
        self.model: str | None = None
        self.response_id: str | None = None
        self.done = False
        self._keys = 0

    def process(self, chunk: dict[str, Any]) -> list[StreamEvent]:
        if "error" in chunk and not chunk.get("candidates"):
            raise stream_error(PROVIDER, chunk, _ERROR_MAP, key_env=GeminiModel.key_env)
        self.model = chunk.get("modelVersion") or self.model
        self.response_id = chunk.get("responseId") or self.response_id
        if isinstance(chunk.get("usageMetadata"), dict):
            self.usage = chunk["usageMetadata"]
        feedback = chunk.get("promptFeedback") or {}
        if feedback.get("blockReason") and not chunk.get("candidates"):
            self.block_reason = feedback["blockReason"]
            self.done = True
            return []
        out: list[StreamEvent] = []
        candidates = chunk.get("candidates") or []
        if candidates and isinstance(candidates[0], dict):
            candidate = candidates[0]
            for part in (candidate.get("content") or {}).get("parts") or []:
                if isinstance(part, dict):
                    out.extend(self._part(part))
            if candidate.get("finishReason"):
                self.finish_reason = candidate["finishReason"]
                self.finish_message = candidate.get("finishMessage")
                self.done = True
        return out

    def _part(self, part: dict[str, Any]) -> list[StreamEvent]:
        signature = part.get("thoughtSignature")
        if "functionCall" in part:
            return self._function_call(part.get("functionCall") or {}, signature)
        if part.get("thought"):
            text = part.get("text") or ""
            if signature:
                self.thought_signature = signature
            if text:
                self.thoughts.append(text)
                return [ReasoningDelta(text)]
            return []
        if "text" in part:
            if signature:
                self.text_signature = signature
            text = part.get("text") or ""
            if text:
                self.text.append(text)
                return [TextDelta(text)]
        return []  # inline data, executable code and other parts this adapter does not use

    def _new_key(self) -> int:
        self._keys += 1
        return self._keys

    def _function_call(self, fc: dict[str, Any], signature: str | None) -> list[StreamEvent]:
        data = {"thoughtSignature": signature} if signature else None
        # Gemini usually sends no id: one is made now, so the live deltas carry the id the call will have
        call_id = (fc.get("id") or new_call_id()) if fc.get("name") else None
        if fc.get("name") and "partialArgs" not in fc and not fc.get("willContinue"):
            # a whole call (the usual case): its args are an object, or absent for no arguments
            key = self._new_key()
            index = len(self.calls)
            self.calls.add(key, id=call_id, name=fc["name"], provider_data=data)
            args = fc.get("args")
            args = args if isinstance(args, dict) else {}
            self.whole[key] = args  # an object already: nothing to parse, now or later
            name = self.names.internal(fc["name"]) if self.names is not None else fc["name"]
            return [ToolCallDelta(index, call_id, name, json.dumps(args, ensure_ascii=False) if args else "", args)]
        out: list[StreamEvent] = []
        if fc.get("name"):  # a call whose arguments follow as partialArgs
            key = self._new_key()
            index = len(self.calls)
            start = self.calls.add(key, id=call_id, name=fc["name"], provider_data=data)
            name = self.names.internal(fc["name"]) if self.names is not None else fc["name"]
            self.current = self.streamed[key] = StreamedCall(key, index, call_id, name)
            if start is not None:
                out.append(start)
        current = self.current
        if current is None:
            if fc:
                raise StreamError(f"gemini sent call arguments before any call began: {json.dumps(fc)[:200]}",
                                  provider=PROVIDER)
            return out
        if data:
            self.calls.add(current.key, provider_data=data)
        for arg in fc.get("partialArgs") or []:
            out.extend(self._partial_arg(current, arg))
        if not fc.get("willContinue") and not fc.get("name"):
            current.finished = True  # `functionCall: {}` closes the streamed call
            self.current = None
        return out

    def _partial_arg(self, call: StreamedCall, arg: dict[str, Any]) -> list[StreamEvent]:
        where = str(arg.get("jsonPath", "$"))
        try:
            path = json_path(where)
        except ValueError as exc:
            raise StreamError(f"gemini sent an unreadable argument path: {exc}", provider=PROVIDER) from None
        if "stringValue" in arg:
            value: Any = str(arg["stringValue"])
            call.log.append((path, value, APPEND if where in call.open_strings else START))
            if arg.get("willContinue"):
                call.open_strings.add(where)
            else:
                call.open_strings.discard(where)
            fragment = value
        else:
            for field_name in ("numberValue", "boolValue", "nullValue", "structValue", "listValue"):
                if field_name in arg:
                    value = None if field_name == "nullValue" else arg[field_name]
                    break
            else:
                return []
            call.log.append((path, value, SET))
            fragment = json.dumps(value, ensure_ascii=False)
        return [ToolCallDelta.lazy(call.index, call.id, call.name, fragment,
                                   functools.partial(call.snapshot, len(call.log)))]

    def result(self) -> AssistantMessage:
        if not self.done:
            raise StreamError("the gemini stream ended without a finishReason (it was cut short)", provider=PROVIDER)
        calls = self.calls.finish()
        cut_off = self.finish_reason == "MAX_TOKENS"
        for key, call in zip(range(1, self._keys + 1), calls):  # keys were numbered in order of arrival
            if key in self.whole:
                call.arguments = self.whole[key]
            streamed = self.streamed.get(key)
            if streamed is not None:
                call.arguments = streamed.snapshot()
                if not streamed.finished and (cut_off or streamed.open_strings):
                    call.incomplete = True
            if isinstance(call.arguments, dict):
                call.raw_arguments = None  # Gemini sends objects, never text
        reasoning = []
        if self.thoughts or self.thought_signature:
            reasoning.append(Reasoning(text="".join(self.thoughts), signature=self.thought_signature,
                                       provider=PROVIDER))
        u = self.usage or {}
        usage = usage_from(
            u.get("promptTokenCount"),
            (u.get("candidatesTokenCount") or 0) + (u.get("thoughtsTokenCount") or 0),
            u.get("cachedContentTokenCount"),
            0,
            u.get("thoughtsTokenCount"),
        ) if self.usage else None
        if self.block_reason:
            stop = "content_filter"
        elif self.finish_reason == "STOP" and calls:
            stop = "tool_use"
        else:
            raw = self.finish_reason or ""
            stop = _FINISH_REASON_MAP.get(raw, raw.lower() or "end_turn")
        data: dict[str, Any] = {}
        if self.response_id:
            data["id"] = self.response_id
        if self.text_signature:
            data["text_signature"] = self.text_signature
        if self.finish_message:
            data["finish_message"] = self.finish_message  # e.g. what was wrong with a malformed call
        # text, tool calls, reasoning, usage, stop reason, model, provider, provider data
        return AssistantMessage("".join(self.text), calls, reasoning, usage, stop, self.model, PROVIDER, data)


GeminiModel.state_class = _StreamState  # here: the state is defined after the model
