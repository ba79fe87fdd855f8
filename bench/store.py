"""What the session store costs: per tool call, fsync included, and to resume a long session.

    python bench/store.py [--rounds 5] [--n 500] [--http-n 200]   (--http-n 0: without part 4)

1. Per tool call: bench/loop.py's workload (N turns, one `add` call a turn, a ScriptedModel) run without a
   store and with `Agent(session=True)`, rounds alternating the modes; the difference per call is what the
   store costs the run. Modes: `store` is the store as it ships (each batch written on the loop's thread,
   its fsync on the store's own thread, the run's end waiting for its last one); `no-fsync` the same
   without fsyncs (what serialising, redacting, signing and writing cost); `unsigned` that without signing
   (the difference is what signing each line costs); `waited` each batch's fsync done on the loop's
   thread before it goes on (what the disk's flush costs a run that waits for it; two rounds after the
   others, since its fsyncs load the disk for the runs after them); and two floors, `gathered` (the records
   built and encoded as JSON, nothing redacted, signed or written) and `observed` (the records built, not
   even encoded: what following the run's events and building its facts cost). Each row gives wall-clock time and,
   in brackets, the CPU time of the whole process (every thread): on a busy machine the wall clock also
   counts waiting for a core. Goal: the store's cost, fsync included, under 0.25x the loop's own. Each run
   starts with a `gc.collect()`: without it, the collector's full collection (tens of ms, whatever is
   running) fell, by the modes' fixed order, on the same mode round after round (it made the keyed store
   read +130 µs a call more than it costs). Each run's own young collections stay in its time.
2. The same two, the loop alone and with the store, with a provider key in the environment (as a person's
   kernel has it) and a secret registered with `add_secret` (a key given as `api_key=`): redaction then looks
   for both, their pieces and their encodings in every line. Goal: under 0.25x here too.
3. Resuming: a session of 10,000 messages loaded and repaired (`Agent.resume`). Goal: under 0.5 s.
4. The loop alone and with the store against a real provider, the cheapest there is: an OpenAI-compatible server
   on 127.0.0.1, in a process of its own, that answers every request at once (streamed, with usage, as OpenAI
   does) with one `add` call, `--http-n` times, then a text. The loop's own cost per call is then what talking to a
   provider costs (the request built and sent, the stream read): what a person's runs pay at the least. Goal:
   under 0.25x here too.
5. The record-encoding step alone (`SessionWriter._encode`: redact, or tell at a glance that redacting would
   change nothing (`nbagent.safety.secrets.nothing_to_redact`), then sign each line), on the lines one
   tool call writes (the model's call, its result, the call record, the request; each batch its own id and
   duration), unsigned, signed, and signed with the key and the registered secret of (2), alternating, best of
   many rounds: robust to a loaded machine where (1) and (2) are noisy.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
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
from nbagent.safety import secrets  # noqa: E402
from nbagent.safety.secrets import add_secret  # noqa: E402


@tool(read_only=True)
async def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


KEY = "sk-proj-" + "Qm7Xv2Lp9Rt4Wz8Kc3Nb6Hd1Fy5Gs0Ja" * 2
"""A made-up key, shaped like a real one, for the rows with a key in the environment."""
REGISTERED = "Zq8vN2xPmL4kR7tY1wB9cE3hJ6uA0sD5"
"""A made-up secret registered for those rows (and forgotten after each)."""


async def one_run(n: int, workspace: Path, mode: str) -> tuple[float, float]:
    """The run's wall-clock time and the CPU time of the whole process (every thread) during it."""
    script = [AssistantMessage(tool_calls=[ToolCall(name="add", raw_arguments=json.dumps({"a": i, "b": 1}))])
              for i in range(n)]
    script.append(AssistantMessage(text="done"))
    store = mode.removesuffix("+key")
    agent = Agent(model=ScriptedModel(script), tools=[add], max_turns=n + 1, workspace=workspace,
                  session=store != "none")
    key, soon = sessions._writer._writing_key, sessions._syncer.SYNCER.soon
    sessions.SessionWriter.fsync = store in ("store", "waited")
    if store == "unsigned":
        sessions._writer._writing_key = lambda: None  # type: ignore[assignment]
    if store == "waited":
        sessions._syncer.SYNCER.soon = lambda writer: writer._sync()  # type: ignore[method-assign]
    commit, encode = sessions.SessionWriter.commit, sessions.SessionWriter._add
    if store in ("gathered", "observed"):  # the floors: nothing redacted, signed or written
        sessions.SessionWriter.commit = lambda self, fsync=True: self._pending.clear()  # type: ignore[method-assign]
    if store == "observed":  # nor encoded
        sessions.SessionWriter._add = lambda self, fact, own=False: None  # type: ignore[method-assign]
    if mode.endswith("+key"):
        os.environ["OPENAI_API_KEY"] = KEY
        add_secret(REGISTERED, "api_key")
    secrets.secret_values()  # the secrets' patterns made now, as a kernel makes them once, not in the timing
    gc.collect()  # each run starts with the collector's counts at zero: see the module docstring
    try:
        t0, c0 = time.perf_counter(), time.process_time()
        run = await agent.run("add them")
        elapsed, cpu = time.perf_counter() - t0, time.process_time() - c0
    finally:
        sessions.SessionWriter.fsync = True
        sessions.SessionWriter.commit, sessions.SessionWriter._add = commit, encode  # type: ignore[method-assign]
        sessions._writer._writing_key = key  # type: ignore[assignment]
        sessions._syncer.SYNCER.soon = soon  # type: ignore[method-assign]
        os.environ.pop("OPENAI_API_KEY", None)
        secrets._registered.pop(REGISTERED, None)  # the rows without a key have none
    assert run.status == "done" and len(run.calls) == n
    return elapsed, cpu


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


