"""The batch limiter on its own (nbagent.budget.ratelimit): how it spaces permits, what it learns from a 429
and from the providers' headers. Permits are taken with `ahead=` (no sleeping): each one's time is what the
limiter computed, so the spacing is checked exactly, with no clock in the test (or a fake one the test moves,
against a simulated provider that allows no burst)."""

from __future__ import annotations

import time
from datetime import datetime, timedelta, timezone

import pytest

from nbagent import RateLimit
from nbagent.budget.ratelimit import (DECREASE, DENSE, MARGIN_MAX, MARGIN_MIN, MARGIN_RECOVER, MARGIN_STEP, SLACK,
                                      Limiter)
from nbagent.budget.ratelimit_headers import MAX_HEADER_BURST, parse_duration, read_limits

FAR = 1e6  # take permits this far ahead: the limiter only computes their times


async def permit_times(limiter: Limiter, n: int, tokens: int = 1) -> list[float]:
    return [(await limiter.acquire(tokens, ahead=FAR))[1] for _ in range(n)]


def gaps(times: list[float]) -> list[float]:
    return [b - a for a, b in zip(times, times[1:])]


class FakeClock:
    """A monotonic clock the test moves."""

    def __init__(self, t: float = 1000.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


class StrictProvider:
    """A provider that allows no burst (a bucket of one request, as tests/providers/ratelimited.py's window
    "none"): a request is admitted only if a whole permit has refilled since the last one admitted."""

    def __init__(self, per_second: float) -> None:
        self.rate, self.level, self.stamp = per_second, 1.0, 0.0

    def admit(self, at: float) -> float:
        """0 when admitted, else the seconds until it would have been."""
        self.level = min(1.0, self.level + max(0.0, at - self.stamp) * self.rate)
        self.stamp = max(self.stamp, at)
        if self.level >= 1.0:
            self.level -= 1.0
            return 0.0
        return (1.0 - self.level) / self.rate


async def simulate(limiter: Limiter, clock: FakeClock, provider: StrictProvider, n: int, jitter) -> dict:
    """`n` requests, one after another, each sent at its permit's time plus `jitter(i)` seconds (the delays on
    the way); every 429 answered with OpenAI's headers and retried: how many 429s, and the time it took."""
    start, refused, i = clock.t, 0, 0
    done = 0
    while done < n:
        seq, at = await limiter.acquire(1, ahead=FAR)
        clock.t = max(clock.t, at)
        arrival = at + jitter(i)
        i += 1
        wait = provider.admit(arrival)
        clock.t = max(clock.t, arrival)
        if wait:
            refused += 1
            limiter.observe(429, {"x-ratelimit-limit-requests": "3000", "x-ratelimit-remaining-requests": "0",
                                  "x-ratelimit-reset-requests": f"{max(1, round(wait * 1000))}ms",
                                  "retry-after": "1"}, seq=seq, sent=at)
        else:
            done += 1
            limiter.observe(200, {}, seq=seq, sent=at)
    return {"refused": refused, "rate": n / (clock.t - start)}


async def test_requests_are_paced_one_interval_apart_by_default():
    times = await permit_times(Limiter(RateLimit(requests_per_minute=600)), 30)
    assert times[1] - times[0] == pytest.approx(0.1, abs=1e-3)  # (less what refilled while the test began)
    assert all(g == pytest.approx(0.1, abs=1e-9) for g in gaps(times[1:]))  # never two at once


async def test_a_late_wake_up_is_made_up_for_until_the_first_429():
    """Half an interval of slack: a permit after a pause of 1.3 intervals may come 0.3 early (the rate is kept
    when a wake-up was late), never two at once; the first 429 ends it."""
    clock = FakeClock()
    limiter = Limiter(RateLimit(requests_per_minute=600), clock=clock)
    seq, at = await limiter.acquire(1, ahead=FAR)
    pace = limiter.requests
    pace.refill(at + 0.13)  # the next request comes 0.13 s later (a late wake-up)
    assert pace.level == pytest.approx(1.3)
    assert pace.wait_for(1, at + 0.13) == 0.0
    pace.take(1, at + 0.13)
    assert pace.wait_for(1, at + 0.13) == pytest.approx(0.07)  # 0.07 s after: the schedule is kept
    assert pace.capacity == 1.0 + SLACK
    limiter.observe(429, {"retry-after-ms": "5"}, seq=seq + 1, sent=at)
    assert pace.capacity == 1.0  # a provider that refuses early requests: no more slack


async def test_a_burst_only_when_the_person_allows_one():
    times = await permit_times(Limiter(RateLimit(requests_per_minute=600, burst=1.0)), 30)
    assert times[9] - times[0] < 0.01  # a second's worth (10) at once
    assert times[10] - times[9] == pytest.approx(0.1, abs=1e-3)  # then paced (less what refilled meanwhile)
    assert all(g == pytest.approx(0.1, abs=1e-9) for g in gaps(times[10:]))
    with pytest.raises(ValueError, match="burst"):
        RateLimit(requests_per_minute=600, burst=-1)


async def test_tokens_are_paced_smoothly_too():
    limiter = Limiter(RateLimit(tokens_per_minute=60_000))  # 1,000 a second
    times = await permit_times(limiter, 10, tokens=500)
    assert all(g == pytest.approx(0.5, abs=1e-9) for g in gaps(times))


async def test_a_provider_policy_header_allows_a_bounded_burst_until_the_first_429():
    limiter = Limiter(RateLimit(requests_per_minute=600))
    seq, at = await limiter.acquire(1)
    limiter.observe(200, {"ratelimit-policy": '"burst";q=600;w=3600'}, seq=seq, sent=at)
    assert limiter.requests.header_burst == MAX_HEADER_BURST  # an hour's window allows a second's worth
    limiter.observe(429, {"retry-after-ms": "10"}, seq=seq + 1, sent=at)
    assert limiter.requests.header_burst is None and limiter.requests.capacity == 1.0
    chosen = Limiter(RateLimit(requests_per_minute=600, burst=0))
    chosen.observe(200, {"ratelimit-policy": "10;w=1"})
    assert chosen.requests.bucket == 1.0  # the person's choice stands


async def test_a_429_pauses_only_as_long_as_the_precise_reset_says_not_the_rounded_retry_after():
    limiter = Limiter(RateLimit(requests_per_minute=3000))
    seq, at = await limiter.acquire(1)
    before = time.monotonic()
    limiter.observe(429, {"x-ratelimit-limit-requests": "3000", "x-ratelimit-remaining-requests": "0",
                          "x-ratelimit-reset-requests": "20ms", "retry-after": "1"}, seq=seq, sent=at)
    after = time.monotonic()
    assert before + 0.02 <= limiter.requests.not_before <= after + 0.02
    assert limiter.requests.rate == pytest.approx(50 * (1 - MARGIN_MIN))  # at the limit, rare: a margin
    assert limiter.rate_limited == 1 and limiter.cuts == 1


async def test_retry_after_ms_and_anthropic_resets_are_read_precisely():
    said = read_limits({"retry-after-ms": "150", "retry-after": "1"})
    assert said.wait([]) == pytest.approx(0.15)
    when = (datetime.now(timezone.utc) + timedelta(milliseconds=500)).isoformat().replace("+00:00", "Z")
    said = read_limits({"anthropic-ratelimit-requests-limit": "50", "anthropic-ratelimit-requests-remaining": "0",
                        "anthropic-ratelimit-requests-reset": when, "retry-after": "1"})
    assert said.exhausted() == ["requests"]
    assert said.wait(["requests"]) == pytest.approx(0.5, abs=0.05)
    assert said.limit["requests"] == 50


@pytest.mark.parametrize("raw, seconds", [("20ms", 0.02), ("1.5s", 1.5), ("1m30s", 90.0), ("250us", 0.00025),
                                          ("0.75", 0.75), ("6m0s", 120.0), ("2h", 120.0)])
def test_reset_durations(raw, seconds):
    assert parse_duration(raw) == pytest.approx(seconds)


async def test_a_429_for_tokens_pauses_the_tokens_not_the_requests():
    limiter = Limiter(RateLimit(requests_per_minute=3000, tokens_per_minute=60_000))
    seq, at = await limiter.acquire(500)
    before = time.monotonic()
    limiter.observe(429, {"x-ratelimit-remaining-requests": "2990", "x-ratelimit-remaining-tokens": "120",
                          "x-ratelimit-reset-tokens": "300ms", "retry-after": "1"}, seq=seq, sent=at, reserved=500)
    assert limiter.tokens.not_before >= before + 0.3
    assert limiter.requests.not_before == 0.0 and limiter.requests.rate == pytest.approx(50.0)
    assert limiter.tokens.rate == pytest.approx(1000 * (1 - MARGIN_MIN))


async def test_a_flight_of_429s_cuts_once_and_answers_win_the_rate_back_up_to_the_limit():
    limiter = Limiter(RateLimit(requests_per_minute=3000))
    limiter.requests.share = DENSE  # 429s have been coming densely: the limit is lower than the person said
    flight = [await limiter.acquire(1, ahead=FAR) for _ in range(4)]
    for seq, at in flight:  # four requests in flight, all refused: one cut
        limiter.observe(429, {"retry-after-ms": "5"}, seq=seq, sent=at)
    assert limiter.cuts == 1 and limiter.requests.rate == pytest.approx(50 * DECREASE)
    seq, at = await limiter.acquire(1, ahead=FAR)
    limiter.observe(429, {"retry-after-ms": "5"}, seq=seq, sent=at)  # sent after the cut: it counts
    assert limiter.cuts == 2 and limiter.requests.rate == pytest.approx(50 * DECREASE ** 2)
    knee = limiter.requests.knee
    for _ in range(20):
        seq, at = await limiter.acquire(1, ahead=FAR)
        limiter.observe(200, {}, seq=seq, sent=at)
    assert knee * 0.97 <= limiter.requests.rate < knee  # quickly back near the rate the 429 came at
    for _ in range(2000):
        seq, at = await limiter.acquire(1, ahead=FAR)
        limiter.observe(200, {}, seq=seq, sent=at)
    top = 50.0 * (1 - MARGIN_MIN)
    assert limiter.requests.rate == pytest.approx(top)  # then up to the person's limit less a margin, never past
    assert limiter.requests.knee is None  # the cut has passed


async def test_a_limit_nobody_told_is_learned_from_the_headers_or_the_429s():
    limiter = Limiter()
    limiter.observe(200, {"x-ratelimit-limit-requests": "1200", "x-ratelimit-remaining-requests": "1100"})
    assert limiter.requests.rate == pytest.approx(20.0)
    unknown = Limiter()
    seq, at = await unknown.acquire(1)
    unknown.observe(429, {"retry-after": "1"}, seq=seq, sent=at)
    assert unknown.requests is not None and unknown.requests.not_before > time.monotonic() + 0.5


async def test_against_a_provider_that_allows_no_burst_jitter_costs_a_retry_not_the_rate():
    """Every request delayed on its way by up to 0.6 ms at random (3% of an interval): the 429s that jitter
    brings teach a margin of a few percent, not a cut per 429, and stay under 1%."""
    import random

    clock = FakeClock()
    limiter = Limiter(RateLimit(requests_per_minute=3000), clock=clock)
    rng = random.Random(7)
    out = await simulate(limiter, clock, StrictProvider(50.0), 3000, lambda i: rng.uniform(0.0, 0.0006))
    assert out["refused"] < 30  # under 1% of the requests
    assert out["rate"] >= 0.95 * 50
    pace = limiter.requests
    assert pace.knee is None and limiter.cuts == out["refused"]
    assert MARGIN_MIN <= pace.margin <= MARGIN_MAX and pace.rate == pytest.approx(50 * (1 - pace.margin))


async def test_a_provider_that_is_early_only_once_in_a_while_leaves_the_rate_at_the_limit():
    """Spacing that the way shortens by more than the margin once in 500 requests: each of those 429s widens the
    margin a step, the answers between narrow it back."""
    clock = FakeClock()
    limiter = Limiter(RateLimit(requests_per_minute=3000), clock=clock)
    out = await simulate(limiter, clock, StrictProvider(50.0), 2000, lambda i: 0.003 if i % 500 == 250 else 0.0)
    assert 1 <= out["refused"] <= 8 and out["rate"] >= 0.97 * 50
    assert limiter.requests.margin == pytest.approx(MARGIN_MIN)
    assert limiter.requests.rate == pytest.approx(50 * (1 - MARGIN_MIN))


async def test_a_limit_lower_than_the_person_said_is_found_by_cuts():
    """The person said 3,000 a minute; the provider allows half: 429s come densely, so the rate is cut (not
    merely given a margin) to under the provider's, and then few requests are refused."""
    clock = FakeClock()
    limiter = Limiter(RateLimit(requests_per_minute=3000), clock=clock)
    first = await simulate(limiter, clock, provider := StrictProvider(25.0), 200, lambda i: 0.0)
    assert limiter.requests.rate <= 25.0 and limiter.cuts < first["refused"] + 1
    after = await simulate(limiter, clock, provider, 1000, lambda i: 0.0)
    assert after["refused"] <= 30 and after["rate"] >= 0.9 * 25


async def test_isolated_429s_widen_the_margin_a_step_each_and_answers_narrow_it():
    clock = FakeClock()
    limiter = Limiter(RateLimit(requests_per_minute=3000), clock=clock)
    pace = limiter.requests
    expected = 0.0
    for _ in range(25):  # a 429 every 41 requests: 2.4%, above the 0.5% the margin is balanced at
        seq, at = await limiter.acquire(1, ahead=FAR)
        limiter.observe(429, {"x-ratelimit-reset-requests": "3ms"}, seq=seq, sent=at)
        expected = min(MARGIN_MAX, max(MARGIN_MIN, expected + MARGIN_STEP))
        assert pace.knee is None and pace.margin == pytest.approx(expected)  # a margin, never a cut
        assert pace.rate == pytest.approx(50 * (1 - expected))
        for _ in range(40):
            seq, at = await limiter.acquire(1, ahead=FAR)
            clock.t = at
            limiter.observe(200, {}, seq=seq, sent=at)
        expected = max(MARGIN_MIN, expected - 40 * MARGIN_RECOVER)
        assert pace.margin == pytest.approx(expected) and pace.rate == pytest.approx(50 * (1 - expected))
    assert expected == pytest.approx(MARGIN_MAX - 40 * MARGIN_RECOVER)  # widened to the most, and held there
    for _ in range(2000):
        seq, at = await limiter.acquire(1, ahead=FAR)
        clock.t = at
        limiter.observe(200, {}, seq=seq, sent=at)
    assert pace.margin == pytest.approx(MARGIN_MIN) and pace.rate == pytest.approx(50 * (1 - MARGIN_MIN))
