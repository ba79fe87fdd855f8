"""Mistral chat completions: the OpenAI Chat wire format with Mistral's differences.

    ids       a tool-call id must be exactly 9 letters or digits: ids from elsewhere (another provider,
              nbagent's own) are rewritten, the same way in every request, and mapped back
    stream    calls may come as `toolCalls` (camelCase), without `index`, with the id "null" in
              continuation chunks (never taken for an id), and with `arguments` already an object
    content   may be a list of parts: `{"type": "thinking", ...}` is reasoning, `{"type": "text"}` text
    order     Mistral refuses a user message right after a tool message: an assistant "OK" goes between
    settings  `max_tokens`; `tool_choice="required"` is sent as "any"; no `stream_options` (usage always
              comes in the last chunk)
"""

from __future__ import annotations

import re
from typing import Any, Sequence

from ..events import ReasoningDelta, StreamEvent, TextDelta
from ..messages import AssistantMessage, Message, ToolResultMessage
from ._common import CallIds, ToolNames
from .openai import OpenAIChatModel

__all__ = ["MistralModel"]

CALL_ID = re.compile(r"[A-Za-z0-9]{9}")
"""The only tool-call ids Mistral accepts."""


class MistralModel(OpenAIChatModel):
    """Mistral (`mistral:mistral-large-latest`). Key from `MISTRAL_API_KEY`, base URL from `MISTRAL_BASE_URL`,
    default `https://api.mistral.ai/v1`. Settings as for `OpenAIChatModel`."""

    provider = "mistral"
    key_env = ("MISTRAL_API_KEY",)
    base_url_env = ("MISTRAL_BASE_URL",)
    default_base_url = "https://api.mistral.ai/v1"
    max_tokens_field = "max_tokens"
    stream_usage = False
    camel_case = True

    def __init__(self, name: str, **options: Any) -> None:
        super().__init__(name, **options)
        self._ids = CallIds(CALL_ID, length=9)

    # -- going out ---------------------------------------------------------------------------------------
    def call_ids(self) -> CallIds:
        """A fresh id map (deterministic: an id is rewritten the same way in every request)."""
        return CallIds(CALL_ID, length=9)

    def _map_messages(
        self, messages: Sequence[Message], names: ToolNames, instructions: str | None = None
    ) -> list[dict[str, Any]]:
        # The mapping is synchronous, so this request's id map cannot be seen by another one.
        self._ids = self.call_ids()
        out = super()._map_messages(messages, names, instructions)
        fixed: list[dict[str, Any]] = []
        for i, msg in enumerate(out):
            fixed.append(msg)
            if msg["role"] == "tool" and i + 1 < len(out) and out[i + 1]["role"] == "user":
                fixed.append({"role": "assistant", "content": "OK"})
        return fixed

    def _wire_call_id(self, call_id: str) -> str:
        return self._ids.wire(call_id)

    def _map_assistant(self, msg: AssistantMessage, names: ToolNames) -> dict[str, Any]:
        out = super()._map_assistant(msg, names)
        if out.get("content") is None:
            out["content"] = ""
        return out

    def _map_tool_result(self, msg: ToolResultMessage) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        tool_message, images = super()._map_tool_result(msg)
        tool_message["name"] = msg.name
        return tool_message, images

    def _map_tool_choice(self, value: Any, names: ToolNames) -> Any:
        if value in ("required", "any"):
            return "any"
        return super()._map_tool_choice(value, names)

    def wire_tool_result(self, message: ToolResultMessage) -> Any:
        self._ids = self.call_ids()
        return super().wire_tool_result(message)

    # -- coming in ---------------------------------------------------------------------------------------
    def _content_parts(self, content: Any, text: list[str], reasoning: list[str]) -> list[StreamEvent]:
        events: list[StreamEvent] = []
        if not isinstance(content, list):
            return events
        for part in content:
            if isinstance(part, str):
                if part:
                    text.append(part)
                    events.append(TextDelta(part))
                continue
            if not isinstance(part, dict):
                continue
            kind = part.get("type")
            if kind == "thinking":
                for piece in part.get("thinking") or ():
                    value = piece.get("text") if isinstance(piece, dict) else piece if isinstance(piece, str) else None
                    if value:
                        reasoning.append(value)
                        events.append(ReasoningDelta(value))
            elif kind in (None, "text"):
                value = part.get("text") or ""
                if value:
                    text.append(value)
                    events.append(TextDelta(value))
        return events
