"""Compaction with ScriptedModel: stubs, summaries, the pairing of calls and results, reasoning kept, the session's
record, compaction by hand, and the conversation's usage across runs."""

from __future__ import annotations

import pytest

from nbagent import Agent, AssistantMessage, ScriptedModel, ToolCall, Usage, tool
from nbagent.budget.compaction import STUB_PREFIX, SUMMARY_REQUEST, CompactionSettings, compact, is_summary
from nbagent.budget.window import context_window, measure
from nbagent.messages import Reasoning, TextBlock, ToolResultMessage, UserMessage
from nbagent.sessions import load_session
from nbagent.transcript import check_transcript

from ..wire_rules import problems

PAGE = 20_000


@tool(read_only=True)
def fetch(i: int) -> str:
    """Fetch a page."""
    return f"page {i}\n" + "data " * (PAGE // 5)


def crawler(turns: int, *, provider: str | None = None) -> ScriptedModel:
    """A model that fetches `turns` pages (with reasoning the provider needs back), then answers; it summarises
    when asked to."""
    made = {"calls": 0}

    def respond(messages):
        last = messages[-1]
        if isinstance(last, UserMessage) and last.text.startswith(SUMMARY_REQUEST):
            return AssistantMessage(text=f"The agent fetched pages up to {made['calls'] - 1}.",
                                    usage=Usage(len(last.text) // 4, 20))
        if made["calls"] >= turns:
            return AssistantMessage(text="All fetched.", usage=Usage(1000, 5))
        n = made["calls"]
        made["calls"] += 1
        reasoning = []
        call = ToolCall(name="fetch", arguments={"i": n})
        if provider == "anthropic":
            reasoning = [Reasoning(text="next", signature=f"sig{n}", provider="anthropic")]
        elif provider == "openai-responses":
            reasoning = [Reasoning(encrypted=f"enc{n}", id=f"rs_{n}", provider="openai-responses")]
        elif provider == "google":
            call.provider_data = {"thoughtSignature": f"g{n}"}
        return AssistantMessage(tool_calls=[call], reasoning=reasoning, provider=provider)

    return ScriptedModel([respond] * 10_000)


WIRE = {"anthropic": "anthropic:claude-sonnet-4-5", "openai": "openai:gpt-4.1",
        "openai-responses": "openai-responses:gpt-5", "google": "google:gemini-2.5-flash",
        "mistral": "mistral:mistral-large-latest"}


@pytest.mark.parametrize("provider", ["anthropic", "openai-responses", "google"])
def test_reasoning_the_provider_needs_is_kept_through_compaction(provider: str) -> None:
    from nbagent import load_model

    run = Agent(crawler(150, provider=provider), tools=[fetch], context_window=20_000, max_turns=200).run_sync("go")
    assert run.status == "done" and run.compactions
    assert any(c.summary for c in run.compactions) and any(c.stubbed for c in run.compactions)
    assert check_transcript(run.messages) == []
    for target, spec in WIRE.items():
        model = load_model(spec, api_key="k")
        assert problems(target, model.to_wire(run.messages), run.messages) == [], target


def test_stubs_say_what_was_there_and_where_it_lives() -> None:
    locate = lambda m: f"inspect_variable('_agent_results[\"{m.tool_call_id}\"]')"  # noqa: E731
    agent = Agent(crawler(12), tools=[fetch], context_window=40_000, max_turns=20,
                  compaction=CompactionSettings(locate=locate, summarize=False))
    run = agent.run_sync("go")
    stubs = [m for m in run.messages if isinstance(m, ToolResultMessage) and m.text.startswith(STUB_PREFIX)]
    assert stubs and all("fetch" in m.text and "characters" in m.text and "_agent_results" in m.text for m in stubs)
    assert "'page 0 data data" in stubs[0].text
    # Every call keeps its result, in place; the whole results are still on the run's records.
    assert check_transcript(run.messages) == []
    assert all(r.result.text.startswith(f"page {i}") for i, r in enumerate(run.calls))
    replaced = [m for c in run.compactions for m in c.replaced if isinstance(m, ToolResultMessage)]
    assert replaced and all(len(m.text) > PAGE // 2 for m in replaced)


def test_the_gauge_uses_the_reported_tokens_and_estimates_the_rest() -> None:
    messages = [UserMessage("hi"), AssistantMessage(text="hello", usage=Usage(5_000, 100)), UserMessage("x" * 4_000)]
    tokens, measured = measure(messages)
    assert measured and 5_100 + 1_000 <= tokens <= 5_100 + 1_010
    tokens, measured = measure(messages[:1])
    assert not measured and tokens < 10


def test_windows_known_and_overridden() -> None:
    from nbagent import load_model

    assert context_window(load_model("anthropic:claude-sonnet-4-5", api_key="k")) == 200_000
    assert context_window(load_model("openai:gpt-4o-mini", api_key="k")) == 128_000
    assert context_window(load_model("google:gemini-2.5-pro", api_key="k")) == 1_048_576
    assert context_window(ScriptedModel()) is None
    assert context_window(ScriptedModel(), 5_000) == 5_000


async def test_compact_by_hand_and_continue() -> None:
    model = crawler(8)
    agent = Agent(model, tools=[fetch], context_window=400_000, max_turns=20)
    first = await agent.run("go")
    assert not first.compactions  # far from the window
    compacted = await agent.compact(first)
    assert compacted.status == "done" and len(compacted.compactions) == 1
    c = compacted.compactions[0]
    assert c.reason == "manual" and c.summary and is_summary(compacted.messages[0])
    assert compacted.messages[-1].text == "All fetched." and len(compacted.messages) < len(first.messages)
    assert c.replaced == first.messages[: c.end]
    # The conversation continues from the compacted transcript, and its usage adds up across runs.
    model.add("Continuing.")
    second = await agent.run("more", history=compacted)
    assert second.messages[: len(compacted.messages)] == compacted.messages
    assert second.conversation_usage.input_tokens == (first.usage + compacted.usage + second.usage).input_tokens
    assert "compacted (manual)" in str(compacted)
    from nbagent import render  # the view says how long the conversation was, not what is left of it

    assert render.history_count(compacted) == len(first.messages) and render.history_count(first) == 0
    assert f"continues a conversation of {len(first.messages)} messages" in render.run_html(compacted)


def test_nothing_to_compact() -> None:
    run = Agent(ScriptedModel(["hi"]), context_window=1_000).run_sync("hello")
    again = Agent(ScriptedModel([]), context_window=1_000).compact_sync(run)
    assert again.compactions == [] and again.stop_reason.startswith("nothing to compact")


def test_the_session_record_keeps_what_was_compacted(tmp_path) -> None:
    agent = Agent(crawler(40), tools=[fetch], context_window=40_000, max_turns=60, workspace=tmp_path, session=True)
    run = agent.run_sync("go")
    assert run.compactions
    stored = load_session(tmp_path, agent.session_id)
    # Loading gives the compacted transcript (what the next request is built from)...
    assert [type(m) for m in stored.messages] == [type(m) for m in run.messages]
    assert [getattr(m, "text", None) for m in stored.messages] == [getattr(m, "text", None) for m in run.messages]
    assert len(stored.compactions) == len(run.compactions)
    # ...and the record keeps every message ever written, whole.
    lines = (tmp_path / ".nbagent" / "sessions" / f"{agent.session_id}.jsonl").read_text().splitlines()
    written = [line for line in lines if '"kind":"message"' in line.replace(" ", "")]
    assert sum(1 for line in written if '"role":"tool"' in line.replace(" ", "")) == 40
    assert '"kind":"compaction"' in "".join(lines).replace(" ", "")
    # A resumed conversation continues from the compacted transcript.
    again = Agent(ScriptedModel(["Hello again."]), workspace=tmp_path).resume(agent.session_id)
    assert check_transcript(again.conversation) == []
    assert is_summary(again.conversation[0]) or any(
        getattr(m, "text", "").startswith(STUB_PREFIX) for m in again.conversation)
    assert len(again.conversation) == len(run.messages)


async def test_compact_function_on_its_own() -> None:
    messages = [UserMessage("start")]
    for i in range(10):
        call = ToolCall(name="fetch", arguments={"i": i})
        messages += [AssistantMessage(tool_calls=[call]),
                     ToolResultMessage(call.id, "fetch", [TextBlock("y" * 8_000)])]
    done = await compact(messages, None, window=10_000, settings=CompactionSettings(summarize=False))
    assert done is not None and done.stubbed > 0 and check_transcript(done.messages) == []
    assert done.tokens_after < done.tokens_before


def test_settings_are_checked() -> None:
    from nbagent.errors import ConfigurationError

    with pytest.raises(ConfigurationError):
        Agent(ScriptedModel(), compaction=1.5)
    with pytest.raises(ConfigurationError):
        Agent(ScriptedModel(), max_cost=-1)
    with pytest.raises(ConfigurationError):
        Agent(ScriptedModel(), context_window=0)
    assert Agent(ScriptedModel(), compaction=0.9).compaction.threshold == 0.9
    assert Agent(ScriptedModel(), compaction=False).compaction is None


async def test_a_failed_summary_request_leaves_stubs_and_the_run_goes_on() -> None:
    from nbagent.errors import RateLimitError

    def refuse(messages):
        raise RateLimitError("rate limited", status=429, provider="scripted")

    messages = [UserMessage("start")]
    for i in range(10):
        call = ToolCall(name="fetch", arguments={"i": i})
        messages += [AssistantMessage(tool_calls=[call]),
                     ToolResultMessage(call.id, "fetch", [TextBlock("y" * 8_000)])]
    done = await compact(messages, ScriptedModel([refuse]), window=10_000, force=True)
    assert done is not None and done.summary is None and done.stubbed > 0 and "no summary" in done.reason
    assert check_transcript(done.messages) == []


def test_a_script_of_plain_responses_is_not_spent_on_summaries_and_the_view_keeps_what_it_showed() -> None:
    turns = 30
    script = [AssistantMessage(text=f"Looking at page {i}.", tool_calls=[ToolCall(name="fetch", arguments={"i": i})])
              for i in range(turns)] + ["All fetched."]
    model = ScriptedModel(script)
    assert not model.writes_summaries and crawler(1).writes_summaries
    run = Agent(model, tools=[fetch], context_window=20_000, max_turns=turns + 5).run_sync("go")
    assert run.status == "done" and run.output == "All fetched.", run.error  # no scripted turn went to a summary
    assert run.compactions and any(c.summary and c.summary.startswith("Digest of the earlier turns")
                                   for c in run.compactions)
    page = run._repr_html_()
    # what the run showed stays, in order, with the compactions where they happened
    positions = [page.index(f"Looking at page {i}.") for i in range(turns)]
    assert positions == sorted(positions)
    first_note = page.index('<div class="nba-compacted">')
    assert positions[0] < first_note < positions[-1]


def test_a_compaction_that_saves_nothing_says_so() -> None:
    from nbagent.budget.compaction import Compaction

    grew = Compaction(start=0, end=5, replaced=[], replacement=[], messages=[], summarized=5, tokens_before=803,
                      tokens_after=847, reason="manual")
    assert str(grew).endswith("803 -> 847 tokens (the conversation was already short: its summary saves nothing)")
    shrank = Compaction(start=0, end=5, replaced=[], replacement=[], messages=[], summarized=5, tokens_before=9000,
                        tokens_after=800, reason="manual")
    assert str(shrank).endswith("9,000 -> 800 tokens")
