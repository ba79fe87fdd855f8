"""The notebook as the server's shared document, with no browser open: JupyterLab with jupyter-collaboration,
started as a user starts it; a kernel the server started for nb.ipynb (its sessions API, as a page does); a Y
client of the engine in the test process as a third party. `%agent` inserts, edits and runs cells: the third
party sees each change live, the agent among the document's collaborators, and the file after the server
saved it. A third party's typing elsewhere in a cell the agent edits is kept; typing on the text the edit
replaces makes the edit refuse, before the approval and between the approval and the write.
"""

from __future__ import annotations

import json
import time
import urllib.request
from pathlib import Path

import pytest

pytest.importorskip("jupyter_client")

from ..browser.lab import LabServer, write_notebook  # noqa: E402
from ..kernelclient import KernelSession  # noqa: E402

pytestmark = [pytest.mark.kernel, pytest.mark.timeout(300)]

SOURCE = "x = 1\ny = 2\nprint(x + y)"

HELPERS = r'''
import asyncio, re
from nbagent import Agent, AssistantMessage, Hooks, ScriptedModel, ToolCall
from nbagent.render import run_text

def call(name, **arguments):
    return AssistantMessage(tool_calls=[ToolCall(name=name, arguments=arguments)])

def new_cell(messages):
    for m in reversed(messages):
        found = re.search(r'Inserted a \w+ cell with id "([^"]+)"', getattr(m, "text", "") or "")
        if found:
            return found.group(1)
'''


def start_session(server: LabServer, path: str) -> KernelSession:
    """A kernel for `path`, started by the server as JupyterLab asks for one; a client attached to it."""
    from jupyter_core.paths import jupyter_runtime_dir

    body = json.dumps({"path": path, "name": path, "type": "notebook", "kernel": {"name": "python3"}}).encode()
    request = urllib.request.Request(f"{server.url}/api/sessions", data=body, method="POST", headers={
        "Authorization": f"token {server.token}", "Content-Type": "application/json"})
    session = json.loads(urllib.request.urlopen(request, timeout=60).read())
    return KernelSession.attach(str(Path(jupyter_runtime_dir()) / f"kernel-{session['kernel']['id']}.json"))


def wait(predicate, what: str, timeout: float = 30.0):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = predicate()
        if last:
            return last
        time.sleep(0.1)
    raise AssertionError(f"{what}: still {last!r} after {timeout} s")


def finish(ks: KernelSession, name: str = "run", timeout: float = 60) -> None:
    """Wait for a run by asking the idle kernel (a cell that awaited it would hold the kernel the run needs)."""
    ks.wait_for(f"{name}.done", timeout=timeout)


@pytest.fixture(scope="module")
def shared(tmp_path_factory):
    from ..ycollab import YCollaborator

    root = tmp_path_factory.mktemp("shared")
    write_notebook(root / "nb.ipynb", [SOURCE])
    server = LabServer(root, collaboration=True)
    ks = None
    peer = None
    try:
        ks = start_session(server, "nb.ipynb")
        peer = YCollaborator(server, "nb.ipynb")
        ks.execute("%load_ext nbagent\n" + HELPERS)
        yield server, ks, peer, root
    finally:
        if peer is not None:
            peer.close()
        if ks is not None:
            ks.shutdown()
        server.stop()


def test_the_agent_inserts_edits_and_runs_cells_in_the_shared_document(shared):
    server, ks, peer, root = shared
    ks.execute(
        "m = ScriptedModel([call('read_notebook'),\n"
        "    call('insert_cell', source=\"z = 40\\nprint('from the agent')\\nz + 2\", after='c0'),\n"
        "    call('edit_cell', cell_id='c0', old='y = 2', new='y = 3'),\n"
        "    lambda ms: call('run_cell', cell_id=new_cell(ms)), 'done'])\n"
        "run = %agent --model m --mode bypassPermissions Answer in the notebook")
    finish(ks)
    calls = ks.value("[(c.name, c.status) for c in run.calls]")
    assert calls == [["read_notebook", "ok"], ["insert_cell", "ok"], ["edit_cell", "ok"], ["run_cell", "ok"]], \
        ks.value("[c.result.text for c in run.calls]")
    assert "notebook: shared document" in ks.value("run_text(run)")
    assert "live shared document" in ks.value("run.calls[0].result.text")

    # the third party sees the live document: the edit, the new cell, its outputs, the agent's mark
    def ran():
        cells = peer.cells()
        return cells if len(cells) == 2 and cells[1].get("outputs") else None

    cells = wait(ran, "the new cell's run")
    assert cells[0]["source"] == "x = 1\ny = 3\nprint(x + y)"
    assert cells[1]["source"] == "z = 40\nprint('from the agent')\nz + 2"
    outputs = cells[1]["outputs"]
    assert any(o.get("output_type") == "stream" and "from the agent" in o.get("text", "") for o in outputs), outputs
    assert any(o.get("output_type") == "execute_result" and o["data"].get("text/plain") == "42" for o in outputs)
    assert cells[1]["execution_count"] == ks.value("run.calls[3].result.details.execution_count")
    assert cells[1]["metadata"]["nbagent"]["run"] == ks.value("run.id")
    assert "nbagent" in peer.users()  # the agent is a collaborator of the document
    assert ks.value("Out[run.calls[3].result.details.execution_count]") == 42  # it ran in this kernel

    # the server saves the shared document: the file holds it all
    def saved():
        try:  # the server writes the file in place (its backup copy aside): a read during a save sees part of it
            nb = json.loads((root / "nb.ipynb").read_text())
        except json.JSONDecodeError:
            return None  # being written: not saved yet
        return nb if len(nb["cells"]) == 2 and nb["cells"][1]["outputs"] else None

    nb = wait(saved, "the saved notebook")
    assert "".join(nb["cells"][0]["source"]) == "x = 1\ny = 3\nprint(x + y)"
    assert "from the agent" in json.dumps(nb["cells"][1]["outputs"])


