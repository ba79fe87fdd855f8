"""The conversation as data: content blocks, messages, tool calls and tool results.

Every provider adapter converts to and from these classes; nothing here knows about any wire format.
The transcript of a run is a list of `UserMessage`, `AssistantMessage` and `ToolResultMessage`,
in which every tool call of an assistant message is answered by exactly one `ToolResultMessage`
after it (see `nbagent.transcript.check_transcript`).
"""

from __future__ import annotations

import base64
import itertools
import os
from dataclasses import dataclass, field
from typing import Any, Literal, Union

from . import reprs

__all__ = [
    "Presentation",
    "AssistantMessage",
    "ContentBlock",
    "ImageBlock",
    "Message",
    "Reasoning",
    "TextBlock",
    "ToolCall",
    "ToolResult",
    "ToolResultMessage",
    "Usage",
    "UserMessage",
    "new_call_id",
]

_ids = itertools.count(1)
_id_prefix = os.urandom(4).hex()


def new_call_id() -> str:
    """A tool-call id that is unique within this process (for providers that send none)."""
    return f"call_{_id_prefix}{next(_ids):06d}"


@dataclass(slots=True)
class TextBlock:
    """Text the model reads."""

    text: str
    """The text itself."""
    kind: Literal["text"] = "text"


@dataclass(slots=True)
class ImageBlock:
    """An image the model sees (PNG, JPEG, GIF or WebP)."""

    data: bytes
    """The encoded image bytes (not base64)."""
    mime_type: str = "image/png"
    """The media type of `data`."""
    kind: Literal["image"] = "image"

    @property
    def base64(self) -> str:
        """`data` as base64 text, as most wire formats want it."""
        return base64.b64encode(self.data).decode("ascii")

    def __repr__(self) -> str:
        return f"ImageBlock(mime_type={self.mime_type!r}, {len(self.data):,} bytes)"

    def _repr_png_(self) -> bytes | None:
        return self.data if self.mime_type == "image/png" else None

    def _repr_jpeg_(self) -> bytes | None:
        return self.data if self.mime_type == "image/jpeg" else None


ContentBlock = Union[TextBlock, ImageBlock]
"""A content block: what a user message or a tool result is made of. (`nbagent.Block` is something else:
the veto a `before_tool_call` hook returns.)"""

Block = ContentBlock  # the old name, still imported by the provider adapters; new code says ContentBlock


def as_blocks(content: str | ContentBlock | list[ContentBlock] | tuple | None) -> list[ContentBlock]:
    """Accept a plain string (one `TextBlock`), one block, or a list of blocks and strings."""
    if content is None:
        return []
    if isinstance(content, str):
        return [TextBlock(content)]
    if isinstance(content, (TextBlock, ImageBlock)):
        return [content]
    blocks: list[ContentBlock] = []
    for item in content:
        if isinstance(item, str):
            blocks.append(TextBlock(item))
        elif isinstance(item, (TextBlock, ImageBlock)):
            blocks.append(item)
        else:
            raise TypeError(f"content blocks must be str, TextBlock or ImageBlock, not {type(item).__name__}")
    return blocks


def blocks_text(blocks: list[ContentBlock]) -> str:
    """The text of a list of blocks, images shown as a placeholder."""
    if len(blocks) == 1 and isinstance(blocks[0], TextBlock):
        return blocks[0].text
    return "\n".join(b.text if isinstance(b, TextBlock) else f"[image {b.mime_type}]" for b in blocks)


