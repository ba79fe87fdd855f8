"""The nbagent panel, in JupyterLab and in Notebook 7, in a real chromium.

A prompt typed in the panel runs in the notebook's kernel (a ScriptedModel defined in the notebook) and its
approval is clicked in the panel's live view; "Fix with nbagent" on a failed cell proposes an edit shown as a
diff on that cell, Accept applies it and the cell then runs clean; a second proposal rejected on the cell
changes nothing; the run's changes list undoes a change; the panel shows the conversation again after a
page reload, and after a kernel restart says so and shows the stored conversation. The extension is the
built one in nbagent/labextension/. Screenshots go to test-artifacts/ (also on failure)."""

from __future__ import annotations

import pytest

from .lab import SCRIPT, LabPage, write_notebook
from .panel import Panel

pytestmark = pytest.mark.browser

SETUP = SCRIPT + r'''

model = ScriptedModel([
    # 1. the prompt typed in the panel
    call("python", code="6 * 7"),
    "It is 42.",
    # 2. Fix with nbagent on cell c2
    call("read_notebook", cell_id="c2"),
    call("edit_cell", cell_id="c2", old="rate = total / count", new="rate = total / max(count, 1)"),
    "Fixed: count is 0, so the division now uses at least 1.",
    # 3. Fix with nbagent on cell c3, rejected on the cell
    call("read_notebook", cell_id="c3"),
    call("edit_cell", cell_id="c3", old="undefined_name", new="'<img src=x onerror=window.__nba_pwned=1>'"),
    "Understood, I left it as it was.",
], delay=0.02)'''

BROKEN = "total = 10\ncount = 0\nrate = total / count\nrate"
OTHER = "print(undefined_name)"
FIXED = "total = 10\ncount = 0\nrate = total / max(count, 1)\nrate"


