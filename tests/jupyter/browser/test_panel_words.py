"""The panel as a person reads it, in JupyterLab and in Notebook 7, in a real chromium:

- at its default width (about 250 px) each call row shows what the call does: its title keeps a readable width
  and wraps; the tool, status and time move to a line of their own; no part runs past the row's edge, and the
  "Always allow" button's label wraps inside it;
- "Fix with nbagent" shows the person's own words as their message ("Fix the error in [3] total = 10"), the
  instructions, the cell and its error folded under them, and `%agent --sessions` lists those words as the
  last prompt;
- cells are named as the person sees them in the run's title, the "About" chip, the review and the changes;
- a review whose cell the person edits says so before anyone clicks (Accept is off); Reject tells the model
  why, in words it can act on; once the cell is put back, a new proposal can be accepted.

Screenshots go to test-artifacts/ (also on failure)."""

from __future__ import annotations

import pytest

from .lab import SCRIPT, LabPage, write_notebook
from .panel import Panel

pytestmark = [pytest.mark.browser, pytest.mark.timeout(900)]

SETUP = SCRIPT + r'''

model = ScriptedModel([
    # 1. a prompt typed in the panel
    call("python", code="by_region = {'north': 3, 'south': 4, 'east': 5}\nsum(by_region.values())"),
    "The regions add up to 12.",
    # 2. Fix with nbagent: the person edits the cell while the review waits, then rejects it
    call("read_notebook", cell_id="c2"),
    call("edit_cell", cell_id="c2", old="rate = total / count", new="rate = total / max(count, 1)"),
    "I will read the cell again before proposing anything.",
    # 3. Fix with nbagent again, on the cell as it was: accepted
    call("read_notebook", cell_id="c2"),
    call("edit_cell", cell_id="c2", old="rate = total / count", new="rate = total / max(count, 1)"),
    "Fixed: count is 0, so the division now uses at least 1.",
], delay=0.02)'''

BROKEN = "total = 10\ncount = 0\nrate = total / count\nrate"
FIXED = "total = 10\ncount = 0\nrate = total / max(count, 1)\nrate"
NAME = "[3] total = 10"

MEASURE = """() => {
  // each call row of the panel: its title's width, and whether any part of the row runs past its right edge
  return [...document.querySelectorAll('#nbagent-panel .nba-call-head')].map(head => {
    const box = head.getBoundingClientRect();
    const label = head.querySelector('.nba-label').getBoundingClientRect();
    const parts = [...head.children].filter(c => c.getBoundingClientRect().width > 0);
    const over = parts.filter(c => c.getBoundingClientRect().right > box.right + 1).map(c => c.className);
    const status = head.querySelector('.nba-status').getBoundingClientRect();
    return {label: label.width, head: box.width, over, status: status.width,
            text: head.querySelector('.nba-label').innerText};
  });
}"""


