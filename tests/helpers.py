"""Small helpers for tests."""

from __future__ import annotations

import os

from nbagent import AssistantMessage, ToolCall
from nbagent.transcript import check_transcript


def calls(*items: ToolCall, text: str = "") -> AssistantMessage:
    """An assistant message making these tool calls."""
    return AssistantMessage(text=text, tool_calls=list(items))


def call(tool_name: str, /, **arguments) -> ToolCall:
    return ToolCall(name=tool_name, arguments=arguments)


def raw(name: str, raw_arguments: str) -> ToolCall:
    return ToolCall(name=name, raw_arguments=raw_arguments)


def assert_valid(run) -> None:
    problems = check_transcript(run.messages)
    assert problems == [], problems


def zeros_png(width: int, height: int, *, bit_depth: int = 8, color_type: int = 6) -> bytes:
    """A valid PNG of zeros: tiny on disk, the whole width x height image when decoded (a decompression bomb).

    The pixel data is compressed a block of rows at a time with a full flush after it, so every block
    compresses to the same bytes: one block is compressed and repeated, instead of compressing the whole
    image (hundreds of MB through zlib) each time a test needs one. The stream stays one valid zlib stream
    (header, blocks, final block, Adler-32 of every row)."""
    import struct
    import zlib

    channels = {0: 1, 2: 3, 6: 4}[color_type]
    row = b"\0" * (1 + (width * channels * bit_depth + 7) // 8)
    rows = next(k for k in (1000, 500, 200, 100, 50, 25, 10, 5, 2, 1) if height % k == 0)
    comp = zlib.compressobj(9, zlib.DEFLATED, -15)  # raw deflate: the zlib header and checksum are added here
    block = comp.compress(row * rows) + comp.flush(zlib.Z_FULL_FLUSH)
    checksum = zlib.adler32(b"")
    for _ in range(height):
        checksum = zlib.adler32(row, checksum)
    data = b"\x78\xda" + block * (height // rows) + comp.flush(zlib.Z_FINISH) + struct.pack(">I", checksum)

    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body) & 0xFFFFFFFF)

    ihdr = struct.pack(">IIBBBBB", width, height, bit_depth, color_type, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", data) + chunk(b"IEND", b"")


FAST_LANE = os.environ.get("NBAGENT_TEST_LANE") == "fast"
"""Whether this is the fast lane (`./dev test --fast` sets NBAGENT_TEST_LANE=fast); CI runs the full one."""


def examples(n: int) -> int:
    """How many inputs a property test draws: `n` in the full lane, a fifth in the fast lane, which checks
    the same properties on fewer random inputs (most of a fuzz test's time is drawing them)."""
    return max(20, n // 5) if FAST_LANE else n
