"""Hooks around each tool call: plain callables, sync or async, isolated from the run.

    Hooks(before_tool_call=[fn], after_tool_call=[fn], tool_result_persist=[fn])

- `before_tool_call(call, ctx)` returns None (go on), `Block("why")` (the call does not run), or a dict of
  parameters shallow-merged into the call's arguments (which are then validated again). `ctx` is the call's
  `ToolContext`: `ctx.agent_name`, `ctx.session_id` and `ctx.run_id` say whose call it is.
- `after_tool_call(call, result)` returns None, a replacement `ToolResult`, or `StopAfterBatch()`.
- `tool_result_persist(call, result)` returns None or the `ToolResult` the transcript keeps (redaction).

A hook that raises is logged and skipped, and the error is kept on the call record (`call.hook_errors`):
hooks are best effort; only an explicit `Block` blocks.
"""

from __future__ import annotations

import inspect
import logging
from dataclasses import dataclass, field
from typing import Any, Callable

from ..messages import ToolResult
from ..records import CallRecord

__all__ = [
    "Block",
    "Hooks",
    "StopAfterBatch",
    "run_after_tool_call",
    "run_before_tool_call",
    "run_tool_result_persist",
]

log = logging.getLogger("nbagent.hooks")


@dataclass(frozen=True, slots=True)
class Block:
    """Returned by a `before_tool_call` hook: the call is not executed; the model is told `reason`."""

    reason: str = "blocked by a hook"


@dataclass(frozen=True, slots=True)
class StopAfterBatch:
    """Returned by an `after_tool_call` hook: the run ends once the current batch of calls is done."""

    reason: str = "a hook asked to stop after this batch"


def _as_list(value: Any) -> list[Callable[..., Any]]:
    if value is None:
        return []
    if callable(value):
        return [value]
    hooks = list(value)
    for hook in hooks:
        if not callable(hook):
            raise TypeError(f"a hook must be callable, got {hook!r}")
    return hooks


@dataclass
class Hooks:
    """The hooks of an agent, by lifecycle point (each a callable or a list of them)."""

    before_tool_call: list[Callable[..., Any]] = field(default_factory=list)
    """`(call, ctx) -> None | Block | dict`: before permission and execution."""
    after_tool_call: list[Callable[..., Any]] = field(default_factory=list)
    """`(call, result) -> None | ToolResult | StopAfterBatch`: after execution."""
    tool_result_persist: list[Callable[..., Any]] = field(default_factory=list)
    """`(call, result) -> None | ToolResult`: last, before the result is written to the transcript."""

    def __post_init__(self) -> None:
        self.before_tool_call = _as_list(self.before_tool_call)
        self.after_tool_call = _as_list(self.after_tool_call)
        self.tool_result_persist = _as_list(self.tool_result_persist)

    def __bool__(self) -> bool:
        return bool(self.before_tool_call or self.after_tool_call or self.tool_result_persist)


async def call_hook(hook: Callable[..., Any], *args: Any) -> Any:
    """Call a sync or async hook."""
    value = hook(*args)
    if inspect.isawaitable(value):
        value = await value
    return value


def hook_name(hook: Callable[..., Any]) -> str:
    return getattr(hook, "__qualname__", None) or getattr(hook, "__name__", None) or repr(hook)


# --------------------------------------------------------------------------------------------------
# The three loops: each hook in order, failures recorded on the call and skipped
# --------------------------------------------------------------------------------------------------
def hook_failed(rec: CallRecord, point: str, hook: Any, exc: BaseException) -> None:
    """Record (and log) a hook that raised; the call goes on without it."""
    message = f"{point} hook {hook_name(hook)} raised {type(exc).__name__}: {exc}"
    log.warning("%s (ignored)", message)
    rec.hook_errors.append(message)


async def run_before_tool_call(hooks: Hooks, rec: CallRecord, ctx: Any, args: Any,
                               validate: Callable[[dict[str, Any]], Any]) -> Any:
    """Run the `before_tool_call` hooks in order; return the `Block` one returned, else the arguments.

    A dict a hook returns is shallow-merged into the arguments and validated again with `validate` (its
    `ArgumentsError` propagates); the record's `arguments` follow, so the next hook sees the change.
    """
    for hook in hooks.before_tool_call:
        try:
            out = await call_hook(hook, rec, ctx)
        except Exception as exc:
            hook_failed(rec, "before_tool_call", hook, exc)
            continue
        if isinstance(out, Block):
            return out
        if isinstance(out, dict):
            if out:
                args = validate({**args, **out})
                rec.arguments = args
        elif out is not None:
            rec.hook_errors.append(f"before_tool_call {hook_name(hook)} returned {type(out).__name__}; ignored")
    return args


async def run_after_tool_call(hooks: Hooks, rec: CallRecord, result: ToolResult, status: str) -> tuple[ToolResult, str, str | None]:
    """Run the `after_tool_call` hooks in order: (result, status, why the run should stop after the batch).

    A replacement `ToolResult` sets the status to ok or error from its `is_error` (a timeout stays one).
    """
    stop: str | None = None
    for hook in hooks.after_tool_call:
        try:
            out = await call_hook(hook, rec, result)
        except Exception as exc:
            hook_failed(rec, "after_tool_call", hook, exc)
            continue
        if isinstance(out, StopAfterBatch):
            stop = out.reason
        elif isinstance(out, ToolResult):
            result = out
            status = "error" if result.is_error else ("ok" if status in ("ok", "error") else status)
        elif out is not None:
            rec.hook_errors.append(f"after_tool_call {hook_name(hook)} returned {type(out).__name__}; ignored")
    return result, status, stop


async def run_tool_result_persist(hooks: Hooks, rec: CallRecord, result: ToolResult) -> ToolResult:
    """Run the `tool_result_persist` hooks in order; return the result the transcript keeps."""
    for hook in hooks.tool_result_persist:
        try:
            out = await call_hook(hook, rec, result)
        except Exception as exc:
            hook_failed(rec, "tool_result_persist", hook, exc)
            continue
        if isinstance(out, ToolResult):
            result = out
        elif out is not None:
            rec.hook_errors.append(f"tool_result_persist {hook_name(hook)} returned {type(out).__name__}; ignored")
    return result
