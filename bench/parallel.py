"""One batch of 16 tool calls that each take 0.2 s: async tools, and blocking sync tools.

    python bench/parallel.py

Calls of a batch run concurrently; sync tools run on a thread pool sized for many blocking calls at
once (asyncio's default executor has only min(32, cores + 4) threads: 6 here). Target: each batch in
0.25 s or less (16 x 0.2 s would be 3.2 s run one by one). For comparison, the same 16 blocking calls
on asyncio's default executor.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from nbagent import Agent, AssistantMessage, ScriptedModel, ToolCall, tool  # noqa: E402

N, SECONDS, TARGET = 16, 0.2, 0.25


@tool(read_only=True)
async def wait_async(i: int) -> int:
    await asyncio.sleep(SECONDS)
    return i


@tool(read_only=True)
def wait_blocking(i: int) -> int:
    time.sleep(SECONDS)
    return i


async def batch(name: str) -> float:
    message = AssistantMessage(tool_calls=[ToolCall(name=name, arguments={"i": i}) for i in range(N)])
    agent = Agent(model=ScriptedModel([message, "done"]), tools=[wait_async, wait_blocking])
    run = agent.start("go")
    t0 = time.perf_counter()
    finished = []
    run.subscribe(lambda e: finished.append(time.perf_counter()) if e.kind == "tool_call_finished" else None)
    await run
    assert [c.result.text for c in run.calls] == [str(i) for i in range(N)]
    return max(finished) - t0


async def default_executor() -> float:
    loop = asyncio.get_running_loop()
    t0 = time.perf_counter()
    await asyncio.gather(*[loop.run_in_executor(None, time.sleep, SECONDS) for _ in range(N)])
    return time.perf_counter() - t0


async def main() -> int:
    ok = True
    rows = []
    for label, fn in (("async tools", lambda: batch("wait_async")), ("blocking sync tools", lambda: batch("wait_blocking")),
                      ("asyncio default executor (reference)", default_executor)):
        times = [await fn() for _ in range(5)]
        med = statistics.median(times)
        rows.append((label, med, max(times)))
        if "reference" not in label:
            ok &= med <= TARGET
    for label, med, worst in rows:
        print(f"{label:<40} median {med:.3f} s   worst {worst:.3f} s")
    print(f"target: {N} calls of {SECONDS} s in <= {TARGET} s -> {'met' if ok else 'MISSED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
