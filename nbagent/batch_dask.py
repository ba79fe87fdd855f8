"""A batch on a Dask cluster (`engine="dask"` or a `distributed.Client`): items run on the workers' loops.

How the limits hold across the cluster: the batch's `Limiter` stays on the client side. A feeder task on
the client's side takes a permit from it for each request (paced by requests and tokens per minute, paused
after a 429) and puts it in a `distributed.Queue` (the scheduler holds it); a worker's item takes a permit
from that queue before each request, and reports each response (status, rate-limit headers, retry-after)
and each usage on a second queue, which the client's side reads into the same `Limiter`. So one pause
holds for every worker, and the tokens per minute count every worker's usage. `concurrency` bounds the
items submitted at once across the cluster; `max_cost` is checked on the client's side before each item
is submitted, so it holds for the whole cluster too.

Results stream back as their tasks finish. A worker that dies loses nothing: the scheduler runs its tasks
elsewhere; an item's result is taken once (the first to arrive for its index), so none is counted twice.

Keys: an API key never travels in a pickle or a task's arguments (Dask shows those in its logs and
dashboard). The agent is shipped (cloudpickle, scattered once) with its model's key removed and its HTTP
client dropped (each worker makes its own); each worker reads its key from its own environment
(`OPENAI_API_KEY` and the like, set where the worker is started). A key passed as `api_key=` stays in this
process. Calls that need a person follow the headless policy on the worker (`NBAGENT_APPROVAL` there, or
the agent's approver if it can travel), since no one is at a worker to click.

Reads: what the workers send back (results, reports). Who could have written them: the cluster's workers,
which run the person's own code and are as trusted as the person's cluster; a report only feeds the
limiter (which only slows down), and a result is data, rendered escaped.
"""

from __future__ import annotations

import asyncio
import copy
import time
import uuid
from typing import Any

from .permissions import Grants, PermissionPolicy
from .ratelimit import request_gate

__all__ = ["portable_agent", "run_on_cluster"]

_HEADERS = ("retry-after", "retry-after-ms")


def _client_for(engine: Any) -> Any:
    if engine == "dask":
        from distributed import get_client

        return get_client()
    if hasattr(engine, "submit") and hasattr(engine, "scheduler"):
        return engine
    from .errors import ConfigurationError

    raise ConfigurationError(f"engine is 'dask' or a distributed.Client, not {engine!r}")


def portable_agent(agent: Any, original: Any) -> Any:
    """A copy of the item agent that can travel to a worker: no key, no HTTP client, no lock, no approver
    that cannot be pickled (the worker's headless policy decides then). `original`: the agent's own policy."""
    import cloudpickle

    shipped = copy.copy(agent)
    model = copy.copy(agent.model)
    if getattr(model, "http", None) is not None:
        if getattr(model.http, "_given_client", None) is not None:
            from .errors import ConfigurationError

            raise ConfigurationError("a model made with http_client=... cannot run on a cluster: each worker "
                                     "makes its own client")
        http = copy.copy(model.http)
        http._client, http._client_loop = None, None
        http._headers, http._secrets = model._request_headers, model._secret_values  # the copy's, keyless
        model.http = http
    if hasattr(model, "_api_key"):
        model._api_key = None  # the worker reads its own key from its environment
    shipped.model = model
    approver = original.approver
    try:
        cloudpickle.dumps(approver)
    except Exception:
        approver = None
    # a policy travels as data (its grants hold a lock): the worker builds it again (`_policy_on_worker`)
    shipped.policy = None
    shipped._policy_data = (list(original.rules), original.mode, approver,
                            [(grant.tool, grant.pattern) for grant in original.grants])
    return shipped


_WORKER_QUEUES: dict[tuple[str, str], tuple[Any, Any]] = {}
"""On a worker: the permit and report queues of the batches it ran items of."""
_WORKER_AGENTS: dict[str, Any] = {}
"""On a worker: the agents it was sent, unpickled once each (by the hash of their bytes)."""


def _agent_on_worker(blob: bytes) -> Any:
    import hashlib

    import cloudpickle

    digest = hashlib.sha256(blob).hexdigest()
    agent = _WORKER_AGENTS.get(digest)
    if agent is None:
        agent = cloudpickle.loads(blob)
        rules, mode, approver, granted = agent._policy_data
        grants = Grants()
        for tool, pattern in granted:
            grants.add(tool, pattern)
        agent.policy = PermissionPolicy(rules=rules, mode=mode, approver=approver, grants=grants)
        if len(_WORKER_AGENTS) > 16:
            _WORKER_AGENTS.clear()
        _WORKER_AGENTS[digest] = agent
    return agent


