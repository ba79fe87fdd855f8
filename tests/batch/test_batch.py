"""Agent.map: many items through one agent, against a real local server that limits its rate like a provider.

Every test reads its answers back and checks each is in its place: the echo server answers "echo: <prompt>".
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from pydantic import BaseModel

import nbagent
from nbagent import Agent, AssistantMessage, RateLimit, ScriptedModel, ToolCall, tool
from nbagent.batch.store import batches_dir, load_batch
from nbagent.budget.ratelimit import SLACK
from nbagent.providers.openai import OpenAIChatModel
from tests.providers.ratelimited import BURSTS, RateLimitedServer

WINDOWS = ["1s-window", "quarter-second-window", "no-window"]

KEY = "sk-batch-test-0123456789abcdef"


def model_for(server: RateLimitedServer, **options) -> OpenAIChatModel:
    return OpenAIChatModel("gpt-4o-mini", base_url=server.url + "/v1", api_key=KEY, **options)


def spacing(limiter) -> float:
    """The least time between two permits the limiter granted."""
    granted = list(limiter._granted_at)
    return min(b - a for a, b in zip(granted, granted[1:]))


@pytest.mark.slow  # seconds of real pacing per window (the fast lane keeps tests/budget/test_ratelimit.py)
@pytest.mark.parametrize("burst", BURSTS, ids=WINDOWS)
async def test_hundreds_of_items_paced_under_each_window_every_answer_in_its_place(tmp_path, burst):
    """The provider enforces its per-minute limit over a second, a quarter second, or no window at all: the
    limiter paces requests one interval apart (never two at once), and every 429 it meets is its own wait,
    never an item's failure or retry."""
    async with RateLimitedServer(requests_per_minute=3000, burst_seconds=burst, latency=0.02) as server:
        agent = Agent(model=model_for(server), workspace=tmp_path)
        batch = agent.map(range(300), "item {item}", concurrency=8,
                          rate_limit=RateLimit(requests_per_minute=3000))
        assert isinstance(batch, nbagent.BatchRun) and not batch.done  # returned at once
        await batch
    assert [r.status for r in batch.results] == ["done"] * 300
    assert [r.output for r in batch.results] == [f"echo: item {i}" for i in range(300)]
    assert [r.index for r in batch.results] == list(range(300))
    assert server.max_in_flight <= 8
    assert server.accepted == 300
    assert all(r.attempts == 1 for r in batch.results)  # every 429 was waited out by the limiter
    assert batch.limiter.rate_limited == server.limited
    assert spacing(batch.limiter) >= (1 - SLACK) / 50 * (1 - 1e-9)  # paced: never two at once
    assert batch.limiter.cuts >= (1 if server.limited else 0)  # a 429 slows it down
    if burst:
        assert server.limited <= 3  # a window of a quarter second or more: a paced batch meets (almost) none
    assert all(r.tokens > 0 for r in batch.results)


@pytest.mark.parametrize("headers", ["openai", "anthropic", "retry-after-ms"])
async def test_a_429_pauses_for_the_precise_wait_not_the_rounded_retry_after(tmp_path, monkeypatch, headers):
    """No window at the provider, and 16 items at once: the first flight meets 429s, whose `retry-after` says
    1 s (rounded up) while the reset (or `retry-after-ms`) says a few ms: the limiter pauses for the latter."""
    from nbagent.budget import ratelimit

    pauses: list[float] = []
    pause = ratelimit._Pace.pause

    def spy(self, until, now):
        pauses.append(until - now)
        return pause(self, until, now)

    monkeypatch.setattr(ratelimit._Pace, "pause", spy)
    async with RateLimitedServer(requests_per_minute=3000, burst_seconds=0, latency=0.01, headers=headers) as server:
        batch = Agent(model=model_for(server), workspace=tmp_path).map(
            range(40), "p {item}", concurrency=16, rate_limit=RateLimit(requests_per_minute=3000, burst=1))
        await batch
    assert [r.output for r in batch.results] == [f"echo: p {i}" for i in range(40)]
    assert server.limited >= 1 and pauses
    assert all(refusal["retry-after"] == "1" for refusal in server.refusals)
    assert max(pauses) < 0.5  # never the rounded second


