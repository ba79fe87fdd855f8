"""Hooks around each tool call: plain callables, sync or async, isolated from the run.

    Hooks(before_tool_call=[fn], after_tool_call=[fn], tool_result_persist=[fn])

- `before_tool_call(call, ctx)` returns None (go on), `Block("why")` (the call does not run), or a dict of
  parameters shallow-merged into the call's arguments (which are then validated again).
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

__all__ = ["Block", "Hooks", "StopAfterBatch"]

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
