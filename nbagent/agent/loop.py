"""The turn loop, top to bottom, and `RunState`: everything a run changes, owned by the loop.

    while True:
        build this turn's tool plan
        near the context window -> compact (nbagent.budget.compaction); over max_cost -> stop, cleanly
        ask the model (streaming its deltas to listeners); too long after all -> compact once, ask again
        no tool call              -> done (or, with output_type, one reminder to call submit_result)
        run the batch of calls    (nbagent.calls.execution: every call gets exactly one result)
        append the response and its results to the transcript, together
        every result terminates, a hook asked to stop, submit_result accepted -> done
    cancellation -> the batch's unfinished calls get "cancelled" results; the transcript stays valid
    max_turns    -> MaxTurnsExceeded; model errors -> the run fails with that error

`AgentRun` (nbagent.agent.run) is the handle a person holds: it reads a `RunState` and never changes it. The
loop changes it, and hands execution only a `CallEnvironment` (policy, hooks, limits, the run's
cancellation token, `state.emit`), never the run.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Sequence

from ..budget.compaction import CompactionSettings, compact
from ..budget.pricing import Spend, format_cost, price_known, request_cost
from ..budget.window import Estimates, estimate_prompt_extra, measure
from ..calls.execution import CallEnvironment, execute_batch
from ..context import CancellationToken
from ..errors import ContextLengthError, MaxTurnsExceeded, ModelError, OutputError
from ..events import (
    Compacted, Event, ModelResponse, ReasoningDelta, RunFinished, RunStarted, Steered, TextDelta, ToolCallDelta,
    ToolCallProgress, TurnStarted, retry_listener,
)
from ..messages import AssistantMessage, Message, Usage, UserMessage, new_call_id
from ..providers import Model
from ..records import CallRecord
from ..tools.definition import Tool
from ..tools.plan import build_plan, prepare_sources, with_namespaces
from ..tools.structured import SUBMIT_TOOL_NAME

__all__ = ["RunSettings", "RunState", "drive"]

log = logging.getLogger("nbagent.loop")

OUTPUT_REMINDER = (
    "Your answer was not submitted. Finish by calling the `submit_result` tool with your result as its "
    "arguments, matching its schema exactly; do not answer in text."
)

_NOT_STORED = (TextDelta, ReasoningDelta, ToolCallDelta, ToolCallProgress)
"""Events that go to listeners only: a run keeps the others in `events`."""
FINAL = ("done", "failed", "cancelled")


@dataclass(slots=True)
class RunSettings:
    """What one run is configured with; the loop reads it and never changes it."""

    model: Model
    env: CallEnvironment
    """What execution is given for every batch."""
    sources: Sequence[Any] = ()
    """The agent's tools and `Toolset`s, decided each turn."""
    builtins: tuple[Tool, ...] = ()
    """Tools the run adds itself (`submit_result`)."""
    instructions: str | None = None
    max_turns: int = 20
    capability_mode: str = "all"
    allowed_tools: tuple[str, ...] | None = None
    resolver: Callable[[str], Tool | None] | None = None
    model_settings: dict[str, Any] = field(default_factory=dict)
    structured: bool = False
    """The run must finish through `submit_result` (`Agent(output_type=...)`)."""
    handle: Any = None
    """The run's handle (`AgentRun`), given to `Toolset.tools(run)`; the loop does not use it."""
    window: int | None = None
    """The model's context window in tokens (None: unknown, so no automatic compaction)."""
    compaction: CompactionSettings | None = None
    """How to compact (None: never)."""
    max_cost: float | None = None
    """US dollars this run may spend: it stops before a request that would go over."""
    compact_only: bool = False
    """The run only compacts the transcript it was given (`Agent.compact`)."""


