"""The nbagent panel, in JupyterLab and in Notebook 7, in a real chromium.

A prompt typed in the panel runs in the notebook's kernel (a ScriptedModel defined in the notebook) and its
approval is clicked in the panel's live view; "Fix with nbagent" on a failed cell proposes an edit shown as a
diff on that cell, Accept applies it and the cell then runs clean; a second proposal rejected on the cell
changes nothing; the run's changes list undoes a change; the panel shows the conversation again after a
page reload, and after a kernel restart says so and shows the stored conversation. The extension is the
built one in nbagent/labextension/. Screenshots go to test-artifacts/ (also on failure)."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest

from .lab import LabPage, LabServer, write_notebook
from .test_notebook_tools import extension_path, sources, wait_sources

pytestmark = pytest.mark.browser

if shutil.which("chromium") is None and not Path("/usr/bin/chromium").exists():  # pragma: no cover
    pytest.skip("chromium is not installed (./dev test installs it)", allow_module_level=True)

SETUP = r'''from nbagent import AssistantMessage, ScriptedModel, ToolCall


def call(name, **arguments):
    return AssistantMessage(tool_calls=[ToolCall(name=name, arguments=arguments)])


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


@pytest.fixture(scope="module", params=["lab", "notebook"])
def server(request, tmp_path_factory):
    root = tmp_path_factory.mktemp("panel-" + request.param)
    srv = LabServer(root, app=request.param, JUPYTER_PATH=str(extension_path(root)))
    yield srv
    srv.stop()


def wait_for(page: LabPage, what: str, predicate_js: str, arg=None, timeout: float = 30) -> None:
    """Wait until `predicate_js` holds in the page; on timeout a screenshot, and say what was awaited."""
    try:
        page.page.wait_for_function(predicate_js, arg=arg, timeout=timeout * 1000)
    except Exception as exc:
        page.shot(f"panel-failed-{int(time.time())}")
        raise AssertionError(f"{what} (waited {timeout} s): {exc}") from None


def panel_text(page: LabPage) -> str:
    return page.page.locator("#nbagent-panel").inner_text()


def open_panel(page: LabPage) -> None:
    """The toolbar's "Ask nbagent" opens the panel about the selected cell; the chip's ✕ makes the prompt
    about the notebook."""
    page.page.locator(".nba-toolbar-ask").first.click()
    page.page.locator("#nbagent-panel .nba-panel-prompt").wait_for(state="visible", timeout=15_000)
    chip = page.page.locator("#nbagent-panel .nba-panel-chip-x")
    if chip.count():
        chip.click()


def click_until_gone(page: LabPage, locator) -> None:
    target = locator.element_handle(timeout=30_000)
    for attempt in range(3):
        target.click()
        try:
            target.wait_for_element_state("hidden", timeout=5000)
            return
        except Exception:
            if attempt == 2:
                page.shot(f"panel-failed-click-{int(time.time())}")
                raise


def test_the_panel_works_in_the_notebook(server):
    app = server.app
    name = f"panel_{app}.ipynb"
    write_notebook(server.root / name, [
        "%load_ext nbagent",
        (SETUP + '\n%config NBAgent.model = "model"', {"jupyter": {"source_hidden": True}}),
        BROKEN,
        OTHER,
    ])
    page = LabPage(server, name, width=1400, height=1000)
    p = page.page
    try:
        if app == "lab":
            page.hide_sidebar()
        page.run_cell(0)
        page.run_cell(1)

        # 1. a prompt typed in the panel runs in the kernel; its approval is clicked in the panel
        open_panel(page)
        wait_for(page, "the panel did not connect to the kernel",
                 "() => !!document.querySelector('#nbagent-panel .nba-panel-m') && "
                 "!document.querySelector('#nbagent-panel .nba-panel-absent')")
        assert "model: model" in panel_text(page) or "model:" in panel_text(page)
        p.locator("#nbagent-panel .nba-panel-prompt").fill("What is 6 * 7? Use python.")
        p.locator("#nbagent-panel .nba-panel-send").click()
        approve = p.locator("#nbagent-panel .nba-panel-live button.nba-approve:visible")
        approve.first.wait_for(state="visible", timeout=30_000)
        page.shot(f"panel-{app}-approval", p.locator("#nbagent-panel"))
        click_until_gone(page, approve.first)
        wait_for(page, "the panel's run did not end with the model's answer",
                 "() => /It is 42/.test(document.querySelector('#nbagent-panel .nba-panel-runs').innerText) && "
                 "!!document.querySelector('#nbagent-panel .nba-panel-static')")
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
        click_until_gone(page, review.locator("button.nba-accept"))
        wait_sources(page, lambda s: s[2] == FIXED, "the accepted edit was not applied")
        wait_for(page, "the fix run did not end",
                 "() => /Fixed: count is 0/.test(document.querySelector('#nbagent-panel .nba-panel-runs').innerText)")
        # the cell the agent changed is marked, with its run
        badge = page.code_cells.nth(2).locator(".nba-cell-badge")
        badge.wait_for(state="visible", timeout=15_000)
        assert badge.inner_text() == "nbagent · edited"
        page.run_cell(2)
        out = page.code_cells.nth(2).locator(".jp-OutputArea-output")
        wait_for(page, "the fixed cell did not run clean",
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
            raise AssertionError("no review on the cell; the panel says: " + panel_text(page)) from None
        # the model's text is shown as text: the markup in it is visible, and inert
        assert "+ print('<img src=x onerror=window.__nba_pwned=1>')" in review.inner_text()
        assert review.locator("img").count() == 0 and p.evaluate("() => window.__nba_pwned") is None
        click_until_gone(page, review.locator("button.nba-reject"))
        wait_for(page, "the rejected run did not end",
                 "() => /left it as it was/.test(document.querySelector('#nbagent-panel .nba-panel-runs').innerText)")
        assert sources(page)[3] == OTHER
        assert page.code_cells.nth(3).locator(".nba-review").count() == 0

        # the keyboard shortcut: Ctrl+Alt+A on a selected cell makes the next prompt about it
        page.code_cells.nth(3).locator(".jp-InputPrompt").click()
        p.keyboard.press("Escape")
        p.keyboard.press("Control+Alt+a")
        wait_for(page, "Ctrl+Alt+A did not make the prompt about the selected cell",
                 "() => /About \\[\\d+\\] print\\(undefined_name\\)/.test(document.querySelector('#nbagent-panel .nba-panel-about').innerText)")
        p.locator("#nbagent-panel .nba-panel-chip-x").click()

        # 4. the changes list: Undo puts the fixed cell back
        undo = p.locator("#nbagent-panel .nba-panel-run .nba-panel-change:has-text('total = 10') button.nba-panel-undo")
        undo.wait_for(state="visible", timeout=15_000)
        undo.scroll_into_view_if_needed()
        page.shot(f"panel-{app}-changes", p.locator("#nbagent-panel"))
        undo.click()
        wait_sources(page, lambda s: s[2] == BROKEN, "Undo did not put the cell back")
        wait_for(page, "the change was not marked undone",
                 "() => [...document.querySelectorAll('#nbagent-panel .nba-panel-change')].some(e => /undone/.test(e.innerText))")

        # 5. a page reload: the panel shows the conversation again
        p.reload()
        page.wait_kernel_idle(timeout=90)
        open_panel(page)
        wait_for(page, "after a reload, the panel did not show the conversation",
                 "() => /It is 42/.test(document.querySelector('#nbagent-panel .nba-panel-runs').innerText) && "
                 "/left it as it was/.test(document.querySelector('#nbagent-panel .nba-panel-runs').innerText)")
        assert p.locator("#nbagent-panel .nba-panel-run").count() == 3
        page.shot(f"panel-{app}-reloaded", p.locator("#nbagent-panel"))

        # 6. a kernel restart: the panel says so, and shows the stored conversation once nbagent is loaded again
        p.locator(".jp-Notebook").first.click(position={"x": 5, "y": 5})
        p.keyboard.press("Escape")
        p.keyboard.press("0")
        p.keyboard.press("0")
        dialog = p.locator(".jp-Dialog button.jp-mod-accept")
        dialog.wait_for(state="visible", timeout=15_000)
        dialog.click()
        wait_for(page, "the panel did not say the kernel restarted",
                 "() => /kernel restarted/.test(document.querySelector('#nbagent-panel').innerText)", timeout=60)
        wait_for(page, "the panel did not say nbagent is not loaded after the restart",
                 "() => !!document.querySelector('#nbagent-panel .nba-panel-load')", timeout=60)
        page.shot(f"panel-{app}-restarted", p.locator("#nbagent-panel"))
        p.locator("#nbagent-panel .nba-panel-load").click()
        wait_for(page, "the panel did not show the stored conversation after the restart",
                 "() => /Stored conversation/.test(document.querySelector('#nbagent-panel').innerText) && "
                 "/It is 42/.test(document.querySelector('#nbagent-panel .nba-panel-stored').innerText)", timeout=60)
        assert "kernel restarted" in panel_text(page)
        page.shot(f"panel-{app}-stored", p.locator("#nbagent-panel"))
    except Exception:
        page.shot(f"panel-{app}-failure")
        raise
    finally:
        page.close()
