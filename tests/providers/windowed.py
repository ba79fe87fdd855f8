"""A provider stand-in with a context window: it counts each request's tokens, rejects a request over its
window exactly as the real API does (status and body), checks every conversation it is sent against that
provider's structural rules (tests/wire_rules.py), and otherwise answers in the provider's own stream
format with the tokens it counted as the reported input.

    stand_in = WindowedProvider("anthropic", window=60_000, turns=300)
    fake_server.add(*[stand_in] * 1000)      # one reply per request, decided from the request
    ...
    stand_in.rejected, stand_in.invalid      # what it refused (the test wants both empty)

Its tokens are the request body's bytes / 4 (or `bytes_per_token`) (the real tokenizers differ; the runtime measures with what
the provider reports, and estimates only what it added since).

The answers: a summary request (no tools) gets a text summary; otherwise a call `fetch(i=n)` with the
provider's reasoning (Anthropic signed thinking, a Gemini thought signature, Responses encrypted
reasoning), until `turns` calls were made, then a final text.
"""

from __future__ import annotations

import json
from typing import Any

from .fakeserver import RecordedRequest, Reply

from ..wire_rules import problems

__all__ = ["CONTEXT_ERRORS", "WindowedProvider"]


def _anthropic_error(tokens: int, window: int) -> tuple[int, dict[str, Any]]:
    return 400, {"type": "error", "error": {"type": "invalid_request_error",
                                            "message": f"prompt is too long: {tokens} tokens > {window} maximum"}}


def _openai_error(tokens: int, window: int) -> tuple[int, dict[str, Any]]:
    return 400, {"error": {
        "message": f"This model's maximum context length is {window} tokens. However, your messages resulted in "
                   f"{tokens} tokens. Please reduce the length of the messages.",
        "type": "invalid_request_error", "param": "messages", "code": "context_length_exceeded"}}


def _responses_error(tokens: int, window: int) -> tuple[int, dict[str, Any]]:
    return 400, {"error": {"message": "Your input exceeds the context window of this model. Please adjust your "
                                      "input and try again.",
                           "type": "invalid_request_error", "param": "input", "code": "context_length_exceeded"}}


def _google_error(tokens: int, window: int) -> tuple[int, dict[str, Any]]:
    return 400, {"error": {"code": 400, "message": f"The input token count ({tokens}) exceeds the maximum number "
                                                   f"of tokens allowed ({window}).", "status": "INVALID_ARGUMENT"}}


def _mistral_error(tokens: int, window: int) -> tuple[int, dict[str, Any]]:
    return 400, {"object": "error", "message": f"Prompt contains {tokens} tokens and 0 draft tokens, too large for "
                                               f"model with {window} maximum context length",
                 "type": "invalid_request_error", "param": None, "code": None}


CONTEXT_ERRORS = {"anthropic": _anthropic_error, "openai": _openai_error, "openai-responses": _responses_error,
                  "google": _google_error, "mistral": _mistral_error}
"""Each provider's answer to a prompt longer than the window: (status, body)."""


def _sse(events: list[Any], *, named: bool = False, done: bool = False) -> bytes:
    out = []
    for e in events:
        head = f"event: {e['type']}\n" if named else ""
        out.append(f"{head}data: {json.dumps(e)}\n\n")
    if done:
        out.append("data: [DONE]\n\n")
    return "".join(out).encode()


