"""A cluster runner's permits on their own (nbagent.batch.dask_worker._Permits, _RemoteGate), without a cluster:
a queue the test fills, reports kept in a list. The times are the permits' own: no timing threshold."""

from __future__ import annotations

import asyncio
import itertools
import time

from nbagent.batch.dask_worker import _Permits, _RemoteGate, clock_id


class Queue:
    def __init__(self) -> None:
        self.q: asyncio.Queue = asyncio.Queue()

    async def get(self):
        return await self.q.get()


class Out:
    def __init__(self) -> None:
        self.reports: list[dict] = []

    def add(self, report: dict) -> None:
        self.reports.append(report)


async def take(same_clock: bool, delivery: float) -> float:
    """The time a runner would send a permit that is for 10 s from now and took `delivery` to arrive."""
    queue, out = Queue(), Out()
    permits = _Permits(queue, 2, out, same_clock=same_clock)
    when = time.time() + 10.0
    queue.q.put_nowait((1, when, time.time() - delivery, 300, 0.02))
    seq, tokens, due = await permits.get()
    permits.task.cancel()
    assert (seq, tokens) == (1, 300)
    return due - when


async def test_a_runner_on_the_clients_kernel_uses_a_permits_time_as_it_is():
    """One kernel, one wall clock: no offset estimated from the delivery (which differs from runner to runner and
    would shift their schedules apart, bringing one's requests closer to the other's)."""
    assert await take(same_clock=True, delivery=0.003) == 0.0
    assert await take(same_clock=False, delivery=0.003) >= 0.003  # elsewhere: the clocks' offset is estimated


def test_the_kernel_is_named_by_its_boot_id():
    mine = clock_id()
    assert mine is None or (mine == clock_id() and len(mine) >= 16)


async def test_a_runners_send_waits_for_the_permits_time_once_and_spaces_its_next_from_it():
    queue, out = Queue(), Out()
    permits = _Permits(queue, 2, out, same_clock=True)
    gate = _RemoteGate(permits, out)
    queue.q.put_nowait((7, time.time() - 0.001, time.time(), 300, 0.02))  # its time has just come
    await gate.before(100, early=True)  # the transport waits at the write
    assert gate.sent is None and out.reports[-1]["kind"] == "took" and out.reports[-1]["seq"] == 7
    await gate.send()
    sent = gate.sent
    assert sent is not None and sent >= gate.due and permits.last == sent
    await gate.send()  # the same attempt: nothing more
    assert gate.sent == sent
    permits.task.cancel()


# -- blocks: consecutive permits that one runner takes whole (nbagent.batch.dask_permits) ----------------------

def block(first: int, when: float, n: int, interval: float = 0.02) -> list[tuple]:
    """A block of `n` permits as the feeder puts it: one interval apart, the last closing it."""
    return [(first + i, when + i * interval, time.time(), 300, interval * 2, interval, i == n - 1) for i in range(n)]


async def test_a_block_is_taken_whole_by_one_runner_and_its_last_permit_closes_it():
    queue, out = Queue(), Out()
    permits = _Permits(queue, 1, out, same_clock=True)  # room for one take at a time
    when = time.time() + 10.0
    queue.q.put_nowait(block(1, when, 3))
    queue.q.put_nowait(tuple(block(4, when + 1, 2)))  # (the cluster's wire brings a list as a tuple)
    got = [await permits.get() for _ in range(3)]
    assert [p[0] for p in got] == [1, 2, 3] and [p.closes for p in got] == [False, False, True]
    assert [round(p[2] - when, 6) for p in got] == [0.0, 0.02, 0.04] and all(p.interval == 0.02 for p in got)
    await asyncio.sleep(0.01)
    assert permits.ready.qsize() == 2  # the next block was taken once the first's last permit was used
    single = Queue()
    single.q.put_nowait((9, when, time.time(), 300, 0.02))  # a single permit, as before blocks: no block spacing
    lone = _Permits(single, 1, out, same_clock=True)
    permit = await lone.get()
    assert permit[0] == 9 and permit.interval == 0.0 and not permit.closes
    permits.task.cancel()
    lone.task.cancel()


