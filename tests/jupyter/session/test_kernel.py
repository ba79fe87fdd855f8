"""`%agent` in real kernels, driven through jupyter_client as a frontend drives them: clicks are the exact
`comm_msg` JupyterLab sends, on the main shell or on a subshell, while the kernel is idle or busy."""

from __future__ import annotations

import time

import pytest

from ..kernelclient import KernelSession

pytestmark = pytest.mark.kernel

SETUP = '''
import asyncio, os, threading, time
from nbagent import AssistantMessage, ScriptedModel, ToolCall, ToolContext, tool
from nbagent.jupyter import get_session, view
from nbagent.transcript import check_transcript

ran = []

@tool(destructive=True, describe_activity=lambda a: f"Deleting {a.path}")
def delete(path: str) -> str:
    """Delete a file."""
    ran.append(path)
    return f"deleted {path}"

@tool(read_only=True, describe_activity=lambda a: f"Waiting {a.seconds} s")
async def slow(seconds: float, ctx: ToolContext) -> str:
    """Wait a while, reporting progress."""
    for i in range(int(seconds * 10)):
        ctx.progress(f"tick {i}", fraction=i / (seconds * 10), output=f"tick {i}\\n")
        await asyncio.sleep(0.1)
    return "waited"

def script(*calls):
    return ScriptedModel([AssistantMessage(text="On it.", tool_calls=list(calls)), "Done."])

def deleting(*paths):
    return script(*[ToolCall(name="delete", arguments={"path": p}) for p in paths])

def buttons(run, i=0):
    return {name: w.model_id for name, w in view(run).pending[i].buttons.items()}
'''


@pytest.fixture(scope="module")
def k(kernel):
    kernel.execute(SETUP)
    return kernel


def start(k: KernelSession, model: str, tools: str = "delete", name: str = "run") -> dict:
    k.execute(f"model = {model}\nran.clear()")
    return k.execute(f"{name} = %agent --new --model model --tools {tools} Please do it.")


def wait_buttons(k: KernelSession, run: str = "run", i: int = 0) -> dict:
    k.wait_for(f"len(view({run}).pending) > {i} and bool(view({run}).pending[{i}].buttons)")
    return k.value(f"buttons({run}, {i})")


def assert_valid(k: KernelSession, run: str = "run") -> None:
    assert k.value(f"check_transcript({run}.messages)") == []


def test_approve_click_runs_the_tool_and_the_view_updates_while_the_kernel_is_idle(k):
    out = start(k, 'deleting("a.txt")')
    assert any("application/vnd.jupyter.widget-view+json" in d for d in out["data"])  # the view, shown by the magic
    assert k.value("run.done") is False  # the magic returned at once
    ids = wait_buttons(k)
    before = len(k.messages("comm_msg"))
    k.click(ids["approve"])
    k.wait_for("run.done")
    assert k.value("[run.status, ran, run.calls[0].status, run.calls[0].decision.source]") == [
        "done", ["a.txt"], "ok", "user"]
    assert_valid(k)
    k.wait_for("view(run).throttle.closed")
    updates = k.messages("comm_msg")[before:]
    assert any(m["content"]["data"].get("method") == "update" for m in updates)


def test_a_click_handled_on_a_subshell_thread(k):
    start(k, 'deleting("b.txt")')
    ids = wait_buttons(k)
    subshell = k.create_subshell()
    # The comm answers on the subshell that last used it (ipykernel 7.4), as JupyterLab's widgets do.
    touch = k.send_execute(
        "b = view(run).pending[0].buttons['approve']\n"
        "threads = []\n"
        "b.on_click(lambda _: threads.append(threading.current_thread().name))\n"
        "b.tooltip = b.tooltip + ' '", subshell_id=subshell)
    assert k.wait_reply(touch)["content"]["status"] == "ok"
    k.click(ids["approve"], subshell_id=subshell)
    k.wait_for("run.done")
    thread = k.value("threads")[0]
    assert thread.startswith("subshell-") and thread != "MainThread"
    assert k.value("[run.status, ran]") == ["done", ["b.txt"]]
    assert_valid(k)


def test_a_click_while_a_synchronous_cell_runs_is_handled_after_it(k):
    start(k, 'deleting("c.txt")')
    ids = wait_buttons(k)
    busy = k.send_execute("time.sleep(1.5); busy_end = time.monotonic()")
    time.sleep(0.3)
    k.click(ids["approve"])
    assert k.wait_reply(busy)["content"]["status"] == "ok"
    k.wait_for("run.done")
    assert k.value("run.calls[0].finished_at > busy_end") is True
    assert k.value("ran") == ["c.txt"]
    assert_valid(k)


