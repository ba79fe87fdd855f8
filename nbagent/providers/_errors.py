"""Provider errors: a provider's error payload, over HTTP or inside a stream, as nbagent's exceptions.

    map_http_error(provider, status, payload)          an HTTP error status and its body
    stream_error(provider, payload, error_map)         an error sent inside a 200 stream, by any provider:
                                                       its type or code through the adapter's error map,
                                                       else its HTTP-like status, else a StreamError
    retryable_in_stream(exc)                           whether such an error is retried (nothing shown yet)
    scrub(value, secrets)                              the redaction every error body goes through

`ProviderError` itself redacts its message and body (`nbagent.safety.secrets`), so no key reaches an exception
whichever way it was made.
"""

from __future__ import annotations

import json
import re
from typing import Any, Mapping, Sequence

from ..errors import (
    AuthenticationError, BadRequestError, ContextLengthError, NotFoundError, OverloadedError, PermissionDeniedError,
    ProviderError, RateLimitError, ServerError, StreamError,
)
from ..safety import secrets as _secrets

__all__ = ["error_message", "error_type", "is_context_length_message", "map_http_error", "retryable_in_stream",
           "scrub", "stream_error"]


def scrub(value: Any, secrets: Sequence[str] = ()) -> Any:
    """`value` with every secret `nbagent.safety.secrets.redact` knows, and each of `secrets`, replaced (strings,
    dicts and lists)."""
    value = _secrets.redact_value(value)
    secrets = [s for s in secrets if s and len(s) >= 4]
    if not secrets:
        return value
    if isinstance(value, str):
        for s in secrets:
            if s in value:
                value = value.replace(s, "***")
        return value
    if isinstance(value, dict):
        return {scrub(k, secrets): scrub(v, secrets) for k, v in value.items()}
    if isinstance(value, list):
        return [scrub(v, secrets) for v in value]
    return value


_CONTEXT_LENGTH = re.compile(
    r"context[ _-]?length|context window|maximum context|prompt is too long|too many tokens|"
    r"input (?:token count|is too long)|exceeds? the (?:maximum|max)[^.]*tokens|tokens? (?:exceed|limit)|"
    r"reduce the length of the (?:messages|prompt)|string_above_max_length|request_too_large|"
    r"too large for model|maximum (?:number of )?tokens|prompt[^.]*too long|"
    r"exceeds the available context size|exceed_context_size",  # llama.cpp's server
    re.I,
)


def is_context_length_message(message: str) -> bool:
    """Whether a provider's error message says the prompt does not fit the model's context."""
    return bool(_CONTEXT_LENGTH.search(message or ""))


def error_message(payload: Any) -> str:
    """The provider's own message from an error body (OpenAI, Anthropic, Gemini and Mistral shapes)."""
    if isinstance(payload, dict):
        err = payload.get("error")
        if isinstance(err, dict):
            msg = err.get("message") or err.get("msg")
            if msg:
                return str(msg)
            return error_message(err) if err else ""
        if isinstance(err, str) and err:
            return err
        for key in ("message", "msg", "detail", "error_description"):
            value = payload.get(key)
            if isinstance(value, str) and value:
                return value
            if isinstance(value, list) and value:  # 422 with a list of validation problems
                return "; ".join(_detail_item(v) for v in value)
            if isinstance(value, dict) and value:
                return error_message(value) or json.dumps(value)[:500]
        return ""
    if isinstance(payload, list) and payload:
        return error_message(payload[0])
    if isinstance(payload, str):
        return payload.strip()[:2000]
    return ""


def _detail_item(item: Any) -> str:
    if isinstance(item, dict):
        loc = item.get("loc")
        where = ".".join(str(p) for p in loc) if isinstance(loc, list) else ""
        msg = item.get("msg") or item.get("message") or json.dumps(item)[:300]
        return f"{where}: {msg}" if where else str(msg)
    return str(item)


def error_type(payload: Any) -> str:
    """The error's `type` (or `code`, or `status`) in a provider's error payload."""
    if isinstance(payload, dict):
        err = payload.get("error")
        if isinstance(err, dict):
            return str(err.get("type") or err.get("code") or err.get("status") or "")
        return str(payload.get("type") or payload.get("code") or "")
    return ""


