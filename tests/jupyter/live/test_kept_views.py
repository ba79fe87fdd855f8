"""A batch's view (`%agent --map`) and the MCP trust prompt outlive their kernel like a run's view, and their buttons
work where the widgets were closed by another page: in a real kernel, with the page played by the test
(tests/jupyter/fake_frontend.py keeps the renderings as frontend/src/notebook/keptViews.ts does; `Page` speaks the
`nbagent.panel` comm as frontend/src/panel/decisions.ts does).

- while an item waits for approval, the page holds the batch as it would read if the kernel stopped now (with
  how to go on: `--resume` asks only for the items not done); once the batch ends, the cell holds its final
  rendering and the kept copy is dropped;
- a batch's Approve comes through the page's comm bound to the digest drawn with the question (another digest
  is refused), with the widgets closed by another page, once;
- the trust prompt: kept while it waits; Trust through the page's comm bound to the configuration's digest; its
  cell then holds the decision;
- the steering box: what is typed goes into the view's own run through the page's comm.
"""

from __future__ import annotations

import html
import json
import re
import sys
import time
from pathlib import Path

import pytest

from ..fake_frontend import FakeNotebook, KernelFrontend
from ..kernelclient import KernelSession
from ..panel.test_comm import Page
from ..panel.test_decisions import close_widgets, drawn

pytestmark = [pytest.mark.kernel, pytest.mark.timeout(240)]

WIDGET = "application/vnd.jupyter.widget-view+json"

SETUP = r'''%load_ext nbagent
from nbagent import AssistantMessage, ScriptedModel, ToolCall, UserMessage

def writer(messages):
    last = messages[-1]
    if isinstance(last, UserMessage):
        return AssistantMessage(tool_calls=[ToolCall(name="write_file", arguments={"path": last.text, "content": "x"})])
    return "written"

m = ScriptedModel([writer] * 20)
tickets = ["escalations/refund-284.md", "escalations/refund-285.md"]
'''


def _until(predicate, what: str, timeout: float = 30):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout} s")
        time.sleep(0.05)


def _model_id(out: dict) -> str:
    return next(d[WIDGET]["model_id"] for d in out["data"] if WIDGET in d)


def _batch_question(k: KernelSession) -> dict[str, str]:
    found = re.findall(r'<div class="nba-ask-q" data-nba-batch="([^"]*)" data-nba-call="([^"]*)" '
                       r'data-nba-digest="([^"]*)">', drawn(k))
    assert found, "no batch question was drawn"
    return dict(zip(("batch", "call", "digest"), (html.unescape(v) for v in found[-1])))


@pytest.fixture
def kernel(tmp_path):
    k = KernelSession(tmp_path, JPY_SESSION_NAME="tickets.ipynb", NBAGENT_CONFIG_DIR=str(tmp_path / "config"))
    nb = FakeNotebook([{"id": "c1", "source": "%agent --map ..."}], path="tickets.ipynb")
    fe = KernelFrontend(k, nb)
    k.execute(SETUP)
    yield k, nb
    problems = Page.problems(k)
    fe.stop()
    k.shutdown()
    assert not problems, "\n".join(problems)


