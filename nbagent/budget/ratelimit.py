"""Rate limits shared by many runs: requests and tokens per minute, paced smoothly, learned from every 429.

    limit = RateLimit(requests_per_minute=500, tokens_per_minute=200_000)   # burst=None: paced smoothly
    limiter = Limiter(limit)                  # one per batch (a cluster's stays on the client's side)
    token = request_gate.set(ItemGate(limiter))   # the requests of one item's run pass through it
    ...
    request_gate.reset(token)

The providers' HTTP layer (`nbagent.providers._http`) looks up `request_gate` before each attempt: the gate
(`nbagent.budget.sending`) waits for a request permit and for the estimated tokens (the body's size, plus the
output the batch has seen so far per request), then for the request's time at the write (spaced from the
previous request's actual send: `Limiter.due`, `Limiter.sent`), then tells the limiter what the response said. The run settles the estimate with
the usage the provider reported (`ItemGate.settle`).

How it paces (one `_Pace` per kind, requests and tokens): a token bucket that holds one request's worth
(`burst=None`: requests go one interval apart, never two at once; until the first 429 one may go up to half an
interval early to make up for a wake-up that came late, `SLACK`), or `burst` seconds' worth when the person
allows it (or up to a second's when the provider's `RateLimit-Policy` header says its window allows one,
until the first 429). Providers enforce their per-minute limits over shorter windows (a second, a quarter
second), so a paced batch meets no 429 where a bursting one would.

How it learns: a 429 pauses the kind that ran out, only that kind and only as long as the provider says:
`retry-after-ms`, else its reset header for that kind (`x-ratelimit-reset-requests: 20ms`,
`anthropic-ratelimit-tokens-reset: <RFC 3339>`), else `retry-after` (the refused request is then retried with
the next permit: one retry, not a pause of the batch). It also backs the rate off, once per flight (429s for
requests sent before the last one counted do not count again), in one of two ways. At a known limit (the
person's, or the provider's header) while 429s are rare (under `DENSE` of the recent responses), they are
requests that jitter brought closer together than a provider that allows no burst accepts: each widens a
safety margin by `MARGIN_STEP` of the limit and each answer narrows it by `MARGIN_RECOVER` (so it settles
where such 429s are 0.5% of the responses, between `MARGIN_MIN` and `MARGIN_MAX`), never a cut whose loss
the next 429 would compound. When they are dense, or at a limit nobody told, the limit is lower than
thought (additive increase, multiplicative decrease, with a knee): the rate is cut by `DECREASE`, and each
answer wins some back, quickly up to just under the rate the 429 came at (the knee), then slowly past it,
faster the longer no 429 comes, never above the person's limit or the provider's, less the margin. A limit
the person did not give is learned: from the provider's limit headers, or at the first 429 from the rate it
had been answering, then felt for (2% more each answer past the knee, until the next 429).

Reads: the response headers a provider sends (read and bounded in `ratelimit_headers`). Who could have
written them: the provider, or anything on the path to the model's base URL; on a cluster, the workers'
reports of them. What stops harm: a header can only slow a batch down, and not forever: a limit learned from
headers only ever lowers the person's, a burst never raises the rate, one pause is at most `MAX_PAUSE`
seconds, and a 429 that says "retry at once" still cuts the rate (so a hostile answer cannot make a batch
hammer); nothing in a header is run, shown as markup or stored.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections import deque
from dataclasses import dataclass
from typing import Any, Mapping

from .ratelimit_headers import MAX_WAIT, Said, read_limits
from .sending import EPSILON, SPIN, ItemGate, estimate_tokens, request_gate

__all__ = ["DECREASE", "ItemGate", "Limiter", "MAX_PAUSE", "RateLimit", "estimate_tokens", "request_gate"]

MAX_PAUSE = MAX_WAIT
"""The longest pause a provider's `retry-after` or reset header can impose on a batch at once."""
DECREASE = 0.85
"""A 429 among dense ones (see `DENSE`), or at a limit nobody told, multiplies the rate of the kind that ran out by
this."""
SLACK = 0.5
"""Until the first 429, a request may go this share of an interval early, to make up for a wake-up that came
late (an event loop wakes up to a millisecond late, and a busy one later): never two at once, and the rate
is kept rather than lost to lateness. A provider that allows no burst refuses such a request: the 429 ends
the slack for the rest of the batch."""
MIN_RATE = 1.0 / 60.0
"""Per second: the slowest a run of 429s can make a kind (one request a minute)."""
_NEAR_KNEE = 0.97
_RECOVER_ANSWERS = 16
"""Answers to win the rate back to just under the knee after a cut."""
_PROBE = 0.00005
"""Past the knee: each answer adds this share of the knee, times (1 + answers since / `_PROBE_SPEEDUP`): slow
near it (where a provider that allows no burst refuses a request that jitter brought in early, the rate
settles a little under the knee with few 429s), faster the longer none comes (a knee left by a passing event
is outgrown: +17% in 1,000 answers, +60% in 2,000)."""
_PROBE_SPEEDUP = 200.0
_UNKNOWN_GROWTH = 1.02
"""Past the knee of a limit nobody told (no `requests_per_minute`, no limit header): each answer multiplies the
rate by this."""
DENSE = 0.25
"""At a known limit (the person's, or the provider's header), 429s are read by how often they come (a running
share of the last `_SHARE_OVER` answers and 429s): above this share, the limit is lower than thought and the
rate is cut by `DECREASE`; below it, they are requests that jitter brought closer together than the provider's
window allows (a provider that allows no burst refuses one that comes a hair early), and a small safety
margin is learned instead of a cut."""
_SHARE_OVER = 32
MARGIN_STEP = 0.01
"""A 429 below `DENSE` lowers the rate by this share of the limit (a safety margin learned, not a cut)..."""
MARGIN_RECOVER = 0.00005
"""...and each answer wins back this share of it: the margin widens while such 429s come more often than
one in `MARGIN_STEP / MARGIN_RECOVER` answers (0.5%), and narrows while they come less often."""
MARGIN_MAX = 0.1
"""The widest margin learned that way (such 429s then cost one retry each, and cut nothing)."""
MARGIN_MIN = 0.01
"""After a first 429 at a known limit, the rate stays at least this share under it."""


