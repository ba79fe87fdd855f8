"""The conversation as data: the validity check, a neutral JSON form, and a JSONL store.

A transcript is valid when every tool call of an assistant message is answered by exactly one
`ToolResultMessage`, and those answers come right after it, before anything else. That is what every
provider requires, and the runtime keeps it true at every moment, cancellations included.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any, Iterable

from .messages import (
    AssistantMessage,
    ImageBlock,
    Message,
    Reasoning,
    TextBlock,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
)

__all__ = ["TranscriptError", "check_transcript", "dump_messages", "load_messages", "neutral_message", "read_jsonl", "write_jsonl"]


class TranscriptError(ValueError):
    """A transcript is not valid (some tool call is not answered exactly once, right after it)."""


def check_transcript(messages: Iterable[Message], *, raise_: bool = False) -> list[str]:
    """Return the problems of a transcript (an empty list when it is valid).

    With `raise_=True`, raise `TranscriptError` listing them instead.
    """
    problems: list[str] = []
    pending: dict[str, str] = {}
    answered: set[str] = set()
    for i, msg in enumerate(messages):
        if isinstance(msg, ToolResultMessage):
            if msg.tool_call_id in pending:
                del pending[msg.tool_call_id]
                answered.add(msg.tool_call_id)
            elif msg.tool_call_id in answered:
                problems.append(f"message {i}: tool call {msg.tool_call_id!r} is answered twice")
            else:
                problems.append(f"message {i}: result for tool call {msg.tool_call_id!r}, which no earlier message made")
            continue
        if pending:
            problems.append(
                f"message {i}: {type(msg).__name__} comes before the results of tool calls "
                f"{', '.join(repr(k) for k in pending)}"
            )
            pending.clear()
        if isinstance(msg, AssistantMessage):
            for call in msg.tool_calls:
                if call.id in pending or call.id in answered:
                    problems.append(f"message {i}: tool call id {call.id!r} is used twice")
                pending[call.id] = call.name
        elif not isinstance(msg, UserMessage):
            problems.append(f"message {i}: not a message: {type(msg).__name__}")
    if pending:
        problems.append(f"end: tool calls {', '.join(repr(k) for k in pending)} have no result")
    if problems and raise_:
        raise TranscriptError("; ".join(problems))
    return problems


# --------------------------------------------------------------------------------------------------
# Neutral JSON form (also what `ScriptedModel` runs show as the wire format)
# --------------------------------------------------------------------------------------------------
_USAGE_KEYS = frozenset(Usage.__dataclass_fields__)
MAX_SAID = 20_000
"""The longest `said` read back (it is only shown: stored state longer than this is cut, never refused)."""


def _block(block: TextBlock | ImageBlock) -> dict[str, Any]:
    if isinstance(block, TextBlock):
        return {"type": "text", "text": block.text}
    return {"type": "image", "mime_type": block.mime_type, "data": block.base64}


def _blocks(content: str | list) -> str | list[dict[str, Any]]:
    return content if isinstance(content, str) else [_block(b) for b in content]


def neutral_message(msg: Message, *, said: bool = True) -> dict[str, Any]:
    """A message as provider-neutral JSON (`said=False`: as the model receives it, without the person's own
    words kept beside a user message's content for the views)."""
    if isinstance(msg, ToolResultMessage):
        return {
            "role": "tool",
            "tool_call_id": msg.tool_call_id,
            "name": msg.name,
            "content": _blocks(msg.content),
            "is_error": msg.is_error,
        }
    if isinstance(msg, UserMessage):
        user: dict[str, Any] = {"role": "user", "content": _blocks(msg.content)}
        if said and msg.said is not None:
            user["said"] = msg.said
        return user
    if isinstance(msg, AssistantMessage):
        out: dict[str, Any] = {"role": "assistant", "content": msg.text}
        if msg.tool_calls:
            out["tool_calls"] = [_neutral_call(c) for c in msg.tool_calls]
        if msg.reasoning:
            out["reasoning"] = [
                {k: v for k, v in (("text", r.text), ("signature", r.signature), ("encrypted", r.encrypted),
                                   ("id", r.id), ("provider", r.provider)) if v}
                for r in msg.reasoning
            ]
        u = msg.usage
        if u is not None:
            out["usage"] = {"input_tokens": u.input_tokens, "output_tokens": u.output_tokens,
                            "cache_read_tokens": u.cache_read_tokens, "cache_write_tokens": u.cache_write_tokens}
            if u.reasoning_tokens:
                out["usage"]["reasoning_tokens"] = u.reasoning_tokens
        if msg.stop_reason:
            out["stop_reason"] = msg.stop_reason
        if msg.model:
            out["model"] = msg.model
        if msg.provider:
            out["provider"] = msg.provider
        if msg.provider_data:
            out["provider_data"] = msg.provider_data
        return out
    raise TypeError(f"not a message: {msg!r}")


def _neutral_call(c: ToolCall) -> dict[str, Any]:
    out = {"id": c.id, "name": c.name, "arguments": c.arguments if c.arguments is not None else c.raw_arguments}
    if c.incomplete:
        out["incomplete"] = True
    if c.provider_data:
        out["provider_data"] = c.provider_data
    return out


def _load_blocks(content: Any) -> Any:
    if isinstance(content, str):
        return content
    blocks = []
    for b in content:
        if b.get("type") == "image":
            blocks.append(ImageBlock(base64.b64decode(b["data"]), b.get("mime_type", "image/png")))
        else:
            blocks.append(TextBlock(b.get("text", "")))
    return blocks


def message_from_neutral(data: dict[str, Any]) -> Message:
    role = data.get("role")
    if role == "user":
        words = data.get("said")
        return UserMessage(_load_blocks(data.get("content", "")),
                           said=words[:MAX_SAID] if isinstance(words, str) else None)
    if role == "tool":
        content = _load_blocks(data.get("content", []))
        if isinstance(content, str):
            content = [TextBlock(content)]
        return ToolResultMessage(data["tool_call_id"], data.get("name", ""), content, bool(data.get("is_error")))
    if role == "assistant":
        calls = []
        for c in data.get("tool_calls", []):
            args = c.get("arguments")
            calls.append(ToolCall(
                name=c["name"], id=c["id"],
                arguments=args if isinstance(args, dict) else None,
                raw_arguments=args if isinstance(args, str) else None,
                incomplete=bool(c.get("incomplete")), provider_data=c.get("provider_data", {}),
            ))
        usage = Usage(**{k: v for k, v in data["usage"].items() if k in _USAGE_KEYS}) if data.get("usage") else None
        return AssistantMessage(
            text=data.get("content") or "",
            tool_calls=calls,
            reasoning=[Reasoning(**r) for r in data.get("reasoning", [])],
            usage=usage,
            stop_reason=data.get("stop_reason"),
            model=data.get("model"),
            provider=data.get("provider"),
            provider_data=data.get("provider_data", {}),
        )
    raise ValueError(f"unknown message role {role!r}")


def dump_messages(messages: Iterable[Message]) -> list[dict[str, Any]]:
    return [neutral_message(m) for m in messages]


def load_messages(data: Iterable[dict[str, Any]]) -> list[Message]:
    return [message_from_neutral(d) for d in data]


def write_jsonl(messages: Iterable[Message], path: str | Path) -> Path:
    """Save a transcript, one message per line."""
    path = Path(path)
    with path.open("w", encoding="utf-8") as f:
        for m in messages:
            f.write(json.dumps(neutral_message(m), ensure_ascii=False) + "\n")
    return path


def read_jsonl(path: str | Path) -> list[Message]:
    """Load a transcript saved by `write_jsonl`."""
    with Path(path).open(encoding="utf-8") as f:
        return [message_from_neutral(json.loads(line)) for line in f if line.strip()]