async def test_concurrency_is_the_bound_on_runs_in_flight(tmp_path):
    async with RateLimitedServer(latency=0.05) as server:
        batch = Agent(model=model_for(server), workspace=tmp_path).map(range(30), "n {item}", concurrency=3)
        await batch
    assert server.max_in_flight == 3
    assert [r.output for r in batch.results] == [f"echo: n {i}" for i in range(30)]


@pytest.mark.slow  # seconds of real pacing per window (the fast lane keeps tests/budget/test_ratelimit.py)
@pytest.mark.parametrize("burst", BURSTS, ids=WINDOWS)
async def test_a_limit_nobody_told_is_learned_from_the_429s(tmp_path, burst):
    """The server sends no limit headers and the person set none: the first burst meets 429s. The batch
    learns a rate from them and paces itself: a handful of 429s, not one train per item."""
    async with RateLimitedServer(requests_per_minute=1200, burst_seconds=burst, latency=0.01, headers="none") as server:
        batch = Agent(model=model_for(server), workspace=tmp_path).map(range(80), "x {item}", concurrency=16)
        await batch
    assert [r.output for r in batch.results] == [f"echo: x {i}" for i in range(80)]
    assert server.limited >= 1 and batch.limiter.rate_limited == server.limited
    assert batch.limiter.pauses >= 1 and batch.limiter.requests is not None
    if burst:
        assert server.limited <= 16 + 6
    assert all(r.attempts == 1 for r in batch.results)  # the provider's retries were the limiter's waits


@pytest.mark.slow  # seconds of real pacing per window (the fast lane keeps tests/budget/test_ratelimit.py)
@pytest.mark.parametrize("burst", BURSTS, ids=WINDOWS)
async def test_the_limit_is_learned_from_the_provider_headers(tmp_path, burst):
    async with RateLimitedServer(requests_per_minute=1200, burst_seconds=burst, latency=0.01) as server:
        batch = Agent(model=model_for(server), workspace=tmp_path).map(range(80), "h {item}", concurrency=8)
        await batch
    assert [r.output for r in batch.results] == [f"echo: h {i}" for i in range(80)]
    assert batch.limiter.requests is not None and batch.limiter.requests.ceiling == pytest.approx(20.0)
    assert all(r.attempts == 1 for r in batch.results)
    if burst:
        assert server.limited <= 8 + 3  # the first flight (before any header), then paced


@pytest.mark.slow  # seconds of real pacing per window (the fast lane keeps tests/budget/test_ratelimit.py)
@pytest.mark.parametrize("burst", BURSTS, ids=WINDOWS)
async def test_tokens_per_minute_hold(tmp_path, burst):
    async with RateLimitedServer(tokens_per_minute=60_000, burst_seconds=burst, latency=0.01, headers="none") as server:
        batch = Agent(model=model_for(server), workspace=tmp_path).map(
            range(60), "tokens {item}", concurrency=8, rate_limit=RateLimit(tokens_per_minute=60_000))
        await batch
    assert [r.output for r in batch.results] == [f"echo: tokens {i}" for i in range(60)]
    assert all(r.attempts == 1 for r in batch.results)
    if burst:
        assert server.limited <= 2
    used = sum(r.tokens for r in batch.results)
    assert batch.limiter.tokens_reserved == pytest.approx(used, abs=5)  # every reservation was settled


async def test_a_failing_item_fails_alone_and_retry_failed_reruns_only_it(tmp_path):
    async with RateLimitedServer(latency=0.01) as server:
        inputs = ["a", "b", "FAIL c", "d"]
        agent = Agent(model=model_for(server), workspace=tmp_path)
        batch = agent.map(inputs, "{item}", concurrency=2)
        await batch
        assert [r.status for r in batch.results] == ["done", "done", "failed", "done"]
        failed = batch.results[2]
        assert "400" in failed.error or "cannot be answered" in failed.error
        assert failed.attempts == 1  # a request the provider refused as such is not retried
        server.answer, server.fail_word = (lambda body: "fixed"), None
        asked = server.requests
        retry = batch.retry_failed()
        await retry
    assert server.requests == asked + 1  # only the failed item was asked again
    assert [(r.index, r.status, r.output) for r in retry.results] == [(2, "done", "fixed")]


