"""A notebook's stored conversations follow it through a rename, in a real chromium: created as
Untitled.ipynb, a conversation held, the notebook renamed in JupyterLab (File > Rename) and its kernel
restarted (which keeps the old name in its environment), a bare `%agent --resume` picks this notebook's
conversation and says so. The id that makes it so is the one the frontend part keeps in the notebook's
metadata (`nbagent.id`).

Screenshots go to test-artifacts/ (also on failure)."""

from __future__ import annotations

import json
import time

import pytest

from .lab import LabPage, LabServer, write_notebook

pytestmark = pytest.mark.browser

ECHO = ("from nbagent import ScriptedModel, UserMessage\n"
        "echo = ScriptedModel([lambda messages: ' | '.join(m.text for m in messages "
        "if isinstance(m, UserMessage))] * 10)")


@pytest.fixture
def lab(tmp_path):
    server = LabServer(tmp_path)
    yield server
    server.stop()


def test_a_renamed_notebook_resumes_its_own_conversation(lab):
    write_notebook(lab.root / "Untitled.ipynb", [
        "%load_ext nbagent",
        ECHO,
        "run = %agent --model echo --wait first question",
        "%agent --resume",
    ])
    page = LabPage(lab, "Untitled.ipynb", width=1200, height=900)
    p = page.page
    try:
        page.hide_sidebar()
        for i in range(3):
            page.run_cell(i)
        page.wait_text(page.code_cells.nth(2), "first question")
        p.keyboard.press("Escape")
        notebook_id = None  # written into the metadata by the page when the kernel asked
        deadline = time.monotonic() + 30
        while notebook_id is None:
            assert time.monotonic() < deadline, "the saved notebook has no nbagent.id"
            p.keyboard.press("Control+s")
            time.sleep(0.3)
            try:
                notebook_id = json.loads((lab.root / "Untitled.ipynb").read_text())["metadata"]["nbagent"]["id"]
            except (ValueError, KeyError):  # not saved yet, or being written
                pass

        p.click(".lm-MenuBar-item:has-text('File')")
        p.click(".lm-Menu-item:has-text('Rename Notebook…')")
        field = p.locator(".jp-Dialog input")
        field.fill("analysis.ipynb")
        p.click(".jp-Dialog button.jp-mod-accept")
        p.wait_for_function("() => document.title.includes('analysis')", timeout=15_000)
        assert (lab.root / "analysis.ipynb").exists() and not (lab.root / "Untitled.ipynb").exists()

        p.click(".lm-MenuBar-item:has-text('Kernel')")
        p.click(".lm-Menu-item:has-text('Restart Kernel…')")
        p.click(".jp-Dialog button.jp-mod-accept", timeout=10_000)
        page.wait_kernel_idle()
        page.run_cell(0)
        page.run_cell(3)
        said = page.wait_text(page.code_cells.nth(3), "Resumed")
        page.shot("sessions-renamed-resume", page.code_cells.nth(3))
        assert "the latest conversation of this notebook" in said and "1 run" in said, said
        stored = [json.loads(line) for f in (lab.root / ".nbagent" / "sessions").glob("*.jsonl")
                  for line in f.read_text().splitlines()]
        assert notebook_id in {s.get("notebook_id") for s in stored}
    except Exception:
        page.shot("sessions-renamed-failure")
        raise
    finally:
        page.close()
