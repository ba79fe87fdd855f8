"""Rate limits shared by many runs: requests and tokens per minute, and one pause for all on a 429.

    limit = RateLimit(requests_per_minute=500, tokens_per_minute=200_000)
    limiter = Limiter(limit)                  # one per batch (a cluster's is behind a coordinator)
    token = request_gate.set(ItemGate(limiter))   # the requests of one item's run pass through it
    ...
    request_gate.reset(token)

The providers' HTTP layer (`nbagent.providers._http`) looks up `request_gate` before each attempt: the gate
waits for a request permit and for the estimated tokens (the body's size, plus the output the batch has
seen so far per request), reads the rate-limit headers of the response, and on a 429 pauses the whole
limiter for the `retry-after` instead of each item sleeping on its own. The run settles the estimate with
the usage the provider reported (`ItemGate.settle`).

Reads: the response headers a provider sends (`x-ratelimit-*`, `anthropic-ratelimit-*`, `retry-after`).
Who could have written them: the provider, or anything on the path to the model's base URL. What stops
harm: a header can only slow a batch down, never speed it up: a limit learned from headers only ever
lowers the person's limit, a pause is capped at `MAX_PAUSE` seconds, and nothing in a header is run,
shown as markup or stored.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections import deque
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Mapping

__all__ = ["ItemGate", "Limiter", "MAX_PAUSE", "RateLimit", "estimate_tokens", "request_gate"]

MAX_PAUSE = 120.0
"""The longest pause a provider's `retry-after` or reset header can impose on a batch at once."""
BURST_SECONDS = 0.5
"""A limiter lets this many seconds' worth of requests (or tokens) go at once; then it paces."""


@dataclass(frozen=True)
class RateLimit:
    """What the provider allows this key: requests and tokens (prompt plus output) per minute.

    `RateLimit(requests_per_minute=500, tokens_per_minute=200_000)`; either may be None (not limited by
    nbagent, though still learned from the provider's headers where it sends them)."""

    requests_per_minute: float | None = None
    tokens_per_minute: float | None = None

    def __post_init__(self) -> None:
        for name in ("requests_per_minute", "tokens_per_minute"):
            value = getattr(self, name)
            if value is not None and not (isinstance(value, (int, float)) and value > 0):
                raise ValueError(f"{name} must be a positive number or None, not {value!r}")


def estimate_tokens(body_bytes: int) -> int:
    """Prompt tokens of a request body of this many bytes (about four bytes a token, rounded up)."""
    return body_bytes // 4 + 1


class _Bucket:
    """A token bucket: `rate` a second, up to `capacity` at once; `level` may go below 0 (a debt)."""

    __slots__ = ("rate", "capacity", "level", "stamp")

    def __init__(self, per_minute: float) -> None:
        self.rate = per_minute / 60.0
        self.capacity = max(1.0, self.rate * BURST_SECONDS)
        self.level = self.capacity
        self.stamp = time.monotonic()

    def refill(self, now: float) -> None:
        self.level = min(self.capacity, self.level + (now - self.stamp) * self.rate)
        self.stamp = now

    def wait_for(self, amount: float, now: float) -> float:
        """Seconds until `amount` is available (0: now). Amounts above the capacity wait for a full bucket."""
        self.refill(now)
        need = min(amount, self.capacity)
        return 0.0 if self.level >= need else (need - self.level) / self.rate

    def lower(self, per_minute: float) -> None:
        if per_minute / 60.0 < self.rate:
            self.set_rate(per_minute / 60.0)

    def set_rate(self, rate: float) -> None:
        self.refill(time.monotonic())
        self.rate = rate
        self.capacity = max(1.0, rate * BURST_SECONDS)
        self.level = min(self.level, self.capacity)


