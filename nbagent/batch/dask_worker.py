"""The worker's side of a batch on a Dask cluster: one long-lived runner task per worker (nbagent.batch.dask
starts them), each running up to its share of the batch's concurrency on the worker's event loop.

A runner starts a life of its own (a fresh id, a key pair, and an item queue named after it on the
scheduler), says hello on the batch's report queue (with its public key, and whether this worker has a key
for the model in its environment), and waits for the client's first message: "start", with the model's keys
sealed to this life when the person gave them in code (`dask_keys`), or "stop" when the batch cannot run.
It then takes the lists of items the client's side puts in its queue into a
local queue, from which its slots (as many as its share) take items one at a time. Every request of an item
takes a permit first (`_RemoteGate`), from the few the runner keeps taken from the batch's permit queue
ahead of its requests (`_Permits`); each item's start, each response
(status, rate-limit headers) and usage, and each item's outcome go back on the report queue, gathered in one
message per round trip (`_Outbox`): what gathers while one message travels goes in the next.

A runner ends on the client's "stop", or within `_POLL` seconds of its task being cancelled or released
(the client's side gone; a get it leaves waiting at the scheduler is on its own life's queue, which no one
puts to after): it cancels its items' runs and flushes its reports. Dask does not interrupt a
running task, so the runner watches its own task's state.

Reads: the messages in its item queue (pickles: lists of items and their prompts). Who could have written
them: anyone who can reach the cluster's scheduler, which can run any code on the workers anyway (Dask has
no authority inside a cluster), so a pickle gives nothing more; the queue's name holds the runner's random
life id, so no other batch writes there by mistake. The agent (unpickled from the bytes the client
scattered) holds no key: it gets the one sealed to this life, or reads its own from this worker's environment.
"""

from __future__ import annotations

import asyncio
import hashlib
import pickle
import time
import uuid
from collections import deque
from typing import Any, Self

from ..budget.ratelimit import MAX_PAUSE, request_gate
from ..budget.sending import SPIN, wait_until
from ..budget.ratelimit_headers import read_limits
from ..calls.permissions import Grants, PermissionPolicy
from ..errors import ConfigurationError
from .dask_keys import KeyPair, give_keys, has_key
from .dask_permits import GAP

__all__ = ["agent_on_worker", "clock_id", "runner"]

_HEADERS = ("retry-after", "retry-after-ms", "ratelimit-policy")
STALE = 0.25
"""Seconds after its time a permit is no longer used."""
KEEP = 2
"""Takes from the permit queue (a block, or a single permit) a runner holds ahead of its requests."""
_LOOK = 0.002
"""Seconds between two looks at whether a block's last permit still goes in time (`_RemoteGate.send`)."""
_POLL = 0.5
"""Every this many seconds a runner looks whether its task is still wanted."""

_AGENTS: dict[str, Any] = {}
"""On a worker: the agents it was sent, unpickled once each (by the hash of their bytes)."""


def clock_id() -> str | None:
    """The kernel this process runs on (Linux's boot id): processes on one kernel read one wall clock, so a
    runner there uses a permit's time as it is, with no offset estimated (None: not known, estimated)."""
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as f:
            return f.read(64).strip() or None
    except OSError:
        return None


def agent_on_worker(blob: bytes) -> Any:
    import cloudpickle

    digest = hashlib.sha256(blob).hexdigest()
    agent = _AGENTS.get(digest)
    if agent is None:
        agent = cloudpickle.loads(blob)
        rules, mode, approver, granted = agent._policy_data
        grants = Grants()
        for tool, pattern in granted:
            grants.add(tool, pattern)
        agent.policy = PermissionPolicy(rules=rules, mode=mode, approver=approver, grants=grants)
        if len(_AGENTS) > 16:
            _AGENTS.clear()
        _AGENTS[digest] = agent
    return agent


