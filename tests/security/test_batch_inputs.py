"""Attacks on what a batch reads that someone else could have written: the stored batch (anyone who can
write the workspace) and the provider's rate-limit headers (the provider, or anything on the path to it).
Each attack has a control showing the mechanism works in the legitimate case."""

from __future__ import annotations

import json

import pytest

from nbagent import Agent, ConfigurationError, ScriptedModel
from nbagent.batch.store import batches_dir
from nbagent.budget.ratelimit import MAX_PAUSE, Limiter, RateLimit


async def test_a_batch_id_cannot_name_a_path_outside_the_store(tmp_path):
    agent = Agent(model=ScriptedModel(["x"] * 4), workspace=tmp_path)
    (tmp_path / "outside.jsonl").write_text(json.dumps({"kind": "batch", "id": "x"}) + "\n")
    for forged in ("../../outside", "../outside", "/etc/passwd", "a/b"):
        with pytest.raises(ConfigurationError, match="not a batch id"):
            agent.map([1], "{item}", resume=forged)
    first = agent.map([1], "{item}", session=True)  # control: a real id resumes
    await first
    again = agent.map([1], "{item}", resume=first.id)
    await again
    assert again.resumed == 1


async def test_a_stored_line_changed_by_someone_else_is_not_used(tmp_path):
    """The line of a done item edited to another answer, well-formed and well-typed: its MAC no longer
    verifies, so the item is asked again (the forged answer never reaches the results)."""
    agent = Agent(model=ScriptedModel(["fresh a", "fresh b", "again b"]), workspace=tmp_path)
    first = agent.map(["a", "b"], "{item}", session=True, concurrency=1)
    await first
    path = batches_dir(tmp_path) / f"{first.id}.jsonl"
    text = path.read_text()
    assert '"output":"fresh b"' in text
    path.write_text(text.replace('"output":"fresh b"', '"output":"forged"'))
    with pytest.warns(UserWarning, match="could not be verified"):
        again = agent.map(["a", "b"], "{item}", resume=first.id, concurrency=1)
    await again
    assert again.resumed == 1  # control: the untouched line is used
    assert [r.output for r in again.results] == ["fresh a", "again b"]


async def test_a_stored_line_with_the_wrong_shapes_is_skipped_not_trusted(tmp_path):
    agent = Agent(model=ScriptedModel(["fresh"] * 4), workspace=tmp_path)
    first = agent.map(["a"], "{item}", session=True)
    await first
    path = batches_dir(tmp_path) / f"{first.id}.jsonl"
    header, item = [json.loads(line) for line in path.read_text().splitlines()]
    item.update(status="done", index="0; rm -rf /", output="forged")  # an index that is not a number
    path.write_text(json.dumps(header) + "\n" + json.dumps(item) + "\n")
    with pytest.warns(UserWarning, match="could not be verified"):
        again = agent.map(["a"], "{item}", resume=first.id)
    await again
    assert again.resumed == 0 and again.results[0].output == "fresh"


def test_headers_only_slow_a_batch_down():
    limiter = Limiter(RateLimit(requests_per_minute=600))
    limiter.observe(200, {"x-ratelimit-limit-requests": "100000"})  # a header claiming a higher limit
    assert limiter.requests.rate == pytest.approx(10.0)  # is not believed
    limiter.observe(200, {"x-ratelimit-limit-requests": "60"})  # control: a lower limit is
    assert limiter.requests.rate == pytest.approx(1.0)
    import time

    before = time.monotonic()
    limiter.observe(429, {}, retry_after=10 ** 9)  # a retry-after of 30 years
    assert limiter.paused_until - before <= MAX_PAUSE + 1
    limiter.observe(429, {}, retry_after=5)  # control: a real retry-after is honoured
    assert limiter.paused_until - before >= MAX_PAUSE  # (the longer pause already in force stays)


HOSTILE = ["nan", "inf", "-inf", "-5", "1e400", "9" * 80, "99999999999h", "9999-12-31T00:00:00Z", "0001-01-01T00:00:00Z",
           "2030-01-01T00:00:00", "\x00", "1s" * 40, "Wed, 21 Oct 9999 07:28:00 GMT", "1" + "0" * 30 + "ms"]


@pytest.mark.parametrize("value", HOSTILE)
def test_a_hostile_reset_or_retry_value_cannot_stall_a_batch(value):
    """Every header value a limiter reads, set to something no provider sends: at most one bounded pause, a
    rate that stays a positive number."""
    import math
    import time

    limiter = Limiter(RateLimit(requests_per_minute=600, tokens_per_minute=60_000))
    headers = {f"x-ratelimit-{what}-{kind}": value for what in ("limit", "remaining", "reset")
               for kind in ("requests", "tokens")}
    headers.update({"retry-after": value, "retry-after-ms": value, "ratelimit-policy": f"q={value};w={value}"})
    before = time.monotonic()
    limiter.observe(200, headers)
    limiter.observe(429, headers, retry_after=float("inf"))
    for pace in (limiter.requests, limiter.tokens):
        assert pace.not_before <= before + MAX_PAUSE + 1
        assert math.isfinite(pace.rate) and pace.rate > 0 and math.isfinite(pace.level)
        assert pace.capacity <= pace.rate * 1.0 + 1  # a policy header allows at most a second's worth


async def test_a_provider_that_says_retry_at_once_cannot_make_a_batch_hammer():
    """A 429 after 429 saying "now" (`retry-after-ms: 0`): each one cuts the rate, so the requests slow down
    geometrically instead of coming back at once; control: one 429 cuts it once."""
    from nbagent.budget.ratelimit import DECREASE, MIN_RATE

    limiter = Limiter(RateLimit(requests_per_minute=6000))
    times = []
    for _ in range(30):
        seq, at = await limiter.acquire(1, ahead=1e6)
        times.append(at)
        limiter.observe(429, {"retry-after-ms": "0", "x-ratelimit-remaining-requests": "0",
                              "x-ratelimit-reset-requests": "0ms"}, seq=seq, sent=at)
    # the first few are read as jitter at a known limit (a small cut each); once they come densely, each cuts
    # by DECREASE: thirty in a row leave the rate at most what twenty full cuts would
    assert MIN_RATE <= limiter.requests.rate <= 100 * DECREASE ** 20
    assert limiter.cuts == 30
    assert times[-1] - times[-2] > 10 * (times[2] - times[1])  # the retries spread out
    once = Limiter(RateLimit(requests_per_minute=6000))
    seq, at = await once.acquire(1)
    once.observe(429, {"retry-after-ms": "20"}, seq=seq, sent=at)
    assert once.cuts == 1 and 100 * DECREASE <= once.requests.rate < 100
