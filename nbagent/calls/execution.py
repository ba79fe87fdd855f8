"""One batch of tool calls, each through the whole lifecycle, in the order of the README's diagram:

    lookup -> parse (repair ladder) -> prepare_arguments -> validate -> before_tool_call hooks
    -> permission (decide; or ask, then void or remember) -> execute (timeout, cancellation, progress)
    -> after_tool_call hooks -> settle: the secret gate (`gate.admit`), normalise (images, length)
    -> tool_result_persist hooks -> the gate again if a hook changed the result
    -> the record gets its one result and its status

Each stage owns its rules: `hooks` runs the hook loops, `permissions` decides and keeps the approval's
bookkeeping, `results` normalises, `interrupt` runs sync tools on threads and stops them. This module
calls them in order. It never sees the run: it is given a `CallEnvironment` (the policy, the hooks, the
run's cancellation token, an `emit` function, limits) and the records of the batch, and it is the one
owner of their results: every call ends with exactly one, cancellations included.

Calls of a batch run concurrently, unless any of them is `sequential`: then the whole batch runs in
order. Failures inform and never stop: whatever goes wrong becomes an error result the model can react to.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from ..context import CancellationToken, Constraints, ProgressUpdate, RunScope, ToolCancelled, ToolContext
from ..decisions import Decision
from ..events import ApprovalStillWaiting, Event, ToolCallFinished, ToolCallProgress, ToolCallStarted, ToolPresented
from ..messages import TextBlock, ToolResult, ToolResultMessage
from ..records import CallRecord
from ..safety.sandbox_restore import check_running
from ..safety.secrets import redact_exception
from ..tools.arguments import parse_arguments
from ..tools.definition import ArgumentsError, Tool
from ..tools.results import error_result, normalise, to_tool_result
from .gate import admit
from .hooks import Block, Hooks, run_after_tool_call, run_before_tool_call, run_tool_result_persist
from .interrupt import NOT_STOPPED, ToolTimeout, run_in_thread
from .permissions import PermissionPolicy

if TYPE_CHECKING:  # pragma: no cover
    from ..tools.plan import ToolPlan

__all__ = ["BatchOutcome", "CallEnvironment", "execute_batch"]

log = logging.getLogger("nbagent.execution")


@dataclass(slots=True)
class CallEnvironment:
    """What executing a run's calls needs, and nothing more (execution never holds the run)."""

    policy: PermissionPolicy
    """Rules, mode, grants and the approver."""
    hooks: Hooks
    """before_tool_call / after_tool_call / tool_result_persist."""
    emit: Callable[[Event], None]
    """Where events go (the run's listeners and its event list)."""
    cancellation: CancellationToken = field(default_factory=CancellationToken)
    """The run's token: each call's token is its child."""
    constraints: Constraints = field(default_factory=Constraints)
    """The session's constraints every call sees."""
    cwd: Path = field(default_factory=Path.cwd)
    """The working directory tools get."""
    extensions: dict[type, Any] = field(default_factory=dict)
    """Objects a tool fetches by type (`ctx.get(SomeType)`)."""
    max_result_chars: int | None = None
    """Text of one result the model gets before it is cut."""
    loop: asyncio.AbstractEventLoop | None = None
    """The run's event loop (progress from worker threads is brought back to it)."""
    run_id: str | None = None
    """The run's id, handed to each call's context."""
    agent_name: str | None = None
    """The agent's name, handed to each call's context."""
    session_id: str | None = None
    """The stored conversation's id (None: not stored), handed to each call's context."""
    scope: RunScope = field(default_factory=RunScope)
    """What lives as long as the run (background processes): closed by the loop when the run ends."""
    approval_notice_after: float | None = None
    """Seconds a call waits for a person's decision before an `ApprovalStillWaiting` notice (None: never)."""
    sequential: bool = False
    """Every batch runs in order (`Agent(execution_mode="sequential")`), whatever its tools say."""


@dataclass(slots=True)
class BatchOutcome:
    stop_requested: str | None = None
    """The reason an `after_tool_call` hook gave for stopping after this batch."""
    all_terminate: bool = False
    """Every result of the batch asked to terminate."""