class _Outbox:
    """Reports to the client's side: one message on the report queue per round trip, holding all that
    gathered while the last one travelled (a 429's report waits at most one round trip)."""

    def __init__(self, queue: Any) -> None:
        self.queue = queue
        self.items: list[dict[str, Any]] = []
        self.task: asyncio.Task | None = None

    def add(self, report: dict[str, Any]) -> None:
        self.items.append(report)
        if self.task is None or self.task.done():
            self.task = asyncio.get_running_loop().create_task(self._send())

    async def _send(self) -> None:
        while self.items:
            message, self.items = self.items, []
            await self.queue.put(pickle.dumps(message))

    async def flush(self) -> None:
        while self.task is not None and not self.task.done():
            await asyncio.gather(self.task, return_exceptions=True)
        if self.items:
            await self._send()


class _Permits:
    """This runner's permits: up to `keep` blocks (or single permits) taken from the batch's permit queue ahead of
    its requests, so a request seldom waits on a round trip to the scheduler. The client's side counts a permit
    as waiting until a request uses it (the "took" report), so the permits waiting here and in the queue
    together are never more than it allows.

    A permit is `(number, time, put, tokens, spacing, interval, closes)` (nbagent.batch.dask_permits): the time
    its request may go and when the client put it, by the client's wall clock. This runner reads them by its own
    clock plus an offset, the least of (arrival - put) over the recent permits: the clocks' difference plus the
    quickest delivery (on one machine, a millisecond or less). A permit that came in time is used at its time;
    one that came late (a busy cluster, or slots that were all taken) is used at once, but never sooner than
    `spacing` (the limiter's interval times the number of runners, when it paces smoothly) after this runner's
    previous request, so permits that waited do not go out together, on this worker or across them; one more
    than `STALE` seconds late is not used (its slot is long past) and is reported so. A permit of a block goes no
    sooner than `interval` after this runner's previous actual send (`_RemoteGate.send`). A runner keeps few
    permits (`KEEP`): one it holds while its slots are all busy is one another runner could have used; and it takes
    from the queue only while it holds fewer than its items could use (`demand`: the items waiting for a slot, and
    the requests waiting for a permit), so a runner whose items are done leaves the next block to one that has
    some (a block it took would hold the slots of the next `BLOCK_SECONDS` for nobody: the end of a batch lost
    about 0.15 s to it)."""

    def __init__(self, queue: Any, keep: int, out: _Outbox, same_clock: bool = False, demand: Any = None) -> None:
        self.queue, self.out = queue, out
        self.demand = demand
        """How many items here wait for a slot (None: take whenever there is room, as if there were always some)."""
        self.asking = 0
        """Requests waiting in `get` for a permit."""
        self.wanted = asyncio.Event()
        self.same_clock = same_clock
        """The client's wall clock is this runner's (one kernel): no offset is estimated (the least delivery time
        of each runner's permits differs, and would shift their schedules apart)."""
        self.ready: asyncio.Queue = asyncio.Queue()
        self.room = asyncio.Semaphore(max(1, keep))
        self.delays: deque[float] = deque(maxlen=64)
        self.last = 0.0
        """By this runner's wall clock: when its latest request went (or is due to go)."""
        self.sent = 0.0
        """By this runner's wall clock: when its latest request actually went."""
        self.writes: deque[float] = deque(maxlen=64)
        """How long the recent writes took, from the end of the wait to the trace's word that they were done."""
        self.late = 0.0
        """How late the latest permit came (0: in time)."""
        self.hold_until = 0.0
        """By this runner's wall clock: no request before it (a 429 this runner met said to wait)."""
        self.task = asyncio.get_running_loop().create_task(self._fill())

    def wake(self) -> None:
        """Items arrived (or a request asks): the stock may be less than they could use now."""
        self.wanted.set()

    def _short(self) -> bool:
        return self.demand is None or self.ready.qsize() < self.demand() + self.asking

    async def _fill(self) -> None:
        while True:
            await self.room.acquire()
            while not self._short():  # nothing here would use another take yet
                self.wanted.clear()
                await self.wanted.wait()
            taken = await self.queue.get()
            if not isinstance(taken, (list, tuple)) or not taken:
                self.room.release()
                continue
            # a block is a sequence of permits (the cluster's wire makes lists tuples), a permit one of numbers
            block = list(taken) if taken and isinstance(taken[0], (list, tuple)) else [taken]
            try:
                self.delays.append(time.time() - float(block[0][2]))
            except (TypeError, ValueError, IndexError):
                pass
            for i, permit in enumerate(block):
                self.ready.put_nowait((permit, i == len(block) - 1))

    async def get(self) -> Permit:
        """Wait for a permit: its number, the tokens it carries, the time (this runner's wall clock) its request
        may go (`_RemoteGate.send` waits for it), and its block's spacing and end."""
        while True:
            if self.ready.empty():
                self.asking += 1
                self.wake()
                try:
                    permit, ends_stock = await self.ready.get()
                finally:
                    self.asking -= 1
            else:
                permit, ends_stock = self.ready.get_nowait()
            if ends_stock:  # the last of what one take brought: room for another
                self.room.release()
            try:
                seq, when, _put, tokens, spacing, *block = permit
                interval, closes = (float(block[0]), bool(block[1])) if len(block) >= 2 else (0.0, False)
                due = float(when) + (min(self.delays) if self.delays and not self.same_clock else 0.0)
            except (TypeError, ValueError):  # not a permit (another version's client): skipped, not a hang
                continue
            now = time.time()
            if now - due > STALE:  # its slot is long past: using it would only add to a burst
                self.out.add({"kind": "took", "seq": seq, "expired": True, "reserved": tokens})
                continue
            self.late = max(0.0, now - due)
            planned = due
            if due < now or due < self.hold_until:  # late, or held: spaced from this runner's previous request
                due = max(now, self.hold_until, self.last + min(max(float(spacing), 0.0), 5.0))
            self.last = due
            return Permit(seq, int(tokens), due, planned, min(max(interval, 0.0), 5.0), closes)


