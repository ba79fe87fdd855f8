"""The one seam between the runtime and a provider: the `Model` protocol.

A model has two methods. `stream(messages, tools, ...)` is an async iterator of stream events
(`TextDelta`, `ReasoningDelta`, `ToolCallDelta`) ending with the finished `AssistantMessage`;
`request(...)` returns just that message. Everything provider-specific (wire format, HTTP, SSE,
retries) lives behind it, one module per provider.
"""

from __future__ import annotations

import abc
from typing import Any, AsyncIterator, Callable, Sequence

from ..errors import ModelError
from ..events import StreamEvent
from ..messages import AssistantMessage, Message, ToolResultMessage
from ..tools.definition import Tool

__all__ = ["Model", "OnRequest"]

OnRequest = Callable[[Any], None]
"""Called with the exact JSON body of every request a model sends (the run keeps them in `run.requests`)."""


class Model(abc.ABC):
    """A language model that can call tools."""

    provider: str = ""
    """The provider's name: `anthropic`, `openai`, `openai-responses`, `google`, `mistral`, `ollama`, `scripted`."""
    name: str = ""
    """The model's name at that provider."""

    @property
    def spec(self) -> str:
        """`provider:name`, as `load_model` takes it."""
        return f"{self.provider}:{self.name}" if self.name else self.provider

    @abc.abstractmethod
    def stream(
        self,
        messages: Sequence[Message],
        tools: Sequence[Tool] = (),
        *,
        instructions: str | None = None,
        on_request: OnRequest | None = None,
        **settings: Any,
    ) -> AsyncIterator[StreamEvent | AssistantMessage]:
        """Stream one response: deltas, then the finished `AssistantMessage` as the last item."""

    async def request(
        self,
        messages: Sequence[Message],
        tools: Sequence[Tool] = (),
        *,
        instructions: str | None = None,
        on_request: OnRequest | None = None,
        **settings: Any,
    ) -> AssistantMessage:
        """One response, whole."""
        final: AssistantMessage | None = None
        async for item in self.stream(messages, tools, instructions=instructions, on_request=on_request, **settings):
            if isinstance(item, AssistantMessage):
                final = item
        if final is None:
            raise ModelError(f"{self.spec}: the stream ended without a message")
        return final

    def wire_tool_result(self, message: ToolResultMessage) -> Any:
        """The JSON this provider receives for one tool result (shown as `call.wire`)."""
        from ..transcript import neutral_message

        return neutral_message(message)

    def to_wire(self, messages: Sequence[Message]) -> Any:
        """A whole transcript in this provider's message format."""
        from ..transcript import neutral_message

        return [neutral_message(m, said=False) for m in messages]

    async def aclose(self) -> None:
        """Release connections (a no-op for models without any)."""

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.spec}>"
