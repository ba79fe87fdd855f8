"""The notebook as a document: what a run leaves in the cell that started it, in real kernels.

- executed by nbclient, saved without widget state and converted to Markdown and HTML, every run shows
  whole (answer and calls) in the cell that started it, whatever cell it ended in;
- a cell run again while its run waits for approval shows that run's view again (it stays reachable);
- a kernel shut down or restarted mid-run leaves no view claiming that the run goes on.
"""

from __future__ import annotations

import json
import shutil

import nbformat
import pytest

from nbagent.jupyter.headless import execute_notebook

from ..kernelclient import KernelSession, kernel_env
from ..browser.lab import write_notebook

pytestmark = pytest.mark.kernel

WIDGET = "application/vnd.jupyter.widget-view+json"

SETUP = '''from nbagent import AssistantMessage, ScriptedModel, ToolCall, tool

@tool(describe_activity=lambda a: f"Adding {a.a} and {a.b}", describe_completed_activity=lambda a, r: f"Added {a.a} and {a.b}")
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b

def adding(a, b, answer):
    return ScriptedModel([AssistantMessage(text="Let me add.", tool_calls=[ToolCall(name="add", arguments={"a": a, "b": b})]),
                          answer])
'''

CELLS = [
    "%load_ext nbagent",
    SETUP,
    # ends while a later cell awaits it
    "first = adding(2, 3, 'The sum is five.')\nrun1 = %agent --model first --tools add What is 2+3?",
    "await run1",
    # ends between cells, or during a later cell that does not await it
    "second = adding(40, 2, 'The answer is forty-two.')\nrun2 = %agent --model second --new --tools add And 40+2?",
    "import asyncio\nawait asyncio.sleep(0.3)\nx = 1",
    "y = 2",
    # ends in its own cell
    "third = ScriptedModel(['Nothing to add.'])\n%agent --model third --new --wait Anything else?",
]


def _outputs_text(cell) -> str:
    parts = []
    for out in cell.get("outputs", []):
        data = out.get("data", {})
        parts.append(data.get("text/html", ""))
        parts.append(data.get("text/plain", ""))
        parts.append(out.get("text", ""))
    return "\n".join(parts)


def test_an_executed_notebook_saved_without_widget_state_shows_every_run_in_its_cell(tmp_path):
    from nbconvert import HTMLExporter, MarkdownExporter

    path = write_notebook(tmp_path / "doc.ipynb", CELLS)
    out = tmp_path / "executed.ipynb"
    nb, summary = execute_notebook(path, output=out, env=kernel_env(tmp_path, NBAGENT_APPROVAL="allow"),
                                   timeout=120, kernel_log=tmp_path / "kernel.log")
    assert summary.count("transcript valid") == 3
    saved = nbformat.read(out, as_version=4)
    # the ended runs' widgets are closed and shown by no output: their state is not saved (tens of KB a run)
    assert "widgets" not in saved.metadata
    saved.metadata.pop("widgets", None)  # what JupyterLab saves by default: no widget state
    nbformat.write(saved, tmp_path / "stripped.ipynb")
    cells = saved.cells
    for cell in cells:
        for output in cell.get("outputs", []):
            assert WIDGET not in output.get("data", {}), cell.source  # no widget left: static renderings only
    run1, await1, run2, _, _, run3 = (_outputs_text(cells[i]) for i in range(2, 8))
    assert "The sum is five." in run1 and "Added 2 and 3" in run1 and "approval policy" not in run1
    assert "NBAGENT_APPROVAL=allow" in run1 or "read-only" in run1 or "allowed" in run1
    assert "The answer is forty-two." in run2 and "Added 40 and 2" in run2
    assert "Nothing to add." in run3
    # `await run1` says where the run is instead of showing it a second time
    assert "shown whole in the cell that started it (In [3])" in await1 and "Added 2 and 3" not in await1
    # the plain-text fallback is the run's text form
    plain = [o["data"]["text/plain"] for o in cells[2].outputs if "data" in o]
    assert plain and plain[0].startswith("nbagent run · scripted · default mode · done")

    markdown, _ = MarkdownExporter().from_notebook_node(nbformat.read(tmp_path / "stripped.ipynb", as_version=4))
    html, _ = HTMLExporter().from_notebook_node(nbformat.read(tmp_path / "stripped.ipynb", as_version=4))
    (tmp_path / "stripped.md").write_text(markdown)
    for text in (markdown, html):
        for expected in ("The sum is five.", "Added 2 and 3", "The answer is forty-two.", "Added 40 and 2",
                         "Nothing to add."):
            assert expected in text
        assert "Error displaying widget" not in text and "nbagent live view of" not in text
    # the stylesheet is saved once, not once per run (15 KB each): one output carries it for the page
    marker = "nbagent: how a run looks"
    assert sum(json.dumps(cell.get("outputs", [])).count(marker) for cell in cells) == 1
    assert marker in html
    # each answer sits in its own cell's part of the Markdown, before the next cell's code
    assert markdown.index("The sum is five.") < markdown.index("await run1")
    assert markdown.index("The answer is forty-two.") < markdown.index("await asyncio.sleep")


