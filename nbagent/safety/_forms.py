"""The forms a secret is looked for in (`nbagent.safety.secrets`): pieces worth matching, its encodings, and
one fast expression for many words. Pure functions of their arguments."""

from __future__ import annotations

import re
from typing import Any

__all__ = ["encodings", "looks_random", "trie"]


def looks_random(piece: str) -> bool:
    """A piece worth matching: it mixes at least two of lower case, upper case and digits (a piece of a
    random key nearly always does; `mistra`, `-small`, `sk-pro` of a readable test key or prefix do not)."""
    return sum((any(c.islower() for c in piece), any(c.isupper() for c in piece), any(c.isdigit() for c in piece))) >= 2


def encodings(value: str, shortest: int) -> list[str]:
    """The secret in base64 (at each of the three alignments it can start at, the characters that depend
    on it alone, when `shortest` characters or more) and in hex."""
    import base64
    import binascii

    raw = value.encode()
    out = [binascii.hexlify(raw).decode(), binascii.hexlify(raw).decode().upper()]
    for skip in range(3):  # the first group of three bytes may hold something else too: start after it
        rest = raw[skip:]
        body = base64.b64encode(rest).decode()[: len(rest) // 3 * 4]
        if len(body) >= shortest:
            out += [body, body.replace("+", "-").replace("/", "_")]  # standard and URL-safe alphabets
    return out


def trie(words: Any) -> str:
    """One regular expression matching any of `words`, as a trie: fast to scan. A word another starts with
    ends its branch (finding the shorter is enough: no caller needs the longer)."""
    tree: dict = {}
    for word in words:
        node = tree
        for ch in word:
            node = node.setdefault(ch, {})
        node[""] = {}
    def emit(node: dict) -> str:
        if "" in node:
            return ""
        parts = [re.escape(ch) + emit(child) for ch, child in sorted(node.items())]
        return parts[0] if len(parts) == 1 else "(?:" + "|".join(parts) + ")"
    return emit(tree)
