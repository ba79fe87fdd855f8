"""Secrets kept out of everything nbagent writes down or sends: one redaction step for all of it.

What is a secret is decided by content, not by the name that holds it:

- the values of the environment's credential variables (names ending in `_KEY`, `_TOKEN`, `_AUTH`,
  `_SECRET`, `PASSWORD` (`PGPASSWORD` too), `_PWD`, plus a few well-known ones), and, in every other
  variable, what has a credential's shape (`nbagent.safety.shapes.credential_parts`: the password of
  `DATABASE_URL=postgres://app:pw@db/x`, a DSN's key, a webhook URL's token, a value that is one long
  random-looking token), read when redaction runs, so a key set after `import nbagent` is covered too;
- values registered with `add_secret(value, name)`: a key passed as `api_key=` rather than through the
  environment, a credential header, an MCP server's header or environment value;
- credential shapes wherever they appear (`nbagent.safety.shapes.shape_spans`): key prefixes (`sk-...`,
  `AIza...`, `ghp_...`, `AKIA...`...), JWTs, private key blocks, webhook URLs, the password of a URL,
  connection strings' secret fields, credential fields in configuration (`password: "..."`, `API_KEY=...`).

Known secrets are matched in pieces too: any run of `PIECE_LENGTH` characters or more (mixing letter cases or
digits, as pieces of random keys do) of a secret of `MIN_PIECE_SECRET_LENGTH` or more (`key[:8]`, the head a
truncated repr kept, a slice `cut -c` made), of the secret reversed, or its base64 or hex encoding at any
alignment, is redacted as `[REDACTED:NAME piece]`; and across line breaks, spaces and quotes (a key wrapped
over two lines, `"sk-ab" "cdef..."`, `od -c`'s spaced characters). Pieces shorter than that are not
recognisable: `nbagent.safety.gate` keeps them unreachable instead (tools slice and match the screened
text, not the raw one; a value derived from a secret-bearing one asks first).

`redact(text)` replaces each with `[REDACTED:NAME]` (the variable's name, or the kind of shape);
`secret_spans(text)` says where they are; `secret_bearing(text)` whether there is one; `redact_value(obj)`
redacts through the strings of a JSON-like value (dicts, lists, tuples), returning the same object when
nothing changed. A value shorter than `MIN_SECRET_LENGTH` is never treated as a known secret (it would
redact ordinary words).

This module is part of the data layer: it imports nothing from nbagent.
"""

from __future__ import annotations

import json
import os
import re
import time
from typing import Any

from ._first_look import _GAPS, PIECE_LENGTH, _glance, _may_hold_secret, _skeleton
from ._forms import encodings as _encodings
from ._forms import looks_random as _looks_random
from ._forms import trie as _trie
from .shapes import TOKEN_PATTERNS, credential_parts, shape_spans

__all__ = ["MIN_PIECE_SECRET_LENGTH", "MIN_SECRET_LENGTH", "PIECE_LENGTH", "SECRET_VARIABLE_PATTERN", "TOKEN_PATTERNS",
           "add_secret", "nothing_to_redact", "redact", "redact_exception", "redact_value", "secret_bearing", "secret_spans", "secret_values"]

MIN_SECRET_LENGTH = 8
"""Shorter values of credential variables are left alone."""
MIN_PIECE_SECRET_LENGTH = 12
"""Only secrets at least this long are matched by the piece (a short password's pieces are ordinary words)."""

SECRET_VARIABLE_PATTERN = re.compile(
    r"(?:^|_)(?:API_?KEY|KEY|AUTH|AUTH_KEY|TOKEN|SECRET|SECRET_KEY|ACCESS_KEY|PRIVATE_KEY|CREDENTIALS?)$|_PWD$"
    r"|(?:PASSWORD|PASSWD|PASSPHRASE)$"
    r"|^(?:ANTHROPIC|OPENAI|GEMINI|GOOGLE|MISTRAL|GROQ|COHERE|HF|HUGGING_FACE_HUB|GITHUB|GH|AWS)_.*KEY",
    re.IGNORECASE,
)
"""Environment variable names whose values are secrets."""

