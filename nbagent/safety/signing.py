"""Signed JSON lines: how the session store detects a file that someone else changed.

Every stored line ends with its MAC, inside the JSON object so the file stays JSON lines:

    {"kind":"message","message":{...},"mac":"<64 hex>"}

The MAC is HMAC-SHA256, with the key kept outside the workspace (`nbagent.safety.trust.session_key`), over the
MAC of the line before (32 zero bytes for the first line) followed by the line's bytes without its MAC.
So a line that was edited, forged without the key, taken from another file, moved, or whose predecessor
was removed does not verify. The header names the key by a short digest (`key_id`), so a file signed
with another key (another machine, a key that was replaced) says so instead of failing line by line.
What it does not detect: a file cut after a whole line (its last lines removed): the end is not signed.
"""

from __future__ import annotations

import hashlib
import hmac
from binascii import hexlify
from typing import Any

__all__ = ["MAC_SUFFIX_BYTES", "START", "has_mac", "key_id", "seal", "signer", "unseal"]

START = bytes(32)
"""The chain value before a file's first line."""
_PREFIX = b',"mac":"'
_END = b'"}\n'
MAC_SUFFIX_BYTES = len(_PREFIX) + 64 + 2
"""`,"mac":"<64 hex>"}`: what sealing adds in place of a line's closing brace."""


def key_id(key: bytes) -> str:
    """A short public name of a key (not usable to forge anything)."""
    return hashlib.sha256(b"nbagent-session-key-id\0" + key).hexdigest()[:16]


_IPAD = bytes(b ^ 0x36 for b in range(256))
_OPAD = bytes(b ^ 0x5C for b in range(256))


def signer(key: bytes) -> Any:
    """HMAC-SHA256 keyed once (RFC 2104's inner and outer hashes, each fed its padded key): each line then
    costs two copies and two short hashes, not a key schedule and an `hmac` object (half the time)."""
    if len(key) > 64:
        key = hashlib.sha256(key).digest()
    key = key.ljust(64, b"\0")
    return hashlib.sha256(key.translate(_IPAD)), hashlib.sha256(key.translate(_OPAD))


def _mac(keyed: Any, previous: bytes, line: bytes) -> bytes:
    inner, outer = keyed
    h = inner.copy()
    h.update(previous)
    h.update(line)
    o = outer.copy()
    o.update(h.digest())
    return o.digest()


def seal(keyed: Any, previous: bytes, lines: list[bytes]) -> tuple[bytes, bytes]:
    """The lines (each one JSON object, no newline inside) signed with `signer(key)` and joined with
    newlines (and one at the end); returns them and the chain value after the last."""
    inner, outer = keyed
    parts: list[bytes] = []
    mac = previous
    for line in lines:  # `_mac`, written out: this runs for every line the store writes
        h = inner.copy()
        h.update(mac)
        h.update(line)
        o = outer.copy()
        o.update(h.digest())
        mac = o.digest()
        parts += (line[:-1], _PREFIX, hexlify(mac), _END)
    return b"".join(parts), mac


def unseal(key: Any, previous: bytes, line: bytes) -> tuple[bytes, bytes] | None:
    """`(the line without its MAC, the chain value after it)` when it verifies; None when it does not
    (or has no MAC). `key`: the key, or `signer(key)` (a file's many lines: keyed once)."""
    line = line.rstrip(b"\r")
    if len(line) <= MAC_SUFFIX_BYTES or line[-MAC_SUFFIX_BYTES:-66] != _PREFIX or not line.endswith(b'"}'):
        return None
    body = line[:-MAC_SUFFIX_BYTES] + b"}"
    try:
        given = bytes.fromhex(line[-66:-2].decode("ascii"))
    except ValueError:
        return None
    mac = hmac.digest(key, previous + body, "sha256") if isinstance(key, bytes) else _mac(key, previous, body)
    if not hmac.compare_digest(mac, given):
        return None
    return body, mac


def has_mac(line: bytes) -> bool:
    line = line.rstrip(b"\r")
    return len(line) > MAC_SUFFIX_BYTES and line[-MAC_SUFFIX_BYTES:-66] == _PREFIX