def test_a_batch_view_leaves_its_rendering_with_the_page_and_its_approve_comes_through_the_comm(kernel):
    k, nb = kernel
    out = k.execute("batch = %agent --map tickets --model m --concurrency 1 {item}", cell_id="c1")
    model_id = _model_id(out)
    k.wait_for("len(batch.pending_approvals) == 1")

    def kept() -> str:
        return (nb.snapshots.get(model_id) or {}).get("html") or ""

    _until(lambda: "waiting for you" in kept() and "1 waiting" in kept(), "the waiting batch in the kept rendering")
    held = kept()
    assert "the kernel stopped while the batch was going on" in held
    assert f"%agent --map tickets --resume {k.value('batch.id')}" in held and "ask only for the 2 not done" in held
    assert "stopped" in nb.snapshots[model_id]["text"]

    # another page closed the widgets (Notebook 7's file-browser tab): the page's comm still decides
    assert close_widgets(k) > 5
    page = Page(k)
    shown = _batch_question(k)
    assert shown["batch"] == k.value("batch.id") and "refund-284" in drawn(k)
    refused = page.ask("batch_decide", batch=shown["batch"], call=shown["call"], digest="0" * 64, choice="always")
    assert refused["ok"] is False and "differs from the one shown" in refused["error"]
    assert k.value("len(batch.pending_approvals)") == 1  # nothing was decided
    taken = page.ask("batch_decide", batch=shown["batch"], call=shown["call"], digest=shown["digest"], choice="always")
    assert taken == {"id": taken["id"], "ok": True, "result": {"taken": True}}
    k.execute("await batch")
    assert k.value("[r.status for r in batch.results]") == ["done", "done"]  # the folder grant covered the second
    again = page.ask("batch_decide", batch=shown["batch"], call=shown["call"], digest=shown["digest"], choice="deny")
    assert again["ok"] and again["result"]["taken"] is False
    # the cell holds the final rendering; the kept copy is dropped
    _until(lambda: model_id not in nb.snapshots, "the kept rendering dropped once the batch ended")
    updates = [m for m in k.messages("update_display_data") if "2/2 items" in json.dumps(m["content"]["data"])]
    assert updates and "batch" in updates[-1]["content"]["data"]["text/plain"]


def test_the_trust_prompt_is_kept_and_answered_through_the_page_s_comm(kernel, tmp_path):
    k, nb = kernel
    server = {"command": sys.executable, "args": ["-c", "pass"]}
    (tmp_path / ".mcp.json").write_text(json.dumps({"mcpServers": {"quiet": server}}))
    out = k.execute("listing = %agent --mcp-list", cell_id="c1")
    model_id = _model_id(out)

    def kept() -> str:
        return (nb.snapshots.get(model_id) or {}).get("html") or ""

    _until(lambda: "not trusted yet" in kept(), "the trust prompt in the kept rendering")
    assert "Not answered: the kernel stopped before you chose" in kept() and "Nothing was trusted" in kept()
    digest = re.search(r'data-nba-consent="([0-9a-f]+)"', drawn(k)).group(1)
    close_widgets(k)
    page = Page(k)
    refused = page.ask("trust", digest="f" * 64, choice="trust")
    assert refused["ok"] is True and refused["result"]["taken"] is False  # no prompt shows that configuration
    taken = page.ask("trust", digest=digest, choice="trust")
    assert taken["ok"] and taken["result"] == {"taken": True}
    assert k.value("__import__('nbagent.jupyter').jupyter.get_session().agents.consent_prompts[0].decision") is True
    _until(lambda: model_id not in nb.snapshots, "the kept prompt dropped once answered")
    update = [m for m in k.messages("update_display_data") if "Trusted: quiet starts" in json.dumps(m["content"])]
    assert update and WIDGET not in update[-1]["content"]["data"]  # the cell holds the decision, not a widget
    again = page.ask("trust", digest=digest, choice="later")
    assert again["ok"] and again["result"]["taken"] is False


def test_the_steering_box_sends_into_its_own_run_through_the_page_s_comm(kernel):
    k, _nb = kernel
    k.execute("import asyncio\ngate = asyncio.Event()\n"
              "async def first(messages):\n    await gate.wait()\n    return 'first'\n"
              "slow = ScriptedModel([first, lambda messages: messages[-1].text])\n"
              "run = %agent --model slow --new Summarise")
    close_widgets(k)
    page = Page(k)
    reply = page.ask("steer", run=k.value("run.id"), text="  in French  ")
    assert reply["ok"] and reply["result"] == {"sent": True, "note": "sent: in French"}
    k.execute("gate.set()\nawait run")
    assert k.value("run.output") == "in French"
    over = page.ask("steer", run=k.value("run.id"), text="more")
    assert over["ok"] and over["result"]["sent"] is False and "over" in over["result"]["note"]
    assert page.ask("steer", run="nope", text="x")["ok"] is False