class _RemoteGate:
    """The worker's side of the gate: a permit from the client's queue before each request, and reports back."""

    __slots__ = ("permits", "reports", "reserved", "headers", "_pending")

    def __init__(self, permits: Any, reports: Any) -> None:
        self.permits, self.reports = permits, reports
        self.reserved = 0
        self.headers: dict[str, str] = {}
        self._pending: set[asyncio.Task] = set()

    async def before(self, body_bytes: int) -> None:
        self.reserved = int(await self.permits.get())  # a permit carries the tokens the client's side reserved

    def after(self, status: int, headers: Any, retry_after: float | None) -> bool:
        keep = {k: v for k, v in headers.items() if k.lower().startswith(("x-ratelimit", "anthropic-ratelimit"))
                or k.lower() in _HEADERS}
        if status >= 400:  # the client's side must know at once (a 429 pauses every worker)
            self._send({"kind": "after", "status": status, "headers": keep, "retry_after": retry_after,
                        "reserved": self.reserved})
            self.reserved = 0
        else:  # an answer: its headers travel with its usage, in one report (one round trip a request)
            self.headers = keep
        return status == 429

    def settle(self, usage: Any) -> None:
        output = int(getattr(usage, "output_tokens", 0) or 0) if usage is not None else None
        used = (int(getattr(usage, "input_tokens", 0) or 0) + (output or 0)) if usage is not None else self.reserved
        self._send({"kind": "settle", "reserved": self.reserved, "used": used, "output": output,
                    "headers": self.headers})
        self.reserved, self.headers = 0, {}

    def _send(self, report: dict[str, Any]) -> None:
        task = asyncio.get_running_loop().create_task(self.reports.put(report))
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)

    async def drain(self) -> None:
        if self._pending:
            await asyncio.gather(*self._pending, return_exceptions=True)


async def _item_on_worker(agent: Any, prompt: Any, index: int, names: tuple[str, str], max_retries: int,
                          worth_retrying: Any) -> dict[str, Any]:
    """One item on a worker's loop: a whole run, retried like in a local batch (`worth_retrying`: the same
    rule); its outcome as plain data."""
    from distributed import Queue, get_client

    agent = _agent_on_worker(agent)
    client = get_client()
    queues = _WORKER_QUEUES.get(names)
    if queues is None:  # made once per worker and batch: making one is a round trip to the scheduler
        queues = _WORKER_QUEUES[names] = (Queue(names[0], client=client), Queue(names[1], client=client))
        if len(_WORKER_QUEUES) > 16:
            _WORKER_QUEUES.pop(next(iter(_WORKER_QUEUES)))
    gate = _RemoteGate(*queues)
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
                await run
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
        await gate.drain()
    return {"index": index, "status": status, "output": output, "error": error, "usage": usage_total,
            "cost": cost, "attempts": attempts}


async def _call(client: Any, fn: Any, *args: Any, **kwargs: Any) -> Any:
    """A client-side call, awaited on an asynchronous client, in a thread on a synchronous one."""
    if getattr(client, "asynchronous", False):
        return await fn(*args, **kwargs)
    return await asyncio.to_thread(fn, *args, **kwargs)


class _Flow:
    """Permits put in the cluster's queue and not yet used (each use is reported back)."""

    def __init__(self) -> None:
        self.ahead = 0
        self.used = asyncio.Event()


async def _feed(batch: Any, client: Any, permits: Any, done: asyncio.Event, flow: _Flow) -> None:
    """Put permits in the cluster's queue at the limiter's pace, at most `concurrency` ahead of their use (so
    the workers seldom wait on a round trip); permits waiting count against the limiter's burst, so the
    workers can never send more at once than the limiter would."""
    limiter = batch.limiter
    while not done.is_set():
        if flow.ahead >= batch.concurrency:
            flow.used.clear()
            try:
                await asyncio.wait_for(flow.used.wait(), 1.0)
            except asyncio.TimeoutError:  # a worker died holding permits, or is slow: count what is left
                flow.ahead = await _call(client, permits.qsize)
            continue
        tokens = int(limiter.output_per_request) + 64  # the prompt is not known here: settled from the usage
        bucket = limiter.requests
        if bucket is not None:  # permits waiting in the queue are part of the burst: the bucket holds the rest
            bucket.refill(time.monotonic())
            bucket.level = min(bucket.level, bucket.capacity - flow.ahead)
        await limiter.acquire(tokens)
        await _call(client, permits.put, tokens)
        flow.ahead += 1


