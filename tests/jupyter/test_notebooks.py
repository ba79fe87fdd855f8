"""Every notebook in notebooks/ runs top to bottom under nbclient, offline, with nobody to click."""

from __future__ import annotations

import shutil
from pathlib import Path

import nbformat
import pytest

from nbagent.jupyter.headless import execute_notebook

from .kernelclient import ROOT, kernel_env

pytestmark = pytest.mark.kernel

NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


def test_there_are_notebooks():
    assert {p.name for p in NOTEBOOKS} >= {"quickstart.ipynb", "approvals.ipynb", "inspecting.ipynb"}


@pytest.mark.parametrize("policy", ["allow", "deny"])
@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_runs_headless(notebook: Path, policy: str, tmp_path: Path):
    copy = shutil.copy(notebook, tmp_path / notebook.name)
    out = tmp_path / "executed.ipynb"
    nb, summary = execute_notebook(copy, output=out, env=kernel_env(tmp_path, NBAGENT_APPROVAL=policy),
                                   timeout=120, kernel_log=tmp_path / "kernel.log")
    assert "transcript valid" in summary and "INVALID" not in summary
    assert nbformat.read(out, as_version=4).cells  # the executed copy was saved
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
    assert errors == []
    if notebook.stem == "quickstart":
        report = tmp_path / "report.md"
        assert report.exists() == (policy == "allow")
        assert ("The report is in `report.md`" in summary) == (policy == "allow")
