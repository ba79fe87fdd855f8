"""The panel as a chat, in JupyterLab and in Notebook 7, in a real chromium, at the panel's default width.

"New chat" puts the conversation shown aside and the next prompt starts another; "Conversations" lists this
notebook's conversations newest first (the words each was started with, its runs and calls); a click on one
shows its messages and the next prompt continues it (the kernel's run carries its history); `@[1]` sends the
cell shown as In [1]. Screenshots go to test-artifacts/."""

from __future__ import annotations

import pytest

from .lab import SCRIPT, LabPage, write_notebook
from .panel import Panel

pytestmark = pytest.mark.browser

SETUP = r'''from nbagent import ScriptedModel
model = ScriptedModel(["It is 42.", "Hello again.", "Continued from 42.", "It loads nbagent."], delay=0.02)
%config NBAgent.model = "model"'''
WORDS = "print([m.words for m in __import__('nbagent.jupyter').jupyter.get_session().runs[-1].messages if m.kind == 'user'])"


def test_conversations_new_chat_and_continuing_a_picked_one(server):
    app = server.app
    name = f"chat_{app}.ipynb"
    write_notebook(server.root / name, ["%load_ext nbagent", (SETUP, {"jupyter": {"source_hidden": True}}), WORDS])
    with LabPage(server, name, width=1300, height=1000) as page:
        p = page.page
        page.hide_sidebar()
        page.run_cells(0, 1)
        panel = Panel(page).open()
        panel.ask("What is 6 * 7?", "It is 42.")

        # New chat: what was shown is put aside; the next prompt starts a conversation of its own
        panel.find(".nba-panel-newchat").click()
        page.wait_for("New chat did not clear the conversation shown",
                      "() => !document.querySelector('#nbagent-panel .nba-panel-run') && "
                      "/New chat/.test(document.querySelector('#nbagent-panel .nba-panel-stored').innerText)")
        panel.ask("Say hello", "Hello again.")
        assert "It is 42." not in panel.text(".nba-panel-runs")
        page.run_cell(2)
        page.wait_text(page.code_cells.nth(2).locator(".jp-OutputArea-output"), "['Say hello']")

        # the list: this notebook's conversations, newest first, with the words each began with
        panel.find(".nba-panel-list").click()
        items = panel.find(".nba-panel-conv-item")
        page.wait_for("the list did not show the two conversations",
                      "() => document.querySelectorAll('#nbagent-panel .nba-panel-conv-item').length === 2")
        assert items.nth(0).locator(".nba-panel-conv-first").inner_text() == "Say hello"
        assert items.nth(1).locator(".nba-panel-conv-first").inner_text() == "What is 6 * 7?"
        meta = items.nth(1).locator(".nba-panel-conv-meta").inner_text()
        assert meta.startswith("1 run · 0 calls · "), meta
        width = panel.find().bounding_box()["width"]
        assert width <= 320, f"the panel is {width} px wide, not its default"
        for i in range(2):  # nothing of a row runs past the panel's edge at its default width
            box, panel_box = items.nth(i).bounding_box(), panel.find().bounding_box()
            assert box["x"] + box["width"] <= panel_box["x"] + panel_box["width"] + 1
        page.shot(f"panel-chat-{app}-list", panel.find())

        # a click continues the first conversation: its messages shown, the next prompt goes on from them
        items.nth(1).click()
        panel.wait_text(".nba-panel-stored", "picked from the list", "It is 42")
        assert panel.find(".nba-panel-run").count() == 0
        panel.ask("And then?", "Continued from 42.")
        assert "Hello again." not in panel.text()
        page.shot(f"panel-chat-{app}-continued", panel.find())
        page.run_cell(2)
        page.wait_text(page.code_cells.nth(2).locator(".jp-OutputArea-output").first, "['What is 6 * 7?', 'And then?']")

        # @[1]: the cell shown as In [1] goes with the words, its source as data, folded under them
        panel.ask("What does @[1] do?", "It loads nbagent.")
        sent = p.evaluate("() => [...document.querySelectorAll('#nbagent-panel .nba-panel-run')].pop().textContent")
        assert "@[1] is the cell c0 (shown as [1] in the notebook)" in sent and "%load_ext nbagent" in sent, sent


