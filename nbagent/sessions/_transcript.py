"""A stored conversation made whole again: what `load_session` does with the facts it read and verified.

`restore_side_files` puts a long tool result's whole text back from its side file (`<id>.d/<name>`), which
must be the file its signed line names (by its SHA-256) and stay inside the sessions folder; `whole_body`
rebuilds a request body stored as a continuation of the one before (`SessionWriter.request`);
`repair_transcript` answers every call the kernel did not finish with an "interrupted" result (`INTERRUPTED`),
so the transcript is valid for every provider before the next request.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Any

from ..messages import AssistantMessage, Message, TextBlock, ToolResultMessage, UserMessage
from ._folder import SessionError, inside

__all__ = ["INTERRUPTED", "repair_transcript", "restore_side_files", "whole_body"]

INTERRUPTED = ("interrupted: the kernel stopped before this call finished, so it has no result. "
               "It may or may not have had its effect; check before repeating it.")
_SIDE_NAME = re.compile(r"^[A-Za-z0-9_-]{1,100}\.txt$")


def whole_body(body: Any, previous: Any) -> Any:
    """A request body as sent, from its stored form (see `SessionWriter.request`)."""
    if not isinstance(body, dict):
        return body
    whole = dict(body)
    for key, value in body.items():
        if isinstance(value, dict) and set(value) == {"$prefix", "rest"}:
            before = previous.get(key) if isinstance(previous, dict) else None
            if not isinstance(before, list) or len(before) < value["$prefix"]:
                raise ValueError(f"request field {key!r} continues a request that is missing")
            whole[key] = before[: value["$prefix"]] + list(value["rest"])
    return whole


def restore_side_files(data: dict[str, Any], side: Path, signed: bool = False) -> dict[str, Any]:
    """A stored message with each cut result's whole text put back from its side file in `side`; a side file
    that is missing or leads outside leaves the cut copy, one whose digest is not its line's refuses the file."""
    content = data.get("content")
    if not isinstance(content, list) or not any(isinstance(b, dict) and b.get("side_file") for b in content):
        return data
    blocks = []
    for block in content:
        name = block.get("side_file") if isinstance(block, dict) else None
        if isinstance(name, str) and _SIDE_NAME.match(name):
            try:
                path = inside(side / name, side.parent)
                text = path.read_text(encoding="utf-8")
            except (OSError, SessionError):
                pass  # the cut copy stands in
            else:
                digest = block.get("side_sha256")
                if digest != hashlib.sha256(text.encode("utf-8")).hexdigest() and (signed or digest is not None):
                    raise SessionError(f"the side file {side.name}/{name} is not the one its signed line names (it "
                                       "was changed or replaced), so this session is not resumed or replayed")
                block = {k: v for k, v in block.items() if k != "side_sha256"}
                block["text"] = text
        blocks.append(block)
    return {**data, "content": blocks}


def repair_transcript(messages: list[Message]) -> tuple[list[Message], list[str]]:
    """The transcript with every unanswered tool call given an "interrupted" result right after its
    message, results whose call is missing dropped, and a prompt directly followed by another prompt (a
    run that failed before any answer) left out: valid for every provider."""
    out: list[Message] = []
    interrupted: list[str] = []
    pending: dict[str, str] = {}

    def close_pending() -> None:
        for call_id, name in pending.items():
            out.append(ToolResultMessage(call_id, name, [TextBlock(INTERRUPTED)], True))
            interrupted.append(call_id)
        pending.clear()

    answered: set[str] = set()
    for i, m in enumerate(messages):
        if isinstance(m, UserMessage) and i + 1 < len(messages) and isinstance(messages[i + 1], UserMessage):
            continue  # the prompt of a run that failed before any answer: the next prompt replaces it
        if isinstance(m, ToolResultMessage):
            if m.tool_call_id in pending:
                del pending[m.tool_call_id]
                answered.add(m.tool_call_id)
                out.append(m)
            continue  # a result without its call (or a second one) cannot be sent
        close_pending()
        out.append(m)
        if isinstance(m, AssistantMessage):
            for call in m.tool_calls:
                if call.id not in answered:
                    pending[call.id] = call.name
    close_pending()
    return out, interrupted
