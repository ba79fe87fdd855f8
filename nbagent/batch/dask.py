"""A batch on a Dask cluster (`engine="dask"` or a `distributed.Client`): items run on the workers' loops.

The work: one long-lived runner task per worker (nbagent.batch.dask_worker; at most `concurrency` of them), each
running up to its share of the concurrency (the shares add up to it) on the worker's event loop. This side
pushes the items: it puts lists of items (index and prompt) in each runner's own queue, keeping at most
twice its share in the runner's hands (what runs, and what waits there to start the moment a slot frees),
and the runners stream back each item's start, its requests' reports and its outcome on one report queue.
Why the client pushes, rather than the runners pulling from one shared queue: this side then knows which
items each runner holds, so a runner that dies loses nothing (below); a shared queue cannot say who took
what, and a get left waiting at the scheduler by a dead worker takes the next item put there and loses it.
A runner's queue is named after its life (a fresh id each time its task starts), so nothing meant for the
next life can go to a dead one. All queues are `distributed.Queue`s, held by the scheduler.

How the limits hold across the cluster: the batch's `Limiter` stays on this side. A feeder task takes a
permit from it for each request (paced by requests and tokens per minute, cut and paused after a 429) up to
`LEAD` seconds before the permit's time, and puts it in the permit queue with that time (a bounded number
out, waiting there or in a runner's small stock: `dask_permits`); a worker's item takes one before each
request and sends at the permit's time (by the worker's clock, corrected by the least delay its permits took
to arrive), so the requests of all the workers keep the limiter's spacing whatever the queues' delays; a
permit that comes late is used at once, spaced from the worker's previous request. Paced smoothly, consecutive
permits travel in blocks that one worker takes whole, with a gap after each: a worker that sends late then
spaces its own next request from that send, and only a block's last request can meet another worker's
(`dask_permits`). The workers report each response (status, rate-limit headers) and each usage back, which this side reads
into the same `Limiter`. So one limiter paces and learns for every worker, and the tokens per minute count
every worker's usage (a worker that meets a 429 also holds its own requests for the wait the provider said).
`max_cost` is checked on this side before each item is handed out (the first item runs alone), so it holds
for the whole cluster; `max_retries` is applied by the runner, with the local batch's rule.

A worker that dies loses nothing: the scheduler runs its runner's task again elsewhere; the new life's hello
tells this side that the old one is over, and every item the old life held (running or waiting) is handed
out again. An item's result is taken once (the first to arrive for it), so none is counted twice. A runner
whose task fails for good (Dask's `KilledWorker` after repeated deaths) gives its items to the others; with
none left, the items not done fail with its error. Cancelling the batch sends "stop" to every runner (which
cancels its items' runs), waits for the runners' tasks to end, and cancels any that did not.

Keys: an API key never travels in a pickle or a task's arguments (Dask shows those in its logs and
dashboard). The agent is shipped (cloudpickle, scattered once) with its model's key and credential headers
removed and its HTTP client dropped (each worker makes its own), and its bytes are checked to hold no secret
this process knows (`check_no_secret`: a tool that closed over a key refuses to travel). A key given in code
reaches each runner once, sealed to it, in its own queue before any item (`dask_keys`); otherwise a worker
reads its key from its own environment. No item is handed out until every runner has said hello, so a
worker without a key fails the batch at its start with one message. Calls that need a person follow the
headless policy on the worker (`NBAGENT_APPROVAL` there, or the agent's approver if it can travel), since no
one is at a worker to click.

Reads: what the workers send back on the report queue (pickles: reports and results). Who could have
written them: the cluster's workers, or anyone who can reach its scheduler, both of which can already run
any code in the cluster (Dask has no authority inside a cluster), so they are as trusted as the person's
cluster; a report only feeds the limiter (which only slows down), a report for an item that is not out
is ignored, and a result is data, rendered escaped.
"""

from __future__ import annotations

import asyncio
import copy
import pickle
import time
import uuid
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from ..errors import ConfigurationError
from .dask_keys import check_no_secret, missing_key_message, model_secrets, seal, strip_secrets
from .dask_permits import Flow, call, count, feed

