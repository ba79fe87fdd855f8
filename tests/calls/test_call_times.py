"""A call's time is its own: the time it queued behind other calls (a sequential batch waits for the call before
it, that call's approval included) and the time it waited for a decision are told apart from what the tool
took, by one formula that the record's text, the run's text and the view's row all use.

The clock is the test's: the approver "takes" 14 s on the first call and 1.6 s on the second, the tool 0.03 s.
"""

from __future__ import annotations

import types

from nbagent import Agent, ScriptedModel, tool
from nbagent import records as records_module
from nbagent import render
from nbagent.calls import execution
from tests.helpers import call, calls

CLOCK = [1000.0]


@tool(destructive=True, execution_mode="sequential")
def step(name: str) -> str:
    """Do one step (it takes 0.03 s by the test's clock)."""
    CLOCK[0] += 0.03
    return f"did {name}"


def _run(monkeypatch):
    fake = types.SimpleNamespace(monotonic=lambda: CLOCK[0])
    monkeypatch.setattr(records_module, "time", fake)
    monkeypatch.setattr(execution, "time", fake)

    def person(request):  # slow on the first question, quicker on the second
        CLOCK[0] += 14.0 if request.arguments["name"] == "first" else 1.6
        return True

    model = ScriptedModel([calls(call("step", name="first"), call("step", name="second")), "done"])
    return Agent(model=model, tools=[step], approver=person).run_sync("go")


def test_queued_and_waiting_time_are_not_the_calls_own(monkeypatch):
    run = _run(monkeypatch)
    first, second = run.calls
    assert (first.queued, first.decision_wait) == (0.0, 14.0)
    assert abs(first.own_time - 0.03) < 1e-9
    assert abs(second.queued - 14.03) < 1e-9 and abs(second.decision_wait - 1.6) < 1e-9
    assert abs(second.own_time - 0.03) < 1e-9
    assert abs(second.duration - 1.63) < 1e-9  # from entering its lifecycle (its turn) to its result
    line = str(second)
    assert "0.03 s + 14 s queued + 1.6 s waiting for you" in line, line
    assert "0.03 s + 14 s waiting for you" in str(first)


def test_the_record_the_run_text_and_the_view_say_the_same_times(monkeypatch):
    run = _run(monkeypatch)
    for rec in run.calls:
        bracket = str(rec).splitlines()[0].split("[", 1)[1].split("]", 1)[0]  # "step · done · 0.03 s + ..."
        words = bracket.split(" · ", 2)[2]
        assert words in render.run_text(run)
        row = render.call_inner_html(rec)
        for part in words.split(" + "):
            assert part in row, (part, row)
