"""The one gate for secrets: what the model may get of a source is decided by the source's content.

A source is secret-bearing when its content holds a secret (`nbagent.safety.secrets`: registered values,
the environment's credentials, MCP servers' header and environment values, and credential shapes: key
prefixes, random tokens where a person put them, URLs with passwords, connection strings, DSNs), whatever
it is called. Redaction removes a secret whole, in pieces of six characters or more, reversed, encoded or
wrapped over lines; what it cannot follow is a derivation: a slice of a few characters, a match or a
count (a yes or no), an index. So:

- Text is derived from after it is screened, never before: `screen(text)` (and `screen_part` for a part
  read with its neighbours, so a key wrapped over the edge is still found) is what a tool slices, matches,
  counts or shows. The background processes' logs (`process` offsets), `grep`'s matches, `read_file`'s
  lines and `edit_file`'s and `edit_cell`'s search for `old` (`Screened`) all work on the screened text, so
  their answers are the same whatever the secret is.
- A live value (a notebook variable, an attribute, an item) is derived from only with consent:
  `value_problem(value)` says why a value is, holds or reaches a credential, or content withheld from the
  model (`Withheld`: what an MCP server addressed to the user only). `inspect_variable` asks first when a
  value on its path has a problem; the panel's prompts leave such values out.
- Whatever is returned or sent passes one choke point: every tool result on its way to the model
  (`nbagent.calls.gate.admit`, in the one place every call gets its result), prompts built for Fix,
  Explain and Ask, the notebook instructions, compaction stubs and summaries (`screen`), and what travels
  to a cluster's workers (`payload_problem`, refused when it holds a known secret or a key's shape).

This module is part of the bottom wing: it imports nothing from nbagent but its own neighbours.
"""

from __future__ import annotations

import os
import re
from typing import Any, Iterable

from .secrets import add_secret, redact, secret_spans, secret_values
from .shapes import TOKEN_PATTERNS

__all__ = ["Screened", "Withheld", "bearing", "payload_problem", "piece_problem", "screen", "screen_lines", "screen_part",
           "value_problem"]


def screen(text: str) -> str:
    """`text` as the model may see it and as a tool may derive from it: every secret `[REDACTED:NAME]`."""
    return redact(text)


def bearing(text: str) -> str | None:
    """What makes `text` secret-bearing (a variable's name, `url-password`...), or None."""
    spans = secret_spans(text) if isinstance(text, str) else []
    return spans[0][2] if spans else None


def screen_part(text: str, before: str = "", after: str = "") -> str:
    """`text` screened as it reads between `before` and `after` (its neighbours in the source): a secret
    that starts or ends outside it is still found, and only the part inside is replaced."""
    whole = before + text + after
    spans = secret_spans(whole)
    a, b = len(before), len(before) + len(text)
    out: list[str] = []
    pos = a
    for start, end, label in spans:
        if end <= a or start >= b:
            continue
        out.append(whole[pos:max(start, a)])
        out.append(f"[REDACTED:{label}]")
        pos = min(end, b)
    if not out:
        return text
    out.append(whole[pos:b])
    return "".join(out)


def screen_lines(lines: list[str]) -> list[str]:
    """Each of `lines` screened as they read together (a key wrapped over two lines is found, and each
    line loses its part of it): as many lines as were given, in order."""
    whole = "\n".join(lines)
    spans = secret_spans(whole)
    if not spans:
        return lines
    out = []
    a = 0
    for line in lines:
        b = a + len(line)
        parts: list[str] = []
        pos = a
        for start, end, label in spans:
            if end <= a or start >= b:
                continue
            parts.append(whole[pos:max(start, a)])
            parts.append(f"[REDACTED:{label}]")
            pos = min(end, b)
        out.append("".join(parts) + whole[pos:b] if parts else line)
        a = b + 1
    return out


def piece_problem(text: str) -> str | None:
    """Whether a short string could be a slice of a known secret (too short for redaction to recognise:
    `key[:4]` kept in a variable): the secret's name, or None. For what a prompt shows of a value the
    model did not ask for (the panel's Fix prompt, the notebook instructions)."""
    if not isinstance(text, str) or not text.strip() or len(text) > 64:
        return None
    for value, name in secret_values().items():
        if (text in value or text in value[::-1]) and not secret_spans(text):  # (redaction knows it, else)
            return name
    return None