_cache: Any = None
_seen_environment: Any = None
_seen_at = -1.0
_seen_registered = 0
_RECHECK = 0.05
"""Seconds during which the environment is not looked at again (a key set just now is covered after)."""
_REMEMBERED, _MEMO_CHARS = 2048, 8_000_000
"""Texts this long that were redacted are remembered (up to this many characters, the oldest let go first), with
where their secrets were, until the secrets change: a tool's result is screened when it arrives, then sent in
every request body after (the whole conversation again each turn)."""
_memo: dict[tuple[bool, str], tuple[Any, list[tuple[int, int, str]]]] = {}
_memo_for: Any = None
_memo_chars = 0
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
    items = _environment_secrets()
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
                for form in _encodings(candidate, MIN_SECRET_LENGTH):
                    values.setdefault(form, name)
            if len(candidate) >= MIN_PIECE_SECRET_LENGTH:  # pieces are looked for with gaps left out
                for form in (_GAPS.sub("", candidate), _GAPS.sub("", candidate[::-1])):
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
    # whether a whole value holds a gap (a space, a quote, a backslash): only then can text hold a value that
    # the text with its gaps left out does not
    gappy = any(_GAPS.search(v) for v in values)
    _cache = (items, pattern, values, piece_pattern, pieces, runs, heads, gappy)
    return _cache


def _environment_secrets() -> tuple[tuple[str, str], ...]:
    """(variable, secret) for the environment: credential variables' values whole, and the credential parts
    of every other value (by shape: a URL's password, a DSN's key, a webhook's token, one random token)."""
    out = []
    for name, value in os.environ.items():
        if SECRET_VARIABLE_PATTERN.search(name):
            out.append((name, value))
        elif len(value) >= MIN_SECRET_LENGTH and len(value) <= 16_384:
            out.extend((name, part) for part in _parts(value))
    return tuple(sorted(out))


_parts_cache: dict[str, tuple[str, ...]] = {}


def _parts(value: str) -> tuple[str, ...]:
    found = _parts_cache.get(value)
    if found is None:
        if len(_parts_cache) > 4096:
            _parts_cache.clear()
        found = _parts_cache[value] = tuple(credential_parts(value))
    return found


def redact(text: str, *, fresh: bool = True, spare: tuple[str, ...] = ()) -> str:
    """`text` with every secret replaced by `[REDACTED:NAME]`. `fresh=False`: for many short texts in a
    row (progress), the environment is looked at again only every `_RECHECK` seconds. `spare`: texts the
    reader wrote itself (a tool call's arguments): where the text only repeats one of them, nothing is
    replaced, so whether a guess echoed back is redacted says nothing about the guess."""
    if not isinstance(text, str) or len(text) < PIECE_LENGTH:
        return text
    return _redact(text, _compiled(fresh), spare)


def nothing_to_redact(data: bytes) -> bool:
    """True when `redact(data.decode())` would return the text as it is, told at a glance (see `_glance`):
    for ASCII text whose parts between commas were mostly seen clean before (the store's batches of lines).
    False says nothing: redact the text."""
    compiled = _compiled()
    return not compiled[7] and data.isascii() and _glance(data, compiled)


def secret_spans(text: str, *, fresh: bool = True) -> list[tuple[int, int, str]]:
    """Where the secrets in `text` are: `(start, end, label)`, in order, not overlapping (label as in
    `[REDACTED:label]`)."""
    if not isinstance(text, str) or len(text) < PIECE_LENGTH:
        return []
    return _spans(text, _compiled(fresh))


def secret_bearing(text: str, *, fresh: bool = True) -> str | None:
    """What makes `text` secret-bearing (`"MY_TOKEN"`, `"url-password piece"`...), or None: a known secret
    whole, in pieces, encoded or wrapped, or a credential shape."""
    spans = secret_spans(text, fresh=fresh)
    return spans[0][2] if spans else None


def _redact(text: str, compiled: Any, spare: tuple[str, ...] = (), shapes: bool = True) -> str:
    spans = _recalled(text, compiled, shapes) if len(text) >= _REMEMBERED else None
    if spans is None:
        spans = _spans(text, compiled, shapes)
        if len(text) >= _REMEMBERED:
            _remember(text, compiled, shapes, spans)
    if spans and spare:
        spans = _unspared(text, spans, spare)
    if not spans:
        return text
    out: list[str] = []
    last = 0
    for start, end, label in spans:
        out.append(text[last:start])
        out.append(f"[REDACTED:{label}]")
        last = end
    out.append(text[last:])
    return "".join(out)