# --------------------------------------------------------------------------------------------------
# The batch
# --------------------------------------------------------------------------------------------------
async def execute_batch(env: CallEnvironment, plan: ToolPlan, records: list[CallRecord]) -> BatchOutcome:
    """Run every call of one model response; each record ends with exactly one result and a final status."""
    outcome = BatchOutcome()
    try:
        for rec in records:
            rec.tool = plan.resolve(rec.name)
        if len(records) == 1:
            await _run_call(env, plan, records[0], outcome)
        elif env.sequential or any(r.tool is not None and r.tool.execution_mode == "sequential" for r in records):
            for rec in records:
                await _run_call(env, plan, rec, outcome)
        else:
            tasks = [asyncio.ensure_future(_run_call(env, plan, rec, outcome)) for rec in records]
            try:
                await asyncio.gather(*tasks)
            except asyncio.CancelledError:
                # gather has cancelled them; let each finish its own clean-up (stopping threads included)
                await asyncio.wait(tasks)
                raise
    finally:
        # Whatever happened (cancellation included), every call ends with exactly one result.
        for rec in records:
            if not rec.done:
                await _settle(env, rec, "cancelled", _cancelled_result(env))
    results = [rec.result for rec in records]
    outcome.all_terminate = bool(results) and all(r is not None and r.terminate for r in results)
    return outcome


def _cancelled_result(env: CallEnvironment, note: str = "") -> ToolResult:
    reason = env.cancellation.reason or "the run was cancelled"
    return error_result(f"Tool call cancelled before it finished ({reason})." + (f" {note}" if note else ""))


# --------------------------------------------------------------------------------------------------
# One call
# --------------------------------------------------------------------------------------------------
async def _run_call(env: CallEnvironment, plan: ToolPlan, rec: CallRecord, outcome: BatchOutcome) -> None:
    try:
        await _lifecycle(env, plan, rec, outcome)
    except asyncio.CancelledError as exc:
        if not rec.done:
            not_stopped = bool(exc.args) and exc.args[0] == NOT_STOPPED
            await _settle(env, rec, "cancelled", _cancelled_result(env, NOT_STOPPED if not_stopped else ""))
        raise
    except Exception as exc:  # a bug in nbagent itself: still an answer, never a crash
        log.exception("internal error while running tool call %s", rec.id)
        rec.errors.append(redact_exception(exc))
        if not rec.done:
            await _settle(env, rec, "error", error_result(
                f"Internal error while running {rec.name}: {type(exc).__name__}: {exc}"))


