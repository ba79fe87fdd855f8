"""HTTP for every provider: one httpx client per model, POST-and-stream with retries, and the keys.

    ProviderHTTP                   the client, the retry loop and the error mapping
      stream_events(path, body)    POST, retry while nothing has been read, then SSE events
    Secret, clean_key  (_keys.py)  an API key as loaded, and its checks
    SSEDecoder  (from _sse.py)     bytes in (split anywhere), `ServerSentEvent`s out
    map_http_error  (_errors.py)   status + body -> AuthenticationError, RateLimitError, ...
    drain, read_rest (_bodies.py)  what is left of a response body

The model base class that uses it (`HTTPModel`, the one `stream` of every adapter) is in _model.py.

A response its reader stops at the stream's last event (the models stop once the stream says it is done) has
the little left of its body (`data: [DONE]`) read before it is closed, so its connection goes back to the pool
rather than every request opening a new one (`_bodies.drain`).

Retries happen only before the first byte of a response body has been read: 429, 500, 502, 503, 504,
529 and connection failures, with exponential backoff and jitter, honouring `Retry-After` (seconds or
an HTTP date) and `retry-after-ms`. Once a body has begun, a failure is never retried blindly: it is a
`ProviderConnectionError` or `StreamError` saying how much had arrived.

API keys travel only in request headers (never in URLs or bodies). They are validated and stripped when
loaded (`clean_key`), held in a `Secret` whose repr hides them, registered with `nbagent.safety.secrets` so that
`redact` removes them from every error (`ProviderError` redacts its message and body), log line and record,
and never follow a redirect to another origin: redirects are not followed by httpx, only a 307/308 to the
same origin is, by the retry loop. Request bodies pass through `redact_value` before they are recorded or
sent (the model must not see a key that a tool result or a notebook variable carried).
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import logging
import random
import time
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Any, AsyncIterator, Awaitable, Callable, Mapping, Sequence

import httpx

from ..budget.sending import SocketPacing, request_gate, socket_hook
from ..errors import ConfigurationError, ProviderConnectionError, ProviderError, StreamError
from ..events import report_retry, report_silence
from ..safety import secrets as _secrets
from ._bodies import decode_error_body, drain, read_rest
from ._errors import error_message, error_type, is_context_length_message, map_http_error, retry_reason, scrub
from ._keys import Secret, clean_key, credential_header
from ._sse import ServerSentEvent, SSEDecoder, loads
from .base import OnRequest

__all__ = [
    "ProviderHTTP",
    "RetryPolicy",
    "SSEDecoder",
    "Secret",
    "ServerSentEvent",
    "clean_key",
    "credential_header",
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
SILENCE_NOTICE = 30.0
"""Seconds without a byte from the provider before the run says so ("no answer from HOST for 30 s")."""
SILENCE_EVERY = 10.0
"""Then how often it says so again, with the time it has lasted."""


class _Silence:
    """Watches one request for silence: reports it (`report_silence`) while nothing arrives, and once
    more (0 s) when something does."""

    def __init__(self, host: str, after: float, every: float) -> None:
        self.host, self.after, self.every = host, after, every
        self.last = time.monotonic()
        self.noticed = False
        self._task = asyncio.get_running_loop().create_task(self._watch())

    def heard(self) -> None:
        self.last = time.monotonic()
        if self.noticed:
            self.noticed = False
            report_silence(self.host, 0)

    async def _watch(self) -> None:
        while True:
            quiet = time.monotonic() - self.last
            if quiet < self.after:
                await asyncio.sleep(self.after - quiet)
                continue
            self.noticed = True
            report_silence(self.host, quiet)
            await asyncio.sleep(self.every)

    def close(self) -> None:
        self._task.cancel()

_MAX_ERROR_BODY = 64 * 1024
_MAX_REDIRECTS = 5
_MAX_GATED_WAITS = 20
"""429s a request may meet under a batch's limiter (which paces and pauses the whole batch after each) before
its own retries count them."""

_TLS: dict[tuple[str | None, ...], Any] = {}


def tls_context() -> Any:
    """The TLS settings every client made here shares: httpx's default (`httpx.create_ssl_context()`: certifi's
    roots, or `SSL_CERT_FILE` / `SSL_CERT_DIR`), made once for each value of the variables it reads. Making one
    loads every root: ~15-20 ms of CPU a client before (py-spy), which httpx's documentation advises sharing."""
    import os

    key = tuple(os.environ.get(name) for name in ("SSL_CERT_FILE", "SSL_CERT_DIR", "SSLKEYLOGFILE"))
    context = _TLS.get(key)
    if context is None:
        context = _TLS[key] = httpx.create_ssl_context()
    return context


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
    kind = error_type(error.body)
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
        self.silence_after, self.silence_every = SILENCE_NOTICE, SILENCE_EVERY
        """When a run says the provider has sent nothing for a while (see `_Silence`)."""
        self._given_client = client
        self._client: httpx.AsyncClient | None = None
        self._client_loop: asyncio.AbstractEventLoop | None = None
        self._pacing = SocketPacing()
        """Whether the client's transport reports its writes: then a batch's request waits for its time there."""

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
                verify=tls_context(),
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

    @property
    def host(self) -> str:
        """The host (and port) requests go to, as messages name it."""
        try:
            return httpx.URL(self.base_url).netloc.decode("ascii", "replace") or self.base_url
        except httpx.InvalidURL:
            return self.base_url

    def url(self, path: str) -> str:
        return path if path.startswith(("http://", "https://")) else f"{self.base_url}/{path.lstrip('/')}"

    # -- requests ----------------------------------------------------------------------------------------
    async def stream_events(self, path: str, body: Any, **options: Any) -> AsyncIterator[ServerSentEvent]:
        """POST `body` as JSON and yield the server-sent events of the response.

        Retries (see `RetryPolicy`) until the first byte of the body has been read; afterwards a dropped
        connection is a `ProviderConnectionError`. Options: `on_request` (gets `body` once, before the
        first attempt), `headers` (added to the request's).
        """
        async with aclosing(self.stream_batches(path, body, **options)) as batches:
            async for batch in batches:
                for event in batch:
                    yield event

    async def stream_batches(
        self,
        path: str,
        body: Any,
        *,
        on_request: OnRequest | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> AsyncIterator[list[ServerSentEvent]]:
        """`stream_events`, yielding the events of each network chunk as one list (one step of an async
        generator per chunk rather than per event: the models' streaming path uses this)."""
        base_headers = self._headers()  # raises AuthenticationError now when there is no key
        # what is recorded is what is sent, with no known secret in it (tool results passed the secret gate
        # already; the conversation's own words, credential-shaped or not, go as they were)
        body = _secrets.redact_value(body, shapes=False)
        if on_request is not None:
            on_request(body)
        content = json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        silence = _Silence(self.host, self.silence_after, self.silence_every)
        try:
            response, first, chunks = await self._open(path, content, {**base_headers, **(headers or {})}, silence)
        except BaseException:
            silence.close()
            raise
        silence.heard()
        decoder = SSEDecoder()
        feed = decoder.feed
        try:
            if response.headers.get("content-type", "").split(";")[0].strip() == "application/json":
                raise self._json_instead_of_stream(first + await read_rest(chunks))
            if first:
                yield feed(first)
            try:
                async for chunk in chunks:
                    silence.heard()
                    events = feed(chunk)
                    if events:
                        yield events
            except httpx.TimeoutException as exc:
                raise self._connection_error(
                    f"the stream stalled: no data from {self.host} for {self.timeout.read:g}s after "
                    f"{decoder.bytes_read:,} bytes (not retried: the response had begun)", exc) from exc
            except httpx.TransportError as exc:
                raise self._connection_error(
                    f"the connection dropped after {decoder.bytes_read:,} bytes of the response "
                    f"({decoder.events_read} events; not retried: the response had begun)", exc) from exc
            except httpx.HTTPError as exc:
                raise StreamError(scrub(f"{self.provider}: the response could not be read after "
                                        f"{decoder.bytes_read:,} bytes: {type(exc).__name__}: {exc}",
                                        self._secrets()), provider=self.provider) from None
            last = decoder.end()
            if last:
                yield last
        except GeneratorExit:  # the reader had all it needed (the stream said it was done): keep the connection
            await drain(chunks)
            raise
        finally:
            silence.close()
            await response.aclose()

    def _json_instead_of_stream(self, raw: bytes) -> ProviderError:
        payload = decode_error_body(raw)
        message = error_message(payload)
        if message:
            return StreamError(f"{self.provider} answered with an error instead of a stream: "
                               f"{scrub(message, self._secrets())}", provider=self.provider,
                               body=scrub(payload, self._secrets()))
        return StreamError(f"{self.provider} answered with JSON instead of an event stream", provider=self.provider,
                           body=scrub(payload, self._secrets()))

    def _redirect_target(self, response: httpx.Response, request: httpx.Request) -> ProviderError | httpx.URL:
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
        self, path: str, content: bytes, request_headers: Mapping[str, str], silence: _Silence | None = None,
    ) -> tuple[httpx.Response, bytes, AsyncIterator[bytes]]:
        """Send until a 2xx response whose first chunk has arrived; return it, that chunk and the rest."""
        url: str | httpx.URL = self.url(path)
        policy = self.retry
        gate = request_gate.get()  # a batch's shared limiter, when this request is one item's
        paused = 0
        attempt = 0
        redirects = 0
        while True:
            attempt += 1
            gated: float | None = None  # on a 429 under a batch's limiter: the seconds it holds the batch
            if gate is not None:
                await gate.before(len(content), early=self._pacing.reports)
            headers = {"content-type": "application/json", "accept": "text/event-stream", **request_headers}
            client = self.client()
            try:
                request = client.build_request("POST", url, content=content, headers=headers)
            except httpx.InvalidURL as exc:
                raise ConfigurationError(
                    f"{self.provider}: the base URL {self.base_url!r} is not valid: {exc}") from None
            if gate is not None:  # the last wait for the request's time is at the write (nbagent.budget.sending)
                request.extensions["trace"] = socket_hook(gate, self._pacing)
            error: ProviderError
            cause: BaseException | None = None
            response: httpx.Response | None = None
            try:
                response = await client.send(request, stream=True, follow_redirects=False)
                if gate is not None:
                    gated = gate.after(response.status_code, response.headers, parse_retry_after(response.headers))
                if 300 <= response.status_code < 400:
                    redirect = self._redirect_target(response, request)
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
                        self.provider, response.status_code, decode_error_body(raw), key_env=self.key_env,
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
            except httpx.ReadTimeout as exc:  # it accepted the request and said nothing: waiting again will not help
                if response is not None:
                    await response.aclose()
                raise self._connection_error(
                    f"no answer from {self.host} for {self.timeout.read:g} s: it accepted the request and sent "
                    f"nothing (attempt {attempt}; not retried)", exc) from None
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
            delay = policy.backoff(attempt, error.retry_after) if gated is None else gated
            log.info("%s: %s; retrying in %.3gs (retry %d of %d)", self.provider, error.message, delay, attempt,
                     policy.max_retries)
            report_retry(attempt, policy.max_retries, delay, retry_reason(error))
            if gated is not None and paused < _MAX_GATED_WAITS:  # the batch's limiter holds the kind that ran out
                paused += 1              # for this wait: the next `before` waits it out; it is not this request's retry
                attempt -= 1
                continue
            await policy.sleep(delay)
            if silence is not None:
                silence.heard()  # the wait was ours, not the provider's silence

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


def _origin(url: httpx.URL) -> tuple[str, str, int | None]:
    default = {"http": 80, "https": 443}.get(url.scheme)
    return (url.scheme, url.host, url.port or default)
