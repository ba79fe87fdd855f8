"""Mistral chat completions: the OpenAI Chat adapter (openai.py) with Mistral's profile.

    ids       a tool-call id must be exactly 9 letters or digits: ids from elsewhere (another provider,
              nbagent's own) are rewritten, the same way in every request, and mapped back
    stream    calls may come as `toolCalls` (camelCase), without `index`, with the id "null" in
              continuation chunks (never taken for an id), and with `arguments` already an object;
              content may be a list of parts, `{"type": "thinking", ...}` being reasoning (the Chat
              stream state reads all of these for every server)
    order     Mistral refuses a user message right after a tool message: an assistant "OK" goes between
    settings  `max_tokens`; `tool_choice="required"` is sent as "any"; no `stream_options` (usage always
              comes in the last chunk); tool messages carry the tool's `name`; an assistant message that
              only calls tools has the content "" (not null)

The profile is frozen and the id map is made per request, so one model serves concurrent requests.
"""

from __future__ import annotations

import re

from .openai import ChatProfile, OpenAIChatModel

__all__ = ["MISTRAL", "MistralModel"]

CALL_ID = re.compile(r"[A-Za-z0-9]{9}")
"""The only tool-call ids Mistral accepts."""

MISTRAL = ChatProfile(
    max_tokens_field="max_tokens",
    stream_usage=False,
    call_id=CALL_ID,
    call_id_length=9,
    assistant_between_tool_and_user=True,
    empty_content="",
    tool_message_name=True,
    required_choice="any",
)
"""What Mistral does differently from OpenAI Chat Completions."""


class MistralModel(OpenAIChatModel):
    """Mistral (`mistral:mistral-large-latest`). Key from `MISTRAL_API_KEY`, base URL from `MISTRAL_BASE_URL`,
    default `https://api.mistral.ai/v1`. Settings as for `OpenAIChatModel`."""

    provider = "mistral"
    key_env = ("MISTRAL_API_KEY",)
    base_url_env = ("MISTRAL_BASE_URL",)
    default_base_url = "https://api.mistral.ai/v1"
    profile = MISTRAL