class Screened:
    """A text and its screened form, with the way back: find `old` in what the model can see, change the
    raw text there. A search for text that is only in the raw form (a guess at a key) finds nothing, so
    an edit tool's found / not found answer says nothing about a secret; `[REDACTED:NAME]` in `new`, copied
    from what the model read, puts the secret it stood for back."""

    def __init__(self, raw: str) -> None:
        self.raw = raw
        self.tokens: list[tuple[int, int, int, int, str]] = []
        """(screened start, screened end, raw start, raw end, token) of each secret."""
        parts: list[str] = []
        pos = 0
        length = 0
        for start, end, label in secret_spans(raw):
            parts.append(raw[pos:start])
            length += start - pos
            token = f"[REDACTED:{label}]"
            self.tokens.append((length, length + len(token), start, end, token))
            parts.append(token)
            length += len(token)
            pos = end
        parts.append(raw[pos:])
        self.text = "".join(parts) if self.tokens else raw
        """What the model sees of the raw text."""

    def _found(self, old: str) -> list[tuple[int, int]]:
        out = []
        start = self.text.find(old)
        while start >= 0 and old:
            end = start + len(old)
            if not any(s < start < e or s < end < e for s, e, *_ in self.tokens):  # not inside a token
                out.append((start, end))
                start = self.text.find(old, end)
            else:
                start = self.text.find(old, start + 1)
        return out

    def count(self, old: str) -> int:
        """How often `old` occurs in the screened text (as `str.count` counts)."""
        return self.raw.count(old) if not self.tokens else len(self._found(old))

    def _raw_at(self, p: int) -> int:
        shift = 0
        for s, e, rs, re_, _ in self.tokens:
            if e <= p:
                shift = re_ - e
        return p + shift

    def replace(self, old: str, new: str, count: int = -1) -> str:
        """The raw text with `old` (as found in the screened text) replaced by `new`, at most `count` times."""
        if not self.tokens:
            return self.raw.replace(old, new, count)
        found = self._found(old)
        if count >= 0:
            found = found[:count]
        out: list[str] = []
        pos = 0
        for start, end in found:
            raw_start, raw_end = self._raw_at(start), self._raw_at(end)
            out.append(self.raw[pos:raw_start])
            out.append(self._restore(new, [t for t in self.tokens if start <= t[0] and t[1] <= end]))
            pos = raw_end
        out.append(self.raw[pos:])
        return "".join(out)

    def _restore(self, new: str, inside: list[tuple[int, int, int, int, str]]) -> str:
        """`new` with each `[REDACTED:...]` that stood in `old` back as the secret it stood for."""
        for _, _, rs, re_, token in inside:
            if token in new:
                new = new.replace(token, self.raw[rs:re_], 1)
        return new


# --------------------------------------------------------------------------------------------------
# Live values
# --------------------------------------------------------------------------------------------------
class Withheld(list):
    """Content kept from the model (what an MCP server addressed to the user only): a list like any
    other, which `value_problem` refuses to let a read-only tool reach."""

    reason = "it holds content addressed to the person only, which the model is not shown"


_SECRET_FIELD = re.compile(r"(?:^|_)(?:api_?key|apikey|token|secret|password|passwd|credentials?|authorization"
                           r"|private_key|access_key|auth)$", re.IGNORECASE)
"""Attribute and key names whose string values are taken as credentials (registered when found)."""
_SCAN_ITEMS = 2000
_SCAN_DEPTH = 8
_SCAN_CELLS = 200_000
"""Text cells of a table or array read through, at most, before it counts as holding one (fail closed)."""


def value_problem(value: Any, name: str = "") -> str | None:
    """Why `value` is or holds a credential or withheld content, or None: `os.environ`, a string whose
    content is secret-bearing, a table or array whose text cells are (`pandas`, `numpy`, by content), a
    value under a name like `api_key` or `password` (registered with `add_secret` from then on), or a
    `Withheld`, reached within a few levels (items, attributes). Too much to look through counts as
    holding one. `name`: the last name of the path `value` was reached by."""
    if value is os.environ or isinstance(value, type(os.environ)) or value is getattr(os, "environb", None):
        return "it is the process environment, which holds the keys"
    budget = [_SCAN_ITEMS]
    found = _problem(value, name, budget, 0, set())
    if found is None and budget[0] < 0:
        return "it holds too much to be checked for credentials"
    return found


