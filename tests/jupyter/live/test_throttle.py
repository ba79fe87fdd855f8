"""The message budget of live views, on a loop whose clock the test moves."""

from __future__ import annotations

from nbagent.jupyter.live.throttle import Throttle


class ManualLoop:
    """Just enough of an event loop: a clock, and timers the test fires."""

    def __init__(self) -> None:
        self.now = 100.0
        self.timers: list = []

    def time(self) -> float:
        return self.now

    def call_at(self, when, callback):
        timer = Timer(when, callback)
        self.timers.append(timer)
        return timer

    def advance(self, seconds: float) -> None:
        self.now += seconds
        due = sorted((t for t in self.timers if t.when <= self.now and not t.cancelled), key=lambda t: t.when)
        self.timers = [t for t in self.timers if t not in due and not t.cancelled]
        for t in due:
            t.callback()


class Timer:
    def __init__(self, when, callback) -> None:
        self.when, self.callback, self.cancelled = when, callback, False

    def cancel(self) -> None:
        self.cancelled = True


def test_many_requests_make_one_flush_and_each_flush_earns_its_pause():
    loop = ManualLoop()
    sent_per_flush = [3]
    flushes = []
    throttle = Throttle(loop, lambda: flushes.append(loop.now) or sent_per_flush[0], rate=30)
    for _ in range(100_000):
        throttle.request()
    assert len(loop.timers) == 1
    loop.advance(0)
    assert flushes == [100.0]
    for _ in range(1000):
        throttle.request()
    loop.advance(0.05)  # 3 messages cost 0.1 s of budget: not yet
    assert len(flushes) == 1
    loop.advance(0.05)
    assert len(flushes) == 2 and throttle.sent == 6


def test_a_flush_that_sends_nothing_still_waits_a_little_and_close_drops_what_is_pending():
    loop = ManualLoop()
    flushes = []
    throttle = Throttle(loop, lambda: flushes.append(loop.now) or 0, rate=10)
    throttle.request()
    loop.advance(0)
    throttle.request()
    loop.advance(0.05)
    assert len(flushes) == 1
    throttle.close()
    loop.advance(1)
    assert len(flushes) == 1 and not throttle.pending
    throttle.request()
    assert not loop.timers


def test_a_failing_flush_is_logged_not_raised(caplog):
    loop = ManualLoop()
    throttle = Throttle(loop, lambda: 1 / 0, rate=10)
    throttle.request()
    loop.advance(0)
    assert "updating the live view failed" in caplog.text
    throttle.request()
    loop.advance(1)
    assert throttle.flushes == 2
