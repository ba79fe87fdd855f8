"""The notebook tools in-process, against a notebook kept in Python that answers the comm protocol as the
frontend part does (tests/jupyter/fake_frontend.py): reading the live cells, edits behind approval, the
checks that keep the user's text, the frontend going away, no frontend at all, python_in_cells."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from IPython.core.interactiveshell import InteractiveShell

from nbagent import Agent, AssistantMessage, ScriptedModel, ToolCall, render
from nbagent.jupyter.notebook import comm as notebook_comm
from nbagent.jupyter.notebook.comm import NotebookFrontend
from nbagent.jupyter.notebook.kernel_tools import kernel_toolbox
from nbagent.jupyter.notebook.tools import CellChange, CellRun, cells_of, summarize_output

from ..fake_frontend import FakeNotebook, InProcessComm

FRAME_HTML = ('<div><table border="1" class="dataframe"><thead><tr><th></th><th>a</th></tr></thead>'
              '<tbody><tr><th>0</th><td>1</td></tr></tbody></table><p>1000 rows × 20 columns</p></div>')


@pytest.fixture
def shell(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    ip = InteractiveShell.instance()
    ip.reset(new_session=True)
    for name in ("_nbagent_frontend", "_nbagent_notebook", "_nbagent_session"):
        ip.__dict__.pop(name, None)
    yield ip
    for name in ("_nbagent_frontend", "_nbagent_notebook", "_nbagent_session"):
        ip.__dict__.pop(name, None)
    ip.reset(new_session=True)


def cells() -> list[dict]:
    return [
        {"id": "intro", "cell_type": "markdown", "source": "# Sales"},
        {"id": "load", "source": "df = load()\ndf", "execution_count": 1,
         "outputs": [{"output_type": "execute_result", "execution_count": 1,
                      "data": {"text/html": FRAME_HTML, "text/plain": "   a\n0  1"}}]},
        {"id": "plot", "source": "df.plot()", "execution_count": 2,
         "outputs": [{"output_type": "display_data", "data": {"image/png": None, "text/plain": "<Figure size 640x480>"}}]},
        {"id": "broken", "source": "1/0", "execution_count": 3,
         "outputs": [{"output_type": "error", "ename": "ZeroDivisionError", "evalue": "division by zero",
                      "traceback": ["\x1b[31m---------\x1b[0m", "Cell In[3], line 1", "----> 1 1/0",
                                    "ZeroDivisionError: division by zero"]}]},
        {"id": "typed", "source": "total = df.revenue.sum()  # typed, never run"},
    ]


def connect(shell, notebook: FakeNotebook | None, **options) -> InProcessComm:
    fake = InProcessComm(notebook, **options)
    shell._nbagent_frontend = NotebookFrontend(opener=fake.opener)
    return fake


def tools_of(shell) -> list:
    return kernel_toolbox(shell, Path.cwd())


async def agent_run(shell, *calls: ToolCall, mode: str = "bypassPermissions", approver=None):
    model = ScriptedModel([AssistantMessage(tool_calls=[c]) for c in calls] + ["done"])
    agent = Agent(model=model, tools=tools_of(shell), mode=mode, approver=approver)
    return await agent.run("go")


# -- reading --------------------------------------------------------------------------------------------------
async def test_read_notebook_sees_unsaved_cells_and_summarises_outputs(shell) -> None:
    connect(shell, FakeNotebook(cells()))
    run = await agent_run(shell, ToolCall(name="read_notebook", arguments={}))
    rec = run.calls[0]
    assert rec.status == "ok", rec.result.text
    text = rec.result.text
    assert "live, unsaved edits included" in text and "5 cells" in text
    assert 'id "typed"' in text and "total = df.revenue.sum()  # typed, never run" in text and "not run" in text
    assert "a DataFrame 1000 x 20" in text
    assert "an image (image/png)" in text
    assert "ZeroDivisionError: division by zero" in text and "----> 1 1/0" in text
    assert "\x1b" not in text
    assert rec.decision.source == "read_only"
    assert [c.id for c in rec.details.cells] == ["intro", "load", "plot", "broken", "typed"]


async def test_read_one_cell_a_range_and_a_missing_id(shell) -> None:
    connect(shell, FakeNotebook(cells()))
    run = await agent_run(shell, ToolCall(name="read_notebook", arguments={"cell_id": "broken"}),
                          ToolCall(name="read_notebook", arguments={"start": 2, "end": 3}),
                          ToolCall(name="read_notebook", arguments={"cell_id": "nope"}))
    one, span, missing = run.calls
    assert [c.id for c in one.details.cells] == ["broken"] and "showing 1" in one.result.text
    assert [c.id for c in span.details.cells] == ["load", "plot"]
    assert missing.status == "error" and 'no cell with id "nope"' in missing.result.text and '"typed"' in missing.result.text


def test_summaries_are_bounded() -> None:
    long = {"output_type": "stream", "name": "stdout", "text": "x" * 100_000}
    assert len(summarize_output(long)) < 4000
    assert summarize_output({"output_type": "display_data", "data": {"application/vnd.jupyter.widget-view+json": {}}}
                            ) == "[display] a widget"
    import pandas as pd

    frame = pd.DataFrame({"a": range(1000), "b": range(1000)})
    out = {"output_type": "execute_result", "data": {"text/plain": repr(frame)}}
    assert summarize_output(out, frame).startswith("[out] a DataFrame 1000 x 2")


# -- editing ----------------------------------------------------------------------------------------------------
async def test_insert_asks_in_default_mode_and_shows_where(shell) -> None:
    nb = FakeNotebook(cells())
    connect(shell, nb)
    asked = []

    def approver(request):
        asked.append(request)
        html = render.call_inner_html(request.call, waiting=True)
        assert "nba-diff" in html and "+print(df.shape)" in html and "after [1] df = load()" in html
        return True

    run = await agent_run(shell, ToolCall(name="read_notebook", arguments={}),
                          ToolCall(name="insert_cell", arguments={"source": "print(df.shape)", "after": "load"}),
                          mode="default", approver=approver)
    assert [r.name for r in asked] == ["insert_cell"]
    rec = run.calls[1]
    assert rec.status == "ok", rec.result.text
    assert [c["id"] for c in nb.cells][:3] == ["intro", "load", rec.details.cell_id]
    assert nb.cells[2]["source"] == "print(df.shape)"
    mark = nb.cells[2]["metadata"]["nbagent"]
    assert mark["action"] == "inserted" and mark["call"] == rec.id and mark["run"]
    assert cells_of(run) == [rec.details] and isinstance(rec.details, CellChange)
    html = render.result_html(rec.result, index=1)
    assert f'href="#nbagent-cell={rec.details.cell_id}"' in html


async def test_accept_edits_allows_cell_edits_without_asking_but_not_run_cell(shell) -> None:
    nb = FakeNotebook(cells())
    connect(shell, nb)
    asked = []
    run = await agent_run(shell, ToolCall(name="read_notebook", arguments={}),
                          ToolCall(name="edit_cell", arguments={"cell_id": "typed", "old": "revenue", "new": "sales"}),
                          ToolCall(name="run_cell", arguments={"cell_id": "typed"}),
                          mode="acceptEdits", approver=lambda r: asked.append(r.name) or False)
    assert asked == ["run_cell"]
    edit, ran = run.calls[1], run.calls[2]
    assert edit.status == "ok" and nb.cell("typed")["source"] == "total = df.sales.sum()  # typed, never run"
    assert "-total = df.revenue.sum()" in edit.result.text and "+total = df.sales.sum()" in edit.result.text
    assert ran.status == "denied" and nb.cell("typed")["execution_count"] is None


async def test_edit_refused_when_the_user_changed_the_cell_meanwhile(shell) -> None:
    nb = FakeNotebook(cells())
    connect(shell, nb)

    def user_types_then_approves(request):
        nb.cell("typed")["source"] = "total = df.revenue.sum()  # the user's own change"
        return True

    run = await agent_run(shell, ToolCall(name="read_notebook", arguments={}),
                          ToolCall(name="edit_cell", arguments={"cell_id": "typed", "old": "revenue", "new": "sales"}),
                          mode="default", approver=user_types_then_approves)
    rec = run.calls[1]
    assert rec.status == "error" and "changed since you last read it" in rec.result.text
    assert nb.cell("typed")["source"] == "total = df.revenue.sum()  # the user's own change"


async def test_edit_needs_a_read_a_known_id_and_old_text_that_is_there(shell) -> None:
    nb = FakeNotebook(cells())
    connect(shell, nb)
    run = await agent_run(shell,
                          ToolCall(name="edit_cell", arguments={"cell_id": "typed", "old": "revenue", "new": "x"}),
                          ToolCall(name="read_notebook", arguments={}),
                          ToolCall(name="edit_cell", arguments={"cell_id": "typed", "old": "profit", "new": "x"}),
                          ToolCall(name="edit_cell", arguments={"cell_id": "ghost", "old": "a", "new": "b"}),
                          ToolCall(name="delete_cell", arguments={"cell_id": "ghost"}),
                          ToolCall(name="insert_cell", arguments={"source": "x", "after": "ghost"}))
    unread, absent, ghost, ghost_delete, ghost_insert = [run.calls[i] for i in (0, 2, 3, 4, 5)]
    assert unread.status == "error" and "Read cell" in unread.result.text
    assert absent.status == "error" and "does not occur" in absent.result.text
    assert ghost.status == "error" and ghost_delete.status == "error" and ghost_insert.status == "error"
    assert "no cell with id" in ghost_insert.result.text
    assert [c["source"] for c in nb.cells] == [c["source"] for c in cells()]


async def test_delete_a_cell_that_was_read(shell) -> None:
    nb = FakeNotebook(cells())
    connect(shell, nb)
    run = await agent_run(shell, ToolCall(name="read_notebook", arguments={"cell_id": "broken"}),
                          ToolCall(name="delete_cell", arguments={"cell_id": "broken"}))
    assert run.calls[1].status == "ok" and "broken" not in [c["id"] for c in nb.cells]
    assert "-1/0" in run.calls[1].details.diff


async def test_denied_edit_changes_nothing(shell) -> None:
    nb = FakeNotebook(cells())
    connect(shell, nb)
    run = await agent_run(shell, ToolCall(name="read_notebook", arguments={}),
                          ToolCall(name="edit_cell", arguments={"cell_id": "typed", "old": "revenue", "new": "x"}),
                          mode="default", approver=lambda r: False)
    assert run.calls[1].status == "denied"
    assert not [r for r in nb.requests if r["op"] == "edit"]
    assert nb.cell("typed")["source"] == cells()[4]["source"]


# -- running ----------------------------------------------------------------------------------------------------
async def test_run_cell_returns_the_output_and_the_live_value(shell) -> None:
    nb = FakeNotebook(cells())
    connect(shell, nb)
    value = {"rows": 3}

    def on_run(cell):
        shell.user_ns.setdefault("Out", {})[1] = value
        return [{"output_type": "stream", "name": "stdout", "text": "hello\n"},
                {"output_type": "execute_result", "execution_count": 1, "data": {"text/plain": "{'rows': 3}"}}], "ok"

    nb.on_run = on_run
    run = await agent_run(shell, ToolCall(name="read_notebook", arguments={"cell_id": "typed"}),
                          ToolCall(name="run_cell", arguments={"cell_id": "typed"}))
    rec = run.calls[1]
    assert rec.status == "ok" and isinstance(rec.details, CellRun), rec.result.text
    assert "[stdout] hello" in rec.result.text and "{'rows': 3}" in rec.result.text
    assert rec.details.value is value and rec.details.execution_count == 1


async def test_python_in_cells_writes_the_code_as_a_cell_and_runs_it(shell) -> None:
    shell.run_line_magic("load_ext", "nbagent")
    try:
        shell.run_line_magic("config", "NBAgent.python_in_cells = True")
        nb = FakeNotebook(cells())
        connect(shell, nb)
        run = await agent_run(shell, ToolCall(name="python", arguments={"code": "x = 1"}),
                              ToolCall(name="python", arguments={"code": "x + 1"}))
        first, second = run.calls
        assert first.status == "ok" and isinstance(first.details, CellRun), first.result.text
        ids = [c["id"] for c in nb.cells]
        assert ids[-2:] == [first.details.cell_id, second.details.cell_id]  # the second after the first
        assert nb.cells[-1]["source"] == "x + 1" and nb.cells[-1]["metadata"]["nbagent"]["action"] == "python"
        shell.run_line_magic("config", "NBAgent.python_in_cells = False")
        run = await agent_run(shell, ToolCall(name="python", arguments={"code": "40 + 2"}))
        assert run.calls[0].details == 42 and len(nb.cells) == len(ids)
    finally:
        shell.run_line_magic("unload_ext", "nbagent")


# -- no frontend, a frontend that goes away ----------------------------------------------------------------------------
async def test_no_frontend_reads_the_saved_file_and_refuses_edits_quickly(shell, tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(notebook_comm, "HELLO_TIMEOUT", 0.3)
    saved = {"cells": [{"cell_type": "code", "id": "s1", "source": ["a = 1\n", "a"], "metadata": {},
                        "execution_count": 4, "outputs": [{"output_type": "execute_result", "execution_count": 4,
                                                           "data": {"text/plain": "1"}, "metadata": {}}]}],
             "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    (tmp_path / "saved.ipynb").write_text(json.dumps(saved))
    monkeypatch.setenv("JPY_SESSION_NAME", str(tmp_path / "saved.ipynb"))
    fake = connect(shell, None, silent=True)
    run = await agent_run(shell, ToolCall(name="read_notebook", arguments={}),
                          ToolCall(name="insert_cell", arguments={"source": "b = 2"}),
                          ToolCall(name="run_cell", arguments={"cell_id": "s1"}))
    read, insert, ran = run.calls
    assert read.status == "ok" and "saved file" in read.result.text and "a = 1\na" in read.result.text
    assert "[out] 1" in read.result.text
    assert insert.status == "error" and "nothing was changed" in insert.result.text
    assert "headless" in insert.result.text
    assert ran.status == "error" and "was not run" in ran.result.text
    assert fake.closed


async def test_notebook_closed_mid_edit(shell) -> None:
    nb = FakeNotebook(cells())
    connect(shell, nb, close_on="edit")
    run = await agent_run(shell, ToolCall(name="read_notebook", arguments={}),
                          ToolCall(name="edit_cell", arguments={"cell_id": "typed", "old": "revenue", "new": "x"}))
    rec = run.calls[1]
    assert rec.status == "error" and "went away" in rec.result.text, rec.result.text
    assert nb.cell("typed")["source"] == cells()[4]["source"]


async def test_run_cell_while_a_cell_runs_says_why_instead_of_waiting(shell) -> None:
    nb = FakeNotebook(cells())
    connect(shell, nb)
    from nbagent.jupyter.notebook.tools import notebook_state

    notebook_state(shell).running_cells = 1  # the cell that awaits this run (--wait)
    try:
        run = await agent_run(shell, ToolCall(name="run_cell", arguments={"cell_id": "typed",
                                                                          "code": cells()[4]["source"]}))
    finally:
        notebook_state(shell).running_cells = 0
    rec = run.calls[0]
    assert rec.status == "error" and "a cell of this notebook is running" in rec.result.text
    assert not [r for r in nb.requests if r["op"] == "run"]


async def test_run_cell_gives_up_when_the_notebook_never_starts_the_cell(shell, monkeypatch) -> None:
    from nbagent.jupyter.notebook import cells as notebook_cells

    monkeypatch.setattr(notebook_cells, "RUN_START_TIMEOUT", 0.5)
    nb = FakeNotebook(cells())
    fake = connect(shell, nb)
    real = nb.answer
    nb.answer = lambda data: None if data["op"] == "run" else real(data)  # the page went silent
    original_later = fake._later

    def later(data):
        if data.get("op") != "run":
            original_later(data)

    fake._later = later
    run = await agent_run(shell, ToolCall(name="run_cell", arguments={"cell_id": "typed",
                                                                      "code": cells()[4]["source"]}))
    rec = run.calls[0]
    assert rec.status == "error" and "did not start the cell" in rec.result.text


# -- run_cell runs exactly the code that was shown ---------------------------------------------------------------------
async def test_run_cell_of_a_cell_never_read_shows_its_code_and_runs_nothing(shell) -> None:
    nb = FakeNotebook(cells())
    connect(shell, nb)
    asked = []
    run = await agent_run(shell, ToolCall(name="run_cell", arguments={"cell_id": "typed"}),
                          ToolCall(name="run_cell", arguments={"cell_id": "typed"}),
                          mode="default", approver=lambda r: asked.append(dict(r.arguments)) or True)
    first, second = run.calls
    assert first.status == "error" and "had not read it" in first.result.text
    assert cells()[4]["source"] in first.result.text  # the model learns what the cell holds
    assert len([r for r in nb.requests if r["op"] == "run"]) == 1  # only the second call ran the cell
    assert second.status == "ok", second.result.text
    assert asked[-1]["code"] == cells()[4]["source"]  # the second call was approved as exactly that code


async def test_run_cell_approval_shows_the_code_and_a_change_meanwhile_runs_nothing(shell) -> None:
    nb = FakeNotebook(cells())
    connect(shell, nb)
    shown = []

    def approver(request):
        shown.append(dict(request.arguments))
        nb.cell("typed")["source"] = "import os; os.remove('everything')"  # changed while the question waited
        return True

    run = await agent_run(shell, ToolCall(name="read_notebook", arguments={}),
                          ToolCall(name="run_cell", arguments={"cell_id": "typed"}), mode="default",
                          approver=approver)
    rec = run.calls[1]
    assert shown == [{"cell_id": "typed", "code": cells()[4]["source"]}]
    preview = rec.tool.preview(rec.arguments)
    assert cells()[4]["source"] in preview  # the approval's picture: the code itself, not a cell id
    assert rec.status == "error" and "changed since you last read it" in rec.result.text
    assert nb.cell("typed")["execution_count"] is None  # nothing ran
    runs = [r for r in nb.requests if r["op"] == "run"]
    assert runs and runs[0]["expected"] == cells()[4]["source"]  # the page is told the approved code


async def test_run_cell_after_an_unasked_edit_asks_about_the_edited_code(shell) -> None:
    nb = FakeNotebook(cells())
    connect(shell, nb)
    shown = []
    run = await agent_run(shell, ToolCall(name="read_notebook", arguments={}),
                          ToolCall(name="edit_cell", arguments={"cell_id": "typed", "old": "df.revenue.sum()",
                                                                "new": "__import__('os').getcwd()"}),
                          ToolCall(name="run_cell", arguments={"cell_id": "typed"}),
                          mode="acceptEdits", approver=lambda r: shown.append(r.arguments["code"]) or True)
    assert run.calls[1].status == "ok" and run.calls[2].status == "ok", run.calls[2].result.text
    assert shown == ["total = __import__('os').getcwd()  # typed, never run"]


async def test_run_cell_pinning_is_what_stops_a_changed_cell(shell, monkeypatch) -> None:
    """The defence turned off (the approved code not sent to the page): the changed cell runs."""
    from nbagent.jupyter.notebook import tools as notebook_tools

    real = notebook_tools.run_cell_in_notebook
    monkeypatch.setattr(notebook_tools, "run_cell_in_notebook",
                        lambda state, cell_id, ctx, **kw: real(state, cell_id, ctx, **{**kw, "expected": None}))
    nb = FakeNotebook(cells())
    connect(shell, nb)

    def approver(request):
        nb.cell("typed")["source"] = "changed()"
        return True

    run = await agent_run(shell, ToolCall(name="read_notebook", arguments={}),
                          ToolCall(name="run_cell", arguments={"cell_id": "typed"}), mode="default",
                          approver=approver)
    assert run.calls[1].status == "ok" and nb.cell("typed")["execution_count"] == 1


# -- cells named as the person sees them; stale edits refused before anyone is asked ---------------------------------
async def test_rows_and_diffs_name_cells_as_the_person_sees_them(shell) -> None:
    nb = FakeNotebook(cells())
    connect(shell, nb)
    run = await agent_run(shell, ToolCall(name="read_notebook", arguments={}),
                          ToolCall(name="edit_cell", arguments={"cell_id": "broken", "old": "1/0", "new": "1/1"}),
                          ToolCall(name="edit_cell", arguments={"cell_id": "typed", "old": "revenue", "new": "sales"}))
    broken, typed = run.calls[1], run.calls[2]
    assert broken.label == "Edited [3] 1/0" and "[3] 1/0 (before)" in broken.details.diff
    assert typed.label.startswith("Edited cell 5 total = df.revenue.sum()")  # never run: its place
    page = render.call_inner_html(broken, index=1)
    assert "[3] 1/0 ↗" in page and '"broken"' not in page  # no id in what the person reads


@pytest.mark.parametrize("guarded", [True, False])
async def test_an_edit_of_a_cell_changed_meanwhile_is_refused_before_the_approval(shell, guarded) -> None:
    from nbagent import Hooks
    from nbagent.jupyter.notebook.tools import stale_guard

    nb = FakeNotebook(cells())
    connect(shell, nb)
    asked = []

    def read_then_type(call, ctx):  # the person types in the cell after the agent read it
        if call.name == "edit_cell":
            nb.cell("typed")["source"] = "total = my_own_work()"

    model = ScriptedModel([AssistantMessage(tool_calls=[ToolCall(name="read_notebook", arguments={})]),
                           AssistantMessage(tool_calls=[ToolCall(name="edit_cell", arguments={
                               "cell_id": "typed", "old": "revenue", "new": "sales"})]), "done"])
    agent = Agent(model=model, tools=tools_of(shell), mode="default", approver=lambda r: asked.append(r) or True,
                  hooks=Hooks(before_tool_call=[read_then_type] + ([stale_guard(shell)] if guarded else [])))
    run = await agent.run("go")
    rec = run.calls[1]
    if not guarded:  # the defence off: the person is asked, and the page refuses only after the click
        assert len(asked) == 1 and rec.status == "error" and "changed since you last read it" in rec.result.text
        return
    assert asked == [] and rec.status == "blocked"  # nobody was asked to approve a stale edit
    assert "changed since you last read it" in rec.result.text
    assert nb.cell("typed")["source"] == "total = my_own_work()"
    assert not [r for r in nb.requests if r["op"] == "edit"]


async def test_the_notebook_front_guards_its_agents_against_stale_edits(shell) -> None:
    from nbagent.jupyter.session.resolve import RunOptions

    shell.run_line_magic("load_ext", "nbagent")
    try:
        shell.user_ns["m"] = ScriptedModel(["done"])
        agent = shell._nbagent_session.agents.agent(RunOptions(model="m"))
        assert [h.__name__ for h in agent.hooks.before_tool_call] == ["refuse_stale"]
    finally:
        shell.run_line_magic("unload_ext", "nbagent")


async def test_the_front_pins_the_code_of_a_cell_never_read_and_asks_about_it(shell) -> None:
    from nbagent import Hooks
    from nbagent.jupyter.notebook.tools import stale_guard

    nb = FakeNotebook(cells())
    connect(shell, nb)
    shown = []
    model = ScriptedModel([AssistantMessage(tool_calls=[ToolCall(name="run_cell", arguments={"cell_id": "typed"})]),
                           "done"])
    agent = Agent(model=model, tools=tools_of(shell), mode="default",
                  approver=lambda r: shown.append(r.arguments["code"]) or True,
                  hooks=Hooks(before_tool_call=[stale_guard(shell)]))
    run = await agent.run("go")
    assert shown == [cells()[4]["source"]] and run.calls[0].status == "ok", run.calls[0].result.text


@pytest.mark.parametrize("guarded", [True, False])
@pytest.mark.parametrize("call", [
    ToolCall(name="edit_cell", arguments={"cell_id": "typed", "old": "revenue", "new": "sales"}),  # never read
    ToolCall(name="delete_cell", arguments={"cell_id": "typed"}),  # never read
])
async def test_a_change_that_cannot_apply_is_refused_before_the_approval(shell, guarded, call) -> None:
    from nbagent import Hooks
    from nbagent.jupyter.notebook.tools import stale_guard

    nb = FakeNotebook(cells())
    connect(shell, nb)
    asked = []
    model = ScriptedModel([AssistantMessage(tool_calls=[call]), "done"])
    agent = Agent(model=model, tools=tools_of(shell), mode="default", approver=lambda r: asked.append(r) or True,
                  hooks=Hooks(before_tool_call=[stale_guard(shell)] if guarded else []))
    run = await agent.run("go")
    rec = run.calls[0]
    assert 'Read cell "typed" first' in rec.result.text and nb.cell("typed")["source"] == cells()[4]["source"]
    if guarded:
        assert asked == [] and rec.status == "blocked" and "nothing was asked or done" in rec.result.text
    else:  # the guard off: the person is asked for a change that then fails
        assert len(asked) == 1 and rec.status == "error"


async def test_an_edit_whose_old_text_is_not_in_the_cell_read_is_refused_before_the_approval(shell) -> None:
    from nbagent import Hooks
    from nbagent.jupyter.notebook.tools import stale_guard

    nb = FakeNotebook(cells())
    connect(shell, nb)
    asked = []
    model = ScriptedModel([
        AssistantMessage(tool_calls=[ToolCall(name="read_notebook", arguments={})]),
        AssistantMessage(tool_calls=[ToolCall(name="edit_cell", arguments={"cell_id": "typed", "old": "nowhere",
                                                                           "new": "x"})]),
        AssistantMessage(tool_calls=[ToolCall(name="edit_cell", arguments={"cell_id": "typed", "old": "revenue",
                                                                           "new": "sales"})]),
        "done"])
    agent = Agent(model=model, tools=tools_of(shell), mode="default", approver=lambda r: asked.append(r) or True,
                  hooks=Hooks(before_tool_call=[stale_guard(shell)]))
    run = await agent.run("go")
    assert run.calls[1].status == "blocked" and "old does not occur" in run.calls[1].result.text
    assert run.calls[2].status == "ok" and len(asked) == 1  # only the edit that could apply was asked about
