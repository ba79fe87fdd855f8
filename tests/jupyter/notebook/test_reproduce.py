"""Reproducible agent work in a real kernel: a scripted session loads a CSV into a frame, cleans it in
python calls (one replaced by a later one, one failing, one only printing) and defines a helper; then what
exists only in the kernel, the cells that make it again, and a fresh kernel that proves the notebook reruns.
"""

from __future__ import annotations

import json
import time

import pytest

from ..fake_frontend import FakeNotebook, KernelFrontend
from ..kernelclient import KernelSession

nbformat = pytest.importorskip("nbformat")

pytestmark = pytest.mark.kernel

CSV = "item,price,qty\napple,1.5,4\npear,,2\nfig,3.25,1\nplum,0.75,\nkiwi,2.0,3\n"

LOAD = "df = pd.read_csv('data.csv')"
FIRST_CLEAN = "df_clean = df.dropna()"
FAILING = "df_clean['ratio'] = df_clean.price / df_clean.weight"
LOOKING = "print(df.describe())"
CLEAN = "df_clean = df.dropna().reset_index(drop=True)\ndf_clean['total'] = df_clean.price * df_clean.qty"
HELPER = "def helper(frame):\n    return round(float(frame.total.sum()), 2)"
CALLS = [LOAD, FIRST_CLEAN, FAILING, LOOKING, CLEAN, HELPER]

SETUP = f'''%load_ext nbagent
import pandas as pd
from nbagent import AssistantMessage, ScriptedModel, ToolCall
codes = {CALLS!r}
model = ScriptedModel([AssistantMessage(text=f"step {{i}}", tool_calls=[ToolCall(id=f"call{{i}}", name="python",
                       arguments={{"code": c}})]) for i, c in enumerate(codes)] + ["Cleaned."])'''
AGENT = "run = %agent --model model --wait Load data.csv into a frame and clean it"
USE = "summary = helper(df_clean)\nsummary"


def cell(cell_id: str, source: str) -> dict:
    return {"id": cell_id, "cell_type": "code", "source": source, "metadata": {}, "outputs": [],
            "execution_count": None}


def save(path, cells: list[dict]) -> None:
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [nbformat.from_dict({k: c[k] for k in ("id", "cell_type", "source", "metadata", "outputs",
                                                       "execution_count")}) for c in cells]
    nbformat.validate(nb)
    nbformat.write(nb, path)


@pytest.fixture(scope="module")
def session(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("repro")
    (workdir / "data.csv").write_text(CSV)
    k = KernelSession(workdir)
    notebook = FakeNotebook([cell("setup", SETUP), cell("agent", AGENT), cell("use", USE)],
                            path=str(workdir / "analysis.ipynb"))
    front = KernelFrontend(k, notebook)
    k.execute(SETUP, cell_id="setup")
    k.execute('%config NBAgent.rules = ["allow: python"]')
    k.execute(AGENT, cell_id="agent", timeout=120)
    yield k, notebook, workdir
    front.stop()
    k.shutdown()


def test_the_records_say_what_each_call_did_to_the_names(session):
    k, _, _ = session
    rows = k.value("[[c.status, sorted(c.state_change.assigned), sorted(c.state_change.rebound), "
                   "sorted(c.state_change.mutated), list(c.state_change.read)] for c in run.calls]")
    assert rows == [
        ["ok", ["df"], [], [], ["pd"]],
        ["ok", ["df_clean"], [], [], ["df"]],
        ["error", [], [], [], ["df_clean"]],
        ["ok", [], [], [], ["df"]],
        ["ok", [], ["df_clean"], [], ["df"]],
        ["ok", ["helper"], [], [], []],
    ]
    # the stored session has them too
    stored = k.value("[c.get('state') for c in __import__('nbagent').sessions.load_session("
                     "get_ipython()._nbagent_session.stored.workspace, get_ipython()._nbagent_session.stored.session_id"
                     ").calls]")
    assert [s["assigned"] for s in stored] == [["df"], ["df_clean"], [], [], [], ["helper"]]
    assert stored[2]["ok"] is False and stored[4]["rebound"] == ["df_clean"]


def test_kernel_only_names_the_frame_and_the_helper_and_the_header_says_it(session):
    k, _, _ = session
    assert k.value("run.kernel_only") == ["df", "df_clean", "helper"]
    text = k.value("str(run)")
    assert "3 names exist only in the kernel: df, df_clean, helper" in text
    assert "3 names exist only in the kernel" in k.value("run._repr_html_()")


def test_to_cells_leaves_out_the_replaced_failed_and_looking_calls(session):
    k, _, _ = session
    cells = k.value("run.to_cells()")
    sources = [c["source"] for c in cells]
    codes = [s.split("\n", 1)[1] for s in sources]
    assert codes == [LOAD, CLEAN, HELPER]  # the code exactly as it ran, in order
    assert not {FIRST_CLEAN, FAILING, LOOKING} & set(codes)  # replaced, failed, only looked
    meta = [c["metadata"]["nbagent"] for c in cells]
    assert [m["calls"] for m in meta] == [["call0"], ["call4"], ["call5"]]
    assert {m["model"] for m in meta} == {"scripted"} and {m["run"] for m in meta} == {k.value("run.id")}
    assert sources[0].startswith("# nbagent: step 1 of 3 of run ")
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.from_dict(c) for c in cells]
    nbformat.validate(nb)


