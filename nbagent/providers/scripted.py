"""`ScriptedModel`: the offline model for tests, demos and notebooks without an API key."""

from __future__ import annotations

import asyncio
import inspect
import json
from dataclasses import dataclass
from functools import partial
from typing import Any, AsyncIterator, Callable, Iterable, Iterator, Sequence, Union

from ..errors import ScriptedModelExhausted
from ..events import TextDelta, ToolCallDelta
from ..messages import AssistantMessage, Message, ToolCall
from ..tools.definition import Tool
from ..tools.partial_json import PartialJSON
from .base import Model, OnRequest

__all__ = ["ScriptedModel", "ScriptedRequest"]

Response = Union[AssistantMessage, str, Callable[[Sequence[Message]], Any]]


@dataclass(slots=True)
class ScriptedRequest:
    """What a `ScriptedModel` was asked: shown in `run.requests` like a provider's request body."""

    model: str
    instructions: str | None
    tools: tuple[str, ...]
    message_count: int
    _messages: Sequence[Message]
    _tools: tuple[Tool, ...]

    @property
    def messages(self) -> list[Message]:
        """The messages the model saw (the transcript only grows, so this is a true snapshot)."""
        return list(self._messages[: self.message_count])

    def body(self) -> dict[str, Any]:
        """The request in nbagent's neutral JSON form."""
        from ..transcript import neutral_message

        return {
            "model": self.model,
            "instructions": self.instructions,
            "tools": [t.spec() for t in self._tools],
            "messages": [neutral_message(m, said=False) for m in self.messages],
        }


class ScriptedModel(Model):
    """A model that answers from a script.

    Each item of `responses` is an `AssistantMessage`, a string (a text-only answer), or a callable taking
    the messages so far and returning either (sync or async). Items are used in order; asking for more
    than there are raises `ScriptedModelExhausted`. With `delay`, text and tool-call arguments are streamed
    in small pieces, `delay` seconds apart, as a real model would.
    """

    provider = "scripted"

    def __init__(
        self,
        responses: Iterable[Response] = (),
        *,
        name: str = "scripted",
        delay: float = 0.0,
        chunk_size: int = 12,
    ) -> None:
        self._script: list[Response] = list(responses)
        self._next = 0
        self.name = name
        self.delay = delay
        self.chunk_size = max(1, chunk_size)
        self.requests: list[ScriptedRequest] = []
        """Every request it answered, in order."""

    @property
    def spec(self) -> str:
        return "scripted" if self.name == "scripted" else f"scripted:{self.name}"

    def add(self, *responses: Response) -> ScriptedModel:
        """Append responses to the script (returns the model, for chaining)."""
        self._script.extend(responses)
        return self

    @property
    def writes_summaries(self) -> bool:
        """Whether compaction asks this model for its summaries: only a script with a callable can answer
        such a request; a script of plain responses is not asked (a summary would spend one of its turns),
        and a digest of the transcript stands in (`nbagent.budget.compaction.TranscriptDigest`)."""
        return any(callable(item) and not isinstance(item, AssistantMessage) for item in self._script)

    @property
    def remaining(self) -> int:
        return len(self._script) - self._next

    async def _next_message(self, messages: Sequence[Message]) -> AssistantMessage:
        if self._next >= len(self._script):
            raise ScriptedModelExhausted(
                f"ScriptedModel has no response left: it was given {len(self._script)} and this is request "
                f"{self._next + 1}. Add more with model.add(...)."
            )
        item = self._script[self._next]
        self._next += 1
        if callable(item) and not isinstance(item, AssistantMessage):
            item = item(messages)
            if inspect.isawaitable(item):
                item = await item
        if isinstance(item, str):
            return AssistantMessage(text=item, stop_reason="end_turn", model=self.name, provider=self.provider)
        if not isinstance(item, AssistantMessage):
            raise TypeError(f"a ScriptedModel response must be an AssistantMessage or str, not {type(item).__name__}")
        # A fresh copy each time, so a script (or a callable returning the same object) can be reused.
        calls = [
            ToolCall(c.name, None if c.arguments is None else dict(c.arguments), c.id, c.raw_arguments, c.incomplete,
                     dict(c.provider_data) if c.provider_data else {})
            for c in item.tool_calls
        ]
        return AssistantMessage(
            item.text, calls, list(item.reasoning), item.usage, item.stop_reason or ("tool_use" if calls else "end_turn"),
            item.model or self.name, item.provider or self.provider, dict(item.provider_data),
        )

    async def stream(
        self,
        messages: Sequence[Message],
        tools: Sequence[Tool] = (),
        *,
        instructions: str | None = None,
        on_request: OnRequest | None = None,
        **settings: Any,
    ) -> AsyncIterator[Any]:
        tools = tuple(tools)
        request = ScriptedRequest(self.name, instructions, tuple(t.name for t in tools), len(messages), messages, tools)
        self.requests.append(request)
        if on_request is not None:
            on_request(request)
        message = await self._next_message(messages)
        if self.delay:
            for piece in _pieces(message.text, self.chunk_size):
                await asyncio.sleep(self.delay)
                yield TextDelta(piece)
            for i, call in enumerate(message.tool_calls):
                raw = call.raw_arguments if call.raw_arguments is not None else json.dumps(call.arguments)
                yield ToolCallDelta(i, call.id, call.name, "", None)
                parser = PartialJSON()  # incremental: the arguments so far are built only when read
                for piece in _pieces(raw, self.chunk_size * 2):
                    await asyncio.sleep(self.delay)
                    parser.feed(piece)
                    yield ToolCallDelta.lazy(i, call.id, call.name, piece, partial(parser.snapshot_at, parser.mark()))
        else:
            if message.text:
                yield TextDelta(message.text)
        yield message


def _pieces(text: str, size: int) -> Iterator[str]:
    for i in range(0, len(text), size):
        yield text[i : i + size]

