"""The live view: rows, streaming arguments, progress, output, approvals by click (from any thread), Stop,
and the widget-message budget."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from nbagent import Agent, AssistantMessage, ScriptedModel, ToolCall, ToolContext, tool
from nbagent.events import ToolCallDelta, TurnStarted
from nbagent.jupyter.live.widgets import RunView
from nbagent.transcript import check_transcript

from ..conftest import finish, settle

pytestmark = pytest.mark.usefixtures("widget_messages")


@tool(destructive=True, describe_activity=lambda a: f"Deleting {a.path}",
      describe_completed_activity=lambda a, r: f"Deleted {a.path}")
def delete(path: str) -> str:
    """Delete a file."""
    return f"deleted {path}"


def start(model, tools, **options):
    """Start a run whose approvals are asked in its live view; return (run, view)."""
    holder: dict = {}
    agent = Agent(model=model, tools=tools, approver=lambda request: holder["view"].ask(request), **options)
    run = agent.start("do it")
    holder["view"] = view = RunView(run, rate=1000)
    return run, view


def html_of(view: RunView) -> str:
    """Everything the view shows, as one string of HTML."""
    out = []

    def walk(widget):
        out.append(getattr(widget, "value", "") if isinstance(getattr(widget, "value", None), str) else "")
        for child in getattr(widget, "children", ()):
            walk(child)

    walk(view.widget)
    return "\n".join(out)


def delete_calls(*paths: str) -> ScriptedModel:
    return ScriptedModel([
        AssistantMessage(text="Deleting.", tool_calls=[ToolCall(name="delete", arguments={"path": p}) for p in paths]),
        "Done.",
    ])


async def test_approve_click_runs_the_call_and_the_view_says_done():
    run, view = start(delete_calls("a.txt"), [delete])
    await settle(lambda: view.pending)
    await settle(lambda: view.pending[0].buttons)  # the question is on the row
    row = view.pending[0]
    assert "Needs your approval" in html_of(view) and "a.txt" in html_of(view)
    row.buttons["approve"].click()
    await finish(run)
    await settle(lambda: view.throttle.closed)
    assert run.calls[0].status == "ok" and run.calls[0].decision.source == "user"
    assert row.box.layout is not row.approval.box.layout or row.approval.box.layout.display == "none"
    shown = html_of(view)
    assert "Deleted a.txt" in shown and "approved by you" in shown and "nba-s-done" in shown
    assert check_transcript(run.messages) == []


async def test_deny_click_carries_the_reason_the_person_typed():
    run, view = start(delete_calls("a.txt"), [delete])
    await settle(lambda: view.pending and view.pending[0].buttons)
    row = view.pending[0]
    row.buttons["reason"].value = "keep it, it is the only copy"
    row.buttons["deny"].click()
    await finish(run)
    rec = run.calls[0]
    assert rec.status == "denied" and rec.decision.reason == "keep it, it is the only copy"
    assert "keep it, it is the only copy" in rec.result.text  # the model is told why
    await settle(lambda: view.throttle.closed)
    assert "denied by you: “keep it, it is the only copy”" in html_of(view)


async def test_each_pending_call_of_a_batch_is_decided_on_its_own():
    run, view = start(delete_calls("a.txt", "b.txt", "c.txt"), [delete])
    await settle(lambda: len(view.pending) == 3 and all(r.buttons for r in view.pending))
    first, second, third = view.rows
    second.buttons["deny"].click()
    await settle(lambda: run.calls[1].done)
    assert not run.calls[0].done and not run.calls[2].done  # the others still wait
    third.buttons["always"].click()
    first.buttons["approve"].click()
    await finish(run)
    assert [c.status for c in run.calls] == ["ok", "denied", "ok"]
    assert run.calls[2].decision.remember and "delete" in run.agent.grants


async def test_a_click_handled_on_another_thread_with_its_own_loop_reaches_the_run():
    run, view = start(delete_calls("a.txt"), [delete])
    await settle(lambda: view.pending and view.pending[0].buttons)
    button = view.pending[0].buttons["approve"]
    seen = []

    def subshell() -> None:  # what a kernel subshell thread looks like: another thread, another loop
        async def handle() -> None:
            seen.append(asyncio.get_running_loop())
            button.click()
        asyncio.run(handle())

    thread = threading.Thread(target=subshell)
    thread.start()
    thread.join(10)
    await finish(run)
    assert seen and seen[0] is not asyncio.get_running_loop()
    assert run.calls[0].status == "ok"


async def test_a_second_click_is_ignored():
    run, view = start(delete_calls("a.txt"), [delete])
    await settle(lambda: view.pending and view.pending[0].buttons)
    row = view.pending[0]
    row.buttons["deny"].click()
    row.buttons["approve"].click()
    await finish(run)
    assert run.calls[0].status == "denied"


async def test_stop_cancels_the_run_and_the_transcript_stays_valid():
    run, view = start(delete_calls("a.txt"), [delete])
    await settle(lambda: view.pending and view.pending[0].buttons)
    view.stop_button.click()
    await asyncio.wait_for(asyncio.gather(run.wait(), return_exceptions=True), 10)
    assert run.status == "cancelled" and run.calls[0].status == "cancelled"
    assert check_transcript(run.messages) == []
    await settle(lambda: view.throttle.closed)
    assert "Stopped: stopped from the notebook" in html_of(view)
    assert view.stop_button.layout.display == "none"


async def test_arguments_show_while_they_stream_then_the_activity_label():
    gate = asyncio.Event()

    class Held(ScriptedModel):
        async def stream(self, *args, **kwargs):
            await gate.wait()
            async for item in super().stream(*args, **kwargs):
                yield item

    run, view = start(Held(["ok"]), [delete])
    view._on_event(TurnStarted(1))
    view._on_event(ToolCallDelta(0, "c1", "delete", '{"path": "da', {"path": "da"}))
    view._flush()
    row = view.rows[0]
    assert row.status == "streaming"
    assert "Preparing delete" in row._body.value and "receiving arguments" in row._body.value
    assert "&quot;da&quot;" in row._body.value
    gate.set()
    await finish(run)


async def test_progress_output_and_the_message_budget(widget_messages):
    events = 100_000

    @tool(read_only=True, describe_activity=lambda a: f"Crunching {a.n} items")
    def crunch(n: int, ctx: ToolContext) -> int:
        for i in range(n):
            ctx.progress(f"item {i + 1}", fraction=(i + 1) / n, output=f"line {i}\n")
            if i % 5000 == 0:
                time.sleep(0.01)  # let the loop drain and flush now and then
        return n

    model = ScriptedModel([AssistantMessage(tool_calls=[ToolCall(name="crunch", arguments={"n": events})]), "ok"])
    agent = Agent(model=model, tools=[crunch])
    run = agent.start("go")
    view = RunView(run, rate=30)
    at_start = len(widget_messages)  # the view's own widgets, sent when it is made
    loop = asyncio.get_running_loop()
    seen_progress = []
    run.subscribe(lambda e: seen_progress.append(1) if e.kind == "tool_call_progress" else None)
    t0 = loop.time()
    await finish(run, 60)
    await settle(lambda: view.throttle.closed)
    elapsed = loop.time() - t0
    assert len(seen_progress) == events
    # The budget: at most `rate` messages a second, plus what one flush may send before the pause it earns.
    sent = len(widget_messages) - at_start
    assert sent <= 30 * elapsed + 12, (sent, elapsed)
    assert view.throttle.flushes < events / 100
    row = view.rows[0]
    assert row._tail is not None and f"line {events - 1}" in row._tail.value
    assert row._tail_folded and "output · " in row._tail_toggle.value  # a call that went well folds it away


async def test_model_text_is_markdown_and_cannot_inject_markup():
    model = ScriptedModel(['**Bold** and <img src=x onerror="alert(1)"> `code`'])
    run, view = start(model, [])
    await finish(run)
    await settle(lambda: view.throttle.closed)
    shown = html_of(view)
    assert "<strong>Bold</strong>" in shown and "<code>code</code>" in shown
    assert "<img src=x" not in shown and "&lt;img" in shown


async def test_a_failed_run_says_why_in_the_view():
    run, view = start(ScriptedModel([]), [])
    await asyncio.wait_for(asyncio.gather(run.wait(), return_exceptions=True), 10)
    await settle(lambda: view.throttle.closed)
    assert "ScriptedModelExhausted" in html_of(view)
    assert "nba-s-failed" in view._head_info.value


async def test_a_view_of_a_finished_run_shows_what_happened():
    agent = Agent(model=delete_calls("a.txt"), tools=[delete], approver="allow")
    run = await agent.run("go")
    view = RunView(run)
    await settle(lambda: view.throttle.closed)
    assert [r.record for r in view.rows] == run.calls
    assert "Deleted a.txt" in html_of(view) and "Done." in html_of(view)


def test_the_always_allow_label_names_exactly_what_is_granted():
    from types import SimpleNamespace

    from nbagent import toolbox
    from nbagent.jupyter.live.widgets import _grant_label
    from nbagent.toolbox._shellrules import suggest_pattern

    def request(tool, scope):
        return SimpleNamespace(name=tool.name, tool=tool, suggested_scope=scope)

    label = _grant_label(request(toolbox.shell, suggest_pattern("git config --get x")))
    assert label.short == "`git config --get x` (this exact command)"
    assert _grant_label(request(toolbox.shell, suggest_pattern("ls *.py"))).short == "`ls *.py` (this exact command)"
    assert _grant_label(request(toolbox.write_file, "./a.txt")).short == "write_file ./a.txt (this file only)"
    assert _grant_label(request(delete, None)).short == "every delete call"
    assert _grant_label(request(toolbox.shell, "pytest:*")).short == "shell commands matching `pytest:*`"
    assert _grant_label(request(toolbox.python, "print(1)")).short == "python: exactly this code"




async def test_the_question_names_the_run_the_call_and_the_digest_of_what_it_shows():
    import html as html_lib
    import re

    from nbagent.jupyter.live.approval import digest

    run, view = start(ScriptedModel([
        AssistantMessage(tool_calls=[ToolCall(name="delete", arguments={"path": 'a".txt\u202e'}, id='call_<1>"')]),
        "Done."]), [delete])
    await settle(lambda: view.pending)
    row = view.pending[0]
    await settle(lambda: "data-nba-digest" in html_of(view))
    found = re.search(r'<div class="nba-ask-q" data-nba-run="([^"]*)" data-nba-call="([^"]*)" '
                      r'data-nba-digest="([^"]*)">', html_of(view))
    assert found, html_of(view)
    shown_run, shown_call, shown_digest = (html_lib.unescape(g) for g in found.groups())
    assert (shown_run, shown_call) == (run.id, 'call_<1>"')  # escaped in the attribute, the same once read
    assert shown_digest == row.pending.digest == digest('call_<1>"', {"path": 'a".txt\u202e'})
    assert f"nba-run-{run.id}" in view.widget._dom_classes
    assert row.approve()
    await finish(run)


async def test_a_page_that_closes_the_view_s_widgets_is_noticed_and_said_in_one_line():
    from nbagent.jupyter.live.widgets import CLOSED_ELSEWHERE

    run, view = start(delete_calls("a.txt"), [delete])
    await settle(lambda: view.pending)
    assert "closed this view" not in html_of(view) and not view.closed_elsewhere
    # what ipykernel does when a page sends comm_close for the view's widget (on its own thread, here)
    thread = threading.Thread(target=lambda: view.widget.comm.handle_close({"content": {"data": {}}}))
    thread.start()
    thread.join(5)
    await settle(lambda: CLOSED_ELSEWHERE in html_of(view))
    assert view.closed_elsewhere and "view(run)" in html_of(view)
    assert view.pending[0].approve()  # deciding still works (here from code; in a page, through its comm)
    await finish(run)
    assert run.status == "done"


async def test_the_view_closing_its_own_widgets_is_not_taken_for_another_page():
    run, view = start(delete_calls("a.txt"), [delete])
    await settle(lambda: view.pending)
    view.pending[0].approve()
    await finish(run)
    await settle(lambda: view._closed)
    view.close()
    await asyncio.sleep(0.05)
    assert not view.closed_elsewhere
