"""HTTP for every provider: one httpx client per model, POST-and-stream with retries, an incremental
server-sent-events reader, and the translation of HTTP failures into nbagent's exceptions.

    HTTPModel                      base class of the HTTP providers (key, base URL, settings, client)
      └── ProviderHTTP             the client, the retry loop and the error mapping
            stream_events(path, body)   POST, retry while nothing has been read, then SSE events
    SSEDecoder  (from _sse.py)     bytes in (split anywhere), `ServerSentEvent`s out
    map_http_error(...)            status + body -> AuthenticationError, RateLimitError, ...

Retries happen only before the first byte of a response body has been read: 429, 500, 502, 503, 504,
529 and connection failures, with exponential backoff and jitter, honouring `Retry-After` (seconds or
an HTTP date) and `retry-after-ms`. Once a body has begun, a failure is never retried blindly: it is a
`ProviderConnectionError` or `StreamError` saying how much had arrived.

API keys travel only in request headers (never in URLs or bodies). They are validated and stripped when
loaded (`clean_key`), held in a `Secret` whose repr hides them, registered with `nbagent.secrets` so that
`redact` removes them from every error (`ProviderError` redacts its message and body), log line and record,
and never follow a redirect to another origin: redirects are not followed by httpx, only a 307/308 to the
same origin is, by the retry loop. Request bodies pass through `redact_value` before they are recorded or
sent (the model must not see a key that a tool result or a notebook variable carried).
"""

from __future__ import annotations

import asyncio
import dataclasses
import email.utils
import json
import json.scanner
import logging
import os
import random
import re
import time
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Any, AsyncIterator, Awaitable, Callable, Mapping, Sequence

import httpx

from .. import secrets as _secrets
from ..errors import (
    AuthenticationError,
    BadRequestError,
    ConfigurationError,
    ContextLengthError,
    NotFoundError,
    OverloadedError,
    PermissionDeniedError,
    ProviderConnectionError,
    ProviderError,
    RateLimitError,
    ServerError,
    StreamError,
)
from ._sse import SSEDecoder, ServerSentEvent, loads
from .base import Model, OnRequest

__all__ = [
    "HTTPModel",
    "ProviderHTTP",
    "RetryPolicy",
    "SSEDecoder",
    "Secret",
    "ServerSentEvent",
    "clean_key",
    "error_message",
    "is_context_length_message",
    "loads",
    "map_http_error",
    "parse_retry_after",
]

log = logging.getLogger("nbagent.providers")

RETRY_STATUSES = frozenset({429, 500, 502, 503, 504, 529})
"""Statuses retried (before any of the body is read)."""

DEFAULT_TIMEOUT = httpx.Timeout(connect=15.0, read=600.0, write=60.0, pool=30.0)
"""`read` is the longest silence tolerated between two chunks of a stream."""

_MAX_ERROR_BODY = 64 * 1024
_MAX_REDIRECTS = 5


