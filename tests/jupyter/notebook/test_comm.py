"""The `nbagent.notebook` comm in a real kernel, against a frontend played by the test over jupyter_client
(tests/jupyter/fake_frontend.py): the protocol end to end, a frontend that closes the comm mid-call, no
frontend at all; and the notebook tools headless under nbclient (the saved file is read, edits are refused
with a reason, nothing hangs)."""

from __future__ import annotations

import json
import os

import pytest

from ..fake_frontend import FakeNotebook, KernelFrontend
from ..kernelclient import KernelSession, kernel_env

pytestmark = pytest.mark.kernel

SCRIPT = '''from nbagent import Agent, AssistantMessage, ScriptedModel, ToolCall
from nbagent.jupyter.notebook.kernel_tools import kernel_toolbox

def calls(*pairs):
    return ScriptedModel([AssistantMessage(tool_calls=[ToolCall(name=n, arguments=a)]) for n, a in pairs] + ["done"])

async def go(*pairs, mode="bypassPermissions"):
    agent = Agent(model=calls(*pairs), tools=kernel_toolbox(get_ipython()), mode=mode)
    return await agent.run("go")
'''


@pytest.fixture
def session(tmp_path):
    k = KernelSession(tmp_path)
    k.execute(SCRIPT)
    yield k
    k.shutdown()


def cells() -> list[dict]:
    return [{"id": "a", "source": "x = 1", "execution_count": 1, "outputs": []},
            {"id": "b", "source": "y = x + 1  # typed, not run"}]


def result_texts(session: KernelSession, expression: str = "run") -> list[list]:
    return session.value(f"[[c.name, c.status, c.result.text] for c in {expression}.calls]")


def test_the_protocol_end_to_end_in_a_real_kernel(session) -> None:
    nb = FakeNotebook(cells())
    fe = KernelFrontend(session, nb)
    try:
        session.execute('run = await go(("read_notebook", {}), '
                        '("insert_cell", {"source": "print(y)", "after": "b"}), '
                        '("edit_cell", {"cell_id": "b", "old": "x + 1", "new": "x + 2"}))', timeout=60)
        (read, r1, t1), (ins, r2, t2), (edit, r3, t3) = result_texts(session)
        assert (r1, r2, r3) == ("ok", "ok", "ok"), (t1, t2, t3)
        assert "y = x + 1  # typed, not run" in t1
        assert [c["source"] for c in nb.cells] == ["x = 1", "y = x + 2  # typed, not run", "print(y)"]
        ops = [r["op"] for r in nb.requests]
        assert ops == ["hello", "read", "insert", "edit"]
        # the hello tells the page the class this kernel's code blocks carry: only those get Copy / Insert
        mark = session.value("__import__('nbagent.render.markdown').render.markdown.LIVE_MARK")
        assert nb.requests[0]["mark"] == mark and mark.startswith("nba-live-")
        assert all(r.get("client") == nb.client for r in nb.requests[1:])
    finally:
        fe.stop()


def test_run_cell_result_carries_the_live_value(session) -> None:
    nb = FakeNotebook(cells())

    def on_run(cell):  # the frontend ran it: the kernel has Out[7]
        session_value = {"output_type": "execute_result", "execution_count": 7, "data": {"text/plain": "[1, 2]"}}
        return [session_value], "ok"

    nb.on_run = on_run
    nb._count = 6  # the frontend's run is the kernel's 7th execution
    fe = KernelFrontend(session, nb)
    try:
        session.execute("Out[7] = [1, 2]")
        session.execute('run = await go(("read_notebook", {}), ("run_cell", {"cell_id": "a"}))', timeout=60)
        assert session.value("type(run.calls[1].details).__name__") == "CellRun"
        assert session.value("run.calls[1].details.value is Out[7]") is True
        assert "[out] [1, 2]" in result_texts(session)[1][2]
    finally:
        fe.stop()


