"""What every provider adapter needs besides HTTP: name and id projections, carrying a conversation across
providers, accumulating streamed tool calls, and usage arithmetic.

    ToolNames           internal tool name <-> wire name, per request (charset, length, reserved names)
    CallIds             internal call id <-> wire id, per request (e.g. Mistral's 9 letters or digits)
    portable_messages   drop another provider's reasoning and opaque data, so a run can switch provider
    ToolCallAccumulator streamed tool-call fragments -> `ToolCallDelta`s with lazy live arguments -> `ToolCall`s
    sum_usage           add up `Usage` objects
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Hashable, Iterable, Sequence

from ..events import ToolCallDelta
from ..messages import AssistantMessage, Message, Reasoning, ToolCall, Usage
from ..tools.partial_json import PartialJSON

if TYPE_CHECKING:  # pragma: no cover
    from ..tools.definition import Tool

__all__ = [
    "CallIds",
    "NameRule",
    "ToolCallAccumulator",
    "ToolNames",
    "arguments_json",
    "arguments_object",
    "names_for",
    "portable_messages",
    "reasoning_for",
    "sum_usage",
    "usage_from",
]

_BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


def _digest(text: str, length: int, alphabet: str = _BASE62) -> str:
    """A deterministic string of `length` characters from `alphabet` derived from `text`."""
    n = int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest(), "big")
    out = []
    base = len(alphabet)
    for _ in range(length):
        n, r = divmod(n, base)
        out.append(alphabet[r])
    return "".join(out)


# --------------------------------------------------------------------------------------------------
# Tool names
# --------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class NameRule:
    """What a provider accepts as a tool name."""

    allowed: str = "A-Za-z0-9_-"
    """The allowed characters, as the inside of a regex character class."""
    max_length: int = 64
    first: str | None = None
    """The allowed first characters (a character class), when stricter than `allowed`."""
    reserved: frozenset[str] = frozenset()
    """Names the provider keeps for itself (compared case-insensitively)."""

    def accepts(self, name: str) -> bool:
        if not name or len(name) > self.max_length or name.lower() in self._reserved_lower:
            return False
        if re.fullmatch(f"[{self.allowed}]+", name) is None:
            return False
        return self.first is None or re.match(f"[{self.first}]", name) is not None

    @functools.cached_property
    def _reserved_lower(self) -> frozenset[str]:
        return frozenset(n.lower() for n in self.reserved)

    def sanitise(self, name: str) -> str:
        """`name` with forbidden characters replaced, a valid first character, not reserved, not too long."""
        out = re.sub(f"[^{self.allowed}]", "_", name) or "tool"
        if self.first is not None and re.match(f"[{self.first}]", out) is None:
            out = "t_" + out
        if out.lower() in self._reserved_lower:
            out = out + "_"
        if len(out) > self.max_length:
            out = self.hashed(name, out)
        return out

    def hashed(self, name: str, base: str | None = None) -> str:
        """A valid name made unique by a hash of the original `name`."""
        suffix = "_" + _digest(name, 8, "0123456789abcdef")
        base = self.sanitise(name) if base is None else base
        return base[: self.max_length - len(suffix)] + suffix


class ToolNames:
    """The tool names of one request, projected onto what a provider accepts, and back.

    Names the provider accepts are kept. Others are sanitised (`files.read` -> `files_read`); a
    sanitised name that would collide with another gets a short hash of the original. Calls in the
    history are projected with the same map, so the model sees one consistent set of names, and
    `internal()` turns a name in a response back into the runtime's.
    """

    def __init__(self, names: Iterable[str], rule: NameRule = NameRule()) -> None:
        self.rule = rule
        self._wire: dict[str, str] = {}
        self._internal: dict[str, str] = {}
        names = list(dict.fromkeys(names))
        for name in names:  # names that need nothing keep their name, first
            if rule.accepts(name):
                self._add(name, name)
        for name in names:
            if name not in self._wire:
                self.wire(name)

    def _add(self, name: str, wire: str) -> None:
        self._wire[name] = wire
        self._internal[wire] = name

    def wire(self, name: str) -> str:
        """The name the provider sees for the runtime's `name`."""
        known = self._wire.get(name)
        if known is not None:
            return known
        wire = name if self.rule.accepts(name) and name not in self._internal else self.rule.sanitise(name)
        if wire in self._internal:
            wire = self.rule.hashed(name)
            n = 0
            while wire in self._internal:  # a hash collision: practically never
                n += 1
                wire = self.rule.hashed(f"{name}#{n}")
        self._add(name, wire)
        return wire

    def internal(self, wire: str) -> str:
        """The runtime's name for a name the provider used (unknown names are returned as they are)."""
        return self._internal.get(wire, wire)

    @property
    def renamed(self) -> dict[str, str]:
        """Internal name -> wire name, for the names that differ."""
        return {k: v for k, v in self._wire.items() if k != v}


