"""Streaming one huge tool call in the OpenAI Responses and Gemini formats: nbagent against a floor.

    PYTHONPATH=. python bench/stream_formats.py [--repeat 5] [--deltas 20000] [--clock wall|cpu]

The same workload as bench/stream.py (one `write_file` call carrying about 1 MB of arguments, cut into
20,000 fragments), the same local server (one SSE event per HTTP chunk), in three more shapes:

  OpenAI Responses        `response.function_call_arguments.delta` events; the finished item and the
                          completed response repeat the whole arguments, as the API does
  Gemini, partialArgs     the arguments as 20,000 `stringValue` pieces of one JSON path (streamed calls)
  Gemini, whole call      the usual Gemini case: the call arrives whole, `args` an object, in one chunk

Contenders: the floor (httpx `aiter_lines()` + `json.loads` of every event + one join of the fragments),
nbagent `model.request(...)` with live partial arguments on, and for Responses the openai SDK's raw event
stream with the fragments joined by hand. Times are the best of `--repeat` rounds after a warm-up, each
round running every contender once in turn (bench/stream.py's `best_of`); ratios are to the floor of the
same shape.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import sys
import time
import warnings
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402

from nbagent.providers.google import GeminiModel  # noqa: E402
from nbagent.providers.openai_responses import OpenAIResponsesModel  # noqa: E402

_spec = importlib.util.spec_from_file_location("bench_stream", ROOT / "bench" / "stream.py")
common = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(common)  # the shared workload, server, runner and report

KEY = "bench-key"


def sse(data: dict[str, Any], event: str | None = None) -> str:
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {json.dumps(data, separators=(',', ':'), ensure_ascii=False)}\n\n"


def responses_stream(fragments: list[str]) -> bytes:
    arguments = "".join(fragments)
    item = {"id": "fc_bench", "type": "function_call", "status": "in_progress", "arguments": "",
            "call_id": "call_bench0000000000000001", "name": "write_file"}
    response = {"id": "resp_bench", "object": "response", "status": "in_progress", "model": "gpt-5", "output": []}
    out = [sse({"type": "response.created", "sequence_number": 0, "response": response}, "response.created"),
           sse({"type": "response.output_item.added", "sequence_number": 1, "output_index": 0, "item": item},
               "response.output_item.added")]
    for n, frag in enumerate(fragments, 2):
        out.append(sse({"type": "response.function_call_arguments.delta", "sequence_number": n, "item_id": "fc_bench",
                        "output_index": 0, "delta": frag}, "response.function_call_arguments.delta"))
    done = {**item, "status": "completed", "arguments": arguments}
    n = len(fragments) + 2
    out.append(sse({"type": "response.function_call_arguments.done", "sequence_number": n, "item_id": "fc_bench",
                    "output_index": 0, "arguments": arguments}, "response.function_call_arguments.done"))
    out.append(sse({"type": "response.output_item.done", "sequence_number": n + 1, "output_index": 0, "item": done},
                   "response.output_item.done"))
    out.append(sse({"type": "response.completed", "sequence_number": n + 2, "response": {
        **response, "status": "completed", "output": [done],
        "usage": {"input_tokens": 100, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 250_000,
                  "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 250_100}}},
        "response.completed"))
    return "".join(out).encode("utf-8")


def gemini_partial_stream(expected: dict[str, Any], pieces: int) -> bytes:
    content = expected["content"]
    cuts = [len(content) * i // pieces for i in range(pieces + 1)]

    def chunk(fc: dict[str, Any], **extra: Any) -> str:
        return sse({"candidates": [{"content": {"role": "model", "parts": [{"functionCall": fc}]}, **extra}]})

    out = [chunk({"name": "write_file", "willContinue": True}),
           chunk({"partialArgs": [{"jsonPath": "$.path", "stringValue": expected["path"]}], "willContinue": True})]
    for a, b in zip(cuts, cuts[1:]):
        out.append(chunk({"partialArgs": [{"jsonPath": "$.content", "stringValue": content[a:b],
                                           "willContinue": True}], "willContinue": True}))
    out.append(chunk({"partialArgs": [{"jsonPath": "$.content", "stringValue": ""}], "willContinue": True}))
    out.append(chunk({}))
    out.append(sse({"candidates": [{"content": {"role": "model", "parts": [{"text": ""}]}, "finishReason": "STOP"}],
                    "usageMetadata": {"promptTokenCount": 100, "candidatesTokenCount": 250_000}}))
    return "".join(out).encode("utf-8")


def gemini_whole_stream(expected: dict[str, Any]) -> bytes:
    return (sse({"candidates": [{"content": {"role": "model", "parts": [{"functionCall": {
        "name": "write_file", "args": expected}}]}}]})
        + sse({"candidates": [{"content": {"role": "model", "parts": [{"text": ""}]}, "finishReason": "STOP"}],
               "usageMetadata": {"promptTokenCount": 100, "candidatesTokenCount": 250_000}})).encode("utf-8")


async def floor_responses(client: httpx.AsyncClient, url: str) -> dict[str, Any]:
    parts: list[str] = []
    async with client.stream("POST", url + "/v1/responses", json={"model": "gpt-5", "stream": True}) as r:
        async for line in r.aiter_lines():
            if line.startswith("data: "):
                event = json.loads(line[6:])
                if event["type"] == "response.function_call_arguments.delta":
                    parts.append(event["delta"])
    return json.loads("".join(parts))


async def floor_gemini(client: httpx.AsyncClient, url: str, path: str) -> dict[str, Any]:
    pieces: dict[str, list[str]] = {}
    whole: dict[str, Any] | None = None
    async with client.stream("POST", url + path, json={"contents": []}) as r:
        async for line in r.aiter_lines():
            if line.startswith("data: "):
                chunk = json.loads(line[6:])
                for part in chunk["candidates"][0]["content"]["parts"]:
                    fc = part.get("functionCall")
                    if fc is None:
                        continue
                    if "args" in fc:
                        whole = fc["args"]
                    for arg in fc.get("partialArgs") or ():
                        pieces.setdefault(arg["jsonPath"][2:], []).append(arg["stringValue"])
    return whole if whole is not None else {k: "".join(v) for k, v in pieces.items()}


def responses_sdk(url: str):
    import openai

    client = openai.AsyncOpenAI(api_key=KEY, base_url=url + "/v1", max_retries=0)

    async def raw() -> dict[str, Any]:
        parts: list[str] = []
        stream = await client.responses.create(model="gpt-5", input="write the notes", stream=True)
        async for event in stream:
            if event.type == "response.function_call_arguments.delta":
                parts.append(event.delta)
        return json.loads("".join(parts))

    return client, raw


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--deltas", type=int, default=20_000)
    parser.add_argument("--clock", choices=["wall", "cpu"], default="wall", help="see bench/stream.py")
    args = parser.parse_args()
    common.CLOCK = time.process_time if args.clock == "cpu" else time.perf_counter
    warnings.simplefilter("ignore", DeprecationWarning)

    fragments, expected = common.arguments_fragments(args.deltas)
    size = sum(len(f.encode()) for f in fragments)
    partial_path = "/v1beta/models/gemini-partial:streamGenerateContent?alt=sse"
    whole_path = "/v1beta/models/gemini-whole:streamGenerateContent?alt=sse"
    server = common.Server({
        "/responses": responses_stream(fragments),
        "gemini-partial:streamGenerateContent?alt=sse": gemini_partial_stream(expected, args.deltas),
        "gemini-whole:streamGenerateContent?alt=sse": gemini_whole_stream(expected),
    })
    url = await server.start()
    print(f"one tool call, {size / 1e6:.2f} MB of arguments in {len(fragments):,} fragments; best of {args.repeat}; "
          f"{args.clock} clock; Python {sys.version.split()[0]}")
    repeat = args.repeat
    async with httpx.AsyncClient(timeout=60) as client:
        model = OpenAIResponsesModel("gpt-5", base_url=url + "/v1", api_key=KEY)
        sdk_client, sdk_raw = responses_sdk(url)
        contenders = [
            ("floor (httpx aiter_lines + json.loads)", lambda: floor_responses(client, url)),
            ("nbagent request(), live partial arguments", common.nbagent_runner(model)),
            ("openai SDK responses.create(stream) + join", sdk_raw),
        ]
        best = await common.best_of(contenders, repeat, expected)
        common.report("OpenAI Responses", [(label, best[label], "") for label, _ in contenders])
        await model.aclose()
        await sdk_client.close()

        for title, name, path in (("Gemini, 20,000 partialArgs pieces", "gemini-partial", partial_path),
                                  ("Gemini, the call whole in one chunk", "gemini-whole", whole_path)):
            gmodel = GeminiModel(name, base_url=url, api_key=KEY)
            contenders = [
                ("floor (httpx aiter_lines + json.loads)", lambda path=path: floor_gemini(client, url, path)),
                ("nbagent request(), live partial arguments", common.nbagent_runner(gmodel)),
            ]
            best = await common.best_of(contenders, repeat, expected)
            common.report(title, [(label, best[label], "") for label, _ in contenders])
            await gmodel.aclose()
    await server.close()


if __name__ == "__main__":
    asyncio.run(main())
