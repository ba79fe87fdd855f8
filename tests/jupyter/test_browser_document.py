"""The notebook as a document, in a real chromium: a run ends and its cell holds the static rendering; the
notebook, saved (JupyterLab's default: no widget state) and reopened in JupyterLab and in Notebook 7, shows
every run whole; a kernel restarted mid-run leaves no view claiming that the run goes on.

Screenshots go to test-artifacts/ (also on failure)."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest

from .lab import LabPage, LabServer, write_notebook

pytestmark = pytest.mark.browser

if shutil.which("chromium") is None and not Path("/usr/bin/chromium").exists():  # pragma: no cover
    pytest.skip("chromium is not installed (./dev test installs it)", allow_module_level=True)

WIDGET = "application/vnd.jupyter.widget-view+json"

SETUP = '''from pathlib import Path
from nbagent import AssistantMessage, ScriptedModel, ToolCall, tool


@tool(destructive=True, describe_activity=lambda a: f"Removing {a.path}",
      describe_completed_activity=lambda a, r: f"Removed {a.path}")
def remove(path: str) -> str:
    """Remove a file."""
    Path(path).unlink()
    return f"removed {path}"


@tool(read_only=True, describe_activity=lambda a: f"Counting the lines of {a.path}",
      describe_completed_activity=lambda a, r: f"Counted {r} lines in {a.path}")
def count_lines(path: str) -> int:
    """Count the lines of a file."""
    return len(Path(path).read_text().splitlines())


model = ScriptedModel([
    AssistantMessage(text="I'll remove the old export.",
                     tool_calls=[ToolCall(name="remove", arguments={"path": "old-export.csv"})]),
    "The old export is gone.",
], delay=0.02)
counter = ScriptedModel([
    AssistantMessage(text="Counting.", tool_calls=[ToolCall(name="count_lines", arguments={"path": "notes.txt"})]),
    "**notes.txt** has 3 lines.",
], delay=0.02)'''

CELLS = [
    "%load_ext nbagent",
    SETUP,
    "run = %agent --model model --tools remove Remove old-export.csv, it is out of date.",
    "%agent --model counter --new --tools count_lines How long is notes.txt?",
]


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    server = LabServer(tmp_path_factory.mktemp("doclab"))
    yield server
    server.stop()


def _save(page: LabPage) -> None:
    page.page.keyboard.press("Control+s")
    page.page.wait_for_function(
        "() => !document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-mod-dirty')", timeout=15_000)
    time.sleep(0.5)


def test_a_saved_notebook_reopened_without_widget_state_shows_every_run(lab, tmp_path_factory):
    write_notebook(lab.root / "document.ipynb", CELLS)
    (lab.root / "old-export.csv").write_text("a,b\n1,2\n")
    (lab.root / "notes.txt").write_text("one\ntwo\nthree\n")
    page = LabPage(lab, "document.ipynb", width=1200, height=1300)
    try:
        page.hide_sidebar()
        for i in range(4):
            page.run_cell(i)
        page.page.wait_for_selector(".nba-view button.nba-approve", state="visible", timeout=30_000)
        page.page.click(".nba-view button.nba-approve")
        # the live views give way to the static renderings once the runs end
        page.page.wait_for_function("() => document.querySelectorAll('.nba-view').length === 0", timeout=30_000)
        cells = page.code_cells
        assert "The old export is gone." in cells.nth(2).inner_text()
        assert "Removed old-export.csv" in cells.nth(2).inner_text() and "approved by you" in cells.nth(2).inner_text()
        assert "notes.txt has 3 lines." in cells.nth(3).inner_text()
        page.shot("document-lab-ended")
        _save(page)
    except Exception:
        page.shot("document-lab-failure")
        raise
    finally:
        page.close()
    saved = json.loads((lab.root / "document.ipynb").read_text())
    assert "widgets" not in saved["metadata"] or not saved["metadata"]["widgets"]
    outputs = [o for c in saved["cells"] for o in c.get("outputs", [])]
    assert not any(WIDGET in o.get("data", {}) for o in outputs)
    plain = [o["data"]["text/plain"] for o in saved["cells"][2]["outputs"] if "data" in o]
    assert plain and "".join(plain[0]).startswith("nbagent run · scripted · default mode · done")

    # reopened in JupyterLab (a fresh page, a fresh kernel: no widget state anywhere)
    page = LabPage(lab, "document.ipynb", width=1200, height=1300)
    try:
        page.hide_sidebar()
        text = page.page.locator(".jp-Notebook").inner_text()
        assert "The old export is gone." in text and "notes.txt has 3 lines." in text
        assert "Error displaying widget" not in text
        page.shot("document-lab-reopened")
    except Exception:
        page.shot("document-lab-reopened-failure")
        raise
    finally:
        page.close()

    # and in Notebook 7
    nb7 = LabServer(tmp_path_factory.mktemp("docnb7"), app="notebook")
    try:
        shutil.copy(lab.root / "document.ipynb", nb7.root / "document.ipynb")
        page = LabPage(nb7, "document.ipynb", width=1200, height=1300)
        try:
            text = page.page.locator(".jp-Notebook").inner_text()
            assert "The old export is gone." in text and "notes.txt has 3 lines." in text
            assert "Error displaying widget" not in text
            page.shot("document-notebook7-reopened")
        except Exception:
            page.shot("document-notebook7-failure")
            raise
        finally:
            page.close()
    finally:
        nb7.stop()


def test_a_kernel_restarted_mid_run_leaves_no_view_claiming_to_run(lab):
    write_notebook(lab.root / "restart.ipynb", CELLS[:3])
    (lab.root / "old-export.csv").write_text("a,b\n1,2\n")
    page = LabPage(lab, "restart.ipynb", width=1200, height=900)
    try:
        page.hide_sidebar()
        for i in range(3):
            page.run_cell(i)
        page.page.wait_for_selector(".nba-view button.nba-approve", state="visible", timeout=30_000)
        page.page.click(".lm-MenuBar-item:has-text('Kernel')")
        page.page.click(".lm-Menu-item:has-text('Restart Kernel…')")
        page.page.click(".jp-Dialog button.jp-mod-accept", timeout=10_000)
        cell = page.code_cells.nth(2)
        # Measured: JupyterLab forgets the old kernel's messages as soon as it asks for the restart, so what the
        # kernel sends as it shuts down does not arrive; ipywidgets marks the view disconnected, and the view's
        # CSS makes it say so. (A headless run or a frontend still listening gets the static "stopped" form.)
        page.page.wait_for_selector(".nba-view.jupyter-widgets-disconnected", timeout=30_000)
        page.page.wait_for_function("() => !document.querySelector('.nba-view .nba-stop')?.checkVisibility()",
                                    timeout=10_000)
        text = cell.inner_text()
        page.shot("document-lab-restarted", cell)
        assert cell.locator("button.nba-approve").is_visible() is False
        assert cell.locator("button.nba-stop").is_visible() is False
        head = cell.locator(".nba-view > .nba-head").evaluate("e => getComputedStyle(e, '::after').content")
        assert "the kernel restarted or stopped" in head
        animations = cell.locator(".nba-spin, .nba-dot").evaluate_all(
            "els => els.map(e => getComputedStyle(e).animationName)")
        assert all(a == "none" for a in animations), animations
        print("after the restart the cell shows:", text.replace("\n", " | ")[:300], "|", head)
    except Exception:
        page.shot("document-restart-failure")
        raise
    finally:
        page.close()


def test_a_blocking_cell_makes_the_view_say_what_it_waits_for(lab):
    """Measured (see the README): while a cell blocks the kernel, the run (on the kernel's loop) and the clicks
    (ipykernel 7.4 routes a comm's messages to where it last published from: the main shell) wait for it.
    The view cannot be updated then; its header says so by itself, and goes on when the cell ends."""
    story = " ".join(f"word{i}" for i in range(400))
    write_notebook(lab.root / "blocking.ipynb", [
        "%load_ext nbagent",
        f"from nbagent import ScriptedModel\nslow = ScriptedModel([{story!r}], delay=0.03)",
        "run = %agent --model slow Tell me a long story.",
        "import time\ntime.sleep(12)",
    ])
    page = LabPage(lab, "blocking.ipynb", width=1200, height=800)
    try:
        page.hide_sidebar()
        for i in range(3):
            page.run_cell(i)
        page.page.wait_for_selector(".nba-view .nba-md", timeout=30_000)
        page.run_cell(3, wait=False)
        note = page.page.locator(".nba-view .nba-stale")
        page.page.wait_for_function(
            "() => { const n = document.querySelector('.nba-view .nba-stale');"
            " return n && getComputedStyle(n).opacity === '1'; }", timeout=30_000)
        assert "waiting for the kernel: another cell is running" in note.inner_text()
        page.shot("document-lab-blocked", page.code_cells.nth(2))
        # the cell ends: the run goes on, the header is drawn again, the note is gone
        page.page.wait_for_function(
            "() => { const n = document.querySelector('.nba-view .nba-stale');"
            " return !n || getComputedStyle(n).opacity === '0'; }", timeout=60_000)
    except Exception:
        page.shot("document-blocked-failure")
        raise
    finally:
        page.close()


def test_a_cell_run_again_while_its_run_waits_keeps_it_reachable(lab):
    write_notebook(lab.root / "rerun.ipynb", CELLS[:3])
    (lab.root / "old-export.csv").write_text("a,b\n1,2\n")
    page = LabPage(lab, "rerun.ipynb", width=1200, height=1000)
    try:
        page.hide_sidebar()
        for i in range(3):
            page.run_cell(i)
        page.page.wait_for_selector(".nba-view button.nba-approve", state="visible", timeout=30_000)
        page.run_cell(2)  # the same cell again, while its run waits for approval
        cell = page.code_cells.nth(2)
        page.page.wait_for_function(
            "el => /the run this cell started before is still going/.test(el.innerText)",
            arg=cell.element_handle(), timeout=30_000)
        approve = cell.locator(".nba-view button.nba-approve")
        approve.wait_for(state="visible", timeout=30_000)
        page.shot("document-lab-rerun", cell)
        approve.click()
        cell.locator(".nba:not(.nba-view) .nba-head .nba-s-done").wait_for(timeout=30_000)
        assert "The old export is gone." in cell.inner_text()
        assert not (lab.root / "old-export.csv").exists()
    except Exception:
        page.shot("document-rerun-failure")
        raise
    finally:
        page.close()
