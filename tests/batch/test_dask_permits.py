"""A cluster runner's permits on their own (nbagent.batch.dask_worker._Permits, _RemoteGate), without a cluster:
a queue the test fills, reports kept in a list. The times are the permits' own: no timing threshold."""

from __future__ import annotations

import asyncio
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
