"""Making results: helpers for tools, and the normalisation of whatever a tool returned.

A tool may return a `ToolResult`, a string, content blocks, an image, or any Python object. Whatever it
is, `to_tool_result` turns it into a `ToolResult` whose `content` is a faithful text (or image) form and
whose `details` keeps the object itself: the DataFrame stays a DataFrame. `truncate_for_model` then cuts
content that is too long for the model, saying how much was cut; the whole value stays in `details`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..messages import ImageBlock, TextBlock, ToolResult, as_blocks
from ..safety.secrets import redact
from .images import MAX_IMAGE_BYTES, MAX_IMAGE_EDGE, MAX_IMAGE_PIXELS, ImageTooLarge, check_image, sniff_image_type
from .images import to_image_block as _to_image_block

__all__ = [
    "DEFAULT_MAX_RESULT_CHARS",
    "MAX_IMAGE_BYTES",
    "MAX_IMAGE_EDGE",
    "MAX_IMAGE_PIXELS",
    "check_image",
    "error_result",
    "image_result",
    "json_result",
    "normalise",
    "redact_result",
    "text_result",
    "to_tool_result",
    "truncate_for_model",
]

DEFAULT_MAX_RESULT_CHARS = 40_000
"""How much text of one result the model gets by default (about 10k tokens)."""


# --------------------------------------------------------------------------------------------------
# Helpers for tools
# --------------------------------------------------------------------------------------------------
def text_result(text: str, *, details: Any = None, is_error: bool = False, terminate: bool = False) -> ToolResult:
    """A plain text result."""
    return ToolResult([TextBlock(str(text))], details=details, is_error=is_error, terminate=terminate)


def error_result(message: str, *, details: Any = None) -> ToolResult:
    """A result that tells the model the call failed, and why."""
    return ToolResult([TextBlock(message)], details=details, is_error=True)


def json_result(value: Any, *, details: Any = None, is_error: bool = False, terminate: bool = False) -> ToolResult:
    """A result whose text is `value` as indented JSON; `details` keeps `value` itself unless given."""
    import pydantic_core

    text = pydantic_core.to_json(value, indent=2, fallback=repr).decode("utf-8")
    return ToolResult(
        [TextBlock(text)], details=value if details is None else details, is_error=is_error, terminate=terminate
    )


def image_result(
    image: bytes | str | Path | Any,
    *,
    mime_type: str | None = None,
    text: str | None = None,
    details: Any = None,
) -> ToolResult:
    """A result with one image (bytes, a file path, a PIL image or a matplotlib figure) and optional text.

    The image is checked (PNG, JPEG, GIF or WebP) and shrunk to provider limits when it is too large.
    """
    block = _to_image_block(image, mime_type)
    blocks: list = [block]
    if text:
        blocks.insert(0, TextBlock(text))
    return ToolResult(blocks, details=image if details is None else details)


# --------------------------------------------------------------------------------------------------
# Normalisation
# --------------------------------------------------------------------------------------------------
_JSON_NATURAL = (dict, list, tuple, int, float, bool)


def to_tool_result(value: Any) -> ToolResult:
    """Whatever a tool returned, as a `ToolResult` (the object kept as `details`)."""
    if isinstance(value, ToolResult):
        return value
    if value is None:
        return ToolResult([TextBlock("(no output)")])
    if isinstance(value, str):
        return ToolResult([TextBlock(value)])
    if isinstance(value, (TextBlock, ImageBlock)):
        return ToolResult(as_blocks(value))
    if isinstance(value, list) and value and all(isinstance(v, (TextBlock, ImageBlock)) for v in value):
        return ToolResult(list(value))
    if isinstance(value, (bytes, bytearray)):
        if sniff_image_type(bytes(value)):
            return image_result(bytes(value))
        return ToolResult([TextBlock(f"<{len(value):,} bytes of binary data>")], details=value)
    try:
        if hasattr(value, "savefig") and hasattr(value, "get_axes"):  # matplotlib figure: the model sees it
            return ToolResult([TextBlock(_safe_repr(value)), _to_image_block(value, None)], details=value)
        if hasattr(value, "save") and hasattr(value, "size") and hasattr(value, "mode"):  # PIL image
            return ToolResult([_to_image_block(value, None)], details=value)
    except ImageTooLarge as exc:
        return ToolResult([TextBlock(f"[the image was not shown: {exc}]")], details=value, is_error=True)
    return ToolResult([TextBlock(faithful_text(value))], details=value)


def faithful_text(value: Any) -> str:
    """Text that shows a Python value faithfully: JSON where it is JSON-like, else its repr."""
    if isinstance(value, str):
        return value
    if type(value) in (int, float, bool):
        return json.dumps(value)
    import pydantic_core

    try:
        plain = pydantic_core.to_jsonable_python(value)
    except Exception:
        return _safe_repr(value)
    if isinstance(plain, str) and not isinstance(value, _JSON_NATURAL):
        return plain  # datetime, UUID, Path, Enum of str...
    try:
        return pydantic_core.to_json(plain, indent=2).decode("utf-8")
    except Exception:
        return json.dumps(plain, indent=2, ensure_ascii=False, allow_nan=True, default=repr)


def _safe_repr(value: Any) -> str:
    return repr(value)  # errors propagate: the runtime turns them into an error result


def truncate_for_model(result: ToolResult, max_chars: int | None) -> ToolResult:
    """Cut text content over `max_chars`, keeping its head and tail and saying how much was cut.

    The whole text stays available: in `details` when the tool set none.
    """
    if not max_chars:
        return result
    total = 0
    for block in result.content:
        if isinstance(block, TextBlock):
            total += len(block.text)
    if total <= max_chars:
        return result
    full_text = result.text
    budget = max_chars
    new_blocks = []
    for block in result.content:
        if not isinstance(block, TextBlock):
            new_blocks.append(block)
            continue
        text = block.text
        if len(text) <= budget:
            new_blocks.append(block)
            budget -= len(text)
            continue
        keep = max(budget, 0)
        head = int(keep * 0.75)
        tail = keep - head
        cut = len(text) - keep
        note = (
            f"\n\n[... {cut:,} of {len(text):,} characters cut here to keep the result short; "
            f"the whole output is kept for the user ...]\n\n"
        )
        new_blocks.append(TextBlock(text[:head] + note + (text[-tail:] if tail else "")))
        budget = 0
    details = result.details if result.details is not None else full_text
    return ToolResult(new_blocks, details=details, is_error=result.is_error, terminate=result.terminate)


def normalise(result: ToolResult, max_chars: int | None) -> ToolResult:
    """A result as the model may see it: images checked (one that fails becomes a note saying why), then
    long text cut (`truncate_for_model`). Secrets are the secret gate's (`nbagent.calls.gate.admit`, which
    runs before this). `details`, the live object, is left as it is; the presentation (UI only) goes along."""
    presentation = result.presentation
    result = _normalised(result, max_chars)
    if presentation and result.presentation is not presentation:
        result.presentation = presentation
    return result


def _normalised(result: ToolResult, max_chars: int | None) -> ToolResult:
    if any(isinstance(b, ImageBlock) for b in result.content):
        blocks = []
        for block in result.content:
            if isinstance(block, ImageBlock):
                try:
                    block = check_image(block)
                except Exception as exc:
                    block = TextBlock(f"[an image was removed: {exc}]")
            blocks.append(block)
        result = ToolResult(blocks, details=result.details, is_error=result.is_error, terminate=result.terminate)
    return truncate_for_model(result, max_chars)


def redact_result(result: ToolResult, spare: tuple[str, ...] = ()) -> ToolResult:
    """`result` with secrets redacted from its text blocks, and from `details` when that is a string (a
    live object stays as it is); the same object when there were none. `spare`: the call's own argument
    strings (`nbagent.safety.secrets.redact`)."""
    details = result.details
    if isinstance(details, str):
        details = redact(details, spare=spare)
    blocks = None
    for i, block in enumerate(result.content):
        if type(block) is TextBlock or isinstance(block, TextBlock):
            text = redact(block.text, spare=spare)
            if text != block.text:
                if blocks is None:
                    blocks = list(result.content)
                blocks[i] = TextBlock(text)
    if blocks is None and details is result.details:
        return result
    return ToolResult(blocks if blocks is not None else list(result.content), details=details,
                      is_error=result.is_error, terminate=result.terminate)
