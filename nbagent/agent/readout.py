"""The read side of a run: `RunReadout` is what an `AgentRun` shows of the `RunState` its loop changes (the
transcript, calls, usage and cost, context, timeline) and how it is displayed (repr, text, HTML, a provider's
wire format). It reads and never changes: starting, steering, cancelling and waiting are `AgentRun`'s
(`nbagent.agent.run`).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from .. import render
from ..budget.pricing import Spend
from ..events import Event
from ..messages import AssistantMessage, Message, Usage, UserMessage
from ..providers import Model, load_model
from ..records import CallRecord

if TYPE_CHECKING:  # pragma: no cover
    from ..context import RunScope
    from .loop import RunState

__all__ = ["RunReadout"]


class RunReadout:
    """What a run did and where it stands, read from its `RunState` (`_state`); the base of `AgentRun`."""

    _state: RunState
    model: Model
    scope: RunScope
    context_window: int | None
    # -- what the run changed (read from its state) ---------------------------------------------------
    @property
    def messages(self) -> list[Message]:
        """The transcript: valid for every provider at every moment."""
        return self._state.messages

    @property
    def calls(self) -> list[CallRecord]:
        """One record per tool call, in order."""
        return self._state.calls

    @property
    def requests(self) -> list[Any]:
        """The exact bodies sent to the provider, in order."""
        return self._state.requests

    @property
    def events(self) -> list[Event]:
        """What happened (text deltas, tool-call deltas and progress go to subscribers only)."""
        return self._state.events

    @property
    def status(self) -> str:
        """running, waiting_for_approval, done, failed or cancelled."""
        return self._state.status

    @property
    def output(self) -> Any:
        """The final text, or the structured result of a run with `output_type`."""
        return self._state.output

    @property
    def error(self) -> BaseException | None:
        """What made the run fail."""
        return self._state.error

    @property
    def stop_reason(self) -> str | None:
        """Why the run stopped early (a hook asked, every result asked to terminate)."""
        return self._state.stop_reason

    @property
    def usage(self) -> Usage:
        """Tokens used, summed over the run's responses (input, output, cached read/write, reasoning)."""
        return self._state.usage

    @property
    def cost(self) -> float | None:
        """What the run's requests cost in US dollars (None: the model's price is unknown)."""
        return self._state.spend.cost

    @property
    def spend(self) -> Spend:
        """The run's tokens and cost together."""
        return self._state.spend

    @property
    def conversation_spend(self) -> Spend:
        """Tokens and cost of the whole conversation: the runs it continues, and this one."""
        return self._state.conversation

    @property
    def conversation_usage(self) -> Usage:
        return self._state.conversation.usage

    @property
    def conversation_cost(self) -> float | None:
        return self._state.conversation.cost

    @property
    def context_tokens(self) -> int:
        """How many tokens the conversation takes: the provider's count of the last request plus an estimate
        of what was added since (before the first response: an estimate)."""
        state = self._state
        if state.context_tokens == 0 and state.messages:
            from ..budget.window import measure

            return measure(state.messages, state.context_anchor)[0]
        return state.context_tokens

    @property
    def context_measured(self) -> bool:
        """Whether `context_tokens` rests on the provider's count (else: an estimate)."""
        return self._state.context_measured

    @property
    def context_fraction(self) -> float | None:
        """How full the context window is (0..1; None when the window is unknown)."""
        return self.context_tokens / self.context_window if self.context_window else None

    @property
    def compactions(self) -> list[Any]:
        """The `Compaction`s made in this run (what each replaced, whole, and by what)."""
        return self._state.compactions

    @property
    def turns(self) -> int:
        """Model requests made so far."""
        return self._state.turns

    @property
    def loaded_tools(self) -> set[str]:
        """Deferred tools loaded in this run."""
        return self._state.loaded_tools

    @property
    def processes(self) -> list[Any]:
        """The background processes the run's shell started (`BackgroundProcess`: command, status, output),
        in order; every one still running is stopped when the run ends."""
        from ..toolbox._background import ProcessRegistry

        registry = self.scope.find(ProcessRegistry)
        return list(registry.processes.values()) if registry is not None else []

    @property
    def kernel_only(self) -> list[str]:
        """The top-level names this run's code (`python`, `run_cell`) made or changed that no cell of the
        notebook defines, sorted: they exist only in the kernel, and a rerun of the notebook lacks them."""
        from ..lineage import kernel_only

        return kernel_only(self)

    def to_cells(self) -> list[dict[str, Any]]:
        """Code cells (nbformat 4 dicts, provenance in `metadata["nbagent"]`) that make this run's final state
        again when run in order after the notebook's own cells: the code of the calls that state needs, as
        it ran. Calls whose effects were replaced, that failed or that only looked are left out
        (`nbagent.lineage.plan_cells(run).summary()` says which and why)."""
        from ..lineage import to_cells

        return to_cells(self)

    @property
    def started_at(self) -> float:
        return self._state.started_at

    @property
    def finished_at(self) -> float | None:
        return self._state.finished_at

    # -- where the run stands ----------------------------------------------------------------------------
    @property
    def steering(self) -> list[UserMessage]:
        """Messages sent with `steer()` that have not joined the transcript yet."""
        return list(self._state.steering)

    @property
    def done(self) -> bool:
        return self._state.outcome is not None

    @property
    def elapsed(self) -> float:
        """Seconds since the run started (its whole duration once it is over)."""
        state = self._state
        return state.elapsed if state.elapsed is not None else time.monotonic() - state.t0

    @property
    def new_messages(self) -> list[Message]:
        """The messages this run added (the prompt onwards)."""
        return self.messages[self._state.history_length :]

    @property
    def timeline(self) -> list[Any]:
        """What this run showed, in order (its responses, messages it added, compactions), unchanged by
        later compactions of the transcript: views and the static rendering are drawn from it."""
        return list(self._state.timeline)

    @property
    def text(self) -> str:
        """The final text of the model (also for runs with a structured output)."""
        for m in reversed(self.messages):
            if isinstance(m, AssistantMessage) and m.text:
                return m.text
        return ""

    # -- display -------------------------------------------------------------------------------------------
    def __repr__(self) -> str:
        out = self.output if not isinstance(self.output, str) else (self.output[:60] + "..." if len(self.output) > 60 else self.output)
        err = f" error={type(self.error).__name__}: {self.error}" if self.error else ""
        return (f"<AgentRun {self.status} turns={self.turns} calls={len(self.calls)} "
                f"output={out!r}{err}>")

    def __str__(self) -> str:
        """The run as plain text: header, prompt, one line per call, the answer (what `print(run)` shows)."""
        return render.run_text(self)

    def _repr_pretty_(self, printer, cycle: bool) -> None:  # IPython's text form: the same as str()
        printer.text(repr(self) if cycle else str(self))

    def _repr_html_(self) -> str:
        return render.run_html(self)

    def to_wire(self, model: Model | str | None = None) -> Any:
        """The transcript in a provider's message format (this run's model's, by default)."""
        target = load_model(model) if isinstance(model, str) else (model or self.model)
        return target.to_wire(self.messages)