async def test_an_item_that_fails_is_retried_up_to_max_retries(tmp_path):
    async with RateLimitedServer(latency=0.0) as server:
        server.answer = lambda body: "ok"
        handle = server._handle
        count = {"n": 0}

        async def flaky(writer, headers, raw):
            count["n"] += 1
            if count["n"] <= 2:  # two broken connections: the provider's retry does not help (cut mid-body)
                writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
                             b"5\r\ndata:\r\n")
                await writer.drain()
                writer.transport.abort()
                return
            await handle(writer, headers, raw)
        server._handle = flaky  # type: ignore[method-assign]
        batch = Agent(model=model_for(server), workspace=tmp_path).map(["one"], "{item}", max_retries=3)
        await batch
    assert batch.results[0].status == "done" and batch.results[0].attempts == 3


async def test_a_dataframe_gives_one_item_per_row_and_to_pandas_keeps_its_index(tmp_path):
    pd = pytest.importorskip("pandas")
    df = pd.DataFrame({"text": ["late", "broken", "refund"], "id": [7, 8, 9]}, index=["t1", "t2", "t3"])
    async with RateLimitedServer(latency=0.0) as server:
        batch = Agent(model=model_for(server), workspace=tmp_path).map(df, "ticket {id}: {text}")
        await batch
    frame = batch.to_pandas()
    assert list(frame.index) == ["t1", "t2", "t3"]
    assert list(frame["output"]) == ["echo: ticket 7: late", "echo: ticket 8: broken", "echo: ticket 9: refund"]
    assert list(frame["status"]) == ["done"] * 3
    assert (frame["tokens"] > 0).all() and set(frame.columns) >= {"output", "status", "error", "tokens", "cost"}


class Label(BaseModel):
    text: str
    urgent: bool


async def test_output_type_gives_typed_outputs_and_columns(tmp_path):
    pytest.importorskip("pandas")
    async with RateLimitedServer(latency=0.0, structured=lambda text: {"text": text.upper(), "urgent": "!" in text}) as server:
        batch = Agent(model=model_for(server), workspace=tmp_path).map(["calm", "fire!"], "{item}", output_type=Label)
        await batch
    assert [r.output for r in batch.results] == [Label(text="ECHO: CALM", urgent=False),
                                                 Label(text="ECHO: FIRE!", urgent=True)]
    frame = batch.to_pandas()
    assert list(frame["text"]) == ["ECHO: CALM", "ECHO: FIRE!"] and list(frame["urgent"]) == [False, True]


async def test_a_prompt_naming_a_missing_column_fails_that_item_with_a_clear_error(tmp_path):
    batch = Agent(model=ScriptedModel(["ok"]), workspace=tmp_path).map([{"text": "a"}, {"other": 1}], "{text}")
    await batch
    assert batch.results[0].status == "done"
    assert batch.results[1].status == "failed" and "{text}" in batch.results[1].error


async def test_cancel_then_resume_asks_only_for_items_not_done(tmp_path):
    async with RateLimitedServer(latency=0.05) as server:
        agent = Agent(model=model_for(server), workspace=tmp_path)
        batch = agent.map(range(40), "r {item}", concurrency=4, session=True)
        seen = []

        def on(kind, data):
            if kind == "item_finished" and data.status == "done":
                seen.append(data.index)
                if len(seen) == 10:
                    batch.cancel()
        batch.subscribe(on)
        await batch
        statuses = [r.status for r in batch.results]
        assert batch.status == "cancelled"
        assert statuses.count("done") >= 10 and "cancelled" in statuses and "pending" in statuses
        done_first = {r.index for r in batch.results if r.status == "done"}
        _, stored = load_batch(tmp_path, batch.id)
        assert {v["index"] for v in stored.values() if v["status"] == "done"} == done_first
        server.bodies.clear()
        again = agent.map(range(40), "r {item}", concurrency=4, resume=batch.id)
        await again
    assert again.resumed == len(done_first)
    asked = {json.loads(b)["messages"][-1]["content"] for b in server.bodies}
    assert asked == {f"r {i}" for i in range(40) if i not in done_first}  # done items were not asked again
    assert [r.output for r in again.results] == [f"echo: r {i}" for i in range(40)]


