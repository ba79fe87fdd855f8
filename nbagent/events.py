"""What a model stream and a run emit, for UIs and logs.

A model's `stream()` yields `TextDelta`, `ReasoningDelta` and `ToolCallDelta` events, then the finished
`AssistantMessage`. A run re-emits those and adds its own: turns, tool calls starting, progressing,
waiting for approval and finishing, and the run finishing. Subscribe with `run.subscribe(fn)` or
`agent.start(..., on_event=fn)`; every event has a `kind`. Events carry records (`CallRecord`, the
`AssistantMessage`), never the run: a listener that needs the run closes over the handle it subscribed to.
"""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Literal, Union

if TYPE_CHECKING:  # pragma: no cover
    from .context import ProgressUpdate
    from .decisions import Decision
    from .messages import AssistantMessage
    from .records import ApprovalRequest, CallRecord

__all__ = [
    "ApprovalDecided",
    "ApprovalRequested",
    "ApprovalStillWaiting",
    "Compacted",
    "Event",
    "ModelResponse",
    "ModelRetrying",
    "ModelSilent",
    "ReasoningDelta",
    "RunFinished",
    "RunStarted",
    "Steered",
    "StreamEvent",
    "TextDelta",
    "ToolCallDelta",
    "ToolCallFinished",
    "ToolCallProgress",
    "ToolCallStarted",
    "ToolPresented",
    "TurnStarted",
    "report_retry",
    "report_silence",
    "retry_listener",
]


# -- from the model's stream -------------------------------------------------------------------------
@dataclass(slots=True)
class TextDelta:
    """A piece of the answer's visible text."""

    text: str
    kind: Literal["text_delta"] = "text_delta"


@dataclass(slots=True)
class ReasoningDelta:
    """A piece of the model's reasoning (never part of the answer's text)."""

    text: str
    kind: Literal["reasoning_delta"] = "reasoning_delta"


class ToolCallDelta:
    """A tool call's arguments arriving: what has been parsed so far, for a live view.

    `ToolCallDelta(index, id, name, arguments_delta, partial_arguments)`. Providers build it with
    `ToolCallDelta.lazy(...)`: then `partial_arguments` is computed the first time it is read (a snapshot
    costs time proportional to the arguments so far, so only the deltas a UI looks at pay for one).
    """

    __slots__ = ("index", "id", "name", "arguments_delta", "_partial", "_compute")
    __match_args__ = ("index", "id", "name", "arguments_delta", "partial_arguments")

    kind: Literal["tool_call_delta"] = "tool_call_delta"

    index: int
    """Position of the call in the response."""
    id: str | None
    """The call id, once known."""
    name: str | None
    """The tool name, once known."""
    arguments_delta: str
    """The raw text fragment that just arrived."""

    def __init__(
        self,
        index: int,
        id: str | None = None,
        name: str | None = None,
        arguments_delta: str = "",
        partial_arguments: dict[str, Any] | None = None,
    ) -> None:
        self.index = index
        self.id = id
        self.name = name
        self.arguments_delta = arguments_delta
        self._partial = partial_arguments
        self._compute: Callable[[], Any] | None = None

    @classmethod
    def lazy(
        cls, index: int, id: str | None, name: str | None, arguments_delta: str, compute: Callable[[], Any]
    ) -> ToolCallDelta:
        """A delta whose `partial_arguments` are computed by `compute()` on first access."""
        delta = _new(cls)  # one of these per streamed fragment: skip __init__
        delta.index = index
        delta.id = id
        delta.name = name
        delta.arguments_delta = arguments_delta
        delta._partial = None
        delta._compute = compute
        return delta

    @property
    def partial_arguments(self) -> dict[str, Any] | None:
        """The arguments parsed so far (strings may be cut short), when they form an object."""
        if self._compute is not None:
            compute, self._compute = self._compute, None
            value = compute()
            self._partial = value if isinstance(value, dict) else None
        return self._partial

    @partial_arguments.setter
    def partial_arguments(self, value: dict[str, Any] | None) -> None:
        self._compute = None
        self._partial = value

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ToolCallDelta):
            return NotImplemented
        return (self.index, self.id, self.name, self.arguments_delta, self.partial_arguments) == (
            other.index, other.id, other.name, other.arguments_delta, other.partial_arguments)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        partial = "<not computed>" if self._compute is not None else repr(self._partial)
        return (f"ToolCallDelta(index={self.index!r}, id={self.id!r}, name={self.name!r}, "
                f"arguments_delta={self.arguments_delta!r}, partial_arguments={partial})")


_new = object.__new__

StreamEvent = Union[TextDelta, ReasoningDelta, ToolCallDelta]


@dataclass(slots=True)
class ModelRetrying:
    """The provider's request failed in a way worth trying again (rate limited, overloaded, a dropped
    connection), and it will be retried: after `delay` seconds, retry `attempt` of `max_attempts`."""

    attempt: int
    max_attempts: int
    delay: float
    reason: str
    kind: Literal["model_retrying"] = "model_retrying"

    def __str__(self) -> str:
        return f"retrying ({self.attempt} of {self.max_attempts}) in {self.delay:.0f} s: {self.reason}"


