"""Secrets kept out of everything nbagent writes down or sends: one redaction step for all of it.

Two kinds of secret are removed, wherever text leaves a tool or a provider:

- the values of the environment's credential variables (names ending in `_KEY`, `_TOKEN`, `_AUTH`,
  `_SECRET`, `PASSWORD` (`PGPASSWORD` too), `_PWD`, plus a few well-known ones), read when redaction
  runs, so a key set after `import nbagent` is covered too;
- values registered with `add_secret(value, name)`: a key passed as `api_key=` rather than through the
  environment, a credential header;
- strings shaped like provider keys and tokens (`sk-...`, `sk-ant-...`, `AIza...`, `ghp_...`,
  `xoxb-...`, `AKIA...`, `hf_...`), wherever they come from: a notebook variable, a file, a command's output.

Secrets are matched in pieces too: any run of `PIECE_LENGTH` characters or more (mixing letter cases or
digits, as pieces of random keys do) of a secret of `MIN_PIECE_SECRET_LENGTH` or more (`key[:8]`, the head a truncated repr kept, a slice `cut -c` made), of the
secret reversed, or its base64 or hex encoding at any alignment, is redacted as `[REDACTED:NAME piece]`.
Pieces shorter than that are not recognisable; the tools keep them unreachable instead (`inspect_variable`
indexes no string, auto-allowed commands get no credential variables, the sandbox hides credential
stores and the kernel's `/proc`).

`redact(text)` replaces each with `[REDACTED:NAME]` (the variable's name, or the kind of token);
`redact_value(obj)` does it through the strings of a JSON-like value (dicts, lists, tuples), returning
the same object when nothing changed. The runtime calls them on tool results before the model sees
them, on error messages, and on the request bodies it keeps (`run.requests`). A value shorter than
`MIN_SECRET_LENGTH` is never treated as a secret (it would redact ordinary words).

This module is part of the data layer: it imports nothing from nbagent.
"""

from __future__ import annotations

import json
import os
import re
import time
from typing import Any

__all__ = ["MIN_PIECE_SECRET_LENGTH", "MIN_SECRET_LENGTH", "PIECE_LENGTH", "SECRET_VARIABLE_PATTERN", "TOKEN_PATTERNS", "add_secret", "redact",
           "redact_exception", "redact_value", "secret_values"]

MIN_SECRET_LENGTH = 8
"""Shorter values of credential variables are left alone."""
PIECE_LENGTH = 6
"""Runs of this many characters of a secret are redacted wherever they appear."""
MIN_PIECE_SECRET_LENGTH = 12
"""Only secrets at least this long are matched by the piece (a short password's pieces are ordinary words)."""

SECRET_VARIABLE_PATTERN = re.compile(
    r"(?:^|_)(?:API_?KEY|KEY|AUTH|AUTH_KEY|TOKEN|SECRET|SECRET_KEY|ACCESS_KEY|PRIVATE_KEY|CREDENTIALS?)$|_PWD$"
    r"|(?:PASSWORD|PASSWD|PASSPHRASE)$"
    r"|^(?:ANTHROPIC|OPENAI|GEMINI|GOOGLE|MISTRAL|GROQ|COHERE|HF|HUGGING_FACE_HUB|GITHUB|GH|AWS)_.*KEY",
    re.IGNORECASE,
)
"""Environment variable names whose values are secrets."""

TOKEN_PATTERNS: dict[str, re.Pattern[str]] = {
    "anthropic-key": re.compile(r"sk-ant-[A-Za-z0-9_\-]{20,}"),
    "openai-key": re.compile(r"sk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{20,}"),
    "google-key": re.compile(r"AIza[0-9A-Za-z_\-]{35}"),
    "github-token": re.compile(r"(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{40,})"),
    "slack-token": re.compile(r"xox[abposr]-[A-Za-z0-9\-]{10,}"),
    "aws-key": re.compile(r"(?:AKIA|ASIA)[0-9A-Z]{16}"),
    "huggingface-token": re.compile(r"hf_[A-Za-z0-9]{30,}"),
}
"""Shapes of well-known keys and tokens, redacted wherever they appear."""

_TOKENS = re.compile("|".join(f"(?P<{name.replace('-', '_')}>{p.pattern})" for name, p in TOKEN_PATTERNS.items()))

_MARKERS = ("sk-", "AIza", "xox", "AKIA", "ASIA", "hf_", "github_pat_")
_GITHUB = re.compile(r"gh[pousr]_")
"""Every token shape holds one of `_MARKERS`, or `gh` and then matches `_GITHUB`: a cheap first look (a
substring search per marker is about a third of one regular expression's scan for all of them)."""

