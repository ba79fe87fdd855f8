"""A file's bytes as the file tools read them: binary or text, its lines (a huge one never held whole).

Shared by `read_file` (`_files`) and `grep` (`_grep`), with the sizes and short labels their messages use.
"""

from __future__ import annotations

import codecs
import unicodedata
from typing import Any

__all__ = ["MAX_LINE_CHARS", "MAX_LIST_SCAN", "SNIFF_BYTES", "binary_lines", "count_lines", "human_size",
           "looks_binary", "shown_path"]

MAX_LINE_CHARS = 2_000
"""Longer lines are cut in read_file and grep output."""
MAX_LIST_SCAN = 200_000
"""Entries list_files and grep look at before they stop."""
SNIFF_BYTES = 8192
"""How much of a file is read to tell text from binary (and images from text)."""


def human_size(n: int) -> str:
    size = float(n)
    for unit in ("bytes", "KB", "MB", "GB"):
        if size < 1024 or unit == "GB":
            return f"{int(size)} bytes" if unit == "bytes" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} bytes"  # pragma: no cover


def shown_path(rel: str) -> str:
    """A path as one entry of a tool's answer: as it is when plain; else in double quotes, with line
    breaks, control, invisible and separator characters, undecodable bytes, quotes and backslashes written
    as escapes (`"a\\nb.txt"`), so a name cannot pass for several entries, for a line of its own, or for
    another entry's decoration (`list_files`, `grep`). A name that starts with a double quote or ends with a
    space, or holds `  (` or ` -> ` (the forms sizes and links are shown in), is quoted too."""
    if rel and not rel.startswith('"') and not rel.endswith(" ") and "  (" not in rel and " -> " not in rel \
            and all(c == " " or unicodedata.category(c)[0] not in "CZ" for c in rel):
        return rel
    out = []
    for c in rel:
        if c in '"\\':
            out.append("\\" + c)
        elif c == "\n":
            out.append("\\n")
        elif c == "\t":
            out.append("\\t")
        elif c != " " and unicodedata.category(c)[0] in "CZ":
            out.append(f"\\u{ord(c):04x}")
        else:
            out.append(c)
    return '"' + "".join(out) + '"'


def looks_binary(head: bytes) -> bool:
    if not head:
        return False
    if b"\x00" in head:
        return True
    decoder = codecs.getincrementaldecoder("utf-8")()
    try:
        decoder.decode(head, final=False)
        return False
    except UnicodeDecodeError:
        control = sum(1 for b in head if b < 32 and b not in (9, 10, 12, 13, 8, 27))
        return control / len(head) > 0.05


def binary_lines(f: Any, keep: int = 4 * MAX_LINE_CHARS):
    """(the first `keep` bytes of each line, the line's length without its ending) of a binary file; lines end at
    `\\n` only (as `wc -l` counts them), and a huge line is never held in memory whole."""
    while True:
        chunk = f.readline(1 << 16)
        if not chunk:
            return
        kept = chunk[:keep]
        length = len(chunk)
        while not chunk.endswith(b"\n"):
            chunk = f.readline(1 << 16)
            if not chunk:
                break
            if len(kept) < keep:
                kept += chunk[: keep - len(kept)]
            length += len(chunk)
        if chunk.endswith(b"\r\n"):
            length -= 2
        elif chunk.endswith(b"\n"):
            length -= 1
        yield kept, length


def count_lines(f: Any) -> int:
    count = 0
    last = b""
    while True:
        chunk = f.read(1 << 20)
        if not chunk:
            break
        count += chunk.count(b"\n")
        last = chunk
    if last and not last.endswith(b"\n"):
        count += 1
    return count
