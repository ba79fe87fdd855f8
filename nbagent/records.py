"""The record of one tool call: everything that happened to it, for a person to inspect."""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

from . import reprs
from .decisions import Decision

if TYPE_CHECKING:  # pragma: no cover
    from .context import ProgressUpdate
    from .messages import ToolCall, ToolResult, ToolResultMessage

__all__ = ["ApprovalRequest", "CallRecord", "FINAL_STATUSES", "OutputTail"]

_EMPTY: list = []  # shared, never mutated: records without repairs point here

FINAL_STATUSES = frozenset(
    {"ok", "error", "denied", "blocked", "not_found", "invalid_arguments", "cancelled", "timeout"}
)
"""How a call can end. Before that it is `pending`, `waiting_for_approval` or `running`."""


class OutputTail:
    """The last `limit` characters of a tool's live output, kept cheaply however many chunks arrive."""

    __slots__ = ("_chunks", "_size", "limit", "total")

    def __init__(self, limit: int = 8000) -> None:
        self._chunks: deque[str] = deque()
        self._size = 0
        self.limit = limit
        self.total = 0

    def append(self, chunk: str) -> None:
        if not chunk:
            return
        self._chunks.append(chunk)
        self._size += len(chunk)
        self.total += len(chunk)
        while self._size - len(self._chunks[0]) >= self.limit:
            self._size -= len(self._chunks.popleft())

    @property
    def text(self) -> str:
        text = "".join(self._chunks)
        return text[-self.limit :] if len(text) > self.limit else text

    def __str__(self) -> str:
        return self.text

    def __len__(self) -> int:
        return min(self._size, self.limit)


