"""The context window: how many tokens a model takes, and how full a conversation is.

    context_window(model)                     # 200_000 for anthropic:claude-sonnet-4-5; None when unknown
    measure(messages, anchor)                 # (tokens, measured): the provider's count where there is one

The window comes from, in order: `Agent(context_window=N)`; a `context_window` attribute on the model;
`WINDOWS` below (the providers' main models, by name prefix; change it to configure); the `genai-prices`
table's model metadata. Unknown: no gauge and no automatic compaction.

How full: the provider's reported input tokens of the last response, plus its output, plus an estimate of
what was added since (its tool results, a new prompt). Only before the first response, or right after a
compaction, is the whole transcript estimated (about four characters a token).
"""

from __future__ import annotations

import json
from typing import Any, Sequence

from ..messages import AssistantMessage, ImageBlock, Message, TextBlock, ToolResultMessage, UserMessage

__all__ = ["WINDOWS", "context_window", "estimate_message", "estimate_tokens", "measure"]

WINDOWS: dict[str, int] = {
    # Anthropic
    "claude-opus-4": 200_000, "claude-sonnet-4": 200_000, "claude-haiku-4": 200_000, "claude-3-7": 200_000,
    "claude-3-5": 200_000, "claude-3": 200_000, "claude": 200_000,
    # OpenAI
    "gpt-5": 400_000, "gpt-4.1": 1_047_576, "gpt-4o": 128_000, "gpt-4-turbo": 128_000, "gpt-4": 8_192,
    "gpt-3.5-turbo": 16_385, "o1": 200_000, "o3": 200_000, "o4-mini": 200_000, "codex-mini": 200_000,
    # Google
    "gemini-3": 1_048_576, "gemini-2.5": 1_048_576, "gemini-2.0": 1_048_576, "gemini-1.5-pro": 2_097_152,
    "gemini-1.5-flash": 1_048_576,
    # Mistral
    "mistral-large": 131_072, "mistral-medium": 131_072, "mistral-small": 131_072, "magistral": 131_072,
    "codestral": 256_000, "devstral": 131_072, "ministral": 131_072, "open-mistral-nemo": 131_072,
    "pixtral": 131_072,
}
"""Context windows in tokens by model-name prefix (the longest matching prefix wins). Add to it, or pass
`Agent(context_window=N)`."""

CHARS_PER_TOKEN = 4.0
IMAGE_TOKENS = 1_600
MESSAGE_OVERHEAD = 4


def context_window(model: Any, override: int | None = None) -> int | None:
    """The model's window in tokens (see the module docstring for where it comes from)."""
    if override:
        return int(override)
    own = getattr(model, "context_window", None)
    if isinstance(own, int) and own > 0:
        return own
    name = (getattr(model, "name", "") or "").split("/")[-1]
    if not name:
        return None
    best = max((p for p in WINDOWS if name.startswith(p)), key=len, default=None)
    if best is not None:
        return WINDOWS[best]
    return _from_price_table(name, getattr(model, "provider", ""))


def _from_price_table(name: str, provider: str) -> int | None:
    from .pricing import PROVIDER_IDS, price_known

    if not price_known(name, provider):
        return None
    from genai_prices import Usage, calc_price

    try:
        found = calc_price(Usage(input_tokens=1), name, provider_id=PROVIDER_IDS[provider]).model
    except LookupError:
        return None
    window = getattr(found, "context_window", None)
    return int(window) if window else None