class RunState:
    """Everything a run changes: the transcript, the calls, the requests, the events, the outcome.

    The loop owns it. `status` is derived: the final status once the run is over; before that
    `waiting_for_approval` while a call of the batch in flight waits for a person, else `running`.
    """

    __slots__ = (
        "messages", "history_length", "calls", "requests", "events", "listeners", "spend", "before", "turns", "output",
        "context_tokens", "context_measured", "context_anchor", "compactions", "estimates", "timeline",
        "error", "stop_reason", "outcome", "in_flight", "partial_text", "call_ids", "loaded_tools", "resolved_tools",
        "steering",
        "cancellation", "started_at", "t0", "finished_at", "elapsed",
    )

    def __init__(self, messages: Iterable[Message] = (), prompt: UserMessage | None = None,
                 cancellation: CancellationToken | None = None, *,
                 before: Spend | None = None, context_anchor: tuple[int, int] | None = None) -> None:
        self.messages: list[Message] = list(messages)
        self.history_length = len(self.messages)
        if prompt is not None:
            self.messages.append(prompt)
        self.calls: list[CallRecord] = []
        self.requests: list[Any] = []
        self.events: list[Event] = []
        self.listeners: list[Callable[[Event], Any]] = []
        self.spend = Spend()
        """What this run's responses used and cost (summary requests of compactions included)."""
        self.before = before if before is not None else Spend()
        """What the conversation had spent before this run."""
        self.context_tokens = 0
        """How many tokens the transcript takes, as of the last check before a request."""
        self.context_measured = False
        """Whether `context_tokens` rests on the provider's count (else it is an estimate)."""
        self.context_anchor = context_anchor
        self.estimates = Estimates()
        """Running token estimates of the transcript (`window.Estimates`)."""
        """(index, tokens) after a compaction: responses before index were counted on a longer transcript."""
        self.compactions: list[Any] = []
        """The `Compaction`s this run made, in order."""
        self.timeline: list[Any] = []
        """What the run showed, in order: its responses (AssistantMessage), the messages it added itself
        (UserMessage) and its compactions, kept as they happened even after a compaction rewrote the
        transcript (a view drawn from it does not lose earlier text or reorder its rows)."""
        self.turns = 0
        self.output: Any = None
        self.error: BaseException | None = None
        self.stop_reason: str | None = None
        self.outcome: str | None = None
        """done, failed or cancelled once the run is over."""
        self.in_flight: tuple[AssistantMessage, list[CallRecord]] | None = None
        """The response whose calls are running, and their records: appended together when all have results."""
        self.partial_text: list[str] = []
        """Text of the response being streamed (kept in the transcript if the run is cancelled meanwhile)."""
        self.call_ids: set[str] = {c.id for m in self.messages if isinstance(m, AssistantMessage) for c in m.tool_calls}
        self.loaded_tools: set[str] = set()
        self.steering: deque[UserMessage] = deque()
        """Messages sent into the running run (`AgentRun.steer`), waiting for the next turn boundary."""
        self.resolved_tools: dict[str, Any] = {}
        """Tools the agent's `tool_resolver` found in this run, by name: offered in its later requests."""
        self.cancellation = cancellation if cancellation is not None else CancellationToken()
        self.started_at = time.time()
        self.t0 = time.monotonic()
        self.finished_at: float | None = None
        self.elapsed: float | None = None

    @property
    def usage(self) -> Usage:
        return self.spend.usage

    @property
    def conversation(self) -> Spend:
        """What the whole conversation spent: the runs before this one, and this one."""
        return self.before + self.spend

    @property
    def status(self) -> str:
        if self.outcome is not None:
            return self.outcome
        batch = self.in_flight
        if batch is not None and any(rec.status == "waiting_for_approval" for rec in batch[1]):
            return "waiting_for_approval"
        return "running"

    def emit(self, event: Event) -> None:
        """Keep the event (deltas and progress excepted) and give it to every listener (their errors logged)."""
        if not isinstance(event, _NOT_STORED):
            self.events.append(event)
        for listener in self.listeners:
            try:
                listener(event)
            except Exception:
                log.exception("an event listener failed (ignored)")

    def finish(self, status: str, error: BaseException | None) -> None:
        self.outcome = status
        self.error = error
        self.finished_at = time.time()
        self.elapsed = time.monotonic() - self.t0


