"""One batch of tool calls, each through the whole lifecycle.

For every call of a model response, in this order (SYSTEM.md section 4):

    lookup -> prepare_arguments -> parse + repair + validate -> before_tool_call hooks
    -> permission pipeline (rules, grants, read-only, mode, approver) -> execute (timeout, cancellation,
    progress) -> after_tool_call hooks -> normalise (images checked, long text cut)
    -> tool_result_persist hooks -> the record gets its result and status

Calls of a batch run concurrently, unless any of them is `sequential`: then the whole batch runs in
order. Sync tools run on a thread pool big enough for many blocking calls at once. Failures inform and
never stop: whatever goes wrong becomes an error result the model can react to. Cancellation gives every
unfinished call a "cancelled" result, so the transcript stays valid.
"""

from __future__ import annotations

import asyncio
import copy
import ctypes
import json
import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .arguments import parse_arguments
from .context import CancellationToken, ProgressUpdate, ToolCancelled, ToolContext
from .events import ApprovalDecided, ApprovalRequested, ToolCallFinished, ToolCallProgress, ToolCallStarted
from .hooks import Block, run_after_tool_call, run_before_tool_call, run_tool_result_persist
from .messages import ToolResult, ToolResultMessage
from .permissions import ApprovalRequest, Decision, fingerprint
from .records import CallRecord
from .results import error_result, normalise, to_tool_result
from .tools import ArgumentsError, Tool

if TYPE_CHECKING:  # pragma: no cover
    from .plan import ToolPlan
    from .run import AgentRun

__all__ = ["BatchOutcome", "THREAD_POOL_SIZE", "execute_batch"]

log = logging.getLogger("nbagent.execution")

THREAD_POOL_SIZE = 64
"""Worker threads for sync tools: enough that many blocking calls of one batch run at once."""
THREAD_STOP_GRACE = 1.0
"""Seconds to wait for a sync tool's thread to stop after it was cancelled or timed out."""

_executor: ThreadPoolExecutor | None = None
_executor_lock = threading.Lock()


def tool_executor() -> ThreadPoolExecutor:
    global _executor
    if _executor is None:
        with _executor_lock:
            if _executor is None:
                _executor = ThreadPoolExecutor(max_workers=THREAD_POOL_SIZE, thread_name_prefix="nbagent-tool")
    return _executor


class ToolTimeout(Exception):
    """A call ran past its timeout; `stopped` says whether its code was actually stopped."""

    def __init__(self, stopped: bool = True) -> None:
        super().__init__("timeout")
        self.stopped = stopped


class _Interrupt(BaseException):
    """Injected into a sync tool's thread to stop it. A BaseException (like KeyboardInterrupt), so tool
    code that catches `Exception` does not swallow it; it reaches the runtime as `ToolCancelled`."""


@dataclass(slots=True)
class BatchOutcome:
    stop_requested: str | None = None
    """The reason an `after_tool_call` hook gave for stopping after this batch."""
    all_terminate: bool = False
    """Every result of the batch asked to terminate."""


# --------------------------------------------------------------------------------------------------
# The batch
# --------------------------------------------------------------------------------------------------
async def execute_batch(run: AgentRun, plan: ToolPlan, records: list[CallRecord]) -> BatchOutcome:
    """Run every call of one model response; each record ends with a result and a final status."""
    outcome = BatchOutcome()
    for rec in records:
        rec.tool = plan.resolve(rec.name)
    try:
        if len(records) == 1:
            await _run_call(run, plan, records[0], outcome)
        elif any(r.tool is not None and r.tool.execution_mode == "sequential" for r in records):
            for rec in records:
                await _run_call(run, plan, rec, outcome)
        else:
            tasks = [asyncio.ensure_future(_run_call(run, plan, rec, outcome)) for rec in records]
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
                await _settle(run, rec, "cancelled", _cancelled_result(run))
    results = [rec.result for rec in records]
    outcome.all_terminate = bool(results) and all(r is not None and r.terminate for r in results)
    return outcome


_NOT_STOPPED = (
    "Its code could not be stopped (it is blocked outside Python, e.g. in a C extension or a system call) "
    "and may still be running in the background."
)


def _frozen_copy(args: Any) -> Any:
    """A deep copy of approved arguments (the originals when they cannot be copied)."""
    try:
        return type(args)(copy.deepcopy(dict(args)))
    except Exception:
        return args