async def test_in_a_block_a_send_is_spaced_from_this_runners_previous_actual_send():
    """A send that went late moves the same runner's next one with it (the next request is this runner's own)."""
    queue, out = Queue(), Out()
    permits = _Permits(queue, 2, out, same_clock=True)
    now = time.time()
    queue.q.put_nowait(block(1, now - 0.001, 3, interval=0.05))
    first = _RemoteGate(permits, out)
    await first.before(100, early=True)
    permits.sent = time.time() + 0.03  # as if the first request went 30 ms late
    second = _RemoteGate(permits, out)
    await second.before(100, early=True)
    await second.send()
    assert second.sent >= permits.sent - 1e-9 and second.sent >= (now + 0.03) + 0.05 - 0.001
    assert [r["kind"] for r in out.reports] == ["took", "took"]
    permits.task.cancel()


async def test_a_blocks_last_permit_that_would_go_later_than_the_gap_covers_is_given_up():
    """The last of a block may be followed at once by another runner's first: sent later than the gap after the
    block allows, it would bunch with it. Its slot is given up (reported unused, its tokens back) and the next
    permit is taken."""
    from nbagent.batch.dask_permits import GAP

    queue, out = Queue(), Out()
    permits = _Permits(queue, 2, out, same_clock=True)
    when = time.time() + 0.05
    queue.q.put_nowait(block(1, when, 2))
    queue.q.put_nowait(block(3, when + 0.2, 2))
    await _RemoteGate(permits, out).before(100, early=True)  # permit 1
    permits.sent = when + 0.02 + GAP  # permit 1 went late: the closing permit 2 would go 2 x GAP past its time
    gate = _RemoteGate(permits, out)
    await gate.before(100, early=True)
    assert gate.seq == 2
    await gate.send()
    assert gate.seq == 3 and gate.sent >= when + 0.2 - 1e-9  # permit 3's slot, of the next block
    kinds = [(r["kind"], r["seq"]) for r in out.reports]
    assert kinds == [("took", 1), ("took", 2), ("unused", 2), ("took", 3)]
    assert out.reports[2]["reserved"] == 300
    permits.task.cancel()


class FedBatch:
    """What the feeder reads of a batch: its concurrency and its limiter (3,000 requests a minute, paced)."""

    concurrency = 8

    def __init__(self) -> None:
        from nbagent.budget.ratelimit import Limiter, RateLimit

        self.limiter = Limiter(RateLimit(requests_per_minute=3000), spin=0.0)


class PermitQueue:
    """The cluster's permit queue, as the feeder's client sees it: what was put, in order."""

    def __init__(self) -> None:
        self.items: list = []

    async def put(self, item) -> None:
        self.items.append(item)

    async def qsize(self) -> int:
        return len(self.items)


class AsyncClient:
    asynchronous = True


async def test_the_feeder_puts_blocks_with_a_gap_after_each_when_paced_smoothly_after_a_429():
    from nbagent.batch.dask_permits import BLOCK_SECONDS, GAP, Flow, block_size, feed
    from nbagent.budget.ratelimit import Limiter, RateLimit

    batch = FedBatch()
    permits, flow = PermitQueue(), Flow()
    flow.ready.set()
    assert block_size(batch.limiter) == 1  # until the provider refuses a request, single permits, no gaps
    batch.limiter.requests.refused = True  # as after a 429 (which also ends the slack)
    size = block_size(batch.limiter)
    assert size == int(BLOCK_SECONDS * 50) > 1
    task = asyncio.ensure_future(feed(batch, AsyncClient(), permits, flow))
    while len(permits.items) < 3:
        await asyncio.sleep(0.01)
    task.cancel()
    first, second = permits.items[:2]
    assert isinstance(first, list) and [len(first), len(second)] == [size, size]
    assert [p[6] for p in first] == [False] * (size - 1) + [True]  # the last closes the block
    assert all(abs(p[5] - 0.02) < 1e-9 for p in first)  # the least spacing the provider accepts
    steps = [b[1] - a[1] for a, b in itertools.pairwise(first)]
    assert all(abs(step - 0.02) < 1e-3 for step in steps)  # consecutive slots
    assert second[0][1] - first[-1][1] >= 0.02 + GAP - 1e-3  # and the gap after the block
    assert [p[0] for p in first + second] == list(range(first[0][0], first[0][0] + 2 * size))

    unpaced = Limiter(RateLimit(requests_per_minute=3000, burst=1.0))
    assert block_size(unpaced) == 1 and block_size(Limiter(RateLimit())) == 1  # a burst allowed, or no limit


