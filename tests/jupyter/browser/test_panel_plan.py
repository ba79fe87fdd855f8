"""Plan first, in the panel, in JupyterLab and in Notebook 7 (a real chromium): with "plan first" ticked,
nbagent proposes a plan in plan mode; the person edits it in the panel and runs it; the run that follows is
sent the plan as edited, not as proposed, and shows the step its model says it is on (in the panel's card and
the live view's header), named by the plan as edited. Screenshots go to test-artifacts/."""

from __future__ import annotations

import pytest

from .lab import LabPage, write_notebook
from .panel import Panel

pytestmark = [pytest.mark.browser, pytest.mark.timeout(600)]

SETUP = r'''from nbagent import AssistantMessage, ScriptedModel, ToolCall

model = ScriptedModel([
    "1. Load the sales.\n2. Sum them by region.",
    AssistantMessage(text="Step 1 of 2: loading.", tool_calls=[ToolCall(name="python", arguments={"code": "1 + 1"})]),
    "Step 2 of 2: summed.",
], delay=0.02)'''

CHECK = ("import nbagent.jupyter as _j\n_run = _j.get_session().runs[-1]\n"
         "print(_run.prompt.said, '|', 'and plot them' in _run.prompt.text, '|', _run.status)")


def test_an_edited_plan_is_followed(server):
    app = server.app
    name = f"plan_{app}.ipynb"
    write_notebook(server.root / name, ["%load_ext nbagent", SETUP + '\n%config NBAgent.model = "model"', CHECK])
    with LabPage(server, name, width=1300, height=1000) as page:
        page.hide_sidebar()
        page.run_cells(0, 1)
        panel = Panel(page).open()
        panel.send("Sum the sales by region", plan_first=True)
        plan = panel.find(".nba-panel-plan-text")
        plan.wait_for(state="visible", timeout=30_000)
        assert plan.input_value() == "1. Load the sales.\n2. Sum them by region."
        panel.wait_text(".nba-panel-run-title", "Plan first: Sum the sales by region")
        plan.fill("1. Load the sales.\n2. Sum them by region and plot them.")
        page.shot(f"panel-plan-{app}-edited", panel.find())
        panel.find(".nba-panel-plan-run").click()
        # while it waits on step 1: the step the model declared, named by the plan as edited
        assert panel.wait_text(".nba-panel-step", "Step 1 of 2") == "Step 1 of 2: Load the sales."
        assert panel.wait_text(".nba-panel-live .nba-step", "Step 1 of 2") == "Step 1 of 2: Load the sales."
        page.shot(f"panel-plan-{app}-step", panel.find())
        panel.approve()
        page.wait_for("the step did not move on to step 2",
                      "() => (document.querySelector('#nbagent-panel .nba-panel-step') || {}).innerText === "
                      "'Step 2 of 2: Sum them by region and plot them.'")
        panel.wait_runs("the plan's run did not end", "Step 2 of 2: summed")
        panel.wait_text(".nba-panel-plan-run", "Plan started")
        page.run_cell(2)
        page.wait_text(page.code_cells.nth(2).locator(".jp-OutputArea-output"), "Carry out the plan | True | done")
        page.shot(f"panel-plan-{app}-followed", panel.find())