def test_the_panel_reads_as_the_person_sees_the_notebook(server):
    app = server.app
    name = f"words_{app}.ipynb"
    write_notebook(server.root / name, [
        "%load_ext nbagent",
        (SETUP + '\n%config NBAgent.model = "model"', {"jupyter": {"source_hidden": True}}),
        BROKEN,
        "%agent --sessions",
    ])
    with LabPage(server, name, width=1300, height=1000) as page:
        p = page.page
        page.hide_sidebar()
        page.run_cells(0, 1)
        panel = Panel(page).open()
        width = panel.find().bounding_box()["width"]
        assert 230 <= width <= 300, f"the panel opened {width} px wide"

        # 1. at the default width, each call row shows what the call does
        panel.send("Add up the regions")
        panel.find(".nba-panel-live button.nba-approve:visible").first.wait_for(state="visible", timeout=30_000)
        rows = p.evaluate(MEASURE)
        assert rows, "no call row in the panel"
        for row in rows:
            assert row["label"] >= 100, f"the call's title is {row['label']} px wide in a {row['head']} px row: {row}"
            assert "Running Python" in row["text"] or "Ran Python" in row["text"], row
            assert not row["over"] and row["status"] > 0, f"parts of the row run past its edge: {row}"
        always = panel.find(".nba-panel-live button.nba-always").first
        cut = always.evaluate("b => [b.scrollWidth - b.clientWidth, b.getBoundingClientRect().right, "
                              "document.querySelector('#nbagent-panel').getBoundingClientRect().right]")
        assert cut[0] <= 1 and cut[1] <= cut[2] + 1, f"the Always allow button is cut: {cut}"
        page.shot(f"panel-words-{app}-narrow-waiting", panel.find())
        panel.approve()
        panel.wait_runs("the prompt's run did not end", "add up to 12")
        assert all(r["label"] >= 100 and not r["over"] for r in p.evaluate(MEASURE))

        # 2. Fix with nbagent: the person's words, the context folded under them, the cell named as it is seen
        page.run_cell(2)
        page.code_cells.nth(2).locator("button.nba-fix").click()
        review = page.code_cells.nth(2).locator(".nba-review")
        review.wait_for(state="visible", timeout=30_000)
        card = panel.find(".nba-panel-run").nth(1)
        page.wait_text(card.locator(".nba-panel-run-title"), f"Fix the error in {NAME}")
        said = card.locator(".nba-prompt").first
        said.wait_for(state="visible", timeout=30_000)
        text = said.inner_text()
        assert f"Fix the error in {NAME}" in text and "what nbagent was sent with it" in text, text
        assert "Everything below comes from the notebook" not in text and "edit_cell" not in text, text
        said.locator("summary").click()
        assert "Everything below comes from the notebook" in said.inner_text()  # nothing hidden: it unfolds
        said.locator("summary").click()
        title = review.locator(".nba-review-title").inner_text()
        assert title == f"nbagent proposes this edit of {NAME}", title
        assert panel.find(".nba-panel-run-title").nth(1).inner_text().count("c2") == 0

        # 3. the person edits the cell while the review waits: the review says so before anyone clicks
        editor = page.code_cells.nth(2).locator(".cm-content")
        editor.click()
        p.keyboard.press("Control+Home")
        p.keyboard.insert_text("# checked by hand\n")
        stale = review.locator(".nba-review-stale")
        stale.wait_for(state="visible", timeout=15_000)
        assert stale.inner_text().startswith("You changed [3] # checked by hand after nbagent read it"), stale.inner_text()
        assert review.locator("button.nba-accept").is_disabled()
        page.shot(f"panel-words-{app}-review-cell-changed", page.code_cells.nth(2))
        page.click_until_gone(review.locator("button.nba-reject"))
        # the card's live view is drawn asynchronously (again after any re-draw of the panel): wait for the words,
        # do not read once
        panel.wait_runs("the rejected run did not say the person changed the cell",
                        "read the cell again", "changed this cell after you read it")

        # 4. the cell put back: the next proposal applies; the changes name the cell as it is seen
        p.keyboard.press("Escape")
        page.code_cells.nth(2).locator(".cm-content").click()
        p.keyboard.press("Control+Home")
        p.keyboard.press("Shift+ArrowDown")
        p.keyboard.press("Delete")
        page.wait_sources(lambda s: s[2] == BROKEN, "the hand edit was not taken back")
        p.keyboard.press("Escape")
        page.code_cells.nth(2).locator("button.nba-fix").click()
        review.wait_for(state="visible", timeout=30_000)
        assert review.locator(".nba-review-stale").count() == 0
        page.click_until_gone(review.locator("button.nba-accept"))
        page.wait_sources(lambda s: s[2] == FIXED, "the accepted edit was not applied")
        link = panel.wait_text(".nba-panel-run .nba-panel-change .nba-panel-change-link", f"edited {NAME}")
        assert link == f"edited {NAME}", link

        # the About chip names the selected cell as it is seen
        page.code_cells.nth(2).locator(".jp-InputPrompt").click()
        p.keyboard.press("Escape")
        p.keyboard.press("Control+Alt+a")
        panel.wait_text(".nba-panel-about", f"About {NAME}")
        page.shot(f"panel-words-{app}-fixed", panel.find())
        panel.find(".nba-panel-chip-x").click()

        # 5. %agent --sessions lists the person's words as the last prompt, not the prompt the button made
        page.run_cell(3)
        table = page.code_cells.nth(3).locator(".jp-OutputArea-output").first
        listed = page.wait_text(table, "last prompt", "Fix the error in")
        assert "of this notebook failed" not in listed, listed