def test_typing_elsewhere_in_the_cell_is_kept_and_typing_on_the_edited_text_refuses(shared):
    server, ks, peer, root = shared
    ks.execute("m = ScriptedModel([call('read_notebook', cell_id='c0'), 'read'])\n"
               "run = %agent --new --model m --mode bypassPermissions Read it")
    finish(ks)
    seen = ks.value("get_ipython()._nbagent_notebook.seen['c0']")
    # a collaborator types at the end of the last line, after the agent read the cell
    peer.type_at("c0", len(seen), "  # checked")
    ks.wait_for("'# checked' in (await get_ipython()._nbagent_notebook.live_source('c0'))")
    ks.execute("m = ScriptedModel([call('edit_cell', cell_id='c0', old='x = 1', new='x = 10'), 'edited'])\n"
               "run = %agent --model m --mode bypassPermissions Change x")
    finish(ks)
    assert ks.value("run.calls[0].status") == "ok", ks.value("run.calls[0].result.text")
    assert "their text was kept" in ks.value("run.calls[0].result.text")
    expected = "x = 10\ny = 3\nprint(x + y)  # checked"
    wait(lambda: peer.source("c0") == expected, "both changes in the cell")

    # a collaborator types on the very text the agent is about to replace: refused before anyone is asked
    peer.replace("c0", "y = 3", "y = 30")
    ks.wait_for("'y = 30' in (await get_ipython()._nbagent_notebook.live_source('c0'))")
    ks.execute("m = ScriptedModel([call('edit_cell', cell_id='c0', old='y = 3', new='y = 4'), 'refused'])\n"
               "run = %agent --model m --mode bypassPermissions Change y")
    finish(ks)
    assert ks.value("run.calls[0].status") == "blocked", ks.value("run.calls[0].result.text")
    assert "changed since you last read it" in ks.value("run.calls[0].result.text")
    time.sleep(1.0)
    assert peer.source("c0") == "x = 10\ny = 30\nprint(x + y)  # checked"


def test_a_change_between_the_approval_and_the_write_is_refused(shared):
    server, ks, peer, root = shared
    ks.execute(
        "from nbagent.jupyter.notebook.tools import notebook_tools, stale_guard\n"
        "asked, go = asyncio.Event(), asyncio.Event()\n"
        "async def gate(request):\n"
        "    asked.set()\n"
        "    await go.wait()\n"
        "    return True\n"
        "ip = get_ipython()\n"
        "agent = Agent(model=ScriptedModel([call('read_notebook', cell_id='c0'),\n"
        "    call('edit_cell', cell_id='c0', old='y = 30', new='y = 5'), 'over']),\n"
        "    tools=notebook_tools(ip), hooks=Hooks(before_tool_call=[stale_guard(ip)]), approver=gate)\n"
        "run = agent.start('Change y')")
    ks.wait_for("asked.is_set()")
    peer.replace("c0", "y = 30", "y = 31")  # after the person saw the diff, before it is written
    ks.wait_for("'y = 31' in (await get_ipython()._nbagent_notebook.live_source('c0'))")
    ks.execute("go.set()")
    finish(ks)
    text = ks.value("run.calls[1].result.text")
    assert ks.value("run.calls[1].status") == "error" and "changed since you last read it" in text, text
    assert "y = 31" in text  # the model is told what the cell holds now
    time.sleep(1.0)
    assert peer.source("c0") == "x = 10\ny = 31\nprint(x + y)  # checked"


def test_without_the_engine_the_tools_say_so_and_change_nothing(tmp_path):
    write_notebook(tmp_path / "nb.ipynb", [SOURCE])
    server = LabServer(tmp_path)  # the collaboration engine switched off, even where it is installed
    ks = None
    try:
        with pytest.raises(OSError):
            urllib.request.urlopen(urllib.request.Request(
                f"{server.url}/api/collaboration/session/nb.ipynb", data=b'{"format": "json", "type": "notebook"}',
                method="PUT", headers={"Authorization": f"token {server.token}"}), timeout=10)
        ks = start_session(server, "nb.ipynb")
        ks.execute("%load_ext nbagent\n" + HELPERS)
        ks.execute("m = ScriptedModel([call('read_notebook'), call('insert_cell', source='1 + 1'), 'done'])\n"
                   "run = %agent --model m --mode bypassPermissions Try")
        finish(ks, timeout=90)
        assert "saved file" in ks.value("run.calls[0].result.text")
        assert ks.value("run.calls[1].status") == "error"
        assert "shared document is not reachable" in ks.value("run.calls[1].result.text")
        assert "notebook: saved file" in ks.value("run_text(run)")
        assert len(json.loads((tmp_path / "nb.ipynb").read_text())["cells"]) == 1
    finally:
        if ks is not None:
            ks.shutdown()
        server.stop()
