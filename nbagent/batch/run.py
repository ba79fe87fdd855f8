"""One agent over many inputs: `Agent.map(inputs, prompt, ...)` -> a `BatchRun`, returned at once.

    batch = agent.map(df, "Label this ticket: {text}", output_type=Label, concurrency=8,
                      rate_limit=RateLimit(requests_per_minute=500, tokens_per_minute=200_000), max_cost=2.0)
    await batch
    batch.results[3].output; batch.to_pandas(); batch.retry_failed()

Each item is a whole run of the agent (tools, repair ladder, permissions, `output_type`), with no history:
items do not see each other. `concurrency` workers take items in input order; every request of every item
passes the batch's `Limiter` (nbagent.budget.ratelimit), so the requests and tokens per minute hold for the whole
batch and a 429 pauses the batch once. `max_cost` stops starting items before the next one's estimated
cost would pass the budget: the dearest item done so far; while none is done (the first item runs alone to
measure it, and may fail), the dearest item that ended, and at least what the item's first request costs at
the model's price (`first_request_cost`: its prompt, the instructions and tool schemas in, 1,000 tokens out),
reserved for every item in flight, so a failing first item does not let every worker start on nothing.

Approvals: a call that needs a person waits in `batch.pending_approvals` while the other items go on, when
a person is there to answer (`batch.ask_here()`, which the notebook's batch view calls); otherwise the
agent's approver, or the headless policy (`NBAGENT_APPROVAL`), decides as it would in a single run.

Reads: the inputs (data the person passed: their text reaches the model, which may be prompt-injected by
it: each item's run is under the same permissions as a single run, and a grant made in one item is a grant
for all), and with `resume=` a stored batch (see nbagent.batch.store for what stops a forged one).
"""

from __future__ import annotations

import asyncio
import copy
import time
import uuid
from typing import Any, Callable

from ..budget.pricing import format_cost, price_known, request_cost
from ..budget.ratelimit import ItemGate, Limiter, RateLimit, request_gate
from ..budget.window import CHARS_PER_TOKEN, estimate_prompt_extra
from ..calls.permissions import PermissionPolicy
from ..decisions import Decision
from ..errors import ConfigurationError
from ..messages import Usage
from .items import ItemResult, PendingApproval, jsonable, render_prompt, rows, type_name, worth_retrying
from .store import BatchWriter, check_id, item_key, latest_batch, load_batch

__all__ = ["BatchRun", "ItemResult", "PendingApproval", "start_batch"]

STATUSES = ("done", "failed", "cancelled", "pending")


FIRST_OUTPUT_TOKENS = 1_000
"""Output tokens an item's first request is reckoned to cost before any item is measured (the run's own
budget check reckons a request's answer the same way)."""


