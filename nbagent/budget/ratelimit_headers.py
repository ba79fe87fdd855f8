"""What a provider's response says about its rate limits, read from its headers: `said = read_limits(headers)`.

    said.limit["requests"]       the limit per minute (`x-ratelimit-limit-requests`, `anthropic-ratelimit-...`)
    said.remaining["tokens"]     what is left of it when the request was admitted
    said.reset["requests"]       seconds until that budget is replenished (`20ms`, `1.5s`, `6m0s`, an RFC 3339 time)
    said.retry_ms                seconds from `retry-after-ms` (precise)
    said.retry_after             seconds from `retry-after` (whole seconds, or an HTTP date)
    said.burst                   seconds' worth allowed at once, from an IETF `RateLimit-Policy` (`q=100;w=1`)

OpenAI sends `x-ratelimit-{limit,remaining,reset}-{requests,tokens}` (the reset as a Go duration, `20ms`),
Anthropic `anthropic-ratelimit-{requests,tokens}-{limit,remaining,reset}` (the reset as an RFC 3339 time),
Azure `retry-after-ms`; every provider `retry-after`. A header that is missing or cannot be read is None.

Reads: the response headers of the model's base URL. Who could have written them: the provider, or anything on
the path to it (a proxy, a gateway, a server at a base URL the person typed). What stops harm: every value is
bounded here, before the limiter sees it: a number must be finite and not negative, a duration is at most
`MAX_WAIT` seconds (a reset in the year 3000 is `MAX_WAIT`), a burst at most `MAX_HEADER_BURST` seconds, and a
value longer than `MAX_VALUE` characters is not read at all. The limiter then only lets them slow a batch
down (a limit only lowers the person's, a burst never raises the rate); nothing here is run, shown or stored.
"""

from __future__ import annotations

import email.utils
import math
import re
import time
from dataclasses import dataclass, field
from datetime import datetime
from typing import Mapping

__all__ = ["KINDS", "MAX_HEADER_BURST", "MAX_VALUE", "MAX_WAIT", "Said", "parse_duration", "read_limits"]

KINDS = ("requests", "tokens")
MAX_WAIT = 120.0
"""The longest wait a header can ask for at once (a longer one is read as this)."""
MAX_HEADER_BURST = 1.0
"""The most seconds' worth of requests a provider's `RateLimit-Policy` can let go at once."""
MAX_VALUE = 64
"""Header values longer than this are not read."""

_NAMES = ("x-ratelimit-{what}-{kind}", "anthropic-ratelimit-{kind}-{what}", "x-ratelimit-{kind}-{what}")
_FAMILIES = {kind: [tuple(p.format(kind=kind, what=w) for w in ("limit", "remaining", "reset")) for p in _NAMES]
             for kind in ("requests", "tokens")}
"""By kind, each provider's (limit, remaining, reset) header names."""
_PREFIXES = ("x-ratelimit-", "anthropic-ratelimit-")
_DURATION = re.compile(r"(\d{1,12}(?:\.\d{1,9})?)(ms|us|µs|ns|h|m|s)")
_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_POLICY_WINDOW = re.compile(r"(?:^|;)\s*w\s*=\s*(\d{1,9}(?:\.\d{1,6})?)\s*(?:;|$)")


@dataclass
class Said:
    """What one response's headers said (None: not said, or not readable)."""

    limit: dict[str, float | None] = field(default_factory=lambda: dict.fromkeys(KINDS))
    """The provider's limit per minute, by kind."""
    remaining: dict[str, float | None] = field(default_factory=lambda: dict.fromkeys(KINDS))
    """What was left of it when the request was admitted (or refused)."""
    reset: dict[str, float | None] = field(default_factory=lambda: dict.fromkeys(KINDS))
    """Seconds until that budget is replenished, at most `MAX_WAIT`."""
    retry_ms: float | None = None
    """`retry-after-ms`, in seconds."""
    retry_after: float | None = None
    """`retry-after` (whole seconds, or an HTTP date), in seconds."""
    burst: float | None = None
    """Seconds' worth of requests the provider's `RateLimit-Policy` allows at once (at most `MAX_HEADER_BURST`)."""

    def exhausted(self, reserved: float | None = None) -> list[str]:
        """The kinds the provider said are used up: no request left, or fewer tokens than the request asked."""
        out = []
        for kind in KINDS:
            left = self.remaining[kind]
            if left is not None and (left < 1 if kind == "requests" else left < max(1.0, reserved or 1.0)):
                out.append(kind)
        return out

    def wait(self, kinds: list[str]) -> float | None:
        """Seconds until a refused request may go again, the most precise said: `retry-after-ms`, else the reset
        of the kinds used up (the longest of them), else `retry-after`; never longer than any of them says."""
        resets = [self.reset[k] for k in kinds if self.reset[k] is not None]
        precise = self.retry_ms if self.retry_ms is not None else (max(resets) if resets else None)  # type: ignore[type-var]
        said = [v for v in (precise, self.retry_after) if v is not None]
        return min(said) if said else None


