"""The turn loop, top to bottom.

    while True:
        build this turn's tool plan
        ask the model (streaming its deltas to listeners)
        no tool call              -> done (or, with output_type, one reminder to call submit_result)
        run the batch of calls    (nbagent.execution)
        append the response and its results to the transcript, together
        every result terminates, a hook asked to stop, submit_result accepted -> done
    cancellation -> unfinished calls get "cancelled" results; the transcript stays valid
    max_turns    -> MaxTurnsExceeded; model errors -> the run fails with that error
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from .errors import MaxTurnsExceeded, ModelError, OutputError
from .events import ModelResponse, RunFinished, RunStarted, TextDelta, TurnStarted
from .execution import execute_batch
from .messages import AssistantMessage, UserMessage, new_call_id
from .output import SUBMIT_TOOL_NAME
from .plan import build_plan, prepare_sources
from .records import CallRecord

if TYPE_CHECKING:  # pragma: no cover
    from .run import AgentRun

__all__ = ["drive"]

log = logging.getLogger("nbagent.loop")

OUTPUT_REMINDER = (
    "Your answer was not submitted. Finish by calling the `submit_result` tool with your result as its "
    "arguments, matching its schema exactly; do not answer in text."
)


async def drive(run: AgentRun) -> None:
    """Run the loop to its end; never raises (the outcome is in `run.status`, `run.error`)."""
    agent = run.agent
    run._emit(RunStarted(run))
    reminded = False
    status, error = "done", None
    try:
        while True:
            if run.turns >= agent.max_turns:
                raise MaxTurnsExceeded(
                    f"the run reached max_turns={agent.max_turns} before the model finished; "
                    "continue it with another run, or raise max_turns"
                )
            run.turns += 1
            await prepare_sources(agent.tools, run)
            plan = build_plan(
                agent.tools,
                run=run,
                capability_mode=agent.capability_mode,
                allowed_tools=agent.allowed_tools,
                loaded=run.loaded_tools,
                builtins=run.builtin_tools,
                resolver=agent.tool_resolver,
            )
            run._emit(TurnStarted(run.turns, plan.names))
            message = await _ask_model(run, plan.tools)
            if message.usage is not None:
                run.usage = run.usage + message.usage
            _normalise_ids(run, message)
            run._emit(ModelResponse(run.turns, message))

            if not message.tool_calls:
                run.messages.append(message)
                if run.output_tool is not None:
                    if reminded:
                        raise OutputError(
                            "the model answered in text instead of calling submit_result, even after a reminder"
                        )
                    reminded = True
                    run.messages.append(UserMessage(OUTPUT_REMINDER))
                    continue
                run.output = message.text
                break

            records = [CallRecord(call, run.turns, i) for i, call in enumerate(message.tool_calls)]
            wire = getattr(run.model, "wire_tool_result", None)
            for rec in records:
                rec._wire_fn = wire
            run.calls.extend(records)
            run._in_flight = (message, records)
            outcome = await execute_batch(run, plan, records)
            _commit(run)

            submitted = next((r for r in records if r.name == SUBMIT_TOOL_NAME and r.status == "ok"), None)
            if submitted is not None and run.output_tool is not None:
                run.output = submitted.result.details
                break
            if outcome.stop_requested:
                run.stop_reason = outcome.stop_requested
                run.output = message.text
                break
            if outcome.all_terminate:
                run.stop_reason = "every tool result asked to terminate"
                run.output = message.text
                break
    except asyncio.CancelledError:
        status = "cancelled"
        _commit(run)
        _keep_partial_text(run)
    except Exception as exc:  # model errors, max_turns, output errors, bugs: the run fails, clearly
        status, error = "failed", exc
        _commit(run)
        if not isinstance(exc, (ModelError, MaxTurnsExceeded, OutputError)):
            log.exception("run failed")
    finally:
        run._finish(status, error)
        run._emit(RunFinished(run, status))


async def _ask_model(run: AgentRun, tools) -> AssistantMessage:
    run._partial_text = []
    final: AssistantMessage | None = None
    async for item in run.model.stream(
        run.messages, tools, instructions=run.instructions, on_request=run.requests.append, **run.agent.model_settings
    ):
        if isinstance(item, AssistantMessage):
            final = item
        else:
            if isinstance(item, TextDelta):
                run._partial_text.append(item.text)
            run._emit(item)
    if final is None:
        raise ModelError(f"{run.model.spec}: the response stream ended without a message")
    run._partial_text = []
    return final


def _normalise_ids(run: AgentRun, message: AssistantMessage) -> None:
    """Every call of the run gets an id no other call of the transcript has."""
    seen = run._call_ids
    for call in message.tool_calls:
        if not call.id or call.id in seen:
            call.id = new_call_id()
        seen.add(call.id)


def _commit(run: AgentRun) -> None:
    """Append the in-flight response and its results together (cancelled results for unfinished calls)."""
    pending = run._in_flight
    if pending is None:
        return
    run._in_flight = None
    message, records = pending
    from .execution import _cancelled_result, _finish

    for rec in records:
        if not rec.done:
            _finish(run, rec, "cancelled", _cancelled_result(run))
    run.messages.append(message)
    run.messages.extend(rec.message for rec in records)


def _keep_partial_text(run: AgentRun) -> None:
    """Text the model streamed before a cancellation stays in the transcript (it has no tool calls)."""
    text = "".join(run._partial_text)
    run._partial_text = []
    if text:
        run.messages.append(AssistantMessage(text=text, stop_reason="cancelled", model=run.model.name,
                                             provider=run.model.provider))
