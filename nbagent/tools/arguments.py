"""Parsing what a model sent as tool arguments, with a bounded repair ladder.

Models send arguments as JSON text, and sometimes that text is not quite JSON. `parse_arguments` tries
`json.loads` first; when that fails it climbs a fixed ladder of repairs, each at most once and in order:

1. strip a Markdown code fence (```json ... ```)
2. take the JSON object out of surrounding prose
3. remove trailing commas
4. read single quotes and Python literals (True, None) as JSON
5. remove closing braces that close nothing (unbalanced)
6. close truncated JSON (an open string, open objects and arrays)

Every repair that was needed is returned, so the call record shows a person exactly what was changed.
When the ladder runs out, an `ArgumentsError` says what is wrong, for the model to correct.
"""

from __future__ import annotations

import ast
import json
import re
from typing import Any

from .schemas import ArgumentsError

__all__ = ["MAX_REPAIR_CHARS", "parse_arguments"]

MAX_REPAIR_CHARS = 2_000_000
"""Arguments longer than this are parsed but never repaired (repairs are linear, but pointless at that size)."""

_FENCE_RE = re.compile(r"^\s*```[A-Za-z0-9_-]*[ \t]*\r?\n?(.*?)\r?\n?[ \t]*```\s*$", re.S)
_decoder = json.JSONDecoder()


def parse_arguments(raw: Any) -> tuple[Any, list[str]]:
    """Parse raw tool arguments into a Python value; return it with the list of repairs applied.

    A dict is returned as is; `None` and empty or blank text mean `{}`. Raises `ArgumentsError` when the
    text cannot be made into JSON by the ladder.
    """
    if isinstance(raw, dict):
        return raw, []
    if raw is None:
        return {}, []
    if isinstance(raw, (bytes, bytearray)):
        try:
            raw = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise ArgumentsError("arguments are not valid UTF-8 text") from None
    if not isinstance(raw, str):
        return raw, []
    text = raw.strip()
    if not text:
        return {}, []
    value, error = _loads(text)
    if error is None:
        return _undouble(value, [])
    if len(text) > MAX_REPAIR_CHARS:
        raise ArgumentsError(f"arguments are not valid JSON ({error}); {len(text):,} characters, too long to repair")

    repairs: list[str] = []
    for label, step in _LADDER:
        fixed = step(text)
        if fixed is None or fixed == text:
            continue
        text = fixed
        repairs.append(label)
        value, err = _loads(text)
        if err is None:
            return _undouble(value, repairs)
    snippet = raw.strip()
    if len(snippet) > 200:
        snippet = snippet[:200] + "..."
    raise ArgumentsError(
        f"arguments are not valid JSON: {error}. Send one JSON object matching the tool's schema. "
        f"Received: {snippet}"
    )


def _loads(text: str) -> tuple[Any, str | None]:
    try:
        return json.loads(text), None
    except (ValueError, RecursionError) as exc:
        msg = exc.msg if isinstance(exc, json.JSONDecodeError) else str(exc)
        pos = f" at character {exc.pos}" if isinstance(exc, json.JSONDecodeError) else ""
        return None, f"{msg}{pos}"


def _undouble(value: Any, repairs: list[str]) -> tuple[Any, list[str]]:
    """`"{\\"a\\": 1}"`: JSON text that was encoded as a JSON string once more."""
    if isinstance(value, str):
        inner = value.strip()
        if inner.startswith("{"):
            parsed, err = _loads(inner)
            if err is None and isinstance(parsed, dict):
                return parsed, repairs + ["decoded arguments that were JSON-encoded twice"]
    return value, repairs


# --------------------------------------------------------------------------------------------------
# The ladder
# --------------------------------------------------------------------------------------------------
def _strip_fence(text: str) -> str | None:
    m = _FENCE_RE.match(text)
    if m:
        return m.group(1).strip()
    if text.startswith("```"):  # a fence that was never closed (truncated)
        first_newline = text.find("\n")
        return text[first_newline + 1 :].strip() if first_newline != -1 else None
    return None


def _extract_object(text: str) -> str | None:
    start = text.find("{")
    if start == -1:
        return None
    end = text.rfind("}")
    if start == 0 and (end == -1 or end == len(text) - 1):
        return None
    if end > start:
        # Prefer the first complete object: prose may follow it.
        try:
            _, stop = _decoder.raw_decode(text, start)
            return text[start:stop]
        except ValueError:
            return text[start : end + 1]
    return text[start:]


def _scan(text: str):
    """Yield (index, char, in_string) for every character, tracking JSON strings (either quote)."""
    quote = ""
    escaped = False
    for i, ch in enumerate(text):
        if quote:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == quote:
                yield i, ch, True
                quote = ""
                continue
            yield i, ch, True
        else:
            if ch == '"' or ch == "'":
                quote = ch
                yield i, ch, True
            else:
                yield i, ch, False