class Permit(tuple):
    """What `_Permits.get` gives: `(seq, tokens, due)`, and the block's `interval` and whether it `closes` one,
    with the time it was `planned` for."""

    def __new__(cls, seq: int, tokens: int, due: float, planned: float = 0.0, interval: float = 0.0,
                closes: bool = False) -> Self:
        self = super().__new__(cls, (seq, tokens, due))
        self.planned, self.interval, self.closes = planned, interval, closes
        return self


class _RemoteGate:
    """The worker's side of the gate: a permit (from the client's queue, by `_Permits`) before each request,
    and reports back."""

    __slots__ = ("permits", "out", "reserved", "headers", "seq", "due", "sent", "permit")

    def __init__(self, permits: Any, out: _Outbox) -> None:
        self.permits, self.out = permits, out
        self.reserved = 0
        self.headers: dict[str, str] = {}
        self.seq: int | None = None
        self.due = 0.0
        self.sent: float | None = None
        self.permit: Permit | None = None

    async def before(self, body_bytes: int, early: bool = False) -> None:
        """A permit (`early`: the transport calls `send` just before it writes; else its time is waited for here)."""
        await self._take()
        self.sent = None
        if not early:
            await self.send()

    async def _take(self) -> None:
        # a permit carries the tokens the client reserved
        self.permit = permit = await self.permits.get()
        self.seq, self.reserved, self.due = permit
        # used: the client's side may put another in the queue
        self.out.add({"kind": "took", "seq": self.seq, "late": round(self.permits.late, 4)})

    async def send(self) -> None:
        """Wait for the permit's time, slept then spun to the moment (nbagent.budget.sending); once per attempt.
        A request that goes late moves this runner's next one with it; in a block, the next is also spaced from
        this runner's previous actual send, and a block's last that would go later than the gap after it covers
        gives its slot up and takes another permit (nbagent.batch.dask_permits)."""
        if self.sent is not None:
            return
        permits = self.permits
        while True:
            permit = self.permit
            interval = permit.interval if permit is not None else 0.0
            if permit is None or not permit.closes:
                break
            # a block's last: looked at again until its time is near (this runner's sends before it move it)
            due = max(self.due, permits.sent + interval)
            if due - permit.planned > GAP:
                self.out.add({"kind": "unused", "seq": self.seq, "reserved": self.reserved})
                self.reserved = 0
                await self._take()
                continue
            left = due - time.time()
            if left <= SPIN + _LOOK:
                break
            await asyncio.sleep(min(left - SPIN, _LOOK))
        self.sent = await wait_until(lambda: max(self.due, permits.sent + interval), time.time)
        permits.last = max(permits.last, self.sent)
        permits.sent = max(permits.sent, self.sent)

    def written(self) -> None:
        """The request's body was written (the transport's trace): this runner's next request in a block is spaced
        from when the write began, the end less the least time a write took here (the write can wait for the
        event loop after `send`, and its end is told a little after the bytes left)."""
        if self.sent is None:
            return
        permits, now = self.permits, time.time()
        permits.writes.append(now - self.sent)
        permits.sent = max(permits.sent, now - min(permits.writes))

    def after(self, status: int, headers: Any, retry_after: float | None) -> float | None:
        keep = {k: v for k, v in headers.items() if k.lower().startswith(("x-ratelimit", "anthropic-ratelimit"))
                or k.lower() in _HEADERS}
        if status >= 400:  # the client's side must know at once (a 429 cuts and pauses every worker)
            self.out.add({"kind": "after", "status": status, "headers": keep, "retry_after": retry_after,
                          "reserved": self.reserved, "seq": self.seq})
            self.reserved = 0
        else:  # an answer: its headers travel with its usage, in one report
            self.headers = keep
        if status != 429:
            return None
        said = read_limits(headers)
        wait = said.wait(said.exhausted()) or retry_after or 0.0
        self.permits.hold_until = max(self.permits.hold_until, time.time() + min(wait, MAX_PAUSE))
        return wait

    def settle(self, usage: Any) -> None:
        output = int(getattr(usage, "output_tokens", 0) or 0) if usage is not None else None
        used = (int(getattr(usage, "input_tokens", 0) or 0) + (output or 0)) if usage is not None else self.reserved
        self.out.add({"kind": "settle", "reserved": self.reserved, "used": used, "output": output,
                      "headers": self.headers, "seq": self.seq})
        self.reserved, self.headers = 0, {}