@dataclass(frozen=True)
class RateLimit:
    """What the provider allows this key: requests and tokens (prompt plus output) per minute.

    `RateLimit(requests_per_minute=500, tokens_per_minute=200_000)`; either may be None (not limited by
    nbagent, though still learned from the provider's headers and its 429s). `burst`: seconds' worth of
    requests (and tokens) allowed at once; None paces them smoothly unless the provider's headers allow more."""

    requests_per_minute: float | None = None
    tokens_per_minute: float | None = None
    burst: float | None = None

    def __post_init__(self) -> None:
        for name in ("requests_per_minute", "tokens_per_minute"):
            value = getattr(self, name)
            if value is not None and not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
                raise ValueError(f"{name} must be a positive number or None, not {value!r}")
        burst = self.burst
        if burst is not None and not (isinstance(burst, (int, float)) and math.isfinite(burst) and 0 <= burst <= 60):
            raise ValueError(f"burst is seconds' worth of requests allowed at once (0 to 60) or None, not {burst!r}")


class _Pace:
    """One kind (requests or tokens): a token bucket filling at `rate` a second up to `capacity`, whose `level`
    may go below 0 (a debt: a request larger than the bucket, or permits taken ahead of their time); nothing is
    granted before `not_before` (a pause); the rate backs off on a 429 and recovers (see the module docstring)."""

    __slots__ = ("rate", "ceiling", "burst", "header_burst", "slack", "level", "stamp", "not_before", "knee",
                 "cut_seq", "past_knee", "refused", "share", "margin", "anchor")

    def __init__(self, rate: float, *, ceiling: float | None, burst: float | None, slack: float = 0.0,
                 now: float | None = None) -> None:
        self.rate = max(rate, MIN_RATE)
        self.ceiling = ceiling
        """The most it may go, a second: the person's limit, lowered by the provider's (None: not known)."""
        self.burst = burst
        self.header_burst: float | None = None
        self.slack = slack
        """Room above the bucket, until the first 429, for the time a late wake-up lost (see `SLACK`)."""
        self.stamp = time.monotonic() if now is None else now
        self.level = self.bucket
        self.not_before = 0.0
        self.knee: float | None = None
        """The rate the last 429 came at."""
        self.cut_seq = 0
        """Permits numbered up to this were granted before the last cut."""
        self.past_knee = 0
        self.refused = False
        """A 429 for this kind came: no more slack, no burst the headers allowed."""
        self.share = 0.0
        """The running share of 429s among the last `_SHARE_OVER` responses."""
        self.margin = 0.0
        """The share of the limit kept in hand, learned from rare 429s (see `DENSE`)."""
        self.anchor = 0.0
        """Nothing before this: the previous request's actual send plus the least spacing (see `sent`)."""

    @property
    def bucket(self) -> float:
        """What may go at once: one (paced smoothly), or the burst's worth."""
        seconds = self.burst if self.burst is not None else (self.header_burst or 0.0)
        return max(1.0, self.rate * seconds)

    @property
    def capacity(self) -> float:
        return self.bucket + (0.0 if self.refused else self.slack)

    @property
    def top(self) -> float | None:
        """The most the rate grows to: the limit less the margin learned (None: no limit known)."""
        return None if self.ceiling is None else self.ceiling * (1.0 - self.margin)

    def refill(self, now: float) -> None:
        if now > self.stamp:
            self.level = min(self.capacity, self.level + (now - self.stamp) * self.rate)
            self.stamp = now

    def wait_for(self, amount: float, now: float) -> float:
        """Seconds until `amount` may be taken (0: now). An amount above the capacity waits for a full bucket."""
        self.refill(now)
        need = min(amount, self.capacity)
        wait = max(0.0, self.stamp - now) + (0.0 if self.level >= need else (need - self.level) / self.rate)
        return max(wait, self.not_before - now, self.anchor - now)

    def take(self, amount: float, at: float) -> None:
        """Take `amount` at `at` (now, or the future time a permit taken ahead is for)."""
        self.refill(at)
        self.level -= amount

    def sent(self, at: float) -> None:
        """A request went at `at` (its actual write): when paced smoothly, the next goes no sooner than one
        interval after it (less the slack, until the first 429), whatever the schedule said; a send that came
        late moves the next one with it rather than letting the two bunch."""
        if self.bucket <= 1.0:
            self.anchor = max(self.anchor, at + (1.0 - (self.capacity - self.bucket)) / self.rate)

    def set_rate(self, rate: float, now: float) -> None:
        self.refill(now)
        self.rate = max(rate, MIN_RATE)
        self.level = min(self.level, self.capacity)

    def lower_ceiling(self, per_second: float, now: float) -> None:
        if self.ceiling is None or per_second < self.ceiling:
            self.ceiling = per_second
        if self.rate > self.ceiling:
            self.set_rate(self.ceiling, now)

    def pause(self, until: float, now: float) -> None:
        """Nothing of this kind before `until` (at most `MAX_PAUSE` from now: every pause passes here); the
        provider said it is at its limit, so the bucket is empty."""
        self.refill(now)
        self.level = min(self.level, 0.0)
        if math.isfinite(until):
            self.not_before = max(self.not_before, min(until, now + MAX_PAUSE))

    def cut(self, seq: int | None, granted: int, now: float) -> bool:
        """A 429 for this kind: the rate backs off, once for the permits in flight when it came. At a known limit
        while 429s are rare (see `DENSE`) the margin widens by `MARGIN_STEP` of the limit; when they are not, or
        at a limit nobody told, the rate is cut by `DECREASE` (the limit is lower than thought)."""
        self.share += (1.0 - self.share) / _SHARE_OVER
        if seq is not None and seq <= self.cut_seq:
            return False
        self.refused = True
        self.header_burst = None  # a burst the headers allowed ends at the first 429
        self.cut_seq = granted
        if self.share < DENSE and self.ceiling is not None:
            if self.knee is None:  # at the limit: keep a little more in hand
                self.margin = min(MARGIN_MAX, max(self.margin + MARGIN_STEP, MARGIN_MIN))
                self.set_rate(min(self.rate, self.ceiling * (1.0 - self.margin)), now)
            else:  # under a limit learned lower than thought: the knee comes down a step
                self.knee = self.rate
                self.set_rate(self.rate * (1.0 - MARGIN_STEP), now)
            return True
        self.margin = max(self.margin, MARGIN_MIN if self.ceiling is not None else 0.0)
        self.knee = self.rate
        self.past_knee = 0
        self.set_rate(self.rate * DECREASE, now)
        return True

    def grow(self, seq: int | None, now: float) -> None:
        """An answer: win back some rate (see the module docstring)."""
        if seq is not None and seq <= self.cut_seq:
            return  # sent before the last cut: it says nothing about the rate since
        self.share -= self.share / _SHARE_OVER
        if self.margin > MARGIN_MIN:
            self.margin = max(MARGIN_MIN, self.margin - MARGIN_RECOVER)
        top = self.top
        if top is not None and self.rate >= top:
            self.knee = None  # back at the limit: what cut it has passed
            return
        knee = self.knee
        if knee is None:  # no cut yet: go at the limit (less the margin learned)
            rate = top if top is not None else self.rate
        elif self.rate < knee * _NEAR_KNEE:
            rate = min(self.rate + knee * (1 - DECREASE) / _RECOVER_ANSWERS, knee * _NEAR_KNEE)
        elif self.ceiling is None:  # a limit nobody told: feel for it faster
            rate = self.rate * _UNKNOWN_GROWTH
        else:
            self.past_knee += 1
            rate = self.rate + knee * _PROBE * (1 + self.past_knee / _PROBE_SPEEDUP)
        if top is not None:
            rate = min(rate, top)
        self.set_rate(rate, now)


