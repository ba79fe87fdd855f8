"""Plan first, in the panel, in JupyterLab and in Notebook 7 (a real chromium): with "plan first" ticked,
nbagent proposes a plan in plan mode; the person edits it in the panel and runs it; the run that follows is
sent the plan as edited, not as proposed, and shows the step its model says it is on (in the panel's card and
the live view's header), named by the plan as edited. Screenshots go to test-artifacts/."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from .lab import LabPage, LabServer, extension_path, write_notebook
from .test_panel import open_panel, wait_for

pytestmark = [pytest.mark.browser, pytest.mark.timeout(600)]

if shutil.which("chromium") is None and not Path("/usr/bin/chromium").exists():  # pragma: no cover
    pytest.skip("chromium is not installed (./dev test installs it)", allow_module_level=True)

SETUP = r'''from nbagent import AssistantMessage, ScriptedModel, ToolCall

model = ScriptedModel([
    "1. Load the sales.\n2. Sum them by region.",
    AssistantMessage(text="Step 1 of 2: loading.", tool_calls=[ToolCall(name="python", arguments={"code": "1 + 1"})]),
    "Step 2 of 2: summed.",
], delay=0.02)'''

CHECK = ("import nbagent.jupyter as _j\n_run = _j.get_session().runs[-1]\n"
         "print(_run.prompt.said, '|', 'and plot them' in _run.prompt.text, '|', _run.status)")


@pytest.fixture(scope="module", params=["lab", "notebook"])
def server(request, tmp_path_factory):
    root = tmp_path_factory.mktemp("panel-plan-" + request.param)
    srv = LabServer(root, app=request.param, JUPYTER_PATH=str(extension_path(root)))
    yield srv
    srv.stop()


def test_an_edited_plan_is_followed(server):
    app = server.app
    name = f"plan_{app}.ipynb"
    write_notebook(server.root / name, ["%load_ext nbagent", SETUP + '\n%config NBAgent.model = "model"', CHECK])
    page = LabPage(server, name, width=1300, height=1000)
    p = page.page
    try:
        if app == "lab":
            page.hide_sidebar()
        page.run_cell(0)
        page.run_cell(1)
        open_panel(page)
        wait_for(page, "the panel did not connect to the kernel",
                 "() => !!document.querySelector('#nbagent-panel .nba-panel-m') && "
                 "!document.querySelector('#nbagent-panel .nba-panel-absent')")
        p.locator("#nbagent-panel .nba-panel-prompt").fill("Sum the sales by region")
        p.locator("#nbagent-panel .nba-panel-planfirst").check()
        p.locator("#nbagent-panel .nba-panel-send").click()
        plan = p.locator("#nbagent-panel .nba-panel-plan-text")
        plan.wait_for(state="visible", timeout=30_000)
        assert plan.input_value() == "1. Load the sales.\n2. Sum them by region."
        assert "Plan first: Sum the sales by region" in p.locator("#nbagent-panel .nba-panel-run-title").first.inner_text()
        plan.fill("1. Load the sales.\n2. Sum them by region and plot them.")
        page.shot(f"panel-plan-{app}-edited", p.locator("#nbagent-panel"))
        p.locator("#nbagent-panel .nba-panel-plan-run").click()
        # while it waits on step 1: the step the model declared, named by the plan as edited
        step = p.locator("#nbagent-panel .nba-panel-step")
        step.wait_for(state="visible", timeout=30_000)
        assert step.inner_text() == "Step 1 of 2: Load the sales."
        chip = p.locator("#nbagent-panel .nba-panel-live .nba-step")
        chip.wait_for(state="visible", timeout=30_000)
        assert chip.inner_text() == "Step 1 of 2: Load the sales."
        page.shot(f"panel-plan-{app}-step", p.locator("#nbagent-panel"))
        p.locator("#nbagent-panel .nba-panel-live button.nba-approve:visible").first.click()
        wait_for(page, "the step did not move on to step 2",
                 "() => (document.querySelector('#nbagent-panel .nba-panel-step') || {}).innerText === "
                 "'Step 2 of 2: Sum them by region and plot them.'")
        wait_for(page, "the plan's run did not end",
                 "() => /Step 2 of 2: summed/.test(document.querySelector('#nbagent-panel .nba-panel-runs').innerText)")
        assert p.locator("#nbagent-panel .nba-panel-plan-run").inner_text() == "Plan started"
        page.run_cell(2)
        out = page.code_cells.nth(2).locator(".jp-OutputArea-output").first
        assert page.wait_text(out, "Carry out the plan | True | done")
        page.shot(f"panel-plan-{app}-followed", p.locator("#nbagent-panel"))
    except Exception:
        page.shot(f"panel-plan-{app}-failure")
        raise
    finally:
        page.close()