def test_the_panel_works_in_the_notebook(server):
    app = server.app
    name = f"panel_{app}.ipynb"
    write_notebook(server.root / name, [
        "%load_ext nbagent",
        (SETUP + '\n%config NBAgent.model = "model"', {"jupyter": {"source_hidden": True}}),
        BROKEN,
        OTHER,
    ])
    with LabPage(server, name, width=1400, height=1000) as page:
        p = page.page
        page.hide_sidebar()
        page.run_cells(0, 1)

        # 1. a prompt typed in the panel runs in the kernel; its approval is clicked in the panel
        panel = Panel(page).open()
        panel.wait_text(".nba-panel-m", "model: model")
        panel.send("What is 6 * 7? Use python.")
        panel.find(".nba-panel-live button.nba-approve:visible").first.wait_for(state="visible", timeout=30_000)
        page.shot(f"panel-{app}-approval", panel.find())
        panel.approve()
        panel.wait_runs("the panel's run did not end with the model's answer", "It is 42")
        panel.find(".nba-panel-static").first.wait_for(state="attached", timeout=30_000)
        # the same AgentRun: nbagent.jupyter.runs(all=True) lists it in the kernel
        page.code_cells.nth(3).locator(".cm-content").click()  # (select a cell; nothing typed)

        # 2. Fix with nbagent on a failed cell: a diff on the cell, Accept, then the cell runs clean
        page.run_cell(2)
        fix = page.code_cells.nth(2).locator("button.nba-fix")
        fix.wait_for(state="visible", timeout=30_000)
        page.shot(f"panel-{app}-error-buttons", page.code_cells.nth(2))
        fix.click()
        review = page.code_cells.nth(2).locator(".nba-review")
        review.wait_for(state="visible", timeout=30_000)
        text = review.inner_text()
        assert "- rate = total / count" in text and "+ rate = total / max(count, 1)" in text, text
        page.code_cells.nth(2).scroll_into_view_if_needed()
        page.shot(f"panel-{app}-fix-review")
        page.click_until_gone(review.locator("button.nba-accept"))
        page.wait_sources(lambda s: s[2] == FIXED, "the accepted edit was not applied")
        panel.wait_runs("the fix run did not end", "Fixed: count is 0")
        # the cell the agent changed is marked, with its run
        badge = page.code_cells.nth(2).locator(".nba-cell-badge")
        badge.wait_for(state="visible", timeout=15_000)
        assert badge.inner_text() == "nbagent · edited"
        page.run_cell(2)
        out = page.code_cells.nth(2).locator(".jp-OutputArea-output")
        page.wait_for("the fixed cell did not run clean",
                      "el => /10\\.0/.test(el.innerText) && !el.querySelector('[data-mime-type*=\"stderr\"]')",
                      arg=page.code_cells.nth(2).element_handle())
        assert page.code_cells.nth(2).locator("button.nba-fix").count() == 0
        assert "10.0" in out.first.inner_text()
        page.shot(f"panel-{app}-fixed")

        # 3. a second proposal, rejected on the cell: nothing changes
        page.run_cell(3)
        fix = page.code_cells.nth(3).locator("button.nba-fix")
        fix.wait_for(state="visible", timeout=30_000)
        fix.click()
        review = page.code_cells.nth(3).locator(".nba-review")
        try:
            review.wait_for(state="visible", timeout=30_000)
        except Exception:
            raise AssertionError("no review on the cell; the panel says: " + panel.text()) from None
        # the model's text is shown as text: the markup in it is visible, and inert
        assert "+ print('<img src=x onerror=window.__nba_pwned=1>')" in review.inner_text()
        assert review.locator("img").count() == 0 and p.evaluate("() => window.__nba_pwned") is None
        page.click_until_gone(review.locator("button.nba-reject"))
        panel.wait_runs("the rejected run did not end", "left it as it was")
        assert page.sources()[3] == OTHER
        assert page.code_cells.nth(3).locator(".nba-review").count() == 0

        # the keyboard shortcut: Ctrl+Alt+A on a selected cell makes the next prompt about it
        page.code_cells.nth(3).locator(".jp-InputPrompt").click()
        p.keyboard.press("Escape")
        p.keyboard.press("Control+Alt+a")
        page.wait_for("Ctrl+Alt+A did not make the prompt about the selected cell",
                      "() => /About \\[\\d+\\] print\\(undefined_name\\)/.test("
                      "document.querySelector('#nbagent-panel .nba-panel-about').innerText)")
        panel.find(".nba-panel-chip-x").click()

        # 4. the changes list: Undo puts the fixed cell back
        undo = panel.find(".nba-panel-run .nba-panel-change:has-text('total = 10') button.nba-panel-undo")
        undo.wait_for(state="visible", timeout=15_000)
        undo.scroll_into_view_if_needed()
        page.shot(f"panel-{app}-changes", panel.find())
        undo.click()
        page.wait_sources(lambda s: s[2] == BROKEN, "Undo did not put the cell back")
        page.wait_for("the change was not marked undone",
                      "() => [...document.querySelectorAll('#nbagent-panel .nba-panel-change')]"
                      ".some(e => /undone/.test(e.innerText))")

        # 5. a page reload: the panel shows the conversation again
        p.reload()
        page.wait_kernel_idle(timeout=90)
        panel.open()
        panel.wait_runs("after a reload, the panel did not show the conversation", "It is 42", "left it as it was")
        assert panel.find(".nba-panel-run").count() == 3
        page.shot(f"panel-{app}-reloaded", panel.find())

        # 6. a kernel restart: the panel says so, and shows the stored conversation once nbagent is loaded again
        p.locator(".jp-Notebook").first.click(position={"x": 5, "y": 5})
        p.keyboard.press("Escape")
        p.keyboard.press("0")
        p.keyboard.press("0")
        dialog = p.locator(".jp-Dialog button.jp-mod-accept")
        dialog.wait_for(state="visible", timeout=15_000)
        dialog.click()
        panel.wait_text("", "kernel restarted", timeout=60)
        page.wait_for("the panel did not say nbagent is not loaded after the restart",
                      "() => !!document.querySelector('#nbagent-panel .nba-panel-load')", timeout=60)
        page.shot(f"panel-{app}-restarted", panel.find())
        panel.find(".nba-panel-load").click()
        panel.wait_text(".nba-panel-stored", "Stored conversation", "It is 42", timeout=60)
        assert "kernel restarted" in panel.text()
        page.shot(f"panel-{app}-stored", panel.find())
