"""Fixtures for the toolbox tests: a workspace with files, a directory outside it, and a way to run
calls through a real Agent with a ScriptedModel."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from nbagent import toolbox

from tests.toolbox.support import Runner


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A directory next to the workspace, holding a secret no tool may reach."""
    d = tmp_path / "outside"
    d.mkdir()
    (d / "secret.txt").write_text("TOP SECRET\n")
    return d


@pytest.fixture
def ws(tmp_path: Path, outside: Path) -> Path:
    """A workspace with a few files, a sub-directory and symbolic links leading out."""
    root = tmp_path / "ws"
    root.mkdir()
    (root / "notes.txt").write_text("alpha\nbeta\ngamma\n")
    (root / "data").mkdir()
    (root / "data" / "a.csv").write_text("x,y\n1,2\n")
    (root / "data" / "b.csv").write_text("x,y\n3,4\n")
    (root / ".env").write_text("API_KEY=sk-123\n")
    os.symlink(outside / "secret.txt", root / "link_out")
    os.symlink(outside, root / "dir_out")
    os.symlink(root / "notes.txt", root / "link_in")
    return root


@pytest.fixture
def tools(ws: Path) -> list[Any]:
    return toolbox.all(workspace=ws)


@pytest.fixture
def runner(tools: list[Any], ws: Path) -> Runner:
    """Everything allowed (bypassPermissions): what is left to stop a call is the tool itself."""
    return Runner(tools, mode="bypassPermissions", workspace=ws)
