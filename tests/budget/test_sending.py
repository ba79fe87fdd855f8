"""The moment a paced request goes (nbagent.budget.sending): anchored on the previous request's actual send, and
waited for at the write. A fake clock the sleeps move: no timing threshold, the times are the limiter's own."""

from __future__ import annotations

import pytest

from nbagent import Agent, RateLimit
from nbagent.budget.ratelimit import Limiter
from nbagent.budget.sending import AHEAD, ItemGate, SocketPacing, socket_hook, wait_until
from nbagent.providers.openai import OpenAIChatModel
from tests.providers.ratelimited import RateLimitedServer

INTERVAL = 0.1  # 600 requests a minute
AFTER_429 = INTERVAL / 0.99  # after a first 429 the rate keeps a margin of 1% of the limit in hand


class Clock:
    """A monotonic clock that only its sleeps move (and a test, to make a send late)."""

    def __init__(self, t: float = 1000.0) -> None:
        self.t = t
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.t

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.t += max(0.0, seconds)


def paced(clock: Clock) -> Limiter:
    return Limiter(RateLimit(requests_per_minute=600), clock=clock, sleep=clock.sleep, spin=0.0)


def refuse_once(limiter: Limiter) -> None:
    """A first 429 (a provider that allows no burst): no more slack, strict spacing from then on."""
    limiter.observe(429, {"retry-after-ms": "0"}, seq=limiter.granted + 1, sent=limiter.clock())
    limiter.requests.not_before = 0.0


async def test_a_late_send_moves_the_next_one_with_it_instead_of_bunching():
    """A request that went 30 ms after its permit's time: the next goes one interval after that actual send, not
    one interval after the schedule (where it would have reached the provider 70 ms after the late one)."""
    clock = Clock()
    limiter = paced(clock)
    refuse_once(limiter)
    first, second = ItemGate(limiter), ItemGate(limiter)
    await first.before(100, early=True)
    clock.t = first.at + 0.03  # the send came late (a busy event loop, a slow connection)
    await first.send()
    await second.before(100, early=True)
    await second.send()
    assert first.sent == first.at + 0.03
    assert second.sent - first.sent == pytest.approx(AFTER_429)  # spaced from the actual send
    assert second.sent - first.at > AFTER_429  # the schedule alone would have let it go sooner


async def test_a_permit_taken_ahead_still_waits_for_a_late_send_before_it():
    """The second permit was already taken (ahead of its time) when the first request went late: its wait at
    the write reads the anchor again and holds it one interval after the first's actual send."""
    clock = Clock()
    limiter = paced(clock)
    refuse_once(limiter)
    first, second = ItemGate(limiter), ItemGate(limiter)
    await first.before(100, early=True)
    await second.before(100, early=True)  # the clock moved to AHEAD before the second permit's time
    assert clock.t == pytest.approx(second.at - AHEAD)
    clock.t = second.at - AHEAD / 2  # only now does the first request go, very late
    await first.send()
    await second.send()
    assert second.sent - first.sent == pytest.approx(AFTER_429)
    assert second.sent > second.at


async def test_until_the_first_429_a_late_send_keeps_the_schedule_never_closer_than_half_an_interval():
    clock = Clock()
    limiter = paced(clock)
    first, second = ItemGate(limiter), ItemGate(limiter)
    await first.before(100, early=True)
    clock.t = first.at + 0.03  # a little late
    await first.send()
    await second.before(100, early=True)
    await second.send()
    assert second.sent == pytest.approx(first.at + INTERVAL)  # the schedule kept: the rate is not lost to lateness
    third, fourth = ItemGate(limiter), ItemGate(limiter)
    await third.before(100, early=True)
    await fourth.before(100, early=True)
    clock.t = fourth.at - 0.01  # very late: just before the next one's time
    await third.send()
    await fourth.send()
    assert fourth.sent - third.sent == pytest.approx(INTERVAL / 2)  # never two at once: half an interval after it


