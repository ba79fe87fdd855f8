"""The notebook tools with nbagent's frontend part, in JupyterLab and in Notebook 7, in a real chromium.

A scripted model reads the notebook (and sees a cell the person typed but never ran), inserts a cell after
Approve (it appears where the diff said), edits a cell (Ctrl+Z in that cell undoes the edit), runs the cell
it inserted (its output appears in the notebook), has an edit denied (nothing changes) and an edit refused
because the person changed that cell meanwhile; with python_in_cells, its python code becomes a cell. The extension
is the built one in nbagent/labextension/, put on the server's JUPYTER_PATH. Screenshots go to
test-artifacts/ (also on failure)."""

from __future__ import annotations

import pytest

from .lab import SCRIPT, LabPage, write_notebook

pytestmark = pytest.mark.browser

SETUP = SCRIPT + r'''import re


def said(messages, pattern):
    """The first group of `pattern` in the most recent text that has it."""
    for message in reversed(messages):
        for block in getattr(message, "content", None) or []:
            found = re.search(pattern, getattr(block, "text", "") or "")
            if found:
                return found.group(1)
    return None


model = ScriptedModel([
    call("read_notebook"),
    call("insert_cell", source="print('hello from the agent')", after="c2"),
    call("edit_cell", cell_id="c2", old="x = 1", new="x = 2"),
    lambda m: call("run_cell", cell_id=said(m, r'Inserted a code cell with id "([^"]+)"')),
    call("edit_cell", cell_id="c2", old="x = 2", new="x = 3"),
    call("edit_cell", cell_id="c3", old="40", new="41"),
    lambda m: AssistantMessage(text="Done. The cell you typed holds: "
                               + str(said(m, r'id "c3" · code · not run\n(.*)'))),
], delay=0.02)

model2 = ScriptedModel([call("python", code="21 * 2"), "It is 42; the cell is in the notebook."], delay=0.02)'''

TYPED = "typed = 40 + 2"
INSERTED = "print('hello from the agent')"


def ask(page: LabPage, tool: str):
    """The row of the call to `tool` that waits for approval."""
    row = page.page.locator(f".nba-view .nba-call:has(.nba-tool:text-is('{tool}')):has(button.nba-approve:visible)")
    row.first.wait_for(state="visible", timeout=30_000)
    return row.first


def test_the_agent_works_in_the_notebook(server):
    name = f"cells_{server.app}.ipynb"
    write_notebook(server.root / name, [
        "%load_ext nbagent",
        (SETUP, {"jupyter": {"source_hidden": True}}),
        "x = 1",
        "",
        "run = %agent --model model Tidy up this notebook.",
        "%config NBAgent.python_in_cells = True\nrun2 = %agent --model model2 --new --mode acceptEdits What is 21 * 2?",
    ])
    app = server.app
    with LabPage(server, name, width=1200, height=1400) as page:
        page.hide_sidebar()
        page.run_cells(0, 1)
        # the person types into a cell and never runs it (nor saves the notebook)
        page.code_cells.nth(3).locator(".cm-content").click()
        page.page.keyboard.type(TYPED)
        page.run_cell(4)
        p = page.page

        # 1. insert_cell asks, with a diff saying where; Approve puts the cell there
        row = ask(page, "insert_cell")
        page.wait_text(row, "a new code cell, after cell 3 x = 1", "+" + INSERTED)
        page.shot(f"notebook-tools-{app}-insert-pending", p.locator(".nba-view"))
        page.click_until_gone(row.locator("button.nba-approve"))
        cells = page.wait_sources(lambda s: len(s) == 7, "the inserted cell did not appear")
        assert cells[2] == "x = 1" and cells[3] == INSERTED and cells[4] == TYPED

        # 2. edit_cell: Approve, the cell changes
        row = ask(page, "edit_cell")
        page.wait_text(row, "-x = 1", "+x = 2")
        page.click_until_gone(row.locator("button.nba-approve"))
        page.wait_sources(lambda s: s[2] == "x = 2", "the edit was not applied")

        # 3. run_cell: Approve, the output lands under the inserted cell
        page.click_until_gone(ask(page, "run_cell").locator("button.nba-approve"))
        out = p.locator(".jp-Notebook .jp-Cell").nth(3).locator(".jp-OutputArea-output")
        out.first.wait_for(state="visible", timeout=30_000)
        page.wait_text(out, "hello from the agent")

        # 4. a denied edit changes nothing
        page.click_until_gone(ask(page, "edit_cell").locator("button.nba-deny"))

        # 5. the person edits the cell the agent wants to change, then approves: the edit is refused
        row = ask(page, "edit_cell")
        page.code_cells.nth(4).locator(".cm-content").click()
        p.keyboard.press("End")
        p.keyboard.type(" + 1")
        p.keyboard.press("Escape")
        page.click_until_gone(row.locator("button.nba-approve"))
        # the run ended: its live view was replaced by the run's static rendering (a div.nba)
        p.wait_for_selector(".nba-head .nba-pill.nba-s-done", timeout=30_000)
        view = page.wait_text(p.locator(":is(.nba-view, div.nba)"), "changed since you last read it", "denied by you",
                              "notebook: this tab")  # no collaboration engine here: the header says the page's path
        page.wait_sources(lambda s: s[4] == TYPED + " + 1", "the person's edit is not in the cell")
        assert "denied by you" in view
        assert f"The cell you typed holds: {TYPED}" in view  # read_notebook saw the unsaved, never-run cell
        page.wait_sources(lambda s: s[2] == "x = 2", "the approved edit is not in the cell")
        p.locator(".jp-Notebook .jp-Cell").nth(2).evaluate("el => el.scrollIntoView({block: 'start'})")
        page.shot(f"notebook-tools-{app}-done")

        # 6. the view links to the cells the agent wrote: a click scrolls there and selects it
        link = p.locator(":is(.nba-view, div.nba) a.nba-cell-link").first
        link.click()
        p.wait_for_function("() => document.querySelector('.jp-Notebook .jp-Cell.jp-mod-active') !== null")

        # 7. Ctrl+Z in the edited cell undoes the agent's edit, in one step
        cell = p.locator(".jp-Notebook .jp-Cell").nth(2)
        cell.locator(".cm-content").click()
        p.keyboard.press("Control+z")
        page.wait_sources(lambda s: s[2] == "x = 1", "Ctrl+Z did not undo the edit")
        assert page.sources()[3] == INSERTED
        page.shot(f"notebook-tools-{app}-undone")

        # 8. python_in_cells: the python tool's code becomes a cell at the end, run there
        page.run_cell(6)
        page.click_until_gone(ask(page, "python").locator("button.nba-approve"))
        cells = page.wait_sources(lambda s: len(s) == 8 and s[7] == "21 * 2", "the python cell did not appear")
        out = p.locator(".jp-Notebook .jp-Cell").nth(7).locator(".jp-OutputArea-output")
        out.first.wait_for(state="visible", timeout=30_000)
        page.wait_text(out, "42")
        p.locator(".nba-head .nba-pill.nba-s-done").nth(1).wait_for(timeout=30_000)
        page.shot(f"notebook-tools-{app}-python-in-cells")
