"""`./dev lab`: JupyterLab on a workspace of the person's own (workspace/, ignored by git) that starts with copies
of the tour's notebooks, so notebooks a person makes there never land in notebooks/, which the tests execute.
Played in a copy of the checkout with a stand-in venv (its `jupyter` prints what it was asked)."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_dev_lab_opens_a_workspace_outside_the_tour_and_keeps_what_is_there(tmp_path: Path) -> None:
    for name in ("dev", "pyproject.toml", ".gitignore"):
        shutil.copy2(ROOT / name, tmp_path / name)
    shutil.copytree(ROOT / "notebooks", tmp_path / "notebooks", ignore=shutil.ignore_patterns("report.md"))
    (tmp_path / "nbagent" / "labextension").mkdir(parents=True)
    bin_ = tmp_path / ".venv" / "bin"
    bin_.mkdir(parents=True)
    for tool, body in (("python", "exit 0"), ("jupyter", 'echo "jupyter $*"')):
        (bin_ / tool).write_text(f"#!/bin/sh\n{body}\n")
        (bin_ / tool).chmod(0o755)
    (tmp_path / ".venv" / ".nbagent-stamp").write_text(
        hashlib.sha256((tmp_path / "pyproject.toml").read_bytes()).hexdigest() + "\n")
    (tmp_path / "workspace").mkdir()
    (tmp_path / "workspace" / "quickstart.ipynb").write_text("mine")  # a person's edited copy stays theirs

    out = subprocess.run(["bash", "dev", "lab"], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "jupyter lab --notebook-dir=workspace" in out.stdout
    tour = sorted(p.name for p in (tmp_path / "notebooks").glob("*.ipynb"))
    assert tour and sorted(p.name for p in (tmp_path / "workspace").glob("*.ipynb")) == tour
    assert (tmp_path / "workspace" / "quickstart.ipynb").read_text() == "mine"
    assert "workspace/" in (tmp_path / ".gitignore").read_text().splitlines()