def encode_cost(tmp: Path, rounds: int = 30, n: int = 300) -> dict[str, float]:
    """µs per call of the encoding step, unsigned, signed, and signed with a key in the environment and a
    registered secret: best of `rounds` rounds of `n` batches, each batch with its own call id and duration (as
    a run's are: what redaction has seen before costs it less)."""
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
    best = {"unsigned": float("inf"), "signed": float("inf"), "keyed": float("inf")}
    fresh = iter(range(10**9))
    for _ in range(rounds):
        for name in best:
            writer._key = None if name == "unsigned" else key
            if name == "keyed":
                os.environ["OPENAI_API_KEY"] = KEY
                add_secret(REGISTERED, "api_key")
            batches = []
            for _ in range(n):
                i = next(fresh)
                batches.append([line.replace(b"call_1", b"call_%x" % (i * 7919)).replace(b"0.0001", b"0.%08d" % i)
                                for line in lines])
            secrets.secret_values()  # (as in `one_run`)
            try:
                t0 = time.perf_counter()
                for batch in batches:
                    writer._encode(batch)
                best[name] = min(best[name], (time.perf_counter() - t0) / n * 1e6)
            finally:
                os.environ.pop("OPENAI_API_KEY", None)
                secrets._registered.pop(REGISTERED, None)
    writer.close()
    return best


