"""The moment a paced request goes: waited for at the socket, anchored on the previous request's actual send.

    gate = request_gate.get()
    await gate.before(len(body), early=True)        # a permit, up to `AHEAD` before its time
    request.extensions["trace"] = socket_hook(gate, pacing)  # httpx's trace: the last wait is at the write
    ...                                                # (`gate.send()` runs just before the body is written)

A provider that allows no burst refuses a request that reaches it less than one interval after the one before.
What brings two requests closer than the limiter spaced them is the time between the permit and the write: the
event loop's timer wakes up to a millisecond late (and later when busy), and building the request and taking a
connection from the pool take their own, varying time. So the permit is taken a little ahead (`AHEAD`), the
request is built and given a connection, and the wait for its time is done last, by httpx's `trace`
extension, just before the body is written (the server has the request when the body lands): slept to within
`SPIN` of the time, then spun on the clock. And the time is anchored on the previous request's actual send,
not on an ideal schedule (`Limiter.due`): a request that went late never lets the next one bunch with it.

A transport that does not report its writes (httpx's `trace` is httpcore's; a test's mock transport is not)
gets the wait before the send instead (`SocketPacing.reports`: learned from the first request's trace).
"""

from __future__ import annotations

import asyncio
import time
from contextvars import ContextVar
from typing import Any, Awaitable, Callable, Mapping

__all__ = ["AHEAD", "EPSILON", "SPIN", "ItemGate", "SocketPacing", "estimate_tokens", "request_gate", "socket_hook", "wait_until"]

AHEAD = 0.004
"""Seconds before its time a permit is taken when the wait is done at the socket: time to build the request
and take a connection (a fraction of a millisecond on a kept connection), so both are done before the slot."""
SPIN = 0.0012
"""The last seconds of a wait are spun on the clock rather than slept: an event loop's timer rounds up to the
millisecond and wakes late, which would bring the next request closer to this one than the limiter spaced
them. At most this much CPU a request, only while paced (the interval is what is kept exact)."""
EPSILON = 1e-9
"""Seconds a wait may be short by (the rounding of a clock's floats)."""
_WRITE = "send_request_body.started"
"""httpcore's trace event just before the request's body is written (HTTP/1.1 and HTTP/2 alike)."""
_WRITTEN = "send_request_body.complete"
"""...and once it was (a gate with a `written()` learns when its request really left: the write can wait for the
event loop after the wait for its time ended)."""


async def wait_until(due: Callable[[], float], clock: Callable[[], float] = time.monotonic,
                     sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep, spin: float = SPIN) -> float:
    """Wait until `due()` by `clock`, read again after every wake-up (it may move later while waiting); the last
    `spin` seconds are spun, not slept. Returns the clock's reading when the time had come."""
    while True:
        now = clock()
        left = due() - now
        if left <= EPSILON:
            return now
        if left > spin:
            await sleep(left - spin)
            continue
        # the last stretch: the callbacks that are ready run first (so the write that follows meets a short
        # queue), then the clock is read until the time
        await sleep(0)
        target = due()
        while clock() < target:
            pass


class SocketPacing:
    """Whether a client's transport reports its writes (httpx's `trace` extension reaches it): until it has been
    seen to, a request waits for its time before the send; once it has, at the write."""

    __slots__ = ("reports",)

    def __init__(self) -> None:
        self.reports = False


def socket_hook(gate: Any, pacing: SocketPacing) -> Callable[[str, dict], Awaitable[None]]:
    """httpx's `trace` extension for one attempt through `gate`: any event says the transport reports its
    writes; just before the body is written, the gate waits for the request's time (`gate.send`); once it was,
    a gate that has `written()` is told."""

    written = getattr(gate, "written", None)

    async def trace(event: str, info: dict) -> None:
        pacing.reports = True
        if event.endswith(_WRITE):
            await gate.send()
        elif written is not None and event.endswith(_WRITTEN):
            written()

    return trace


def estimate_tokens(body_bytes: int) -> int:
    """Prompt tokens of a request body of this many bytes (about four bytes a token, rounded up)."""
    return body_bytes // 4 + 1


class ItemGate:
    """What one item's requests go through: the shared limiter, and the permit of the request in flight."""

    __slots__ = ("limiter", "reserved", "requests", "seq", "sent", "at")

    def __init__(self, limiter: Any) -> None:
        self.limiter = limiter
        self.reserved = 0
        self.requests = 0
        self.seq: int | None = None
        self.at = 0.0
        """The time the permit of the request in flight is for."""
        self.sent: float | None = None
        """When it went (None: not yet)."""

    async def before(self, body_bytes: int, early: bool = False) -> None:
        """Before an attempt: wait for a permit and the request's estimated tokens, and for the request's time
        (`send`). `early`: return up to `AHEAD` before it; the transport calls `send` just before it writes
        (see `nbagent.budget.sending`)."""
        tokens = estimate_tokens(body_bytes) + int(self.limiter.output_per_request)
        self.seq, self.at = await self.limiter.acquire(tokens, ahead=AHEAD if early else 0.0)
        self.sent = None
        self.reserved += tokens
        self.requests += 1
        if not early:
            await self.send()

    async def send(self) -> None:
        """Wait for the request's time: its permit's, and one interval after the previous request's actual send
        (read again after each wake-up); then it goes, and the next is spaced from now. Once per attempt."""
        if self.sent is not None:
            return
        limiter = self.limiter
        self.sent = await wait_until(lambda: limiter.due(self.at), limiter.clock, limiter.sleep, limiter.spin)
        limiter.sent(self.sent)

    def after(self, status: int, headers: Mapping[str, str], retry_after: float | None) -> float | None:
        """After the status line: learn from it. On a 429 the limiter takes over the wait: the seconds until it
        lets a request of the batch go again (the HTTP layer then retries at once: its next `before` waits)."""
        reserved = self.reserved
        if status >= 400:  # a refused request used no tokens
            self.limiter.settle(self.reserved, 0)
            self.reserved = 0
        sent = self.at if self.sent is None else self.sent
        self.limiter.observe(status, headers, retry_after, seq=self.seq, sent=sent, reserved=reserved)
        if status != 429:
            return None
        return max(0.0, self.limiter.paused_until - self.limiter.clock())

    def settle(self, usage: Any) -> None:
        """The run reported a response's usage: settle the reservation with it."""
        if usage is None:
            used, output = self.reserved, None
        else:
            output = int(getattr(usage, "output_tokens", 0) or 0)
            used = int(getattr(usage, "input_tokens", 0) or 0) + output
        self.limiter.settle(self.reserved, used, output)
        self.reserved = 0


request_gate: ContextVar[ItemGate | None] = ContextVar("nbagent_request_gate", default=None)
"""Set around one batch item's run: the providers' HTTP layer sends through it."""
