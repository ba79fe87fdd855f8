"""The kernel tools in a real ipykernel (sys.stdout is ipykernel's OutStream, the inline backend is on):
what the agent's code prints, displays and plots comes back in its result and never shows up in the
notebook cell's own output."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

jupyter_client = pytest.importorskip("jupyter_client")

pytestmark = pytest.mark.kernel

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def kernel(tmp_path_factory):
    from jupyter_client.manager import start_new_kernel

    cwd = tmp_path_factory.mktemp("nb")
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    km, kc = start_new_kernel(kernel_name="python3", cwd=str(cwd), env=env, startup_timeout=90)
    try:
        yield kc, cwd
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


def execute(kc, code: str, timeout: float = 90) -> tuple[list[dict], dict]:
    msg_id = kc.execute(code)
    messages = []
    while True:
        msg = kc.get_iopub_msg(timeout=timeout)
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
            break
        messages.append(msg)
    reply = kc.get_shell_msg(timeout=timeout)
    while reply["parent_header"].get("msg_id") != msg_id:
        reply = kc.get_shell_msg(timeout=timeout)
    return messages, reply["content"]


def streams(messages: list[dict]) -> str:
    return "".join(m["content"]["text"] for m in messages if m["msg_type"] == "stream")


def test_python_tool_output_stays_out_of_the_cell(kernel) -> None:
    kc, cwd = kernel
    _, reply = execute(kc, (
        "from nbagent import Agent, ScriptedModel, AssistantMessage, ToolCall\n"
        "from nbagent.jupyter.notebook.kernel_tools import kernel_toolbox\n"
        "numbers = [1, 2, 3]\n"
    ))
    assert reply["status"] == "ok", reply
    code = (
        "print('tool says hi')\n"
        "from IPython.display import display\n"
        "display('a display')\n"
        "import matplotlib.pyplot as plt\n"
        "plt.plot(numbers)\n"
        "sum(numbers)"
    )
    messages, reply = execute(kc, (
        f"m = ScriptedModel([AssistantMessage(tool_calls=[ToolCall(name='python', arguments={{'code': {code!r}}})]), 'ok'])\n"
        "run = await Agent(model=m, tools=kernel_toolbox(get_ipython()), mode='bypassPermissions').run('go')\n"
        "rec = run.calls[0]\n"
        "print('cell says', rec.status, rec.details, [type(b).__name__ for b in rec.result.content])\n"
        "print(repr(rec.result.text))\n"
    ))
    assert reply["status"] == "ok", reply
    out = streams(messages)
    assert "cell says ok 6 ['TextBlock', 'ImageBlock']" in out
    assert "tool says hi\\n[display] 'a display'" in out  # in the result's text...
    assert "tool says hi\n" not in out  # ...but never printed into the cell
    assert not [m for m in messages if m["msg_type"] in ("display_data", "execute_result")]


def test_the_inline_backend_does_not_show_the_tools_figures_later(kernel) -> None:
    kc, _ = kernel
    messages, reply = execute(kc, "print('next cell')")
    assert reply["status"] == "ok"
    assert not [m for m in messages if m["msg_type"] == "display_data"]
    assert streams(messages) == "next cell\n"


def test_cells_print_normally_after_the_tools_ran(kernel) -> None:
    kc, _ = kernel
    messages, reply = execute(kc, "import sys\nprint('out'); print('err', file=sys.stderr)\ntype(sys.stdout).__name__")
    assert reply["status"] == "ok"
    assert streams(messages) == "out\nerr\n"
    result = [m for m in messages if m["msg_type"] == "execute_result"]
    assert result and result[0]["content"]["data"]["text/plain"] == "'RoutedStream'"


def test_history_sees_the_notebooks_cells(kernel) -> None:
    kc, _ = kernel
    messages, reply = execute(kc, (
        "m = ScriptedModel([AssistantMessage(tool_calls=[ToolCall(name='history', arguments={'limit': 3})]), 'ok'])\n"
        "run = await Agent(model=m, tools=kernel_toolbox(get_ipython()), mode='bypassPermissions').run('go')\n"
        "print(run.calls[0].result.text)\n"
    ))
    assert reply["status"] == "ok"
    out = streams(messages)
    assert "print('next cell')" in out
    assert "import sys" in out