class WindowedProvider:
    """One reply per request (pass it to `FakeServer.add` as many times as requests are expected)."""

    def __init__(self, provider: str, *, window: int, turns: int, model: str = "model",
                 bytes_per_token: int = 4) -> None:
        self.provider = provider
        self.bytes_per_token = bytes_per_token
        """A smaller number counts more tokens than the runtime's estimate (four characters a token)."""
        self.window = window
        self.turns = turns
        self.model = model
        self.calls = 0
        self.summaries = 0
        self.largest = 0
        self.rejected: list[int] = []
        """Token counts of the requests refused as over the window."""
        self.invalid: list[list[str]] = []
        """Structural problems found in conversations it was sent."""

    def __call__(self, request: RecordedRequest) -> Reply:
        tokens = len(request.body) // self.bytes_per_token
        self.largest = max(self.largest, tokens)
        if tokens > self.window:
            self.rejected.append(tokens)
            status, body = CONTEXT_ERRORS[self.provider](tokens, self.window)
            return Reply.json(status, body)
        body = request.json()
        wire = self._conversation(body)
        found = problems(self.provider, wire)
        if found:
            self.invalid.append(found)
            return Reply.json(400, {"error": {"message": "; ".join(found), "type": "invalid_request_error"}})
        if not self._has_tools(body):
            self.summaries += 1
            return Reply.sse(self._text(f"Summary {self.summaries}: the agent fetched pages 0 to {self.calls - 1}.",
                                        tokens))
        if self.calls >= self.turns:
            return Reply.sse(self._text(f"Done: fetched {self.calls} pages.", tokens))
        self.calls += 1
        return Reply.sse(self._call(self.calls - 1, tokens))

    # -- the request ---------------------------------------------------------------------------------------
    def _conversation(self, body: dict[str, Any]) -> Any:
        if self.provider == "anthropic":
            return body["messages"]
        if self.provider == "openai-responses":
            return body["input"]
        if self.provider == "google":
            return body["contents"]
        return body["messages"]

    def _has_tools(self, body: dict[str, Any]) -> bool:
        return bool(body.get("tools"))

    # -- the answers ---------------------------------------------------------------------------------------
    def _text(self, text: str, tokens: int) -> bytes:
        return getattr(self, "_" + self.provider.replace("-", "_"))(tokens, text=text)

    def _call(self, n: int, tokens: int) -> bytes:
        return getattr(self, "_" + self.provider.replace("-", "_"))(tokens, call=n)

    def _anthropic(self, tokens: int, *, text: str | None = None, call: int | None = None) -> bytes:
        events: list[dict[str, Any]] = [{"type": "message_start", "message": {
            "id": f"msg_{self.calls}", "type": "message", "role": "assistant", "model": self.model, "content": [],
            "stop_reason": None, "usage": {"input_tokens": tokens, "cache_read_input_tokens": 0,
                                           "cache_creation_input_tokens": 0, "output_tokens": 1}}}]
        if call is not None:
            events += [
                {"type": "content_block_start", "index": 0,
                 "content_block": {"type": "thinking", "thinking": "", "signature": ""}},
                {"type": "content_block_delta", "index": 0,
                 "delta": {"type": "thinking_delta", "thinking": f"Page {call} is next."}},
                {"type": "content_block_delta", "index": 0, "delta": {"type": "signature_delta", "signature": f"sig{call}"}},
                {"type": "content_block_stop", "index": 0},
                {"type": "content_block_start", "index": 1,
                 "content_block": {"type": "tool_use", "id": f"toolu_{call:05d}", "name": "fetch", "input": {}}},
                {"type": "content_block_delta", "index": 1,
                 "delta": {"type": "input_json_delta", "partial_json": json.dumps({"i": call})}},
                {"type": "content_block_stop", "index": 1},
                {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 30}},
            ]
        else:
            events += [
                {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
                {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}},
                {"type": "content_block_stop", "index": 0},
                {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 20}},
            ]
        events.append({"type": "message_stop"})
        return _sse(events, named=True)

    def _chat(self, tokens: int, *, text: str | None, call: int | None, call_id: str, usage_apart: bool) -> bytes:
        base = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "model": self.model}
        usage = {"prompt_tokens": tokens, "completion_tokens": 20, "total_tokens": tokens + 20}
        if call is not None:
            delta = {"role": "assistant", "content": None, "tool_calls": [{
                "index": 0, "id": call_id, "type": "function",
                "function": {"name": "fetch", "arguments": json.dumps({"i": call})}}]}
            finish = "tool_calls"
        else:
            delta, finish = {"role": "assistant", "content": text}, "stop"
        chunks = [{**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}]
        if usage_apart:
            chunks.append({**base, "choices": [], "usage": usage})
        else:
            chunks[-1]["usage"] = usage
        return _sse(chunks, done=True)

    def _openai(self, tokens: int, *, text: str | None = None, call: int | None = None) -> bytes:
        return self._chat(tokens, text=text, call=call, call_id=f"call_{call}", usage_apart=True)

    def _mistral(self, tokens: int, *, text: str | None = None, call: int | None = None) -> bytes:
        return self._chat(tokens, text=text, call=call, call_id=f"c{(call or 0):08d}", usage_apart=False)

    def _google(self, tokens: int, *, text: str | None = None, call: int | None = None) -> bytes:
        if call is not None:
            parts = [{"functionCall": {"name": "fetch", "args": {"i": call}}, "thoughtSignature": f"sig{call}"}]
        else:
            parts = [{"text": text}]
        chunk = {"candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}],
                 "usageMetadata": {"promptTokenCount": tokens, "candidatesTokenCount": 20, "thoughtsTokenCount": 10,
                                   "totalTokenCount": tokens + 30},
                 "modelVersion": self.model}
        return _sse([chunk])

    def _openai_responses(self, tokens: int, *, text: str | None = None, call: int | None = None) -> bytes:
        response = {"id": f"resp_{self.calls}", "object": "response", "model": self.model, "status": "in_progress"}
        events: list[dict[str, Any]] = [{"type": "response.created", "response": response}]
        if call is not None:
            items = [
                {"type": "reasoning", "id": f"rs_{call}", "summary": [], "encrypted_content": f"enc{call}"},
                {"type": "function_call", "id": f"fc_{call}", "call_id": f"call_{call}", "name": "fetch",
                 "arguments": json.dumps({"i": call}), "status": "completed"},
            ]
        else:
            items = [{"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
                      "content": [{"type": "output_text", "text": text, "annotations": []}]}]
        for i, item in enumerate(items):
            events.append({"type": "response.output_item.added", "output_index": i, "item": item})
            events.append({"type": "response.output_item.done", "output_index": i, "item": item})
        events.append({"type": "response.completed", "response": {
            **response, "status": "completed", "output": items,
            "usage": {"input_tokens": tokens, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 30,
                      "output_tokens_details": {"reasoning_tokens": 10}, "total_tokens": tokens + 30}}})
        return _sse(events, named=True)