# --------------------------------------------------------------------------------------------------
# Secrets
# --------------------------------------------------------------------------------------------------
class Secret:
    """An API key: `value` gives it; repr and str never do."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    @property
    def value(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return "Secret('***')"

    __str__ = __repr__

    def __bool__(self) -> bool:
        return bool(self._value)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and other._value == self._value

    def __hash__(self) -> int:
        return hash(self._value)

    def __reduce__(self) -> Any:  # never pickled into notebooks' stores or logs
        raise TypeError("an API key is not picklable")

    def __copy__(self) -> Secret:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> Secret:
        return self


def clean_key(value: str, where: str, provider: str | None = None) -> str:
    """An API key as loaded from `where` (a variable's name, or `api_key=`): surrounding whitespace (a
    trailing newline from a file or a shell) removed; a key with whitespace or control characters inside,
    or characters outside ASCII, refused with an error naming `where` (and never showing the key)."""
    key = value.strip()
    bad = next((c for c in key if not 0x21 <= ord(c) <= 0x7E), None)
    if bad is not None:
        what = ("whitespace or a control character" if bad.isspace() or ord(bad) < 0x20 or ord(bad) == 0x7F
                else "a character outside ASCII")
        raise AuthenticationError(
            f"the API key in {where} is not valid: it holds {what} inside it (at position "
            f"{key.index(bad) + 1} of {len(key)}); copy the key again", provider=provider)
    return key


_CREDENTIAL_HEADER = re.compile(r"auth|key|token|secret|cookie|password", re.I)


def scrub(value: Any, secrets: Sequence[str]) -> Any:
    """`value` with every secret `nbagent.secrets.redact` knows, and each of `secrets`, replaced (strings,
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


# --------------------------------------------------------------------------------------------------
# Errors
# --------------------------------------------------------------------------------------------------
_CONTEXT_LENGTH = re.compile(
    r"context[ _-]?length|context window|maximum context|prompt is too long|too many tokens|"
    r"input (?:token count|is too long)|exceeds? the (?:maximum|max)[^.]*tokens|tokens? (?:exceed|limit)|"
    r"reduce the length of the (?:messages|prompt)|string_above_max_length|request_too_large|"
    r"too large for model|maximum (?:number of )?tokens|prompt[^.]*too long",
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


def _error_type(payload: Any) -> str:
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
    """The nbagent exception for an HTTP error `status` with the decoded error body `payload`."""
    payload = scrub(payload, secrets)
    message = scrub(error_message(payload), secrets)
    kind = _error_type(payload)
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
    if is_context_length_message(message) or kind in ("context_length_exceeded", "request_too_large"):
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


def _decode_error_body(raw: bytes) -> Any:
    text = raw.decode("utf-8", "replace")
    try:
        return json.loads(text)
    except ValueError:
        return text.strip()[:2000]


async def _read_rest(chunks: AsyncIterator[bytes]) -> bytes:
    out: list[bytes] = []
    try:
        async for chunk in chunks:
            out.append(chunk)
    except httpx.TransportError:
        pass
    return b"".join(out)


def parse_retry_after(headers: Mapping[str, str], now: float | None = None) -> float | None:
    """Seconds to wait from `retry-after-ms`, or `Retry-After` in seconds or as an HTTP date."""
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            value = float(ms) / 1000.0
            if value >= 0:
                return value
        except ValueError:
            pass
    raw = headers.get("retry-after")
    if not raw:
        return None
    raw = raw.strip()
    try:
        value = float(raw)
        return value if value >= 0 else None
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(raw)
    except (TypeError, ValueError, IndexError):
        return None
    if when is None:
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


# --------------------------------------------------------------------------------------------------
# Retries
# --------------------------------------------------------------------------------------------------
@dataclass
class RetryPolicy:
    """How failed requests are retried (only before any of a response body has been read)."""

    max_retries: int = 4
    """Retries after the first attempt (so at most `max_retries + 1` requests)."""
    base_delay: float = 0.5
    """The first backoff, doubled on every retry."""
    max_delay: float = 20.0
    """The longest backoff when the provider does not say."""
    jitter: float = 0.25
    """Backoffs are shortened by a random fraction up to this much."""
    max_retry_after: float = 60.0
    """A `Retry-After` longer than this is not waited for: the error is raised, carrying it."""
    sleep: Callable[[float], Awaitable[Any]] = field(default=asyncio.sleep, repr=False)
    """How to wait (cancellable; tests replace it)."""

    def backoff(self, retry: int, retry_after: float | None = None) -> float:
        """Seconds to wait before retry number `retry` (1-based)."""
        if retry_after is not None:
            return retry_after
        delay = min(self.max_delay, self.base_delay * (2 ** (retry - 1)))
        return delay * (1.0 - self.jitter * random.random())


def _retryable(error: ProviderError) -> bool:
    if error.status is None:
        return isinstance(error, ProviderConnectionError)
    if error.status not in RETRY_STATUSES:
        return False
    kind = _error_type(error.body)
    return kind != "insufficient_quota"  # a 429 that waiting will not cure


# --------------------------------------------------------------------------------------------------
# The client
# --------------------------------------------------------------------------------------------------
class ProviderHTTP:
    """One provider endpoint: a lazily created `httpx.AsyncClient` (one per model, re-made if the event
    loop changes), the retry loop, SSE decoding and error mapping."""

    def __init__(
        self,
        provider: str,
        base_url: str,
        *,
        headers: Callable[[], Mapping[str, str]],
        secrets: Callable[[], Sequence[str]] = lambda: (),
        key_env: Sequence[str] = (),
        timeout: httpx.Timeout | float | None = None,
        retry: RetryPolicy | None = None,
        client: httpx.AsyncClient | None = None,
    ) -> None:
        self.provider = provider
        self.base_url = base_url.rstrip("/")
        self._headers = headers
        self._secrets = secrets
        self.key_env = tuple(key_env)
        self.timeout = DEFAULT_TIMEOUT if timeout is None else (
            timeout if isinstance(timeout, httpx.Timeout) else httpx.Timeout(timeout, connect=min(timeout, 15.0)))
        self.retry = retry or RetryPolicy()
        self._given_client = client
        self._client: httpx.AsyncClient | None = None
        self._client_loop: asyncio.AbstractEventLoop | None = None

    def __repr__(self) -> str:
        return f"<ProviderHTTP {self.provider} {self.base_url}>"

    # -- the client --------------------------------------------------------------------------------------
    def client(self) -> httpx.AsyncClient:
        """The model's client, made on first use (and again if used from another event loop)."""
        if self._given_client is not None:
            return self._given_client
        loop = asyncio.get_running_loop()
        if self._client is None or self._client.is_closed or self._client_loop is not loop:
            # A client is bound to the loop it first ran on; a new loop (a new notebook cell runner, a new
            # test) gets its own. The old one's connections belong to a loop that is gone or busy elsewhere.
            self._client = httpx.AsyncClient(
                timeout=self.timeout,
                limits=httpx.Limits(max_connections=100, max_keepalive_connections=20, keepalive_expiry=30.0),
                follow_redirects=False,  # credentials never follow a redirect to another origin: see _open
            )
            self._client_loop = loop
        return self._client

    async def aclose(self) -> None:
        """Close the client this object made (a client passed in belongs to the caller)."""
        client, self._client, self._client_loop = self._client, None, None
        if client is not None and not client.is_closed:
            await client.aclose()

    def url(self, path: str) -> str:
        return path if path.startswith(("http://", "https://")) else f"{self.base_url}/{path.lstrip('/')}"

    # -- requests ----------------------------------------------------------------------------------------
    async def stream_events(
        self,
        path: str,
        body: Any,
        *,
        on_request: OnRequest | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> AsyncIterator[ServerSentEvent]:
        """POST `body` as JSON and yield the server-sent events of the response.

        Retries (see `RetryPolicy`) until the first byte of the body has been read; afterwards a dropped
        connection is a `ProviderConnectionError`. `on_request` gets `body` once, before the first attempt.
        """
        base_headers = self._headers()  # raises AuthenticationError now when there is no key
        body = _secrets.redact_value(body)  # what is recorded is what is sent, with no secret in it
        if on_request is not None:
            on_request(body)
        content = json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        response, first, chunks = await self._open(path, content, {**base_headers, **(headers or {})})
        decoder = SSEDecoder()
        try:
            if response.headers.get("content-type", "").split(";")[0].strip() == "application/json":
                raise self._json_instead_of_stream(first + await _read_rest(chunks))
            if first:
                for event in decoder.feed(first):
                    yield event
            try:
                async for chunk in chunks:
                    for event in decoder.feed(chunk):
                        yield event
            except httpx.TimeoutException as exc:
                raise self._connection_error(
                    f"the stream stalled: no data for {self.timeout.read:g}s after {decoder.bytes_read:,} bytes "
                    "(not retried: the response had begun)", exc) from exc
            except httpx.TransportError as exc:
                raise self._connection_error(
                    f"the connection dropped after {decoder.bytes_read:,} bytes of the response "
                    f"({decoder.events_read} events; not retried: the response had begun)", exc) from exc
            except httpx.HTTPError as exc:
                raise StreamError(scrub(f"{self.provider}: the response could not be read after "
                                        f"{decoder.bytes_read:,} bytes: {type(exc).__name__}: {exc}",
                                        self._secrets()), provider=self.provider) from exc
            for event in decoder.end():
                yield event
        finally:
            await response.aclose()

    def _json_instead_of_stream(self, raw: bytes) -> ProviderError:
        payload = _decode_error_body(raw)
        message = error_message(payload)
        if message:
            return StreamError(f"{self.provider} answered with an error instead of a stream: "
                               f"{scrub(message, self._secrets())}", provider=self.provider,
                               body=scrub(payload, self._secrets()))
        return StreamError(f"{self.provider} answered with JSON instead of an event stream", provider=self.provider,
                           body=scrub(payload, self._secrets()))

    def _redirect_error(self, response: httpx.Response, request: httpx.Request) -> ProviderError | httpx.URL:
        """The URL to follow a redirect to (a 307/308 to the same origin), or the error that refuses it."""
        location = response.headers.get("location", "")
        try:
            target = request.url.join(location)
        except httpx.InvalidURL:
            target = None
        status = response.status_code
        if target is not None and location and status in (307, 308) and _origin(target) == _origin(request.url):
            return target
        where = f" to {target.scheme}://{target.netloc.decode('ascii', 'replace')}" if target is not None and location else ""
        why = ("another origin: the API key is not sent there" if target is not None and location
               and _origin(target) != _origin(request.url) else "a redirect that would not repeat the request")
        return ProviderError(
            f"{self.provider} answered {status}, a redirect{where}; not followed ({why}). Set the model's "
            "base_url to the address the API is at", status=status, provider=self.provider)

    def _connection_error(self, what: str, exc: BaseException | None) -> ProviderConnectionError:
        detail = f": {type(exc).__name__}: {exc}" if exc is not None and str(exc) else (
            f": {type(exc).__name__}" if exc is not None else "")
        message = scrub(f"{self.provider} ({self.base_url}): {what}{detail}", self._secrets())
        return ProviderConnectionError(message, provider=self.provider)

    async def _open(
        self, path: str, content: bytes, request_headers: Mapping[str, str]
    ) -> tuple[httpx.Response, bytes, AsyncIterator[bytes]]:
        """Send until a 2xx response whose first chunk has arrived; return it, that chunk and the rest."""
        url: str | httpx.URL = self.url(path)
        policy = self.retry
        attempt = 0
        redirects = 0
        while True:
            attempt += 1
            headers = {"content-type": "application/json", "accept": "text/event-stream", **request_headers}
            client = self.client()
            try:
                request = client.build_request("POST", url, content=content, headers=headers)
            except httpx.InvalidURL as exc:
                raise ConfigurationError(
                    f"{self.provider}: the base URL {self.base_url!r} is not valid: {exc}") from None
            error: ProviderError
            cause: BaseException | None = None
            response: httpx.Response | None = None
            try:
                response = await client.send(request, stream=True, follow_redirects=False)
                if 300 <= response.status_code < 400:
                    redirect = self._redirect_error(response, request)
                    await response.aclose()
                    if isinstance(redirect, ProviderError) or redirects >= _MAX_REDIRECTS:
                        raise redirect if isinstance(redirect, ProviderError) else ProviderError(
                            f"{self.provider}: more than {_MAX_REDIRECTS} redirects", provider=self.provider)
                    redirects += 1
                    attempt -= 1  # following a redirect is not a retry
                    url = redirect
                    continue
                if response.status_code >= 400 or response.status_code < 200:
                    raw = await self._read_error_body(response)
                    error = map_http_error(
                        self.provider, response.status_code, _decode_error_body(raw), key_env=self.key_env,
                        retry_after=parse_retry_after(response.headers), secrets=self._secrets(),
                    )
                else:
                    chunks = response.aiter_bytes()
                    first = b""
                    async for chunk in chunks:
                        if chunk:
                            first = chunk
                            break
                    return response, first, chunks
            except httpx.UnsupportedProtocol:
                if response is not None:
                    await response.aclose()
                raise ConfigurationError(
                    f"{self.provider}: the base URL {self.base_url!r} must start with http:// or https://"
                ) from None
            except httpx.TimeoutException as exc:
                cause = exc
                error = self._connection_error(f"timed out (attempt {attempt})", exc)
            except httpx.TransportError as exc:
                cause = exc
                error = self._connection_error(f"could not connect or the connection failed (attempt {attempt})", exc)
            except httpx.HTTPError as exc:  # e.g. a body that cannot be decoded: not worth retrying
                if response is not None:
                    await response.aclose()
                raise StreamError(scrub(f"{self.provider}: the response could not be read: {type(exc).__name__}: "
                                        f"{exc}", self._secrets()), provider=self.provider) from None
            except BaseException:
                if response is not None:
                    await response.aclose()
                raise
            if response is not None:
                await response.aclose()
            retries_left = attempt <= policy.max_retries
            too_long = error.retry_after is not None and error.retry_after > policy.max_retry_after
            if not _retryable(error) or not retries_left or too_long:
                if attempt > 1:
                    error.message = f"{error.message} (after {attempt} attempts)"
                    error.args = (error.message,)
                if cause is not None and _secrets.redact(str(cause)) == str(cause):
                    raise error from cause
                raise error from None  # a cause whose text holds a secret is not chained
            delay = policy.backoff(attempt, error.retry_after)
            log.info("%s: %s; retrying in %.1fs (retry %d of %d)", self.provider, error.message, delay, attempt,
                     policy.max_retries)
            await policy.sleep(delay)

    async def _read_error_body(self, response: httpx.Response) -> bytes:
        chunks: list[bytes] = []
        size = 0
        try:
            async for chunk in response.aiter_bytes():
                chunks.append(chunk)
                size += len(chunk)
                if size > _MAX_ERROR_BODY:
                    break
        except httpx.TransportError:
            pass
        return b"".join(chunks)


# --------------------------------------------------------------------------------------------------
# The base of HTTP models
# --------------------------------------------------------------------------------------------------
class HTTPModel(Model):
    """A model behind an HTTP API: the key and base URL (arguments first, then the environment), default
    settings, and one `ProviderHTTP`.

    Subclasses set `provider`, `key_env`, `base_url_env`, `default_base_url` and `auth_headers()`. The
    key is looked up when a request is made, so a model without one can still be built, e.g. to render
    a transcript with `to_wire`. Keyword options other than the transport ones below become default
    request settings (`temperature=0`, `max_tokens=...`); settings passed to `stream()` override them.

    Transport options: `timeout` (seconds or an `httpx.Timeout`), `max_retries`, `retry` (a
    `RetryPolicy`), `headers` (extra headers), `http_client` (an `httpx.AsyncClient` to use instead of
    the model's own), `partial_arguments` (False to skip live parsing of streamed tool arguments).
    """

    key_env: tuple[str, ...] = ()
    """Environment variables holding the API key, in order of preference."""
    key_required: bool = True
    """False for local servers that need no key."""
    base_url_env: tuple[str, ...] = ()
    """Environment variables holding the base URL, in order of preference."""
    default_base_url: str = ""

    def __init__(
        self,
        name: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout: httpx.Timeout | float | None = None,
        max_retries: int | None = None,
        retry: RetryPolicy | None = None,
        headers: Mapping[str, str] | None = None,
        http_client: httpx.AsyncClient | None = None,
        partial_arguments: bool = True,
        **settings: Any,
    ) -> None:
        if not isinstance(name, str) or not name.strip():
            raise ConfigurationError(f"{type(self).__name__} needs a model name, got {name!r}")
        self.name = name.strip()
        if api_key is not None and not isinstance(api_key, str):
            raise ConfigurationError(f"api_key must be a string, not {type(api_key).__name__}")
        try:
            api_key = clean_key(api_key, "api_key=") if api_key else None
        except AuthenticationError as exc:
            raise ConfigurationError(f"{type(self).__name__}: {exc.message}") from None
        if api_key:
            _secrets.add_secret(api_key, "api_key")
        self._api_key = Secret(api_key) if api_key else None
        self.base_url = (base_url or self._env(self.base_url_env) or self.default_base_url).rstrip("/")
        self.settings: dict[str, Any] = dict(settings)
        """Default request settings (temperature, max_tokens, ...)."""
        self.partial_arguments = partial_arguments
        """Whether streamed tool arguments are parsed as they arrive (for `ToolCallDelta.partial_arguments`)."""
        self.extra_headers = dict(headers or {})
        for header, value in self.extra_headers.items():  # a key given as a header is a secret too
            if _CREDENTIAL_HEADER.search(header) and isinstance(value, str):
                _secrets.add_secret(value.split()[-1] if value.split() else value, header)
        policy = retry or RetryPolicy()
        if max_retries is not None:
            policy = dataclasses.replace(policy, max_retries=max_retries)
        self.http = ProviderHTTP(
            self.provider, self.base_url, headers=self._request_headers, secrets=self._secret_values,
            key_env=self.key_env, timeout=timeout, retry=policy, client=http_client,
        )

    @staticmethod
    def _env(names: Sequence[str]) -> str | None:
        for name in names:
            value = os.environ.get(name, "").strip()
            if value:
                return value
        return None

    def api_key(self) -> Secret | None:
        """The key: the one passed in, else the first of `key_env` that is set (read now, stripped; a key
        with whitespace, control characters or non-ASCII inside is an `AuthenticationError` naming the
        variable)."""
        if self._api_key:
            return self._api_key
        for name in self.key_env:
            value = os.environ.get(name, "")
            if value.strip():
                key = clean_key(value, name, self.provider)
                _secrets.add_secret(key, name)
                return Secret(key)
        return None

    def _secret_values(self) -> list[str]:
        try:
            key = self.api_key()
        except AuthenticationError:
            return [v for v in (os.environ.get(n, "") for n in self.key_env) if v.strip()]
        return [key.value] if key else []

    def _request_headers(self) -> dict[str, str]:
        key = self.api_key()
        if key is None and self.key_required:
            env = " or ".join(self.key_env)
            raise AuthenticationError(
                f"no API key for {self.provider}: set {env} or pass api_key=... to the model",
                provider=self.provider,
            )
        headers = {"user-agent": "nbagent"}
        if key is not None:
            _secrets.add_secret(key.value, (self.key_env or ("api_key",))[0])
        headers.update(self.auth_headers(key.value if key else None))
        headers.update(self.extra_headers)
        return headers

    def auth_headers(self, key: str | None) -> dict[str, str]:
        """The headers that carry the key (`Authorization: Bearer` unless a provider says otherwise)."""
        return {"authorization": f"Bearer {key}"} if key else {}

    def request_settings(self, settings: Mapping[str, Any]) -> dict[str, Any]:
        """The model's default settings updated with this request's (None values drop a default)."""
        merged = {**self.settings, **settings}
        return {k: v for k, v in merged.items() if v is not None}

    async def stream_retrying(
        self,
        path: str,
        body: dict[str, Any],
        on_request: OnRequest | None,
        new_state: Callable[[], Any],
        read: Callable[[Any, ServerSentEvent], Any],
        retryable: Callable[[ProviderError], bool],
        *,
        stop_when_done: bool = True,
    ) -> AsyncIterator[Any]:
        """POST `body` and stream it through a fresh accumulator: its deltas, then its `result()`.

        `new_state()` makes the accumulator; `read(state, event)` feeds it one server-sent event and returns
        the deltas it produced (an iterable, possibly empty). An error carried INSIDE the stream (no HTTP
        status: the HTTP layer already retried statuses) is retried like its status when `retryable(exc)`
        says so and nothing has been shown yet; once a delta went out, it is raised. With `stop_when_done`,
        reading stops as soon as the accumulator says `done`.
        """
        policy = self.http.retry
        attempt = 0
        while True:
            attempt += 1
            state = new_state()
            shown = False
            try:
                async with aclosing(self.http.stream_events(path, body, on_request=on_request)) as events:
                    async for sse in events:
                        for delta in read(state, sse):
                            shown = True
                            yield delta
                        if stop_when_done and state.done:
                            break
            except ProviderError as exc:
                if shown or exc.status is not None or not retryable(exc) or attempt > policy.max_retries:
                    raise
                on_request = None  # the request was recorded once
                await policy.sleep(policy.backoff(attempt, exc.retry_after))
                continue
            yield state.result()
            return

    async def aclose(self) -> None:
        await self.http.aclose()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.spec} at {self.base_url}>"


def _origin(url: httpx.URL) -> tuple[str, str, int | None]:
    default = {"http": 80, "https": 443}.get(url.scheme)
    return (url.scheme, url.host, url.port or default)