class Limiter:
    """The limits of one batch: every item's requests take permits here (first come, first served)."""

    def __init__(self, limit: RateLimit | None = None) -> None:
        limit = limit or RateLimit()
        self.limit = limit
        self.requests = _Bucket(limit.requests_per_minute) if limit.requests_per_minute else None
        self.tokens = _Bucket(limit.tokens_per_minute) if limit.tokens_per_minute else None
        self.paused_until = 0.0
        self.pauses = 0
        """How many times a 429 (or an exhausted budget in the headers) paused the whole batch."""
        self.rate_limited = 0
        """429 responses seen."""
        self.granted = 0
        self.tokens_reserved = 0
        self.output_per_request = 256.0
        """The running mean of output tokens per request (the estimate added to a request's prompt)."""
        self._lock: asyncio.Lock | None = None
        self._learning = False
        self._answered: deque[float] = deque(maxlen=4096)
        self._granted_at: deque[float] = deque(maxlen=4096)
        self._usage_log: list[tuple[float, int]] = []

    # -- taking permits --------------------------------------------------------------------------------
    async def acquire(self, tokens: int) -> None:
        """Wait for one request and `tokens` tokens (and the end of any pause), then take them."""
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:  # one waiter at a time: the order of arrival is the order of service
            while True:
                now = time.monotonic()
                wait = self.paused_until - now
                if self.requests is not None:
                    wait = max(wait, self.requests.wait_for(1, now))
                if self.tokens is not None:
                    wait = max(wait, self.tokens.wait_for(tokens, now))
                if wait <= 0:
                    break
                await asyncio.sleep(wait)
            if self.requests is not None:
                self.requests.level -= 1
            if self.tokens is not None:
                self.tokens.level -= tokens
            self.granted += 1
            self._granted_at.append(now)
            self.tokens_reserved += tokens

    def settle(self, reserved: int, used: int, output: int | None = None) -> None:
        """A request reserved `reserved` tokens and used `used`: the difference goes back (or is owed)."""
        if self.tokens is not None:
            self.tokens.level += reserved - used
        self.tokens_reserved += used - reserved
        if output is not None:
            self.output_per_request += (output - self.output_per_request) * 0.1
        self._usage_log.append((time.monotonic(), used))
        if len(self._usage_log) > 4096:
            del self._usage_log[:2048]

    def tokens_per_minute(self, window: float = 10.0) -> float:
        """Tokens used per minute over the last `window` seconds (from the reported usage)."""
        now = time.monotonic()
        used = sum(n for t, n in self._usage_log if now - t <= window)
        return used * 60.0 / window

    def pause(self, seconds: float) -> None:
        """No request of the batch starts for `seconds` (at most `MAX_PAUSE`)."""
        seconds = min(max(seconds, 0.0), MAX_PAUSE)
        until = time.monotonic() + seconds
        if until > self.paused_until:
            self.paused_until = until
            self.pauses += 1
        for bucket in (self.requests, self.tokens):
            if bucket is not None:
                bucket.refill(time.monotonic())
                bucket.level = min(bucket.level, 0.0)  # the provider says we are at its limit

    def observe(self, status: int, headers: Mapping[str, str], retry_after: float | None = None) -> None:
        """Learn from a response: its rate-limit headers lower the limits (never raise them)."""
        now = time.monotonic()
        if status == 429:
            self.rate_limited += 1
            if self.requests is None and not _header_number(headers, "requests", "limit"):
                # a limit nobody told us: pace at the rate the provider has been answering (a little under),
                # then feel for the limit: faster after each answer, slower after each 429
                recent = [t for t in self._answered if now - t <= 5.0]
                span = max(now - recent[0], 1.0) if len(recent) > 1 else 1.0
                sent = [t for t in self._granted_at if now - t <= 1.0]
                self.requests = _Bucket(max(1.0, 0.9 * len(recent) / span, 0.5 * len(sent)) * 60.0)
                self._learning = True
            elif self._learning and self.requests is not None:
                self.requests.set_rate(self.requests.rate * 0.7)
            self.pause(retry_after if retry_after is not None else 1.0)
        elif status < 400:
            self._answered.append(now)
            if self._learning and self.requests is not None:
                self.requests.set_rate(self.requests.rate * 1.05)
        for kind, bucket_name in (("requests", "requests"), ("tokens", "tokens")):
            limit = _header_number(headers, kind, "limit")
            remaining = _header_number(headers, kind, "remaining")
            bucket = getattr(self, bucket_name)
            if limit is not None and limit > 0:
                if bucket is None or (self._learning and kind == "requests"):
                    bucket = _Bucket(limit)
                    setattr(self, bucket_name, bucket)
                    if kind == "requests":
                        self._learning = False
                else:
                    bucket.lower(limit)
            if remaining is not None and bucket is not None:
                bucket.refill(time.monotonic())
                bucket.level = min(bucket.level, remaining)
                if remaining <= 0:
                    reset = _reset_seconds(headers, kind)
                    if reset:
                        self.pause(reset)

    def state(self) -> dict[str, Any]:
        """Numbers for a view: the limits in force, permits granted, 429s seen, pauses."""
        return {
            "requests_per_minute": self.requests.rate * 60 if self.requests else None,
            "tokens_per_minute_limit": self.tokens.rate * 60 if self.tokens else None,
            "tokens_per_minute": self.tokens_per_minute(),
            "granted": self.granted, "rate_limited": self.rate_limited, "pauses": self.pauses,
        }


class ItemGate:
    """What one item's requests go through: the shared limiter, and the estimate of the request in flight."""

    __slots__ = ("limiter", "reserved", "requests")

    def __init__(self, limiter: Any) -> None:
        self.limiter = limiter
        self.reserved = 0
        self.requests = 0

    async def before(self, body_bytes: int) -> None:
        """Before an attempt: wait for a permit and the request's estimated tokens."""
        tokens = estimate_tokens(body_bytes) + int(self.limiter.output_per_request)
        await self.limiter.acquire(tokens)
        self.reserved += tokens
        self.requests += 1

    def after(self, status: int, headers: Mapping[str, str], retry_after: float | None) -> bool:
        """After the status line: learn from it. True when the limiter took over the wait of a 429 (the HTTP
        layer then retries at once: its next `before` waits for the pause)."""
        if status >= 400:  # a refused request used no tokens
            self.limiter.settle(self.reserved, 0)
            self.reserved = 0
        self.limiter.observe(status, headers, retry_after)
        return status == 429

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

_PREFIXES = ("x-ratelimit-{what}-{kind}", "anthropic-ratelimit-{kind}-{what}", "x-ratelimit-{kind}-{what}")


def _header_number(headers: Mapping[str, str], kind: str, what: str) -> float | None:
    for pattern in _PREFIXES:
        raw = headers.get(pattern.format(kind=kind, what=what))
        if raw is not None:
            try:
                return float(raw.strip())
            except ValueError:
                return None
    return None


_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")


def _reset_seconds(headers: Mapping[str, str], kind: str) -> float | None:
    """`x-ratelimit-reset-requests: 6m0s` / `1.5s` / `20ms`, or anthropic's RFC 3339 time."""
    for pattern in _PREFIXES:
        raw = headers.get(pattern.format(kind=kind, what="reset"))
        if not raw:
            continue
        raw = raw.strip()
        parts = _DURATION.findall(raw)
        if parts and "".join(n + u for n, u in parts) == raw:
            scale = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
            return sum(float(n) * scale[u] for n, u in parts)
        try:
            from datetime import datetime

            return max(0.0, datetime.fromisoformat(raw.replace("Z", "+00:00")).timestamp() - time.time())
        except ValueError:
            return None
    return None
