"""Reproducible agent work in JupyterLab (chromium): a finished run's header names what exists only in the
kernel; `%agent --to-cells` proposes each cell on the cell above it (Accept / Reject), the accepted cells carry
their provenance into the saved file and show their badge, and the panel's Undo takes them back out; "Make cells"
on the run's view (and on its card in the panel) does the same in one click."""

from __future__ import annotations

import json
from contextlib import contextmanager

import pytest

from .lab import LabPage, write_notebook
from .panel import Panel

pytestmark = pytest.mark.browser

CSV = "item,price,qty\napple,1.5,4\npear,,2\nfig,3.25,1\n"
CODES = ["df = pd.read_csv('sales.csv')", "df_clean = df.dropna()", "print(df.describe())",
         "df_clean = df.dropna().reset_index(drop=True)", "def total_of(frame):\n    return float(frame.price.sum())"]
SETUP = f'''import pandas as pd
from nbagent import AssistantMessage, ScriptedModel, ToolCall
model = ScriptedModel([AssistantMessage(tool_calls=[ToolCall(id=f"call{{i}}", name="python", arguments={{"code": c}})])
                       for i, c in enumerate({CODES!r})] + ["Cleaned."])
%config NBAgent.rules = ["allow: python"]'''
PROMPT = "run = %agent --model model --wait Load sales.csv and clean it"
USE = "total_of(df_clean)"
KEPT = [CODES[0], CODES[3], CODES[4]]


@pytest.fixture(scope="module")
def server(lab):
    (lab.root / "sales.csv").write_text(CSV)
    return lab


@contextmanager
def after_the_run(server, name: str, *more: str):
    """The notebook `name` (nbagent loaded, the scripted model, the prompt, then `more` cells) open, its agent run
    ended: yields the page and the run's header, which names what exists only in the kernel."""
    write_notebook(server.root / name, ["%load_ext nbagent", (SETUP, {"jupyter": {"source_hidden": True}}), PROMPT,
                                        *more])
    with LabPage(server, name, width=1300, height=1000) as page:
        page.hide_sidebar()
        for i in range(3):
            page.run_cell(i, timeout=90)
        header = page.code_cells.nth(2).locator(".nba-kernel-only")
        page.wait_text(header, "3 names exist only in the kernel", "df, df_clean, total_of", timeout=60)
        yield page, header


def test_to_cells_in_the_notebook(server):
    name = "sales.ipynb"
    with after_the_run(server, name, USE, "%agent --to-cells") as (page, _):
        p = page.page
        page.run_cell(4, wait=False)
        accept_proposals(page)  # each proposal is shown on the cell it goes below: Accept it there
        cells_recreated(page)

        # the saved file keeps where each cell came from
        page.code_cells.nth(3).locator(".jp-InputPrompt").click()
        p.keyboard.press("Control+s")
        marks: list = []
        for _ in range(150):  # up to 15 s for the file to be written
            marks = [c["metadata"].get("nbagent") for c in json.loads((server.root / name).read_text())["cells"]]
            if len(marks) == 8:
                break
            p.wait_for_timeout(100)
        assert len(marks) == 8, marks
        assert [m["calls"] for m in marks[3:6]] == [["call0"], ["call3"], ["call4"]]
        assert all(m["action"] == "recreated" and m["model"] == "scripted" for m in marks[3:6])

        # the panel's changes list takes them back out
        panel = Panel(page).open()
        for _ in range(3):
            undo = panel.find(".nba-panel-change:not(:has-text('undone')) button.nba-panel-undo").first
            undo.wait_for(state="visible", timeout=15_000)
            undo.scroll_into_view_if_needed()
            undo.click()
            p.wait_for_timeout(300)
        page.wait_sources(lambda s: not any(x.startswith("# nbagent: step") for x in s), "Undo left cells behind")
        assert page.sources()[2:4] == [PROMPT, USE]


def accept_proposals(page: LabPage) -> None:
    """Accept, on the cell each goes below, the three cells proposed; none is inserted before its Accept."""
    p = page.page
    for step in range(3):
        review = p.locator(".nba-review:visible").first
        review.wait_for(state="visible", timeout=60_000)
        text = review.inner_text()
        assert "proposes a new code cell after " in text and KEPT[step].splitlines()[0] in text, text
        assert len([s for s in page.sources() if s.startswith("# nbagent: step")]) == step
        page.click_until_gone(review.locator("button.nba-accept"))
        page.wait_sources(lambda s, n=step + 1: len([x for x in s if x.startswith("# nbagent: step")]) == n,
                          f"step {step + 1} was not inserted", timeout=60)


def cells_recreated(page: LabPage) -> None:
    """The three kept cells are in, between the prompt and the cell that uses them, marked as recreated."""
    cells = page.sources()
    assert cells[2] == PROMPT and cells[6] == USE
    assert [c.split("\n", 1)[1] for c in cells[3:6]] == KEPT
    assert page.wait_text(page.code_cells.nth(3).locator(".nba-cell-badge"), "nbagent") == "nbagent · recreated"


def test_make_cells_on_a_finished_run(server):
    with after_the_run(server, "sales_button.ipynb", USE) as (page, header):
        button = header.locator("button.nba-to-cells")
        button.wait_for(state="visible", timeout=15_000)
        assert button.count() == 1 and button.inner_text() == "Make cells"

        # the run's card in the panel says the same, with its own button
        panel = Panel(page).open()
        card = panel.find(".nba-panel-kernel-only")
        page.wait_text(card, "3 names exist only in the kernel: df, df_clean, total_of", timeout=30)
        assert card.locator("button.nba-to-cells").count() == 1

        button.click()
        page.wait_text(button, "Proposed below", timeout=60)
        accept_proposals(page)
        cells_recreated(page)