def serve(n: int) -> None:
    """The provider of (4): prints `port <n>`, then answers each chat completion with an `add` call while the
    conversation holds fewer than `n` answers, then with a text, streamed as OpenAI streams (usage last)."""

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n")
                              if line.lower().startswith(b"content-length:"))
                body = json.loads(await reader.readexactly(length))
                turns = sum(1 for m in body["messages"] if m["role"] == "assistant")
                if turns < n:
                    call = {"index": 0, "id": f"call_{turns}", "type": "function",
                            "function": {"name": "add", "arguments": json.dumps({"a": turns, "b": 1})}}
                    delta: dict = {"role": "assistant", "tool_calls": [call]}
                else:
                    delta = {"role": "assistant", "content": "done"}
                chunk = {"id": f"chatcmpl-{turns}", "object": "chat.completion.chunk", "model": "gpt-4o-mini"}
                events = [{**chunk, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]},
                          {**chunk, "choices": [{"index": 0, "delta": {},
                                                 "finish_reason": "tool_calls" if turns < n else "stop"}]},
                          {**chunk, "choices": [], "usage": {"prompt_tokens": 40 + 30 * turns, "completion_tokens": 12,
                                                             "total_tokens": 52 + 30 * turns}}]
                data = b"".join(b"data: " + json.dumps(e).encode() + b"\n\n" for e in events) + b"data: [DONE]\n\n"
                writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: %d\r\n\r\n%s"
                             % (len(data), data))
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass

    async def main() -> None:
        server = await asyncio.start_server(answer, "127.0.0.1", 0)
        print("port", server.sockets[0].getsockname()[1], flush=True)
        await server.serve_forever()

    asyncio.run(main())


async def http_run(url: str, n: int, workspace: Path, store: bool) -> tuple[float, float]:
    """(4): one run against the server at `url`, wall clock and CPU of this process."""
    from nbagent.providers.openai import OpenAIChatModel

    agent = Agent(model=OpenAIChatModel("gpt-4o-mini", base_url=url + "/v1", api_key="sk-local"), tools=[add],
                  max_turns=n + 1, workspace=workspace, session=store)
    gc.collect()
    t0, c0 = time.perf_counter(), time.process_time()
    run = await agent.run("add them")
    elapsed, cpu = time.perf_counter() - t0, time.process_time() - c0
    assert run.status == "done" and len(run.calls) == n, (run.status, run.error)
    return elapsed, cpu