async def test_resume_asks_again_when_the_model_or_prompt_changed(tmp_path):
    async with RateLimitedServer() as server:
        agent = Agent(model=model_for(server), workspace=tmp_path)
        first = agent.map(range(3), "p {item}", session=True)
        await first
        again = agent.map(range(3), "q {item}", resume=first.id)
        await again
    assert again.resumed == 0 and [r.output for r in again.results] == [f"echo: q {i}" for i in range(3)]


async def test_a_forged_stored_output_that_does_not_fit_the_type_is_asked_again(tmp_path):
    async with RateLimitedServer(structured=lambda text: {"text": text, "urgent": False}) as server:
        agent = Agent(model=model_for(server), workspace=tmp_path)
        first = agent.map(["a", "b"], "{item}", output_type=Label, session=True)
        await first
        path = batches_dir(tmp_path) / f"{first.id}.jsonl"
        text = path.read_text()
        assert text.count('"text":"echo: b"') == 1
        path.write_text(text.replace('"text":"echo: b","urgent":false', '"text":"<script>","urgent":"not a bool"')
                        + "not json\n")
        requests = server.requests
        with pytest.warns(UserWarning, match="could not be verified"):
            again = agent.map(["a", "b"], "{item}", output_type=Label, resume=first.id)
        await again
    assert again.resumed == 1 and server.requests == requests + 1
    assert again.results[1].output == Label(text="echo: b", urgent=False)


async def test_the_store_groups_its_writes(tmp_path):
    async with RateLimitedServer() as server:
        batch = Agent(model=model_for(server), workspace=tmp_path).map(range(100), "s {item}", concurrency=8,
                                                                       session=True)
        await batch
    _, stored = load_batch(tmp_path, batch.id)
    assert len(stored) == 100
    assert batch.store is not None and batch.store.writes < 20  # one write and fsync for many items
    text = (batches_dir(tmp_path) / f"{batch.id}.jsonl").read_text()
    assert KEY not in text


async def test_no_line_is_lost_to_a_write_in_progress(tmp_path, monkeypatch):
    """Lines queued while the store's thread writes go with the next write. The thread used to take the queue
    itself: a line queued by the loop at that moment (the queue looked up, the line still being encoded) went
    into a list already written (1-6 of 3,000 lost a run, measured, with the threads switching often)."""
    import sys

    from nbagent.batch import store

    monkeypatch.setattr(store, "FLUSH_SECONDS", 0)
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        for run in range(3):
            writer = store.BatchWriter(tmp_path, f"20261204-00000{run}-abcdef", header={}, fsync=False)
            for i in range(3000):
                writer.add({"key": f"k{i}", "index": i, "status": "done", "output": "x" * 50})
                if i % 7 == 0:
                    await asyncio.sleep(0)
            await writer.close()
            lines = writer.path.read_text().splitlines()
            assert sum('"kind":"item"' in line for line in lines) == 3000
    finally:
        sys.setswitchinterval(interval)


async def test_max_cost_stops_starting_items_and_says_so(tmp_path):
    async with RateLimitedServer(latency=0.01) as server:
        server.answer = lambda body: "x" * 4000  # ~1000 output tokens an item
        agent = Agent(model=model_for(server), workspace=tmp_path)
        probe = agent.map(["one"], "{item}")
        await probe
        per_item = probe.results[0].cost
        assert per_item and per_item > 0
        batch = agent.map(range(50), "c {item}", concurrency=4, max_cost=per_item * 5.5)
        await batch
    done = [r for r in batch.results if r.status == "done"]
    assert 1 <= len(done) <= 5
    assert batch.cost <= per_item * 5.5
    assert batch.status == "stopped" and "max_cost" in batch.stop_reason and "not started" in batch.stop_reason
    assert [r.status for r in batch.results].count("pending") == 50 - len(done)


