"""Per-tool-call CPU time of nbagent's turn loop alone (no peers), for comparing two trees on a busy machine.

    python bench/loop_cpu.py [--repeat 15]

The workload of bench/loop.py (N turns of one `add` call each, a ScriptedModel), timed with
`time.process_time()`, which other processes on the machine disturb far less than the wall clock.
Prints the best and the median of `--repeat` runs at N=200 and N=1000.
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

from nbagent import Agent, AssistantMessage, ScriptedModel, ToolCall, tool  # noqa: E402


@tool(read_only=True)
async def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


async def one(n: int) -> float:
    script = [AssistantMessage(tool_calls=[ToolCall(name="add", raw_arguments=json.dumps({"a": i, "b": 1}))])
              for i in range(n)]
    script.append(AssistantMessage(text="done"))
    agent = Agent(model=ScriptedModel(script), tools=[add], max_turns=n + 1)
    gc.collect()
    t0 = time.process_time()
    run = await agent.run("add them")
    elapsed = time.process_time() - t0
    assert run.status == "done" and len(run.calls) == n
    return elapsed / n * 1e6


async def main(repeat: int) -> None:
    for n in (200, 1000):
        times = [await one(n) for _ in range(repeat)]
        print(f"N={n}: best {min(times):.1f} µs/call, median {statistics.median(times):.1f} µs/call (CPU time)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=15)
    asyncio.run(main(parser.parse_args().repeat))
