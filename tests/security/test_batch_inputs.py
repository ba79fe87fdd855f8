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