async def _lifecycle(env: CallEnvironment, plan: ToolPlan, rec: CallRecord, outcome: BatchOutcome) -> None:
    now = time.monotonic()  # its turn: what it waited until now is queueing, not its own time
    rec.queued, rec.started_at = max(0.0, now - rec.started_at), now
    env.emit(ToolCallStarted(rec))
    tool = rec.tool
    call = rec.call

    # 1. lookup
    if tool is None:
        refused = plan.refused.get(rec.name)
        if refused is not None:
            await _settle(env, rec, "not_found", error_result(f"Tool {rec.name!r} is not available here: {refused}."))
            return
        available = ", ".join(plan.available()) or "none"
        await _settle(env, rec, "not_found", error_result(
            f"Tool {rec.name!r} does not exist. Available tools: {available}."))
        return
    rec.activity = tool.activity(None)
    if call.incomplete:
        await _settle(env, rec, "invalid_arguments", error_result(
            f"The call to {rec.name} was cut off before its arguments were complete (the response hit its token "
            "limit), so it was not executed. Call it again with complete arguments; split large content into "
            "smaller calls if needed."
        ))
        return

    # 2. parse (repair ladder), prepare_arguments, validate
    try:
        raw = call.arguments if call.arguments is not None else call.raw_arguments
        value, rec.repairs = parse_arguments(raw)
        if tool.prepare_arguments is not None:
            try:
                value = tool.prepare_arguments(value)
            except Exception as exc:
                rec.errors.append(redact_exception(exc))
                raise ArgumentsError(f"prepare_arguments failed: {type(exc).__name__}: {exc}") from None
        args = tool.validate(value)
    except ArgumentsError as exc:
        await _settle(env, rec, "invalid_arguments", _invalid_arguments_result(tool, str(exc)))
        return
    rec.arguments = args
    rec.activity = tool.activity(args)
    ctx = ToolContext(
        rec.id,
        tool.name,
        cwd=env.cwd,
        constraints=env.constraints,
        extensions=env.extensions,
        on_progress=functools.partial(_on_progress, env, rec),
        cancellation=CancellationToken(parent=env.cancellation),
        loop=env.loop,
        rules=tuple(env.policy.rules),
        run_id=env.run_id,
        agent_name=env.agent_name,
        session_id=env.session_id,
        scope=env.scope,
    )

    # 3. before_tool_call hooks
    try:
        verdict = await run_before_tool_call(env.hooks, rec, ctx, args, tool.validate)
    except ArgumentsError as exc:
        await _settle(env, rec, "invalid_arguments", _invalid_arguments_result(
            tool, f"after a before_tool_call hook changed them:\n{exc}"))
        return
    if isinstance(verdict, Block):
        rec.decision = Decision(False, source="hook", reason=verdict.reason)
        await _settle(env, rec, "blocked", error_result(f"Blocked: {verdict.reason}. The call was not executed."))
        return
    if verdict is not args:
        args = verdict
        rec.activity = tool.activity(args)

    # 4. a tool that cannot run now fails first, without asking anyone; then permission: the gates
    # decide, or the approver is asked about a frozen copy, which is what runs
    unavailable = getattr(tool, "unavailable", None)
    problem = await unavailable() if unavailable is not None else None
    if problem:
        await _settle(env, rec, "error", error_result(problem))
        return
    decision, why = env.policy.evaluate(tool, args, ctx)
    run_args = args
    if decision is None:
        decision, run_args = await _request_approval(env, rec, tool, args, why, ctx)
    rec.decision = ctx.decision = decision
    if not decision.allow:
        await _settle(env, rec, "denied", error_result(
            f"Permission denied: {decision.reason}. The call was not executed."))
        return

    # 5. execute (first putting back protected paths a command still running in the background changed:
    # nothing it planted is read by this call)
    rec.status = "running"
    status = "ok"
    put_back = check_running()
    try:
        value = await _execute(tool, run_args, ctx)
        try:
            result = to_tool_result(value)
        except Exception as exc:
            rec.errors.append(redact_exception(exc))
            result = error_result(
                f"{tool.name} returned a {type(value).__name__} that cannot be shown as text "
                f"({type(exc).__name__}: {exc})", details=value)
    except ToolTimeout as exc:
        status = "timeout"
        if exc.stopped:
            result = error_result(f"Tool call timed out after {tool.timeout:g} s and was stopped.")
        else:
            result = error_result(f"Tool call timed out after {tool.timeout:g} s. {NOT_STOPPED}")
    except ToolCancelled as exc:
        if env.cancellation.cancelled:
            raise asyncio.CancelledError() from exc
        rec.errors.append(redact_exception(exc))
        result = error_result(f"{tool.name} stopped: {exc or 'cancelled'}")
    except Exception as exc:
        rec.errors.append(redact_exception(exc))
        result = error_result(_describe_exception(exc), details=exc)
    if result.is_error and status == "ok":
        status = "error"
    if put_back:
        result.content = [TextBlock("[before this call, protected paths a background command changed were put "
                                    "back: " + ", ".join(put_back) + "]"), *result.content]
    rec.state_change = ctx.state_change  # what code the tool ran did to the namespace (python, run_cell)

    # 6. after_tool_call hooks
    result, status, stop = await run_after_tool_call(env.hooks, rec, result, status)
    if stop is not None:
        outcome.stop_requested = stop
    rec.completed_activity = tool.completed_activity(args, result.details if result.details is not None else result)

    # 7. settle: the secret gate, normalise, tool_result_persist hooks, record
    await _settle(env, rec, status, result, ctx.derived)


async def _request_approval(env: CallEnvironment, rec: CallRecord, tool: Tool, args: Any, why: str,
                            ctx: ToolContext) -> tuple[Decision, Any]:
    """Ask for consent; while the answer is awaited, say so after `approval_notice_after` seconds, and
    again each time the wait has doubled."""
    after = env.approval_notice_after
    notice = asyncio.ensure_future(_still_waiting(env, rec, after)) if after else None
    asked = time.monotonic()
    try:
        return await env.policy.request_approval(rec, tool, args, why, ctx, env.emit)
    finally:
        rec.decision_wait = time.monotonic() - asked  # told apart from the call's own time
        if notice is not None:
            notice.cancel()


async def _still_waiting(env: CallEnvironment, rec: CallRecord, after: float) -> None:
    t0 = time.monotonic()
    due = after
    while True:
        await asyncio.sleep(max(0.0, due - (time.monotonic() - t0)))
        if rec.status != "waiting_for_approval":
            return
        rec.approval_waited = time.monotonic() - t0
        env.emit(ApprovalStillWaiting(rec, rec.approval_waited))
        due *= 2