def test_the_cells_appended_make_the_frame_and_the_helper_again_in_a_fresh_kernel(session):
    k, notebook, workdir = session
    cells = k.value("run.to_cells()")
    path = workdir / "appended.ipynb"
    save(path, [cell("setup", SETUP), *cells])  # the notebook's own cells, then the run's
    k.execute(f"import nbagent.jupyter\nreport = nbagent.jupyter.check_reproducible({str(path)!r}, timeout=120)",
              timeout=240)
    assert k.value("report.reproducible") is True, k.value("str(report)")
    checks = {c["name"]: c for c in k.value("[{'name': c.name, 'status': c.status, 'live': c.live, "
                                             "'rerun': c.rerun} for c in report.checks]")}
    assert set(checks) == {"df", "df_clean", "helper"}
    frame = checks["df_clean"]
    assert frame["live"]["how"] == "content" and frame["live"]["shape"] == [3, 4]
    assert frame["rerun"]["shape"] == frame["live"]["shape"] and frame["rerun"]["hash"] == frame["live"]["hash"]
    assert checks["helper"]["live"]["how"] == "code" and checks["helper"]["rerun"]["hash"] == checks["helper"]["live"]["hash"]


def test_the_panel_is_told_and_can_ask_for_the_cells(session):
    from ..panel.test_comm import Page

    k, notebook, _ = session
    page = Page(k)
    state = page.ask("state")["result"]
    mine = next(r for r in state["runs"] if r["id"] == k.value("run.id"))
    assert mine["kernel_only"] == ["df", "df_clean", "helper"]
    reply = page.ask("to_cells", run=mine["id"])
    assert reply["ok"], reply
    assert "3 cells make df, df_clean, helper" in reply["result"]["summary"]
    made = reply["result"]["run"]["id"]
    page.pushed(lambda r: r["id"] == made and r["reviews"] and r["reviews"][0]["tool"] == "insert_cell")
    assert page.ask("stop", run=made)["result"] == {"stopped": True}  # the page stops it: nothing is inserted
    k.wait_for(f"[r for r in get_ipython()._nbagent_session.runs if r.id == {made!r}][0].done")
    assert len(notebook.cells) == 3
    assert page.ask("to_cells", run="nope")["error"].startswith("there is no run")