class Limiter:
    """The limits of one batch: every item's requests take permits here (first come, first served)."""

    def __init__(self, limit: RateLimit | None = None, *, clock: Any = time.monotonic, sleep: Any = asyncio.sleep,
                 spin: float = SPIN) -> None:
        limit = limit or RateLimit()
        self.limit = limit
        self.clock, self.sleep, self.spin = clock, sleep, spin
        """The monotonic clock it reads, how it sleeps and how long it spins at the end of a request's wait (a test
        gives its own clock and sleep, and no spin)."""
        self.requests = self._pace(limit.requests_per_minute, SLACK)
        self.tokens = self._pace(limit.tokens_per_minute)
        self.pauses = 0
        """How many times a 429 (or a budget the headers said was used up) paused a kind."""
        self.rate_limited = 0
        """429 responses seen."""
        self.cuts = 0
        """How many times a 429 cut a rate."""
        self.granted = 0
        """Permits granted (each request attempt takes one); a permit's number is its place in this count."""
        self.tokens_reserved = 0
        self.output_per_request = 256.0
        """The running mean of output tokens per request (the estimate added to a request's prompt)."""
        self._lock: asyncio.Lock | None = None
        self._answered: deque[float] = deque(maxlen=4096)
        self._granted_at: deque[float] = deque(maxlen=4096)
        self._usage_log: deque[tuple[float, int]] = deque(maxlen=4096)

    def _pace(self, per_minute: float | None, slack: float = 0.0) -> _Pace | None:
        if not per_minute:
            return None
        return _Pace(per_minute / 60.0, ceiling=per_minute / 60.0, burst=self.limit.burst, slack=slack,
                     now=self.clock())

    @property
    def paused_until(self) -> float:
        """The monotonic time before which some kind grants nothing (0: none paused)."""
        return max((p.not_before for p in (self.requests, self.tokens) if p is not None), default=0.0)

    # -- taking permits --------------------------------------------------------------------------------
    async def acquire(self, tokens: int, ahead: float = 0.0) -> tuple[int, float]:
        """Wait for one request and `tokens` tokens (and the end of any pause), take them, and return the permit's
        number and the monotonic time it is for. `ahead`: a permit may be taken up to this many seconds before
        its time (a cluster's, which travels to a worker first); its holder waits for the time itself."""
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:  # one waiter at a time: the order of arrival is the order of service
            while True:
                now = self.clock()
                wait = 0.0
                if self.requests is not None:
                    wait = max(wait, self.requests.wait_for(1, now))
                if self.tokens is not None:
                    wait = max(wait, self.tokens.wait_for(tokens, now))
                if wait <= ahead + EPSILON:
                    break
                await self.sleep(wait - ahead)
            at = now + wait
            if self.requests is not None:
                self.requests.take(1, at)
            if self.tokens is not None:
                self.tokens.take(tokens, at)
            self.granted += 1
            self._granted_at.append(at)
            self.tokens_reserved += tokens
            return self.granted, at

    def settle(self, reserved: int, used: int, output: int | None = None) -> None:
        """A request reserved `reserved` tokens and used `used`: the difference goes back (or is owed)."""
        if self.tokens is not None:
            self.tokens.level += reserved - used
        self.tokens_reserved += used - reserved
        if output is not None:
            self.output_per_request += (output - self.output_per_request) * 0.1
        self._usage_log.append((self.clock(), used))

    def tokens_per_minute(self, window: float = 10.0) -> float:
        """Tokens used per minute over the last `window` seconds (from the reported usage)."""
        now = self.clock()
        used = sum(n for t, n in self._usage_log if now - t <= window)
        return used * 60.0 / window

    def pause(self, seconds: float) -> None:
        """No request of the batch starts for `seconds` (at most `MAX_PAUSE`)."""
        seconds = min(max(seconds, 0.0), MAX_PAUSE) if math.isfinite(seconds) else MAX_PAUSE
        now = self.clock()
        if self.requests is None:
            self.requests = _Pace(self._answer_rate(now), ceiling=None, burst=self.limit.burst, now=now)
        for pace in (self.requests, self.tokens):
            if pace is not None:
                pace.pause(now + seconds, now)
        self.pauses += 1

    def due(self, at: float) -> float:
        """When a request whose permit is for `at` may go: not before the previous one's actual send plus the least
        spacing (`_Pace.sent`), which a permit taken ahead did not know of."""
        return at if self.requests is None else max(at, self.requests.anchor)

    def sent(self, at: float) -> None:
        """A request went at `at` (by `clock`): the next is spaced from it."""
        if self.requests is not None:
            self.requests.sent(at)

    def leave_gap(self, seconds: float) -> None:
        """Leave `seconds` of the request pace unused: the next permit is that much later (a cluster's, between
        two blocks of permits that different workers may hold: nbagent.batch.dask_permits)."""
        pace = self.requests
        if pace is not None and seconds > 0:
            pace.level -= seconds * pace.rate

    def spacing(self) -> float:
        """The least time between two requests that went late (a cluster's permits that waited): one interval
        when paced smoothly, 0 when requests are not limited or a burst is allowed."""
        pace = self.requests
        return 0.0 if pace is None or pace.bucket > 1.0 else min(1.0, 1.0 / pace.rate)

    # -- learning --------------------------------------------------------------------------------------
    def observe(self, status: int, headers: Mapping[str, str], retry_after: float | None = None, *,
                seq: int | None = None, sent: float | None = None, reserved: float | None = None) -> None:
        """Learn from a response to permit `seq`, sent at `sent` (monotonic) with `reserved` tokens: its headers
        lower the limits (never raise them); a 429 cuts and pauses the kind that ran out; an answer wins rate back."""
        now = self.clock()
        said = read_limits(headers)
        if said.retry_after is None and retry_after is not None and math.isfinite(retry_after):
            said.retry_after = min(max(retry_after, 0.0), MAX_PAUSE)
        self._learn_limits(said, status, seq, now if sent is None else min(sent, now), now)
        if status == 429:
            self.rate_limited += 1
            self._refused(said, seq, reserved, now)
        elif status < 400:
            self._answered.append(now)
            for pace in (self.requests, self.tokens):
                if pace is not None:
                    pace.grow(seq, now)

    def _learn_limits(self, said: Said, status: int, seq: int | None, sent: float, now: float) -> None:
        for kind in ("requests", "tokens"):
            pace: _Pace | None = getattr(self, kind)
            limit = said.limit[kind]
            if limit is not None:
                if pace is None:
                    pace = _Pace(limit / 60.0, ceiling=limit / 60.0, burst=self.limit.burst,
                                 slack=SLACK if kind == "requests" else 0.0, now=now)
                    setattr(self, kind, pace)
                else:
                    pace.lower_ceiling(limit / 60.0, now)
            if pace is None:
                continue
            if said.burst is not None and self.limit.burst is None and pace.knee is None:
                pace.header_burst = said.burst
            remaining = said.remaining[kind]
            if status == 429:
                continue  # a refusal's budget is `_refused`'s
            if remaining is not None and seq is not None:
                # what the provider had left then, less what was granted since, plus what it refilled since
                since = (self.granted - seq) if kind == "requests" else 0.0
                pace.refill(now)
                pace.level = min(pace.level, remaining - since + (now - sent) * (pace.ceiling or pace.rate))
            if remaining is not None and remaining < 1 and said.reset[kind] is not None and limit:
                # used up when it was admitted: the next one is possible when one more has refilled
                one = 60.0 / limit if kind == "requests" else max(1.0, self.output_per_request) * 60.0 / limit
                pace.pause(sent + min(said.reset[kind], one), now)  # type: ignore[type-var]

    def _refused(self, said: Said, seq: int | None, reserved: float | None, now: float) -> None:
        out = said.exhausted(reserved)
        kinds = [kind for kind in out if getattr(self, kind) is not None]
        if not kinds:  # the provider did not say which (or of a kind not limited here): the requests
            kinds = ["requests"]
            if self.requests is None:  # a limit nobody told: learned now
                self.requests = _Pace(self._answer_rate(now), ceiling=None, burst=self.limit.burst, now=now)
        wait = said.wait(out or kinds)
        for kind in kinds:
            pace: _Pace = getattr(self, kind)
            if pace.cut(seq, self.granted, now):
                self.cuts += 1
            pause = wait if wait is not None else 1.0 / pace.rate if kind == "requests" else 1.0
            pace.pause(now + pause, now)
        self.pauses += 1

    def _answer_rate(self, now: float) -> float:
        """A rate for a limit nobody told: a little under the rate the provider has been answering."""
        recent = [t for t in self._answered if now - t <= 5.0]
        span = max(now - recent[0], 1.0) if len(recent) > 1 else 1.0
        sent = [t for t in self._granted_at if now - t <= 1.0]
        return max(1.0, 0.9 * len(recent) / span, 0.5 * len(sent))

    def state(self) -> dict[str, Any]:
        """Numbers for a view: the limits in force, permits granted, 429s seen, pauses."""
        return {
            "requests_per_minute": self.requests.rate * 60 if self.requests else None,
            "tokens_per_minute_limit": self.tokens.rate * 60 if self.tokens else None,
            "tokens_per_minute": self.tokens_per_minute(),
            "granted": self.granted, "rate_limited": self.rate_limited, "pauses": self.pauses, "cuts": self.cuts,
        }
