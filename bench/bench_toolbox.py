"""Benchmarks of the built-in tools: run with `python bench/bench_toolbox.py`.

Prints, for each operation, the median time over several rounds:
- reading a command line and deciding whether it only reads (the shell tool's auto-allow);
- one `python` call through a whole Agent run (ScriptedModel), and the runner alone;
- printing 100,000 lines from the `python` tool (capture and progress streaming);
- `read_file` of 2,000 lines of a 100,000-line file; `grep` over 1,000 files; `shell` running `true`.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from nbagent import Agent, AssistantMessage, ScriptedModel, ToolCall, toolbox  # noqa: E402
from nbagent.toolbox import PythonRunner, Workspace, read_only_problem  # noqa: E402


def median_time(fn, rounds: int = 7) -> float:
    times = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def through_agent(tools, call: ToolCall, ws: Path) -> None:
    model = ScriptedModel([AssistantMessage(tool_calls=[call]), "done"])
    run = Agent(model=model, tools=tools, mode="bypassPermissions", workspace=ws).run_sync("go")
    assert run.calls[0].status == "ok", run.calls[0].result


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        ws = Path(tmp)
        w = Workspace(ws)
        (ws / "big.txt").write_text("".join(f"line {i} of the big file\n" for i in range(100_000)))
        (ws / "many").mkdir()
        for i in range(1000):
            (ws / "many" / f"f{i}.py").write_text("import os\n" * 50 + ("needle\n" if i % 100 == 0 else ""))
        tools = toolbox.all(workspace=ws)
        commands = ["git status --short", "cat notes.txt; rm -rf x", "grep -rn needle many", "ls -la data",
                    "find . -name '*.py' -exec rm {} +", "python -c 'print(1)'"] * 100
        rows = []
        t = median_time(lambda: [read_only_problem(c, w) for c in commands])
        rows.append(("read-only check of one command line", t / len(commands) * 1e6, "µs"))
        runner = PythonRunner()
        t = median_time(lambda: runner.run("x = 1\nx + 1"), rounds=50)
        rows.append(("PythonRunner.run of a two-line snippet", t * 1e6, "µs"))
        t = median_time(lambda: through_agent(tools, ToolCall(name="python", arguments={"code": "1 + 1"}), ws))
        rows.append(("python tool call through a whole Agent run", t * 1e3, "ms"))
        t = median_time(lambda: through_agent(tools, ToolCall(name="python", arguments={
            "code": "for i in range(100_000):\n    print(i)"}), ws), rounds=3)
        rows.append(("python tool printing 100,000 lines", t * 1e3, "ms"))
        t = median_time(lambda: through_agent(tools, ToolCall(name="read_file", arguments={
            "path": "big.txt", "offset": 50_000}), ws))
        rows.append(("read_file: 2,000 lines from the middle of 100,000", t * 1e3, "ms"))
        t = median_time(lambda: through_agent(tools, ToolCall(name="grep", arguments={"pattern": "needle"}), ws))
        rows.append(("grep over 1,000 files (52,000 lines)", t * 1e3, "ms"))
        t = median_time(lambda: through_agent(tools, ToolCall(name="shell", arguments={"command": "true"}), ws))
        rows.append(("shell tool running `true`", t * 1e3, "ms"))
        width = max(len(r[0]) for r in rows)
        for name, value, unit in rows:
            print(f"{name:<{width}}  {value:10.1f} {unit}")


if __name__ == "__main__":
    main()