async def test_the_transport_tells_the_gate_when_its_body_was_written_and_the_next_send_is_spaced_from_that():
    """httpx's trace: just before the body's write the gate waits for its time; once written, a runner's gate
    takes the write's start as its send (its end less the least a write took here): a write that waited for the
    event loop after the wait ended moves the runner's next request with it."""
    from nbagent.budget.sending import SocketPacing, socket_hook

    queue, out = Queue(), Out()
    permits = _Permits(queue, 2, out, same_clock=True)
    queue.q.put_nowait(block(1, time.time() - 0.001, 4, interval=0.05))  # (the third is not the block's last)
    quick = _RemoteGate(permits, out)
    await quick.before(100, early=True)
    trace = socket_hook(quick, SocketPacing())
    await trace("http11.send_request_body.started", {})
    await trace("http11.send_request_body.complete", {})  # a write that took no time: the least
    assert quick.sent is not None and permits.sent >= quick.sent
    slow = _RemoteGate(permits, out)
    await slow.before(100, early=True)
    trace = socket_hook(slow, SocketPacing())
    await trace("http11.send_request_body.started", {})
    await asyncio.sleep(0.02)  # the write waited for the loop
    await trace("http11.send_request_body.complete", {})
    began = permits.sent
    assert began >= slow.sent + 0.02 - min(permits.writes) and min(permits.writes) < 0.02
    third = _RemoteGate(permits, out)
    await third.before(100, early=True)
    await third.send()
    assert third.sent >= began + 0.05 - 1e-9  # one interval after the write began, not after the wait's end
    permits.task.cancel()


async def test_near_the_end_blocks_are_no_bigger_than_what_the_runner_with_the_fewest_items_to_start_has_left():
    # a block bigger than what its runner has left holds slots nobody uses, and another runner's next request
    # waits behind them (the end of a batch lost about a block's time to it)
    from nbagent.batch.dask_permits import Flow, block_size, feed

    batch = FedBatch()
    batch.limiter.requests.refused = True  # blocks, as after a 429
    full = block_size(batch.limiter)
    left = [full + 1, 3, 1, 0]  # the fewest items a runner has yet to start, as the batch goes
    permits, flow = PermitQueue(), Flow()
    told = iter(left)
    flow.waiting = lambda: next(told, 0)  # asked once for each block
    flow.ready.set()
    task = asyncio.ensure_future(feed(batch, AsyncClient(), permits, flow))
    while len(permits.items) < 4:
        await asyncio.sleep(0.01)
    task.cancel()
    sizes = [len(p) if isinstance(p, list) else 1 for p in permits.items[:4]]
    assert sizes == [full, 3, 1, 1]  # a runner's share of what is left; a single permit (no block) at the last
    assert not isinstance(permits.items[3], list)

async def test_a_runner_takes_permits_only_while_it_holds_fewer_than_its_items_could_use():
    # a runner whose items are done leaves the next block to one that has some
    queue, out = Queue(), Out()
    waiting: asyncio.Queue = asyncio.Queue()
    permits = _Permits(queue, 2, out, same_clock=True, demand=waiting.qsize)
    now = time.time()
    block = tuple((seq, now + 0.05 * seq, now, 300, 0.02, 0.02, seq == 3) for seq in (1, 2, 3))
    queue.q.put_nowait(block)
    await asyncio.sleep(0.05)
    assert queue.q.qsize() == 1 and permits.ready.empty()  # no item here: the block stays for another runner
    waiting.put_nowait(("item", 0))
    permits.wake()  # an item arrived
    while queue.q.qsize():
        await asyncio.sleep(0.005)
    assert permits.ready.qsize() == 3  # taken whole
    queue.q.put_nowait(((4, now + 1, now, 300, 0.02, 0.02, True),))
    await asyncio.sleep(0.05)
    assert queue.q.qsize() == 1  # three permits in hand for one item: no more taken
    for _ in range(3):
        await permits.get()
    getting = asyncio.ensure_future(permits.get())  # a request asks, its stock empty: the next is taken
    seq, _tokens, _due = await asyncio.wait_for(getting, 5)
    assert seq == 4 and queue.q.qsize() == 0
    permits.task.cancel()
    lone = _Permits(Queue(), 1, out, same_clock=True)  # no demand told (a runner of another version): as before
    lone.queue.q.put_nowait((9, now, now, 300, 0.02))
    assert (await asyncio.wait_for(lone.get(), 5))[0] == 9
    lone.task.cancel()
