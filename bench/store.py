"""What the session store costs: per tool call, per batch's fsync, and to resume a long session.

    python bench/store.py [--rounds 5] [--n 500]

1. Per tool call, apart from the fsync: bench/loop.py's workload (N turns, one `add` call a turn, a
   ScriptedModel) run without a store and with `Agent(session=True)` whose writer does not fsync;
   rounds alternate the two; the difference per call is the store's own work (serialising, redacting,
   writing). Goal: under 25 µs per call, reported next to the loop's own per-call cost.
   Beside it, the same store with signing off (`unsigned`): the difference is what signing each line
   (HMAC-SHA256, `nbagent.safety.signing`) costs.
2. The fsync: the same with fsync on; the difference to (1) per batch is the disk's price.
3. Resuming: a session of 10,000 messages loaded and repaired (`Agent.resume`). Goal: under 0.5 s.
4. The record-encoding step alone (`SessionWriter._encode`: redact, then sign each line), on the lines one
   tool call writes (the model's call, its result, the call record, the request), signed against unsigned,
   alternating, best of many rounds: robust to a loaded machine where (1) is noisy.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from nbagent import (  # noqa: E402
    Agent,
    AssistantMessage,
    ScriptedModel,
    ToolCall,
    UserMessage,
    sessions,  # noqa: E402
    tool,
)
from nbagent.messages import TextBlock, ToolResultMessage  # noqa: E402


@tool(read_only=True)
async def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


async def one_run(n: int, workspace: Path, store: str) -> float:
    script = [AssistantMessage(tool_calls=[ToolCall(name="add", raw_arguments=json.dumps({"a": i, "b": 1}))])
              for i in range(n)]
    script.append(AssistantMessage(text="done"))
    agent = Agent(model=ScriptedModel(script), tools=[add], max_turns=n + 1, workspace=workspace,
                  session=store != "none")
    commit = sessions.SessionWriter.commit
    key = sessions._writer._writing_key
    if store in ("no-fsync", "unsigned"):
        sessions.SessionWriter.commit = lambda self, fsync=True: commit(self, fsync=False)  # type: ignore[method-assign]
    if store == "unsigned":
        sessions._writer._writing_key = lambda: None  # type: ignore[assignment]
    try:
        t0 = time.perf_counter()
        run = await agent.run("add them")
        elapsed = time.perf_counter() - t0
    finally:
        sessions.SessionWriter.commit = commit  # type: ignore[method-assign]
        sessions._writer._writing_key = key  # type: ignore[assignment]
    assert run.status == "done" and len(run.calls) == n
    return elapsed


def resume_time(tmp: Path, messages: int) -> float:
    writer = sessions.SessionWriter(tmp)
    batch = []
    for i in range(messages // 4):
        call = ToolCall(name="add", arguments={"a": i, "b": 1}, id=f"call_{i}")
        batch += [UserMessage(f"add {i} and 1"), AssistantMessage(tool_calls=[call]),
                  ToolResultMessage(call.id, "add", [TextBlock(str(i + 1))], False), AssistantMessage(text=str(i + 1))]
    writer.messages(batch)
    writer.commit()
    t0 = time.perf_counter()
    agent = Agent(model=ScriptedModel(["x"]), workspace=tmp).resume(writer.id)
    elapsed = time.perf_counter() - t0
    assert len(agent.conversation) == messages
    return elapsed


def encode_cost(tmp: Path, rounds: int = 30, n: int = 300) -> tuple[float, float]:
    """µs per call of the encoding step, (unsigned, signed): best of `rounds` rounds of `n` batches."""
    writer = sessions.SessionWriter(tmp)
    call = ToolCall(name="add", arguments={"a": 1, "b": 1}, id="call_1")
    writer.messages([AssistantMessage(tool_calls=[call]), ToolResultMessage("call_1", "add", [TextBlock("2")], False)])
    writer._add({"kind": "call", "id": "call_1", "name": "add", "status": "ok", "arguments": {"a": 1, "b": 1},
                 "decision": {"allow": True, "source": "read_only", "reason": "read-only calls are allowed",
                              "rule": None}, "duration": 0.0001, "activity": "add", "details_type": "builtins.int"})
    writer.request({"model": "scripted", "messages": {"$prefix": 3, "rest": [{"role": "tool", "content": "2"}]}})
    lines = list(writer._pending)
    writer._pending.clear()
    key = writer._key
    best = {"unsigned": float("inf"), "signed": float("inf")}
    for _ in range(rounds):
        for name in best:
            writer._key = key if name == "signed" else None
            t0 = time.perf_counter()
            for _ in range(n):
                writer._encode(lines)
            best[name] = min(best[name], (time.perf_counter() - t0) / n * 1e6)
    writer.close()
    return best["unsigned"], best["signed"]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--n", type=int, default=500)
    opts = parser.parse_args()
    results: dict[str, list[float]] = {"none": [], "unsigned": [], "no-fsync": [], "fsync": []}
    with tempfile.TemporaryDirectory() as tmp:
        os.environ.setdefault("NBAGENT_CONFIG_DIR", os.path.join(tmp, "config"))  # the session key, not yours
        for _ in range(opts.rounds):
            for store in results:
                results[store].append(asyncio.run(one_run(opts.n, Path(tmp), store)) / opts.n * 1e6)
        resume = [resume_time(Path(tempfile.mkdtemp(dir=tmp)), 10_000) for _ in range(3)]
        unsigned, signed = encode_cost(Path(tempfile.mkdtemp(dir=tmp)))
    med = {k: statistics.median(v) for k, v in results.items()}
    print(f"{opts.n} calls a run, {opts.rounds} alternating rounds, median µs per call:")
    print(f"  the loop alone (no store)           {med['none']:8.1f}")
    print(f"  with the store, no fsync            {med['no-fsync']:8.1f}   the store adds {med['no-fsync'] - med['none']:+.1f} "
          f"µs per call (goal: under 25)")
    print(f"  the same store, lines not signed    {med['unsigned']:8.1f}   signing adds {med['no-fsync'] - med['unsigned']:+.1f} "
          f"µs per call")
    print(f"  with the store and its fsyncs       {med['fsync']:8.1f}   the fsync costs {med['fsync'] - med['no-fsync']:+.1f} "
          f"µs per batch (one batch per call here)")
    print(f"resuming a 10,000-message session: {min(resume) * 1000:.0f} ms best of 3 (goal: under 500 ms)")
    print(f"the encoding step per call (4 lines), best of 30 rounds: redacted {unsigned:.1f} µs, redacted and "
          f"signed {signed:.1f} µs: signing adds {signed - unsigned:+.1f} µs ({signed / unsigned:.2f}x)")


if __name__ == "__main__":
    main()
