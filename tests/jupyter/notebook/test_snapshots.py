"""What a live view leaves with the frontend part for when the kernel goes first, in a real kernel against a
frontend played by the test (tests/jupyter/fake_frontend.py answers as frontend/src/notebook/keptViews.ts does): while a
run waits for approval, the frontend holds its static rendering as it would read with the kernel gone (the
call waiting, the run "stopped"); when the run ends normally the kept copy is dropped. And the page's hello
gives the notebook's id, which the stored conversation then carries.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from ..fake_frontend import FakeNotebook, KernelFrontend
from ..kernelclient import KernelSession

pytestmark = pytest.mark.kernel

SETUP = '''from pathlib import Path
from nbagent import AssistantMessage, ScriptedModel, ToolCall, tool

@tool(destructive=True, describe_activity=lambda a: f"Removing {a.path}")
def remove(path: str) -> str:
    """Remove a file."""
    Path(path).unlink()
    return f"removed {path}"

model = ScriptedModel([AssistantMessage(text="I'll remove the old export.",
                                        tool_calls=[ToolCall(name="remove", arguments={"path": "old.csv"})]),
                       "The old export is gone."])
'''


def _until(predicate, what: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout} s")
        time.sleep(0.05)


def test_a_run_waiting_for_approval_leaves_its_static_rendering_with_the_page(tmp_path: Path) -> None:
    (tmp_path / "old.csv").write_text("a\n")
    k = KernelSession(tmp_path, JPY_SESSION_NAME="analysis.ipynb")
    nb = FakeNotebook([{"id": "c1", "source": "%agent ..."}], path="analysis.ipynb")
    fe = KernelFrontend(k, nb)
    try:
        k.execute("%load_ext nbagent")
        k.execute(SETUP)
        out = k.execute("run = %agent --model model --tools remove Remove old.csv", cell_id="c1")
        model_id = next(d["application/vnd.jupyter.widget-view+json"]["model_id"] for d in out["data"]
                        if "application/vnd.jupyter.widget-view+json" in d)
        k.wait_for("run.status == 'waiting_for_approval'")

        def kept() -> str:
            return (nb.snapshots.get(model_id) or {}).get("html") or ""

        _until(lambda: "Removing old.csv" in kept(), "the waiting call in the kept rendering")
        html, text = kept(), nb.snapshots[model_id]["text"]
        assert "the kernel stopped while the run was going on" in html
        assert "remove the old export." in html, html[html.find("</style>"):]
        assert "stopped" in text and "remove" in text

        # the page said which notebook it is: the stored conversation carries its id
        notebook_id = nb.metadata["nbagent"]["id"]
        _approve(k)
        k.execute("await run")
        assert k.value("run.status") == "done"
        _until(lambda: model_id not in nb.snapshots, "the kept rendering dropped once the run ended")
        stored = [json.loads(line) for p in (tmp_path / ".nbagent" / "sessions").glob("*.jsonl")
                  for line in p.read_text().splitlines()]
        ids = {f.get("notebook_id") for f in stored if f.get("kind") in ("session", "notebook")} - {None}
        assert ids == {notebook_id}
    finally:
        fe.stop()
        k.shutdown()


def _approve(k: KernelSession) -> None:
    """Click Approve on the waiting call, as the page's button does (a comm message to the button's model)."""
    k.execute("from nbagent.jupyter import view")
    k.wait_for("len(view(run).pending) == 1 and 'approve' in view(run).pending[0].buttons")
    k.click(k.value("view(run).pending[0].buttons['approve'].model_id"))
