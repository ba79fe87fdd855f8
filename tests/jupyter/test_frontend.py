"""The frontend part's own unit tests (vitest, in frontend/): the pure parts without a page (the review's
diff, the edit `edit_cell` makes, what an output is trimmed to) and the check that each room's protocol.ts is
what its JSON Schema makes. They run here wherever Node is installed (CI's ./dev installs it, and the
frontend's packages with `npm ci`); the browser tests (tests/jupyter/browser/) test the rest in a real page."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

FRONTEND = Path(__file__).resolve().parents[2] / "frontend"


def test_the_frontend_unit_tests_pass():
    npm = shutil.which("npm")
    if npm is None or shutil.which("node") is None:
        pytest.skip("Node is not installed (./dev installs it)")
    if not (FRONTEND / "node_modules" / "vitest").is_dir():
        pytest.skip("the frontend's packages are not installed: ./dev setup (or npm ci in frontend/)")
    # --no-isolate: the files share one worker instead of a fresh one each (half the CPU, measured); they are
    # pure (no mocks, no stubbed globals), and a file's own `@vitest-environment` still applies to it
    done = subprocess.run([npm, "test", "--silent", "--", "--no-isolate"], cwd=FRONTEND, capture_output=True, text=True, timeout=300, check=False,
                          env={**os.environ, "CI": "1", "NO_COLOR": "1"})
    assert done.returncode == 0, (done.stdout + done.stderr)[-6000:]
    assert " passed" in done.stdout and " failed" not in done.stdout, done.stdout[-3000:]
