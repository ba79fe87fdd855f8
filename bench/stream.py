"""Streaming one huge tool call: nbagent's provider path against the official SDKs and a floor.

    PYTHONPATH=. python bench/stream.py [--repeat 5] [--helper-repeat 1] [--deltas 20000] [--clock wall|cpu]

Workload: a local HTTP server replays a stream whose single tool call (`write_file`) carries about
1 MB of arguments in 20,000 deltas, in the OpenAI Chat Completions format and in the Anthropic Messages
format. Everything runs in one process, against the same server, each contender warmed up once first:

  floor                 httpx `aiter_lines()` + `json.loads` of each event + one `"".join` of the fragments
  nbagent               `model.request(...)` with live partial arguments ON (every delta carries a lazy
                        snapshot; the incremental parser runs when one is first read, each fragment once)
  nbagent, watched      the same, reading the live arguments of every 1,000th delta (20 snapshots of up
                        to 1 MB, as a view refreshing ~30 times a second would), for reference
  SDK create(stream)    the official SDK's raw event stream, fragments accumulated by hand
  SDK .stream() helper  the official SDK's accumulating helper, which re-parses the whole argument
                        buffer with a partial-JSON parser on every fragment (quadratic)

Times are the best of `--repeat` rounds, each round running every contender once in turn (the quadratic
helpers run `--helper-repeat` times, after); ratios are to the floor of the same protocol.
Target: nbagent within 1.2 x the floor.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import importlib.util
import json
import sys
import time
import warnings
from pathlib import Path
from typing import Any, Awaitable, Callable

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx  # noqa: E402

from nbagent.events import ToolCallDelta  # noqa: E402
from nbagent.messages import AssistantMessage, UserMessage  # noqa: E402
from nbagent.providers.openai import OpenAIChatModel  # noqa: E402
from nbagent.tools import tool  # noqa: E402

KEY = "bench-key"


@tool
def write_file(path: str, content: str) -> str:
    """Write a file."""
    return "ok"


WRITE_FILE_SCHEMA = write_file.parameters


# --------------------------------------------------------------------------------------------------
# The streams
# --------------------------------------------------------------------------------------------------
def arguments_fragments(deltas: int) -> tuple[list[str], dict[str, Any]]:
    """~1 MB of JSON arguments for write_file, cut into `deltas` fragments (as a model streams them)."""
    line = "The quick brown fox \"jumps\" over the lazy dog; caf\u00e9 \u2014 \u00fcber na\u00efve.\n"
    content = (line * (1_000_000 // len(line) + 1))[:1_000_000]
    text = json.dumps({"path": "notes.md", "content": content}, ensure_ascii=False)
    cuts = [len(text) * i // deltas for i in range(deltas + 1)]
    fragments = [text[a:b] for a, b in zip(cuts, cuts[1:])]
    return fragments, json.loads(text)


def openai_stream(fragments: list[str]) -> bytes:
    base = {"id": "chatcmpl-bench", "object": "chat.completion.chunk", "created": 1727346178,
            "model": "gpt-4o-2024-08-06", "system_fingerprint": "fp_bench"}

    def chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> str:
        body = {**base, "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}], **extra}
        return "data: " + json.dumps(body, separators=(",", ":"), ensure_ascii=False) + "\n\n"

    out = [chunk({"role": "assistant", "content": None, "tool_calls": [
        {"index": 0, "id": "call_bench0000000000000001", "type": "function",
         "function": {"name": "write_file", "arguments": ""}}]})]
    for frag in fragments:
        out.append(chunk({"tool_calls": [{"index": 0, "function": {"arguments": frag}}]}))
    out.append(chunk({}, "tool_calls"))
    usage = {**base, "choices": [], "usage": {"prompt_tokens": 100, "completion_tokens": 250_000,
                                               "total_tokens": 250_100}}
    out.append("data: " + json.dumps(usage, separators=(",", ":")) + "\n\n")
    out.append("data: [DONE]\n\n")
    return "".join(out).encode("utf-8")


def anthropic_stream(fragments: list[str]) -> bytes:
    def event(name: str, data: dict[str, Any]) -> str:
        return f"event: {name}\ndata: {json.dumps(data, separators=(',', ':'), ensure_ascii=False)}\n\n"

    out = [event("message_start", {"type": "message_start", "message": {
        "id": "msg_bench", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5", "content": [],
        "stop_reason": None, "stop_sequence": None,
        "usage": {"input_tokens": 100, "output_tokens": 1, "cache_creation_input_tokens": 0,
                  "cache_read_input_tokens": 0}}}),
        event("content_block_start", {"type": "content_block_start", "index": 0, "content_block": {
            "type": "tool_use", "id": "toolu_bench000000000000001", "name": "write_file", "input": {}}})]
    for frag in fragments:
        out.append(event("content_block_delta", {"type": "content_block_delta", "index": 0,
                                                 "delta": {"type": "input_json_delta", "partial_json": frag}}))
    out.append(event("content_block_stop", {"type": "content_block_stop", "index": 0}))
    out.append(event("message_delta", {"type": "message_delta", "delta": {"stop_reason": "tool_use",
                                                                          "stop_sequence": None},
                                       "usage": {"output_tokens": 250_000}}))
    out.append(event("message_stop", {"type": "message_stop"}))
    return "".join(out).encode("utf-8")


# --------------------------------------------------------------------------------------------------
# The server: one SSE event per HTTP chunk, as a provider flushes them
# --------------------------------------------------------------------------------------------------
class Server:
    def __init__(self, bodies: dict[str, bytes]) -> None:
        self.bodies = {path: self._chunked(body) for path, body in bodies.items()}
        self.port = 0
        self._server: asyncio.base_events.Server | None = None

    @staticmethod
    def _chunked(body: bytes) -> bytes:
        parts = []
        for event in body.split(b"\n\n")[:-1]:
            event += b"\n\n"
            parts.append(b"%x\r\n%s\r\n" % (len(event), event))
        parts.append(b"0\r\n\r\n")
        return b"".join(parts)

    async def start(self) -> str:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{self.port}"

    async def close(self) -> None:
        assert self._server is not None
        self._server.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                path = lines[0].split(" ")[1]
                length = 0
                for line in lines[1:]:
                    if line.lower().startswith("content-length:"):
                        length = int(line.split(":")[1])
                if length:
                    await reader.readexactly(length)
                body = next(b for p, b in self.bodies.items() if path.endswith(p))
                writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                             b"transfer-encoding: chunked\r\n\r\n")
                view = memoryview(body)
                for i in range(0, len(body), 65536):
                    writer.write(view[i : i + 65536])
                    await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
            pass
        finally:
            writer.close()


# --------------------------------------------------------------------------------------------------
# Contenders
# --------------------------------------------------------------------------------------------------
async def floor_openai(client: httpx.AsyncClient, url: str) -> dict[str, Any]:
    parts: list[str] = []
    async with client.stream("POST", url + "/v1/chat/completions", json={"model": "gpt-4o", "stream": True}) as r:
        async for line in r.aiter_lines():
            if line.startswith("data: ") and line != "data: [DONE]":
                chunk = json.loads(line[6:])
                for choice in chunk["choices"]:
                    for tc in choice["delta"].get("tool_calls") or ():
                        parts.append(tc["function"]["arguments"])
    return json.loads("".join(parts))


async def floor_anthropic(client: httpx.AsyncClient, url: str) -> dict[str, Any]:
    parts: list[str] = []
    async with client.stream("POST", url + "/v1/messages", json={"model": "claude", "stream": True}) as r:
        async for line in r.aiter_lines():
            if line.startswith("data: "):
                event = json.loads(line[6:])
                if event["type"] == "content_block_delta" and event["delta"]["type"] == "input_json_delta":
                    parts.append(event["delta"]["partial_json"])
    return json.loads("".join(parts))


def nbagent_runner(model: Any, *, read_every: int = 0) -> Callable[[], Awaitable[dict[str, Any]]]:
    """`model.request(...)`; with `read_every`, the stream is consumed as a live view would, reading the
    `partial_arguments` of every `read_every`-th tool-call delta."""

    async def run() -> dict[str, Any]:
        message = await model.request([UserMessage("write the notes")], [write_file])
        return message.tool_calls[0].arguments

    async def watched() -> dict[str, Any]:
        n = 0
        async for item in model.stream([UserMessage("write the notes")], [write_file]):
            if isinstance(item, ToolCallDelta):
                n += 1
                if n % read_every == 0:
                    assert isinstance(item.partial_arguments, dict)
            elif isinstance(item, AssistantMessage):
                return item.tool_calls[0].arguments
        raise AssertionError("no message")

    return watched if read_every else run


OPENAI_TOOL = {"type": "function", "function": {"name": "write_file", "description": "Write a file.",
                                                "parameters": {**WRITE_FILE_SCHEMA, "additionalProperties": False},
                                                "strict": True}}
ANTHROPIC_TOOL = {"name": "write_file", "description": "Write a file.", "input_schema": WRITE_FILE_SCHEMA}


def openai_sdk(url: str):
    import openai

    client = openai.AsyncOpenAI(api_key=KEY, base_url=url + "/v1", max_retries=0)
    messages = [{"role": "user", "content": "write the notes"}]

    async def raw() -> dict[str, Any]:
        parts: list[str] = []
        stream = await client.chat.completions.create(model="gpt-4o", messages=messages, tools=[OPENAI_TOOL],
                                                      stream=True)
        async for chunk in stream:
            for choice in chunk.choices:
                for tc in choice.delta.tool_calls or ():
                    if tc.function and tc.function.arguments:
                        parts.append(tc.function.arguments)
        return json.loads("".join(parts))

    async def helper() -> dict[str, Any]:
        async with client.chat.completions.stream(model="gpt-4o", messages=messages, tools=[OPENAI_TOOL]) as stream:
            async for _ in stream:
                pass
            completion = await stream.get_final_completion()
        return json.loads(completion.choices[0].message.tool_calls[0].function.arguments)

    return client, raw, helper


def anthropic_sdk(url: str):
    import anthropic

    client = anthropic.AsyncAnthropic(api_key=KEY, base_url=url, max_retries=0)
    messages = [{"role": "user", "content": "write the notes"}]

    async def raw() -> dict[str, Any]:
        parts: list[str] = []
        stream = await client.messages.create(model="claude-sonnet-4-5", max_tokens=300_000, messages=messages,
                                              tools=[ANTHROPIC_TOOL], stream=True)
        async for event in stream:
            if event.type == "content_block_delta" and event.delta.type == "input_json_delta":
                parts.append(event.delta.partial_json)
        return json.loads("".join(parts))

    async def helper() -> dict[str, Any]:
        async with client.messages.stream(model="claude-sonnet-4-5", max_tokens=300_000, messages=messages,
                                          tools=[ANTHROPIC_TOOL]) as stream:
            async for _ in stream:
                pass
            message = await stream.get_final_message()
        return message.content[0].input

    return client, raw, helper


Runner = Callable[[], Awaitable[dict[str, Any]]]

CLOCK: Callable[[], float] = time.perf_counter
"""How contenders are timed: wall time, or with `--clock cpu` this process's CPU time (the local server runs
in the same process, so it is counted alike for every contender), which a busy machine disturbs far less."""


async def best_of(contenders: list[tuple[str, Runner]], repeat: int, expected: dict[str, Any]) -> dict[str, float]:
    """The best time of each contender over `repeat` rounds; each round runs every contender once, in turn,
    so a burst of load from elsewhere on the machine hits them all alike."""
    for _, fn in contenders:
        assert await fn() == expected, "wrong arguments"  # warm-up: connections, imports, caches
    best = {label: float("inf") for label, _ in contenders}
    for _ in range(repeat):
        for label, fn in contenders:
            gc.collect()
            t0 = CLOCK()
            value = await fn()
            best[label] = min(best[label], CLOCK() - t0)
            assert value == expected
    return best


def report(title: str, rows: list[tuple[str, float | None, str]]) -> None:
    floor = rows[0][1]
    print(f"\n{title}")
    for label, seconds, note in rows:
        if seconds is None:
            print(f"  {label:<44} {'-':>9}   {note}")
        else:
            print(f"  {label:<44} {seconds * 1000:8.1f} ms  {seconds / floor:6.2f} x floor  {note}")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--helper-repeat", type=int, default=1)
    parser.add_argument("--deltas", type=int, default=20_000)
    parser.add_argument("--clock", choices=["wall", "cpu"], default="wall")
    args = parser.parse_args()
    global CLOCK
    CLOCK = time.process_time if args.clock == "cpu" else time.perf_counter

    warnings.simplefilter("ignore", DeprecationWarning)  # SDKs warn about model names; irrelevant here
    fragments, expected = arguments_fragments(args.deltas)
    size = sum(len(f.encode()) for f in fragments)
    server = Server({"/chat/completions": openai_stream(fragments), "/messages": anthropic_stream(fragments)})
    url = await server.start()
    print(f"one tool call, {size / 1e6:.2f} MB of arguments in {len(fragments):,} deltas; "
          f"best of {args.repeat} (SDK helpers: best of {args.helper_repeat}); {args.clock} clock; "
          f"Python {sys.version.split()[0]}")

    async with httpx.AsyncClient(timeout=60) as client:
        # -- OpenAI Chat Completions ------------------------------------------------------------------
        model = OpenAIChatModel("gpt-4o", base_url=url + "/v1", api_key=KEY)
        off = OpenAIChatModel("gpt-4o", base_url=url + "/v1", api_key=KEY, partial_arguments=False)
        oa_client, oa_raw, oa_helper = openai_sdk(url)
        t = await best_of([
            ("floor", lambda: floor_openai(client, url)),
            ("nbagent", nbagent_runner(model)),
            ("nbagent-off", nbagent_runner(off)),
            ("nbagent-watched", nbagent_runner(model, read_every=1000)),
            ("sdk", oa_raw),
        ], args.repeat, expected)
        t.update(await best_of([("helper", oa_helper)], args.helper_repeat, expected))
        report("OpenAI Chat Completions", [
            ("floor (httpx aiter_lines + json.loads)", t["floor"], ""),
            ("nbagent request(), live partial arguments", t["nbagent"], ""),
            ("nbagent request(), partial arguments off", t["nbagent-off"], "(for reference)"),
            ("nbagent stream(), 20 live snapshots read", t["nbagent-watched"], "(for reference)"),
            ("openai SDK create(stream=True) + join", t["sdk"], ""),
            ("openai SDK .stream() helper (strict tool)", t["helper"], "re-parses the buffer per fragment"),
        ])
        await model.aclose()
        await off.aclose()
        await oa_client.close()

        # -- Anthropic Messages -----------------------------------------------------------------------
        an_client, an_raw, an_helper = anthropic_sdk(url)
        contenders: list[tuple[str, Runner]] = [("floor", lambda: floor_anthropic(client, url))]
        amodel = None
        if importlib.util.find_spec("nbagent.providers.anthropic") is not None:
            from nbagent.providers.anthropic import AnthropicModel

            amodel = AnthropicModel("claude-sonnet-4-5", base_url=url, api_key=KEY)
            contenders.append(("nbagent", nbagent_runner(amodel)))
            contenders.append(("nbagent-watched", nbagent_runner(amodel, read_every=1000)))
        contenders.append(("sdk", an_raw))
        t = await best_of(contenders, args.repeat, expected)
        t.update(await best_of([("helper", an_helper)], args.helper_repeat, expected))
        report("Anthropic Messages", [
            ("floor (httpx aiter_lines + json.loads)", t["floor"], ""),
            ("nbagent request(), live partial arguments", t.get("nbagent"),
             "" if amodel else "skipped: nbagent/providers/anthropic.py is not in this build"),
            ("nbagent stream(), 20 live snapshots read", t.get("nbagent-watched"), "(for reference)"),
            ("anthropic SDK create(stream=True) + join", t["sdk"], ""),
            ("anthropic SDK .stream() helper", t["helper"], "re-parses the buffer per fragment"),
        ])
        if amodel is not None:
            await amodel.aclose()
        await an_client.close()
    await server.close()
    print("\ntarget: nbagent within 1.2 x the floor")


if __name__ == "__main__":
    asyncio.run(main())
