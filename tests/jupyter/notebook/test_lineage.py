"""What the agent changed, in an IPython shell (no kernel): every tool that runs code records it, the names
only the kernel has, `%agent --to-cells` as reviewable insertions, and the provenance cells keep."""

from __future__ import annotations

import json

import pytest
from IPython.core.error import UsageError

from nbagent import Agent, AssistantMessage, ScriptedModel, ToolCall, render
from nbagent.jupyter import get_session, view
from nbagent.jupyter.notebook.comm import NotebookFrontend
from nbagent.jupyter.notebook.kernel_tools import kernel_runner, kernel_toolbox
from nbagent.toolbox import PythonRunner

from ..conftest import finish, run_cell, settle
from ..fake_frontend import FakeNotebook, InProcessComm


def connect(shell, cells: list[dict]) -> FakeNotebook:
    notebook = FakeNotebook(cells)

    def on_run(cell):  # the page runs the cell in the kernel: here, in the shell's namespace
        try:
            exec(cell["source"], shell.user_ns)
        except Exception as exc:
            return [{"output_type": "error", "ename": type(exc).__name__, "evalue": str(exc), "traceback": []}], "error"
        return [], "ok"

    notebook.on_run = on_run
    fake = InProcessComm(notebook)
    shell._nbagent_frontend = NotebookFrontend(opener=fake.opener)
    shell.__dict__.pop("_nbagent_notebook", None)
    return notebook


def script(*calls: tuple[str, dict]) -> ScriptedModel:
    return ScriptedModel([AssistantMessage(tool_calls=[ToolCall(id=f"c{i}", name=n, arguments=a)])
                          for i, (n, a) in enumerate(calls)] + ["Done."])


async def agent(shell, model, cell_id="ask", options="--mode bypassPermissions"):
    shell.user_ns["model"] = model
    await run_cell(shell, f"run = %agent --new --model model {options} go", cell_id=cell_id)
    run = shell.user_ns["run"]
    await finish(run)
    return run


CODE_TOOLS = {"python": {"code": "made = [1]\nmade.append(2)"},
              "run_cell": {"cell_id": "c", "code": "made = [1]\nmade.append(2)"}}
OUTSIDE_THE_KERNEL = {"shell": "a program in a process of its own: the kernel's names are out of its reach"}


@pytest.mark.parametrize("watching", [True, False])
async def test_every_tool_that_runs_code_records_what_it_did(shell, monkeypatch, watching):
    """Decided by kind: every built-in tool that runs code in the kernel (badge "runs code") must record its
    state change; with the watch turned off, the check fails for each of them."""
    connect(shell, [{"id": "c", "source": CODE_TOOLS["run_cell"]["code"]}])
    tools = [t for t in kernel_toolbox(shell) if getattr(t, "badge", None) == "runs code"]
    # a new tool that runs code must be put in one of the two, and then records what it did or says why not
    assert sorted(t.name for t in tools) == sorted([*CODE_TOOLS, *OUTSIDE_THE_KERNEL])
    if not watching:
        monkeypatch.setattr(PythonRunner, "watch_state", False)
        from nbagent.jupyter.notebook import cells

        async def no_watch(*args, **kwargs):
            return None

        monkeypatch.setattr(cells, "_watch", no_watch)
    for name, arguments in CODE_TOOLS.items():
        shell.user_ns.pop("made", None)
        run = await Agent(model=script((name, arguments)), tools=tools, mode="bypassPermissions").run("go")
        rec = run.calls[0]
        assert rec.status == "ok", rec.result.text
        recorded = rec.state_change is not None and rec.state_change.assigned == ("made",)
        assert recorded is watching, (name, rec.state_change)