async def _run_item(agent: Any, prompt: Any, gate: _RemoteGate, max_retries: int, worth_retrying: Any) -> dict[str, Any]:
    """One item: a whole run, retried like in a local batch (`worth_retrying`: the same rule); its outcome as
    plain data. Cancelled (the batch stopped), it cancels its run before it ends."""
    token = request_gate.set(gate)
    usage_total: dict[str, int] = {}
    cost = None
    attempts = 0
    try:
        while True:
            attempts += 1

            def on_event(event: Any) -> None:
                if getattr(event, "kind", None) == "model_response":
                    gate.settle(getattr(event.message, "usage", None))

            run = agent.start(prompt, history=[], on_event=on_event)
            try:
                await asyncio.shield(run.wait())
            except asyncio.CancelledError:
                run.cancel("the batch was cancelled")
                raise
            except Exception:
                pass
            for k in run.usage.__dataclass_fields__:
                usage_total[k] = usage_total.get(k, 0) + int(getattr(run.usage, k) or 0)
            if run.cost is not None:
                cost = (cost or 0.0) + run.cost
            if run.status == "done":
                status, error, output = "done", None, run.output
                break
            error = f"{type(run.error).__name__}: {run.error}" if run.error is not None else (run.stop_reason or run.status)
            if not worth_retrying(run.error) or attempts > max_retries:
                status, output = "failed", None
                break
    finally:
        request_gate.reset(token)
    return {"status": status, "output": output, "error": error, "usage": usage_total, "cost": cost,
            "attempts": attempts}