def _value(headers: Mapping[str, str], name: str) -> str | None:
    raw = headers.get(name)
    if raw is None or len(raw) > MAX_VALUE:
        return None
    raw = raw.strip()
    return raw or None


def _number(raw: str | None) -> float | None:
    if raw is None:
        return None
    try:
        value = float(raw)
    except ValueError:
        return None
    return value if math.isfinite(value) and value >= 0 else None


def parse_duration(raw: str | None, now: float | None = None) -> float | None:
    """Seconds from `20ms`, `1.5s`, `6m0s`, `1h2m3.5s`, a plain number of seconds, or an RFC 3339 time (from
    `now`, the wall clock); bounded to 0..`MAX_WAIT`; None when it cannot be read."""
    if raw is None or len(raw) > MAX_VALUE:
        return None
    raw = raw.strip()
    seconds = _number(raw)
    if seconds is None:
        parts = _DURATION.findall(raw)
        if parts and "".join(n + u for n, u in parts) == raw:
            seconds = sum(float(n) * _UNITS[u] for n, u in parts)
        else:
            try:
                when = datetime.fromisoformat(raw.replace("Z", "+00:00").replace("z", "+00:00"))
            except ValueError:
                return None
            if when.tzinfo is None:
                return None  # a time without its zone says nothing certain
            seconds = when.timestamp() - (time.time() if now is None else now)
    if not math.isfinite(seconds):
        return None
    return min(max(seconds, 0.0), MAX_WAIT)


def _retry_after(raw: str | None, now: float | None) -> float | None:
    seconds = _number(raw)
    if seconds is not None:
        return min(seconds, MAX_WAIT)
    if raw is None:
        return None
    try:
        when = email.utils.parsedate_to_datetime(raw)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if when is None:
        return None
    return min(max(0.0, when.timestamp() - (time.time() if now is None else now)), MAX_WAIT)


def read_limits(headers: Mapping[str, str], now: float | None = None) -> Said:
    """What `headers` (a case-insensitive mapping, as httpx gives, or a dict of lower-case names) say."""
    if not isinstance(headers, dict):  # one pass over them, then lookups (httpx's `get` scans every header)
        headers = {k.lower(): v for k, v in headers.items()}
    said = Said()
    if any(name.startswith(_PREFIXES) for name in headers):
        for kind in KINDS:
            for names in _FAMILIES[kind]:
                if not any(name in headers for name in names):
                    continue
                limit_name, remaining_name, reset_name = names
                limit = _number(_value(headers, limit_name))
                said.limit[kind] = limit if limit else None
                said.remaining[kind] = _number(_value(headers, remaining_name))
                said.reset[kind] = parse_duration(_value(headers, reset_name), now)
                break
    ms = _number(_value(headers, "retry-after-ms"))
    said.retry_ms = min(ms / 1000.0, MAX_WAIT) if ms is not None else None
    said.retry_after = _retry_after(_value(headers, "retry-after"), now)
    policy = headers.get("ratelimit-policy")
    if policy is not None and len(policy) <= 4 * MAX_VALUE:
        windows = [_number(m.group(1)) for item in policy.split(",") for m in [_POLICY_WINDOW.search(item)] if m]
        windows = [w for w in windows if w]
        if windows:
            said.burst = min(min(windows), MAX_HEADER_BURST)  # type: ignore[type-var]
    return said
