"""Secrets kept out of everything nbagent writes down or sends: one redaction step for all of it.

Two kinds of secret are removed, wherever text leaves a tool or a provider:

- the values of the environment's credential variables (names ending in `_API_KEY`, `_TOKEN`,
  `_SECRET`, `_PASSWORD`, plus a few well-known ones), read when redaction runs, so a key set after
  `import nbagent` is covered too;
- values registered with `add_secret(value, name)`: a key passed as `api_key=` rather than through the
  environment, a credential header;
- strings shaped like provider keys and tokens (`sk-...`, `sk-ant-...`, `AIza...`, `ghp_...`,
  `xoxb-...`, `AKIA...`, `hf_...`), wherever they come from: a notebook variable, a file, a command's output.

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
from typing import Any

__all__ = ["MIN_SECRET_LENGTH", "SECRET_VARIABLE_PATTERN", "TOKEN_PATTERNS", "add_secret", "redact",
           "redact_value", "secret_values"]

MIN_SECRET_LENGTH = 8
"""Shorter values of credential variables are left alone."""

SECRET_VARIABLE_PATTERN = re.compile(
    r"(?:^|_)(?:API_?KEY|TOKEN|SECRET|SECRET_KEY|PASSWORD|PASSWD|ACCESS_KEY|PRIVATE_KEY|CREDENTIALS?)$"
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

_MARKERS = re.compile(r"sk-|AIza|gh[pousr]_|github_pat_|xox|AKIA|ASIA|hf_")
"""Every token shape holds one of these: a cheap first look."""

_cache: tuple[tuple[tuple[str, str], ...], re.Pattern[str] | None, dict[str, str]] | None = None
_seen_environment: Any = None
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


def _compiled() -> tuple[tuple[tuple[str, str], ...], re.Pattern[str] | None, dict[str, str]]:
    global _cache, _seen_environment
    # a cheap look at whether the environment changed (CPython keeps it as a dict of bytes)
    raw = getattr(os.environ, "_data", None)
    snapshot = (tuple(raw.items()), len(_registered)) if isinstance(raw, dict) else None
    if _cache is not None and snapshot is not None and snapshot == _seen_environment:
        return _cache
    _seen_environment = snapshot
    items = tuple(sorted((k, v) for k, v in os.environ.items() if SECRET_VARIABLE_PATTERN.search(k)))
    if _registered:
        items += tuple((name, value) for value, name in _registered.items())
    if _cache is not None and _cache[0] == items:
        return _cache
    values: dict[str, str] = {}
    for name, value in items:
        for candidate in {value, value.strip()}:
            if len(candidate) >= MIN_SECRET_LENGTH:
                values.setdefault(candidate, name)
                # as it appears inside JSON text, where quotes, backslashes and controls are escaped
                values.setdefault(json.dumps(candidate, ensure_ascii=False)[1:-1], name)
    pattern = None
    if values:
        # longest first, so a key that contains another is replaced whole
        pattern = re.compile("|".join(re.escape(v) for v in sorted(values, key=len, reverse=True)))
    _cache = (items, pattern, values)
    return _cache


def redact(text: str) -> str:
    """`text` with every secret replaced by `[REDACTED:NAME]`."""
    if not isinstance(text, str) or len(text) < MIN_SECRET_LENGTH:
        return text
    return _redact(text, _compiled())


def _redact(text: str, compiled: tuple[Any, re.Pattern[str] | None, dict[str, str]]) -> str:
    _, pattern, values = compiled
    if pattern is not None:
        text = pattern.sub(lambda m: f"[REDACTED:{values[m.group(0)]}]", text)
    if _might_hold_token(text):
        text = _TOKENS.sub(lambda m: f"[REDACTED:{(m.lastgroup or 'token').replace('_', '-')}]", text)
    return text


def _might_hold_token(text: str) -> bool:
    return _MARKERS.search(text) is not None


def redact_value(value: Any) -> Any:
    """`value` with `redact` applied to every string inside it (dict keys included); the same object
    when nothing changed, so callers can compare identity."""
    return _redact_value(value, _compiled())  # the secrets are looked up once for the whole value


def _redact_value(value: Any, compiled: tuple[Any, re.Pattern[str] | None, dict[str, str]]) -> Any:
    if isinstance(value, str):
        return _redact(value, compiled) if len(value) >= MIN_SECRET_LENGTH else value
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
