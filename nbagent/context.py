"""What a running tool can reach: `ToolContext`, cancellation, progress, the session's constraints."""

from __future__ import annotations

import asyncio
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, TypeVar

from .safety.secrets import redact

__all__ = ["SANDBOX_POLICIES", "CancellationToken", "Constraints", "ProgressUpdate", "RunScope", "SandboxState",
           "ToolCancelled", "ToolContext"]

T = TypeVar("T")
_MISSING: Any = object()


class ToolCancelled(Exception):
    """Raised inside a tool (by `ctx.raise_if_cancelled()`, or injected into a blocking thread) when its call
    was cancelled or timed out."""


class CancellationToken:
    """A thread-safe flag that says a call (or a whole run) should stop.

    Async tools are also cancelled the asyncio way; sync tools running on a thread should look at
    `ctx.cancelled` in their loops (the runtime also interrupts pure-Python code in them). A child token
    (`CancellationToken(parent=run_token)`) is cancelled when its parent is.
    """

    __slots__ = ("_set", "_event", "_callbacks", "reason", "_parent", "_lock")

    def __init__(self, parent: CancellationToken | None = None) -> None:
        self._set = False
        self._event: threading.Event | None = None  # made only when someone waits
        self._callbacks: list[Callable[[], None]] | None = None
        self.reason = ""
        self._parent = parent
        self._lock = _TOKEN_LOCK

    @property
    def reason_text(self) -> str:
        if self._set:
            return self.reason
        return self._parent.reason_text if self._parent is not None else ""

    def cancel(self, reason: str = "cancelled") -> None:
        with self._lock:
            if self._set:
                return
            self.reason = reason
            self._set = True
            event = self._event
            callbacks, self._callbacks = self._callbacks, None
        if event is not None:
            event.set()
        for cb in callbacks or ():
            try:
                cb()
            except Exception:  # pragma: no cover - callbacks are best effort
                pass

    @property
    def cancelled(self) -> bool:
        if self._set:
            return True
        parent = self._parent
        return parent is not None and parent.cancelled

    def on_cancel(self, callback: Callable[[], None]) -> None:
        """Call `callback` (from any thread) when the token is cancelled; at once if it already is."""
        with self._lock:
            if not self._set:
                if self._callbacks is None:
                    self._callbacks = []
                self._callbacks.append(callback)
                return
        callback()

    def wait(self, timeout: float | None = None) -> bool:
        """Block (in a sync tool's thread) until cancelled or `timeout` seconds passed; return `cancelled`."""
        with self._lock:
            if self._event is None:
                self._event = threading.Event()
                if self._set:
                    self._event.set()
            event = self._event
        if self._parent is None:
            return event.wait(timeout)
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self.cancelled:
            left = 0.05 if deadline is None else min(0.05, deadline - time.monotonic())
            if left <= 0:
                break
            event.wait(left)
        return self.cancelled

    def __bool__(self) -> bool:
        return self.cancelled

    def __repr__(self) -> str:
        return f"CancellationToken(cancelled={self.cancelled})"


_TOKEN_LOCK = threading.Lock()


class RunScope:
    """What lives as long as one run: objects its tools share (the shell's background processes), each made
    on first use and closed when the run ends, however it ends.

    `scope.get(SomeType, factory)` returns the run's one object of that type (made by `factory()` the first
    time); `scope.find(SomeType)` returns it or None. When the run ends the loop awaits `close()`, which
    calls `aclose()` (or `close()`) on each, in reverse order of making. `emit` reaches the run's listeners.
    """

    __slots__ = ("_objects", "emit", "closed")

    def __init__(self, emit: Callable[[Any], None] | None = None) -> None:
        self._objects: dict[type, Any] = {}
        self.emit = emit or (lambda event: None)
        self.closed = False

    def get(self, type_: type[T], factory: Callable[[], T]) -> T:
        obj = self._objects.get(type_)
        if obj is None:
            if self.closed:
                raise RuntimeError("the run is over: nothing new can be started in it")
            obj = self._objects[type_] = factory()
        return obj

    def find(self, type_: type[T]) -> T | None:
        return self._objects.get(type_)

    @property
    def holds_anything(self) -> bool:
        return bool(self._objects)

    async def close(self) -> None:
        """Close what the run made (each failure logged, the rest still closed)."""
        self.closed = True
        for obj in reversed(list(self._objects.values())):
            try:
                closer = getattr(obj, "aclose", None)
                if closer is not None:
                    await closer()
                elif hasattr(obj, "close"):
                    obj.close()
            except Exception:  # pragma: no cover - closing is best effort
                import logging

                logging.getLogger("nbagent.context").exception("closing %r at the end of the run failed", obj)