@dataclass(slots=True)
class ModelSilent:
    """The provider has sent nothing for `seconds` (it accepted the request): reported every few seconds
    while that lasts, then once with `seconds` 0 when data arrives again."""

    host: str
    seconds: float
    kind: Literal["model_silent"] = "model_silent"

    def __str__(self) -> str:
        return f"no answer from {self.host} for {self.seconds:.0f} s" if self.seconds else f"{self.host} answers again"


retry_listener: ContextVar[Callable[[Any], None] | None] = ContextVar("nbagent_retry_listener", default=None)
"""Set by the loop around a model request: a provider's retry loop reports each wait through it."""


def report_retry(attempt: int, max_attempts: int, delay: float, reason: str) -> None:
    """Called by a provider's retry loop before it waits (a no-op outside a run)."""
    listener = retry_listener.get()
    if listener is not None:
        try:
            listener(ModelRetrying(attempt, max_attempts, delay, reason))
        except Exception:  # a listener must not break the request
            pass


def report_silence(host: str, seconds: float) -> None:
    """Called by a provider's request while nothing arrives (a no-op outside a run)."""
    listener = retry_listener.get()
    if listener is not None:
        try:
            listener(ModelSilent(host, seconds))
        except Exception:  # a listener must not break the request
            pass


# -- from the run --------------------------------------------------------------------------------------
@dataclass(slots=True)
class RunStarted:
    """The run began (its prompt is the last message of `run.messages`)."""

    turn_limit: int = 0
    """The most model requests the run may make."""
    kind: Literal["run_started"] = "run_started"


@dataclass(slots=True)
class TurnStarted:
    turn: int
    """1 for the first model request of the run."""
    tools: tuple[str, ...] = ()
    """The names of the tools the model is offered this turn."""
    kind: Literal["turn_started"] = "turn_started"


@dataclass(slots=True)
class ModelResponse:
    """The model finished a response (its text and tool calls are known)."""

    turn: int
    message: AssistantMessage = field(repr=False)
    kind: Literal["model_response"] = "model_response"


@dataclass(slots=True)
class ToolCallStarted:
    """A tool call entered the lifecycle (before lookup, validation and permission)."""

    call: CallRecord
    kind: Literal["tool_call_started"] = "tool_call_started"


@dataclass(slots=True)
class ToolCallProgress:
    """A running tool reported progress: for the UI, never the history."""

    call: CallRecord = field(repr=False)
    update: ProgressUpdate = field(default=None)  # type: ignore[assignment]
    kind: Literal["tool_call_progress"] = "tool_call_progress"


@dataclass(slots=True)
class ApprovalRequested:
    """A call needs a person's consent; the approver has been asked."""

    call: CallRecord = field(repr=False)
    request: ApprovalRequest = field(default=None)  # type: ignore[assignment]
    kind: Literal["approval_requested"] = "approval_requested"


@dataclass(slots=True)
class ApprovalDecided:
    call: CallRecord = field(repr=False)
    decision: Decision = field(default=None)  # type: ignore[assignment]
    kind: Literal["approval_decided"] = "approval_decided"


@dataclass(slots=True)
class ApprovalStillWaiting:
    """A call has waited `waited` seconds for a person's decision (`Agent(approval_notice_after=...)`); the
    view shows a notice, and it is said again each time as long again has passed."""

    call: CallRecord = field(repr=False)
    waited: float = 0.0
    kind: Literal["approval_still_waiting"] = "approval_still_waiting"


@dataclass(slots=True)
class ToolPresented:
    """A finished call's result carries a UI-only payload (`Presentation`): for the view, never the model."""

    call: CallRecord = field(repr=False)
    presentation: Any = None
    kind: Literal["tool_presented"] = "tool_presented"


@dataclass(slots=True)
class Steered:
    """A message sent into the running run (`run.steer(...)`) joined the transcript at a turn boundary."""

    message: Any = field(repr=False)
    """The `UserMessage` appended."""
    text: str = ""
    kind: Literal["steered"] = "steered"


@dataclass(slots=True)
class ToolCallFinished:
    """A call has its final result and status."""

    call: CallRecord
    kind: Literal["tool_call_finished"] = "tool_call_finished"


@dataclass(slots=True)
class Compacted:
    """The transcript was compacted before a request: `compaction` says what was replaced, and by what."""

    compaction: Any
    """A `nbagent.budget.compaction.Compaction`."""
    kind: Literal["compacted"] = "compacted"


@dataclass(slots=True)
class RunFinished:
    """The run is over: `status` is done, failed or cancelled; `error` what made it fail."""

    status: str = ""
    error: BaseException | None = None
    kind: Literal["run_finished"] = "run_finished"


Event = Union[
    TextDelta, ReasoningDelta, ToolCallDelta, ModelRetrying, ModelSilent, RunStarted, TurnStarted, ModelResponse, ToolCallStarted,
    ToolCallProgress, ApprovalRequested, ApprovalDecided, ToolCallFinished, Compacted, RunFinished,
    ApprovalStillWaiting, ToolPresented, Steered,
]
