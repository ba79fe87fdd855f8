"""The client's side of a cluster batch's permits: the feeder that puts them in the permit queue at the limiter's
pace (nbagent.batch.dask runs it; the workers take them in nbagent.batch.dask_worker).

    flow = Flow()
    task = loop.create_task(feed(batch, client, permits, flow))   # until cancelled
    flow.sent(seq)          # the monotonic time permit `seq` was for, when its response is reported

Each permit is `(number, time, put, tokens, spacing)`: taken from the batch's `Limiter` up to `LEAD` seconds
before its time, it carries that time by the wall clock, so the worker that takes it sends its request then,
and the requests of every worker keep the limiter's spacing whatever the queues' delays. Puts are round trips
to the scheduler: a few travel at once (`PUTS_IN_FLIGHT`), so the pace is the limiter's, not the round trip's.
At most `outstanding(batch)` permits are out and not yet reported used.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

__all__ = ["Flow", "LEAD", "call", "count", "feed", "outstanding"]

LEAD = 0.05
"""Seconds before its time a permit is put in the queue (more than the queues take to bring it to a worker)."""
PUTS_IN_FLIGHT = 8
"""Permit puts (round trips to the scheduler) travelling at once."""
REPORTED_WITHIN = 0.5
"""Seconds a worker's report that it used a permit may take to come back (see `outstanding`)."""


async def call(client: Any, fn: Any, *args: Any, **kwargs: Any) -> Any:
    """A client-side call, awaited on an asynchronous client, in a thread on a synchronous one."""
    if getattr(client, "asynchronous", False):
        return await fn(*args, **kwargs)
    return await asyncio.to_thread(fn, *args, **kwargs)


class Flow:
    """Permits put in the cluster's queue and not yet taken from it (each one taken is reported back), and the
    time each permit is for, until its request is answered."""

    def __init__(self) -> None:
        self.ahead = 0
        self.used = asyncio.Event()
        self.ready = asyncio.Event()
        """Set once every runner has said hello: permits put before would wait in the queue and go late."""
        self.runners = 1
        """How many runners take permits: a permit that went late is spaced by this many intervals on its runner,
        so a backlog used by all of them at once still goes no faster than the limiter's rate."""
        self.times: dict[int, float] = {}

    def sent(self, seq: Any) -> float | None:
        """The monotonic time permit `seq` was for (None: not one of this batch's, or answered already)."""
        return self.times.pop(seq, None) if isinstance(seq, int) else None


async def feed(batch: Any, client: Any, permits: Any, flow: Flow) -> None:
    """Put permits in the cluster's queue at the limiter's pace, at most `outstanding` not yet reported used.
    Each permit is taken up to `LEAD` seconds before its time and carries that time (the wall clock's): the
    worker that takes it sends its request then, so the requests keep the limiter's spacing whatever the
    queues' delays."""
    limiter = batch.limiter
    puts: set[asyncio.Future] = set()  # a put is a round trip to the scheduler: a few travel at once
    await flow.ready.wait()
    try:
        while True:
            if flow.ahead >= outstanding(batch):
                flow.used.clear()
                try:
                    await asyncio.wait_for(flow.used.wait(), 1.0)
                except asyncio.TimeoutError:  # a worker died holding permits, or is slow: count what is left
                    flow.ahead = await call(client, permits.qsize)
                continue
            tokens = int(limiter.output_per_request) + 64  # the prompt is not known here: settled from the usage
            seq, at = await limiter.acquire(tokens, ahead=LEAD)
            flow.times[seq] = at
            if len(flow.times) > 4 * outstanding(batch) + 64:  # permits lost with a worker: forget the oldest
                for old in sorted(flow.times)[: len(flow.times) // 2]:
                    del flow.times[old]
            now = time.time()
            put = asyncio.ensure_future(call(client, permits.put, (seq, now + (at - time.monotonic()), now, tokens,
                                                                    limiter.spacing() * flow.runners)))
            puts.add(put)
            put.add_done_callback(_forget)
            flow.ahead += 1
            puts = {p for p in puts if not p.done()}
            if len(puts) >= PUTS_IN_FLIGHT:
                await asyncio.wait(puts, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for put in puts:
            put.cancel()


def _forget(future: asyncio.Future) -> None:
    """A put's outcome is not awaited: a failed one (the cluster gone) is seen by the batch's own calls."""
    if not future.cancelled():
        future.exception()


def outstanding(batch: Any) -> int:
    """Permits that may be out (in the queue, in the runners' stocks, or used and not yet reported so): twice
    the concurrency, plus what the rate grants while a "took" report comes back (`REPORTED_WITHIN`). A permit
    carries its time, so more of them out is no burst; the bound keeps the queue short when nothing uses them."""
    pace = batch.limiter.requests
    return 2 * batch.concurrency + (int(pace.rate * REPORTED_WITHIN) if pace is not None else 0)


def count(value: Any) -> int:
    """A count a worker reported (0 when it is not one)."""
    return value if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 1 << 40 else 0
