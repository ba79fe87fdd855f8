"""The plan step a run says it is on: the model's last "Step N of M", named by the approved plan's step."""

from __future__ import annotations

from types import SimpleNamespace

from nbagent import AssistantMessage, UserMessage
from nbagent.render.steps import declared_step, plan_steps, run_step, step_html, step_text

PLAN = "1. Read the cell.\n2) Divide by max(count, 1).\n   (keep the name)\n3. Say what changed."


def test_a_numbered_plan_has_its_steps_in_order():
    assert plan_steps(PLAN) == ["Read the cell.", "Divide by max(count, 1).", "Say what changed."]
    assert plan_steps("no numbers here") == []


def test_the_last_declared_step_counts_and_nonsense_is_left_out():
    assert declared_step(["Step 1 of 3: read.", "Now step 2 of 3 - divide"]) == (2, 3, "divide")
    assert declared_step(["Step 1 of 2: read. Step 2 of 2: done.\nmore"]) == (2, 2, "done.")
    assert declared_step(["step 4 of 3: beyond the end", "Step 0 of 3"]) is None
    assert declared_step(["nothing declared"]) is None


def run_of(*texts):
    messages = [UserMessage("Carry out the plan")] + [AssistantMessage(text=t) for t in texts]
    return SimpleNamespace(new_messages=messages)


def test_a_run_is_on_the_step_it_declared_named_by_the_plan():
    steps = plan_steps(PLAN)
    assert run_step(run_of(), steps) is None  # nothing declared: nothing shown (no guessed progress)
    step = run_step(run_of("Step 1 of 3: reading", "Step 2 of 3: dividing now"), steps)
    assert step == {"n": 2, "of": 3, "text": "Divide by max(count, 1).", "planned": 3}
    assert step_text(step) == "Step 2 of 3: Divide by max(count, 1)."
    # a model counting other steps than the approved plan has: said so; past the plan: its own words
    other = run_step(run_of("Step 4 of 4: <b>extra</b>"), steps)
    assert other == {"n": 4, "of": 4, "text": "<b>extra</b>", "planned": 3}
    assert step_text(other) == "Step 4 of 4: <b>extra</b> (the approved plan has 3)"
    html = step_html(other)
    assert "<b>" not in html and "&lt;b&gt;" in html and 'class="nba-chip nba-step"' in html
    assert step_html(None) == ""