# --------------------------------------------------------------------------------------------------
# Call ids
# --------------------------------------------------------------------------------------------------
def names_for(messages: Sequence[Message], tools: Sequence[Tool], rule: NameRule) -> ToolNames:
    """The wire names of one request: the offered tools first, then names called in the history."""
    called = (c.name for m in messages if isinstance(m, AssistantMessage) for c in m.tool_calls)
    return ToolNames([*(t.name for t in tools), *called], rule)


class CallIds:
    """Tool-call ids of one request rewritten into the form a provider accepts, and back.

    Ids the provider accepts are kept; others (made by another provider, or by nbagent) are replaced by
    a deterministic id derived from them, so the same call gets the same wire id in every request.
    `CallIds(re.compile("[A-Za-z0-9]{9}"), length=9)` is Mistral's rule.
    """

    def __init__(self, pattern: re.Pattern[str], *, length: int, alphabet: str = _BASE62) -> None:
        self.pattern = pattern
        self.length = length
        self.alphabet = alphabet
        self._wire: dict[str, str] = {}
        self._internal: dict[str, str] = {}

    def accepts(self, call_id: str) -> bool:
        return self.pattern.fullmatch(call_id) is not None

    def wire(self, call_id: str) -> str:
        """The id the provider sees for the runtime's `call_id`."""
        known = self._wire.get(call_id)
        if known is not None:
            return known
        if self.accepts(call_id) and call_id not in self._internal:
            wire = call_id
        else:
            wire = _digest(call_id, self.length, self.alphabet)
            n = 0
            while wire in self._internal or not self.accepts(wire):
                n += 1
                wire = _digest(f"{call_id}#{n}", self.length, self.alphabet)
        self._wire[call_id] = wire
        self._internal[wire] = call_id
        return wire

    def internal(self, wire: str) -> str:
        """The runtime's id for an id the provider used (unknown ids are returned as they are)."""
        return self._internal.get(wire, wire)


# --------------------------------------------------------------------------------------------------
# Continuing a conversation on another provider
# --------------------------------------------------------------------------------------------------
def reasoning_for(message: AssistantMessage, provider: str) -> list[Reasoning]:
    """The reasoning blocks of `message` that `provider` produced (only those may be sent back to it)."""
    return [r for r in message.reasoning if (r.provider or message.provider) == provider]


def portable_messages(messages: Sequence[Message], provider: str) -> list[Message]:
    """`messages` ready for `provider`: assistant messages made elsewhere lose their reasoning (another
    provider's signatures and encrypted items mean nothing here and are refused) and their opaque
    `provider_data`. Their text and tool calls stay. Messages that need no change are not copied."""
    out: list[Message] = []
    for msg in messages:
        if isinstance(msg, AssistantMessage) and msg.provider != provider and (
            msg.reasoning or msg.provider_data or any(c.provider_data for c in msg.tool_calls)
        ):
            msg = replace(
                msg,
                reasoning=reasoning_for(msg, provider),
                provider_data={},
                tool_calls=[replace(c, provider_data={}) if c.provider_data else c for c in msg.tool_calls],
            )
        out.append(msg)
    return out


def arguments_json(call: ToolCall) -> str:
    """A call's arguments as JSON text for the wire: exactly what the model sent when known."""
    if call.raw_arguments is not None:
        return call.raw_arguments if call.raw_arguments.strip() else "{}"
    return json.dumps(call.arguments if call.arguments is not None else {}, ensure_ascii=False)


def arguments_object(call: ToolCall) -> dict[str, Any]:
    """A call's arguments as an object for the wire (providers that want an object, not text).

    Text that is not a JSON object goes through the repair ladder; when even that fails the call is
    sent with `{}` (its error result tells the model what was wrong).
    """
    if isinstance(call.arguments, dict):
        return call.arguments
    from ..tools.arguments import parse_arguments

    try:
        value, _ = parse_arguments(call.raw_arguments)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


# --------------------------------------------------------------------------------------------------
# Streamed tool calls
# --------------------------------------------------------------------------------------------------
_lazy_delta = ToolCallDelta.lazy
_partial = functools.partial


class _PendingCall:
    __slots__ = ("index", "id", "name", "wire_name", "pieces", "parser", "marks", "provider_data")

    def __init__(self, index: int) -> None:
        self.index = index
        self.id: str | None = None
        self.name: str | None = None
        self.wire_name: str | None = None
        self.pieces: list[str] = []
        self.parser: PartialJSON | None = None
        self.marks: list[Any] = []
        """`marks[i]`: where a snapshot after fragment i is cut (parsed up to the latest one read)."""
        self.provider_data: dict[str, Any] = {}

    def text(self) -> str:
        return "".join(self.pieces)

    def snapshot(self, n: int) -> Any:
        """The arguments as they stood after the first `n` fragments. The parser catches up only now, so a
        stream nobody watches parses nothing; one that is watched parses each fragment once."""
        parser = self.parser
        if parser is None:
            parser = self.parser = PartialJSON()
        marks, pieces = self.marks, self.pieces
        for i in range(len(marks), n):
            parser.feed(pieces[i])
            marks.append(parser.mark())
        return parser.snapshot_at(marks[n - 1]) if n else None


