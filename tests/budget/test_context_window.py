"""A long conversation against a provider stand-in that has a context window (a real local HTTP server):
300 turns, each with a 50 KB tool result, finish without one rejection, for every provider, and every
compacted transcript passes that provider's structural rules."""

from __future__ import annotations

import pytest

from nbagent import Agent, load_model, tool
from nbagent.budget.compaction import is_summary
from nbagent.errors import ContextLengthError
from nbagent.providers._http import map_http_error

from ..wire_rules import problems
from ..providers.fakeserver import FakeServer
from ..providers.windowed import CONTEXT_ERRORS, WindowedProvider

pytestmark = pytest.mark.timeout(300)

SPECS = {"anthropic": "anthropic:claude-sonnet-4-5", "openai": "openai:gpt-4.1",
         "openai-responses": "openai-responses:gpt-5", "google": "google:gemini-2.5-flash",
         "mistral": "mistral:mistral-large-latest"}
WINDOW = 60_000
PAGE = 50_000


@tool(read_only=True)
def fetch(i: int) -> str:
    """Fetch one page of the crawl."""
    return f"page {i}\n" + "lorem ipsum " * (PAGE // 12)


@pytest.mark.parametrize("provider", sorted(CONTEXT_ERRORS))
def test_the_stand_in_rejects_as_the_api_does(provider: str) -> None:
    status, body = CONTEXT_ERRORS[provider](70_000, WINDOW)
    assert isinstance(map_http_error(provider, status, body), ContextLengthError)


def _agent(provider: str, server: FakeServer, **options) -> Agent:
    model = load_model(SPECS[provider], base_url=server.url + ("/v1" if provider in ("openai", "openai-responses", "mistral") else ""),
                       api_key="test-key")
    return Agent(model, tools=[fetch], max_turns=400, context_window=WINDOW, max_result_chars=None, **options)


@pytest.mark.parametrize("provider", [p if p == "openai" else pytest.param(p, marks=pytest.mark.slow)  # the fast
                                      for p in sorted(SPECS)])  # lane keeps one wire format's 300 turns (~4 s each)
async def test_300_turns_of_50_kb_results_fit_the_window(provider: str) -> None:
    stand_in = WindowedProvider(provider, window=WINDOW, turns=300, model=SPECS[provider].split(":")[1])
    async with FakeServer() as server:
        server.add(*[stand_in] * 700)
        agent = _agent(provider, server)
        run = await agent.run("Fetch all the pages.")
    assert run.status == "done" and run.output == "Done: fetched 300 pages."
    assert stand_in.rejected == [] and stand_in.invalid == []
    assert stand_in.largest <= WINDOW
    assert len(run.compactions) >= 10
    assert any(c.summary for c in run.compactions), "stubs alone kept up for 300 turns"
    assert any(c.stubbed for c in run.compactions)
    # Every compacted transcript is valid for the provider (and for every other one).
    for target in SPECS:
        assert problems(target, load_model(SPECS[target], api_key="k").to_wire(run.messages), run.messages) == []
    # The recent turns are verbatim; the summary opens the transcript; the calls are all on record.
    assert is_summary(run.messages[0])
    assert run.messages[-2].text.startswith("page 299")
    assert len(run.calls) == 300 and all(c.status == "ok" for c in run.calls)
    assert run.calls[0].result.text.startswith("page 0")  # the whole result stays on the record
    # Usage and cost: every response counted, the summaries' too; the gauge below the window.
    assert run.usage.input_tokens > 300 * 10_000
    assert run.context_tokens < WINDOW
    assert run.cost is not None and run.cost > 0


async def test_without_compaction_the_stand_in_refuses() -> None:
    """The control: the same conversation without compaction is rejected, as the real API would."""
    stand_in = WindowedProvider("anthropic", window=WINDOW, turns=300, model="claude-sonnet-4-5")
    async with FakeServer() as server:
        server.add(*[stand_in] * 20)
        agent = _agent("anthropic", server, compaction=False)
        with pytest.raises(ContextLengthError):
            await agent.run("Fetch all the pages.")
    assert stand_in.rejected


async def test_a_rejection_compacts_and_asks_again() -> None:
    """When the runtime's measure falls short (here: automatic compaction is off), the provider's refusal
    makes the run compact and ask once more, instead of failing."""
    from nbagent.budget.compaction import CompactionSettings

    stand_in = WindowedProvider("openai", window=WINDOW, turns=30, model="gpt-4.1")
    async with FakeServer() as server:
        server.add(*[stand_in] * 100)
        agent = _agent("openai", server, compaction=CompactionSettings(auto=False))
        run = await agent.run("Fetch all the pages.")
    assert run.status == "done"
    assert stand_in.rejected and len(stand_in.rejected) == len(run.compactions)
    assert any(c.reason == "context_length" for c in run.compactions)
    assert problems("openai", agent.model.to_wire(run.messages), run.messages) == []