def test_a_frontend_that_goes_away_mid_call(session) -> None:
    nb = FakeNotebook(cells())
    fe = KernelFrontend(session, nb, close_on="edit")
    try:
        session.execute('run = await go(("read_notebook", {}), '
                        '("edit_cell", {"cell_id": "b", "old": "x + 1", "new": "x + 2"}), '
                        '("read_notebook", {}))', timeout=60)
        (_, s1, _), (_, s2, t2), (_, s3, t3) = result_texts(session)
        assert s1 == "ok" and s2 == "error" and "went away" in t2, t2
        assert nb.cells[1]["source"] == "y = x + 1  # typed, not run"
        # the next call says hello again; the frontend answers again, so the read works
        assert s3 == "ok" and "live" in t3
    finally:
        fe.stop()


def test_a_frontend_without_the_extension_refuses_the_comm(session) -> None:
    fe = KernelFrontend(session, FakeNotebook(cells()), close_on="open")  # what JupyterLab does for an unknown target
    try:
        session.execute('run = await go(("insert_cell", {"source": "1"}))', timeout=60)
        (_, status, text), = result_texts(session)
        assert status == "error" and "no nbagent extension" in text and "nothing was changed" in text
    finally:
        fe.stop()


def test_no_frontend_the_tools_say_why_and_do_not_hang(session, tmp_path) -> None:
    saved = {"cells": [{"cell_type": "code", "id": "s", "metadata": {}, "execution_count": 2,
                        "source": "z = 3", "outputs": []}], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    (tmp_path / "here.ipynb").write_text(json.dumps(saved))
    session.execute("%load_ext nbagent\n%config NBAgent.notebook_path = 'here.ipynb'")
    session.execute('run = await go(("read_notebook", {}), ("edit_cell", {"cell_id": "s", "old": "3", "new": "4"}), '
                    '("insert_cell", {"source": "1"}), ("run_cell", {"cell_id": "s"}))', timeout=60)
    (_, s1, t1), (_, s2, t2), (_, s3, t3), (_, s4, t4) = result_texts(session)
    assert s1 == "ok" and "saved file" in t1 and "z = 3" in t1
    assert s2 == "error" and "Read cell" in t2  # a saved-file read is no basis for an edit
    assert s3 == "error" and "no notebook frontend with nbagent's extension answered" in t3
    assert s4 == "error" and "was not run" in t4
    assert json.loads((tmp_path / "here.ipynb").read_text()) == saved


def test_headless_under_nbclient(tmp_path) -> None:
    nbformat = pytest.importorskip("nbformat")
    from nbclient import NotebookClient

    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell("%load_ext nbagent"),
        nbformat.v4.new_code_cell("note = 'written, saved, never run here'"),
        nbformat.v4.new_code_cell(
            "from nbagent import AssistantMessage, ScriptedModel, ToolCall\n"
            "model = ScriptedModel([AssistantMessage(tool_calls=[ToolCall(name='read_notebook', arguments={}),"
            " ToolCall(name='insert_cell', arguments={'source': 'oops'})]), 'done'])\n"
            "run = %agent --model model --wait Look at the notebook\n"
            "print([(c.name, c.status) for c in run.calls])\n"
            "print(run.calls[0].result.text)\n"
            "print(run.calls[1].result.text)"),
    ]
    path = tmp_path / "headless.ipynb"
    nbformat.write(nb, path)
    env = kernel_env(tmp_path, NBAGENT_APPROVAL="allow", NBAGENT_NOTEBOOK=str(path))
    client = NotebookClient(nb, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}})
    old = dict(os.environ)
    os.environ.update(env)
    try:
        client.execute()
    finally:
        os.environ.clear()
        os.environ.update(old)
    out = "".join(o.get("text", "") for o in nb.cells[2].outputs if o.get("output_type") == "stream")
    assert "('read_notebook', 'ok'), ('insert_cell', 'error')" in out, out
    assert "saved file" in out and "written, saved, never run here" in out
    assert "nothing was changed" in out and "headless" in out
    assert len(nbformat.read(path, 4).cells) == 3