class ToolCallAccumulator:
    """Tool calls arriving in fragments, keyed by whatever the provider uses (an index, a block number,
    an item id). Calls are numbered in order of first appearance.

    `add(key, id=..., name=..., arguments=...)` returns the `ToolCallDelta` to emit (or None when nothing
    new arrived). With `partial=True` each delta's `partial_arguments` is computed when first read, by an
    incremental parser (`PartialJSON`) that then catches up with the fragments not yet parsed: work per
    fragment proportional to the fragment, and none at all when nobody reads the live arguments.
    `finish()` returns the `ToolCall`s, names mapped back through `names`.
    """

    def __init__(self, *, partial: bool = True, names: ToolNames | None = None) -> None:
        self.partial = partial
        self.names = names
        self._calls: dict[Hashable, _PendingCall] = {}
        self._order: list[_PendingCall] = []
        self.last_key: Hashable | None = None
        """The key of the call that last received something."""

    def __len__(self) -> int:
        return len(self._order)

    def __contains__(self, key: Hashable) -> bool:
        return key in self._calls

    def add(
        self,
        key: Hashable,
        *,
        id: str | None = None,
        name: str | None = None,
        arguments: str | dict[str, Any] | None = None,
        provider_data: dict[str, Any] | None = None,
    ) -> ToolCallDelta | None:
        """Record what arrived for the call `key`; the delta to emit, if anything is new."""
        call = self._calls.get(key)
        if call is not None and id is None and name is None and provider_data is None and arguments:
            if arguments.__class__ is str:  # the common case: one more fragment of a known call
                return self.add_arguments(key, arguments)
        new = call is None
        if call is None:
            call = self._calls[key] = _PendingCall(len(self._order))
            self._order.append(call)
        self.last_key = key
        if id and not call.id:
            call.id = id
            new = True
        if name and not call.wire_name:
            call.wire_name = name
            call.name = self.names.internal(name) if self.names is not None else name
            new = True
        if provider_data:
            call.provider_data.update(provider_data)
        if arguments is not None and not isinstance(arguments, str):
            arguments = json.dumps(arguments, ensure_ascii=False)  # some servers send an object
        if arguments:
            return self._fragment(call, arguments)
        if new:
            return ToolCallDelta(call.index, call.id, call.name, "", None)
        return None

    def add_arguments(self, key: Hashable, fragment: Any) -> ToolCallDelta | None:
        """The common case of `add`: another fragment of arguments for a call already known."""
        call = self._calls.get(key)
        if call is None or not fragment or fragment.__class__ is not str:
            return self.add(key, arguments=fragment)
        self.last_key = key
        return self._fragment(call, fragment)

    def _fragment(self, call: _PendingCall, fragment: str) -> ToolCallDelta:
        call.pieces.append(fragment)
        if not self.partial:
            return ToolCallDelta(call.index, call.id, call.name, fragment, None)
        return _lazy_delta(call.index, call.id, call.name, fragment, _partial(call.snapshot, len(call.pieces)))

    def arguments_text(self, key: Hashable) -> str:
        """The arguments text received so far for `key`."""
        return self._calls[key].text()

    def finish(self, *, cut_off: bool = False) -> list[ToolCall]:
        """The finished calls. With `cut_off` (the response hit its token limit) the last call, and any
        call whose arguments do not parse, is marked `incomplete` (the runtime never executes those)."""
        calls: list[ToolCall] = []
        last = len(self._order) - 1
        for call in self._order:
            raw = call.text()
            arguments: dict[str, Any] | None
            if not raw.strip():
                arguments, raw_arguments, parsed = {}, None, True
            else:
                raw_arguments = raw
                try:
                    value = json.loads(raw)
                    parsed = True
                except ValueError:
                    value, parsed = None, False
                arguments = value if isinstance(value, dict) else None
            incomplete = cut_off and (call.index == last or not parsed)
            calls.append(ToolCall(
                name=call.name or "",
                arguments=arguments,
                id=call.id or "",
                raw_arguments=raw_arguments,
                incomplete=incomplete,
                provider_data=dict(call.provider_data),
            ))
        return calls


# --------------------------------------------------------------------------------------------------
# Usage
# --------------------------------------------------------------------------------------------------
def sum_usage(usages: Iterable[Usage | None]) -> Usage | None:
    """The sum of the given usages (None when none was given).

    Convention for every provider: `input_tokens` counts the whole prompt, cached or not;
    `cache_read_tokens` and `cache_write_tokens` say how much of it was read from or written to a cache.
    """
    total: Usage | None = None
    for u in usages:
        if u is not None:
            total = u if total is None else total + u
    return total


def usage_from(
    input_tokens: Any = 0, output_tokens: Any = 0, cache_read_tokens: Any = 0, cache_write_tokens: Any = 0,
    reasoning_tokens: Any = 0,
) -> Usage:
    """A `Usage` from counts that may be missing or null in a provider's payload."""

    def n(value: Any) -> int:
        return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0

    return Usage(n(input_tokens), n(output_tokens), n(cache_read_tokens), n(cache_write_tokens), n(reasoning_tokens))

