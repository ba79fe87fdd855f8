"""Coalescing: however many events arrive, a view sends at most `rate` widget messages a second.

Events only mark what changed (cheap, O(1)); one flush is scheduled on the run's loop, and it renders what
changed and returns how many messages it sent. The next flush may not start before that many messages'
worth of budget has passed, so a tool that reports progress 100,000 times costs a few dozen messages.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Callable

__all__ = ["Throttle"]

log = logging.getLogger("nbagent.jupyter")


class Throttle:
    """Run `flush() -> messages sent` on `loop`, soon after `request()`, within a budget of `rate` a second."""

    def __init__(self, loop: asyncio.AbstractEventLoop, flush: Callable[[], int], rate: float = 30.0) -> None:
        if rate <= 0:
            raise ValueError("rate must be positive")
        self.loop = loop
        self._flush = flush
        self.rate = rate
        self._handle: asyncio.Handle | None = None
        self._next = 0.0
        self.flushes = 0
        self.sent = 0
        self.closed = False

    @property
    def pending(self) -> bool:
        return self._handle is not None

    def request(self) -> None:
        """Ask for a flush (call on the loop's thread). Many requests before it runs make one flush."""
        if self._handle is not None or self.closed:
            return
        self._handle = self.loop.call_at(max(self.loop.time(), self._next), self._run)

    def _run(self) -> None:
        self._handle = None
        try:
            sent = self._flush()
        except Exception:  # a rendering bug must not kill the run's loop
            log.exception("updating the live view failed")
            sent = 1
        self.flushes += 1
        self.sent += sent
        self._next = self.loop.time() + max(sent, 1) / self.rate

    def flush_now(self) -> None:
        """Run the pending flush at once (a cell that waited for the run wants its last update while it still
        executes: its reader, nbclient say, hears only that cell's messages)."""
        if self._handle is None or self.closed:
            return
        self._handle.cancel()
        self._run()

    def close(self) -> None:
        """Stop scheduling flushes (a pending one is dropped)."""
        self.closed = True
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