def test_check_before_and_after_to_cells(session):
    k, notebook, workdir = session
    path = workdir / "analysis.ipynb"
    save(path, notebook.cells)
    k.execute(f"before = nbagent.jupyter.check_reproducible({str(path)!r}, timeout=120)", timeout=240)
    assert k.value("[before.reproducible, before.missing, before.different, before.failed_cells]") == [
        False, ["df", "df_clean", "helper"], [], [2]]
    assert "NameError" in k.value("before.cell_errors[2]")
    assert "not reproducible" in k.value("str(before)") and "<table" in k.value("before._repr_html_()")

    # --to-cells: one reviewable insertion per cell, each below the one before, under the run's cell
    k.execute("frame_before = id(df_clean)")
    k.execute("cells_run = %agent --to-cells", cell_id="tocells")
    for step in range(3):
        k.wait_for("len(nbagent.jupyter.view(cells_run).pending) > 0 and "
                   "bool(nbagent.jupyter.view(cells_run).pending[0].buttons)", timeout=60)
        pending = k.value("[r.record.name for r in nbagent.jupyter.view(cells_run).pending]")
        assert pending == ["insert_cell"], pending
        assert len(notebook.cells) == 3 + step  # nothing is inserted before the person approves
        ids = k.value("{n: w.model_id for n, w in nbagent.jupyter.view(cells_run).pending[0].buttons.items()}")
        k.click(ids["approve"])
        k.wait_for(f"len([c for c in cells_run.calls if c.status == 'ok']) == {step + 1}", timeout=60)
    k.wait_for("cells_run.done", timeout=60)
    sources = [c["source"] for c in notebook.cells]
    assert sources[0:2] == [SETUP, AGENT] and sources[-1] == USE
    assert [s.split("\n", 1)[1] for s in sources[2:5]] == [LOAD, CLEAN, HELPER]
    marks = [c["metadata"]["nbagent"] for c in notebook.cells[2:5]]
    assert [m["action"] for m in marks] == ["recreated"] * 3
    assert [m["calls"] for m in marks] == [["call0"], ["call4"], ["call5"]]
    assert all(m["model"] == "scripted" and m["run"] == k.value("run.id") for m in marks)
    assert all(m["inserted_by"]["run"] == k.value("cells_run.id") for m in marks)
    assert k.value("id(df_clean) == frame_before") is True  # nothing ran: the person runs the cells

    # the saved file keeps the provenance, and so does nbconvert
    save(path, notebook.cells)
    saved = nbformat.read(path, as_version=4)
    assert [c.metadata.get("nbagent", {}).get("calls") for c in saved.cells][2:5] == [["call0"], ["call4"], ["call5"]]
    from nbconvert import NotebookExporter

    converted, _ = NotebookExporter().from_filename(str(path))
    assert json.loads(converted)["cells"][3]["metadata"]["nbagent"]["calls"] == ["call4"]

    k.execute(f"after = nbagent.jupyter.check_reproducible({str(path)!r}, timeout=120)", timeout=240)
    assert k.value("[after.reproducible, after.missing, after.different, after.failed_cells]") == [
        True, [], [], []], k.value("str(after)")
    assert k.value("run.kernel_only") == []  # the notebook's cells define them now


def test_check_magic_uses_the_notebook_file(session):
    k, notebook, workdir = session
    save(workdir / "analysis.ipynb", notebook.cells)
    started = time.monotonic()
    out = k.execute(f"%config NBAgent.notebook_path = {str(workdir / 'analysis.ipynb')!r}\n%agent --check",
                    timeout=240)
    assert "Rerunning" in out["stdout"]
    html = "".join(d.get("text/html", "") for d in out["data"])
    assert "reproducible" in html and "df_clean" in html, (html, time.monotonic() - started)


def test_a_rerun_that_times_out_stops_and_says_so(session):
    k, _, workdir = session
    path = workdir / "slow.ipynb"
    save(path, [cell("a", "import time\nx = 1"), cell("b", "time.sleep(30)"), cell("c", "y = 2")])
    k.execute(f"slow = nbagent.jupyter.check_reproducible({str(path)!r}, timeout=2, names=['x'])", timeout=120)
    assert k.value("[slow.reproducible, slow.stopped, slow.checks]") == [False, "cell 2 did not finish within 2 s", []]
    assert "the rerun stopped" in k.value("str(slow)")