__all__ = ["portable_agent", "run_on_cluster"]

PREFETCH = 1.0
"""Items a runner holds waiting, beyond those running, per slot: the next one starts without a round trip."""
def _client_for(engine: Any) -> Any:
    if engine == "dask":
        from distributed import get_client

        return get_client()
    if hasattr(engine, "submit") and hasattr(engine, "scheduler"):
        return engine
    raise ConfigurationError(f"engine is 'dask' or a distributed.Client, not {engine!r}")


def portable_agent(agent: Any, original: Any) -> Any:
    """A copy of the item agent that can travel to a worker: no key, no HTTP client, no lock, no approver
    that cannot be pickled (the worker's headless policy decides then). `original`: the agent's own policy."""
    import cloudpickle

    shipped = copy.copy(agent)
    model = strip_secrets(agent.model)  # a key given in code travels sealed, apart (see dask_keys)
    if getattr(model, "http", None) is not None:
        if getattr(model.http, "_given_client", None) is not None:
            raise ConfigurationError("a model made with http_client=... cannot run on a cluster: each worker "
                                     "makes its own client")
        http = copy.copy(model.http)
        http._client, http._client_loop = None, None
        http._headers, http._secrets = model._request_headers, model._secret_values  # the copy's, keyless
        model.http = http
    shipped.model = model
    approver = original.approver
    try:
        cloudpickle.dumps(approver)
    except Exception:
        approver = None
    # a policy travels as data (its grants hold a lock): the worker builds it again (`batch_worker.agent_on_worker`)
    shipped.policy = None
    shipped._policy_data = (list(original.rules), original.mode, approver,
                            [(grant.tool, grant.pattern) for grant in original.grants])
    return shipped


async def _queue(client: Any, name: str) -> Any:
    from distributed import Queue

    if getattr(client, "asynchronous", False):
        return await Queue(name, client=client)
    return await asyncio.to_thread(Queue, name, client=client)  # made on a synchronous client, it blocks


async def _listen(client: Any, reports: Any, inbox: asyncio.Queue) -> None:
    """The workers' reports, as they come (a message is a list of them), into this side's inbox."""
    while True:
        message = await call(client, reports.get)
        if message == b"end":
            return
        inbox.put_nowait(pickle.loads(message))


@dataclass(eq=False)
class _Life:
    """One life of a runner: its queue, its share, and the items it holds (running or waiting)."""

    runner: int
    queue: Any
    share: int
    worker: str
    held: set[int] = field(default_factory=set)

    @property
    def room(self) -> int:
        return self.share + max(1, int(self.share * PREFETCH)) - len(self.held)


class _Handle:
    """An item running on a worker, in `batch._runs`: `cancel()` stops the batch's runners."""

    __slots__ = ("worker", "_stop")

    def __init__(self, worker: str, stop: Any) -> None:
        self.worker, self._stop = worker, stop

    def cancel(self, reason: str = "") -> None:
        self._stop()


