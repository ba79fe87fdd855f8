"""The notebook as a shared document, with people in real browsers: JupyterLab with jupyter-collaboration, two
browser contexts in Debian's chromium as two collaborators. One watches the agent's edit appear, marked as the
agent's (the engine's cursor flag named "nbagent"); the other types in the cell the agent is editing while the
edit lands, and keeps every character typed. A tab closed while a call waits for approval, opened again: the
approval is there and works. Screenshots go to test-artifacts/ (also on failure)."""

from __future__ import annotations

import time

import pytest

from .lab import SCRIPT, LabPage, LabServer, write_notebook

pytestmark = [pytest.mark.browser, pytest.mark.timeout(400)]

SETUP = "%load_ext nbagent\n" + SCRIPT + r'''
model = ScriptedModel([call("read_notebook", cell_id="c0"), call("edit_cell", cell_id="c0", old=OLD, new=NEW),
                       "done"], delay=0.02)
run = %agent --model model Change the cell'''

TYPED = "  # typed by the other person while the agent edits"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    srv = LabServer(tmp_path_factory.mktemp("collab"), collaboration=True)
    yield srv
    srv.stop()


def cell_text(page: LabPage, index: int) -> str:
    return page.page.evaluate("""(i) => [...document.querySelectorAll(
        '.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook .jp-Cell')][i].querySelector('.jp-InputArea .cm-content')
        .innerText""", index)


def wait_cell(page: LabPage, index: int, expected: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    last = ""
    while time.monotonic() < deadline:
        last = cell_text(page, index)
        if last == expected:
            return
        time.sleep(0.1)
    raise AssertionError(f"cell {index} holds {last!r}, not {expected!r}")


def approve_row(page: LabPage):
    row = page.page.locator(".nba-view .nba-call:has(.nba-tool:text-is('edit_cell')):has(button.nba-approve:visible)")
    row.first.wait_for(state="visible", timeout=60_000)
    return row.first


def test_two_people_and_the_agent_in_one_cell(server):
    write_notebook(server.root / "nb.ipynb", ["x = 1\ny = 2\nprint(x + y)",
                                              SETUP.replace("OLD", "'y = 2'").replace("NEW", "'y = 3'")])
    with LabPage(server, "nb.ipynb", width=1200, height=1100) as watcher, \
            watcher.another_person("nb.ipynb", width=1200, height=1100) as typist:
        watcher.run_cell(1)
        row = approve_row(watcher)
        watcher.wait_text(row, "-y = 2", "+y = 3")
        # the other person types at the end of the cell, key by key; the edit is approved while they type
        typist.code_cells.nth(0).locator(".cm-content").click()
        typist.page.keyboard.press("Control+End")
        row.locator("button.nba-approve").evaluate("b => setTimeout(() => b.click(), 400)")
        typist.page.keyboard.type(TYPED, delay=40)
        expected = "x = 1\ny = 3\nprint(x + y)" + TYPED
        wait_cell(typist, 0, expected)  # every character typed, and the agent's edit
        wait_cell(watcher, 0, expected)
        # the watcher sees whose edit it was: the engine's flag for the agent's cursor
        watcher.page.wait_for_function("""() => [...document.querySelectorAll('.jp-remote-userFlag-name')]
            .some(e => e.textContent === 'nbagent')""", timeout=20_000)
        watcher.shot("shared-document-watcher")
        head = watcher.wait_text(watcher.page.locator(":is(.nba-view, div.nba) .nba-head"), "notebook: shared document")
        assert "done" in head or "notebook: shared document" in head


def test_an_approval_outlives_its_tab(server):
    write_notebook(server.root / "wait.ipynb", ["x = 1", SETUP.replace("OLD", "'x = 1'").replace("NEW", "'x = 2'")])
    with LabPage(server, "wait.ipynb") as page:
        page.run_cell(1)
        approve_row(page)
    # the tab went while the call waits
    time.sleep(2.0)
    with LabPage(server, "wait.ipynb") as page:
        row = approve_row(page)  # the run's live view came back with its buttons
        page.wait_text(row, "-x = 1", "+x = 2")
        page.shot("shared-document-reopened")
        row.locator("button.nba-approve").click()
        wait_cell(page, 0, "x = 2")
        page.wait_text(page.page.locator(":is(.nba-view, div.nba) .nba-head"), "notebook: shared document")


def test_a_run_that_ends_with_no_tab_open_leaves_its_rendering_in_the_document(server):
    """The page that ran %agent is closed while the run goes on: nobody is left to replace the run's widget with
    its static rendering, so the kernel does it in the shared document (and the server saves it)."""
    slow = SETUP.replace("OLD", "'x = 1'").replace("NEW", "'x = 2'").replace("delay=0.02", "delay=2.0")
    slow = slow.replace("%agent --model model", "%agent --model model --mode acceptEdits")
    write_notebook(server.root / "gone.ipynb", ["x = 1", slow])
    with LabPage(server, "gone.ipynb") as page:
        page.run_cell(1)
        page.page.locator(".nba-view").first.wait_for(state="visible", timeout=30_000)
    # the run goes on without a page

    def settled():
        import json

        cells = json.loads((server.root / "gone.ipynb").read_text())["cells"]
        outputs = json.dumps(cells[1]["outputs"])
        return cells if "widget-view" not in outputs and "nba-head" in outputs else None

    deadline = time.monotonic() + 60
    while not settled():
        assert time.monotonic() < deadline, (server.root / "gone.ipynb").read_text()[-3000:]
        time.sleep(0.5)
    cells = settled()
    assert "".join(cells[0]["source"]) == "x = 2"  # the agent's edit, made with no page open
    assert "notebook: shared document" in json_text(cells[1]["outputs"])


def json_text(outputs: list) -> str:
    return "".join("".join(o.get("data", {}).get("text/plain", "")) for o in outputs)
