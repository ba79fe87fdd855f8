"""Each provider's structural rules for a conversation, checked on what `Model.to_wire` produces.

`problems(provider, wire, messages)` lists what a provider would reject (empty: valid). The rules are
the ones the APIs enforce on the conversation's shape:

- every tool call answered exactly once, and in place (right after the message that made it, before
  anything else), and no answer without its call;
- ids in each provider's format (Mistral: nine letters or digits; OpenAI: at most 40 characters;
  Anthropic: letters, digits, `_` and `-`);
- roles: the conversation starts with the user (Anthropic, Gemini); Gemini's roles are user/model and a
  model turn's function calls are answered by the next user turn, one response per call;
- reasoning kept where the provider needs it back, on the messages that provider made: an Anthropic
  assistant message with a signed thinking block still carries it; a Gemini function call with a
  thought signature still carries it; a Responses reasoning item with encrypted content is sent back.
"""

from __future__ import annotations

import re
from typing import Any, Sequence

from nbagent.messages import AssistantMessage

_ANTHROPIC_ID = re.compile(r"^[a-zA-Z0-9_-]+$")
_MISTRAL_ID = re.compile(r"^[a-zA-Z0-9]{9}$")


def problems(provider: str, wire: Any, messages: Sequence[Any] = ()) -> list[str]:
    check = {"anthropic": _anthropic, "openai": _openai_chat, "ollama": _openai_chat, "mistral": _mistral,
             "openai-responses": _responses, "google": _gemini}[provider]
    return check(wire, messages)


def _answered_in_place(calls_then_results: list[tuple[str, list[str], list[str]]]) -> list[str]:
    """(where, call ids made, result ids right after) for each message making calls."""
    out = []
    for where, calls, results in calls_then_results:
        if sorted(calls) != sorted(results):
            out.append(f"{where}: calls {calls} answered by {results}")
        if len(set(results)) != len(results):
            out.append(f"{where}: a call answered twice")
    return out


def _anthropic(wire: list[dict[str, Any]], messages: Sequence[Any]) -> list[str]:
    out: list[str] = []
    if not wire or wire[0].get("role") != "user":
        out.append("the first message is not the user's")
    pending: list[str] | None = None
    seen_ids: set[str] = set()
    for i, m in enumerate(wire):
        content = m.get("content")
        blocks = content if isinstance(content, list) else []
        results = [b["tool_use_id"] for b in blocks if b.get("type") == "tool_result"]
        if pending is not None:
            if m.get("role") != "user":
                out.append(f"message {i}: tool_use ids {pending} not answered by the next (user) message")
            out += _answered_in_place([(f"message {i}", pending, results)])
            if results and blocks[: len(results)] != [b for b in blocks if b.get("type") == "tool_result"]:
                out.append(f"message {i}: tool_result blocks must come first")
            pending = None
        elif results:
            out.append(f"message {i}: tool_result {results} without a tool_use right before")
        if m.get("role") == "assistant":
            uses = [b["id"] for b in blocks if b.get("type") == "tool_use"]
            for u in uses:
                if not _ANTHROPIC_ID.match(u):
                    out.append(f"message {i}: tool_use id {u!r} has characters Anthropic refuses")
                if u in seen_ids:
                    out.append(f"message {i}: tool_use id {u!r} used twice")
                seen_ids.add(u)
            pending = uses or None
    if pending:
        out.append(f"the last message's tool calls {pending} are unanswered")
    # signed thinking kept
    assistants = [m for m in wire if m.get("role") == "assistant"]
    recorded = [m for m in messages if isinstance(m, AssistantMessage)]
    for k, (w, r) in enumerate(zip(assistants, recorded)):
        if r.provider == "anthropic" and any(x.signature for x in r.reasoning):
            blocks = w.get("content") if isinstance(w.get("content"), list) else []
            if not any(b.get("type") in ("thinking", "redacted_thinking") for b in blocks):
                out.append(f"assistant message {k}: its signed thinking block was dropped")
    return out