class _Cluster:
    """This side of one batch on a cluster (see the module docstring)."""

    def __init__(self, batch: Any, client: Any) -> None:
        self.batch, self.client = batch, client
        self.loop = asyncio.get_running_loop()
        self.inbox: asyncio.Queue = asyncio.Queue()
        self.flow = Flow()
        self.flow.waiting = self.fewest_to_start
        self.todo: deque[int] = deque(batch._todo)
        self.lives: dict[int, _Life] = {}  # runner -> its current life
        self.where: dict[int, _Life] = {}  # item -> the life holding it
        self.runners: dict[int, Any] = {}  # runner -> its task's future, while it lasts
        self.error: str | None = None
        self.first = True
        self.shares: list[int] = []
        self.names: tuple[str, str, str] = ("", "", "")
        self.secrets = model_secrets(batch.item_agent.model)
        """The key given in code (and credential headers): sealed to each runner on its hello, never pickled."""
        self.greeted: set[int] = set()
        self.failed = False
        self.started = False
        """True once every runner has said hello (no item is handed out before: a missing key fails at once)."""

    def fewest_to_start(self) -> int:
        """The fewest items a runner has yet to start: those it holds that have not started, and its share of
        those not handed out yet (the feeder's blocks are no bigger near the end: `Flow.waiting`)."""
        share = len(self.todo) // max(1, len(self.lives))
        runs = self.batch._runs
        return min((sum(1 for index in life.held if index not in runs) + share for life in self.lives.values()),
                   default=0)

    def wake(self) -> None:
        self.loop.call_soon_threadsafe(self.inbox.put_nowait, [{"kind": "wake"}])

    # -- handing items out -----------------------------------------------------------------------------
    async def dispatch(self) -> None:
        batch = self.batch
        if not self.started:
            if any(runner not in self.greeted for runner in self.runners):
                return
            self.started = True
            self.flow.runners = max(1, len(self.runners))
            self.flow.ready.set()
        sends: dict[_Life, list[tuple[int, Any]]] = {}
        while self.todo and not batch._cancelled and batch.stop_reason is None:
            life = max(self.lives.values(), key=lambda lf: lf.room, default=None)
            if life is None or life.room <= 0:
                break
            if batch.max_cost is not None:
                if not self.first and self.where and not any(r.status == "done" for r in batch.results):
                    break  # the first item runs alone: it measures what an item costs
                if not batch._within_budget(self.todo[0]):
                    self.todo.clear()
                    break
            self.first = False
            index = self.todo.popleft()
            result = batch.results[index]
            try:
                prompt = batch.render(batch.prompt, result.input)
            except Exception as exc:
                batch._finish(result, "failed", error=f"{type(exc).__name__}: {exc}")
                continue
            if not result.key:  # a retried batch's items: the store keys them as they end
                result.key = batch._key(result.input)
            life.held.add(index)
            self.where[index] = life
            sends.setdefault(life, []).append((index, prompt))
        import cloudpickle

        for life, items in sends.items():  # one message per runner: a prompt may be any object
            await call(self.client, life.queue.put, cloudpickle.dumps({"items": items}))

    def retire(self, life: _Life) -> list[Any]:
        """A life that is over: its items go back to the front of the line; its queue gets "stop" (which ends
        a get a dead worker left waiting at the scheduler, or the runner if it still lives)."""
        back = sorted(life.held)
        for index in back:
            self.where.pop(index, None)
            self.batch._runs.pop(index, None)
        self.todo.extendleft(reversed(back))
        life.held.clear()
        if self.lives.get(life.runner) is life:
            del self.lives[life.runner]
        return [life.queue]

    # -- what comes back -------------------------------------------------------------------------------
    async def handle(self, report: dict[str, Any]) -> None:
        batch, kind = self.batch, report.get("kind")
        if kind == "took":  # a permit left the queue: one more can wait there
            self.flow.ahead = max(0, self.flow.ahead - 1)
            self.flow.used.set()
        if kind == "unused" or (kind == "took" and report.get("expired")):  # its slot passed unused: it came too
            # late to be used, or was a block's last given up (sent that late it would bunch with the next)
            self.flow.sent(report.get("seq"))
            batch.limiter.settle(count(report.get("reserved")), 0)
        elif kind == "settle":  # an answered request: its usage and its headers
            seq = report.get("seq")
            batch.limiter.settle(int(report["reserved"]), int(report["used"]), report.get("output"))
            batch.limiter.observe(200, report.get("headers") or {}, seq=seq if isinstance(seq, int) else None,
                                  sent=self.flow.sent(seq))
        elif kind == "after":
            seq, reserved = report.get("seq"), count(report.get("reserved"))
            if reserved:
                batch.limiter.settle(reserved, 0)
            retry_after = report.get("retry_after")
            batch.limiter.observe(int(report["status"]), report.get("headers") or {},
                                  retry_after if isinstance(retry_after, (int, float)) else None,
                                  seq=seq if isinstance(seq, int) else None, sent=self.flow.sent(seq),
                                  reserved=reserved)
        elif kind == "started":
            index = int(report["index"])
            life = self.where.get(index)
            if life is not None and batch.results[index].status == "pending":
                batch._runs[index] = _Handle(life.worker, self.wake)
                batch._emit("item_started", batch.results[index])
        elif kind == "result":
            self.take(int(report["index"]), report["outcome"])
        elif kind == "hello":
            runner = int(report["runner"])
            if runner not in self.runners:
                return  # a runner this side has given up on
            life = _Life(runner, await _queue(self.client, str(report["queue"])), self.shares[runner],
                         str(report.get("worker")))
            old = self.lives.get(runner)
            if old is not None:
                await self._stop(self.retire(old))
            start = self._start(report, life)
            if start is None:
                await self._stop([life.queue])
                return
            await call(self.client, life.queue.put, pickle.dumps(start))  # before any item: its keys
            self.lives[runner] = life
            self.greeted.add(runner)
        elif kind == "ended":
            runner = int(report["runner"])
            future = self.runners.pop(runner, None)
            if future is not None:
                try:
                    await call(self.client, future.result)
                except BaseException as exc:  # noqa: BLE001 - its error (a cancellation too) is the items' error
                    current = asyncio.current_task()
                    if current is not None and current.cancelling():
                        raise
                    self.error = f"{type(exc).__name__}: {exc}"
            life = self.lives.get(runner)
            if life is not None:
                await self._stop(self.retire(life))

    def _start(self, hello: dict[str, Any], life: _Life) -> dict[str, Any] | None:
        """The first message of a runner's life: the model's secrets sealed to it, when there are some; None
        (and the batch fails, with one message) when its worker has no key for the model."""
        from .dask_worker import clock_id

        model = self.batch.item_agent.model
        if self.secrets:
            try:
                return {"start": True, "keys": seal(hello.get("public"), self.secrets, self.context(hello)),
                        "clock": clock_id()}
            except ValueError:
                self.fail(f"worker {life.worker} gave no key to seal the model's key to (it needs the "
                          "cryptography package: pip install 'nbagent[dask]' there); no item was run")
                return None
        if not hello.get("has_key", True):
            problem = hello.get("problem")
            self.fail(missing_key_message(model, life.worker, problem if isinstance(problem, str) else None))
            return None
        return {"start": True, "clock": clock_id()}  # a runner on this kernel reads the client's clock as it is

    def context(self, hello: dict[str, Any]) -> bytes:
        """What a runner's keys are sealed for: this batch, this runner, this life."""
        return f"{self.names[2]}|{hello.get('runner')}|{hello.get('life')}".encode()

    def fail(self, message: str) -> None:
        """The batch stops at once, with one message; nothing more is handed out."""
        if self.batch.stop_reason is None:
            self.batch.stop_reason = message
        self.failed = True
        self.todo.clear()

    def take(self, index: int, blob: bytes) -> None:
        from ..messages import Usage

        batch = self.batch
        result = batch.results[index]
        if result.status != "pending":
            return  # taken already: an item is counted once
        life = self.where.pop(index, None)
        if life is not None:
            life.held.discard(index)
        elif index in self.todo:  # a retired life's result, arrived before the item was handed out again
            self.todo.remove(index)
        else:
            return  # not out (not this batch's item)
        batch._runs.pop(index, None)
        if batch._cancelled:
            batch._finish(result, "cancelled", error="the batch was cancelled")
            return
        outcome = pickle.loads(blob)
        result.usage = Usage(**{k: int(v) for k, v in outcome["usage"].items() if k in Usage.__dataclass_fields__})
        result.cost = outcome["cost"]
        result.attempts = outcome["attempts"]
        batch._finish(result, outcome["status"], output=outcome["output"], error=outcome["error"])

    async def _stop(self, queues: list[Any]) -> None:
        for queue in queues:
            try:
                await call(self.client, queue.put, pickle.dumps({"stop": True}))
                queue.close()
            except Exception:
                pass

    # -- the whole batch -------------------------------------------------------------------------------
    async def run(self, shipped: Any, names: tuple[str, str, str], tag: str) -> None:
        from .dask_worker import runner

        batch, client = self.batch, self.client
        self.names = names
        workers = sorted(await call(client, client.nthreads))
        count = max(1, min(len(workers), batch.concurrency))
        self.shares = shares = [batch.concurrency // count + (1 if i < batch.concurrency % count else 0) for i in range(count)]
        for number, share in enumerate(shares):
            key = f"nbagent-runner-{batch.id}-{tag}-{number}"
            future = client.submit(runner, shipped, names, number, share, batch.max_retries, batch.worth_retrying,
                                   key, key=key, pure=False,
                                   workers=[workers[number]] if workers else None, allow_other_workers=True)
            self.runners[number] = future
            future.add_done_callback(lambda f, n=number: self.loop.call_soon_threadsafe(
                self.inbox.put_nowait, [{"kind": "ended", "runner": n}]))
        while True:
            await self.dispatch()
            if batch._cancelled or self.failed or not (self.todo or self.where):
                break
            if not self.runners:  # every runner failed for good: what is not done fails with its error
                for index in [*self.todo, *self.where]:
                    batch._finish(batch.results[index], "failed", error=self.error or "the cluster's runners ended")
                break
            for report in await self.inbox.get():
                await self.handle(report)

    async def close(self) -> None:
        """Stop every runner, wait for their tasks to end (cancel those that do not), and end what started."""
        batch = self.batch
        await self._stop([life.queue for life in self.lives.values()])
        pending = list(self.runners.values())
        if pending:
            deadline = time.monotonic() + 10.0
            while self.runners and time.monotonic() < deadline:
                try:
                    message = await asyncio.wait_for(self.inbox.get(), deadline - time.monotonic())
                except asyncio.TimeoutError:
                    break
                for report in message:
                    if report.get("kind") == "ended":
                        self.runners.pop(int(report["runner"]), None)
                    elif report.get("kind") == "result":
                        self.take(int(report["index"]), report["outcome"])
            try:
                await call(self.client, self.client.cancel, pending, force=True)
            except Exception:
                pass
        for index in list(batch._runs):  # started and stopped before they ended
            batch._runs.pop(index, None)
            if batch.results[index].status == "pending":
                batch._finish(batch.results[index], "cancelled", error="the batch was cancelled")


async def run_on_cluster(batch: Any) -> None:
    """Run the batch's items on the cluster (see the module docstring)."""
    import cloudpickle

    client = _client_for(batch.engine)
    tag = uuid.uuid4().hex[:8]
    names = (f"nbagent-permits-{batch.id}-{tag}", f"nbagent-reports-{batch.id}-{tag}", f"nbagent-items-{batch.id}-{tag}")
    # the agent travels as bytes, scattered once; each worker unpickles it once and keeps its own copy (with
    # its own HTTP client): a used agent holds a client that cannot be pickled, so never ship the object
    blob = cloudpickle.dumps(portable_agent(batch.item_agent, batch.agent.policy))
    check_no_secret(blob)
    permits, reports = await _queue(client, names[0]), await _queue(client, names[1])
    # a key of its own (hash=False): the same bytes scattered by the batch before, and being released, would
    # lose the new batch its runners' dependency
    shipped = await call(client, client.scatter, blob, broadcast=True, hash=False)
    cluster = _Cluster(batch, client)
    batch._wake = cluster.wake
    loop = asyncio.get_running_loop()
    helpers = [loop.create_task(feed(batch, client, permits, cluster.flow)),
               loop.create_task(_listen(client, reports, cluster.inbox))]
    try:
        await cluster.run(shipped, names, tag)
    finally:
        batch._wake = None
        try:
            await cluster.close()
        finally:
            helpers[0].cancel()
            try:
                await call(client, reports.put, b"end")
                await asyncio.wait_for(helpers[1], 5.0)
            except Exception:
                helpers[1].cancel()
            await asyncio.gather(*helpers, return_exceptions=True)
            for queue in (permits, reports):
                try:
                    queue.close()
                except Exception:
                    pass