def _cancelled_result(run: AgentRun) -> ToolResult:
    reason = run.cancellation.reason or "the run was cancelled"
    return error_result(f"Tool call cancelled before it finished ({reason}).")


# --------------------------------------------------------------------------------------------------
# One call
# --------------------------------------------------------------------------------------------------
async def _run_call(run: AgentRun, plan: ToolPlan, rec: CallRecord, outcome: BatchOutcome) -> None:
    try:
        await _lifecycle(run, plan, rec, outcome)
    except asyncio.CancelledError as exc:
        if not rec.done:
            result = _cancelled_result(run)
            if exc.args and exc.args[0] == _NOT_STOPPED:
                result = error_result(result.text + " " + _NOT_STOPPED)
            await _settle(run, rec, "cancelled", result)
        raise
    except Exception as exc:  # a bug in nbagent itself: still an answer, never a crash
        log.exception("internal error while running tool call %s", rec.id)
        rec.errors.append(exc)
        if not rec.done:
            await _settle(run, rec, "error", error_result(f"Internal error while running {rec.name}: {type(exc).__name__}: {exc}"))


async def _lifecycle(run: AgentRun, plan: ToolPlan, rec: CallRecord, outcome: BatchOutcome) -> None:
    run._emit(ToolCallStarted(rec))
    tool = rec.tool
    call = rec.call

    # 1. lookup
    if tool is None:
        available = ", ".join(plan.available()) or "none"
        await _settle(run, rec, "not_found", error_result(f"Tool {rec.name!r} does not exist. Available tools: {available}."))
        return
    rec.activity = tool.activity(None)
    if call.incomplete:
        await _settle(run, rec, "invalid_arguments", error_result(
            f"The call to {rec.name} was cut off before its arguments were complete (the response hit its token "
            "limit), so it was not executed. Call it again with complete arguments; split large content into "
            "smaller calls if needed."
        ))
        return

    # 2. prepare, parse (repair ladder), validate
    try:
        raw = call.arguments if call.arguments is not None else call.raw_arguments
        value, rec.repairs = parse_arguments(raw)
        if tool.prepare_arguments is not None:
            try:
                value = tool.prepare_arguments(value)
            except Exception as exc:
                rec.errors.append(exc)
                raise ArgumentsError(f"prepare_arguments failed: {type(exc).__name__}: {exc}") from None
        args = tool.validate(value)
    except ArgumentsError as exc:
        await _settle(run, rec, "invalid_arguments", _invalid_arguments_result(tool, str(exc)))
        return
    rec.arguments = args
    rec.activity = tool.activity(args)

    ctx = ToolContext(
        rec.id,
        tool.name,
        cwd=run.cwd,
        constraints=run.constraints,
        extensions=run.extensions,
        on_progress=lambda update: _on_progress(run, rec, update),
        cancellation=CancellationToken(parent=run.cancellation),
        loop=run.loop,
        run=run,
    )

    # 3. before_tool_call hooks
    try:
        out = await run_before_tool_call(run.hooks, rec, ctx, args, tool.validate)
    except ArgumentsError as exc:
        await _settle(run, rec, "invalid_arguments", _invalid_arguments_result(
            tool, f"after a before_tool_call hook changed them:\n{exc}"))
        return
    if isinstance(out, Block):
        rec.decision = Decision(False, source="hook", reason=out.reason)
        await _settle(run, rec, "blocked", error_result(f"Blocked: {out.reason}. The call was not executed."))
        return
    if out is not args:
        args = out
        rec.activity = tool.activity(args)

    # 4. permission
    decision, why = run.policy.evaluate(tool, args, ctx)
    run_args = args
    if decision is None:
        # What runs is a private copy made before anyone (listener, approver, view) sees the request:
        # nothing they do to the arguments they are shown can change it.
        run_args = _frozen_copy(args)
        decision = await _ask(run, rec, tool, args, run_args, why, ctx)
    rec.decision = decision
    ctx.decision = decision
    if not decision.allow:
        await _settle(run, rec, "denied", error_result(f"Permission denied: {decision.reason}. The call was not executed."))
        return

    # 5. execute
    rec.status = "running"
    run._refresh_status()
    status = "ok"
    try:
        value = await _execute(tool, run_args, ctx)
        try:
            result = to_tool_result(value)
        except Exception as exc:
            rec.errors.append(exc)
            result = error_result(
                f"{tool.name} returned a {type(value).__name__} that cannot be shown as text "
                f"({type(exc).__name__}: {exc})", details=value)
    except ToolTimeout as exc:
        status = "timeout"
        if exc.stopped:
            result = error_result(f"Tool call timed out after {tool.timeout:g} s and was stopped.")
        else:
            result = error_result(
                f"Tool call timed out after {tool.timeout:g} s. It could not be stopped (it is blocked outside "
                "Python, e.g. in a C extension or a system call) and may still be running in the background.")
    except ToolCancelled as exc:
        if run.cancellation.cancelled:
            raise asyncio.CancelledError() from exc
        rec.errors.append(exc)
        result = error_result(f"{tool.name} stopped: {exc or 'cancelled'}")
    except Exception as exc:
        rec.errors.append(exc)
        result = error_result(_describe_exception(exc), details=exc)
    if result.is_error and status == "ok":
        status = "error"

    # 6. after_tool_call hooks
    result, status, stop = await run_after_tool_call(run.hooks, rec, result, status)
    if stop is not None:
        outcome.stop_requested = stop

    rec.completed_activity = tool.completed_activity(args, result.details if result.details is not None else result)

    # 7. normalise for the model, then tool_result_persist hooks
    await _settle(run, rec, status, result)


