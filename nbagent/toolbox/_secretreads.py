"""Whether an auto-allowed command could take a credential apart: the classifier's check for files holding
a known secret.

Redaction (`nbagent.safety.secrets`) finds a secret whole, in pieces of six characters or more, reversed, or in
base64 or hex. A read-only command can still hand it over in smaller pieces (`cut -c1-5`, `head -c 5`,
`grep -o '^.\\{5\\}'`) or answer questions about it one at a time (`grep -c '^token=sk-a' .env`, `cmp`,
`sort` against lines of one's own, `git log -S`). So a command that is not one of
`WHOLE_READERS` (which print files whole, so redaction sees every secret in them) is auto-allowed only if
none of the files it reads is secret-bearing by its content (`nbagent.safety.gate.bearing`: a known
secret's value, whole, in pieces or wrapped, or a credential's shape: a key, a URL's password, a connection
string...). Files are read to `MAX_BYTES` in all; a tree too big to read through counts as holding one
(fail closed).

It reads the workspace's files, which anyone could have written: it only searches them for secrets, and
runs nothing.
"""

from __future__ import annotations

import os
from typing import Iterable

from ..safety.gate import bearing
from ..safety.secrets import secret_values

__all__ = ["MAX_BYTES", "WHOLE_READERS", "holder_of_secret"]

MAX_BYTES = 8 * 1024 * 1024
"""How much of the workspace one check reads, at most."""
WHOLE_READERS = frozenset({"cat", "nl", "ls", "stat", "du", "df", "file", "md5sum", "sha1sum", "sha256sum",
                           "sha512sum", "cksum", "pwd", "echo", "true", "whoami", "id", "uname", "date", "which",
                           "basename", "dirname", "realpath", "readlink", "find", "python", "python3", "wc"})
"""Programs that print what they read whole (or only names and counts), so redaction sees each secret."""
SLICING = {"head": ("bytes", "c"), "tail": ("bytes", "c")}
"""Options that make an otherwise whole reader take pieces (`head -c 5`)."""


def holder_of_secret(paths: Iterable[str], root: str, *, recursive: bool) -> str | None:
    """The first of `paths` (files, or directories when `recursive`) that is secret-bearing, or None. A
    check that cannot finish names the place it stopped at."""
    needles = [v.encode() for v in secret_values() if len(v) >= 8]
    budget = [MAX_BYTES]
    for value in paths:
        full = value if os.path.isabs(value) else os.path.join(root, value)
        found = _holds(full, needles, budget, recursive)
        if found:
            return os.path.relpath(found, root) if found.startswith(root) else found
    return None


def _holds(path: str, needles: list[bytes], budget: list[int], recursive: bool) -> str | None:
    if os.path.isdir(path):
        if not recursive:
            return None
        for dirpath, _dirs, files in os.walk(path):
            for name in files:
                found = _file_holds(os.path.join(dirpath, name), needles, budget)
                if found:
                    return found
        return None
    return _file_holds(path, needles, budget)


def _file_holds(path: str, needles: list[bytes], budget: list[int]) -> str | None:
    try:
        size = os.path.getsize(path)
    except OSError:
        return None
    if size > budget[0]:
        return path  # too much to read through: assume it does
    try:
        with open(path, "rb") as f:
            data = f.read(size + 1)
    except OSError:
        return None
    budget[0] -= len(data)
    if any(n in data for n in needles):
        return path
    return path if bearing(data.decode("utf-8", "replace")) else None