def _note_model(n: int) -> ScriptedModel:
    def step(messages):
        last = messages[-1]
        if getattr(last, "role", None) == "user" or type(last).__name__ == "UserMessage":
            text = last.text if hasattr(last, "text") else str(last)
            return AssistantMessage(tool_calls=[ToolCall(name="write_note", arguments={"path": f"notes/{text}.txt"})])
        return "noted"
    return ScriptedModel([step] * (2 * n))


@tool
def write_note(path: str) -> str:
    """Write a note (not read-only: it asks)."""
    return f"wrote {path}"


async def test_approvals_wait_in_one_list_while_other_items_go_on(tmp_path):
    agent = Agent(model=_note_model(3), tools=[write_note], workspace=tmp_path)
    batch = agent.map(["a", "b", "c"], "{item}", concurrency=3).ask_here()
    while len(batch.pending_approvals) < 3:
        await asyncio.sleep(0.01)
    labels = [p.label for p in batch.pending_approvals]
    assert labels == ["every write_note call"] * 3
    waiting = list(batch.pending_approvals)
    waiting[0].deny()
    first_left = waiting[1]
    first_left.approve(all_like_this=True)  # a grant as wide as its label: the third goes on with it
    await batch
    assert [r.status for r in batch.results] == ["done"] * 3
    decisions = [r.run.calls[0].decision for r in batch.results]
    assert sorted(d.allow for d in decisions) == [False, True, True]
    assert [str(g) for g in agent.grants] == ["write_note"] and first_left.label == "every write_note call"


def _write_file(workspace):
    from nbagent import toolbox

    return [t for t in toolbox.all(workspace=workspace) if t.name == "write_file"]


def _writer(paths: list[str]) -> ScriptedModel:
    """Each item writes the file its prompt names (`write_file`), then says so."""
    def step(messages):
        last = messages[-1]
        if type(last).__name__ == "UserMessage":
            return AssistantMessage(tool_calls=[ToolCall(name="write_file", arguments={"path": last.text,
                                                                                        "content": "x"})])
        return "written"
    return ScriptedModel([step] * (2 * len(paths)))


async def test_approve_all_like_this_in_a_batch_grants_the_folder_the_items_write_to(tmp_path):
    """One item's file is not what the others write: "all calls like" a write grants its folder, as labelled."""
    paths = ["escalations/refund-284.md", "escalations/refund-285.md", "escalations/refund-286.md"]
    agent = Agent(model=_writer(paths), tools=_write_file(tmp_path), workspace=tmp_path)
    batch = agent.map(paths, "{item}", concurrency=1).ask_here()
    while not batch.pending_approvals:
        await asyncio.sleep(0.01)
    first = batch.pending_approvals[0]
    assert first.label == "write_file: everything under ./escalations/"
    first.approve(all_like_this=True)
    await batch
    assert [r.status for r in batch.results] == ["done"] * 3
    assert sorted(p.name for p in (tmp_path / "escalations").iterdir()) == [Path(x).name for x in paths]
    assert [str(g) for g in agent.grants] == ["write_file(./escalations/**)"]
    assert [r.run.calls[0].decision.source for r in batch.results] == ["user", "grant", "grant"]


async def test_a_folder_grant_covers_no_configuration_and_nothing_outside_it(tmp_path):
    """Under the folder grant, a write to configuration that runs code in that folder still asks, and so does
    a write next to the folder; a file at the workspace's root is granted alone (its folder is everything)."""
    paths = ["escalations/a.md", "escalations/.git/config", "escalations-2/b.md", "root.md"]
    agent = Agent(model=_writer(paths), tools=_write_file(tmp_path), workspace=tmp_path)
    batch = agent.map(paths, "{item}", concurrency=1).ask_here()
    asked = []
    while not batch.done:
        for waiting in list(batch.pending_approvals):
            asked.append((waiting.request.arguments["path"], waiting.label))
            waiting.approve(all_like_this=waiting.request.arguments["path"] == "escalations/a.md")
        await asyncio.sleep(0.01)
    assert [path for path, _ in asked] == paths  # each asked: the folder grant covered none of the others
    assert dict(asked)["root.md"] == "write_file ./root.md (this file only)"
    assert dict(asked)["escalations/.git/config"] == "write_file (approved once: no grant)"