REVIEW_SETUP = SCRIPT + r'''

model = ScriptedModel([
    call("read_notebook", cell_id="c2"),
    call("edit_cell", cell_id="c2", old="a = 1", new="a = 2"),
    call("insert_cell", after="c2", source="b = a + 1"),
    "Done: a is 2 and b follows it.",
], delay=0.02)
%config NBAgent.model = "model"'''
CELL = "a = 1"


def test_one_review_of_every_change_with_keep_all_and_undo_all(server):
    """The review above the prompt box lists each proposed edit and each change, linked to its cell; Keep all
    accepts what is proposed (the cell and the panel agree: one decision); Undo all puts every cell back."""
    app = server.app
    name = f"review_{app}.ipynb"
    write_notebook(server.root / name, ["%load_ext nbagent", (REVIEW_SETUP, {"jupyter": {"source_hidden": True}}), CELL])
    with LabPage(server, name, width=1300, height=1000) as page:
        page.hide_sidebar()
        page.run_cells(0, 1)
        panel = Panel(page).open()
        review = panel.find(".nba-panel-review")
        panel.send("Make a 2, then add b")

        # the proposed edit: in the review, linked to its cell, and on the cell itself
        proposed = review.locator(".nba-panel-proposed")
        proposed.first.wait_for(state="visible", timeout=30_000)
        assert proposed.first.inner_text().startswith("proposed: this edit of cell 3 a = 1")
        assert review.locator(".nba-panel-review-title").inner_text().startswith("Review: 1 proposed")
        assert proposed.first.locator("a").get_attribute("href") == "#nbagent-cell=c2"
        page.code_cells.nth(2).locator(".nba-review").wait_for(state="visible", timeout=15_000)
        page.shot(f"panel-review-{app}-proposed", panel.find())
        review.locator("button.nba-panel-keep-all").click()
        page.wait_sources(lambda s: s[2] == "a = 2", "Keep all did not accept the edit")
        # the next proposal (a new cell): accepted on its own, on the cell
        panel.wait_text(".nba-panel-review", "proposed: a new code cell")
        page.code_cells.nth(2).locator(".nba-review button.nba-accept").click()
        panel.wait_runs("the run did not end", "Done: a is 2")
        page.wait_sources(lambda s: s[2:] == ["a = 2", "b = a + 1"], "the accepted changes were not applied")
        # the review now holds the one change not kept; the run's card says the edit was kept
        panel.wait_text(".nba-panel-review", "Review: 1 change made")
        row = review.locator(".nba-panel-change")
        assert row.count() == 1 and row.first.inner_text().startswith("inserted ")
        href = row.first.locator("a").get_attribute("href")
        assert href.startswith("#nbagent-cell=") and href != "#nbagent-cell=c2", href
        page.wait_for("the run's card did not say the edit was kept",
                      "() => { const c = document.querySelectorAll('#nbagent-panel .nba-panel-run .nba-panel-change'); "
                      "return c.length > 0 && /kept/.test(c[0].innerText); }")
        page.shot(f"panel-review-{app}-changes", panel.find())
        # Undo all: the inserted cell goes; the kept edit stays
        review.locator("button.nba-panel-review-undo-all").click()
        page.wait_sources(lambda s: s[2:] == ["a = 2"], "Undo all did not put the notebook back")
        page.wait_for("the review did not empty after Undo all",
                      "() => !document.querySelector('#nbagent-panel .nba-panel-review').innerText.trim()")
        page.wait_for("the run's card did not say the insert was undone",
                      "() => { const c = document.querySelectorAll('#nbagent-panel .nba-panel-run .nba-panel-change'); "
                      "return c.length > 1 && /undone/.test(c[1].innerText); }")
