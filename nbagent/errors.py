"""Exceptions nbagent raises. Tool failures are never exceptions: they become error results for the model.

    AgentError
    ├── ConfigurationError           a run cannot start: no model, a bad option (a programmer's mistake)
    ├── MaxTurnsExceeded             the run reached `max_turns` before the model finished
    ├── OutputError                  a structured-output run ended without an accepted `submit_result`
    └── ModelError                   the model could not give a response
        ├── ScriptedModelExhausted   a ScriptedModel was asked for more responses than it was given
        └── ProviderError            a provider answered with an error, or not at all
            ├── AuthenticationError  401/403: the key is missing or wrong (names the variable to set)
            ├── PermissionDeniedError  the key may not use this model or feature
            ├── NotFoundError        404: unknown model or endpoint
            ├── RateLimitError       429
            ├── OverloadedError      529, 503 "overloaded"
            ├── ContextLengthError   the prompt is longer than the model's context
            ├── BadRequestError      400/422 with the provider's own message
            ├── ServerError          5xx
            ├── ProviderConnectionError  could not connect, or the connection dropped
            └── StreamError          a stream ended early, carried an error event, or was malformed
"""

from __future__ import annotations

from typing import Any

from .safety.secrets import redact, redact_value

__all__ = [
    "AgentError",
    "AuthenticationError",
    "BadRequestError",
    "ConfigurationError",
    "ContextLengthError",
    "MaxTurnsExceeded",
    "ModelError",
    "NotFoundError",
    "OutputError",
    "OverloadedError",
    "PermissionDeniedError",
    "ProviderConnectionError",
    "ProviderError",
    "RateLimitError",
    "ScriptedModelExhausted",
    "ServerError",
    "StreamError",
]


class AgentError(Exception):
    """Base of every nbagent exception."""


class ConfigurationError(AgentError, ValueError):
    """A run cannot start as configured (no model, an unknown option...)."""


class MaxTurnsExceeded(AgentError):
    """The run reached its turn limit; the transcript is valid and kept on the run."""


class OutputError(AgentError):
    """A run with `output_type` ended without an accepted `submit_result`."""


class ModelError(AgentError):
    """The model could not give a response."""


class ScriptedModelExhausted(ModelError):
    """A `ScriptedModel` was asked for more responses than it was given."""


class ProviderError(ModelError):
    """A provider answered with an error (or not at all).

    `status` is the HTTP status (None when there was no response), `provider` the provider's name,
    `body` the provider's error payload. API keys never appear in any of them: this is the one place
    provider errors are made, and the message and body pass through `nbagent.safety.secrets` here.
    """

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        provider: str | None = None,
        body: Any = None,
        retry_after: float | None = None,
    ) -> None:
        message = redact(message)
        super().__init__(message)
        self.message = message
        self.status = status
        self.provider = provider
        self.body = redact_value(body)
        self.retry_after = retry_after

    def __setattr__(self, name: str, value: Any) -> None:
        if name == "message":  # a message added to later (e.g. "(after 3 attempts)") stays clean
            value = redact(value)
            self.args = (value,)
        elif name == "body":
            value = redact_value(value)
        super().__setattr__(name, value)


class AuthenticationError(ProviderError):
    """The API key is missing or was refused."""


class PermissionDeniedError(ProviderError):
    """The key may not use this model or feature."""


class NotFoundError(ProviderError):
    """Unknown model or endpoint."""


class RateLimitError(ProviderError):
    """Too many requests (429)."""


class OverloadedError(ProviderError):
    """The provider is overloaded (529, or 503)."""


class ContextLengthError(ProviderError):
    """The request is longer than the model's context window."""


class BadRequestError(ProviderError):
    """The provider rejected the request (400/422); its own message is kept."""


class ServerError(ProviderError):
    """The provider failed (5xx)."""


class ProviderConnectionError(ProviderError):
    """No connection, or it dropped."""


class StreamError(ProviderError):
    """A stream ended without its terminal event, carried an error event, or could not be parsed."""
