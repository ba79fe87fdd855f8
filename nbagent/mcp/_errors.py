"""`ServerError`, the one error a connection raises, and how the SDK's errors are read into it.

A server that cannot be reached, stops answering, or answers with something that is not MCP becomes a
`ServerError` whose message says why, for the model and the person; errors from the SDK and its task
groups (`BaseExceptionGroup`) are searched for one, else described by type and message.
"""

from __future__ import annotations

__all__ = ["ServerError", "describe", "server_error"]


class ServerError(Exception):
    """A server could not be reached, or stopped answering: the message says why, for the model and the user."""


def server_error(exc: BaseException) -> ServerError | None:
    if isinstance(exc, ServerError):
        return exc
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            found = server_error(inner)
            if found is not None:
                return found
    return None


def describe(exc: BaseException) -> str:
    if isinstance(exc, BaseExceptionGroup):
        inner = [e for e in exc.exceptions]
        if inner:
            return describe(inner[0])
    if isinstance(exc, ServerError):
        return str(exc)
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