def _recalled(text: str, compiled: Any, shapes: bool) -> list[tuple[int, int, str]] | None:
    """Where the secrets of `text` were found before, or None (see `_memo`): found clean with the credential
    shapes looked for, it is clean without them."""
    found = _memo.get((shapes, text))
    if found is None and not shapes:
        clean = _memo.get((True, text))
        found = clean if clean is not None and not clean[1] else None
    # an answer counts only for the secrets it was found with (another thread may have changed them since)
    return found[1] if found is not None and found[0] is compiled else None


def _remember(text: str, compiled: Any, shapes: bool, spans: list[tuple[int, int, str]]) -> None:
    global _memo_for, _memo_chars
    if _memo_for is not compiled:  # the secrets changed: what was seen must be looked at again
        _memo.clear()
        _memo_for, _memo_chars = compiled, 0
    _memo[(shapes, text)] = (compiled, spans)
    _memo_chars += len(text)
    if _memo_chars > _MEMO_CHARS:  # the oldest let go (another thread's turn between two steps: all of it)
        try:
            while _memo_chars > _MEMO_CHARS:
                oldest = next(iter(_memo))
                del _memo[oldest]
                _memo_chars -= len(oldest[1])
        except (RuntimeError, KeyError, StopIteration):
            _memo.clear()
            _memo_chars = 0


def _unspared(text: str, spans: list[tuple[int, int, str]], spare: tuple[str, ...]) -> list[tuple[int, int, str]]:
    """`spans` without those that lie wholly inside a repetition of one of `spare`."""
    echoes: list[tuple[int, int]] = []
    for echo in spare:
        if len(echo) < 2:
            continue
        at = text.find(echo)
        while at >= 0:
            echoes.append((at, at + len(echo)))
            at = text.find(echo, at + 1)
    return [sp for sp in spans if not any(a <= sp[0] and sp[1] <= b for a, b in echoes)]


def _spans(text: str, compiled: Any, shapes: bool = True) -> list[tuple[int, int, str]]:
    _, pattern, values, piece_pattern, pieces, runs, heads, gappy = compiled
    if not gappy and text.isascii() and _glance(text, compiled):
        return []
    found: list[tuple[int, int, str, int]] = []  # (start, end, label, rank): whole values rank first
    gaps = _GAPS.search(text) is not None
    skeleton = _skeleton(text) if gaps and runs is not None else text
    # the first look: at the text with its gaps left out, where every piece and every gap-free value still
    # lies whole; at the text itself too only when a value holds a gap
    if runs is not None and (_may_hold_secret(skeleton, runs, heads)
                             or (gaps and gappy and _may_hold_secret(text, runs, heads))):
        if pattern is not None:
            found += [(m.start(), m.end(), values[m.group(0)], 0) for m in pattern.finditer(text)]
        if piece_pattern is not None:
            if not gaps:
                found += [(a, b, f"{name} piece", 1) for a, b, name in _piece_spans(text, piece_pattern, pieces)]
            else:  # pieces are found with line breaks, spaces and quotes left out: a wrapped key too
                found += _wrapped_spans(text, skeleton, piece_pattern, pieces)
    if shapes:
        found += [(a, b, kind, 2) for a, b, kind in shape_spans(text)]
    if not found:
        return []
    return _merge(found)


def _merge(found: list[tuple[int, int, str, int]]) -> list[tuple[int, int, str]]:
    """Overlapping spans as one, labelled by the best-ranked of them."""
    found.sort()
    merged: list[list[Any]] = []
    for start, end, label, rank in found:
        if merged and start < merged[-1][1]:
            last = merged[-1]
            last[1] = max(last[1], end)
            if rank < last[3]:
                last[2], last[3] = label, rank
        else:
            merged.append([start, end, label, rank])
    return [(a, b, label) for a, b, label, _ in merged]


def _piece_spans(text: str, piece_pattern: re.Pattern[str], pieces: dict[str, str]) -> list[tuple[int, int, str]]:
    """Each run of overlapping secret pieces, as one span (a piece of 6 found, the run it belongs to)."""
    out: list[tuple[int, int, str]] = []
    pos = 0
    while True:
        m = piece_pattern.search(text, pos)
        if m is None:
            return out
        start, end = m.start(), m.end()
        # extend while the next window is a piece too (the slice goes on)
        while end < len(text) and text[end - PIECE_LENGTH + 1 : end + 1] in pieces:
            end += 1
        out.append((start, end, pieces[m.group(0)]))
        pos = end