class BatchRun:
    """A batch of runs in flight: `await batch`; `results`; `to_pandas()`; `cancel()`; `retry_failed()`."""

    render = staticmethod(render_prompt)
    worth_retrying = staticmethod(worth_retrying)

    def __init__(self, agent: Any, inputs: Any, prompt: str | Callable[[Any], Any], *, output_type: Any = None,
                 concurrency: int = 8, rate_limit: RateLimit | None = None, max_retries: int = 3,
                 max_cost: float | None = None, engine: Any = None, session: Any = None, resume: str | None = None,
                 limiter: Any = None, only: list[int] | None = None) -> None:
        if not isinstance(prompt, str) and not callable(prompt):
            raise ConfigurationError(f"prompt is a str.format template or a function of the item, not {type(prompt).__name__}")
        if not isinstance(concurrency, int) or concurrency < 1:
            raise ConfigurationError(f"concurrency must be a positive integer, not {concurrency!r}")
        if not isinstance(max_retries, int) or max_retries < 0:
            raise ConfigurationError(f"max_retries must be an integer >= 0, not {max_retries!r}")
        if rate_limit is not None and not isinstance(rate_limit, RateLimit):
            raise ConfigurationError("rate_limit is a nbagent.RateLimit(requests_per_minute=..., tokens_per_minute=..., "
                                     "burst=None)")
        if agent.model is None:
            raise ConfigurationError("this agent has no model: pass Agent(model=...)")
        model = agent.model
        if max_cost is not None:
            if not (isinstance(max_cost, (int, float)) and max_cost >= 0):
                raise ConfigurationError(f"max_cost is US dollars (a number >= 0) or None, not {max_cost!r}")
            if not price_known(getattr(model, "name", None), getattr(model, "provider", None)):
                raise ConfigurationError(f"max_cost needs a model with a known price; {model!r} has none")
        try:
            self.loop = asyncio.get_running_loop()
        except RuntimeError:
            raise ConfigurationError("agent.map() needs a running event loop (in a notebook there is one); in a "
                                     "script: `async def main(): await agent.map(...)` and asyncio.run(main())") from None
        self.agent = agent
        self.prompt = prompt
        self.output_type = output_type if output_type is not None else agent.output_type
        self.concurrency = concurrency
        self.rate_limit = rate_limit
        self.max_retries = max_retries
        self.max_cost = max_cost
        self.engine = engine
        self.limiter = limiter if limiter is not None else Limiter(rate_limit)
        self.item_agent = self._item_agent()
        items, labels = rows(inputs)
        self.results: list[ItemResult] = [ItemResult(i, item, label=labels[i]) for i, item in enumerate(items)]
        self.pending_approvals: list[PendingApproval] = []
        self.stop_reason: str | None = None
        self.status = "running"
        self.started_at = time.monotonic()
        self.finished_at: float | None = None
        self._listeners: list[Callable[[str, Any], Any]] = []
        self._ask_here = False
        self._cancelled = False
        self._runs: dict[int, Any] = {}
        self._reserved: dict[int, float] = {}
        self._probe = asyncio.Event()
        self._wake: Callable[[], None] | None = None
        """Set while a cluster runs the items: `cancel()` tells it at once."""
        self._tools = sorted(getattr(t, "name", repr(t)) for t in agent.tools)
        self._model_spec = getattr(model, "spec", repr(model))
        self._todo = [i for i in (only if only is not None else range(len(items)))]
        try:
            self.id = check_id(resume) if isinstance(resume, str) else uuid.uuid4().hex[:12]
        except ValueError as exc:
            raise ConfigurationError(str(exc)) from None
        self.resumed = 0
        """Items taken as done from the stored batch instead of being asked again."""
        self.store: BatchWriter | None = None
        if resume is True:
            found = latest_batch(agent.workspace)
            if found is None:
                raise ConfigurationError(f"no stored batch in {agent.workspace} to resume")
            self.id = found
        if session or resume:
            self._open_store(resume is not None and resume is not False)
        self._task = self.loop.create_task(self._main(), name=f"nbagent-batch-{self.id}")

    # -- setup -----------------------------------------------------------------------------------------
    def _item_agent(self) -> Any:
        """The agent each item runs as: the same tools, rules and grants, no stored conversation, the
        batch's output type, and the batch's way of asking a person."""
        agent = copy.copy(self.agent)
        agent.output_type = self.output_type
        agent.session_id = None
        agent.conversation = []
        original = self.agent.policy
        agent.policy = PermissionPolicy(rules=list(original.rules), mode=original.mode, approver=self._approve,
                                        grants=original.grants)
        return agent

    def _open_store(self, resuming: bool) -> None:
        workspace = self.agent.workspace
        done: dict[str, dict[str, Any]] = {}
        if resuming:
            try:
                _, stored = load_batch(workspace, self.id)
            except ValueError as exc:
                raise ConfigurationError(str(exc)) from None
            done = {k: v for k, v in stored.items() if v.get("status") == "done"}
        self.store = BatchWriter(workspace, self.id, header={
            "model": self._model_spec, "prompt": self.prompt if isinstance(self.prompt, str) else
            getattr(self.prompt, "__qualname__", "a function"), "size": len(self.results), "tools": self._tools})
        todo = []
        for i in self._todo:
            result = self.results[i]
            try:
                result.key = self._key(result.input)
            except ConfigurationError:
                todo.append(i)
                continue
            fact = done.get(result.key)
            if fact is not None and self._take_stored(result, fact):
                self.resumed += 1
            else:
                todo.append(i)
        self._todo = todo

    def _key(self, item: Any) -> str:
        return item_key(render_prompt(self.prompt, item), self._model_spec, self._tools, type_name(self.output_type))

    def _take_stored(self, result: ItemResult, fact: dict[str, Any]) -> bool:
        output = fact.get("output")
        if self.output_type is not None:
            try:
                from pydantic import TypeAdapter

                output = TypeAdapter(self.output_type).validate_python(output)
            except Exception:
                return False  # a stored output that does not fit the type is asked again
        usage = fact.get("usage") if isinstance(fact.get("usage"), dict) else {}
        result.output, result.status, result.error = output, "done", None
        result.usage = Usage(**{k: int(v) for k, v in usage.items()
                                if k in Usage.__dataclass_fields__ and isinstance(v, int)})
        cost = fact.get("cost")
        result.cost = float(cost) if isinstance(cost, (int, float)) else None
        return True

    # -- the work ----------------------------------------------------------------------------------------
    async def _main(self) -> None:
        try:
            if self.engine is not None:
                from .dask import run_on_cluster  # needs distributed, imported only for a cluster

                await run_on_cluster(self)
            else:
                queue = iter(self._todo)
                workers = [self.loop.create_task(self._worker(queue, n == 0)) for n in range(self.concurrency)]
                await asyncio.gather(*workers)
        finally:
            if self.store is not None:
                await self.store.close()
            for waiting in self.pending_approvals:
                waiting.deny("the batch ended")
            self.finished_at = time.monotonic()
            if self._cancelled:
                self.status = "cancelled"
            elif self.stop_reason is not None:
                self.status = "stopped"
            else:
                self.status = "done"
            self._emit("finished", None)

    async def _worker(self, queue: Any, first: bool) -> None:
        for index in queue:
            if self._cancelled or self.stop_reason is not None:
                return
            if self.max_cost is not None:
                if not first:
                    await self._probe.wait()  # the first item runs alone: it measures what an item costs
                if self._cancelled or not self._within_budget(index):
                    return
            await self._run_item(self.results[index])
            if first:
                self._probe.set()

    def _estimate(self, index: int | None = None) -> float:
        costs = [r.cost for r in self.results if r.status == "done" and r.cost is not None]
        if costs:
            return max(costs)
        ended = [r.cost for r in self.results if r.status != "pending" and r.cost is not None]
        first = self.first_request_cost(index) if index is not None else 0.0
        return max([first, *ended])

    def first_request_cost(self, index: int) -> float:
        """What item `index`'s first request costs at the model's price: its prompt, the instructions and the
        tool schemas in (about four characters a token), `FIRST_OUTPUT_TOKENS` out. What an item is
        reserved while no item has been measured (done) yet."""
        model = self.agent.model
        try:
            prompt = render_prompt(self.prompt, self.results[index].input)
        except Exception:
            prompt = ""
        instructions = self.agent.instructions if isinstance(self.agent.instructions, str) else None
        tokens = int(len(str(prompt)) / CHARS_PER_TOKEN) + estimate_prompt_extra(instructions, self.agent.tools)
        cost = request_cost(Usage(tokens, FIRST_OUTPUT_TOKENS), getattr(model, "name", None),
                            getattr(model, "provider", None))
        return cost or 0.0

    def spent(self) -> float:
        """Dollars spent so far by the items that ended (in-flight items count when they end)."""
        return sum(r.cost or 0.0 for r in self.results if r.status != "pending")

    def _within_budget(self, index: int) -> bool:
        estimate = self._estimate(index)
        committed = self.spent() + sum(self._reserved.values())
        if committed + estimate > self.max_cost:  # type: ignore[operator]
            if self.stop_reason is None:
                left = sum(1 for r in self.results if r.status == "pending") - len(self._reserved)
                self.stop_reason = (f"max_cost: {format_cost(committed)} of {format_cost(self.max_cost)} spent or "
                                    f"committed; the next item (about {format_cost(estimate)}) would pass it, so "
                                    f"{left} item(s) were not started")
            return False
        self._reserved[index] = estimate
        return True

    async def _run_item(self, result: ItemResult) -> None:
        try:
            prompt = render_prompt(self.prompt, result.input)
            if not result.key:
                result.key = item_key(prompt, self._model_spec, self._tools, type_name(self.output_type))
        except Exception as exc:
            self._finish(result, "failed", error=f"{type(exc).__name__}: {exc}")
            return
        gate = ItemGate(self.limiter)
        token = request_gate.set(gate)  # the run's task copies this context: its requests pass the gate
        try:
            while True:
                result.attempts += 1
                self._emit("item_started", result)
                run = self.item_agent.start(prompt, history=[], on_event=_settler(gate))
                result.run = run
                self._runs[result.index] = run
                try:
                    await asyncio.shield(run.wait())
                except asyncio.CancelledError:
                    current = asyncio.current_task()
                    if current is not None and current.cancelling():  # this worker is being cancelled
                        run.cancel("the batch was cancelled")
                        raise
                except Exception:
                    pass  # the run's status and error say what happened
                finally:
                    self._runs.pop(result.index, None)
                result.usage = result.usage + run.usage
                result.cost = (result.cost or 0.0) + run.cost if run.cost is not None else result.cost
                if run.status == "done":
                    self._finish(result, "done", output=run.output)
                    return
                if run.status == "cancelled" or self._cancelled:
                    self._finish(result, "cancelled", error=run.stop_reason or "cancelled")
                    return
                error = run.error
                message = f"{type(error).__name__}: {error}" if error is not None else (run.stop_reason or run.status)
                if not worth_retrying(error) or result.attempts > self.max_retries:
                    self._finish(result, "failed", error=message)
                    return
                result.error = message
        finally:
            request_gate.reset(token)

    def _finish(self, result: ItemResult, status: str, *, output: Any = None, error: str | None = None) -> None:
        self._reserved.pop(result.index, None)
        result.status, result.output, result.error = status, output, error
        run = result.run
        if run is not None:
            result.elapsed = run.elapsed
        if self.store is not None and status in ("done", "failed") and result.key:
            self.store.add({"key": result.key, "index": result.index, "status": status, "output": jsonable(output),
                            "error": error, "cost": result.cost,
                            "usage": {k: getattr(result.usage, k) for k in Usage.__dataclass_fields__}})
        self._emit("item_finished", result)

    # -- approvals ---------------------------------------------------------------------------------------
    def ask_here(self) -> BatchRun:
        """Calls that need a person wait in `pending_approvals` (answered there or in the batch view)
        instead of going to the agent's approver; the other items go on meanwhile."""
        self._ask_here = True
        return self

    async def _approve(self, request: Any) -> Decision:
        if not self._ask_here:
            return await self.agent.policy.ask(request)  # the agent's approver, or the headless policy
        index = next((i for i, run in self._runs.items() if request.call in run.calls), -1)
        waiting = PendingApproval(index, request, self.loop.create_future())
        self.pending_approvals.append(waiting)
        self._emit("approval", waiting)
        try:
            decision = await waiting.future
        finally:
            if waiting in self.pending_approvals:
                self.pending_approvals.remove(waiting)
        if decision.allow and decision.remember:  # calls waiting that the new grant covers go on now
            self.agent.policy.remember(request.tool, decision, request)
            for other in list(self.pending_approvals):
                if self.agent.policy.grants.find(other.request.tool, other.request.arguments) is not None:
                    other.future.set_result(Decision(True, source="grant", reason=f"approved with {waiting.label}"))
            decision = Decision(True, source=decision.source, reason=decision.reason)
        self._emit("approval_decided", waiting)
        return decision

    # -- the handle --------------------------------------------------------------------------------------
    def subscribe(self, listener: Callable[[str, Any], Any]) -> Callable[[], None]:
        """`listener(kind, data)` for item_started, item_finished, approval, approval_decided, finished."""
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener) if listener in self._listeners else None

    def _emit(self, kind: str, data: Any) -> None:
        for listener in list(self._listeners):
            try:
                listener(kind, data)
            except Exception:  # a view must not break the batch
                pass

    @property
    def done(self) -> bool:
        return self._task.done()

    def counts(self) -> dict[str, int]:
        """done, running, waiting (for a person), failed, cancelled, pending (not yet run)."""
        out = dict.fromkeys(("done", "running", "waiting", "failed", "cancelled", "pending"), 0)
        for r in self.results:
            out[r.status] += 1
        out["running"] = len(self._runs)
        out["pending"] -= len(self._runs)
        out["waiting"] = len(self.pending_approvals)
        return out

    @property
    def elapsed(self) -> float:
        return (self.finished_at or time.monotonic()) - self.started_at

    @property
    def usage(self) -> Usage:
        total = Usage()
        for r in self.results:
            total = total + r.usage
        return total

    @property
    def cost(self) -> float | None:
        costs = [r.cost for r in self.results if r.cost is not None]
        return sum(costs) if costs else None

    def cancel(self) -> bool:
        """Stop: no item starts, running items are cancelled (status "cancelled"); False if it was over."""
        if self.done:
            return False
        self._cancelled = True
        for run in list(self._runs.values()):
            run.cancel("the batch was cancelled")
        self._probe.set()
        if self._wake is not None:
            self._wake()
        return True

    def retry_failed(self, **overrides: Any) -> BatchRun:
        """A new batch over this one's failed (and cancelled) items, with the same settings; its results
        are in this batch's order, so `results[i].index` is the index here."""
        indices = [r.index for r in self.results if r.status in ("failed", "cancelled")]
        settings = dict(output_type=self.output_type, concurrency=self.concurrency, rate_limit=self.rate_limit,
                        max_retries=self.max_retries, max_cost=self.max_cost, engine=self.engine)
        settings.update(overrides)
        retry = BatchRun(self.agent, [self.results[i].input for i in indices], self.prompt, limiter=self.limiter,
                         **settings)
        for result, i in zip(retry.results, indices):
            result.index, result.label = i, self.results[i].label
        if self.store is not None:
            retry.store, retry.id = BatchWriter(self.agent.workspace, self.id, header={}), self.id
        return retry

    async def wait(self) -> BatchRun:
        try:
            await asyncio.shield(self._task)
        except asyncio.CancelledError:
            self.cancel()
            raise
        return self

    def __await__(self):
        return self.wait().__await__()

    def to_pandas(self) -> Any:
        """One row per input: the output (or the fields of a structured output), status, error, tokens, cost."""
        import pandas as pd

        rows = []
        for r in self.results:
            row: dict[str, Any] = {}
            value = jsonable(r.output) if self.output_type is not None else r.output
            if self.output_type is not None and isinstance(value, dict):
                row.update(value)
            else:
                row["output"] = r.output
            row.update(status=r.status, error=r.error, tokens=r.tokens, cost=r.cost)
            rows.append(row)
        return pd.DataFrame(rows, index=[r.label for r in self.results])

    def __repr__(self) -> str:
        c = self.counts()
        return (f"<BatchRun {self.id} {self.status} {len(self.results)} items: {c['done']} done, {c['failed']} failed, "
                f"{c['running']} running, {c['pending']} pending>")

    def __str__(self) -> str:
        from ..render.batch import batch_text

        return batch_text(self)

    def _repr_html_(self) -> str:
        from ..render.batch import batch_html

        return batch_html(self)


def _settler(gate: ItemGate) -> Callable[[Any], None]:
    def on_event(event: Any) -> None:
        if getattr(event, "kind", None) == "model_response":
            gate.settle(getattr(event.message, "usage", None))

    return on_event


def start_batch(agent: Any, inputs: Any, prompt: Any, **options: Any) -> BatchRun:
    return BatchRun(agent, inputs, prompt, **options)