async def _listen(batch: Any, client: Any, reports: Any, done: asyncio.Event, flow: _Flow) -> None:
    limiter = batch.limiter
    while not done.is_set():
        got = await _call(client, reports.get, batch=True)  # what is there now (at once, empty or not)
        if not got:
            await asyncio.sleep(0.005)
            continue
        for report in got:
            if report.get("kind") == "after":
                flow.ahead = max(0, flow.ahead - 1)
                flow.used.set()
                if report.get("reserved"):
                    limiter.settle(report["reserved"], 0)
                limiter.observe(int(report["status"]), report.get("headers") or {}, report.get("retry_after"))
            elif report.get("kind") == "settle":  # an answered request: its usage and its headers
                flow.ahead = max(0, flow.ahead - 1)
                flow.used.set()
                limiter.settle(int(report["reserved"]), int(report["used"]), report.get("output"))
                limiter.observe(200, report.get("headers") or {})


async def run_on_cluster(batch: Any) -> None:
    """Run the batch's items on the cluster (see the module docstring)."""
    from distributed import Queue

    from .messages import Usage

    client = _client_for(batch.engine)
    loop = asyncio.get_running_loop()
    tag = uuid.uuid4().hex[:8]
    names = (f"nbagent-permits-{batch.id}-{tag}", f"nbagent-reports-{batch.id}-{tag}")
    permits, reports = Queue(names[0], client=client), Queue(names[1], client=client)
    import cloudpickle

    # the agent travels as bytes, scattered once; each worker unpickles it once and keeps its own copy (with
    # its own HTTP client): a used agent holds a client that cannot be pickled, so never ship the object
    blob = cloudpickle.dumps(portable_agent(batch.item_agent, batch.agent.policy))
    shipped = await _call(client, client.scatter, blob, broadcast=True)
    done = asyncio.Event()
    flow = _Flow()
    helpers = [loop.create_task(_feed(batch, client, permits, done, flow)),
               loop.create_task(_listen(batch, client, reports, done, flow))]
    finished: asyncio.Queue = asyncio.Queue()
    todo = list(batch._todo)
    running: dict[int, Any] = {}

    def submit(index: int) -> bool:
        result = batch.results[index]
        try:
            prompt = batch.render(batch.prompt, result.input)
        except Exception as exc:
            batch._finish(result, "failed", error=f"{type(exc).__name__}: {exc}")
            return False
        future = client.submit(_item_on_worker, shipped, prompt, index, names, batch.max_retries, batch.worth_retrying,
                               key=f"nbagent-item-{batch.id}-{tag}-{index}", pure=False, retries=2)
        running[index] = future
        batch._runs[index] = future
        result.attempts += 1
        batch._emit("item_started", result)
        future.add_done_callback(lambda f, i=index: loop.call_soon_threadsafe(finished.put_nowait, (i, f)))
        return True

    try:
        first = True
        while todo or running:
            while todo and len(running) < batch.concurrency and not batch._cancelled and batch.stop_reason is None:
                if batch.max_cost is not None:
                    if not first and not any(r.status == "done" for r in batch.results) and running:
                        break  # the first item runs alone: it measures what an item costs
                    if not batch._within_budget(todo[0]):
                        todo.clear()
                        break
                first = False
                submit(todo.pop(0))
            if not running:
                break
            index, future = await finished.get()
            if running.pop(index, None) is None:
                continue  # taken already: an item is counted once
            batch._runs.pop(index, None)
            result = batch.results[index]
            if batch._cancelled:
                batch._finish(result, "cancelled", error="the batch was cancelled")
                continue
            try:
                outcome = await _call(client, future.result) if not getattr(client, "asynchronous", False) else await future
            except Exception as exc:
                batch._finish(result, "failed", error=f"{type(exc).__name__}: {exc}")
                continue
            result.usage = Usage(**{k: v for k, v in outcome["usage"].items() if k in Usage.__dataclass_fields__})
            result.cost = outcome["cost"]
            result.attempts = outcome["attempts"]
            batch._finish(result, outcome["status"], output=outcome["output"], error=outcome["error"])
            if batch._cancelled:
                for index, future in list(running.items()):
                    await _call(client, future.cancel)
    finally:
        done.set()
        for task in helpers:
            task.cancel()
        await asyncio.gather(*helpers, return_exceptions=True)
        for future in running.values():
            try:
                await _call(client, future.cancel)
            except Exception:
                pass
