"""The cost of one MCP tool call over stdio through nbagent, against the `mcp` SDK's own client, same server.

    python bench/mcp.py [N]

For each server, in the same process, ROUNDS rounds of N calls in each mode, the order of the modes rotating
from round to round:
  sdk             `mcp.Client(StdioServerParameters(...))`, `await client.call_tool(...)` N times in a row
  nbagent kernel  one `Agent` run whose `ScriptedModel` makes N turns of one call each: the whole path of a
                  call (plan, lookup, validation, permission, execution, result mapping, events), with the
                  server on the run's loop, as in a kernel (`nbagent.mcp.use_loop`, which %agent sets)
  nbagent thread  the same with the server on nbagent's background MCP thread (scripts, `run_sync`): each
                  call crosses threads twice, which costs most on a busy machine
  nbagent tool    nbagent's MCP layer alone, without the agent loop: `nbagent.mcp.MCPTool`'s call (connection,
                  timeout, progress and log routing, result mapping), on this loop
Servers: `mcp-server-time` (Python, PyPI) and `@modelcontextprotocol/server-everything` (Node, npm; skipped
when tests/mcp/node is not installed: `./dev setup`). Goal: nbagent under 1.2x the SDK per call.

Printed per mode: wall time per call (median and best round), and this process's CPU time per call (all
threads; the server's own work is in its process). On a shared, busy machine wall times swing by 2x from
round to round; the CPU time is what nbagent itself adds, whatever else runs.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# This file is called mcp.py: its own folder must not hide the `mcp` package.
sys.path[:] = [str(ROOT)] + [p for p in sys.path if Path(p or ".").resolve() != ROOT / "bench"]

from mcp import Client, StdioServerParameters  # noqa: E402

import nbagent.mcp  # noqa: E402
from nbagent import Agent, AssistantMessage, ScriptedModel, ToolCall  # noqa: E402
from nbagent.mcp import parse_servers  # noqa: E402
from nbagent.mcp._tools import call_tool  # noqa: E402

N = int(sys.argv[1]) if len(sys.argv) > 1 else 50
ROUNDS = int(sys.argv[2]) if len(sys.argv) > 2 else 15
EVERYTHING = ROOT / "tests/mcp/node/node_modules/@modelcontextprotocol/server-everything/dist/index.js"
SERVERS = {
    "time": ({"command": sys.executable, "args": ["-m", "mcp_server_time", "--local-timezone", "UTC"]},
             "get_current_time", {"timezone": "Europe/Paris"}),
    "everything": ({"command": "node", "args": [str(EVERYTHING), "stdio"]}, "echo", {"message": "hello"}),
}


async def sdk_round(client: Client, tool: str, arguments: dict) -> tuple[float, float]:
    t0, c0 = time.perf_counter(), time.process_time()
    for _ in range(N):
        result = await client.call_tool(tool, arguments)
        assert not result.is_error
    return (time.perf_counter() - t0) / N, (time.process_time() - c0) / N


async def nbagent_round(name: str, config: dict, tool: str, arguments: dict) -> tuple[float, float]:
    """One run of N calls; `config` decides the connection (each mode has its own, see `bench`)."""
    turns = [AssistantMessage(tool_calls=[ToolCall(name=f"{name}__{tool}", arguments=arguments)]) for _ in range(N)]
    agent = Agent(model=ScriptedModel([*turns, "done"]), mcp_servers={name: config}, rules=[f"allow: {name}__*"],
                  max_turns=N + 1)
    t0, c0 = time.perf_counter(), time.process_time()
    run = await agent.run("go")
    wall, cpu = (time.perf_counter() - t0) / N, (time.process_time() - c0) / N
    assert all(c.status == "ok" for c in run.calls), run.calls[-1].result
    return wall, cpu


async def tool_round(config: dict, tool: str, arguments: dict) -> tuple[float, float]:
    server = parse_servers({"bench": config})["bench"]
    t0, c0 = time.perf_counter(), time.process_time()
    for _ in range(N):
        result = await call_tool(server, tool, arguments, None)
        assert not result.is_error
    return (time.perf_counter() - t0) / N, (time.process_time() - c0) / N


async def bench(name: str) -> None:
    config, tool, arguments = SERVERS[name]
    kernel = {**config, "env": {"NBAGENT_BENCH": "kernel"}}  # another configuration: another connection
    nbagent.mcp.use_loop(None)
    await nbagent_round(name, config, tool, arguments)  # starts the thread's server (kept for the rounds)
    nbagent.mcp.use_loop(asyncio.get_running_loop())
    await nbagent_round(name, kernel, tool, arguments)  # starts the server on this loop
    params = StdioServerParameters(command=config["command"], args=config["args"])
    results: dict[str, list[tuple[float, float]]] = {
        "sdk": [], "nbagent kernel": [], "nbagent thread": [], "nbagent tool": []}
    async with Client(params) as client:
        await client.list_tools()
        await sdk_round(client, tool, arguments)  # warm-up
        modes = [
            ("sdk", lambda: sdk_round(client, tool, arguments)),
            ("nbagent kernel", lambda: nbagent_round(name, kernel, tool, arguments)),
            ("nbagent thread", lambda: nbagent_round(name, config, tool, arguments)),
            ("nbagent tool", lambda: tool_round(kernel, tool, arguments)),
        ]
        for i in range(ROUNDS):
            for label, go in modes[i % 4:] + modes[: i % 4]:
                results[label].append(await go())
    base_wall = statistics.median(w for w, _ in results["sdk"])
    base_best = min(w for w, _ in results["sdk"])
    base_cpu = statistics.median(c for _, c in results["sdk"])
    print(f"{name}:")
    for label, values in results.items():
        wall = statistics.median(w for w, _ in values)
        best = min(w for w, _ in values)
        cpu = statistics.median(c for _, c in values)
        print(f"  {label:15s} wall {wall * 1e6:6.0f} µs/call ({wall / base_wall:.2f}x), best round {best * 1e6:6.0f} "
              f"({best / base_best:.2f}x); CPU here {cpu * 1e6:5.0f} µs/call ({cpu / base_cpu:.2f}x)")


async def main() -> None:
    print(f"per MCP tool call over stdio, {ROUNDS} rounds of N={N} calls per mode; "
          f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    for name in SERVERS:
        if name == "everything" and not EVERYTHING.exists():
            print("everything  skipped: tests/mcp/node is not installed (./dev setup)")
            continue
        await bench(name)
    nbagent.mcp.close()


if __name__ == "__main__":
    asyncio.run(main())
