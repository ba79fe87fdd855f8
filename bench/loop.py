"""Per-tool-call overhead of the turn loop, side by side with pydantic-ai and a bare floor.

    python bench/loop.py [--repeat 5]

Workload: a run of N turns, one tool call a turn (`add(a, b)`), then a final text answer; the model is
scripted (nbagent's ScriptedModel, pydantic-ai's FunctionModel), so what is measured is the runtime's
own work per call: plan, model round, validation, permission, execution, events, transcript.
The floor is the least any runtime must do: json.loads + pydantic validation + the call + an append.

Targets: nbagent at most 0.1 x pydantic-ai's time per call at N=200, and nbagent's time per call at
N=1000 within 1.3 x its time at N=200 (a round must not cost more as the history grows).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import pydantic  # noqa: E402

from nbagent import Agent, AssistantMessage, ScriptedModel, ToolCall, tool  # noqa: E402


# -- nbagent ---------------------------------------------------------------------------------------------
@tool(read_only=True)
async def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


async def nbagent_run(n: int) -> float:
    script = [AssistantMessage(tool_calls=[ToolCall(name="add", raw_arguments=json.dumps({"a": i, "b": 1}))])
              for i in range(n)]
    script.append(AssistantMessage(text="done"))
    agent = Agent(model=ScriptedModel(script), tools=[add], max_turns=n + 1)
    t0 = time.perf_counter()
    run = await agent.run("add them")
    elapsed = time.perf_counter() - t0
    assert run.status == "done" and len(run.calls) == n and run.calls[-1].result.text == str(n)
    return elapsed


# -- pydantic-ai -----------------------------------------------------------------------------------------
def pydantic_ai_factory():
    try:
        from pydantic_ai import Agent as PAgent
        from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart
        from pydantic_ai.models.function import AgentInfo, FunctionModel
        from pydantic_ai.usage import UsageLimits
    except ImportError:  # pragma: no cover
        return None

    async def run(n: int) -> float:
        count = 0

        def model_fn(messages, info: AgentInfo) -> ModelResponse:
            nonlocal count
            if count < n:
                i = count
                count += 1
                return ModelResponse(parts=[ToolCallPart("add", json.dumps({"a": i, "b": 1}), tool_call_id=f"c{i}")])
            return ModelResponse(parts=[TextPart("done")])

        agent = PAgent(FunctionModel(model_fn))

        @agent.tool_plain
        async def add(a: int, b: int) -> int:
            """Add two integers."""
            return a + b

        t0 = time.perf_counter()
        result = await agent.run("add them", usage_limits=UsageLimits(request_limit=None))
        elapsed = time.perf_counter() - t0
        assert result.output == "done" and count == n
        return elapsed

    return run


# -- floor -------------------------------------------------------------------------------------------------
class AddArgs(pydantic.BaseModel):
    a: int
    b: int


async def floor_run(n: int) -> float:
    raws = [json.dumps({"a": i, "b": 1}) for i in range(n)]
    history: list = []
    validate = AddArgs.model_validate

    async def add_fn(a: int, b: int) -> int:
        return a + b

    t0 = time.perf_counter()
    for raw in raws:
        args = validate(json.loads(raw))
        history.append(await add_fn(args.a, args.b))
    return time.perf_counter() - t0


async def measure(fn, n: int, repeat: int) -> float:
    await fn(min(n, 50))  # warm up
    times = []
    for _ in range(repeat):
        gc.collect()  # every timed run starts from the same collector state (collection stays on)
        times.append(await fn(n))
    return statistics.median(times) / n * 1e6


async def main(repeat: int) -> int:
    pai = pydantic_ai_factory()
    results: dict[tuple[str, int], float] = {}
    for n in (200, 1000):
        results[("nbagent", n)] = await measure(nbagent_run, n, repeat)
        if pai is not None:
            results[("pydantic-ai", n)] = await measure(pai, n, repeat)
        results[("floor", n)] = await measure(floor_run, n, repeat)
    print(f"{'runtime':<14}{'N=200 µs/call':>16}{'N=1000 µs/call':>16}{'1000/200':>10}")
    for name in ("nbagent", "pydantic-ai", "floor"):
        if (name, 200) in results:
            a, b = results[(name, 200)], results[(name, 1000)]
            print(f"{name:<14}{a:>16.1f}{b:>16.1f}{b / a:>10.2f}")
    ok = True
    growth = results[("nbagent", 1000)] / results[("nbagent", 200)]
    print(f"\nnbagent N=1000 / N=200 per call: {growth:.2f} (target <= 1.3)")
    ok &= growth <= 1.3
    if pai is not None:
        ratio = results[("nbagent", 200)] / results[("pydantic-ai", 200)]
        print(f"nbagent / pydantic-ai per call at N=200: {ratio:.3f} (target <= 0.1)")
        ratio1000 = results[("nbagent", 1000)] / results[("pydantic-ai", 1000)]
        print(f"nbagent / pydantic-ai per call at N=1000: {ratio1000:.3f}")
        ok &= ratio <= 0.1
    print(f"nbagent / floor per call at N=200: {results[('nbagent', 200)] / results[('floor', 200)]:.1f}")
    print("targets met" if ok else "TARGETS MISSED")
    return 0 if ok else 1


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=5)
    sys.exit(asyncio.run(main(parser.parse_args().repeat)))
