"""before_tool_call / after_tool_call / tool_result_persist: what they can do, and their isolation."""

from __future__ import annotations

import logging

from nbagent import Agent, Block, Hooks, ScriptedModel, StopAfterBatch, ToolResult, tool
from tests.helpers import assert_valid, call, calls


@tool(read_only=True)
def add(a: int, b: int) -> int:
    return a + b


def run_with(hooks: Hooks, script=None, **kw):
    script = script or [calls(call("add", a=1, b=2)), "done"]
    return Agent(model=ScriptedModel(script), tools=[add], hooks=hooks, **kw).run_sync("x")


def test_before_hook_can_block_with_a_reason():
    run = run_with(Hooks(before_tool_call=lambda call, ctx: Block("not on Sundays")))
    rec = run.calls[0]
    assert rec.status == "blocked" and rec.decision.source == "hook"
    assert rec.result.text == "Blocked: not on Sundays. The call was not executed."
    assert_valid(run)


def test_before_hook_can_change_parameters_which_are_validated_again():
    seen = []

    async def double_b(call, ctx):
        seen.append((call.arguments["a"], ctx.call_id == call.id))
        return {"b": call.arguments["b"] * 10}

    run = run_with(Hooks(before_tool_call=[double_b]))
    assert run.calls[0].arguments == {"a": 1, "b": 20} and run.calls[0].result.text == "21"
    assert seen == [(1, True)]

    run = run_with(Hooks(before_tool_call=lambda call, ctx: {"b": "not a number"}))
    rec = run.calls[0]
    assert rec.status == "invalid_arguments" and "after a before_tool_call hook changed them" in rec.result.text


def test_hooks_that_raise_are_logged_skipped_and_recorded(caplog):
    def broken(*args):
        raise RuntimeError("hook bug")

    with caplog.at_level(logging.WARNING, logger="nbagent.hooks"):
        run = run_with(Hooks(before_tool_call=broken, after_tool_call=broken, tool_result_persist=broken))
    rec = run.calls[0]
    assert rec.status == "ok" and rec.result.text == "3"
    assert len(rec.hook_errors) == 3 and all("RuntimeError: hook bug" in e for e in rec.hook_errors)
    assert "hook bug" in caplog.text


def test_after_hook_can_replace_the_result_and_stop_after_the_batch():
    def replace(call, result):
        return ToolResult(f"{result.text} (checked)", details={"raw": result.text})

    run = run_with(Hooks(after_tool_call=replace))
    assert run.calls[0].result.text == "3 (checked)" and run.calls[0].details == {"raw": "3"}

    script = [calls(call("add", a=1, b=2), call("add", a=2, b=2)), "never asked"]
    run = run_with(Hooks(after_tool_call=lambda call, result: StopAfterBatch("enough")), script)
    assert run.status == "done" and run.turns == 1 and run.stop_reason == "enough"
    assert all(c.status == "ok" for c in run.calls)  # the whole batch still finished
    assert_valid(run)

    run = run_with(Hooks(after_tool_call=lambda call, result: ToolResult("bad", is_error=True)))
    assert run.calls[0].status == "error"


def test_persist_hook_decides_what_the_transcript_keeps():
    def redact(call, result):
        return ToolResult(result.text.replace("3", "[redacted]"))

    run = run_with(Hooks(tool_result_persist=redact))
    assert run.messages[2].text == "[redacted]" and run.calls[0].result.text == "[redacted]"


def test_hook_order_before_permission_after_execution():
    order = []

    def before(call, ctx):
        order.append(("before", call.status, call.decision))

    def approver(request):
        order.append(("approve", request.call.status))
        return True

    def after(call, result):
        order.append(("after", call.decision.source))

    @tool
    def write(text: str) -> str:
        order.append(("execute",))
        return text

    Agent(model=ScriptedModel([calls(call("write", text="x")), "ok"]), tools=[write],
          hooks=Hooks(before_tool_call=before, after_tool_call=after), approver=approver).run_sync("x")
    assert order == [("before", "pending", None), ("approve", "waiting_for_approval"), ("execute",), ("after", "user")]
