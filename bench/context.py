"""A 1,000-turn conversation: per-turn cost stays flat, and what compaction costs in time.

    python bench/context.py [--turns 1000] [--page 50000] [--window 200000]

Workload: one run of `--turns` turns; each turn the model calls `fetch(i)`, whose result is `--page`
characters of text (50 KB), then the next turn. The model is scripted and stands in for
anthropic:claude-sonnet-4-5: each response reports as its input tokens the size of the request it was
given (four characters a token), so the loop measures the context as it would with a provider, and each
response is priced from the price table ($3 per million input tokens, $15 output). Summary requests are
answered with a short summary and priced the same way.

Reported: the tokens sent and the cost of turns around turn 100 and around turn 1,000 (means over turns
51-150 and 901-1,000, since compaction makes the per-turn cost a sawtooth), their ratio (target: at most
1.3), the peak; how many compactions there were and the time spent deciding (measuring the transcript
before every request) and doing them (stubs, the summary's text; the scripted summary itself is instant),
next to the run's whole time. Without compaction, turn 1,000 would send about turns x page / 4 tokens.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from nbagent import Agent, AssistantMessage, ScriptedModel, ToolCall, Usage, tool  # noqa: E402
from nbagent.agent import loop as loop_module  # noqa: E402
from nbagent.budget.compaction import SUMMARY_REQUEST  # noqa: E402
from nbagent.budget.pricing import request_cost  # noqa: E402
from nbagent.budget.window import estimate_tokens  # noqa: E402
from nbagent.messages import UserMessage  # noqa: E402

MODEL, PROVIDER = "claude-sonnet-4-5", "anthropic"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=1000)
    parser.add_argument("--page", type=int, default=50_000)
    parser.add_argument("--window", type=int, default=200_000)
    args = parser.parse_args()

    page = "lorem ipsum dolor sit amet " * (args.page // 27 + 1)

    @tool(read_only=True)
    def fetch(i: int) -> str:
        """Fetch one page."""
        return f"page {i}\n{page[:args.page]}"

    sent: list[int] = []   # input tokens of each tool-turn request, in order
    stamps: list[float] = []  # when each tool-turn request was made
    calls = {"n": 0}

    def respond(messages):
        tokens = estimate_tokens(messages) + 200
        last = messages[-1]
        if isinstance(last, UserMessage) and last.text.startswith(SUMMARY_REQUEST):
            return AssistantMessage(text=f"Fetched pages 0 to {calls['n'] - 1}; nothing else happened.",
                                    usage=Usage(tokens, 200), model=MODEL, provider=PROVIDER)
        sent.append(tokens)
        stamps.append(time.perf_counter())
        if calls["n"] >= args.turns:
            return AssistantMessage(text="Done.", usage=Usage(tokens, 5), model=MODEL, provider=PROVIDER)
        calls["n"] += 1
        return AssistantMessage(tool_calls=[ToolCall(name="fetch", arguments={"i": calls["n"] - 1})],
                                usage=Usage(tokens, 30), model=MODEL, provider=PROVIDER)

    deciding = [0.0]
    original = loop_module._before_request

    async def timed(settings, state, tools):
        t = time.perf_counter()
        n = len(state.compactions)
        try:
            return await original(settings, state, tools)
        finally:
            spent = time.perf_counter() - t
            if len(state.compactions) > n:
                spent -= sum(c.seconds for c in state.compactions[n:])
            deciding[0] += spent

    loop_module._before_request = timed
    model = ScriptedModel([respond] * (args.turns * 3))
    agent = Agent(model, tools=[fetch], max_turns=args.turns + 1, max_result_chars=None,
                  context_window=args.window)
    t0 = time.perf_counter()
    run = agent.run_sync("Fetch every page.")
    total = time.perf_counter() - t0
    assert run.status == "done", run.error

    def cost(tokens: int) -> float:
        return request_cost(Usage(tokens, 30), MODEL, PROVIDER) or 0.0

    def around(lo: int, hi: int) -> float:
        return statistics.mean(sent[lo - 1:hi])

    early, late = around(51, 150), around(args.turns - 99, args.turns)
    gaps = [b - a for a, b in zip(stamps, stamps[1:])]
    t_early = statistics.mean(gaps[50:150])
    t_late = statistics.mean(gaps[args.turns - 100:args.turns - 1])
    doing = sum(c.seconds for c in run.compactions)
    summaries = sum(1 for c in run.compactions if c.summary)
    print(f"{args.turns} turns, {args.page:,}-character tool results, window {args.window:,} tokens "
          f"({MODEL} prices)")
    print(f"  tokens sent per turn: turn 100 {sent[99]:,}, turn {args.turns} {sent[args.turns - 1]:,}; "
          f"mean over turns 51-150 {early:,.0f}, over turns {args.turns - 99}-{args.turns} {late:,.0f}; "
          f"peak {max(sent):,}")
    print(f"  cost per turn: around turn 100 ${cost(int(early)):.4f}, around turn {args.turns} "
          f"${cost(int(late)):.4f}; ratio {late / early:.2f} (target <= 1.3)")
    print(f"  without compaction turn {args.turns} would send about {args.turns * args.page // 4:,} tokens "
          f"(${cost(args.turns * args.page // 4):.2f}), {args.turns * args.page // 4 / args.window:.0f}x the window")
    print(f"  the run: {run.turns} requests, {len(run.compactions)} compactions ({summaries} with a summary), "
          f"cost {run.cost and f'${run.cost:.2f}'}, {total:.2f} s in all; time per turn around turn 100 "
          f"{t_early * 1e3:.2f} ms, around turn {args.turns} {t_late * 1e3:.2f} ms (the scripted model's own "
          f"counting of its input included)")
    print(f"  compaction: deciding {deciding[0] * 1e3:.1f} ms in all ({deciding[0] / run.turns * 1e6:.0f} us a "
          f"turn), doing {doing * 1e3:.1f} ms in all ({doing / max(len(run.compactions), 1) * 1e3:.2f} ms each)")


if __name__ == "__main__":
    main()