def estimate_message(message: Message) -> int:
    """About how many tokens one message takes (four characters a token; an image 1,600)."""
    chars = 0
    images = 0
    if isinstance(message, AssistantMessage):
        chars += len(message.text)
        for call in message.tool_calls:
            chars += len(call.name) + 16
            if call.raw_arguments is not None:
                chars += len(call.raw_arguments)
            elif call.arguments:
                chars += len(json.dumps(call.arguments, ensure_ascii=False, default=str))
        for r in message.reasoning:
            chars += len(r.text) + len(r.signature or "") + len(r.encrypted or "")
    else:
        content = message.content
        if isinstance(content, str):
            chars += len(content)
        else:
            for block in content:
                if isinstance(block, TextBlock):
                    chars += len(block.text)
                elif isinstance(block, ImageBlock):
                    images += 1
        if isinstance(message, ToolResultMessage):
            chars += len(message.tool_call_id) + len(message.name)
    return int(chars / CHARS_PER_TOKEN) + images * IMAGE_TOKENS + MESSAGE_OVERHEAD


def estimate_tokens(messages: Sequence[Message]) -> int:
    return sum(estimate_message(m) for m in messages)


class Estimates:
    """Running sums of `estimate_message` over a transcript that grows at its end, so measuring before each
    request costs what was added, not the whole conversation (a run of a thousand turns would otherwise
    spend its time re-estimating). A transcript changed anywhere but its end (a compaction) is re-read."""

    __slots__ = ("seen", "sums", "unmeasured")

    def __init__(self) -> None:
        self.seen: list[Message] = []
        self.sums: list[int] = [0]
        self.unmeasured = 0
        """`messages[:unmeasured]` hold no response with a provider's count (looked at already)."""

    def upto(self, messages: Sequence[Message], n: int) -> int:
        """The estimate of `messages[:n]`."""
        seen = self.seen
        k = min(len(seen), len(messages))
        if k and (seen[k - 1] is not messages[k - 1] or seen[0] is not messages[0]):
            j = 0
            while j < k and seen[j] is messages[j]:
                j += 1
            del seen[j:]
            del self.sums[j + 1:]
            self.unmeasured = min(self.unmeasured, j)
        sums = self.sums
        for m in messages[len(seen):n]:
            seen.append(m)
            sums.append(sums[-1] + estimate_message(m))
        return sums[n] if n < len(sums) else sums[-1]

    def between(self, messages: Sequence[Message], start: int, end: int | None = None) -> int:
        end = len(messages) if end is None else end
        return self.upto(messages, end) - self.upto(messages, start)


def measure(messages: Sequence[Message], anchor: tuple[int, int] | None = None,
            extra: int = 0, cache: Estimates | None = None) -> tuple[int, bool]:
    """How many tokens `messages` take now, and whether that rests on a provider's count.

    `anchor` (index, tokens) says `messages[:index]` took `tokens` (set after a compaction: responses before
    it were measured on the longer transcript). `extra` is added when nothing was measured: the estimate
    of the instructions and tool schemas, which a provider's count already includes.
    """
    cache = cache if cache is not None else Estimates()
    start = anchor[0] if anchor is not None else 0
    cache.upto(messages, len(messages))  # re-reads a changed transcript, and with it what was looked at
    for i in range(len(messages) - 1, max(start, cache.unmeasured) - 1, -1):
        m = messages[i]
        if isinstance(m, AssistantMessage) and m.usage is not None and m.usage.input_tokens:
            return m.usage.input_tokens + m.usage.output_tokens + cache.between(messages, i + 1), True
    cache.unmeasured = max(cache.unmeasured, len(messages))
    if anchor is not None:
        return anchor[1] + cache.between(messages, start), False
    return cache.upto(messages, len(messages)) + extra, False


def estimate_prompt_extra(instructions: str | None, tools: Sequence[Any]) -> int:
    """About how many tokens the instructions and the tool schemas take."""
    chars = len(instructions or "")
    for t in tools:
        chars += len(getattr(t, "name", "")) + len(getattr(t, "description", "") or "")
        schema = getattr(t, "parameters", None)
        if isinstance(schema, dict):
            chars += len(json.dumps(schema, default=str))
        else:
            chars += 200
    return int(chars / CHARS_PER_TOKEN)


def is_user_turn(message: Message) -> bool:
    return isinstance(message, UserMessage)
