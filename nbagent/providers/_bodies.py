"""What is left of a response body: an error's (read and decoded), the rest of one that broke off, and the tail
of a stream its reader stopped early (read so the connection goes back to the pool).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any, AsyncIterator

import httpx

__all__ = ["decode_error_body", "drain", "read_rest"]


def decode_error_body(raw: bytes) -> Any:
    """An error response's body: its JSON, or its text (the first 2,000 characters)."""
    text = raw.decode("utf-8", "replace")
    try:
        return json.loads(text)
    except ValueError:
        return text.strip()[:2000]


_DRAIN_BYTES = 64 * 1024
_DRAIN_SECONDS = 0.05


async def drain(chunks: AsyncIterator[bytes]) -> None:
    """Read what is left of a response its reader stopped early (`data: [DONE]` after the last event), so its
    connection goes back to the pool instead of being closed (a new connection, and its TLS handshake, for
    every request otherwise). Only a little (`_DRAIN_BYTES`), only briefly (`_DRAIN_SECONDS`): a body that
    goes on is closed, as before."""

    async def read() -> None:
        size = 0
        async for chunk in chunks:
            size += len(chunk)
            if size > _DRAIN_BYTES:
                return

    try:
        await asyncio.wait_for(read(), _DRAIN_SECONDS)
    except (asyncio.TimeoutError, httpx.HTTPError):
        pass


async def read_rest(chunks: AsyncIterator[bytes]) -> bytes:
    """The rest of a body, as much as arrives before the connection fails."""
    out: list[bytes] = []
    try:
        async for chunk in chunks:
            out.append(chunk)
    except httpx.TransportError:
        pass
    return b"".join(out)
