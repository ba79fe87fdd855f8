"""Decisions that cannot be lost, in a real kernel: the live view's Approve, Deny, Always allow and Stop come through
the page's own `nbagent.panel` comm (`decide` bound to the digest the view drew in its question, `stop`), so
they still arrive when another page closed the view's widgets, as Notebook 7's file-browser tab does (it answers
every widget's comm_open with comm_close, and the kernel then drops the buttons' own messages). The test plays
that tab (comm_close for every widget comm) and the notebook's page (the panel comm, and widget clicks)."""

from __future__ import annotations

import html
import re
import time

import pytest

from ..kernelclient import KernelSession
from .test_comm import Page

pytestmark = pytest.mark.kernel

SETUP = r'''%load_ext nbagent
import nbagent.jupyter as nj
from nbagent import AssistantMessage, ScriptedModel, ToolCall

def writes(*names, text="done"):
    """A model that writes each file with the python tool, one call a turn (each asks for approval)."""
    turns = [AssistantMessage(tool_calls=[ToolCall(name="python", arguments={"code": f"open({n!r}, 'w').close()"})])
             for n in names]
    return ScriptedModel(turns + [text])

def waiting(run):
    return [r.record.id for r in nj.view(run).pending]
'''


@pytest.fixture
def kernel(tmp_path):
    k = KernelSession(tmp_path)
    k.execute(SETUP)
    k.work = tmp_path  # type: ignore[attr-defined]
    yield k
    problems = Page.problems(k)
    k.shutdown()
    assert not problems, "\n".join(problems)


def widget_comms(k: KernelSession) -> list[tuple[str, dict]]:
    return [(m["content"]["comm_id"], m["content"]["data"].get("state", {})) for m in list(k.iopub)
            if m["msg_type"] == "comm_open" and m["content"].get("target_name") == "jupyter.widget"]


def close_widgets(k: KernelSession) -> int:
    """What a page without a widget manager does with every widget comm the kernel opens: close it."""
    comms = widget_comms(k)
    for comm_id, _state in comms:
        k.kc.shell_channel.send(k.kc.session.msg("comm_close", {"comm_id": comm_id, "data": {}}))
    return len(comms)


def drawn(k: KernelSession) -> str:
    """Every HTML value the kernel drew in widgets, in order."""
    out = []
    for m in list(k.iopub):
        if m["msg_type"] in ("comm_open", "comm_msg"):
            state = (m["content"].get("data") or {}).get("state") or {}
            if isinstance(state.get("value"), str):
                out.append(state["value"])
    return "\n".join(out)


def question(k: KernelSession, run_id: str, timeout: float = 30, call: str | None = None) -> dict[str, str]:
    """The run, call and digest the view's latest question names (what the page reads from it). With `call`, wait
    until the latest question names that call: the kernel's state can be read before the view's redraw reaches the
    page over iopub."""
    deadline = time.monotonic() + timeout
    while True:
        found = re.findall(r'<div class="nba-ask-q" data-nba-run="([^"]*)" data-nba-call="([^"]*)" '
                           r'data-nba-digest="([^"]*)">', drawn(k))
        mine = [dict(zip(("run", "call", "digest"), (html.unescape(v) for v in f)))
                for f in found if html.unescape(f[0]) == run_id]
        if mine and (call is None or mine[-1]["call"] == call):
            return mine[-1]
        if time.monotonic() > deadline:
            raise AssertionError(f"no question of run {run_id} was drawn" + (f" for call {call}" if call else "")
                                 + (f" (the latest names {mine[-1]['call']})" if mine else ""))
        time.sleep(0.1)


def button(k: KernelSession, cls: str) -> str:
    """The comm id of the latest widget button with this class."""
    return [c for c, state in widget_comms(k) if cls in (state.get("_dom_classes") or [])][-1]


def start(k: KernelSession) -> str:
    """Start a run of the model `m` (a new conversation), counting the decisions it takes; return its id."""
    k.execute("run = %agent --model m --new go\n"
              "decided = []\nrun.subscribe(lambda e: decided.append(e.call.id) if e.kind == 'approval_decided' else None)")
    return k.value("run.id")