@pytest.fixture
def k(tmp_path):
    kernel = KernelSession(tmp_path)
    kernel.execute("%load_ext nbagent")
    kernel.execute('''
from nbagent import AssistantMessage, ScriptedModel, ToolCall, tool
from nbagent.jupyter import view, runs

@tool(destructive=True, describe_activity=lambda a: f"Deleting {a.path}")
def delete(path: str) -> str:
    """Delete a file."""
    return f"deleted {path}"

def deleting():
    return ScriptedModel([AssistantMessage(text="On it.", tool_calls=[ToolCall(name="delete", arguments={"path": "a"})]),
                          "Done."])
model = deleting()
''')
    yield kernel
    kernel.shutdown()
    shutil.rmtree(tmp_path, ignore_errors=True)


def _display_ids(out) -> list[str]:
    return [m["content"].get("transient", {}).get("display_id") for m in out]


def test_a_cell_run_again_while_its_run_waits_shows_that_run_again(k):
    cell = "run = %agent --model model --tools delete Please delete a."
    first = k.execute(cell, cell_id="cell-1")
    k.wait_for("len(view(run).pending) > 0")
    display_id = k.value("view(run).display_id")
    shown = [m for m in k.messages("display_data", first["reply"]["parent_header"]["msg_id"])]
    assert display_id in _display_ids(shown)

    again = k.execute(cell, cell_id="cell-1", check=False)  # the same cell, run again
    msg_id = again["reply"]["parent_header"]["msg_id"]
    reshown = k.messages("display_data", msg_id)
    assert display_id in _display_ids(reshown) and WIDGET in reshown[0]["content"]["data"]  # the live view again
    assert again["reply"]["content"]["status"] == "error"  # a UsageError: one line, on stderr
    assert "UsageError: not started: the run this cell started before is still going" in again["stdout"]
    assert k.value("run.status") == "waiting_for_approval"  # the same run, still reachable
    assert "waiting for your approval" in k.execute("print(repr(runs()))")["stdout"]

    listed = k.execute("%agent --runs")  # lists the live runs and shows their views
    assert display_id in _display_ids(k.messages("display_data", listed["reply"]["parent_header"]["msg_id"]))

    k.execute("view(run).pending[0].approve()")
    k.wait_for("run.done and view(run).ended")
    updates = [m for m in k.messages("update_display_data")
               if m["content"].get("transient", {}).get("display_id") == display_id]
    assert updates and "Done." in updates[-1]["content"]["data"]["text/html"]
    assert "approved by you" in updates[-1]["content"]["data"]["text/html"]
    assert "waiting for you" in updates[-1]["content"]["data"]["text/plain"]  # apart from the call's own time


