"""The turn loop and the lifecycle of a call, end to end with ScriptedModel."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from nbagent import (
    Agent, AssistantMessage, MaxTurnsExceeded, ScriptedModel, ScriptedModelExhausted, ToolCall, ToolContext,
    ToolResult, ToolResultMessage, UserMessage, tool,
)
from nbagent.events import ModelResponse, RunFinished, RunStarted, TextDelta, ToolCallProgress, TurnStarted
from tests.helpers import assert_valid, call, calls, raw


@tool(read_only=True)
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool(read_only=True)
def boom(x: int) -> int:
    """Always fails."""
    raise ValueError(f"no good: {x}")


def agent(script, *tools, **kw) -> Agent:
    kw.setdefault("approver", "allow")
    return Agent(model=ScriptedModel(script), tools=list(tools) or [add], **kw)


def test_one_call_then_answer():
    run = agent([calls(call("add", a=2, b=3)), "It is 5."]).run_sync("2+3?")
    assert run.status == "done" and run.output == "It is 5."
    assert [type(m).__name__ for m in run.messages] == [
        "UserMessage", "AssistantMessage", "ToolResultMessage", "AssistantMessage"]
    rec = run.calls[0]
    assert rec.status == "ok" and rec.arguments == {"a": 2, "b": 3} and rec.result.text == "5"
    assert rec.decision.source == "read_only"
    assert rec.wire == {"role": "tool", "tool_call_id": rec.id, "name": "add",
                        "content": [{"type": "text", "text": "5"}], "is_error": False}
    assert run.turns == 2
    assert_valid(run)


def test_results_are_appended_in_call_order_paired_by_id():
    @tool(read_only=True)
    async def slow(n: int) -> int:
        await asyncio.sleep(0.05 * n)
        return n

    script = [calls(call("slow", n=3), call("slow", n=1), call("slow", n=2)), "done"]
    run = agent(script, slow).run_sync("go")
    assistant = run.messages[1]
    results = run.messages[2:5]
    assert [r.tool_call_id for r in results] == [c.id for c in assistant.tool_calls]
    assert [r.text for r in results] == ["3", "1", "2"]
    assert_valid(run)


def test_unknown_tool_is_an_error_result_naming_what_is_available():
    run = agent([calls(call("substract", a=1)), "sorry"]).run_sync("x")
    rec = run.calls[0]
    assert rec.status == "not_found" and rec.result.is_error
    assert "Tool 'substract' does not exist. Available tools: add." == rec.result.text
    assert run.status == "done"
    assert_valid(run)


def test_invalid_arguments_tell_the_model_what_was_wrong_and_the_run_goes_on():
    script = [calls(raw("add", '{"a": 1, "b": "two"}')), calls(call("add", a=1, b=2)), "3"]
    run = agent(script).run_sync("x")
    bad, good = run.calls
    assert bad.status == "invalid_arguments" and bad.raw_arguments == '{"a": 1, "b": "two"}'
    assert "Invalid arguments for add" in bad.result.text and "b: Input should be a valid integer" in bad.result.text
    assert '"properties"' in bad.result.text  # the schema, so the model can retry
    assert good.status == "ok"
    assert_valid(run)


def test_repaired_arguments_are_recorded():
    run = agent([calls(raw("add", "```json\n{'a': 1, 'b': 2,}\n```")), "3"]).run_sync("x")
    rec = run.calls[0]
    assert rec.status == "ok" and rec.result.text == "3"
    assert rec.repairs[0] == "stripped a Markdown code fence" and len(rec.repairs) >= 2


def test_failing_tool_becomes_an_error_result():
    run = agent([calls(call("boom", x=1)), "it failed"], boom).run_sync("x")
    rec = run.calls[0]
    assert rec.status == "error" and rec.result.is_error
    assert rec.result.text == "Error: ValueError: no good: 1"
    assert isinstance(rec.error, ValueError) and rec.result.details is rec.error
    assert run.status == "done"
    assert_valid(run)


def test_unserialisable_return_value_becomes_an_error_result():
    class Weird:
        def __repr__(self):
            raise RuntimeError("cannot show me")

    @tool(read_only=True)
    def weird() -> object:
        return Weird()

    run = agent([calls(call("weird")), "ok"], weird).run_sync("x")
    rec = run.calls[0]
    assert rec.status == "error" and "cannot be shown as text" in rec.result.text
    assert isinstance(rec.result.details, Weird)
    assert_valid(run)


def test_plain_objects_are_kept_as_details_with_a_faithful_text():
    import dataclasses
    import datetime

    @dataclasses.dataclass
    class Row:
        name: str
        when: datetime.date

    @tool(read_only=True)
    def rows() -> list:
        return [Row("a", datetime.date(2024, 1, 2))]

    run = agent([calls(call("rows")), "ok"], rows).run_sync("x")
    rec = run.calls[0]
    assert isinstance(rec.details[0], Row)
    assert '"when": "2024-01-02"' in rec.result.text


def test_long_results_are_cut_for_the_model_and_kept_whole():
    @tool(read_only=True)
    def big() -> str:
        return "".join(f"line {i}\n" for i in range(20000))

    run = agent([calls(call("big")), "ok"], big, max_result_chars=1000).run_sync("x")
    rec = run.calls[0]
    assert len(rec.result.text) < 1300
    assert "characters cut here" in rec.result.text and rec.result.text.startswith("line 0\n")
    assert rec.result.text.rstrip().endswith("line 19999")
    assert rec.details.count("\n") == 20000  # the whole output is kept


def test_terminate_ends_the_run_when_every_result_asks():
    @tool(read_only=True)
    def finish(answer: str) -> ToolResult:
        return ToolResult(answer, terminate=True)

    run = agent([calls(call("finish", answer="42"), text="Finishing."), "never asked"], finish).run_sync("x")
    assert run.status == "done" and run.turns == 1 and run.output == "Finishing."
    # one result without terminate keeps the loop going
    script = [calls(call("finish", answer="a"), call("add", a=1, b=1)), "next turn"]
    run = agent(script, finish, add).run_sync("x")
    assert run.turns == 2 and run.output == "next turn"
    assert_valid(run)


async def test_max_turns_fails_clearly_with_a_valid_transcript():
    script = [calls(call("add", a=i, b=i)) for i in range(5)]
    a = agent(script, max_turns=3)
    run = a.start("loop forever")
    with pytest.raises(MaxTurnsExceeded, match="max_turns=3"):
        await run
    assert run.status == "failed" and run.turns == 3 and len(run.calls) == 3
    assert a.model.remaining == 2
    assert_valid(run)


async def test_failed_run_keeps_its_state():
    a = agent([calls(call("add", a=1, b=1))], max_turns=5)
    run = a.start("x")
    with pytest.raises(ScriptedModelExhausted, match="no response left"):
        await run
    assert run.status == "failed" and isinstance(run.error, ScriptedModelExhausted)
    assert len(run.calls) == 1 and run.calls[0].status == "ok"
    assert_valid(run)


async def test_events_describe_the_run_in_order():
    seen = []
    a = agent([calls(call("add", a=1, b=2), text="Adding."), "3"])
    run = a.start("x", on_event=seen.append)
    await run
    kinds = [e.kind for e in seen]
    assert kinds[0] == "run_started" and kinds[-1] == "run_finished"
    assert kinds.index("turn_started") < kinds.index("text_delta") < kinds.index("model_response")
    assert kinds.index("tool_call_started") < kinds.index("tool_call_finished")
    assert isinstance(seen[1], TurnStarted) and seen[1].tools == ("add",)
    # deltas go to subscribers only; the run keeps the structural events
    assert not any(isinstance(e, TextDelta) for e in run.events)
    assert any(isinstance(e, ModelResponse) for e in run.events)
    assert isinstance(run.events[0], RunStarted) and isinstance(run.events[-1], RunFinished)


async def test_progress_reaches_listeners_and_never_the_history():
    @tool(read_only=True)
    async def work(n: int, ctx: ToolContext) -> str:
        for i in range(n):
            ctx.progress(f"step {i}", fraction=(i + 1) / n, output=f"out {i}\n")
            await asyncio.sleep(0)
        return "done"

    @tool(read_only=True)
    def work_sync(n: int, ctx: ToolContext) -> str:
        for i in range(n):
            ctx.progress(f"step {i}", fraction=(i + 1) / n, output=f"sync {i}\n")
        return "done"

    progress = []
    a = agent([calls(call("work", n=50), call("work_sync", n=2000)), "ok"], work, work_sync)
    run = a.start("x", on_event=lambda e: progress.append(e) if isinstance(e, ToolCallProgress) else None)
    await run
    rec, rec_sync = run.calls
    assert len([p for p in progress if p.call is rec]) == 50
    assert len([p for p in progress if p.call is rec_sync]) == 2000  # from a worker thread, none lost
    assert rec.fraction == 1.0 and rec.progress_count == 50 and rec.output_tail.text.endswith("out 49\n")
    assert rec_sync.output_tail.text.endswith("sync 1999\n") and len(rec_sync.progress) == 100
    for m in run.messages:
        assert "step" not in getattr(m, "text", "")
    assert not any(isinstance(e, ToolCallProgress) for e in run.events)


async def test_parallel_calls_run_concurrently():
    @tool(read_only=True)
    async def nap(s: float) -> str:
        await asyncio.sleep(s)
        return "ok"

    @tool(read_only=True)
    def block(s: float) -> str:
        time.sleep(s)
        return "ok"

    script = [calls(*[call("nap", s=0.3) for _ in range(4)], *[call("block", s=0.3) for _ in range(4)]), "done"]
    t0 = time.monotonic()
    run = await agent(script, nap, block).run("x")
    elapsed = time.monotonic() - t0
    assert all(c.status == "ok" for c in run.calls)
    # concurrency, not speed: sequential execution would need 2.4 s
    assert elapsed < 2.0


async def test_one_sequential_call_makes_the_whole_batch_sequential():
    order = []

    @tool(read_only=True)
    async def step(name: str) -> str:
        order.append(("start", name))
        await asyncio.sleep(0.02)
        order.append(("end", name))
        return name

    @tool(read_only=True, execution_mode="sequential")
    async def seq(name: str) -> str:
        order.append(("start", name))
        order.append(("end", name))
        return name

    script = [calls(call("step", name="a"), call("seq", name="b"), call("step", name="c")), "done"]
    await agent(script, step, seq).run("x")
    assert order == [("start", "a"), ("end", "a"), ("start", "b"), ("end", "b"), ("start", "c"), ("end", "c")]


async def test_timeouts_for_async_and_sync_tools():
    stopped = threading.Event()

    @tool(read_only=True, timeout=0.2)
    async def hang() -> str:
        await asyncio.sleep(30)
        return "never"

    @tool(read_only=True, timeout=0.2)
    def spin(ctx: ToolContext) -> str:
        try:
            while True:  # pure Python: interrupted where Python allows it
                pass
        finally:
            stopped.set()

    @tool(read_only=True, timeout=5)
    async def raises_timeout() -> str:
        raise TimeoutError("the tool's own timeout")

    run = await agent([calls(call("hang"), call("spin"), call("raises_timeout")), "ok"], hang, spin, raises_timeout).run("x")
    a, b, c = run.calls
    assert a.status == "timeout" and a.result.text == "Tool call timed out after 0.2 s and was stopped."
    assert b.status == "timeout"
    assert stopped.wait(2), "the sync tool's thread was stopped"
    assert c.status == "error" and "the tool's own timeout" in c.result.text
    assert_valid(run)


async def test_cancel_gives_every_call_in_flight_a_cancelled_result():
    started = asyncio.Event()
    thread_stopped = threading.Event()

    @tool(read_only=True)
    async def wait_long() -> str:
        started.set()
        await asyncio.sleep(30)
        return "never"

    @tool(read_only=True)
    def block_long(ctx: ToolContext) -> str:
        try:
            while not ctx.cancelled:
                time.sleep(0.01)
            return "noticed"
        finally:
            thread_stopped.set()

    run = agent([calls(call("wait_long"), call("block_long"), call("add", a=1, b=1)), "never"],
                wait_long, block_long, add).start("x")
    await asyncio.wait_for(started.wait(), 5)
    await asyncio.sleep(0.05)
    assert run.cancel() is True
    await run
    assert run.status == "cancelled"
    statuses = [c.status for c in run.calls]
    assert statuses[0] == "cancelled" and statuses[1] == "cancelled" and statuses[2] == "ok"
    assert "cancelled" in run.calls[0].result.text
    assert thread_stopped.is_set()
    assert not [t for t in asyncio.all_tasks() if t is not asyncio.current_task() and not t.done()]
    assert_valid(run)
    assert run.cancel() is False


async def test_cancel_while_waiting_for_approval_and_while_the_model_streams():
    asked = asyncio.Event()

    async def approver(request):
        asked.set()
        await asyncio.sleep(30)
        return True

    @tool
    def write(text: str) -> str:
        return text

    a = Agent(model=ScriptedModel([calls(call("write", text="x"))]), tools=[write], approver=approver)
    run = a.start("x")
    await asyncio.wait_for(asked.wait(), 5)
    assert run.status == "waiting_for_approval"
    run.cancel()
    await run
    assert run.status == "cancelled" and run.calls[0].status == "cancelled"
    assert_valid(run)

    slow = ScriptedModel(["a long answer " * 20], delay=0.01)
    run = Agent(model=slow).start("x")
    await asyncio.sleep(0.1)
    run.cancel()
    await run
    assert run.status == "cancelled"
    assert isinstance(run.messages[-1], AssistantMessage) and run.messages[-1].stop_reason == "cancelled"
    assert 0 < len(run.messages[-1].text) < len("a long answer " * 20)
    assert_valid(run)


async def test_cancel_from_another_thread():
    @tool(read_only=True)
    async def wait_long() -> str:
        await asyncio.sleep(30)
        return "never"

    run = agent([calls(call("wait_long"))], wait_long).start("x")
    await asyncio.sleep(0.05)
    threading.Thread(target=run.cancel).start()
    await asyncio.wait_for(run.wait(), 5)
    assert run.status == "cancelled"


async def test_awaiting_cell_cancelled_cancels_the_run():
    @tool(read_only=True)
    async def wait_long() -> str:
        await asyncio.sleep(30)
        return "never"

    run = agent([calls(call("wait_long"))], wait_long).start("x")
    waiter = asyncio.ensure_future(run.wait())
    await asyncio.sleep(0.05)
    waiter.cancel()  # what the kernel's interrupt button does to a cell awaiting the run
    with pytest.raises(asyncio.CancelledError):
        await waiter
    await asyncio.sleep(0.01)
    assert run.status == "cancelled"
    assert_valid(run)


def test_ids_are_made_unique_and_missing_ids_generated():
    script = [
        calls(ToolCall(name="add", arguments={"a": 1, "b": 1}, id="same"),
              ToolCall(name="add", arguments={"a": 2, "b": 2}, id="same")),
        calls(ToolCall(name="add", arguments={"a": 3, "b": 3}, id="same")),
        "ok",
    ]
    run = agent(script).run_sync("x")
    ids = [c.id for c in run.calls]
    assert len(set(ids)) == 3 and ids[0] == "same"
    assert_valid(run)


def test_incomplete_calls_are_never_executed():
    ran = []

    @tool
    def write(path: str, content: str) -> str:
        ran.append(path)
        return "written"

    cut = ToolCall(name="write", raw_arguments='{"path": "a.txt", "content": "hel', incomplete=True)
    run = agent([AssistantMessage(tool_calls=[cut], stop_reason="max_tokens"), "ok"], write).run_sync("x")
    assert ran == [] and run.calls[0].status == "invalid_arguments"
    assert "cut off" in run.calls[0].result.text


def test_history_continues_a_conversation():
    a = agent([calls(call("add", a=1, b=2)), "3", calls(call("add", a=3, b=3)), "6"])
    first = a.run_sync("1+2?")
    second = a.run_sync("and 3+3?", history=first)
    assert second.output == "6"
    assert second.messages[: len(first.messages)] == first.messages
    assert [type(m).__name__ for m in second.new_messages][0] == "UserMessage"
    assert a.model.requests[2].message_count == len(first.messages) + 1
    assert_valid(second)


def test_run_sync_inside_a_loop_and_start_outside_one_say_what_to_do():
    from nbagent import ConfigurationError

    a = agent(["hi"])
    with pytest.raises(ConfigurationError, match="needs a running event loop"):
        a.start("x")

    async def inside():
        with pytest.raises(ConfigurationError, match="await agent.run"):
            a.run_sync("x")

    asyncio.run(inside())
    with pytest.raises(ConfigurationError, match="no model"):
        Agent().run_sync("x")


def test_requests_are_recorded_and_tools_sent_in_a_stable_order():
    @tool(read_only=True)
    def zeta() -> str:
        return "z"

    @tool(read_only=True, sort_key="0-first")
    def omega() -> str:
        return "o"

    run = agent([calls(call("zeta")), "ok"], zeta, add, omega).run_sync("x")
    assert [r.tools for r in run.requests] == [("omega", "add", "zeta")] * 2
    body = run.requests[1].body()
    assert [t["name"] for t in body["tools"]] == ["omega", "add", "zeta"]
    assert body["messages"][-1]["role"] == "tool"


def test_instructions_can_be_computed_per_run():
    a = agent(["hi"], instructions=lambda run: f"You are run with {len(run.messages)} messages.")
    a.run_sync("x")
    assert a.model.requests[0].instructions == "You are run with 1 messages."


def test_usage_is_summed_on_the_run():
    from nbagent import Usage

    script = [AssistantMessage(tool_calls=[call("add", a=1, b=1)], usage=Usage(10, 5, 2, 1)),
              AssistantMessage(text="2", usage=Usage(20, 3))]
    run = agent(script).run_sync("x")
    assert run.usage == Usage(30, 8, 2, 1)


def test_tool_results_with_images_reach_the_transcript():
    from PIL import Image

    @tool(read_only=True)
    def picture() -> object:
        return Image.new("RGB", (4000, 100), "red")

    run = agent([calls(call("picture")), "a red strip"], picture).run_sync("x")
    rec = run.calls[0]
    image = rec.result.images[0]
    assert image.mime_type in ("image/png", "image/jpeg")
    from nbagent.tools.images import image_size as _image_size
    assert max(_image_size(image.data, image.mime_type)) <= 1568  # shrunk to provider limits
    assert isinstance(rec.details, Image.Image)
    msg = run.messages[2]
    assert isinstance(msg, ToolResultMessage) and msg.content[0] is image


def test_user_message_with_blocks():
    from nbagent import ImageBlock, TextBlock

    png = b"\x89PNG\r\n\x1a\n" + b"\0" * 30
    run = agent(["I see it"]).run_sync([TextBlock("what is this?"), ImageBlock(png)])
    assert isinstance(run.messages[0], UserMessage) and len(run.messages[0].content) == 2


@pytest.mark.parametrize("how", ["run.cancel", "waiter cancelled"])
async def test_work_a_tool_hands_to_a_thread_sees_the_cancellation(how):
    """Each call's cancellation token is linked to the run's: however the run is stopped, a thread that
    polls `ctx.cancelled` stops too."""
    started = threading.Event()
    noticed = threading.Event()

    def work(ctx: ToolContext) -> str:
        started.set()
        deadline = time.monotonic() + 10
        while not ctx.cancelled and time.monotonic() < deadline:
            time.sleep(0.005)
        if ctx.cancelled:
            noticed.set()
        return "over"

    @tool(read_only=True)
    async def offload(ctx: ToolContext) -> str:
        return await asyncio.to_thread(work, ctx)  # asyncio cannot stop this thread: only the token can

    run = agent([calls(call("offload")), "never"], offload).start("x")
    assert await asyncio.to_thread(started.wait, 5)
    if how == "run.cancel":
        run.cancel()
        await run
    else:
        waiter = asyncio.ensure_future(run.wait())  # the cell awaiting the run is interrupted
        await asyncio.sleep(0.02)
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter
    assert await asyncio.to_thread(noticed.wait, 5), "the thread never saw ctx.cancelled"
    assert run.status == "cancelled" and run.calls[0].status == "cancelled"
    assert_valid(run)