SANDBOX_POLICIES = ("read-only", "workspace-write", "danger-full-access")
"""The OS sandbox policies for shell commands (see `nbagent.safety.sandbox`)."""


@dataclass(slots=True, frozen=True)
class SandboxState:
    """What a run's shell commands run in (`AgentRun.sandbox`): data a view reads, so that drawing a run never
    probes the machine."""

    policy: str
    """The policy approved commands get, as shown: "workspace-write", "read-only + network"..."""
    backend: str
    """The machine's sandbox: "bubblewrap", "landlock", or "none"."""
    enforced: bool
    """Whether approved commands run behind a wall (a backend is there and the policy is not danger-full-access)."""
    description: str
    """One line saying so, or why there is no sandbox ("sandbox: bubblewrap, workspace-write")."""


@dataclass(slots=True, frozen=True)
class Constraints:
    """The session's execution constraints, visible to every call."""

    mode: str = "default"
    """The permission mode: default, acceptEdits, plan, dontAsk, bypassPermissions."""
    capability_mode: str = "all"
    """Which tools the plan keeps: read-only, read-write, execute, all."""
    allowed_tools: tuple[str, ...] | None = None
    """Name patterns of the tools the session may use (None: every tool)."""
    workspace: Path | None = None
    """The directory file tools are confined to."""
    sandbox: str = "workspace-write"
    """The OS sandbox policy for commands the person (or a rule) allowed: read-only, workspace-write,
    danger-full-access. Commands auto-allowed as read-only always run under `read-only`."""


@dataclass(slots=True)
class ProgressUpdate:
    """One progress report of a running tool: reaches listeners (the UI), never the history."""

    message: str | None = None
    """A short human status ("downloaded 3 of 10 files")."""
    fraction: float | None = None
    """0.0 to 1.0 when the tool knows how far along it is."""
    output: str | None = None
    """A chunk of live output (stdout of a command, say) to append to the call's output tail."""
    data: dict[str, Any] = field(default_factory=dict)
    """Anything else the tool wants a UI to see."""
    time: float = 0.0
    """`time.monotonic()` when it was reported."""