async def _slot(agent: Any, waiting: asyncio.Queue, permits: Any, out: _Outbox, max_retries: int,
                worth_retrying: Any) -> None:
    import cloudpickle

    while True:
        index, prompt = await waiting.get()
        out.add({"kind": "started", "index": index})
        outcome = await _run_item(agent, prompt, _RemoteGate(permits, out), max_retries, worth_retrying)
        try:  # the output may be any object (a pydantic model): it travels as a pickle of its own
            blob = cloudpickle.dumps(outcome)
        except Exception as exc:
            blob = cloudpickle.dumps({**outcome, "status": "failed", "output": None,
                                      "error": f"the output could not travel back from the worker: {exc}"})
        out.add({"kind": "result", "index": index, "outcome": blob})


def _key_pair() -> KeyPair | None:
    try:
        return KeyPair()
    except ConfigurationError:  # no `cryptography` here: the client's side says so if a key must come
        return None


def _wanted(worker: Any, key: Any) -> bool:
    state = getattr(worker, "state", None)
    tasks = getattr(state, "tasks", None)
    if tasks is None:
        return True
    task = tasks.get(key)
    return task is not None and task.state in ("executing", "long-running")


async def runner(blob: bytes, names: tuple[str, str, str], number: int, share: int, max_retries: int,
                 worth_retrying: Any, key: str) -> int:
    """Runner `number` of a batch on this worker (see the module docstring), its task's key `key`; returns how
    many items it took."""
    from distributed import Queue, get_client, get_worker

    worker = get_worker()
    client = get_client()
    agent = agent_on_worker(blob)
    life = uuid.uuid4().hex[:12]
    permits, reports, inbox = await asyncio.gather(Queue(names[0], client=client), Queue(names[1], client=client),
                                                   Queue(f"{names[2]}-{number}-{life}", client=client))
    out = _Outbox(reports)
    pair = _key_pair()
    ready, problem = has_key(agent.model)  # a key of its own (its environment's), should none be sent
    out.add({"kind": "hello", "runner": number, "life": life, "queue": inbox.name, "worker": worker.address,
             "public": pair.public if pair is not None else None, "has_key": ready, "problem": problem})
    waiting: asyncio.Queue = asyncio.Queue()
    loop = asyncio.get_running_loop()
    stock: _Permits | None = None
    slots: list[asyncio.Task] = []
    taken = 0

    async def watch() -> None:  # Dask does not stop a running task: the runner looks at its own
        while _wanted(worker, key):
            await asyncio.sleep(_POLL)

    watcher = loop.create_task(watch())
    try:
        while True:
            getting = loop.create_task(inbox.get())
            await asyncio.wait([getting, watcher], return_when=asyncio.FIRST_COMPLETED)
            if not getting.done():  # the task was cancelled or released: the client's side is gone
                getting.cancel()
                break
            message = pickle.loads(getting.result())
            if message.get("stop"):
                break
            if message.get("start"):  # the first message: the model's keys sealed to this life, if any
                if message.get("keys") is not None and pair is not None:
                    agent = give_keys(agent, pair.open(message["keys"], f"{names[2]}|{number}|{life}".encode()))
                mine = clock_id()
                stock = _Permits(permits, min(share, KEEP), out, mine is not None and message.get("clock") == mine,
                                 demand=waiting.qsize)
                slots = [loop.create_task(_slot(agent, waiting, stock, out, max_retries, worth_retrying))
                         for _ in range(share)]
                continue
            for item in message["items"]:
                waiting.put_nowait(tuple(item))
                taken += 1
            if stock is not None:
                stock.wake()
    finally:
        watcher.cancel()
        if stock is not None:
            stock.task.cancel()
        for slot in slots:
            slot.cancel()
        await asyncio.gather(*slots, return_exceptions=True)
        try:
            await asyncio.wait_for(out.flush(), 5.0)
        finally:
            for queue in (permits, reports, inbox):
                queue.close()
    return taken