def _invalid_arguments_result(tool: Tool, problem: str) -> ToolResult:
    schema = json.dumps(tool.parameters, ensure_ascii=False)
    if len(schema) > 2000:
        schema = schema[:2000] + "..."
    return error_result(f"Invalid arguments for {tool.name}:\n{problem}\nThe parameters schema is: {schema}")


def _describe_exception(exc: BaseException) -> str:
    text = str(exc)
    name = type(exc).__name__
    return f"Error: {name}: {text}" if text else f"Error: {name}"


# --------------------------------------------------------------------------------------------------
# The one way a call gets its result
# --------------------------------------------------------------------------------------------------
async def _settle(env: CallEnvironment, rec: CallRecord, status: str, result: ToolResult,
                  derived: list[str] | None = None) -> None:
    """Every result reaches its record and the transcript through here, the ones the runtime writes
    itself (unknown tool, invalid arguments, blocked, denied, cancelled, timeout) included: through the
    secret gate (`gate.admit`: withheld when derived from a secret without consent, secrets screened),
    normalised (images checked, long text cut), then the `tool_result_persist` hooks, then the gate again
    when a hook changed it: nothing the model gets has skipped the gate."""
    def gated(r: ToolResult) -> ToolResult:
        arguments = rec.call.arguments if rec.call.arguments is not None else rec.call.raw_arguments
        try:
            return admit(r, derived=derived or (), decision=rec.decision, tool=rec.name, arguments=arguments)
        except Exception as exc:  # the gate fails closed: nothing it could not look at reaches the model
            log.exception("the secret gate failed on the result of %s", rec.id)
            return error_result(f"The result was withheld: the secret gate could not check it ({type(exc).__name__}).")

    result = admitted = normalise(gated(result), env.max_result_chars)
    try:
        result = await run_tool_result_persist(env.hooks, rec, result)
    except asyncio.CancelledError:
        # Cancelled while a persist hook (redaction, say) was at work: what it would have removed must not be
        # kept, so the call's result is withheld (its content and details both), and the cancellation goes on.
        if env.hooks.tool_result_persist:
            result = error_result("The result was withheld: the run was cancelled before its "
                                  "tool_result_persist hooks finished with it.")
        raise
    finally:  # the call still gets its one result
        if result is not admitted:
            result = gated(result)
        rec.result = result
        rec.status = status
        rec.finished_at = time.monotonic()
        rec.message = ToolResultMessage(rec.id, rec.name, result.content, result.is_error, result)
        for item in result.presentation:
            env.emit(ToolPresented(rec, item))
        env.emit(ToolCallFinished(rec))


def _on_progress(env: CallEnvironment, rec: CallRecord, update: ProgressUpdate) -> None:
    if rec.done:
        return
    rec.progress.append(update)
    rec.progress_count += 1
    if update.fraction is not None:
        rec.fraction = update.fraction
    if update.output:
        rec.output_tail.append(update.output)
    env.emit(ToolCallProgress(rec, update))


# --------------------------------------------------------------------------------------------------
# Execution: async on the loop, sync on a worker thread (nbagent.calls.interrupt)
# --------------------------------------------------------------------------------------------------
async def _execute(tool: Tool, args: Any, ctx: ToolContext) -> Any:
    try:
        if tool.is_async:
            return await _execute_async(tool, args, ctx)
        value = await run_in_thread(functools.partial(tool.invoke, args, ctx), ctx.cancellation, tool.timeout)
        if asyncio.iscoroutine(value) or isinstance(value, asyncio.Future):
            return await value  # a sync callable that returned an awaitable
        return value
    except asyncio.CancelledError:
        # However the call was cancelled (run.cancel(), Stop, the run's task cancelled with the cell that
        # awaited it), its token says so: work the tool handed to a thread sees `ctx.cancelled`.
        ctx.cancellation.cancel("cancelled")
        raise


async def _execute_async(tool: Tool, args: Any, ctx: ToolContext) -> Any:
    if tool.timeout is None:
        return await tool.invoke(args, ctx)
    try:
        async with asyncio.timeout(tool.timeout) as cm:
            return await tool.invoke(args, ctx)
    except TimeoutError:
        if cm.expired():
            ctx.cancellation.cancel("timeout")
            raise ToolTimeout() from None
        raise
