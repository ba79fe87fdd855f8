"""`./dev`, the project's set-up and test commands.

- `./dev lab`: JupyterLab on a workspace of the person's own (workspace/, ignored by git) that starts with copies
  of the tour's notebooks, so notebooks a person makes there never land in notebooks/, which the tests execute.
  Played in a copy of the checkout with a stand-in venv (its `jupyter` prints what it was asked).
- `./dev test` and `./dev test --fast`: the full lane (what CI runs) selects every test; the fast lane leaves
  out the tests of a few markers and nothing else, read from the run's own collection of the whole suite."""

from __future__ import annotations

import hashlib
import os
import shlex
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

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


# -- the two test lanes ---------------------------------------------------------------------------------------
LEFT_OUT = {"kernel", "browser", "servers", "slow", "other_sandbox"}
"""What the fast lane (`./dev test --fast`) may leave out, and all it leaves out (pyproject.toml says what each
marker means). The full lane (`./dev test`, what .ci/run runs) leaves out nothing."""


def _lanes() -> dict[str, list[str]]:
    """The arguments each lane of `./dev test` gives pytest, as the shell splits them."""
    dev = (ROOT / "dev").read_text()
    case = dev[dev.index("\n  test)"):dev.index(";;", dev.index("\n  test)"))].replace("\\\n", " ")
    found = {}
    for line in case.splitlines():
        words = shlex.split(line, comments=True)
        if "pytest" in words and words[words.index("pytest") - 1] == "-m":
            found["fast" if "NBAGENT_TEST_LANE=fast" in words else "full"] = words[words.index("pytest") + 1:]
    assert set(found) == {"fast", "full"}, found
    return found


def _whole_suite(config: pytest.Config) -> bool:
    """Whether this run collected the whole suite (what both lanes do): its paths are the test folder and
    nothing is ignored. `-m`, `-k` and `--deselect` choose after the collection the check reads."""
    paths = {(config.invocation_params.dir / arg.split("::")[0]).resolve() for arg in config.args}
    return paths == {ROOT / "tests"} and not config.getoption("ignore") and not config.getoption("ignore_glob")


def test_the_fast_lane_leaves_out_only_its_markers_and_the_full_lane_nothing(request: pytest.FixtureRequest) -> None:
    if not _whole_suite(request.config):  # run alone: check it in a run that collects the whole suite
        name = request.node.name
        done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-k", name, "tests"],
                              cwd=ROOT, capture_output=True, text=True, timeout=600,
                              env={**{k: v for k, v in os.environ.items() if k != "NBAGENT_TEST_LANE"},
                                   "PYTHONPATH": str(ROOT)})
        assert done.returncode == 0 and "1 passed" in done.stdout, done.stdout[-4000:] + done.stderr[-2000:]
        return

    from _pytest.mark.expression import Expression

    from tests.conftest import COLLECTED, FAST_LANE_SKIPS, host_sandbox_lane, in_fast_lane_skips

    lanes = _lanes()
    assert lanes["full"] == ["$@"], "the full lane runs pytest with nothing but the person's own arguments"
    assert "exec ./dev test" in (ROOT / ".ci" / "run").read_text().splitlines(), "CI runs the full lane"
    fast = lanes["fast"]
    expression = fast[fast.index("-m") + 1]
    rest = fast[:fast.index("-m")] + fast[fast.index("-m") + 2:]
    assert [w for i, w in enumerate(rest) if w != "-n" and (i == 0 or rest[i - 1] != "-n")] == ["-q", "$@"], \
        f"the fast lane chooses its tests by -m alone: {fast}"
    addopts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]["addopts"]
    assert not {"-m", "-k", "--deselect", "--ignore", "--ignore-glob"} & set(addopts.split()), addopts

    rows = request.config.stash[COLLECTED]
    chosen = Expression.compile(expression)
    kept = {r.nodeid for r in rows if chosen.evaluate(lambda name, /, **kwargs: name in r.markers)}
    left_out = {r.nodeid for r in rows} - kept
    assert kept and left_out == {r.nodeid for r in rows if r.markers & LEFT_OUT}, \
        "the fast lane leaves out the tests marked " + ", ".join(sorted(LEFT_OUT)) + " and nothing else"

    # what the fast lane does not even collect holds only tests it leaves out (seen where it is collected)
    skipped = [r for r in rows if in_fast_lane_skips(r.nodeid)]
    if os.environ.get("NBAGENT_TEST_LANE") == "fast":
        assert not skipped, "the fast lane collects none of " + ", ".join(FAST_LANE_SKIPS)
    else:
        for skip in FAST_LANE_SKIPS:
            assert any(in_fast_lane_skips(r.nodeid) and r.nodeid.startswith(skip) for r in rows), skip
        unmarked = [r.nodeid for r in skipped if not r.markers & LEFT_OUT]
        assert not unmarked, f"the fast lane does not collect these, but they are not marked to be left out: {unmarked}"

    # what it leaves out is run in the fast lane in another form: the sandbox tests in this host's lane, and
    # beside each module's slow tests, cheaper tests of the same module
    host = host_sandbox_lane()
    in_host_lane = {r.base for r in rows if r.lane == host and r.nodeid in kept}
    for r in rows:
        if r.markers & LEFT_OUT == {"other_sandbox"}:
            assert r.base in in_host_lane, f"{r.nodeid} runs in no sandbox lane of the fast lane"
    for module in {r.nodeid.split("::")[0] for r in rows if "slow" in r.markers}:
        assert any(k.startswith(module + "::") for k in kept), f"{module} keeps no test in the fast lane"
