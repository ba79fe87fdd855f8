"""A cell is named to the person as they see it (`[8] by_region = ...`), the same way in the kernel (call rows,
the panel's labels) and in the page (the panel's chips, changes and reviews): both pass one table of cases,
tests/fixtures/cell_names.json (the page's side: frontend/src/notebook/cellEdits.test.ts)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nbagent.jupyter.notebook.cells import NotebookCell, cell_name

CASES = json.loads((Path(__file__).parents[2] / "fixtures" / "cell_names.json").read_text(encoding="utf-8"))["cases"]


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_the_kernel_names_cells_as_the_shared_table_says(case):
    cell = case["cell"]
    shown = NotebookCell("id", cell["number"], cell["cell_type"], cell["source"], cell["execution_count"])
    assert cell_name(shown) == case["name"]
