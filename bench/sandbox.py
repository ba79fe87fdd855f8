"""The time the OS sandbox adds to one shell command.

    python bench/sandbox.py [--rounds 5] [--n 40] [--ballast-mb 0]

For `true` and `ls`, in a workspace of a few hundred files:
- the process alone: `bash -c CMD` started with subprocess (the floor);
- the same under bubblewrap with the `read-only` and `workspace-write` policies (`sandbox_command`), and
  under Landlock (the fallback where bubblewrap cannot run), alone and, where this process may make one,
  with a mount namespace per command (protected paths as read-only mounts);
- end to end through the `shell` tool of an Agent (ScriptedModel): `danger-full-access` (no sandbox)
  against `workspace-write` (also with a read deny rule, which makes the sandbox hide files), with this
  machine's backend and with Landlock forced (`NBAGENT_SANDBOX=landlock`, `landlock-nomount`).
Rounds alternate the variants so a noisy neighbour hits them alike; the median of each round's
per-command mean is reported (wall time, and CPU time of this process and its children, which a noisy
neighbour moves less), with the sandbox's added milliseconds. Goal: under 10 ms added.
`--ballast-mb N` makes this process hold N MB first, as a kernel holding data does: a command forked from it
(its death signal and, under Landlock, its rules are set between fork and exec) costs more with that, and
above `nbagent.safety.sandbox_landlock.LAUNCH_ABOVE` commands are started through a small launcher instead
(`nbagent.safety._launcher`); with a ballast, the shell tool's rows are also given with each way forced
(`NBAGENT_SPAWN=fork`, `launcher`). The variant "no subreaper" leaves out the second fork that keeps what a
command leaves running in check.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from nbagent import Agent, AssistantMessage, ScriptedModel, ToolCall, toolbox  # noqa: E402
from nbagent.safety.sandbox import SandboxBackend, landlock_abi, prepare, sandbox_backend, sandbox_command  # noqa: E402
from nbagent.safety.sandbox_linux import mount_namespace  # noqa: E402


def cpu() -> float:
    """CPU seconds of this process and the children it waited for."""
    me, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + children.ru_utime + children.ru_stime


def per_command(argv: list[str], n: int, cwd: Path) -> tuple[float, float]:
    t0, c0 = time.perf_counter(), cpu()
    for _ in range(n):
        subprocess.run(argv, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    return (time.perf_counter() - t0) / n, (cpu() - c0) / n


def per_command_landlock(argv: list[str], n: int, cwd: Path, policy: str, backend: SandboxBackend,
                         subreaper: bool = True) -> tuple[float, float]:
    t0, c0 = time.perf_counter(), cpu()
    for _ in range(n):
        prepared = prepare(argv, workspace=cwd, policy=policy, backend=backend)
        if not subreaper:
            prepared.setup = (prepared.setup[0], False, *prepared.setup[2:])
        args, how = prepared.how_to_start()
        subprocess.run(args, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False,
                       env={**os.environ, **prepared.env}, **how)
        prepared.cleanup()
    return (time.perf_counter() - t0) / n, (cpu() - c0) / n


def through_tool(ws: Path, command: str, n: int, sandbox: str, rules: list[str], forced: str = "",
                 spawn: str = "") -> tuple[float, float]:
    calls = [AssistantMessage(tool_calls=[ToolCall(name="shell", arguments={"command": command})]) for _ in range(n)]
    agent = Agent(model=ScriptedModel(calls + ["done"]), tools=toolbox.all(workspace=ws), mode="bypassPermissions",
                  sandbox=sandbox, rules=rules, max_turns=n + 1)
    os.environ["NBAGENT_SANDBOX"] = forced
    os.environ["NBAGENT_SPAWN"] = spawn
    sandbox_backend.cache_clear()
    try:
        t0, c0 = time.perf_counter(), cpu()
        run = agent.run_sync("go")
        elapsed, spent = time.perf_counter() - t0, cpu() - c0
    finally:
        os.environ.pop("NBAGENT_SANDBOX")
        os.environ.pop("NBAGENT_SPAWN")
        sandbox_backend.cache_clear()
    assert all(c.status == "ok" for c in run.calls), [c.result.text for c in run.calls if c.status != "ok"]
    return elapsed / n, spent / n


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--n", type=int, default=40)
    parser.add_argument("--ballast-mb", type=int, default=0)
    opts = parser.parse_args()
    ballast = bytearray(opts.ballast_mb << 20)
    for i in range(0, len(ballast), 4096):
        ballast[i] = 1  # touched, so that it is really held
    backend = sandbox_backend()
    print(f"backend: {backend.name}" + (f" ({backend.reason})" if backend.reason else ""))
    if not backend.available:
        print("no sandbox on this machine: nothing to measure")
        return
    with tempfile.TemporaryDirectory() as tmp:
        ws = Path(tmp)
        for i in range(300):
            (ws / f"f{i:03}.txt").write_text("x\n")
        (ws / ".env").write_text("KEY=1\n")
        variants: dict[str, object] = {}
        for cmd in ("true", "ls"):
            bare = ["bash", "-c", cmd]
            variants[f"{cmd}: bash alone"] = lambda b=bare: per_command(b, opts.n, ws)
            for policy in ("read-only", "workspace-write"):
                wrapped = sandbox_command(bare, workspace=ws, policy=policy)
                variants[f"{cmd}: bubblewrap {policy}"] = lambda w=wrapped: per_command(w, opts.n, ws)
                if landlock_abi():
                    for mounts in (False, True) if mount_namespace() else (False,):
                        landlock = SandboxBackend("landlock", runtime_paths=backend.runtime_paths, mounts=mounts)
                        name = f"{cmd}: landlock{' + mounts' if mounts else ''} {policy}"
                        variants[name] = lambda p=policy, b=bare, ll=landlock: per_command_landlock(b, opts.n, ws, p, ll)
                    if policy == "workspace-write":
                        landlock = SandboxBackend("landlock", runtime_paths=backend.runtime_paths)
                        variants[f"{cmd}: landlock {policy}, no subreaper"] = (
                            lambda p=policy, b=bare, ll=landlock: per_command_landlock(b, opts.n, ws, p, ll, False))
            variants[f"{cmd}: shell tool, no sandbox"] = lambda c=cmd: through_tool(ws, c, opts.n, "danger-full-access", [])
            if opts.ballast_mb:  # the launcher against a fork of this process, both forced
                for spawn in ("fork", "launcher"):
                    variants[f"{cmd}: shell tool, no sandbox, {spawn}"] = (
                        lambda c=cmd, sp=spawn: through_tool(ws, c, opts.n, "danger-full-access", [], "", sp))
            variants[f"{cmd}: shell tool, workspace-write"] = lambda c=cmd: through_tool(ws, c, opts.n, "workspace-write", [])
            variants[f"{cmd}: shell tool, workspace-write + deny rule"] = (
                lambda c=cmd: through_tool(ws, c, opts.n, "workspace-write", ["deny: read_file(.env)"]))
            if landlock_abi():
                for forced in ("landlock", "landlock-nomount") if mount_namespace() else ("landlock-nomount",):
                    variants[f"{cmd}: shell tool, workspace-write, {forced}"] = (
                        lambda c=cmd, f=forced: through_tool(ws, c, opts.n, "workspace-write", [], f))
                    if opts.ballast_mb:
                        for spawn in ("fork", "launcher"):
                            variants[f"{cmd}: shell tool, workspace-write, {forced}, {spawn}"] = (
                                lambda c=cmd, f=forced, sp=spawn: through_tool(ws, c, opts.n, "workspace-write", [], f,
                                                                               sp))
        results: dict[str, list[float]] = {k: [] for k in variants}
        for _ in range(opts.rounds):
            for name, fn in variants.items():
                results[name].append(fn())  # type: ignore[operator]
    wall = {k: statistics.median(w for w, _ in v) * 1000 for k, v in results.items()}
    spent = {k: statistics.median(c for _, c in v) * 1000 for k, v in results.items()}
    print(f"ballast: {opts.ballast_mb} MB held by this process")
    print(f"{'variant':62} {'ms/command':>10} {'added ms':>9} {'CPU ms':>7} {'added':>7}")
    for cmd in ("true", "ls"):
        for name in [k for k in wall if k.startswith(cmd + ":")]:
            base = f"{cmd}: bash alone" if "tool" not in name else f"{cmd}: shell tool, no sandbox"
            if name.endswith((", fork", ", launcher")) and "no sandbox" not in name:  # against the same way forced
                base = f"{cmd}: shell tool, no sandbox, {name.rsplit(', ', 1)[1]}"
            plain = name.endswith(("bash alone", "no sandbox")) or "no sandbox," in name
            added = "" if plain else f"{wall[name] - wall[base]:+9.2f}"
            added_cpu = "" if plain else f"{spent[name] - spent[base]:+7.2f}"
            print(f"{name:62} {wall[name]:10.2f} {added:>9} {spent[name]:7.2f} {added_cpu:>7}")
    worst = max(wall[k] - wall[f"{k.split(':')[0]}: shell tool, no sandbox"] for k in wall
                if "shell tool, workspace" in k and not k.endswith((", fork", ", launcher")))  # (as chosen)
    print(f"most added through the shell tool: {worst:.2f} ms (goal: under 10 ms)")


if __name__ == "__main__":
    main()