async def drive(settings: RunSettings, state: RunState) -> None:
    """Run the loop to its end; never raises (the outcome is in `state.outcome`, `state.error`)."""
    state.emit(RunStarted(settings.max_turns))
    reminded = False
    status, error = "done", None
    offered: Sequence[Tool] = ()
    """The tools of the last request: the context measured at the end counts their schemas too."""
    try:
        if settings.compact_only:
            await _compact(settings, state, (), reason="manual", force=True)
            state.output = state.compactions[-1].summary if state.compactions else None
            if not state.compactions:
                state.stop_reason = "nothing to compact: the conversation is only its last turn"
            return
        while True:
            if state.turns >= settings.max_turns:
                raise MaxTurnsExceeded(
                    f"the run reached max_turns={settings.max_turns} before the model finished; "
                    "continue it with another run, or raise max_turns"
                )
            _take_steering(state)  # messages sent in while the last turn ran join here, at the turn boundary
            state.turns += 1
            await prepare_sources(settings.sources, settings.handle)  # async set-up of toolsets (MCP servers)
            plan = build_plan(
                settings.sources,
                run=settings.handle,
                capability_mode=settings.capability_mode,
                allowed_tools=settings.allowed_tools,
                loaded=state.loaded_tools,
                builtins=settings.builtins,
                resolver=settings.resolver,
                resolved=state.resolved_tools,
            )
            state.emit(TurnStarted(state.turns, plan.names))
            offered = plan.tools
            over = await _before_request(settings, state, plan.tools)
            if over is not None:
                state.stop_reason = over
                state.output = _last_text(state.messages)
                state.turns -= 1
                break
            try:
                message = await _ask_model(settings, state, plan.tools)
            except ContextLengthError:
                # The estimate was short: compact (harder) once, and ask again.
                if settings.compaction is None or not await _compact(settings, state, plan.tools,
                                                                     reason="context_length", force=True):
                    raise
                message = await _ask_model(settings, state, plan.tools)
            state.spend.add(message, model=settings.model.name, provider=settings.model.provider)
            _unique_ids(state, message)
            state.emit(ModelResponse(state.turns, message))
            state.timeline.append(message)

            if not message.tool_calls:
                state.messages.append(message)
                if state.steering:  # the person said more while the model answered: the run goes on
                    continue
                if settings.structured:
                    if reminded:
                        raise OutputError(
                            "the model answered in text instead of calling submit_result, even after a reminder"
                        )
                    reminded = True
                    state.messages.append(UserMessage(OUTPUT_REMINDER))
                    state.timeline.append(state.messages[-1])
                    continue
                state.output = message.text
                break

            wire = getattr(settings.model, "wire_tool_result", None)
            records = [CallRecord(call, state.turns, i, wire) for i, call in enumerate(message.tool_calls)]
            state.calls.extend(records)
            state.in_flight = (message, records)
            outcome = await execute_batch(settings.env, plan, records)
            _commit(state)

            submitted = next((r for r in records if r.name == SUBMIT_TOOL_NAME and r.status == "ok"), None)
            if submitted is not None and settings.structured:
                state.output = submitted.result.details
                break
            if outcome.stop_requested:
                state.stop_reason = outcome.stop_requested
                state.output = message.text
                break
            if outcome.all_terminate:
                state.stop_reason = "every tool result asked to terminate"
                state.output = message.text
                break
    except asyncio.CancelledError:
        status = "cancelled"
        state.cancellation.cancel("the run was cancelled")  # every call's token is a child of this one
        _commit(state)
        _keep_partial_text(settings, state)
    except Exception as exc:  # model errors, max_turns, output errors, bugs: the run fails, clearly
        status, error = "failed", exc
        _commit(state)
        if not isinstance(exc, (ModelError, MaxTurnsExceeded, OutputError)):
            log.exception("run failed")
    finally:
        # what lives as long as the run (background processes) ends with it, whatever ended the run
        await _close_scope(settings)
        _measure(settings, state, offered)  # what the conversation takes now, its last response and tools included
        state.finish(status, error)
        state.emit(RunFinished(status, error))


async def _close_scope(settings: RunSettings) -> None:
    scope = settings.env.scope
    if not scope.holds_anything:
        scope.closed = True  # nothing to stop: the run ends without yielding to the loop first
        return
    closing = asyncio.ensure_future(scope.close())
    try:
        await asyncio.shield(closing)
    except asyncio.CancelledError:  # cancelled again meanwhile: the closing still finishes
        await closing


def _last_text(messages: list[Message]) -> str:
    for m in reversed(messages):
        if isinstance(m, AssistantMessage) and m.text:
            return m.text
    return ""


def _measure(settings: RunSettings, state: RunState, tools: Sequence[Tool]) -> int:
    extra = estimate_prompt_extra(with_namespaces(settings.instructions, tools), tools)
    tokens, measured = measure(state.messages, state.context_anchor, extra, state.estimates)
    state.context_tokens, state.context_measured = tokens, measured
    return tokens