def _invalid_arguments_result(tool: Tool, problem: str) -> ToolResult:
    schema = json.dumps(tool.parameters, ensure_ascii=False)
    if len(schema) > 2000:
        schema = schema[:2000] + "..."
    return error_result(f"Invalid arguments for {tool.name}:\n{problem}\nThe parameters schema is: {schema}")


def _describe_exception(exc: BaseException) -> str:
    text = str(exc)
    name = type(exc).__name__
    return f"Error: {name}: {text}" if text else f"Error: {name}"


async def _settle(run: AgentRun, rec: CallRecord, status: str, result: ToolResult) -> None:
    """Every result reaches its record and the transcript through here, the ones the runtime writes
    itself (unknown tool, invalid arguments, blocked, denied, cancelled, timeout) included: normalised
    (images checked, secrets redacted, long text cut), then the `tool_result_persist` hooks."""
    result = normalise(result, run.max_result_chars)
    try:
        result = await run_tool_result_persist(run.hooks, rec, result)
    finally:  # cancelled again while a hook awaited: the call still gets its (normalised) result
        _finish(run, rec, status, result)


def _finish(run: AgentRun, rec: CallRecord, status: str, result: ToolResult) -> None:
    rec.result = result
    rec.status = status
    rec.finished_at = time.monotonic()
    rec.message = ToolResultMessage(rec.id, rec.name, result.content, result.is_error, result)
    run._refresh_status()
    run._emit(ToolCallFinished(rec))


def _on_progress(run: AgentRun, rec: CallRecord, update: ProgressUpdate) -> None:
    if rec.done:
        return
    rec.progress.append(update)
    rec.progress_count += 1
    if update.fraction is not None:
        rec.fraction = update.fraction
    if update.output:
        rec.output.append(update.output)
    run._emit(ToolCallProgress(rec, update))


# --------------------------------------------------------------------------------------------------
# Approval
# --------------------------------------------------------------------------------------------------
async def _ask(run: AgentRun, rec: CallRecord, tool: Tool, args: dict[str, Any], frozen: Any, why: str,
               ctx: ToolContext | None = None) -> Decision:
    scope = tool.suggested_scope(frozen, ctx)
    shown = fingerprint(frozen)
    request = ApprovalRequest(rec, tool, _frozen_copy(frozen), why, scope, shown)
    rec.status = "waiting_for_approval"
    run._waiting += 1
    run._refresh_status()
    run._emit(ApprovalRequested(rec, request))
    try:
        decision = await run.policy.ask(request)
    finally:
        run._waiting -= 1
        rec.status = "pending"
        run._refresh_status()
    if decision.allow and (fingerprint(args) != shown or fingerprint(request.arguments) != shown):
        decision = Decision(False, source="user", reason="the arguments changed after they were approved, so the approval is void")
    if decision.allow and decision.remember:
        run.policy.remember(tool, decision, request)
    run._emit(ApprovalDecided(rec, decision))
    return decision


