"""The notebook as a document, in a real chromium: a run ends and its cell holds the static rendering; the
notebook, saved (JupyterLab's default: no widget state) and reopened in JupyterLab and in Notebook 7, shows
every run whole; a kernel restarted mid-run leaves no view claiming that the run goes on.

Screenshots go to test-artifacts/ (also on failure)."""

from __future__ import annotations

import json
import shutil
import time
from contextlib import contextmanager

import pytest

from .lab import REMOVE_TOOL, LabPage, LabServer, write_notebook

pytestmark = pytest.mark.browser

WIDGET = "application/vnd.jupyter.widget-view+json"

SETUP = REMOVE_TOOL + '''from nbagent import AssistantMessage, ScriptedModel, ToolCall


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


def _save(page: LabPage) -> None:
    page.page.keyboard.press("Control+s")
    page.page.wait_for_function(
        "() => !document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-mod-dirty')", timeout=15_000)
    time.sleep(0.5)


def test_a_saved_notebook_reopened_without_widget_state_shows_every_run(lab, tmp_path_factory):
    write_notebook(lab.root / "document.ipynb", CELLS)
    (lab.root / "old-export.csv").write_text("a,b\n1,2\n")
    (lab.root / "notes.txt").write_text("one\ntwo\nthree\n")
    with LabPage(lab, "document.ipynb", width=1200, height=1300) as page:
        page.hide_sidebar()
        page.run_cells(0, 1, 2, 3)
        page.page.wait_for_selector(".nba-view button.nba-approve", state="visible", timeout=30_000)
        page.page.click(".nba-view button.nba-approve")
        # the live views give way to the static renderings once the runs end
        page.page.wait_for_function("() => document.querySelectorAll('.nba-view').length === 0", timeout=30_000)
        cells = page.code_cells
        page.wait_text(cells.nth(2), "The old export is gone.", "Removed old-export.csv", "approved by you")
        page.wait_text(cells.nth(3), "notes.txt has 3 lines.")
        page.shot("document-lab-ended")
        _save(page)
    saved = json.loads((lab.root / "document.ipynb").read_text())
    assert "widgets" not in saved["metadata"] or not saved["metadata"]["widgets"]
    outputs = [o for c in saved["cells"] for o in c.get("outputs", [])]
    assert not any(WIDGET in o.get("data", {}) for o in outputs)
    plain = [o["data"]["text/plain"] for o in saved["cells"][2]["outputs"] if "data" in o]
    assert plain and "".join(plain[0]).startswith("nbagent run · scripted · default mode · done")

    # reopened in JupyterLab (a fresh page, a fresh kernel: no widget state anywhere), and in Notebook 7 (which
    # draws the outputs after the kernel is idle: waited for, however loaded the machine)
    _reopened_shows(lab, tmp_path_factory, "document.ipynb", "document", "The old export is gone.",
                    "notes.txt has 3 lines.", height=1300)


STOPPED = "the kernel stopped while the run was going on"


def test_a_kernel_restarted_mid_approval_leaves_the_run_in_the_saved_notebook(lab, tmp_path_factory):
    """JupyterLab forgets the old kernel's messages as soon as it asks for the restart, so what the kernel sends
    as it shuts down does not arrive, and the widget's model dies with the kernel. The page kept the run's
    static rendering as it went (frontend/src/notebook/keptViews.ts): it takes the widget's place at the restart, and the
    saved notebook, reopened in JupyterLab and in Notebook 7, shows the run as far as it went."""
    with _waiting(lab, "restart.ipynb") as page:
        _wait_kept(page, "restart.ipynb", 2)
        page.page.click(".lm-MenuBar-item:has-text('Kernel')")
        page.page.click(".lm-Menu-item:has-text('Restart Kernel…')")
        page.page.click(".jp-Dialog button.jp-mod-accept", timeout=10_000)
        cell = page.code_cells.nth(2)
        static = cell.locator(".jp-OutputArea div.nba:not(.nba-view)")
        static.wait_for(timeout=30_000)
        text = page.wait_text(static, STOPPED, "Removing old-export.csv", "I'll remove the old export.")
        page.shot("document-lab-restarted", cell)
        assert cell.locator(".nba-view").count() == 0 and cell.locator("button.nba-approve").count() == 0
        assert "Error displaying widget" not in cell.inner_text()
        print("after the restart the cell shows:", text.replace("\n", " | ")[:300])
        page.wait_kernel_idle()
        _save(page)
    saved = json.loads((lab.root / "restart.ipynb").read_text())
    outputs = saved["cells"][2]["outputs"]
    assert not any(WIDGET in o.get("data", {}) for o in outputs)
    assert any(STOPPED in "".join(o.get("data", {}).get("text/html", "")) for o in outputs)
    assert "nbagent_live" not in saved["cells"][2]["metadata"]  # the kept copy is not left behind
    _reopened_shows(lab, tmp_path_factory, "restart.ipynb", "restart", STOPPED, "Removing old-export.csv")


def test_a_notebook_saved_mid_approval_and_reopened_elsewhere_shows_the_run(lab, tmp_path_factory):
    """Saved while the run waits (autosave does that), then opened with another kernel: the widget has no
    model there ("Error displaying widget: model not found"); the page puts the kept rendering in its place."""
    with _waiting(lab, "autosaved.ipynb") as page:
        _wait_kept(page, "autosaved.ipynb", 2)
    saved = json.loads((lab.root / "autosaved.ipynb").read_text())
    assert any(WIDGET in o.get("data", {}) for o in saved["cells"][2]["outputs"])  # saved live
    _reopened_shows(lab, tmp_path_factory, "autosaved.ipynb", "autosaved", STOPPED, "Removing old-export.csv",
                    lab_too=False)


def _wait_kept(page: LabPage, name: str, index: int, timeout: float = 30) -> None:
    """Wait until the page holds the kernel's rendering of the waiting call (saving to look)."""
    deadline = time.monotonic() + timeout
    while "Removing old-export.csv" not in json.dumps(_saved_cell_metadata(page, name, index)):
        assert time.monotonic() < deadline, "the page kept no rendering of the waiting call"
        time.sleep(0.2)


def _saved_cell_metadata(page: LabPage, name: str, index: int) -> dict:
    """Save the notebook and read a cell's metadata back from the file (the model is not reachable otherwise)."""
    page.page.keyboard.press("Control+s")
    page.page.wait_for_function(
        "() => !document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-mod-dirty')", timeout=15_000)
    try:
        return json.loads((page.server.root / name).read_text())["cells"][index].get("metadata", {})
    except (ValueError, OSError, IndexError):  # being written
        return {}


@contextmanager
def _waiting(lab, name: str):
    """The notebook `name` (written first: the agent's run) open, its cells run: the run waits for an approval."""
    write_notebook(lab.root / name, CELLS[:3])
    (lab.root / "old-export.csv").write_text("a,b\n1,2\n")
    with LabPage(lab, name, width=1200, height=900) as page:
        page.hide_sidebar()
        page.run_cells(0, 1, 2)
        page.page.wait_for_selector(".nba-view button.nba-approve", state="visible", timeout=30_000)
        yield page


def _reopened_shows(lab, tmp_path_factory, name: str, tag: str, *texts: str, height: int = 900,
                    lab_too: bool = True) -> None:
    """The saved notebook, opened afresh in JupyterLab (unless not `lab_too`) and in Notebook 7, shows `texts`
    and no widget error."""
    with LabServer(tmp_path_factory.mktemp(f"{tag}-notebook"), app="notebook") as nb7:
        shutil.copy(lab.root / name, nb7.root / name)
        for server in [lab, nb7] if lab_too else [nb7]:
            with LabPage(server, name, width=1200, height=height) as page:
                text = page.wait_text(page.page.locator(".jp-Notebook"), *texts)
                assert "Error displaying widget" not in text
                page.shot(f"document-{tag}-reopened-{server.app}")


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
    with LabPage(lab, "blocking.ipynb", width=1200, height=800) as page:
        page.hide_sidebar()
        page.run_cells(0, 1, 2)
        page.page.wait_for_selector(".nba-view .nba-md", timeout=30_000)
        page.run_cell(3, wait=False)
        note = page.page.locator(".nba-view .nba-stale")
        page.page.wait_for_function(
            "() => { const n = document.querySelector('.nba-view .nba-stale');"
            " return n && getComputedStyle(n).opacity === '1'; }", timeout=30_000)
        page.wait_text(note, "waiting for the kernel: another cell is running")
        page.shot("document-lab-blocked", page.code_cells.nth(2))
        # the cell ends: the run goes on, the header is drawn again, the note is gone
        page.page.wait_for_function(
            "() => { const n = document.querySelector('.nba-view .nba-stale');"
            " return !n || getComputedStyle(n).opacity === '0'; }", timeout=60_000)


def test_a_cell_run_again_while_its_run_waits_keeps_it_reachable(lab):
    with _waiting(lab, "rerun.ipynb") as page:
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
        page.wait_text(cell, "The old export is gone.")
        assert not (lab.root / "old-export.csv").exists()