class ToolContext:
    """Handed to a tool that asks for it (a parameter annotated `ToolContext`).

    Gives the call id, the run, agent and session it belongs to (`run_id`, `agent_name`, `session_id`: a
    `before_tool_call` hook gets this context too), the working directory, cancellation, `progress(...)`,
    the session's constraints and typed extensions fetched by type: `ctx.get(SomeType)`.
    """

    __slots__ = (
        "call_id",
        "tool_name",
        "cwd",
        "cancellation",
        "constraints",
        "decision",
        "rules",
        "run_id",
        "agent_name",
        "session_id",
        "scope",
        "_extensions",
        "_on_progress",
        "_loop",
        "_pending",
        "_drain_scheduled",
        "_lock",
    )

    def __init__(
        self,
        call_id: str,
        tool_name: str = "",
        *,
        cwd: Path | str | None = None,
        cancellation: CancellationToken | None = None,
        constraints: Constraints | None = None,
        extensions: dict[type, Any] | None = None,
        on_progress: Callable[[ProgressUpdate], None] | None = None,
        loop: asyncio.AbstractEventLoop | None = None,
        rules: tuple[Any, ...] = (),
        run_id: str | None = None,
        agent_name: str | None = None,
        session_id: str | None = None,
        scope: RunScope | None = None,
    ) -> None:
        self.call_id = call_id
        self.run_id = run_id
        """The id of the run the call belongs to (`AgentRun.id`), for tools that mark what a run did."""
        self.agent_name = agent_name
        """The name of the agent making the call (`Agent(name=...)`)."""
        self.session_id = session_id
        """The stored conversation the run belongs to (`Agent.session_id`; None when it is not stored)."""
        self.scope = scope if scope is not None else RunScope()
        """What lives as long as the run (`RunScope`): a tool keeps there what must end with the run."""
        self.tool_name = tool_name
        self.cwd = cwd if isinstance(cwd, Path) else Path(cwd) if cwd is not None else Path.cwd()
        self.cancellation = cancellation if cancellation is not None else CancellationToken()  # not `or`: a token is falsy until cancelled
        self.constraints = constraints or Constraints()
        self.rules = rules
        """The session's permission rules (`Rule`s), for tools that must honour deny rules on what they
        reach themselves (a grep that walks a tree skips files behind `deny: read_file(...)`)."""
        self.decision: Any = None
        """The permission decision that allowed the call (set before it runs; `source` says what decided)."""
        self._extensions = extensions or {}
        self._on_progress = on_progress
        self._loop = loop
        self._pending: deque[ProgressUpdate] | None = None  # progress from worker threads, made on first use
        self._drain_scheduled = False
        self._lock = _PROGRESS_LOCK

    # -- typed extensions ---------------------------------------------------------------------------
    def get(self, type_: type[T], default: Any = _MISSING) -> T:
        """The extension registered for `type_` (or an instance of a subclass of it).

        Raises `LookupError` naming what is registered when there is none and no default is given.
        """
        ext = self._extensions
        if type_ in ext:
            return ext[type_]
        for value in ext.values():
            if isinstance(value, type_):
                return value
        if default is not _MISSING:
            return default
        have = ", ".join(sorted(t.__name__ for t in ext)) or "none"
        raise LookupError(f"no {type_.__name__} extension in this tool context (registered: {have})")

    # -- cancellation -------------------------------------------------------------------------------
    @property
    def cancelled(self) -> bool:
        """True once the call was cancelled or timed out: a long-running sync tool should stop."""
        return self.cancellation.cancelled

    def raise_if_cancelled(self) -> None:
        if self.cancellation.cancelled:
            raise ToolCancelled(self.cancellation.reason_text or "cancelled")

    # -- progress -----------------------------------------------------------------------------------
    def progress(
        self,
        message: str | None = None,
        *,
        fraction: float | None = None,
        output: str | None = None,
        **data: Any,
    ) -> None:
        """Report progress. Safe from any thread; reaches listeners (the live view), never the history."""
        if fraction is not None:
            fraction = 0.0 if fraction < 0 else 1.0 if fraction > 1 else float(fraction)
        if message:  # what a view shows and a record keeps carries no key either
            message = redact(message, fresh=False)
        if output:
            output = redact(output, fresh=False)
        update = ProgressUpdate(message, fraction, output, data, time.monotonic())
        sink = self._on_progress
        if sink is None:
            return
        loop = self._loop
        if loop is None or _on_loop_thread(loop):
            sink(update)
            return
        # From a worker thread: queue, and schedule one drain on the loop for however many arrive meanwhile.
        with self._lock:
            if self._pending is None:
                self._pending = deque()
            self._pending.append(update)
            if self._drain_scheduled:
                return
            self._drain_scheduled = True
        try:
            loop.call_soon_threadsafe(self._drain)
        except RuntimeError:  # loop closed: the run is over
            pass

    def _drain(self) -> None:
        with self._lock:
            items = list(self._pending or ())
            if self._pending is not None:
                self._pending.clear()
            self._drain_scheduled = False
        sink = self._on_progress
        if sink is not None:
            for item in items:
                sink(item)

    def __repr__(self) -> str:
        return f"ToolContext(call_id={self.call_id!r}, tool={self.tool_name!r}, cwd={str(self.cwd)!r})"


_PROGRESS_LOCK = threading.Lock()


def _on_loop_thread(loop: asyncio.AbstractEventLoop) -> bool:
    try:
        return asyncio.get_running_loop() is loop
    except RuntimeError:
        return False