class CallRecord:
    """One tool call, from the model's request to its result.

    `arguments` are the validated arguments (as a dict; hooks see the same), `raw_arguments` what the model
    sent, `result` the `ToolResult`, `status` how it ended, `decision` what allowed or denied it,
    `repairs` what the repair ladder changed in the arguments, `progress` the last progress reports,
    `wire` the JSON the model received for the result, `state_change` what code it ran did to the namespace.
    """

    __slots__ = (
        "id", "name", "call", "turn", "index", "tool", "raw_arguments", "arguments", "partial_arguments",
        "repairs", "result", "message", "status", "decision", "activity", "completed_activity",
        "started_at", "finished_at", "_progress", "progress_count", "fraction", "_output_tail", "_errors",
        "_hook_errors", "wire_format", "approval_waited", "queued", "decision_wait", "state_change", "__weakref__",
    )

    def __init__(self, call: ToolCall, turn: int = 0, index: int = 0,
                 wire_format: Callable[[ToolResultMessage], Any] | None = None) -> None:
        self.id: str = call.id
        self.name: str = call.name
        self.call = call
        self.turn = turn
        self.index = index
        self.tool: Any = None
        """The `Tool` the name resolved to (None: no such tool)."""
        self.raw_arguments: Any = call.raw_arguments if call.raw_arguments is not None else call.arguments
        self.arguments: dict[str, Any] | None = None
        self.partial_arguments: dict[str, Any] | None = None
        self.repairs: list[str] = _EMPTY  # type: ignore[assignment]
        self.result: ToolResult | None = None
        self.message: ToolResultMessage | None = None
        self.status: str = "pending"
        self.decision: Decision | None = None
        self.approval_waited: float | None = None
        """Seconds the call had waited for a decision when the last "still waiting" notice was given."""
        self.activity: str = f"Calling {call.name}"
        self.completed_activity: str | None = None
        self.started_at: float = time.monotonic()
        """When the call entered its lifecycle (until then: when the model's response named it)."""
        self.finished_at: float | None = None
        self.queued: float | None = None
        """Seconds the call waited for its turn before its lifecycle began (behind the calls before it in a
        sequential batch, their approvals included); None until its turn came."""
        self.decision_wait: float | None = None
        """Seconds the call waited for a decision (a person's click, an approver's answer); None: nobody was asked."""
        # Created on first use: most calls never report progress or fail, and a long run keeps every record.
        self._progress: deque[ProgressUpdate] | None = None
        self.progress_count = 0
        self.fraction: float | None = None
        self._output_tail: OutputTail | None = None
        self._errors: list[BaseException] | None = None
        self._hook_errors: list[str] | None = None
        self.wire_format = wire_format
        """How the model receives a result (its provider's `wire_tool_result`); None: the neutral form."""
        self.state_change: Any = None
        """For a call that ran code in the namespace (`python`, `run_cell`): what it assigned, rebound, mutated,
        deleted and read (`nbagent.lineage.StateChange`); None for other calls."""

    @property
    def progress(self) -> deque[ProgressUpdate]:
        """The last 100 progress reports (`progress_count` says how many there were)."""
        if self._progress is None:
            self._progress = deque(maxlen=100)
        return self._progress

    @property
    def output_tail(self) -> OutputTail:
        """The tail of the tool's live output (what it reported with `ctx.progress(output=...)`)."""
        if self._output_tail is None:
            self._output_tail = OutputTail()
        return self._output_tail

    @property
    def errors(self) -> list[BaseException]:
        """Exceptions raised while handling the call (the tool's own, an approver's...)."""
        if self._errors is None:
            self._errors = []
        return self._errors

    @property
    def hook_errors(self) -> list[str]:
        """What went wrong in hooks (they are skipped, and the call goes on)."""
        if self._hook_errors is None:
            self._hook_errors = []
        return self._hook_errors

    @property
    def done(self) -> bool:
        return self.status in FINAL_STATUSES

    @property
    def duration(self) -> float | None:
        """Seconds from the call entering the lifecycle to its result (None while it runs)."""
        if self.finished_at is None:
            return None
        return self.finished_at - self.started_at

    @property
    def elapsed(self) -> float:
        end = self.finished_at if self.finished_at is not None else time.monotonic()
        return end - self.started_at

    @property
    def own_time(self) -> float | None:
        """Seconds the call itself took (None while it runs): its `duration` less the time it waited for a
        decision. With `queued` and `decision_wait`, what every rendering of the call's time says."""
        if self.duration is None:
            return None
        return max(0.0, self.duration - (self.decision_wait or 0.0))

    @property
    def label(self) -> str:
        """The activity label a UI shows: the completed one once done."""
        return self.completed_activity or self.activity

    @property
    def error(self) -> BaseException | None:
        """The exception a failing tool raised, if any."""
        return self._errors[0] if self._errors else None

    @property
    def wire(self) -> Any:
        """The JSON the model received (or will receive) for this call's result, in the run's provider format."""
        if self.message is None:
            return None
        if self.wire_format is not None:
            return self.wire_format(self.message)
        from .transcript import neutral_message

        return neutral_message(self.message)

    @property
    def details(self) -> Any:
        """Shortcut for `result.details`: the live Python object the tool produced."""
        return None if self.result is None else self.result.details

    def __repr__(self) -> str:
        dur = f", {self.duration:.3f}s" if self.duration is not None else ""
        return f"<CallRecord {self.name} id={self.id!r} status={self.status}{dur}>"

    def __str__(self) -> str:
        """One line: status, label, tool, time, decision (and the result's first line)."""
        return reprs.render("call_text", self)

    def _repr_html_(self) -> str:
        return reprs.render("call_record_html", self)


@dataclass(slots=True)
class ApprovalRequest:
    """What an approver is asked: this call, with exactly these arguments, for this reason."""

    call: CallRecord
    """The call record (its `arguments` are the validated arguments that would run)."""
    tool: Any
    """The `Tool` that would run."""
    arguments: dict[str, Any]
    """The arguments shown for approval."""
    reason: str
    """Why the pipeline asks (e.g. "default mode asks before tools that are not read-only")."""
    suggested_scope: str | None = None
    """The argument pattern an "always allow" would cover (None: the whole tool)."""
    fingerprint: str = ""

    @property
    def name(self) -> str:
        return self.tool.name