_cache: Any = None
_seen_environment: Any = None
_seen_at = -1.0
_seen_registered = 0
_RECHECK = 0.05
"""Seconds during which the environment is not looked at again (a key set just now is covered after)."""
_registered: dict[str, str] = {}


def add_secret(value: str, name: str = "api_key") -> None:
    """Treat `value` as a secret from now on (for this process), reported as `[REDACTED:name]`.

    For keys that do not come from the environment: `api_key=...` given to a model, a credential header.
    Values shorter than `MIN_SECRET_LENGTH` are ignored.
    """
    if isinstance(value, str) and len(value.strip()) >= MIN_SECRET_LENGTH and value not in _registered:
        _registered[value] = name


def secret_values() -> dict[str, str]:
    """The values of the environment's credential variables (and of `add_secret`), stripped:
    `{value: variable name}`."""
    return dict(_compiled()[2])


def _compiled(fresh: bool = True) -> Any:
    global _cache, _seen_environment, _seen_at, _seen_registered
    now = time.monotonic()
    if not fresh and _cache is not None and now - _seen_at < _RECHECK and _seen_registered == len(_registered):
        return _cache  # looked a moment ago: many short texts in a row (progress) cost a clock read each
    _seen_at = now
    # a cheap look at whether the environment changed (CPython keeps it as a dict of bytes: comparing it with
    # a copy is one C loop, its unchanged values the same objects)
    raw = getattr(os.environ, "_data", None)
    if (_cache is not None and isinstance(raw, dict) and _seen_registered == len(_registered)
            and raw == _seen_environment):
        return _cache
    _seen_environment = dict(raw) if isinstance(raw, dict) else None
    _seen_registered = len(_registered)
    items = tuple(sorted((k, v) for k, v in os.environ.items() if SECRET_VARIABLE_PATTERN.search(k)))
    if _registered:
        items += tuple((name, value) for value, name in _registered.items())
    if _cache is not None and _cache[0] == items:
        return _cache
    values: dict[str, str] = {}
    pieces: dict[str, str] = {}
    for name, value in items:
        for candidate in {value, value.strip()}:
            if len(candidate) >= MIN_SECRET_LENGTH:
                values.setdefault(candidate, name)
                # as it appears inside JSON text, where quotes, backslashes and controls are escaped
                values.setdefault(json.dumps(candidate, ensure_ascii=False)[1:-1], name)
                for form in _encodings(candidate):
                    values.setdefault(form, name)
            if len(candidate) >= MIN_PIECE_SECRET_LENGTH:
                for form in (candidate, candidate[::-1]):
                    for k in range(len(form) - PIECE_LENGTH + 1):
                        piece = form[k : k + PIECE_LENGTH]
                        if _looks_random(piece):
                            pieces.setdefault(piece, name)
    pattern = None
    if values:
        # longest first, so a key that contains another is replaced whole
        pattern = re.compile("|".join(re.escape(v) for v in sorted(values, key=len, reverse=True)))
    piece_pattern = re.compile(_trie(sorted(pieces))) if pieces else None
    runs = heads = None
    if values or pieces:
        # Where a secret can be: every whole value and every piece is a run of the secrets' own characters
        # (at least PIECE_LENGTH long) and starts with one of `heads`. Text with no such run holds none.
        alphabet = set().union(*values, *pieces)
        runs = re.compile("[" + "".join(re.escape(c) for c in sorted(alphabet)) + "]{%d,}" % PIECE_LENGTH)
        heads = frozenset(pieces).union(v[:PIECE_LENGTH] for v in values)
    _cache = (items, pattern, values, piece_pattern, pieces, runs, heads)
    return _cache


def _looks_random(piece: str) -> bool:
    """A piece worth matching: it mixes at least two of lower case, upper case and digits (a piece of a
    random key nearly always does; `mistra`, `-small`, `sk-pro` of a readable test key or prefix do not)."""
    return sum((any(c.islower() for c in piece), any(c.isupper() for c in piece), any(c.isdigit() for c in piece))) >= 2