def test_a_click_while_a_cell_awaits_the_run_is_handled_at_once(k):
    start(k, 'deleting("d.txt")')
    ids = wait_buttons(k)
    waiting = k.send_execute("await run\nawaited = run.status")
    time.sleep(0.3)
    k.type_text(ids["reason"], "not today")
    k.click(ids["deny"])
    assert k.wait_reply(waiting, timeout=30)["content"]["status"] == "ok"
    assert k.value("[awaited, run.calls[0].status, run.calls[0].decision.reason, ran]") == [
        "done", "denied", "not today", []]
    assert "not today" in k.value("run.calls[0].result.text")
    assert_valid(k)


def test_several_calls_of_one_batch_are_decided_each_on_its_own(k):
    start(k, 'deleting("e.txt", "f.txt")')
    first = wait_buttons(k, i=0)
    second = wait_buttons(k, i=1)
    k.click(second["deny"])
    k.wait_for("run.calls[1].done")
    assert k.value("run.calls[0].done") is False
    k.click(first["always"])
    k.wait_for("run.done")
    assert k.value("[c.status for c in run.calls]") == ["ok", "denied"]
    assert k.value("'delete' in get_session().grants") is True
    k.execute("get_session().grants.clear()")
    assert_valid(k)


def test_stop_button_cancels_the_run(k):
    start(k, 'script(ToolCall(name="slow", arguments={"seconds": 30}))', tools="slow")
    k.wait_for("run.calls and run.calls[0].status == 'running'")
    stop = k.value("view(run).stop_button.model_id")
    k.click(stop)
    k.wait_for("run.done")
    assert k.value("[run.status, run.calls[0].status]") == ["cancelled", "cancelled"]
    assert_valid(k)


def test_wait_option_and_the_environment_policy(k):
    k.execute("os.environ['NBAGENT_APPROVAL'] = 'deny'")
    try:
        k.execute('model = deleting("g.txt")')
        out = k.execute("run = %agent --new --wait --model model --tools delete Please do it.")
        assert out["reply"]["content"]["status"] == "ok"
        assert k.value("[run.status, run.calls[0].status, run.calls[0].decision.reason, ran]") == [
            "done", "denied", "NBAGENT_APPROVAL=deny", []]
    finally:
        k.execute("del os.environ['NBAGENT_APPROVAL']")
    assert_valid(k)


def test_interrupt_cancels_a_run_the_cell_awaits(tmp_path):
    k = KernelSession(tmp_path)
    try:
        k.execute("%load_ext nbagent")
        k.execute(SETUP)
        start(k, 'script(ToolCall(name="slow", arguments={"seconds": 30}))', tools="slow")
        k.wait_for("run.calls and run.calls[0].status == 'running'")
        waiting = k.send_execute("await run")
        time.sleep(0.5)
        k.interrupt()
        reply = k.wait_reply(waiting, timeout=30)
        assert reply["content"]["status"] == "error"
        k.wait_for("run.done")
        assert k.value("[run.status, run.calls[0].status]") == ["cancelled", "cancelled"]
        assert_valid(k)
        assert k.value("1 + 1") == 2  # the kernel is fine afterwards
    finally:
        k.shutdown()


def test_wait_ends_a_failed_or_interrupted_cell_with_one_line(tmp_path):
    k = KernelSession(tmp_path)
    try:
        k.execute("%load_ext nbagent")
        k.execute(SETUP)
        k.execute("def down(messages):\n    raise ConnectionError('the provider is down')\nbroken = ScriptedModel([down])")
        out = k.execute("%agent --model broken --wait Hello", check=False)
        assert out["error"]["ename"] == "ConnectionError"  # the run's own error: CI sees what failed
        assert len(out["error"]["traceback"]) == 1 and "the provider is down" in out["error"]["traceback"][0]
        k.execute("broken = ScriptedModel([down])")
        k.execute("failing = %agent --model broken --new Hello")
        out = k.execute("await failing", check=False)  # `await run` too: one line
        assert out["error"]["ename"] == "ConnectionError" and len(out["error"]["traceback"]) == 1
        k.execute('model = script(ToolCall(name="slow", arguments={"seconds": 30}))')
        waiting = k.send_execute("run = %agent --model model --new --tools slow --wait Take your time")
        subshell = k.create_subshell()  # the main shell is busy awaiting: look from a subshell
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            probe = k.send_execute("import json as _j; from nbagent.jupyter import get_session as _g\n"
                                   "_r = _g().runs[-1]\nprint(_j.dumps(bool(_r.calls) and _r.calls[0].status == 'running'))",
                                   subshell_id=subshell)
            k.wait_reply(probe)
            if "true" in "".join(m["content"]["text"] for m in k.messages("stream", probe)):
                break
            time.sleep(0.1)
        k.interrupt()
        k.wait_reply(waiting, timeout=30)
        errors = k.messages("error", waiting)
        assert len(errors) == 1 and len(errors[0]["content"]["traceback"]) == 1
        assert errors[0]["content"]["traceback"][0].startswith("Interrupted: the run was stopped")
        k.wait_for("get_session().runs[-1].done")
        assert k.value("get_session().runs[-1].status") == "cancelled"
    finally:
        k.shutdown()