def http_rows(n: int, rounds: int, tmp: Path) -> dict[str, tuple[float, float]]:
    import subprocess

    server = subprocess.Popen([sys.executable, __file__, "--serve", str(n)], stdout=subprocess.PIPE, text=True)
    try:
        url = f"http://127.0.0.1:{int(server.stdout.readline().split()[1])}"
        times: dict[str, list[tuple[float, float]]] = {"none": [], "store": []}
        asyncio.run(http_run(url, n, tmp, False))  # warmed up: the client's first connection, the imports
        for _ in range(rounds):
            for mode, kept in times.items():
                elapsed, used = asyncio.run(http_run(url, n, tmp, mode == "store"))
                kept.append((elapsed / n * 1e6, used / n * 1e6))
    finally:
        server.kill()
        server.wait()
    return {mode: (statistics.median(t[0] for t in v), statistics.median(t[1] for t in v)) for mode, v in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--n", type=int, default=500)
    parser.add_argument("--http-n", type=int, default=200)
    parser.add_argument("--serve", type=int, default=0, help=argparse.SUPPRESS)
    opts = parser.parse_args()
    if opts.serve:
        serve(opts.serve)
        return
    os.environ.pop("OPENAI_API_KEY", None)
    modes = ["none", "store", "no-fsync", "unsigned", "gathered", "observed", "none+key", "store+key"]
    wall: dict[str, list[float]] = {mode: [] for mode in [*modes, "waited"]}
    cpu: dict[str, list[float]] = {mode: [] for mode in [*modes, "waited"]}
    with tempfile.TemporaryDirectory() as tmp:
        os.environ.setdefault("NBAGENT_CONFIG_DIR", os.path.join(tmp, "config"))  # the session key, not yours
        # `waited` last, in rounds of its own: its fsync a call loads the disk for whatever runs next
        for mode in [*modes * opts.rounds, *["no-fsync", "waited"] * 2]:
            elapsed, used = asyncio.run(one_run(opts.n, Path(tmp), mode))
            wall[mode].append(elapsed / opts.n * 1e6)
            cpu[mode].append(used / opts.n * 1e6)
        http = http_rows(opts.http_n, opts.rounds, Path(tempfile.mkdtemp(dir=tmp))) if opts.http_n else None
        resume = [resume_time(Path(tempfile.mkdtemp(dir=tmp)), 10_000) for _ in range(3)]
        encoding = encode_cost(Path(tempfile.mkdtemp(dir=tmp)))
    med = {k: statistics.median(v) for k, v in wall.items()}
    cpu_med = {k: statistics.median(v) for k, v in cpu.items()}
    print(f"{opts.n} calls a run, {opts.rounds} alternating rounds, median µs per call, wall clock (CPU of every "
          f"thread in brackets); load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores:")

    def row(label: str, mode: str, note: str = "") -> None:
        print(f"  {label:<44}{med[mode]:8.1f} ({cpu_med[mode]:6.1f})   {note}")

    def cost(mode: str, base: str = "none") -> str:
        extra, extra_cpu = med[mode] - med[base], cpu_med[mode] - cpu_med[base]
        return f"{extra:+.1f} µs per call ({extra / med[base]:.2f}x the loop's own; CPU {extra_cpu:+.1f}, " \
               f"{extra_cpu / cpu_med[base]:.2f}x)"

    row("the loop alone (no store)", "none")
    row("with the store (fsync on its own thread)", "store", "the store costs " + cost("store") + ", fsync included "
        "(goal: under 0.25x)")
    row("the store without fsyncs", "no-fsync", cost("no-fsync"))
    row("the same, lines not signed", "unsigned", f"signing adds {med['no-fsync'] - med['unsigned']:+.1f} µs per call")
    row("the records built and encoded, not written", "gathered", cost("gathered") + ": what is left with "
        "redaction, signing and writing free")
    row("the records built, not even encoded", "observed", cost("observed") + ": the recorder's events and the "
        "records' facts alone")
    row("each batch's fsync waited for by the loop", "waited", f"the disk's flush: {med['waited'] - med['no-fsync']:+.1f} "
        "µs per batch (one batch per call here; 2 rounds after the others)")
    print("with a provider key in the environment and a registered secret (redaction looks for both, their pieces "
          "and encodings in every line):")
    row("the loop alone", "none+key")
    row("with the store", "store+key", "the store costs " + cost("store+key", "none+key") + ", fsync included "
        "(goal: under 0.25x)")
    if http is not None:
        http_row(http, opts)
    print(f"resuming a 10,000-message session: {min(resume) * 1000:.0f} ms best of 3 (goal: under 500 ms)")
    unsigned, signed, keyed = encoding["unsigned"], encoding["signed"], encoding["keyed"]
    print(f"the encoding step per call (4 lines), best of 30 rounds: redacted {unsigned:.1f} µs, redacted and "
          f"signed {signed:.1f} µs (signing adds {signed - unsigned:+.1f} µs); with the key and the registered "
          f"secret {keyed:.1f} µs ({keyed - signed:+.1f} µs)")


def http_row(http: dict[str, tuple[float, float]], opts: argparse.Namespace) -> None:
    (none, none_cpu), (stored, stored_cpu) = http["none"], http["store"]
    print(f"against an OpenAI-compatible server on 127.0.0.1 that answers at once ({opts.http_n} calls a run, "
          f"{opts.rounds} alternating rounds):")
    print(f"  {'the loop alone':<44}{none:8.1f} ({none_cpu:6.1f})")
    print(f"  {'with the store':<44}{stored:8.1f} ({stored_cpu:6.1f})   the store costs {stored - none:+.1f} µs per "
          f"call ({(stored - none) / none:.2f}x the loop's own; CPU {stored_cpu - none_cpu:+.1f}, "
          f"{(stored_cpu - none_cpu) / none_cpu:.2f}x), fsync included (goal: under 0.25x)")


if __name__ == "__main__":
    main()