@dataclass(slots=True)
class Usage:
    """Token counts reported by a provider (0 where it reports none).

    One convention for every provider: `input_tokens` counts the whole prompt, cached or not;
    `cache_read_tokens` and `cache_write_tokens` say how much of it was read from or written to a cache;
    `reasoning_tokens` says how much of `output_tokens` was reasoning, where the provider says so.
    """

    input_tokens: int = 0
    """The whole prompt, cached parts included."""
    output_tokens: int = 0
    """What the model produced, reasoning included."""
    cache_read_tokens: int = 0
    """Of `input_tokens`, read from the provider's prompt cache."""
    cache_write_tokens: int = 0
    """Of `input_tokens`, written to the provider's prompt cache."""
    reasoning_tokens: int = 0
    """Of `output_tokens`, reasoning ("thinking"), where the provider reports it apart."""

    def __add__(self, other: Usage | None) -> Usage:
        if other is None:
            return self
        return Usage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.cache_read_tokens + other.cache_read_tokens,
            self.cache_write_tokens + other.cache_write_tokens,
            self.reasoning_tokens + other.reasoning_tokens,
        )

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def as_dict(self) -> dict[str, int]:
        """The counts as a plain dict (for records and the session store)."""
        return {"input_tokens": self.input_tokens, "output_tokens": self.output_tokens,
                "cache_read_tokens": self.cache_read_tokens, "cache_write_tokens": self.cache_write_tokens,
                "reasoning_tokens": self.reasoning_tokens}


@dataclass(slots=True)
class Reasoning:
    """Reasoning ("thinking") the model produced. Never shown to the model as text of ours; providers that
    require it back get it back in their own format (signatures, encrypted items)."""

    text: str = ""
    """The readable part, where the provider gives one."""
    signature: str | None = None
    """Anthropic thinking signature, Gemini thought signature."""
    encrypted: str | None = None
    """Opaque data: OpenAI Responses `encrypted_content`, Anthropic `redacted_thinking` data."""
    id: str | None = None
    """Provider item id (OpenAI Responses reasoning items)."""
    provider: str | None = None
    """Which provider produced it: reasoning is only sent back to that provider."""
    kind: Literal["reasoning"] = "reasoning"


@dataclass(slots=True)
class ToolCall:
    """One tool call the model asked for.

    `ToolCall(name="add", arguments={"a": 1})`, or `ToolCall(name="add", raw_arguments='{"a": 1')` to hand
    the runtime exactly what a model might send, malformed or not.
    """

    name: str
    """The tool name, as the runtime knows it (provider name projections are undone already)."""
    arguments: dict[str, Any] | None = None
    """Parsed arguments (None while only `raw_arguments` is known)."""
    id: str = ""
    """The provider's call id; a unique one is generated when empty."""
    raw_arguments: str | None = None
    """The arguments exactly as the model sent them, when they came as text."""
    incomplete: bool = False
    """True when the call was cut off (the response hit `max_tokens`): it is never executed."""
    provider_data: dict[str, Any] = field(default_factory=dict)
    """Opaque per-provider data that must travel back with the call (e.g. Gemini `thoughtSignature`)."""
    kind: Literal["tool_call"] = "tool_call"

    def __post_init__(self) -> None:
        if not self.id:
            self.id = new_call_id()
        if self.arguments is None and self.raw_arguments is None:
            self.arguments = {}


@dataclass(slots=True)
class UserMessage:
    """What the person (or the runtime, for a repair instruction) says."""

    content: str | list[ContentBlock]
    """A string, or text and image blocks: what the model reads."""
    kind: Literal["user"] = "user"
    said: str | None = field(default=None, kw_only=True)
    """The person's own words, when `content` holds more than they typed (a button's instructions, the cell and
    error it sent, a mention's data): views show these as what they said, with `content` folded under them as
    the context sent. Never sent to the model on its own (None: `content` is their words)."""

    @property
    def words(self) -> str:
        """What the person said: `said`, else the text of `content`."""
        return self.said if self.said is not None else self.text

    @property
    def blocks(self) -> list[ContentBlock]:
        return as_blocks(self.content)

    @property
    def text(self) -> str:
        return self.content if isinstance(self.content, str) else blocks_text(self.content)