def _encodings(value: str) -> list[str]:
    """The secret in base64 (at each of the three alignments it can start at, the characters that depend
    on it alone) and in hex."""
    import base64
    import binascii

    raw = value.encode()
    out = [binascii.hexlify(raw).decode(), binascii.hexlify(raw).decode().upper()]
    for skip in range(3):  # the first group of three bytes may hold something else too: start after it
        rest = raw[skip:]
        body = base64.b64encode(rest).decode()[: len(rest) // 3 * 4]
        if len(body) >= MIN_SECRET_LENGTH:
            out += [body, body.replace("+", "-").replace("/", "_")]  # standard and URL-safe alphabets
    return out


def _trie(words: list[str]) -> str:
    """One regular expression matching any of `words` (all the same length), as a trie: fast to scan."""
    tree: dict = {}
    for word in words:
        node = tree
        for ch in word:
            node = node.setdefault(ch, {})
    def emit(node: dict) -> str:
        if not node:
            return ""
        parts = [re.escape(ch) + emit(child) for ch, child in sorted(node.items())]
        return parts[0] if len(parts) == 1 else "(?:" + "|".join(parts) + ")"
    return emit(tree)


def redact(text: str, *, fresh: bool = True) -> str:
    """`text` with every secret replaced by `[REDACTED:NAME]`. `fresh=False`: for many short texts in a
    row (progress), the environment is looked at again only every `_RECHECK` seconds."""
    if not isinstance(text, str) or len(text) < PIECE_LENGTH:
        return text
    return _redact(text, _compiled(fresh))


def _redact(text: str, compiled: Any) -> str:
    _, pattern, values, piece_pattern, pieces, runs, heads = compiled
    if runs is not None and _may_hold_secret(text, runs, heads):
        if pattern is not None:
            text = pattern.sub(lambda m: f"[REDACTED:{values[m.group(0)]}]", text)
        if piece_pattern is not None:
            text = _redact_pieces(text, piece_pattern, pieces)
    if _might_hold_token(text):
        text = _TOKENS.sub(lambda m: f"[REDACTED:{(m.lastgroup or 'token').replace('_', '-')}]", text)
    return text


def _may_hold_secret(text: str, runs: re.Pattern[str], heads: frozenset[str]) -> bool:
    """Whether a secret's value or piece can be in `text`: one of its runs of the secrets' characters holds
    a `head` (the first characters of a value, or a piece). A first look for the replacing passes above,
    about twice as fast as their search (many alternatives tried at every position) and never wrong the
    other way: a text it passes holds nothing they would replace."""
    for run in runs.findall(text):
        for i in range(len(run) - PIECE_LENGTH + 1):
            if run[i : i + PIECE_LENGTH] in heads:
                return True
    return False


def _redact_pieces(text: str, piece_pattern: re.Pattern[str], pieces: dict[str, str]) -> str:
    """Each run of overlapping secret pieces, replaced whole (a piece of 6 found, the run it belongs to)."""
    out: list[str] = []
    last = 0
    pos = 0
    while True:
        m = piece_pattern.search(text, pos)
        if m is None:
            break
        start, end = m.start(), m.end()
        name = pieces[m.group(0)]
        # extend while the next window is a piece too (the slice goes on)
        while end < len(text) and text[end - PIECE_LENGTH + 1 : end + 1] in pieces:
            end += 1
        out.append(text[last:start])
        out.append(f"[REDACTED:{name} piece]")
        last = pos = end
    if not out:
        return text
    out.append(text[last:])
    return "".join(out)


def _might_hold_token(text: str) -> bool:
    for marker in _MARKERS:
        if marker in text:
            return True
    return "gh" in text and _GITHUB.search(text) is not None


def redact_value(value: Any) -> Any:
    """`value` with `redact` applied to every string inside it (dict keys included); the same object
    when nothing changed, so callers can compare identity."""
    return _redact_value(value, _compiled())  # the secrets are looked up once for the whole value


def _redact_value(value: Any, compiled: Any) -> Any:
    if isinstance(value, str):
        return _redact(value, compiled) if len(value) >= PIECE_LENGTH else value
    if isinstance(value, dict):
        changed = False
        out = {}
        for k, v in value.items():
            nk, nv = _redact_value(k, compiled), _redact_value(v, compiled)
            changed = changed or nk is not k or nv is not v
            out[nk] = nv
        return out if changed else value
    if isinstance(value, (list, tuple)):
        items = [_redact_value(v, compiled) for v in value]
        if any(a is not b for a, b in zip(items, value)):
            return type(value)(items) if isinstance(value, tuple) else items
        return value
    return value


def redact_exception(exc: BaseException) -> BaseException:
    """`exc` with secrets redacted from its message, in place (its type and traceback kept): what a
    record keeps of a tool's failure must not carry a key."""
    try:
        args = tuple(redact(a) if isinstance(a, str) else a for a in exc.args)
        if any(a is not b for a, b in zip(args, exc.args)):
            exc.args = args
        notes = getattr(exc, "__notes__", None)
        if notes:
            exc.__notes__ = [redact(n) if isinstance(n, str) else n for n in notes]
    except Exception:  # an exception type that refuses new args keeps them
        pass
    return exc
