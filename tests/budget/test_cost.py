"""Usage and cost of a recorded run, checked by hand against the price table; the budget; cache breakpoints."""

from __future__ import annotations

import json

import pytest

from nbagent import Agent, load_model
from nbagent.budget.pricing import request_cost

from ..providers.fakeserver import FakeServer, Reply
from ..providers.replay import make_tool, recorded, replace_event
from ..providers.windowed import WindowedProvider


def _with_usage(body: bytes, start: dict, delta: dict) -> bytes:
    """The recorded stream with the usage of its `message_start` and `message_delta` events replaced."""
    def start_event(line: bytes) -> bytes:
        data = json.loads(line.split(b"data: ", 1)[1])
        data["message"]["usage"] = start
        return b"event: message_start\ndata: " + json.dumps(data).encode() + b"\n\n"

    def delta_event(line: bytes) -> bytes:
        data = json.loads(line.split(b"data: ", 1)[1])
        data["usage"] = delta
        return b"event: message_delta\ndata: " + json.dumps(data).encode() + b"\n\n"

    body = replace_event(body, b'"type":"message_start"', start_event)
    return replace_event(body, b'"type":"message_delta"', delta_event)


async def test_cost_of_a_recorded_run_matches_the_price_table_by_hand() -> None:
    # claude-sonnet-4 at Anthropic: $3 per million input tokens, $15 output, $0.30 cache read, $3.75 cache write.
    first = _with_usage(recorded("anthropic", "parallel_tool_calls"),
                        {"input_tokens": 16, "cache_creation_input_tokens": 400, "cache_read_input_tokens": 0,
                         "output_tokens": 1},
                        {"output_tokens": 109})
    second = _with_usage(recorded("anthropic", "parallel_tool_calls.followup"),
                         {"input_tokens": 20, "cache_creation_input_tokens": 182, "cache_read_input_tokens": 400,
                          "output_tokens": 1},
                         {"output_tokens": 52})
    async with FakeServer() as server:
        server.add(Reply.sse(first), Reply.sse(second))
        model = load_model("anthropic:claude-sonnet-4-20250514", base_url=server.url, api_key="k")
        run = await Agent(model, tools=[make_tool("secret_retrieval_tool")]).run("What are the secrets?")
    assert run.status == "done"
    by_hand = (16 * 3 + 400 * 3.75 + 109 * 15) / 1e6 + (20 * 3 + 400 * 0.30 + 182 * 3.75 + 52 * 15) / 1e6
    assert run.cost == pytest.approx(by_hand, rel=1e-9)  # 0.0048255
    u = run.usage
    assert (u.input_tokens, u.output_tokens, u.cache_read_tokens, u.cache_write_tokens) == (1018, 161, 400, 582)
    assert run.conversation_cost == pytest.approx(by_hand)
    # A run that continues the conversation adds to the conversation's total, not to its own.
    assert "$0.0048" in str(run) and "400 cached" in str(run)


def test_an_unknown_model_has_no_price() -> None:
    from nbagent import Usage

    assert request_cost(Usage(1000, 100), "no-such-model-anywhere", "openai") is None
    assert request_cost(Usage(1000, 100), "llama3.2", "ollama") is None
    assert request_cost(Usage(1_000_000, 0), "gpt-4.1", "openai") == pytest.approx(2.0)


async def test_the_budget_stops_before_the_request_that_would_exceed_it() -> None:
    # gpt-4.1: $2 per million input tokens, $8 output. Each turn here sends 15k-60k tokens (3-12 cents).
    stand_in = WindowedProvider("openai", window=1_000_000, turns=50, model="gpt-4.1")
    async with FakeServer() as server:
        server.add(*[stand_in] * 60)
        model = load_model("openai:gpt-4.1", base_url=server.url + "/v1", api_key="k")
        from .test_context_window import fetch

        agent = Agent(model, tools=[fetch], max_turns=60, max_result_chars=None, max_cost=0.25)
        run = await agent.run("Fetch all the pages.")
    assert run.status == "done" and run.stop_reason.startswith("budget: the next request would cost about")
    assert 0 < run.cost <= 0.25
    assert 0 < stand_in.calls < 50
    from nbagent.transcript import check_transcript

    assert check_transcript(run.messages) == []
    assert "budget" in str(run)


async def test_a_budget_needs_a_known_price() -> None:
    from nbagent import ScriptedModel

    run = await Agent(ScriptedModel(["hi"]), max_cost=1.0).run("hello")
    assert run.status == "done" and "price of scripted is unknown" in run.stop_reason and run.turns == 0


async def test_anthropic_cache_breakpoints_stay_within_four() -> None:
    """Instructions, tools, and the conversation: the last user turn and the one before it (so the cache written
    by the previous request is read even after a large batch of results)."""
    stand_in = WindowedProvider("anthropic", window=1_000_000, turns=3, model="claude-sonnet-4-5")
    async with FakeServer() as server:
        server.add(*[stand_in] * 5)
        model = load_model("anthropic:claude-sonnet-4-5", base_url=server.url, api_key="k")
        from .test_context_window import fetch

        await Agent(model, tools=[fetch], instructions="Be brief.").run("Fetch.")
        bodies = [r.json() for r in server.requests]
    for body in bodies:
        marks = json.dumps(body).count('"cache_control"')
        assert marks <= 4
    last = bodies[-1]
    users = [m for m in last["messages"] if m["role"] == "user"]
    assert "cache_control" in users[-1]["content"][-1] and "cache_control" in users[-2]["content"][-1]
    assert json.dumps(last).count('"cache_control"') == 4


async def test_a_resumed_conversation_keeps_its_cost(tmp_path) -> None:
    async with FakeServer() as server:
        server.add(Reply.sse(recorded("anthropic", "parallel_tool_calls")),
                   Reply.sse(recorded("anthropic", "parallel_tool_calls.followup")))
        model = load_model("anthropic:claude-sonnet-4-20250514", base_url=server.url, api_key="k")
        agent = Agent(model, tools=[make_tool("secret_retrieval_tool")], workspace=tmp_path, session=True)
        first = await agent.run("What are the secrets?")
    assert first.cost and agent.conversation_spend.cost == pytest.approx(first.cost)
    from nbagent import ScriptedModel

    later = Agent(ScriptedModel(["Nothing more."]), workspace=tmp_path).resume(agent.session_id)
    assert later.conversation_spend.cost == pytest.approx(first.cost)
    assert later.conversation_spend.usage.input_tokens == first.usage.input_tokens
