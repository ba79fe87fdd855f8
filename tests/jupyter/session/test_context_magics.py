"""`%agent --compact`, `%config NBAgent.max_cost / context_window / compaction_threshold`, and stubs that point at
`_agent_results`, which `inspect_variable` can read."""

from __future__ import annotations

from IPython.core.error import UsageError

from nbagent import AssistantMessage, ScriptedModel, ToolCall
from nbagent.budget.compaction import SUMMARY_REQUEST, is_summary
from nbagent.messages import UserMessage
from nbagent.transcript import check_transcript

from ..conftest import finish, run_cell


def _model() -> ScriptedModel:
    state = {"n": 0}

    def respond(messages):
        last = messages[-1]
        if isinstance(last, UserMessage) and last.text.startswith(SUMMARY_REQUEST):
            return AssistantMessage(text="They listed big tables.")
        state["n"] += 1
        if state["n"] % 4 == 0:
            return AssistantMessage(text="Listed.")
        return AssistantMessage(tool_calls=[ToolCall(name="big", arguments={"n": state["n"]})])

    return ScriptedModel([respond] * 200)


async def test_compact_by_hand_and_stubs_that_point_at_live_objects(shell):
    shell.run_line_magic("config", "NBAgent.approver = 'allow'")
    shell.run_line_magic("config", "NBAgent.context_window = 30000")
    shell.run_line_magic("config", "NBAgent.compaction_threshold = 0")  # by hand only
    shell.user_ns["model"] = _model()
    await run_cell(shell, "def big(n: int) -> list:\n    return list(range(n * 3000))")
    await run_cell(shell, "first = %agent --model model --tools big List some tables")
    first = await finish(shell.user_ns["first"])
    assert first.status == "done" and not first.compactions
    result = await run_cell(shell, "c = %agent --model model --compact")
    assert result.error_in_exec is None
    compacted = await finish(shell.user_ns["c"])
    assert len(compacted.compactions) == 1 and is_summary(compacted.messages[0])
    assert check_transcript(compacted.messages) == []
    from nbagent.jupyter import view

    shown = view(compacted)
    shown._flush()
    notes = [i for i in shown._items if type(i).__name__ == "_Note"]
    assert len(notes) == 1 and "compacted (manual)" in notes[0].widget.value  # the view says what was compacted
    await run_cell(shell, "second = %agent --model model --tools big And more")
    second = await finish(shell.user_ns["second"])
    assert second.messages[: len(compacted.messages)] == compacted.messages
    assert second.conversation_usage is not None
    # A stub names `_agent_results[...]`, a live object the model can inspect again.
    from nbagent.budget.compaction import CompactionSettings, compact

    session = __import__("nbagent.jupyter", fromlist=["get_session"]).get_session(shell)
    settings = session.agents.compaction()
    done = await compact(first.messages, None, window=30_000, force=True,
                         settings=CompactionSettings(summarize=False, locate=settings.locate))
    stub = next(m for m in done.messages if getattr(m, "name", "") == "big" and "_agent_results" in m.text)
    call_id = stub.tool_call_id
    assert shell.user_ns["_agent_results"][call_id] == list(range(3000))


async def test_compact_needs_a_conversation_and_no_prompt(shell):
    shell.user_ns["model"] = ScriptedModel([])
    result = await run_cell(shell, "%agent --model model --new --compact")
    assert isinstance(result.error_in_exec, UsageError)
    result = await run_cell(shell, "%agent --model model --compact Summarise please")
    assert isinstance(result.error_in_exec, UsageError) and "no prompt" in str(result.error_in_exec)


async def test_max_cost_from_the_config(shell):
    shell.run_line_magic("config", "NBAgent.max_cost = 0.5")
    shell.user_ns["model"] = ScriptedModel(["hi"])
    await run_cell(shell, "run = %agent --model model --new Hello")
    run = await finish(shell.user_ns["run"])
    assert run.agent.max_cost == 0.5 and "price of scripted is unknown" in run.stop_reason