# --------------------------------------------------------------------------------------------------
# Execution: async on the loop, sync on the thread pool
# --------------------------------------------------------------------------------------------------
async def _execute(tool: Tool, args: Any, ctx: ToolContext) -> Any:
    try:
        return await _execute_tool(tool, args, ctx)
    except asyncio.CancelledError:
        # However the call was cancelled (run.cancel(), Stop, the run's task cancelled with the cell that
        # awaited it), its token says so: work the tool handed to a thread sees `ctx.cancelled`.
        ctx.cancellation.cancel("cancelled")
        raise


async def _execute_tool(tool: Tool, args: Any, ctx: ToolContext) -> Any:
    timeout = tool.timeout
    if tool.is_async:
        if timeout is None:
            return await tool.invoke(args, ctx)
        try:
            async with asyncio.timeout(timeout) as cm:
                return await tool.invoke(args, ctx)
        except TimeoutError:
            if cm.expired():
                ctx.cancellation.cancel("timeout")
                raise ToolTimeout() from None
            raise
    value = await _run_in_thread(tool, args, ctx, timeout)
    if asyncio.iscoroutine(value) or isinstance(value, asyncio.Future):
        return await value  # a sync callable that returned an awaitable
    return value


class _ThreadCall:
    """Runs one sync call on a pool thread, and can interrupt it (where Python allows) when cancelled."""

    __slots__ = ("lock", "thread_id", "active")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.thread_id: int | None = None
        self.active = False

    def run(self, tool: Tool, args: Any, ctx: ToolContext) -> Any:
        with self.lock:
            self.thread_id = threading.get_ident()
            self.active = True
        try:
            return tool.invoke(args, ctx)
        except _Interrupt:
            raise ToolCancelled(ctx.cancellation.reason_text or "interrupted") from None
        finally:
            with self.lock:
                self.active = False
            _clear_pending_interrupt()

    def interrupt(self) -> bool:
        """Raise `_Interrupt` inside the thread at its next Python instruction."""
        with self.lock:
            if not self.active or self.thread_id is None:
                return False
            ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(self.thread_id), ctypes.py_object(_Interrupt))
            return True


def _clear_pending_interrupt() -> None:
    """Drop an interrupt that arrived too late to matter, so it cannot hit the pool thread's next job."""
    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(threading.get_ident()), ctypes.c_void_p(0))


async def _run_in_thread(tool: Tool, args: Any, ctx: ToolContext, timeout: float | None) -> Any:
    loop = asyncio.get_running_loop()
    state = _ThreadCall()
    future = loop.run_in_executor(tool_executor(), state.run, tool, args, ctx)
    try:
        done, _ = await asyncio.wait((future,), timeout=timeout)
    except asyncio.CancelledError:
        ctx.cancellation.cancel("cancelled")
        stopped = await _stop_thread(state, future)
        if not stopped:
            raise asyncio.CancelledError(_NOT_STOPPED) from None
        raise
    if not done:
        ctx.cancellation.cancel("timeout")
        stopped = await _stop_thread(state, future)
        raise ToolTimeout(stopped)
    return future.result()


async def _stop_thread(state: _ThreadCall, future: asyncio.Future) -> bool:
    """Stop a sync call's thread; return whether it stopped (False: blocked outside Python)."""
    if future.done():
        _consume(future)
        return True
    # Give a cooperative tool a moment to notice ctx.cancelled, then interrupt it, again a few times in
    # case the code caught the first interrupt with a bare `except:`. A second cancellation (Stop pressed
    # twice) does not cut this short: the thread must be dealt with either way.
    try:
        await asyncio.wait((future,), timeout=0.05)
    except asyncio.CancelledError:
        pass
    attempts = 5
    for _ in range(attempts):
        if future.done():
            break
        state.interrupt()
        try:
            await asyncio.wait((future,), timeout=THREAD_STOP_GRACE / attempts)
        except asyncio.CancelledError:
            pass
    if future.done():
        _consume(future)
        return True
    log.warning("a sync tool's thread did not stop (it is blocked outside Python); it will finish in the background")
    future.add_done_callback(_consume)
    return False


def _consume(future: asyncio.Future) -> None:
    if not future.cancelled():
        future.exception()