def test_a_cell_run_again_with_new_keeps_the_old_run_and_starts_another(k):
    cell = "run = %agent --model model --new --tools delete Please delete a."
    k.execute(cell, cell_id="cell-2")
    k.wait_for("len(view(run).pending) > 0")
    k.execute("old = run\nmodel = deleting()")
    again = k.execute(cell, cell_id="cell-2")
    assert "its live view is shown again above. The new run follows." in again["stdout"]
    assert k.value("[old.status, run is old, len(runs())]") == ["waiting_for_approval", False, 2]
    k.execute("old.cancel(); run.cancel()")
    k.wait_for("old.done and run.done")


def test_a_kernel_shut_down_mid_run_leaves_no_view_claiming_to_run(k):
    k.execute("run = %agent --model model --tools delete Please delete a.")
    k.wait_for("len(view(run).pending) > 0")
    ids = k.value("[view(run).display_id, view(run)._head_info.model_id, view(run).stop_button.model_id]")
    display_id, head, stop = ids
    before = len(k.iopub)
    msg = k.kc.session.msg("shutdown_request", {"restart": True})  # what a restart sends the kernel
    k.kc.control_channel.send(msg)
    k.wait_iopub(lambda m: m["msg_type"] == "shutdown_reply", start=before)
    k.wait_iopub(lambda m: m["msg_type"] == "update_display_data", start=before)
    after = k.iopub[before:]
    update = [m for m in after if m["msg_type"] == "update_display_data"
              and m["content"]["transient"]["display_id"] == display_id]
    assert update, [m["msg_type"] for m in after]
    html = update[-1]["content"]["data"]["text/html"].split("</style>", 1)[1]
    text = update[-1]["content"]["data"]["text/plain"]
    assert "the kernel stopped while the run was going on" in html and "<span class=\"nba-spin\">" not in html
    assert "needs approval" not in html and "Approve" not in html
    assert "stopped" in text.splitlines()[0] and "running" not in text
    # the widgets' last state, for a frontend that keeps showing them: stopped, no spinner, no Stop button
    states = {}
    for m in after:
        if m["msg_type"] == "comm_msg" and m["content"]["data"].get("method") == "update":
            states.setdefault(m["content"]["comm_id"], {}).update(m["content"]["data"]["state"])
    assert "stopped" in states[head]["value"] and "<span class=\"nba-spin\">" not in states[head]["value"]
    assert "nba-stale" not in states[head]["value"]
    assert "layout" in states[stop]  # hidden
    assert json.dumps(states).count("nba-s-not_run") >= 1  # the call waiting for approval never ran


def test_pruning_keeps_the_state_of_widgets_an_output_still_shows_and_what_they_name():
    from nbagent.jupyter.headless import prune_widget_state

    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("slider")
    cell.outputs = [nbformat.v4.new_output("display_data", data={WIDGET: {"model_id": "aa01", "version_major": 2}})]
    nb.cells = [cell]
    state = {"aa01": {"state": {"layout": "IPY_MODEL_bb02", "children": ["IPY_MODEL_cc03"]}},
             "bb02": {"state": {}}, "cc03": {"state": {"style": "IPY_MODEL_dd04"}}, "dd04": {"state": {}},
             "ee05": {"state": {"value": "an ended run's view"}}, "ff06": {"state": {"layout": "IPY_MODEL_bb02"}}}
    nb.metadata["widgets"] = {"application/vnd.jupyter.widget-state+json": {"state": dict(state),
                                                                           "version_major": 2}}
    assert prune_widget_state(nb) == 2
    assert set(nb.metadata["widgets"]["application/vnd.jupyter.widget-state+json"]["state"]) == {
        "aa01", "bb02", "cc03", "dd04"}
    cell.outputs = []
    assert prune_widget_state(nb) == 4 and "widgets" not in nb.metadata