def map_http_error(
    provider: str,
    status: int,
    payload: Any,
    *,
    key_env: Sequence[str] = (),
    retry_after: float | None = None,
    secrets: Sequence[str] = (),
) -> ProviderError:
    """The nbagent exception for an HTTP error `status` with the decoded error body `payload` (`secrets`:
    more strings to remove, besides the ones `nbagent.safety.secrets.redact` knows)."""
    payload = scrub(payload, secrets)
    message = scrub(error_message(payload), secrets)
    kind = error_type(payload)
    said = f": {message}" if message else ""
    where = f"{provider} answered {status}"
    if status == 401 or kind in ("authentication_error", "invalid_api_key", "UNAUTHENTICATED"):
        env = " or ".join(key_env)
        hint = f"; set {env} to a valid key (or pass api_key=...)" if env else ""
        return AuthenticationError(f"{where}: the API key was refused{hint}{said}", status=status,
                                   provider=provider, body=payload)
    if status == 403 or kind in ("permission_error", "PERMISSION_DENIED"):
        return PermissionDeniedError(f"{where}: this key may not do this{said}", status=status,
                                     provider=provider, body=payload)
    if status == 404:
        return NotFoundError(f"{where}: not found (check the model name and base URL){said}", status=status,
                             provider=provider, body=payload)
    if status == 529 or kind in ("overloaded_error", "overloaded"):
        return OverloadedError(f"{where}: overloaded{said}", status=status, provider=provider, body=payload,
                               retry_after=retry_after)
    if status == 429:
        return RateLimitError(f"{where}: rate limited{said}", status=status, provider=provider, body=payload,
                              retry_after=retry_after)
    if is_context_length_message(message) or kind in ("context_length_exceeded", "request_too_large", "exceed_context_size_error"):
        if status < 500:
            return ContextLengthError(f"{where}: the request does not fit the model's context{said}",
                                      status=status, provider=provider, body=payload)
    if status == 503:
        return OverloadedError(f"{where}: unavailable{said}", status=status, provider=provider, body=payload,
                               retry_after=retry_after)
    if status >= 500:
        return ServerError(f"{where}: server error{said}", status=status, provider=provider, body=payload,
                           retry_after=retry_after)
    if status in (400, 413, 422) or 400 <= status < 500:
        return BadRequestError(f"{where}: the request was rejected{said or ' (no message)'}", status=status,
                               provider=provider, body=payload)
    return ProviderError(f"{where}{said}", status=status, provider=provider, body=payload)


_RETRIED_IN_STREAM = (OverloadedError, RateLimitError, ServerError)


def retryable_in_stream(exc: ProviderError) -> bool:
    """Whether an error that came inside a stream (no HTTP status) is worth another attempt: overloaded,
    rate limited (not out of quota: waiting will not cure that) or a server error."""
    return exc.status is None and isinstance(exc, _RETRIED_IN_STREAM) and error_type(exc.body) != "insufficient_quota"


def stream_error(
    provider: str,
    payload: Any,
    error_map: Mapping[str, type[ProviderError]],
    *,
    what: str = "stream error",
    key_env: Sequence[str] = (),
) -> ProviderError:
    """The exception for an error sent inside a 200 stream, the same way for every provider.

    The error's `type`, `code` or `status` (a string) is looked up in the adapter's `error_map`; else an
    HTTP status it carries (Gemini's `code: 429`) is mapped like `map_http_error`; else it is a
    `StreamError`. A bad request whose message says the prompt is too long is a `ContextLengthError`.
    The exception has no `status`: the response itself was a 200.
    """
    err = payload.get("error") if isinstance(payload, dict) else None
    fields = err if isinstance(err, dict) else (payload if isinstance(payload, dict) else {})
    message = error_message(payload) or "no message"
    keys = [str(fields[k]) for k in ("type", "code", "status") if isinstance(fields.get(k), str) and fields[k]]
    cls = next((error_map[k] for k in keys if k in error_map), None)
    code = fields.get("code")
    if cls is None and isinstance(code, int) and not isinstance(code, bool) and code >= 400:
        mapped = map_http_error(provider, code, payload, key_env=key_env)
        mapped.status = None
        return mapped
    if cls is None or cls is BadRequestError:
        if is_context_length_message(message):
            cls = ContextLengthError
    label = next((k for k in keys if k != "error"), "unknown")
    return (cls or StreamError)(f"{provider} {what} ({label}): {message}", provider=provider, body=payload)


def retry_reason(error: Exception) -> str:
    """A few words for the view on why a request is retried: "rate limited", "overloaded", "HTTP 503"..."""
    from ..errors import OverloadedError, ProviderConnectionError, RateLimitError

    if isinstance(error, RateLimitError):
        return "rate limited"
    if isinstance(error, OverloadedError):
        return "the provider is overloaded"
    if isinstance(error, ProviderConnectionError):
        return "the connection failed"
    status = getattr(error, "status", None)
    return f"HTTP {status}" if status else "the provider sent an error"
