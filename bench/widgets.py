"""How many widget messages a live view sends, and how responsive the kernel stays, on a real kernel.

    python bench/widgets.py [--events 100000] [--seconds 5] [--rate 30]

A `%agent` run calls one tool that reports `--events` progress updates (each with a line of output) over
about `--seconds` seconds, from a worker thread. Meanwhile this script, acting as the frontend, counts every
widget message (comm_open and comm_msg) on the kernel's IOPub channel, and keeps sending a simple execute
request (`run.done`) to time the kernel's replies. Without coalescing, each event would be at least one
message; the view's budget is `NBAgent.update_rate` messages a second (30 by default).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.jupyter.kernelclient import KernelSession  # noqa: E402

SETUP = '''
import time
from nbagent import AssistantMessage, ScriptedModel, ToolCall, ToolContext, tool

@tool(read_only=True, describe_activity=lambda a: f"Crunching {a.n:,} items")
def crunch(n: int, seconds: float, ctx: ToolContext) -> int:
    """Report progress n times over about `seconds` seconds."""
    pause = seconds / (n / 100)
    for i in range(n):
        ctx.progress(f"item {i + 1:,} of {n:,}", fraction=(i + 1) / n, output=f"item {i + 1}: ok\\n")
        if i % 100 == 99:
            time.sleep(pause)
    return n

model = ScriptedModel([
    AssistantMessage(text="Crunching.", tool_calls=[ToolCall(name="crunch", arguments={"n": EVENTS, "seconds": SECONDS})]),
    "Done.",
])
'''


def ping(k: KernelSession, code: str) -> tuple[float, str]:
    """Send one execute request; return (seconds until its execute_reply arrived, the result's text)."""
    t0 = time.monotonic()
    msg_id = k.send_execute(code)
    while True:
        reply = k.kc.get_shell_msg(timeout=60)
        if reply["parent_header"].get("msg_id") == msg_id:
            latency = time.monotonic() - t0
            break
    deadline = time.monotonic() + 10  # the result arrives on IOPub, before the kernel says idle
    while time.monotonic() < deadline:
        if any(m["content"].get("execution_state") == "idle" for m in k.messages("status", msg_id)):
            break
        time.sleep(0.002)
    results = [m["content"]["data"].get("text/plain", "") for m in k.messages("execute_result", msg_id)]
    return latency, results[-1] if results else ""


def percentile(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--rate", type=float, default=30.0, help="NBAgent.update_rate")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        k = KernelSession(Path(tmp))
        try:
            k.execute("%load_ext nbagent")
            k.execute(f"%config NBAgent.update_rate = {args.rate}")
            k.execute(SETUP.replace("EVENTS", str(args.events)).replace("SECONDS", str(args.seconds)))
            k.execute("run = None")
            idle = [ping(k, "run is None")[0] for _ in range(30)]

            first = len(k.iopub)
            t_start = time.monotonic()
            k.execute("run = %agent --model model --tools crunch Crunch the items.")
            t_shown = time.monotonic()  # the magic has returned: the view exists
            busy: list[float] = []
            deadline = time.monotonic() + 20 * args.seconds + 60
            while time.monotonic() < deadline:
                latency, done = ping(k, "run.done")
                busy.append(latency)
                if done == "True":
                    break
                time.sleep(0.05)
            else:
                raise SystemExit("the run did not finish")
            t_end = time.monotonic()
            time.sleep(1.0)  # the view's last flush
            status, progress = ping(k, "[run.status, run.calls[0].progress_count]")[1], None
            widget = [m for m in k.iopub[first:] if m["msg_type"] in ("comm_open", "comm_msg")]
        finally:
            k.shutdown()

    duration = t_end - t_start
    opens = sum(m["msg_type"] == "comm_open" for m in widget)
    created = [m for m in widget if m["_received"] <= t_shown]  # the view's own widgets, made by the magic
    updates = [m["_received"] - t_shown for m in widget if m["_received"] > t_shown]
    live = t_end - t_shown
    windows = [sum(1 for t in updates if s <= t < s + 1.0) for s in [x * 0.1 for x in range(int(live * 10) + 1)]]
    print(f"bench/widgets.py: a tool reporting {args.events:,} progress events over ~{args.seconds:g} s, "
          f"on a real kernel (budget {args.rate:g} messages/s)")
    print(f"  run: {duration:.1f} s, finished as {status}")
    print(f"  widget messages: {len(widget)} in all ({opens} comm_open, {len(widget) - opens} comm_msg; "
          f"one message per event would be {args.events:,})")
    print(f"    {len(created)} when the view was shown, then {len(updates)} while the run went on: "
          f"{len(updates) / live:.1f}/s on average, at most {max(windows)} in any 1-s window")
    print(f"  kernel reply latency to a simple execute request during the run: "
          f"p50 {statistics.median(busy) * 1000:.1f} ms, p95 {percentile(busy, 0.95) * 1000:.1f} ms, "
          f"max {max(busy) * 1000:.1f} ms over {len(busy)} requests")
    print(f"  the same with the kernel idle: p50 {statistics.median(idle) * 1000:.1f} ms, "
          f"p95 {percentile(idle, 0.95) * 1000:.1f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
