"""Steering from the notebook: `%agent --steer TEXT` in another cell, and the text box of the live view."""

from __future__ import annotations

import asyncio

import pytest
from IPython.core.error import UsageError

from nbagent import Agent, ScriptedModel
from nbagent.jupyter.live.widgets import RunView
from nbagent.transcript import check_transcript

from ..conftest import finish, run_cell, settle

pytestmark = pytest.mark.usefixtures("widget_messages")


def gated_model(gate: asyncio.Event, seen: list, entered: asyncio.Event | None = None):
    async def first(messages):
        if entered is not None:
            entered.set()
        await gate.wait()  # the person types while the model works
        return "a first answer"

    def second(messages):
        seen.append([m.text for m in messages])
        return "answered with the steer"

    return ScriptedModel([first, second])


async def test_steer_from_a_cell(shell):
    gate, seen, entered = asyncio.Event(), [], asyncio.Event()
    shell.user_ns["model"] = gated_model(gate, seen, entered)
    await run_cell(shell, "run = %agent --model model Summarise the data")
    run = shell.user_ns["run"]
    await asyncio.wait_for(entered.wait(), 10)  # the model is at work
    result = await run_cell(shell, "%agent --steer and keep it to one line")
    assert result.error_in_exec is None
    assert result.result is None  # one line says where it went; no second copy of the run under the cell
    gate.set()
    await finish(run)
    assert seen == [["Summarise the data", "a first answer", "and keep it to one line"]]
    assert run.output == "answered with the steer" and check_transcript(run.messages) == []


async def test_steer_with_no_run_going_is_a_usage_error(shell):
    with pytest.raises(UsageError, match="no %agent run is going on"):
        shell.run_line_magic("agent", "--steer hello")


async def test_steer_from_the_views_text_box():
    gate, seen, entered = asyncio.Event(), [], asyncio.Event()
    run = Agent(model=gated_model(gate, seen, entered)).start("Summarise the data")
    view = RunView(run, rate=1000)
    await asyncio.wait_for(entered.wait(), 10)
    box = view.steer
    box.text.value = "in French"  # Enter in the box (a value change) sends it
    assert box.sent == ["in French"] and box.text.value == ""
    assert run.steering[0].text == "in French"
    gate.set()
    await finish(run)
    await settle(lambda: view.throttle.closed)
    assert seen == [["Summarise the data", "a first answer", "in French"]]
    assert box.text.disabled and box.widget.layout.display == "none"  # nothing to steer once it ended
    assert "you, while it ran: in French" in run._repr_html_()
