"""The browser tests' servers: `server` is JupyterLab, then Notebook 7 (a test that takes it runs in both), `lab`
and `notebook7` one of them; each serves a folder of its own per test module, with this checkout's frontend part
(nbagent/labextension) alone on its JUPYTER_PATH. A module that needs another server defines its own fixture of
the same name. Without chromium, every browser test is skipped (./dev test installs it)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from .lab import serve


@pytest.fixture(scope="session", autouse=True)
def chromium() -> None:
    if shutil.which("chromium") is None and not Path("/usr/bin/chromium").exists():  # pragma: no cover
        pytest.skip("chromium is not installed (./dev test installs it)")


@pytest.fixture(scope="module", params=["lab", "notebook"])
def server(request, tmp_path_factory):
    yield from serve(request, tmp_path_factory, request.param)


@pytest.fixture(scope="module")
def lab(request, tmp_path_factory):
    yield from serve(request, tmp_path_factory, "lab")


@pytest.fixture(scope="module")
def notebook7(request, tmp_path_factory):
    yield from serve(request, tmp_path_factory, "notebook")