def _remove_trailing_commas(text: str) -> str | None:
    out: list[str] = []
    pending_comma: int | None = None
    changed = False
    for _, ch, in_string in _scan(text):
        if not in_string and ch == ",":
            if pending_comma is not None:
                changed = True  # ",," collapses
            pending_comma = len(out)
            out.append(ch)
            continue
        if not in_string and ch in "}]" and pending_comma is not None:
            out.pop(pending_comma)
            changed = True
        if not (not in_string and ch.isspace()):
            pending_comma = None
        out.append(ch)
    return "".join(out) if changed else None


def _python_literals(text: str) -> str | None:
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError, TypeError):
        value = None
    if isinstance(value, (dict, list)):
        try:
            return json.dumps(value)
        except (TypeError, ValueError):
            pass
    # Fall back to converting quotes by hand (keeps JSON-only tokens like true/null working).
    if "'" not in text:
        return None
    out: list[str] = []
    quote = ""
    escaped = False
    for ch in text:
        if quote:
            if escaped:
                escaped = False
                if ch == "'" and quote == "'":
                    out[-1] = "'"  # \' inside single quotes is just '
                    continue
                out.append(ch)
            elif ch == "\\":
                escaped = True
                out.append(ch)
            elif ch == quote:
                quote = ""
                out.append('"')
            elif ch == '"' and quote == "'":
                out.append('\\"')
            else:
                out.append(ch)
        elif ch in "'\"":
            quote = ch
            out.append('"')
        else:
            out.append(ch)
    return "".join(out)


def _remove_unbalanced_closers(text: str) -> str | None:
    depth: list[str] = []
    out: list[str] = []
    changed = False
    pairs = {"}": "{", "]": "["}
    for _, ch, in_string in _scan(text):
        if not in_string:
            if ch in "{[":
                depth.append(ch)
            elif ch in "}]":
                if not depth or depth[-1] != pairs[ch]:
                    changed = True
                    continue
                depth.pop()
        out.append(ch)
    return "".join(out) if changed else None


def _close_truncated(text: str) -> str | None:
    stack: list[str] = []
    quote = ""
    escaped = False
    for ch in text:
        if quote:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == quote:
                quote = ""
        elif ch == '"':
            quote = '"'
        elif ch in "{[":
            stack.append("}" if ch == "{" else "]")
        elif ch in "}]" and stack:
            stack.pop()
    if not stack and not quote:
        return None
    body = text
    if quote:
        if escaped:
            body = body[:-1]
        body += '"'
    closers = "".join(reversed(stack))
    candidate = body + closers
    if _loads(candidate)[1] is None:
        return candidate
    # Drop a dangling separator or a key with no value, then close again.
    trimmed = body.rstrip()
    for _ in range(3):
        if trimmed.endswith((",", ":")):
            trimmed = trimmed[:-1].rstrip()
            if body.rstrip().endswith(":") and trimmed.endswith('"'):
                trimmed = _drop_last_string(trimmed)
        elif trimmed.endswith('"') and stack and stack[-1] == "}" and _last_is_key(trimmed):
            trimmed = _drop_last_string(trimmed).rstrip().rstrip(",")
        else:
            # a partial literal (tru, 12., nul): cut back to the last separator
            cut = max(trimmed.rfind(","), trimmed.rfind("{"), trimmed.rfind("["), trimmed.rfind(":"))
            if cut == -1:
                break
            trimmed = trimmed[: cut + 1] if trimmed[cut] in "{[" else trimmed[:cut]
        candidate = trimmed + _closers_for(trimmed)
        if _loads(candidate)[1] is None:
            return candidate
    return body + closers


def _closers_for(text: str) -> str:
    stack: list[str] = []
    for _, ch, in_string in _scan_double(text):
        if not in_string:
            if ch in "{[":
                stack.append("}" if ch == "{" else "]")
            elif ch in "}]" and stack:
                stack.pop()
    return "".join(reversed(stack))


def _scan_double(text: str):
    quote = False
    escaped = False
    for i, ch in enumerate(text):
        if quote:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                quote = False
            yield i, ch, True
        elif ch == '"':
            quote = True
            yield i, ch, True
        else:
            yield i, ch, False


def _drop_last_string(text: str) -> str:
    """Remove the last complete double-quoted string from the end of `text`."""
    if not text.endswith('"'):
        return text
    i = len(text) - 2
    while i >= 0:
        if text[i] == '"':
            backslashes = 0
            j = i - 1
            while j >= 0 and text[j] == "\\":
                backslashes += 1
                j -= 1
            if backslashes % 2 == 0:
                return text[:i]
        i -= 1
    return text


def _last_is_key(text: str) -> bool:
    """Whether the string that ends `text` stands where an object key stands (after `{` or `,`)."""
    before = _drop_last_string(text).rstrip()
    return before.endswith(("{", ","))


_LADDER = (
    ("stripped a Markdown code fence", _strip_fence),
    ("took the JSON object out of surrounding text", _extract_object),
    ("removed trailing commas", _remove_trailing_commas),
    ("read single quotes and Python literals as JSON", _python_literals),
    ("removed closing braces that closed nothing", _remove_unbalanced_closers),
    ("closed truncated JSON", _close_truncated),
)