async def _before_request(settings: RunSettings, state: RunState, tools: Sequence[Tool]) -> str | None:
    """Measure the transcript, compact it when it nears the window, and check the budget. Returns why the
    run must stop (the budget), or None."""
    tokens = _measure(settings, state, tools)
    policy = settings.compaction
    if (policy is not None and policy.auto and settings.window
            and tokens >= policy.threshold * settings.window):
        await _compact(settings, state, tools, reason="auto")
    if settings.max_cost is None:
        return None
    model = settings.model
    if not price_known(model.name, model.provider):
        return (f"max_cost is set, but the price of {model.spec} is unknown, so no request was made "
                "(set max_cost=None to run it without a budget)")
    last_out = next((m.usage.output_tokens for m in reversed(state.messages)
                     if isinstance(m, AssistantMessage) and m.usage is not None), 0)
    estimate = request_cost(Usage(state.context_tokens, max(last_out, 1_000)), model.name, model.provider) or 0.0
    spent = state.spend.priced
    if spent + estimate > settings.max_cost:
        return (f"budget: the next request would cost about {format_cost(estimate)}, and {format_cost(spent)} "
                f"of max_cost={format_cost(settings.max_cost)} is spent")
    return None


async def _compact(settings: RunSettings, state: RunState, tools: Sequence[Tool], *, reason: str,
                   force: bool = False) -> bool:
    """Compact the transcript in place (a `Compacted` event says what was replaced). False: nothing to do."""
    policy = settings.compaction or CompactionSettings()
    window = settings.window or max(state.context_tokens, 1)
    extra = estimate_prompt_extra(with_namespaces(settings.instructions, tools), tools)
    done = await compact(state.messages, settings.model, window=window, settings=policy, reason=reason,
                         force=force, tokens=state.context_tokens or None, extra=extra,
                         on_request=state.requests.append)
    if done is None:
        return False
    for response in done.responses:
        state.spend.add(response, model=settings.model.name, provider=settings.model.provider)
    state.messages[:] = done.messages
    h = state.history_length
    if h >= done.end:
        state.history_length = h - (done.end - done.start) + len(done.replacement)
    elif h > done.start:
        state.history_length = done.start + len(done.replacement)
    state.context_anchor = (len(state.messages), done.tokens_after)
    state.context_tokens, state.context_measured = done.tokens_after, False
    state.compactions.append(done)
    state.timeline.append(done)
    state.emit(Compacted(done))
    return True


async def _ask_model(settings: RunSettings, state: RunState, tools: Sequence[Tool]) -> AssistantMessage:
    state.partial_text = []
    model = settings.model
    final: AssistantMessage | None = None
    token = retry_listener.set(state.emit)  # a provider's retry loop reports each wait (the view shows it)
    try:
        async for item in model.stream(state.messages, tools, instructions=with_namespaces(settings.instructions, tools),
                                       on_request=state.requests.append, **settings.model_settings):
            if isinstance(item, AssistantMessage):
                final = item
            else:
                if isinstance(item, TextDelta):
                    state.partial_text.append(item.text)
                state.emit(item)
    finally:
        retry_listener.reset(token)
    if final is None:
        raise ModelError(f"{model.spec}: the response stream ended without a message")
    state.partial_text = []
    return final


def _unique_ids(state: RunState, message: AssistantMessage) -> None:
    """Every call of the run gets an id no other call of the transcript has."""
    seen = state.call_ids
    for call in message.tool_calls:
        if not call.id or call.id in seen:
            call.id = new_call_id()
        seen.add(call.id)


def _commit(state: RunState) -> None:
    """Append the in-flight response and its results together (execute_batch gave each call its result)."""
    pending = state.in_flight
    if pending is None:
        return
    state.in_flight = None
    message, records = pending
    state.messages.append(message)
    state.messages.extend(rec.message for rec in records)


def _take_steering(state: RunState) -> None:
    """Append the messages sent into the run since the last boundary (the transcript is complete here:
    every call of the last batch has its result), each as a user message, and say so."""
    while state.steering:
        message = state.steering.popleft()
        state.messages.append(message)
        state.timeline.append(message)  # what the run's view shows, in its place
        state.emit(Steered(message, message.text))


def _keep_partial_text(settings: RunSettings, state: RunState) -> None:
    """Text the model streamed before a cancellation stays in the transcript (it has no tool calls)."""
    text = "".join(state.partial_text)
    state.partial_text = []
    if text:
        state.messages.append(AssistantMessage(text=text, stop_reason="cancelled", model=settings.model.name,
                                               provider=settings.model.provider))