async def test_without_early_the_gate_waits_for_the_time_itself_and_a_second_send_is_a_no_op():
    clock = Clock()
    limiter = paced(clock)
    gates = [ItemGate(limiter) for _ in range(4)]
    for gate in gates:
        await gate.before(100)  # a transport that does not report its writes: the wait is here
        assert gate.sent == clock.t and gate.sent >= gate.at
        await gate.send()  # the trace hook of the same attempt: nothing more to wait
        assert gate.sent == clock.t
    sent = [g.sent for g in gates]
    assert [b - a for a, b in zip(sent[1:], sent[2:])] == pytest.approx([INTERVAL, INTERVAL])


async def test_a_burst_the_person_allows_is_not_spaced_by_the_anchor():
    clock = Clock()
    limiter = Limiter(RateLimit(requests_per_minute=600, burst=1.0), clock=clock, sleep=clock.sleep, spin=0.0)
    gates = [ItemGate(limiter) for _ in range(5)]
    for gate in gates:
        await gate.before(100)
    assert {g.sent for g in gates} == {clock.t}  # a second's worth at once: all five now
    assert clock.slept == []


async def test_wait_until_reads_the_time_again_after_each_wake_up_and_spins_the_end():
    clock = Clock()
    dues = iter([clock.t + 0.05, clock.t + 0.08])  # the time moved later while it slept
    current = [clock.t + 0.05]

    def due() -> float:
        return current[0]

    async def sleep(seconds: float) -> None:
        await clock.sleep(seconds)
        current[0] = next(dues, current[0])

    ticks = []

    def ticking() -> float:  # the spin reads the clock: each read moves it a tenth of a millisecond
        ticks.append(clock.t)
        clock.t += 0.0001
        return clock.t

    went = await wait_until(due, ticking, sleep, spin=0.002)
    assert went >= current[0] == 1000.08
    assert went < current[0] + 0.0002  # spun to the moment, not slept past it
    assert all(s <= 0.05 for s in clock.slept) and 0.0 in clock.slept  # slept short of it, then let others run


async def test_the_trace_extension_waits_just_before_the_body_is_written(tmp_path):
    """Through the real HTTP layer and a local server: the first request learns that the transport reports its
    writes; from then on each waits at the write (the server has not read it when the wait ends), and its
    permit was taken ahead."""
    seen: list[tuple[int, int]] = []

    class Recording(ItemGate):
        async def before(self, body_bytes: int, early: bool = False) -> None:
            seen.append((0 if early else -1, server.requests))
            await super().before(body_bytes, early)

        async def send(self) -> None:
            if self.sent is None:
                seen.append((1, server.requests))
            await super().send()

    async with RateLimitedServer(requests_per_minute=6000, latency=0.0) as server:
        model = OpenAIChatModel("gpt-4o-mini", base_url=server.url + "/v1", api_key="sk-test-0123456789abcdef")
        from nbagent.budget.sending import request_gate

        limiter = Limiter(RateLimit(requests_per_minute=6000))
        for _ in range(3):
            token = request_gate.set(Recording(limiter))
            try:
                await Agent(model=model, workspace=tmp_path).run("hello")
            finally:
                request_gate.reset(token)
    assert model.http._pacing.reports is True
    assert seen[:2] == [(-1, 0), (1, 0)]  # the first: waited before the send (not yet known to report)
    assert seen[2:] == [(0, 1), (1, 1), (0, 2), (1, 2)]  # then: taken early, waited at the write, before it landed


async def test_a_transport_that_reports_nothing_keeps_the_wait_before_the_send():
    pacing = SocketPacing()
    calls = []

    class Gate:
        async def send(self) -> None:
            calls.append("send")

    hook = socket_hook(Gate(), pacing)
    await hook("connection.connect_tcp.started", {})
    assert pacing.reports and calls == []
    await hook("http11.send_request_headers.started", {})
    assert calls == []
    await hook("http11.send_request_body.started", {})
    assert calls == ["send"]
    assert SocketPacing().reports is False  # until a trace is seen