async def test_kernel_only_knows_the_cells_that_ran_and_the_saved_file(shell, tmp_path):
    await run_cell(shell, "base = 10")
    saved = {"cells": [{"cell_type": "code", "id": "s", "metadata": {}, "execution_count": None, "outputs": [],
                        "source": "from_file = 1"}], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    (tmp_path / "nb.ipynb").write_text(json.dumps(saved))
    shell.run_line_magic("config", f"NBAgent.notebook_path = {str(tmp_path / 'nb.ipynb')!r}")
    run = await agent(shell, script(("python", {"code": "base = base + 1\nfrom_file = 2\nonly_here = base * 2"})))
    assert run.kernel_only == ["only_here"]
    assert "1 name exists only in the kernel: only_here" in render.run_text(run)
    assert "%agent --to-cells" in render.run_html(run)
    await run_cell(shell, "only_here = 5")  # now a cell defines it
    assert run.kernel_only == []
    assert "nba-kernel-only" not in render.header_html(run)  # nothing to say


async def test_the_header_says_nothing_while_the_run_goes_on(shell):
    model = ScriptedModel([AssistantMessage(tool_calls=[ToolCall(id="a", name="python", arguments={"code": "x = 1"})]),
                           "Done."], delay=0.05)
    shell.user_ns["model"] = model
    await run_cell(shell, "run = %agent --new --model model --mode bypassPermissions go")
    run = shell.user_ns["run"]
    await settle(lambda: run.calls and run.calls[0].done)
    assert "nba-kernel-only" not in render.header_html(run)
    await finish(run)
    assert "nba-kernel-only" in render.header_html(run)


async def test_cells_written_by_the_agent_carry_the_model(shell):
    nb = connect(shell, [{"id": "a", "source": "x = 1"}])
    run = await agent(shell, script(("insert_cell", {"source": "y = 2", "after": "a"})))
    assert run.calls[0].status == "ok", run.calls[0].result.text
    assert nb.cells[1]["metadata"]["nbagent"] == {"run": run.id, "call": "c0", "action": "inserted",
                                                  "model": "scripted"}


async def test_to_cells_inserts_each_cell_as_a_reviewable_change_and_nothing_runs(shell):
    nb = connect(shell, [{"id": "ask", "source": "run = %agent go"}, {"id": "later", "source": "use(df)"}])
    run = await agent(shell, script(("python", {"code": "df = [3, 1, 2]"}), ("python", {"code": "print(df)"}),
                                    ("python", {"code": "df.sort()"})))
    decisions = []

    def approver(request):  # the person: Accept the first, Reject the second
        decisions.append((request.name, request.arguments["source"]))
        return len(decisions) == 1

    get_session(shell).config.approver = approver
    await run_cell(shell, "cells_run = %agent --to-cells", cell_id="tocells")
    cells_run = shell.user_ns["cells_run"]
    await finish(cells_run)
    assert [name for name, _ in decisions] == ["insert_cell", "insert_cell"]
    assert [c.status for c in cells_run.calls] == ["ok", "denied"]
    assert [c["id"] for c in nb.cells][0] == "ask" and nb.cells[1]["source"].endswith("\ndf = [3, 1, 2]")
    assert nb.cells[2]["id"] == "later"  # the rejected cell was not inserted; the rest stays below
    mark = nb.cells[1]["metadata"]["nbagent"]
    assert mark["action"] == "recreated" and mark["run"] == run.id and mark["calls"] == ["c0"]
    assert mark["inserted_by"] == {"run": cells_run.id, "call": cells_run.calls[0].id}
    assert "Inserted 1 of 2 cells (1 rejected)" in cells_run.output
    assert shell.user_ns["df"] == [1, 2, 3]  # nothing ran again
    assert get_session(shell).stored.last is run  # the next %agent continues the conversation, not this
    assert view(cells_run) is not None


async def test_a_model_cannot_claim_a_recreated_provenance(shell):
    nb = connect(shell, [{"id": "ask", "source": ""}])
    run = await agent(shell, script(("python", {"code": "a = 1"})))
    source = run.to_cells()[0]["source"]
    get_session(shell).config.approver = "allow"
    await run_cell(shell, "cells_run = %agent --to-cells", cell_id="tocells")
    await finish(shell.user_ns["cells_run"])
    # another run's model inserts the very same source: its cell says it was inserted, by that run
    other = await agent(shell, script(("insert_cell", {"source": source})))
    marks = [c["metadata"]["nbagent"] for c in nb.cells[1:]]
    assert marks[0]["action"] == "recreated"
    assert marks[1] == {"run": other.id, "call": "c0", "action": "inserted", "model": "scripted"}


async def test_to_cells_mistakes_are_usage_errors(shell):
    with pytest.raises(UsageError, match="no %agent run of this kernel has run code"):
        shell.run_line_magic("agent", "--to-cells")
    with pytest.raises(UsageError, match="no %agent run of this kernel has that name or id"):
        shell.run_line_magic("agent", "--to-cells nosuchrun")
    with pytest.raises(UsageError, match="two steps"):
        shell.run_line_magic("agent", "--to-cells --check")


async def test_check_needs_a_notebook_file(shell):
    with pytest.raises(UsageError, match="notebook's file is not known"):
        shell.run_line_magic("agent", "--check")


def test_the_insert_preview_shows_hidden_characters_of_the_code():
    from nbagent.jupyter.notebook.tools import _insert_diff
    from nbagent.render.results import diff_html

    preview = diff_html(_insert_diff(type("S", (), {"name": lambda self, c: "[1] x"})(), "ok = 'a\u202eb'", "code",
                                     "a"))
    assert "U+202E" in preview and "\u202e" not in preview


def test_kernel_runner_watches_the_shells_namespace(shell):
    runner = kernel_runner(shell)
    execution = runner.run("%time watched = 1")
    assert execution.state_change.assigned == ("watched",)
