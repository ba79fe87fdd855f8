"""The toolbox inside a real IPython InteractiveShell, in-process: the kernel's namespace, IPython's
input transformations, display capture by thread, and IPython's history."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import pandas as pd  # noqa: E402
import pytest  # noqa: E402
from IPython.core.interactiveshell import InteractiveShell  # noqa: E402

from nbagent import Agent, AssistantMessage, ImageBlock, ScriptedModel, ToolCall, toolbox  # noqa: E402
from nbagent.jupyter.notebook.kernel_tools import (
    KernelRunner, RoutingDisplayPublisher, kernel_extensions, kernel_runner, kernel_toolbox,
)


@pytest.fixture
def shell():
    ip = InteractiveShell.instance()
    ip.reset(new_session=True)  # a fresh namespace, history and execution count
    yield ip
    ip.reset(new_session=True)


def run(shell, *calls: ToolCall, workspace: Path, **kwargs):
    model = ScriptedModel([AssistantMessage(tool_calls=[c]) for c in calls] + ["done"])
    agent = Agent(model=model, tools=kernel_toolbox(shell, workspace), mode="bypassPermissions",
                  workspace=workspace, **kwargs)
    return agent.run_sync("go")


def call(shell, tmp_path: Path, name: str, /, **arguments):
    return run(shell, ToolCall(name=name, arguments=arguments), workspace=tmp_path).calls[0]


def test_code_runs_in_the_kernels_namespace(shell, tmp_path: Path) -> None:
    shell.run_cell("sales = [3, 1, 2]", store_history=True)
    rec = call(shell, tmp_path, "python", code="total = sum(sales)\ntotal")
    assert rec.details == 6
    assert shell.user_ns["total"] == 6
    assert shell.run_cell("total * 2").result == 12


def test_ipython_syntax_works(shell, tmp_path: Path) -> None:
    rec = call(shell, tmp_path, "python", code="%time v = 40 + 2\nv")
    assert rec.status == "ok" and rec.details == 42
    assert "Wall time" in rec.result.text


def test_the_agents_code_stays_out_of_the_notebooks_history(shell, tmp_path: Path) -> None:
    shell.run_cell("a = 1", store_history=True)
    before = list(shell.history_manager.input_hist_raw)
    call(shell, tmp_path, "python", code="b = 2")
    assert list(shell.history_manager.input_hist_raw) == before


def test_displays_are_captured_for_the_call_only(shell, tmp_path: Path, capsys) -> None:
    shell.user_ns["df"] = pd.DataFrame({"a": [1, 2]})
    rec = call(shell, tmp_path, "python", code="from IPython.display import display\ndisplay(df)\nprint('done')")
    assert "[display]    a\n0  1\n1  2" in rec.result.text
    assert rec.details.outputs[0]["data"]["text/plain"].startswith("   a")
    assert "0  1" not in capsys.readouterr().out  # not shown in the cell's own output
    assert isinstance(shell.display_pub, RoutingDisplayPublisher)


def test_display_routing_is_per_thread(shell) -> None:
    from nbagent.jupyter.notebook.kernel_tools import _route_displays

    outputs: list = []
    published: list = []
    router = shell.display_pub
    if not isinstance(router, RoutingDisplayPublisher):
        from nbagent.jupyter.notebook.kernel_tools import install_display_routing

        router = install_display_routing(shell)
    real = router.inner
    original = real.publish
    real.publish = lambda data, metadata=None, *a, **k: published.append(data)
    try:
        with _route_displays(shell, outputs, None):
            shell.display_pub.publish({"text/plain": "mine"})
            t = threading.Thread(target=lambda: shell.display_pub.publish({"text/plain": "theirs"}))
            t.start()
            t.join()
    finally:
        real.publish = original
    assert [o["data"]["text/plain"] for o in outputs] == ["mine"]
    assert published == [{"text/plain": "theirs"}]


def test_figures_come_back_as_images(shell, tmp_path: Path) -> None:
    rec = call(shell, tmp_path, "python", code="import matplotlib.pyplot as plt\nplt.plot([1, 2, 3]);")
    assert any(isinstance(b, ImageBlock) for b in rec.result.content)
    import matplotlib.pyplot as plt

    assert plt.get_fignums() == []
    assert type(rec.details).__name__ == "Figure"


def test_errors_show_the_codes_own_frames(shell, tmp_path: Path) -> None:
    rec = call(shell, tmp_path, "python", code="{}['missing']")
    assert rec.status == "error"
    assert "KeyError: 'missing'" in rec.result.text
    assert "kernel_tools" not in rec.result.text and "_runner" not in rec.result.text


def test_list_variables_leaves_out_what_ipython_put_there(shell, tmp_path: Path) -> None:
    shell.run_cell("import math\nmine = pd = None", store_history=True)
    text = call(shell, tmp_path, "list_variables").result.text
    names = {line.split(":")[0] for line in text.splitlines()}
    assert "mine" in names
    assert not names & {"In", "Out", "get_ipython", "exit", "quit"}
    assert "modules: math" in text


def test_history_shows_the_notebooks_cells_most_recent_first(shell, tmp_path: Path) -> None:
    shell.run_cell("x = 10", store_history=True)
    shell.run_cell("print('hello')", store_history=True)
    shell.run_cell("x * 3", store_history=True)
    text = call(shell, tmp_path, "history", limit=2).result.text
    blocks = text.split("\n\n")
    assert blocks[0] == "In [3]:\nx * 3\nOut [3]: 30"
    assert blocks[1].startswith("In [2]:\nprint('hello')\nOut [2]: hello")
    assert "history(limit=2, offset=2)" in text
    older = call(shell, tmp_path, "history", limit=5, offset=2).result.text
    assert older.startswith("In [1]:\nx = 10")


def test_shared_tools_use_the_kernel_through_extensions(shell, tmp_path: Path) -> None:
    shell.user_ns["answer"] = 41
    model = ScriptedModel([AssistantMessage(tool_calls=[ToolCall(name="python", arguments={"code": "answer + 1"})]),
                           AssistantMessage(tool_calls=[ToolCall(name="history", arguments={})]), "done"])
    agent = Agent(model=model, tools=[toolbox.python, toolbox.history], mode="bypassPermissions",
                  workspace=tmp_path, extensions=kernel_extensions(shell))
    r = agent.run_sync("go")
    assert r.calls[0].details == 42
    assert r.calls[1].status == "ok"


def test_one_runner_per_shell(shell) -> None:
    assert kernel_runner(shell) is kernel_runner(shell)
    assert isinstance(kernel_runner(shell), KernelRunner)


def test_printing_cells_still_work_with_the_routing_streams(shell, capsys) -> None:
    from nbagent.toolbox._capture import ensure_installed

    ensure_installed()
    shell.run_cell("print('from a cell')", store_history=True)
    assert "from a cell" in capsys.readouterr().out


def test_the_headless_toolbox_never_imports_ipython() -> None:
    code = ("import sys; import nbagent, nbagent.toolbox; from nbagent import toolbox; toolbox.all(); "
            "bad = [m for m in sys.modules if m.split('.')[0] in ('IPython', 'ipykernel', 'ipywidgets')]; "
            "assert not bad, bad")
    root = Path(__file__).resolve().parents[3]
    done = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True,
                          env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr


def test_a_cells_output_history_does_not_take_the_tools_output(shell, tmp_path: Path) -> None:
    """IPython records a running cell's printed output by patching sys.stdout.write; output of the
    agent's code, printed meanwhile on its thread, must not land in that cell's history."""
    from nbagent.toolbox._capture import ensure_installed

    ensure_installed()
    shell.user_ns["_tool"] = kernel_toolbox(shell, tmp_path)[0]
    shell.user_ns["_dir"] = tmp_path
    cell = (
        "from nbagent import Agent, ScriptedModel, AssistantMessage, ToolCall\n"
        "import threading\n"
        "_m = ScriptedModel([AssistantMessage(tool_calls=[ToolCall(name='python', arguments={'code': \"print('from the tool')\"})]), 'ok'])\n"
        "_r = []\n"
        "_t = threading.Thread(target=lambda: _r.append(Agent(model=_m, tools=[_tool], mode='bypassPermissions', workspace=_dir).run_sync('go')))\n"
        "_t.start(); _t.join()\n"
        "print('from the cell')\n"
    )
    shell.run_cell(cell, store_history=True)
    run = shell.user_ns["_r"][0]
    assert run.calls[0].details.stdout == "from the tool\n"
    recorded = "".join("".join(o.bundle.get("stream", [])) for o in shell.history_manager.outputs[1])
    assert "from the cell" in recorded
    assert "from the tool" not in recorded
