"""What a credential looks like when nobody registered it: key prefixes, tokens, URLs with passwords, DSNs,
connection strings, credential fields in configuration, private keys.

Two uses, both by content, never by the name of the variable or file that holds the text:

- `shape_spans(text)`: where credentials sit in any text (a tool's output, a file, a prompt), each as
  `(start, end, kind)`. For a URL, a connection string or a configuration field only the secret part is
  a span (`postgres://app:[REDACTED:url-password]@db/x` stays readable); a key with a known prefix, a JWT
  or a private key block is a span whole.
- `credential_parts(value)`: the secrets inside one value the person holds (an environment variable, an
  MCP server's header or environment entry): the shapes above, a webhook URL's token segments, and a value
  that is itself one long random-looking token (`looks_random_token`). `nbagent.safety.secrets` registers
  them, so they are then found whole, in pieces, reversed and encoded, like any key.

A random-looking token in free text is not a span (hashes, ids and base64 data would all go): it counts
only where a person put it (the environment, a header) or where a credential field names it.

This module imports nothing from nbagent.
"""

from __future__ import annotations

import math
import re

__all__ = ["TOKEN_PATTERNS", "credential_parts", "looks_random_token", "shape_spans"]

TOKEN_PATTERNS: dict[str, re.Pattern[str]] = {
    "anthropic-key": re.compile(r"sk-ant-[A-Za-z0-9_\-]{20,}"),
    "openai-key": re.compile(r"sk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{20,}"),
    "google-key": re.compile(r"AIza[0-9A-Za-z_\-]{35}"),
    "github-token": re.compile(r"(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{40,})"),
    "gitlab-token": re.compile(r"glpat-[A-Za-z0-9_\-]{20,}"),
    "slack-token": re.compile(r"xox[abposr]-[A-Za-z0-9\-]{10,}"),
    "aws-key": re.compile(r"(?:AKIA|ASIA)[0-9A-Z]{16}"),
    "huggingface-token": re.compile(r"hf_[A-Za-z0-9]{30,}"),
    "stripe-key": re.compile(r"(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}"),
    "npm-token": re.compile(r"npm_[A-Za-z0-9]{36}"),
    "pypi-token": re.compile(r"pypi-[A-Za-z0-9_\-]{50,}"),
    "jwt": re.compile(r"eyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}"),
    "private-key": re.compile(r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----[\s\S]*?(?:-----END [A-Z0-9 ]*PRIVATE KEY-----|\Z)"),
    "webhook": re.compile(r"https://(?:hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9/_\-]{16,}"
                          r"|(?:ptb\.|canary\.)?discord(?:app)?\.com/api/webhooks/[0-9]+/[A-Za-z0-9_\-]{20,}"
                          r"|[A-Za-z0-9.\-]+\.webhook\.office\.com/[A-Za-z0-9/@_\-]{20,})"),
}
"""Shapes of well-known keys, tokens and webhook URLs: the whole match is the secret."""

_KEYED: dict[str, tuple[str, str, str]] = {
    "connection-string": ("password|pwd|accountkey|sharedaccesskey|sharedaccesssignature|sig|clientsecret"
                          "|client_secret", r"\s*", "="),
    "credential-field": (r"password|passwd|passphrase|secret|token|api[_\-]?key|apikey|access[_\-]?key|private[_\-]?key"
                         r"|auth[_\-]?key|credentials?", r"[\"']?\s*", "[:=]"),
    "credential-line": ("PASSWORD|PASSWD|PASSPHRASE|SECRET|TOKEN|API_?KEY|ACCESS_KEY|PRIVATE_KEY|AUTH|AUTH_KEY"
                        "|CREDENTIALS?|_PWD|_KEY", r"[ \t]*", "="),
    "auth-header": ("authorization|proxy-authorization", r"\s*", ":"),
}
"""The shapes a credential's name opens, each as `(its names, the gap after a name, the separator after the gap)`:
the shapes' patterns below are built from these, and so is what the store's glance looks for
(`nbagent.safety._first_look`): a name followed by its separator, in an ASCII text with its gaps (quotes, spaces,
backslashes) left out. Every gap here matches only such characters (a test checks), so wherever a shape matches
in an ASCII text, that text with its gaps left out holds one of its names followed by its separator
(`"input_tokens":120` holds the word `token`, but no name followed by `:` or `=`)."""

_LITERAL = {"url-password": "://", "dsn-key": "://"}
"""The shapes no name opens, each with what every match of it holds. Every shape of `_PART_PATTERNS` is in `_KEYED`
or here: the store's glance (`nbagent.safety._first_look`) looks for what these say (a test checks each shape)."""


def _named(kind: str) -> str:
    names, gap, separator = _KEYED[kind]
    return f"(?:{names}){gap}{separator}"


def spelled(fragment: str) -> tuple[str, ...]:
    """Every text a fragment of `_KEYED` (names, or a separator) matches: `api[_\\-]?key|apikey` spells `api_key`,
    `api-key`, `apikey`. It reads only what those fragments are made of (alternatives, letters, `_`, `-`, `:`,
    `=`, character classes of those, each maybe optional): anything else raises, so a fragment written otherwise
    cannot be spelled short (a test spells each and matches every spelling against it)."""
    out: list[str] = []
    for alternative in fragment.split("|"):
        spellings = [""]
        i = 0
        while i < len(alternative):
            ch = alternative[i]
            if ch == "[":
                end = alternative.index("]", i)
                choices = alternative[i + 1 : end].replace("\\-", "-")
                i = end + 1
            elif ch == "\\" and alternative[i + 1 : i + 2] == "-":
                choices, i = "-", i + 2
            elif ch.isalnum() or ch in "_-:=":
                choices, i = ch, i + 1
            else:
                raise ValueError(f"cannot spell {fragment!r}: {ch!r} at {i}")
            if not choices or not all(c.isalnum() or c in "_-:=" for c in choices):
                raise ValueError(f"cannot spell {fragment!r}: [{choices}]")
            optional = alternative[i : i + 1] == "?"
            i += optional
            spellings = [s + c for s in spellings for c in choices] + (spellings if optional else [])
        out += spellings
    return tuple(dict.fromkeys(out))


_PART_PATTERNS: dict[str, re.Pattern[str]] = {
    # scheme://user:PASSWORD@host (a database URL, a proxy, a broker); only the password is the secret
    "url-password": re.compile(r"\b[A-Za-z][A-Za-z0-9+.\-]{1,30}://[^\s:/?#@'\"<>]{0,256}:(?P<s>[^\s/?#@'\"<>]{1,256})@"),
    # scheme://KEY@host: a DSN whose user part is the key (Sentry and the like)
    "dsn-key": re.compile(r"\b[A-Za-z][A-Za-z0-9+.\-]{1,30}://(?P<s>[A-Za-z0-9_\-]{16,256})@[A-Za-z0-9.\-\[]"),
    # Key=Value;... connection strings (ADO.NET, ODBC, Azure storage and service bus)
    "connection-string": re.compile(
        r"(?i)(?:^|[;&?\s\"'])" + _named("connection-string") + r"\s*(?P<s>[^;&\s\"']{3,})"),
    # a credential field given a quoted value: password = "...", "api_key": "...", token: '...'
    "credential-field": re.compile(
        "(?i)" + _named("credential-field") + r"\s*(?:b|r)?(?P<q>[\"'])(?P<s>[^\"'\s]{6,})(?P=q)"),
    # NAME=value lines of .env files and shell exports, NAME a credential's name: the value whatever it is
    "credential-line": re.compile(
        r"(?m)^[ \t]*(?:export[ \t]+)?[A-Z0-9_]*" + _named("credential-line") + r"[ \t]*[\"']?(?P<s>[^\s\"'#]{6,})"),
    # HTTP headers as they appear in logs and curl lines
    "auth-header": re.compile("(?i)\\b" + _named("auth-header") + r"\s*(?:bearer|basic|token|bot)?\s*"
                              r"(?P<s>[A-Za-z0-9+/=_.~\-]{8,})"),
}
"""Shapes where only one group (`s`) is the secret."""

_TOKENS = re.compile("|".join(f"(?P<{name.replace('-', '_')}>{p.pattern})" for name, p in TOKEN_PATTERNS.items()))
_TOKEN_MARKERS = ("sk-", "sk_", "rk_", "AIza", "gh", "github_pat_", "glpat-", "xox", "AKIA", "ASIA", "hf_", "npm_", "pypi-", "eyJ",
                  "PRIVATE KEY", "hooks.slack", "discord", "webhook.office")
"""Every token shape holds one of these: a cheap first look (substring tests, not a regular expression)."""
_PART_WORDS: dict[str, tuple[str, ...]] = {
    "url-password": ("://",),
    "dsn-key": ("://",),
    "connection-string": ("password", "pwd", "accountkey", "sharedaccess", "sig", "clientsecret", "client_secret"),
    "credential-field": ("pass", "secret", "token", "key", "credential"),
    "credential-line": ("pass", "secret", "token", "key", "auth", "credential", "_pwd"),
    "auth-header": ("authorization",),
}
"""For each part shape, the words (lower case) one of which it holds: it is looked for only around them."""
_ANY_WORD = tuple(w for w in sorted({w for ws in _PART_WORDS.values() for w in ws})
                  if not any(o != w and o in w for ws in _PART_WORDS.values() for o in ws))
"""The words of `_PART_WORDS` that hold none of the others (`pass` for `password`): a text holding none of
these holds none of the words, and no part shape is looked for in it."""
_ANY_MARKER = tuple(m for m in _TOKEN_MARKERS if not any(o != m and o in m for o in _TOKEN_MARKERS))
"""The same for `_TOKEN_MARKERS` (`github_pat_` holds none of the others: it stays)."""
_NEEDLES = tuple(sorted({n for n in {*(m.lower() for m in _TOKEN_MARKERS), *_ANY_WORD}
                         if not any(o != n and o in n for o in {*(m.lower() for m in _TOKEN_MARKERS), *_ANY_WORD})}))
"""Every marker and word in lower case, less those holding another: none holds a double quote."""
_clean_pieces: set[str] = set()
"""Pieces of texts (between double quotes) that hold none of `_NEEDLES` in any case. Kept as they were, not
in lower case: a key among them is still one that redaction recognises."""


def _may_hold_shape(text: str) -> bool:
    """Whether `text` holds one of the markers (any case) or words: `shape_spans`'s first look. A marker or
    word holds no double quote, so it lies inside one of the pieces the text's double quotes cut it into;
    the pieces of JSON lines repeat (keys, names, the same messages) and each is looked through once."""
    new = set(text.split('"')).difference(_clean_pieces)
    if not new:
        return False
    # the new pieces looked through as one text, joined by the double quote no needle holds (so a needle found
    # lies in one piece); lower case char by char, as each piece's own would be
    lower = '"'.join(new).lower()
    for needle in _NEEDLES:
        if needle in lower:
            return True
    if len(_clean_pieces) > 20_000:  # (at most a few MB)
        _clean_pieces.clear()
    _clean_pieces.update(piece for piece in new if len(piece) <= 256)
    return False

_PLACEHOLDER = re.compile(r"(?i)^(?:x+|\*+|\.+|<[^>]*>|\$\{?[A-Za-z_][A-Za-z0-9_]*\}?(?::-[^}]*)?\}?|%\([a-z_]+\)s"
                          r"|your[_\-].*|changeme|example|placeholder|none|null|true|false|redacted.*|\[redacted.*)$")
"""Values that stand for a credential without being one (`${TOKEN}`, `<your key>`, `xxxx`)."""


def shape_spans(text: str) -> list[tuple[int, int, str]]:
    """`(start, end, kind)` of every credential shape in `text`, in order of appearance (may overlap)."""
    spans: list[tuple[int, int, str]] = []
    if not _may_hold_shape(text):
        return spans
    for marker in _ANY_MARKER:
        if marker in text:
            for m in _TOKENS.finditer(text):
                spans.append((m.start(), m.end(), (m.lastgroup or "token").replace("_", "-")))
            break
    if "=" in text or ":" in text:
        lower = text.lower()
        for word in _ANY_WORD:
            if word in lower:
                break
        else:
            return spans
        for kind, pattern in _PART_PATTERNS.items():
            for m in _around(pattern, text, lower, _PART_WORDS[kind]):
                start, end = m.span("s")
                secret = m.group("s")
                if end > start and not _PLACEHOLDER.match(secret) and (kind != "dsn-key" or _keylike(secret)):
                    spans.append((start, end, kind))
    spans.sort()
    return spans


def _around(pattern: re.Pattern[str], text: str, lower: str, words: tuple[str, ...]):
    """`pattern`'s matches in the lines around each of `words` (a regular expression over the whole text
    costs far more than finding a few words)."""
    hits: list[int] = []
    for word in words:
        at = lower.find(word)
        while at >= 0:
            hits.append(at)
            at = lower.find(word, at + 1)
    if not hits:
        return
    hits.sort()
    windows: list[list[int]] = []
    for at in hits:
        start = lower.rfind("\n", max(0, at - 300), at) + 1 or max(0, at - 300)
        end = min(len(text), at + 600)
        if windows and start <= windows[-1][1]:
            windows[-1][1] = max(windows[-1][1], end)
        else:
            windows.append([start, end])
    for start, end in windows:
        yield from pattern.finditer(text, start, end)


def looks_random_token(token: str) -> bool:
    """A single token that looks generated rather than written: 16 characters or more of a key's alphabet,
    mixing letters and digits (upper and lower case, or 32 characters and more), with the spread of
    characters a random string has. Paths, words, version numbers and plain hex (hashes, ids) are not."""
    n = len(token)
    if n < 16 or n > 4096 or not re.fullmatch(r"[A-Za-z0-9+/=_\-.~]+", token):
        return False
    if re.fullmatch(r"[0-9a-fA-F\-]+", token):  # hashes, UUIDs, ids: not secrets by their look
        return False
    lower = any(c.islower() for c in token)
    upper = any(c.isupper() for c in token)
    digit = any(c.isdigit() for c in token)
    if not digit or not (lower or upper) or (not (lower and upper) and n < 32):
        return False
    if sum(c.isdigit() for c in token) < 2:  # `MyVeryLongClassName2`: a name with a number, not a key
        return False
    if token.count(".") > 2 or token.startswith(("/", "./", "../", "~")):
        return False  # dotted names, paths
    counts: dict[str, int] = {}
    for c in token:
        counts[c] = counts.get(c, 0) + 1
    entropy = -sum(k / n * math.log2(k / n) for k in counts.values())
    return entropy >= min(4.0, math.log2(n) - 0.5)


def _keylike(token: str) -> bool:
    """A DSN's user part that is a key: random-looking, or 16 hex digits and more (Sentry's keys)."""
    return looks_random_token(token) or (len(token) >= 16 and re.fullmatch(r"[0-9a-fA-F]+", token) is not None
                                         and any(c.isdigit() for c in token) and any(c.isalpha() for c in token))


_URL = re.compile(r"\b[A-Za-z][A-Za-z0-9+.\-]{1,30}://[^\s'\"<>]+")
_SEGMENT = re.compile(r"[^/?#&=;:@,]+")


def credential_parts(value: str) -> list[str]:
    """The secrets inside one value a person set (an environment variable, a header): its credential
    shapes, the random-looking segments of a URL in it (a webhook's token), or the value itself when it
    is one random-looking token. Empty when it holds none."""
    value = value.strip()
    if len(value) < 6:
        return []
    parts = [value[s:e] for s, e, _ in shape_spans(value)]
    for m in _URL.finditer(value):
        rest = m.group(0).split("://", 1)[1]
        path = rest.split("/", 1)[1] if "/" in rest else ""
        parts += [seg for seg in _SEGMENT.findall(path) if looks_random_token(seg)]
    if not parts:
        words = value.split()
        if len(words) == 2 and words[0].lower() in ("bearer", "basic", "token", "bot"):
            value = words[1]  # a header's value: the scheme, then the credential
        if looks_random_token(value):
            parts.append(value)
    return list(dict.fromkeys(p for p in parts if len(p) >= 6))
