"""Recording runs into the session store (`nbagent.sessions`) as they go.

`SessionRecorder(writer, run).attach()` listens to a run's events and writes what is new at the points
where the transcript is whole: the prompt when the run starts; the model's response as soon as it arrives,
before its calls run (so calls that were running when a kernel died come back "interrupted"); a batch's
results, call records and the next request when the loop next waits (the next request on its way to the
provider), or with the next response when that comes first (a model that answers at once: one write a
turn); and the run's end. `rolled_back(run)` is the conversation a run leaves behind.

What a killed kernel loses, precisely: the lines gathered since the last write. Those are the results of
the batch in flight (its calls come back "interrupted", since the response that asked for them was written
before they ran) and, for a kernel killed in the moment between a batch's end and the loop's next wait
(the loop building the next request, without pausing), the results of the batch that just ended, which
come back "interrupted" the same way. What is written is durable as `_syncer` says.
"""

from __future__ import annotations

import asyncio
from typing import Any

from ..messages import AssistantMessage, Message
from ._writer import SessionWriter

__all__ = ["SessionRecorder", "rolled_back"]


class SessionRecorder:
    """Writes a run into a session as it goes, from the run's events (see the module docstring for when),
    the messages, finished calls and request bodies that are new, each batch's results fsynced.

    It reads only the run's public record (`messages`, `calls`, `requests`, `status`), so the loop knows
    nothing of it."""

    def __init__(self, writer: SessionWriter, run: Any) -> None:
        self.writer = writer
        self.run = run
        self._messages = _history_length(run)
        self._calls = 0
        self._requests = 0
        self._early: Any = None
        self._later: asyncio.Handle | None = None
        self.error: BaseException | None = None
        """The last error writing raised (recording never fails a run)."""

    def attach(self) -> SessionRecorder:
        self.run.subscribe(self)
        return self

    def __call__(self, event: Any) -> None:
        handle = _HANDLERS.get(getattr(event, "kind", ""))
        if handle is None:  # most events (a call started or finished, deltas) write nothing
            return
        try:
            handle(self, event)
        except Exception as exc:  # a full disk must not stop the run; the error is kept
            self.error = exc

    def _response(self, event: Any) -> None:
        # the calls the model asked for are on disk before they run: if the kernel dies during the batch,
        # resuming answers them "interrupted"; the last batch's results go with them when they were still
        # waiting for the loop to wait
        message = getattr(event, "message", None)
        if message is not None:
            self.flush(commit=False)
            self.writer.messages((message,))
            self._early = message
            self.writer.commit()

    def _turn(self, event: Any) -> None:
        # the last batch's results are whole now: written when the loop next waits, or with the response if
        # it comes first (one callback waits for the loop's next wait at a time)
        self.flush(commit=False)
        if self._later is None:
            self._write_later()

    def _started(self, event: Any) -> None:
        run = self.run
        model = getattr(getattr(run, "model", None), "spec", None)
        self.writer.run_started(getattr(run, "prompt", None), model=model,
                                mode=getattr(getattr(run, "agent", None), "mode", None))
        self.flush()

    def _compacted(self, event: Any) -> None:
        # Every message before it was written at the turn's start; the run's list is the new one now.
        self.writer.compaction(event.compaction)
        self._messages = len(self.run.messages)
        self.writer.commit()

    def _finished(self, event: Any) -> None:
        if self._later is not None:
            self._later.cancel()
            self._later = None
        self.flush(end=True)

    def _write_later(self) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # events from outside a loop: nothing waits, write now
            self.writer.commit()
            return
        self._later = loop.call_soon(self._written_later)

    def _written_later(self) -> None:
        self._later = None
        try:
            self.writer.commit()  # what is left since the last write: nothing, when a response came first
        except Exception as exc:
            self.error = exc

    def flush(self, *, end: bool = False, fsync: bool = True, commit: bool = True) -> None:
        run, writer = self.run, self.writer
        messages = run.messages
        if len(messages) > self._messages:
            new = messages[self._messages:]
            if self._early is not None:
                if _same_response(new[0], self._early):
                    new = new[1:]  # written when the model answered
                self._early = None
            writer.messages(new)
        self._messages = len(messages)
        calls = run.calls
        while self._calls < len(calls) and getattr(calls[self._calls], "status", "") not in _UNFINISHED:
            writer.call(calls[self._calls])
            self._calls += 1
        requests = run.requests
        if len(requests) > self._requests:
            for body in requests[self._requests:]:
                writer.request(body)
            self._requests = len(requests)
        if end:
            for rec in calls[self._calls:]:
                writer.call(rec)
            self._calls = len(calls)
            writer.run_ended(run.status, usage=getattr(run, "usage", None), error=getattr(run, "error", None),
                             cost=getattr(run, "cost", None),
                             output=run.output if isinstance(getattr(run, "output", None), str) else None)
            writer.close()
            return
        if commit:
            writer.commit(fsync=fsync)


_UNFINISHED = frozenset(("pending", "running", "waiting", "waiting_for_approval"))
"""Statuses of a call still going: its record is written once it has ended."""
_HANDLERS = {"model_response": SessionRecorder._response, "turn_started": SessionRecorder._turn,
             "run_started": SessionRecorder._started, "compacted": SessionRecorder._compacted,
             "run_finished": SessionRecorder._finished}
"""What the recorder does for each kind of event it writes on (the others it lets by)."""


def _same_response(a: Any, b: Any) -> bool:
    if a is b:
        return True
    return (isinstance(a, AssistantMessage) and isinstance(b, AssistantMessage) and a.text == b.text
            and [c.id for c in a.tool_calls] == [c.id for c in b.tool_calls])


def rolled_back(run: Any) -> list[Message]:
    """The conversation after `run`: its messages, less a prompt the model never answered (a run that
    failed before any response), so the next prompt does not follow another user message."""
    messages = list(run.messages)
    start = _history_length(run)
    if getattr(run, "status", "") in ("failed", "cancelled") and not any(
            isinstance(m, AssistantMessage) for m in messages[start:]):
        return messages[:start]
    return messages


def _history_length(run: Any) -> int:
    """How many of the run's messages were there before it (they are in the session already)."""
    new = getattr(run, "new_messages", None)
    if callable(new):
        new = new()
    if isinstance(new, list):
        return len(run.messages) - len(new)
    return getattr(run, "_history_length", 0)
