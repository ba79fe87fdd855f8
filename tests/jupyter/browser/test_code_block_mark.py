"""The live kernel's mark is no secret from what reads the saved notebook (the model's `read_file` can read the
`.ipynb`, which holds the mark in every block nbagent drew), so the mark alone must not earn Copy / Insert as
cell: a Markdown cell, whose source anyone may write (the model can insert one), gets no buttons even when its
markup carries the live mark; the same markup in a code cell's output (which only something that ran can put
there) does, and is the control that the test sees buttons when they are given.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from .lab import LabPage

pytestmark = pytest.mark.browser


def block(code: str, mark: str) -> str:
    """nbagent's markup for a model's code block, as anyone can write it."""
    return (f'<div class="nba"><div class="nba-body"><div class="nba-md"><pre class="nba-code-block nba-lang-python '
            f'{mark}"><code>{code}</code></pre></div></div></div>')


SHOW = ("from IPython.display import HTML, display\nfrom nbagent.render.markdown import LIVE_MARK\n"
        "print(LIVE_MARK)\n"
        f"display(HTML({block('print(TEXT)', 'MARK')!r}.replace('MARK', LIVE_MARK).replace('TEXT', repr(TEXT))))")


def write(path: Path) -> Path:
    cells = [("code", "%load_ext nbagent"), ("code", "TEXT = 'in a code output'\n" + SHOW), ("markdown", "a note"),
             ("code", "TEXT = 'shown after the note'\n" + SHOW)]
    nb = {
        "cells": [{"cell_type": kind, "id": f"c{i}", "metadata": {}, "source": src,
                   **({"execution_count": None, "outputs": []} if kind == "code" else {})}
                  for i, (kind, src) in enumerate(cells)],
        "metadata": {"kernelspec": {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}},
        "nbformat": 4, "nbformat_minor": 5,
    }
    path.write_text(json.dumps(nb, indent=1))
    return path


def wrapped(page: LabPage, text: str):
    return page.page.locator(f".nba-code-wrap:has(pre.nba-code-block:has-text({json.dumps(text)}))")


def test_a_markdown_cell_carrying_the_live_mark_gets_no_buttons(lab):
    path = write(lab.root / "mark.ipynb")
    with LabPage(lab, path.name, width=1100, height=1000) as page:
        p = page.page
        page.hide_sidebar()
        page.run_cells(0, 1)
        # control: the marked block in a code cell's output gets its buttons
        wrapped(page, "in a code output").locator(".nba-code-insert").wait_for(state="attached", timeout=60_000)
        mark = page.wait_text(page.code_cells.nth(1).locator(".jp-OutputArea-output").first, "nba-live-").strip()
        assert mark.startswith("nba-live-") and " " not in mark

        # the model's way in: a Markdown cell whose source is the same markup with the mark it read
        note = p.locator(".jp-Notebook .jp-MarkdownCell").first
        note.locator(".jp-InputPrompt").click()  # selected, then Enter: into its editor
        p.keyboard.press("Escape")
        p.keyboard.press("Enter")
        editor = note.locator(".cm-content")
        editor.wait_for(state="visible")
        editor.click()
        p.keyboard.press("Control+a")
        p.keyboard.insert_text(block("print('from a markdown cell')", mark))
        p.keyboard.press("Shift+Enter")  # rendered, as a person would
        forged = note.locator("pre.nba-code-block:has-text(\"from a markdown cell\")")
        forged.wait_for(state="attached", timeout=30_000)
        assert mark in (forged.get_attribute("class") or ""), "control: the sanitizer kept the mark on the block"

        # a later output is decorated: the page has looked at everything drawn before it
        page.run_cell(2)
        wrapped(page, "shown after the note").locator(".nba-code-insert").wait_for(state="attached", timeout=60_000)
        assert wrapped(page, "from a markdown cell").count() == 0, (
            "a Markdown cell carrying the live mark got Copy / Insert as cell: the mark, which the saved notebook "
            "shows to whoever reads it, passed for the live kernel's block")
