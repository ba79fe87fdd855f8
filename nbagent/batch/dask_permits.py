"""The client's side of a cluster batch's permits: the feeder that puts them in the permit queue at the limiter's
pace (nbagent.batch.dask runs it; the workers take them in nbagent.batch.dask_worker).

    flow = Flow()
    task = loop.create_task(feed(batch, client, permits, flow))   # until cancelled
    flow.sent(seq)          # the monotonic time permit `seq` was for, when its response is reported

Each permit is `(number, time, put, tokens, spacing, interval, closes)`: taken from the batch's `Limiter` up to
`LEAD` seconds before its time, it carries that time by the wall clock, so the worker that takes it sends its
request then, and the requests of every worker keep the limiter's spacing whatever the queues' delays. Puts are
round trips to the scheduler: a few travel at once (`PUTS_IN_FLIGHT`), so the pace is the limiter's, not the
round trip's. At most `outstanding(batch)` permits are out and not yet reported used.

Blocks: when requests are paced smoothly at more than one in `BLOCK_SECONDS` and the provider has answered a
429 (it keeps its limit over a short window, maybe with no burst at all), consecutive permits travel together:
a block of about that many seconds' worth that one runner takes whole, with `GAP` seconds left unused after it.
Why: a send goes a little late now and then (a worker's event loop busy with another item, a core taken by
another process), and a provider that allows no burst refuses the request that follows it less than an
interval later. The runner that sent late knows it and spaces its own next request from that send (`interval`:
the provider's least spacing and `TOLERANCE`, timed from the write of its previous request; the limiter's
spacing is a little wider, so a late send's lateness is made up over the block's next slots); another runner
cannot know in time (its permit is already on its way). So the next request is the same runner's, but for the
block's last (`closes`), whose follower may be another runner's: the gap is room for that send's lateness, and a
last send that would come later than the gap covers is not made (its slot is given up, and another permit
taken). Near a batch's end a block is at most what the runner with the fewest items yet to start has left
(`Flow.waiting`), and a runner takes from the queue only while its waiting items and asking requests could use
more than it holds (nbagent.batch.dask_worker): a block taken by a runner with less than that left to send would
keep its slots from the others (the last request of a batch came a block's time late). Measured against a
provider that allows no burst (`python bench/map.py --only-dask`): 429s from about 50 to about 3-5 in 1,000, the
cluster's share of the bound from about 0.86 to about 0.96.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

__all__ = ["BLOCK_SECONDS", "Flow", "GAP", "LEAD", "block_size", "call", "count", "feed", "outstanding"]

LEAD = 0.05
"""Seconds before its time a permit is put in the queue (more than the queues take to bring it to a worker)."""
BLOCK_SECONDS = 0.24
"""About this many seconds' worth of consecutive permits travel as one block (see the module docstring). Each block
leaves `GAP` unused: longer blocks lose less to it, but a runner's stall costs a block more (0.16, 0.24 and 0.32 s
measured side by side against a provider that allows no burst: 0.952-0.955, 0.957-0.963, 0.949-0.966)."""
GAP = 0.004
"""Seconds left unused after a block: room for its last send's lateness before the next block's first."""
TOLERANCE = 0.0001
"""Seconds more than the provider's interval a runner leaves between its own requests in a block (its sends are
timed at their writes, which reach a server on this machine at once)."""
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
        self.waiting: Any = None
        """The fewest items a runner has yet to start, its own and its share of those not handed out (a callable;
        None: not known). Blocks are at most that: near a batch's end, a block bigger than what its runner has left
        would hold slots nobody uses (another runner's next request waits behind them)."""

    def sent(self, seq: Any) -> float | None:
        """The monotonic time permit `seq` was for (None: not one of this batch's, or answered already)."""
        return self.times.pop(seq, None) if isinstance(seq, int) else None


async def feed(batch: Any, client: Any, permits: Any, flow: Flow) -> None:
    """Put permits in the cluster's queue at the limiter's pace, at most `outstanding` not yet reported used, one
    at a time or in blocks (see the module docstring). Each permit is taken up to `LEAD` seconds before its time
    (a block's first; the rest right after it) and carries that time (the wall clock's): the worker that takes it
    sends its request then, so the requests keep the limiter's spacing whatever the queues' delays."""
    limiter = batch.limiter
    puts: set[asyncio.Future] = set()  # a put is a round trip to the scheduler: a few travel at once
    await flow.ready.wait()
    try:
        while True:
            size = block_size(limiter)
            if size > 1 and flow.waiting is not None:
                size = max(1, min(size, flow.waiting()))
            if flow.ahead + size > max(outstanding(batch), size):
                flow.used.clear()
                try:
                    await asyncio.wait_for(flow.used.wait(), 1.0)
                except asyncio.TimeoutError:  # a worker died holding permits, or is slow: count what is left
                    flow.ahead = await call(client, permits.qsize) * size
                continue
            tokens = int(limiter.output_per_request) + 64  # the prompt is not known here: settled from the usage
            pace = limiter.requests
            interval = 0.0
            if size > 1 and pace is not None:  # the provider's least spacing, a hair more; the limiter's if unknown
                interval = min(1.0 / pace.rate, 1.0 / pace.ceiling + TOLERANCE) if pace.ceiling else 1.0 / pace.rate
            block = []
            for i in range(size):
                # a block's first at its lead; the rest at once (their times follow, one interval apart)
                seq, at = await limiter.acquire(tokens, ahead=LEAD if i == 0 else LEAD + 2 * BLOCK_SECONDS)
                flow.times[seq] = at
                now = time.time()
                block.append((seq, now + (at - time.monotonic()), now, tokens, limiter.spacing() * flow.runners,
                              interval, size > 1 and i == size - 1))
            if size > 1:
                limiter.leave_gap(GAP)
            if len(flow.times) > 4 * outstanding(batch) + 64:  # permits lost with a worker: forget the oldest
                for old in sorted(flow.times)[: len(flow.times) // 2]:
                    del flow.times[old]
            put = asyncio.ensure_future(call(client, permits.put, block if size > 1 else block[0]))
            puts.add(put)
            put.add_done_callback(_forget)
            flow.ahead += size
            puts = {p for p in puts if not p.done()}
            if len(puts) >= PUTS_IN_FLIGHT:
                await asyncio.wait(puts, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for put in puts:
            put.cancel()


def block_size(limiter: Any) -> int:
    """How many consecutive permits travel as one block: `BLOCK_SECONDS`' worth when requests are paced smoothly
    and the provider has refused one (it keeps its limit over a short window), else one (a burst allowed, no
    request limit, or a provider that has taken every request so far: a late send costs nothing there)."""
    pace = limiter.requests
    if pace is None or pace.bucket > 1.0 or not pace.refused:
        return 1
    return max(1, min(64, int(BLOCK_SECONDS * pace.rate)))


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
