"""JupyterLab (and Notebook 7) in a real chromium: `%agent` with a scripted model that calls a destructive tool;
a person clicks Approve (the tool runs, the view says done), or types a reason and clicks Deny (it does not run).

Screenshots of the view are saved under test-artifacts/ (also on failure)."""

from __future__ import annotations

import pytest

from .lab import DONE, REMOVE_TOOL, LabPage, LabServer, write_notebook

pytestmark = pytest.mark.browser

SETUP = REMOVE_TOOL + '''from nbagent import AssistantMessage, ScriptedModel, ToolCall, ToolResultMessage


def answer(messages):
    denied = isinstance(messages[-1], ToolResultMessage) and messages[-1].is_error
    return "I left it in place, as you asked." if denied else "The old export is gone."


model = ScriptedModel([
    AssistantMessage(text="I'll remove the old export.",
                     tool_calls=[ToolCall(name="remove", arguments={"path": "old-export.csv"})]),
    answer,
], delay=0.02)'''


def open_page(server: LabServer, name: str) -> LabPage:
    """A fresh notebook (so a fresh kernel) with the file the agent is asked to remove."""
    write_notebook(server.root / f"{name}.ipynb", [
        "%load_ext nbagent",
        SETUP,
        "run = %agent --model model --tools remove Remove old-export.csv, it is out of date.",
    ])
    (server.root / "old-export.csv").write_text("a,b\n1,2\n")
    return LabPage(server, f"{name}.ipynb", width=1200, height=1100)


@pytest.fixture
def page(lab, request):
    page = open_page(lab, request.node.name.removeprefix("test_")[:40])
    yield page
    page.close()


def run_agent(page: LabPage) -> None:
    page.hide_sidebar()
    page.run_cells(0, 1, 2)
    page.page.wait_for_selector(".nba-view button.nba-approve", state="visible", timeout=30_000)


def test_approve_in_the_page_runs_the_tool_and_the_view_says_done(page, lab):
    try:
        run_agent(page)
        view = page.page.locator(".nba-view")
        page.wait_text(view, "Needs your approval", "old-export.csv")
        page.shot("browser-approval-pending", view)
        page.page.click(".nba-view button.nba-approve")
        # the run ended: its cell holds the static rendering in place of the live view
        page.page.wait_for_selector(DONE, timeout=30_000)
        final = page.page.locator(".jp-OutputArea .nba").first
        page.wait_text(final, "Removed old-export.csv", "approved by you", "The old export is gone.")
        assert not (lab.root / "old-export.csv").exists()
        page.page.wait_for_function("() => document.querySelectorAll('.nba-view').length === 0", timeout=30_000)
        page.shot("browser-approved", final)
    except Exception:
        page.shot("browser-approve-failure")
        raise


def test_deny_in_the_page_keeps_the_file_and_tells_the_model_why(page, lab):
    try:
        run_agent(page)
        page.page.fill(".nba-view .nba-ask input[type=text]", "keep it for the audit")
        page.page.click(".nba-view button.nba-deny")
        page.page.wait_for_selector(DONE, timeout=30_000)
        view = page.page.locator(".jp-OutputArea .nba").first
        page.wait_text(view, "denied by you: “keep it for the audit”", "I left it in place, as you asked.")
        assert (lab.root / "old-export.csv").exists()
        page.shot("browser-denied", view)
    except Exception:
        page.shot("browser-deny-failure")
        raise


def test_approve_in_notebook_7(notebook7):
    page = open_page(notebook7, "approve_in_notebook_7")
    try:
        run_agent(page)
        page.page.click(".nba-view button.nba-approve")
        page.page.wait_for_selector(DONE, timeout=30_000)
        final = page.page.locator(".jp-OutputArea .nba").first
        page.wait_text(final, "The old export is gone.")
        assert not (notebook7.root / "old-export.csv").exists()
        page.shot("browser-notebook7-approved", final)
    except Exception:
        page.shot("browser-notebook7-failure")
        raise
    finally:
        page.close()