async def test_headless_approvals_follow_the_policy(tmp_path, monkeypatch):
    monkeypatch.delenv("NBAGENT_APPROVAL", raising=False)
    batch = Agent(model=_note_model(2), tools=[write_note], workspace=tmp_path).map(["a", "b"], "{item}")
    await batch
    assert all(not r.run.calls[0].decision.allow for r in batch.results)  # no approver, no policy: denied
    monkeypatch.setenv("NBAGENT_APPROVAL", "allow")
    batch = Agent(model=_note_model(2), tools=[write_note], workspace=tmp_path).map(["a", "b"], "{item}")
    await batch
    assert all(r.run.calls[0].decision.allow for r in batch.results)
    assert not batch.pending_approvals


async def test_the_view_renders_counts_and_escapes_answers(tmp_path):
    batch = Agent(model=ScriptedModel(["<b>bold</b>", "plain"]), workspace=tmp_path).map(["x", "y"], "{item}")
    await batch
    page = batch._repr_html_()
    assert "2/2 items" in page and "&lt;b&gt;bold&lt;/b&gt;" in page and "<b>bold</b>" not in page
    assert "2 done" in str(batch)


def test_map_needs_a_running_loop(tmp_path):
    with pytest.raises(nbagent.ConfigurationError, match="running event loop"):
        Agent(model=ScriptedModel(["x"]), workspace=tmp_path).map([1], "{item}")


async def test_bad_settings_are_clear_errors(tmp_path):
    agent = Agent(model=ScriptedModel(["x"]), workspace=tmp_path)
    with pytest.raises(nbagent.ConfigurationError, match="concurrency"):
        agent.map([1], "{item}", concurrency=0)
    with pytest.raises(nbagent.ConfigurationError, match="known price"):
        agent.map([1], "{item}", max_cost=1.0)
    with pytest.raises(ValueError):
        RateLimit(requests_per_minute=-1)



async def _failing_first(tmp_path, concurrency: int = 8, engine=None, then=lambda: None):
    async with RateLimitedServer(latency=0.05) as server:
        server.answer = lambda body: "x" * 2000  # ~500 tokens out an item: less than an item is reckoned (1,000)
        agent = Agent(model=model_for(server), workspace=tmp_path)
        probe = agent.map(["c 0"], "{item}", engine=engine)
        reserve = probe.first_request_cost(0)
        await probe
        assert reserve > 0 and probe.results[0].cost <= reserve
        then()
        items = ["FAIL first"] + [f"c {i}" for i in range(1, 40)]
        batch = agent.map(items, "{item}", concurrency=concurrency, max_cost=reserve * 3.5, engine=engine)
        await batch
    return batch, server, reserve


async def test_max_cost_with_a_failing_first_item_reserves_an_estimate_for_each_item(tmp_path):
    """The first item fails, so nothing is measured: each item started reserves what its first request costs
    at the model's price, and only as many start as the budget covers, not every worker."""
    batch, server, reserve = await _failing_first(tmp_path)
    assert batch.results[0].status == "failed"
    assert server.max_in_flight <= 3  # 3.5 reservations fit, never 8 workers at once
    assert batch.cost <= reserve * 3.5
    assert batch.status == "stopped" and "max_cost" in batch.stop_reason
    assert 1 <= sum(r.status == "done" for r in batch.results) < 39


async def test_max_cost_with_a_failing_first_item_and_no_reservation_starts_every_worker(tmp_path, monkeypatch):
    """The mechanism off (nothing reserved before a measurement): every worker starts after the failure."""
    from nbagent.batch.run import BatchRun

    def off():
        monkeypatch.setattr(BatchRun, "first_request_cost", lambda self, index: 0.0)

    batch, server, reserve = await _failing_first(tmp_path, then=off)
    assert server.max_in_flight == 8