def test_with_the_widgets_closed_by_another_page_a_click_is_lost_and_the_page_s_decision_is_not(kernel):
    kernel.execute("m = writes('approved.txt')")
    run_id = start(kernel)
    kernel.wait_for("bool(waiting(run))")
    shown = question(kernel, run_id)
    assert close_widgets(kernel) > 10
    kernel.wait_for("nj.view(run).closed_elsewhere")
    deadline = time.monotonic() + 15
    while "closed this view's widgets" not in drawn(kernel):  # the view says so (its updates still go out)
        assert time.monotonic() < deadline, "the view did not say another page closed its widgets"
        time.sleep(0.1)
    assert "view(run)" in drawn(kernel)
    # the failure: the button's own message reaches a kernel that forgot the button
    kernel.click(button(kernel, "nba-approve"))
    time.sleep(1.5)
    assert kernel.value("waiting(run)") == [shown["call"]] and not (kernel.work / "approved.txt").exists()
    # the page's decision, bound to what the question showed
    page = Page(kernel)
    reply = page.ask("decide", run=shown["run"], call=shown["call"], digest=shown["digest"], choice="approve")
    assert reply == {"id": reply["id"], "ok": True, "result": {"taken": True}}, reply
    kernel.wait_for("run.done")
    assert kernel.value("run.status") == "done" and (kernel.work / "approved.txt").exists()
    assert kernel.value("run.calls[0].decision.reason") == "approved in the notebook"


def test_stop_and_deny_with_a_reason_come_through_the_page(kernel):
    kernel.execute("m = writes('denied.txt', 'stopped.txt')")
    run_id = start(kernel)
    kernel.wait_for("bool(waiting(run))")
    close_widgets(kernel)
    page = Page(kernel)
    shown = question(kernel, run_id)
    reply = page.ask("decide", choice="deny", reason="not this one", **shown)
    assert reply["ok"] and reply["result"] == {"taken": True}
    kernel.wait_for("len(run.calls) == 2 and bool(waiting(run))")
    assert kernel.value("run.calls[0].decision.reason") == "not this one"
    assert page.ask("stop", run=run_id)["result"] == {"stopped": True}
    kernel.wait_for("run.done")
    assert kernel.value("run.status") == "cancelled"
    assert not (kernel.work / "denied.txt").exists() and not (kernel.work / "stopped.txt").exists()


def test_one_decision_whichever_path_is_first(kernel):
    kernel.execute("m = writes('a.txt', 'b.txt')")
    run_id = start(kernel)
    page = Page(kernel)
    # the button first (its widget alive here), then the page: the page is told it was decided
    kernel.wait_for("bool(waiting(run))")
    first = question(kernel, run_id)
    kernel.click(button(kernel, "nba-approve"))
    kernel.wait_for("len(run.calls) == 2 and bool(waiting(run))")
    late = page.ask("decide", choice="deny", **first)
    assert late["ok"] and late["result"]["taken"] is False, late
    assert kernel.value("run.calls[0].decision.allow") is True
    # the page first, then the button: the click finds nothing waiting
    second = question(kernel, run_id, call=kernel.value("waiting(run)")[0])
    assert second["call"] != first["call"]
    assert page.ask("decide", choice="always", **second)["result"] == {"taken": True}
    kernel.click(button(kernel, "nba-deny"))
    kernel.wait_for("run.done")
    assert kernel.value("[c.decision.allow for c in run.calls]") == [True, True]
    assert kernel.value("run.calls[1].decision.reason") == "always allowed in the notebook"
    assert kernel.value("decided") == [first["call"], second["call"]]  # one decision a call


def test_where_a_policy_decides_no_question_is_drawn_and_nothing_waits(kernel):
    kernel.execute("%config NBAgent.approver = 'allow'\nm = writes('by_policy.txt')")
    run_id = start(kernel)
    kernel.wait_for("run.done")
    assert kernel.value("run.calls[0].decision.source") == "policy"
    assert "data-nba-digest" not in drawn(kernel) and (kernel.work / "by_policy.txt").exists()
    reply = Page(kernel).ask("decide", run=run_id, call="anything", digest="0" * 64, choice="approve")
    assert reply["ok"] and reply["result"]["taken"] is False