@dataclass(slots=True)
class AssistantMessage:
    """One response of the model, normalised across providers."""

    text: str = ""
    """The visible text of the answer (reasoning is never mixed in)."""
    tool_calls: list[ToolCall] = field(default_factory=list)
    """The tool calls it asked for, in order."""
    reasoning: list[Reasoning] = field(default_factory=list)
    """Reasoning blocks, kept so they can be sent back where the provider requires it."""
    usage: Usage | None = None
    """Tokens used by this response, where the provider reports them."""
    stop_reason: str | None = None
    """Normalised: `end_turn`, `tool_use`, `max_tokens`, `content_filter`, `error`, or the provider's own."""
    model: str | None = None
    """The model that produced it."""
    provider: str | None = None
    """The provider that produced it (`anthropic`, `openai`, ...)."""
    provider_data: dict[str, Any] = field(default_factory=dict)
    """Opaque per-provider data (e.g. a response id)."""
    kind: Literal["assistant"] = "assistant"


PRESENTATION_KINDS = ("markdown", "text", "json")


@dataclass(slots=True)
class Presentation:
    """A UI-only payload a tool returns beside its content: the run's view renders it, the model never sees it.

    `kind` is markdown (rendered, raw HTML escaped), text (shown as it is) or json (any JSON-like value,
    shown indented); `title` an optional heading.
    """

    kind: str = "markdown"
    data: Any = None
    title: str | None = None

    def __post_init__(self) -> None:
        if self.kind not in PRESENTATION_KINDS:
            raise ValueError(f"a presentation is one of {', '.join(PRESENTATION_KINDS)}, not {self.kind!r}")


@dataclass(slots=True)
class ToolResult:
    """What a tool call produced.

    `content` is what the model sees (a plain string stands for one `TextBlock`); `details` is any Python
    object, never sent, kept for the user (the DataFrame stays a DataFrame); `is_error` tells the model the
    call failed; `terminate` asks the loop to stop when every result of the batch asks for it;
    `presentation` is what the view shows beside the result and the model never sees (`Presentation`s).
    """

    content: list[ContentBlock] = field(default_factory=list)
    """Text and image blocks: what the model sees."""
    details: Any = None
    """Any Python object: never sent to the model."""
    is_error: bool = False
    """True when the call failed: the model is told so."""
    terminate: bool = False
    """True to end the run after this batch (when every result of the batch says so)."""
    presentation: list[Presentation] = field(default_factory=list)
    """UI-only payloads (`Presentation`): rendered in the run's view, never sent to the model."""

    def __post_init__(self) -> None:
        if self.presentation and not isinstance(self.presentation, list):
            self.presentation = list(self.presentation) if not isinstance(self.presentation, Presentation) \
                else [self.presentation]
        content = self.content
        if type(content) is list:
            for block in content:
                if type(block) is not TextBlock and not isinstance(block, (TextBlock, ImageBlock)):
                    break
            else:
                return
        self.content = as_blocks(content)

    @property
    def text(self) -> str:
        """The text the model sees, images as placeholders."""
        return blocks_text(self.content)

    @property
    def images(self) -> list[ImageBlock]:
        return [b for b in self.content if isinstance(b, ImageBlock)]

    def __repr__(self) -> str:
        text = self.text
        if len(text) > 120:
            text = text[:117] + "..."
        parts = [f"ToolResult({text!r}"]
        if self.is_error:
            parts.append("is_error=True")
        if self.terminate:
            parts.append("terminate=True")
        if self.details is not None:
            parts.append(f"details=<{type(self.details).__name__}>")
        return ", ".join(parts) + ")"

    def _repr_html_(self) -> str:
        return reprs.render("tool_result_html", self)


@dataclass(slots=True)
class ToolResultMessage:
    """The answer to one tool call, as the transcript keeps it and the model receives it."""

    tool_call_id: str
    """The id of the call it answers."""
    name: str
    """The name of the tool that was called."""
    content: list[ContentBlock] = field(default_factory=list)
    """What the model sees."""
    is_error: bool = False
    """Whether the model is told the call failed."""
    result: ToolResult | None = field(default=None, repr=False, compare=False)
    """The full `ToolResult` (with `details`) this message was made from; not serialised."""
    kind: Literal["tool_result"] = "tool_result"

    @property
    def text(self) -> str:
        return blocks_text(self.content)


Message = Union[UserMessage, AssistantMessage, ToolResultMessage]
"""One entry of a transcript."""
