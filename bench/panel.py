"""What the nbagent panel costs a run, on a real kernel: the same run with the panel's comm open and closed.

    python bench/panel.py [--turns 200] [--progress 200] [--repeats 7]

A `%agent` run of `--turns` turns, each streaming a line of text and calling a tool that reports
`--progress` progress updates, timed in the kernel from start to end. Three ways, alternated `--repeats`
times in the same kernel: nbagent alone (no panel following the run), the panel following it with no
page connected (a notebook without the panel's frontend), and a page connected over the `nbagent.panel`
comm, as the side panel is (the kernel then pushes the run's summary at every call and decision, and this
script reads them from IOPub like a page). Reported: the CPU the panel itself spends (its pushes, timed
in the kernel: steady where wall time on a shared machine is not), the median wall and kernel CPU seconds
(`time.process_time`, every thread of the kernel: the comm's sends included) of each, and their ratios.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.jupyter.kernelclient import KernelSession  # noqa: E402

SETUP = '''
import time
from nbagent import AssistantMessage, ScriptedModel, ToolCall, ToolContext, tool
from nbagent.jupyter import get_session

@tool(read_only=True)
def step(i: int, ctx: ToolContext) -> int:
    """Report progress PROGRESS times."""
    for j in range(PROGRESS):
        ctx.progress(f"{j}", fraction=(j + 1) / PROGRESS, output="ok\\n")
    return i

def script():
    return ScriptedModel([AssistantMessage(text=f"Step {i}: looking at the next part of the data.",
                                           tool_calls=[ToolCall(name="step", arguments={"i": i})])
                          for i in range(TURNS)] + ["Done."], delay=0)

from nbagent.jupyter.panel import PanelHub

spent = [0.0]
_push = PanelHub._push

def timed_push(self):  # the panel's own work at each push: the summary, its JSON, the comm's send
    t = time.process_time()
    _push(self)
    spent[0] += time.process_time() - t

PanelHub._push = timed_push

async def timed(follow):
    before = spent[0]
    model = script()
    t0, c0 = time.perf_counter(), time.process_time()
    run = get_session().start("Go.", __import__("nbagent.jupyter.session", fromlist=["RunOptions"]).RunOptions(
        model=model, tools=["step"], new=True, mode="bypassPermissions", max_turns=TURNS + 5))
    if follow:
        get_session()._panel_hub.follow_new()   # what the panel does after each cell
    else:
        get_session()._panel_hub._followed.add(run.id)  # nbagent alone: the panel never follows it
    await run
    return time.perf_counter() - t0, time.process_time() - c0, spent[0] - before, run.status
'''


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--progress", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    times: dict[str, list[float]] = {"nbagent alone": [], "panel, no page": [], "panel open": []}
    cpu: dict[str, list[float]] = {name: [] for name in times}
    panel_own: list[float] = []
    pushed = 0
    with tempfile.TemporaryDirectory() as tmp:
        k = KernelSession(Path(tmp))
        try:
            k.execute("%load_ext nbagent\n%config NBAgent.store_sessions = False")
            k.execute(SETUP.replace("PROGRESS", str(args.progress)).replace("TURNS", str(args.turns)))
            k.value("list(await timed(False))", timeout=300)  # warm up (imports, first widgets)
            comm_id = None
            for _ in range(args.repeats):
                for name in times:
                    if name == "panel open" and comm_id is None:
                        comm_id = uuid.uuid4().hex
                        k.kc.shell_channel.send(k.kc.session.msg("comm_open", {
                            "comm_id": comm_id, "target_name": "nbagent.panel", "data": {"protocol": 1}}))
                        k.comm_msg(comm_id, {"id": 1, "op": "state"})
                        k.wait_iopub(lambda m: m["msg_type"] == "comm_msg" and m["content"]["comm_id"] == comm_id)
                    elif name != "panel open" and comm_id is not None:
                        k.kc.shell_channel.send(k.kc.session.msg("comm_close", {"comm_id": comm_id, "data": {}}))
                        comm_id = None
                    start = len(k.iopub)
                    seconds, used, own, status = k.value(f"list(await timed({name != 'nbagent alone'}))", timeout=300)
                    assert status == "done", status
                    times[name].append(seconds)
                    cpu[name].append(used)
                    if name == "panel open":
                        panel_own.append(own)
                    if name == "panel open":
                        pushed += sum(1 for m in k.iopub[start:] if m["msg_type"] == "comm_msg"
                                      and m["content"]["comm_id"] == comm_id)
        finally:
            k.shutdown()
    base = statistics.median(times["nbagent alone"])
    base_cpu = statistics.median(cpu["nbagent alone"])
    print(f"bench/panel.py: a %agent run of {args.turns} turns, each a streamed line and a tool reporting "
          f"{args.progress} progress updates, on a real kernel; median of {args.repeats}")
    for name, values in times.items():
        median = statistics.median(values)
        used = statistics.median(cpu[name])
        print(f"  {name:15} wall {median:.3f} s (ratio {median / base:.2f}), kernel CPU {used:.3f} s "
              f"(ratio {used / base_cpu:.2f}); wall of each: {', '.join(f'{v:.3f}' for v in values)}")
    own = statistics.median(panel_own)
    print(f"  summaries the kernel pushed to the page while the panel was open: {pushed / args.repeats:.0f} per run; "
          f"the panel's own CPU for them {own * 1000:.1f} ms a run, {own / statistics.median(cpu['panel open']):.1%} "
          "of the run's kernel CPU")
    return 0


if __name__ == "__main__":
    sys.exit(main())