def _wrapped_spans(text: str, skeleton: str, piece_pattern: Any,
                   pieces: dict[str, str]) -> list[tuple[int, int, str, int]]:
    """Runs of a known secret's pieces in `skeleton` (`text` with its line breaks, spaces, quotes and backslashes
    left out: a key wrapped over two lines, `"sk-ab" "cdef..."`, spaced characters), mapped back to `text` (the
    map back is made only when something is found)."""
    hits = [(a, b, f"{name} piece", 1) for a, b, name in _piece_spans(skeleton, piece_pattern, pieces)]
    if not hits:
        return []
    import bisect

    runs = [(m.start(), m.end()) for m in re.finditer(r"[^\s\"'\\]+", text)]
    offsets = []  # where each run starts in the skeleton
    total = 0
    for a, b in runs:
        offsets.append(total)
        total += b - a

    def back(p: int) -> int:
        i = bisect.bisect_right(offsets, p) - 1
        return runs[i][0] + (p - offsets[i])

    return [(back(a), back(b - 1) + 1, label, rank) for a, b, label, rank in hits]


def redact_value(value: Any, *, shapes: bool = True) -> Any:
    """`value` with `redact` applied to every string inside it (dict keys included); the same object
    when nothing changed, so callers can compare identity. `shapes=False`: known secrets only, not
    credential shapes (a request body, whose earlier turns are the conversation as it was).

    What each string of a few characters redacts to is remembered (`_SHORT_MEMO`) until the secrets change: a
    request body holds the whole conversation again each turn, and looking at each of its strings again made
    a run's requests cost the square of its length."""
    global _short
    compiled = _compiled()  # the secrets are looked up once for the whole value
    owner, memos = _short
    if owner is not compiled:  # the secrets changed: what was seen must be looked at again (in a memory of
        memos = {True: _Memo(), False: _Memo()}  # their own: another thread's answers for the secrets of before go to
        _short = (compiled, memos)  # the memory of before)
    return _redact_value(value, compiled, shapes, memos[shapes])


def _redact_value(value: Any, compiled: Any, shapes: bool, memo: _Memo) -> Any:
    if isinstance(value, str):
        return _redact_string(value, compiled, shapes, memo)
    if isinstance(value, dict):
        changed = False
        out = {}
        for k, v in value.items():
            if type(k) is str:  # (most of a body: a string remembered costs a look-up, not a call)
                nk = k if len(k) < PIECE_LENGTH else memo.get(k) or _redact_string(k, compiled, shapes, memo)
                if nk is not k and nk == k:
                    nk = k
            else:
                nk = _redact_string(k, compiled, shapes, memo) if isinstance(k, str) else k
            if type(v) is str:
                nv = v if len(v) < PIECE_LENGTH else memo.get(v) or _redact_string(v, compiled, shapes, memo)
                if nv is not v and nv == v:
                    nv = v
            elif v is None or type(v) in _LEAVES:
                nv = v
            else:
                nv = _redact_value(v, compiled, shapes, memo)
            changed = changed or nk is not k or nv is not v
            out[nk] = nv
        return out if changed else value
    if isinstance(value, (list, tuple)):
        items = [v if v is None or type(v) in _LEAVES else _redact_value(v, compiled, shapes, memo) for v in value]
        if any(a is not b for a, b in zip(items, value)):
            return type(value)(items) if isinstance(value, tuple) else items
        return value
    return value


def _redact_string(value: str, compiled: Any, shapes: bool, memo: _Memo) -> str:
    if len(value) < PIECE_LENGTH:
        return value
    if len(value) >= _REMEMBERED:  # (remembered by `_redact` itself, with where its secrets were)
        return _redact(value, compiled, (), shapes)
    found = memo.get(value)
    if found is None:
        if len(memo) >= _SHORT_MEMO or memo.chars > _SHORT_CHARS:
            memo.clear()
            memo.chars = 0
        found = memo[value] = _redact(value, compiled, (), shapes)
        memo.chars += len(value)
    return value if found == value else found


_LEAVES = frozenset((int, float, bool))
"""What holds no string: `_redact_value` leaves it as it is without a call."""
_SHORT_MEMO, _SHORT_CHARS = 200_000, 8_000_000
"""How many strings (shorter than `_REMEMBERED`) `redact_value` remembers, and how many characters they may
hold, for each of shapes on and off; all are let go past either."""


class _Memo(dict):
    """What strings redact to (`redact_value`), with how many characters the strings hold."""

    chars = 0


_short: tuple[Any, dict[bool, _Memo]] = (None, {True: _Memo(), False: _Memo()})
"""The secrets (`_compiled()`) the strings were redacted for, and what each redacted to, shapes on and off."""


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