def _problem(value: Any, name: str, budget: list[int], depth: int, seen: set[int]) -> str | None:
    budget[0] -= 1
    if budget[0] < 0:
        return None
    if isinstance(value, (str, bytes, bytearray)):
        text = bytes(value).decode("utf-8", "replace") if not isinstance(value, str) else value
        if name and _SECRET_FIELD.search(name) and len(text.strip()) >= 8:
            add_secret(text.strip(), name)
            return f"{name!r} holds a credential"
        label = bearing(text) if len(text) >= 6 else None
        if label:
            return f"it holds a secret ({label})"
        piece = piece_problem(text) if len(text) >= 2 else None
        return f"it could be a slice of a credential ({piece})" if piece else None
    if isinstance(value, Withheld):
        return value.reason
    if depth >= _SCAN_DEPTH or id(value) in seen or isinstance(value, (int, float, complex, bool, type(None))):
        return None
    seen.add(id(value))
    if isinstance(value, type(os.environ)):
        return "it holds the process environment"
    cells = _table_text(value)
    if cells is not None:
        if cells is _TOO_MUCH:
            return "it holds too much text to be checked for credentials"
        label = bearing(cells)
        return f"its cells hold a secret ({label})" if label else None
    children: list[tuple[str, Any]] = []
    try:
        if isinstance(value, dict):
            children = [(str(k), v) for k, v in list(value.items())[:100]]
        elif isinstance(value, (list, tuple, set, frozenset)):
            children = [(name, v) for v in list(value)[:100]]
        elif not isinstance(value, type) and not callable(value) and type(value).__module__ not in ("builtins",):
            attrs = getattr(value, "__dict__", None)
            if isinstance(attrs, dict):
                children = [(str(k), v) for k, v in list(attrs.items())[:100]]
            for slot in getattr(type(value), "__slots__", ()) or ():
                if isinstance(slot, str) and hasattr(value, slot):
                    children.append((slot, getattr(value, slot, None)))
    except Exception:
        return None
    for child_name, child in children:
        found = _problem(child, child_name, budget, depth + 1, seen)
        if found:
            return found
    return None


_TOO_MUCH = "\0too much"


def _table_text(value: Any) -> str | None:
    """The text cells of a pandas object (its labels included; for an accessor or indexer such as `.str`
    or `.iloc`, those of the object it reads) or of a numpy array of strings or objects, joined;
    `_TOO_MUCH` past `_SCAN_CELLS`; None for anything else. Numbers cannot hold a credential."""
    module = type(value).__module__ or ""
    try:
        if module.startswith("pandas"):
            if hasattr(value, "columns") and hasattr(value, "items"):  # a DataFrame
                columns = [col for _, col in value.items()] + [value.columns, value.index]
            elif hasattr(value, "dtype"):  # a Series or an Index
                columns = [value] + ([value.index] if hasattr(value, "index") else [])
            else:  # an accessor or an indexer
                read = [getattr(value, a, None) for a in ("obj", "_parent", "_orig", "_obj", "_data")]
                texts = [_table_text(r) for r in read if r is not None and r is not value
                         and (type(r).__module__ or "").startswith("pandas")]
                return _TOO_MUCH if _TOO_MUCH in texts else "\n".join(t for t in texts if t)
            return _cells([c.array for c in columns if _textual(getattr(c, "dtype", None))])
        if module.startswith("numpy") and hasattr(value, "dtype") and hasattr(value, "ravel"):
            return _cells([value.ravel()]) if _textual(value.dtype) else ""
    except Exception:
        return _TOO_MUCH  # a table that cannot be read through may hold anything
    return None


def _textual(dtype: Any) -> bool:
    return getattr(dtype, "kind", "O") in "OSUV" or str(dtype) in ("string", "category", "str")


def _cells(columns: Iterable[Any]) -> str:
    out: list[str] = []
    left = _SCAN_CELLS
    for values in columns:
        n = len(values)
        if n > left:
            return _TOO_MUCH
        left -= n
        out.extend(str(v) for v in values)
    return "\n".join(out)


# --------------------------------------------------------------------------------------------------
# What leaves the process
# --------------------------------------------------------------------------------------------------
_KEY_SHAPES = re.compile("|".join(p.pattern for name, p in TOKEN_PATTERNS.items() if name != "private-key").encode())


def payload_problem(data: bytes) -> str | None:
    """Why bytes about to leave the process (a pickled agent for a cluster's workers) must not: they hold
    a known secret's value (named) or a key's shape. None when they hold neither."""
    for value, name in secret_values().items():
        if len(value) >= 8 and value.encode("utf-8", "surrogatepass") in data:
            return f"they hold the value of {name}"
    m = _KEY_SHAPES.search(data)
    if m is not None:
        return "they hold a string shaped like an API key"
    return None