def _chat_like(wire: list[dict[str, Any]], id_ok) -> list[str]:
    out: list[str] = []
    pending: list[str] | None = None
    results: list[str] = []
    where = ""
    for i, m in enumerate(wire):
        role = m.get("role")
        if role == "tool":
            if pending is None:
                out.append(f"message {i}: a tool message without an assistant tool call before it")
            else:
                results.append(m.get("tool_call_id"))
            continue
        if pending is not None:
            out += _answered_in_place([(where, pending, results)])
            pending = None
        if role == "assistant" and m.get("tool_calls"):
            pending = [c.get("id") for c in m["tool_calls"]]
            for c in pending:
                problem = id_ok(c)
                if problem:
                    out.append(f"message {i}: {problem}")
            results, where = [], f"message {i}"
    if pending is not None:
        out += _answered_in_place([(where, pending, results)])
    return out


def _openai_chat(wire: list[dict[str, Any]], messages: Sequence[Any]) -> list[str]:
    return _chat_like(wire, lambda c: "" if isinstance(c, str) and 0 < len(c) <= 40 else f"tool call id {c!r}")


def _mistral(wire: list[dict[str, Any]], messages: Sequence[Any]) -> list[str]:
    return _chat_like(wire, lambda c: "" if isinstance(c, str) and _MISTRAL_ID.match(c)
                      else f"tool call id {c!r} is not nine letters or digits")


def _responses(wire: list[dict[str, Any]], messages: Sequence[Any]) -> list[str]:
    out: list[str] = []
    open_calls: list[str] = []
    made: set[str] = set()
    for i, item in enumerate(wire):
        kind = item.get("type")
        if kind == "function_call":
            if item.get("call_id") in made:
                out.append(f"item {i}: call_id {item.get('call_id')!r} used twice")
            made.add(item.get("call_id"))
            open_calls.append(item.get("call_id"))
        elif kind == "function_call_output":
            cid = item.get("call_id")
            if cid not in open_calls:
                out.append(f"item {i}: output for call {cid!r} that is not open")
            else:
                open_calls.remove(cid)
        elif open_calls and kind != "reasoning":
            out.append(f"item {i}: {kind or item.get('role')} before the outputs of calls {open_calls}")
            open_calls = []
    if open_calls:
        out.append(f"calls {open_calls} have no output")
    recorded = sum(1 for m in messages if isinstance(m, AssistantMessage) and m.provider == "openai-responses"
                   for r in m.reasoning if r.encrypted)
    sent = sum(1 for item in wire if item.get("type") == "reasoning" and item.get("encrypted_content"))
    if sent < recorded:
        out.append(f"{recorded - sent} encrypted reasoning items were dropped")
    return out


def _gemini(wire: list[dict[str, Any]], messages: Sequence[Any]) -> list[str]:
    out: list[str] = []
    if not wire or wire[0].get("role") != "user":
        out.append("the first content is not the user's")
    pending: list[str] | None = None
    for i, c in enumerate(wire):
        role = c.get("role")
        if role not in ("user", "model"):
            out.append(f"content {i}: role {role!r}")
        parts = c.get("parts") or []
        calls = [p["functionCall"].get("name") for p in parts if "functionCall" in p]
        responses = [p["functionResponse"].get("name") for p in parts if "functionResponse" in p]
        if pending is not None:
            if role != "user" or sorted(responses) != sorted(pending):
                out.append(f"content {i}: function calls {pending} answered by {responses}")
            pending = None
        elif responses:
            out.append(f"content {i}: function responses without calls right before")
        if role == "model" and calls:
            pending = calls
        if not parts:
            out.append(f"content {i}: no parts")
    if pending:
        out.append(f"function calls {pending} unanswered")
    recorded = [m for m in messages if isinstance(m, AssistantMessage) and m.provider == "google"]
    signed = sum(1 for m in recorded for call in m.tool_calls if (call.provider_data or {}).get("thoughtSignature"))
    sent = sum(1 for c in wire for p in c.get("parts") or [] if "functionCall" in p and p.get("thoughtSignature"))
    if sent < signed:
        out.append(f"{signed - sent} thought signatures were dropped")
    return out
