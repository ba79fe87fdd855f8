"""The base of every HTTP model: keys and settings, and the one streaming path all adapters share.

    HTTPModel
      stream(messages, tools)     build_request -> POST (ProviderHTTP) -> parse_event -> state.process
                                  -> deltas, then state.result(); an error sent inside the stream before
                                  anything was shown is retried like the status it stands for
      to_wire / wire_tool_result  the adapter's own mapping of a transcript / one tool result

An adapter (anthropic.py, openai.py, openai_responses.py, google.py; mistral.py is a profile of openai.py)
holds only what differs: the request mapping going out, a pure `StreamState` coming in, its error map and
its finish-reason map.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from contextlib import aclosing
from typing import Any, AsyncIterator, Callable, Iterable, Mapping, Protocol, Sequence

import httpx

from ..errors import AuthenticationError, ConfigurationError, ProviderError, StreamError
from ..events import StreamEvent, report_retry
from ..messages import AssistantMessage, Message, ToolResultMessage
from ..safety import secrets as _secrets
from ..safety import keys as _keys_store
from ..tools.definition import Tool
from ._common import NameRule, ToolNames, names_for
from ._errors import retry_reason, retryable_in_stream
from ._http import ProviderHTTP, RetryPolicy
from ._keys import Secret, clean_key, credential_header
from ._sse import ServerSentEvent, loads
from .base import Model, OnRequest

__all__ = ["HTTPModel", "StreamState"]

log = logging.getLogger("nbagent.providers")


class StreamState(Protocol):
    """The pure accumulator of one streamed response (one per attempt)."""

    done: bool
    """Whether the stream's terminal event has arrived."""

    def process(self, event: Any) -> Iterable[StreamEvent]:
        """Take one parsed event; return the deltas to show (often none, rarely more than one)."""

    def result(self) -> AssistantMessage:
        """The finished message (a `StreamError` when the stream stopped before its end)."""


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

    An adapter provides its request mapping (`build_request`, `map_messages`, `map_tool_result`), its
    pure stream state (`new_state(names)`, whose `process(event)` returns the events to show) and how one
    server-sent event is parsed (`parse_event`); `stream`, `wire_tool_result` and `to_wire` are written
    here once.
    """

    key_env: tuple[str, ...] = ()
    """Environment variables holding the API key, in order of preference."""
    key_required: bool = True
    """False for local servers that need no key."""
    base_url_env: tuple[str, ...] = ()
    """Environment variables holding the base URL, in order of preference."""
    default_base_url: str = ""
    path: str = ""
    """The path requests are POSTed to (under the base URL)."""
    name_rule: NameRule = NameRule()
    """What the provider accepts as a tool name."""
    stop_when_done: bool = True
    """Stop reading once the stream state is `done` (False where usage may follow the last chunk)."""
    stream_field: bool = True
    """The body says `"stream": true` (last, over any setting)."""

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
            if credential_header(header) and isinstance(value, str):
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
        """The first of these settings that is set: in the environment, else stored (`nbagent.safety.keys`)."""
        for name in names:
            value = (_keys_store.lookup(name) or "").strip()
            if value:
                return value
        return None

    def api_key(self) -> Secret | None:
        """The key: the one passed in, else the first of `key_env` that is set, in the environment or else
        stored with the panel's Settings (`nbagent.safety.keys`; read now, stripped; a key with whitespace,
        control characters or non-ASCII inside is an `AuthenticationError` naming the variable)."""
        if self._api_key:
            return self._api_key
        for name in self.key_env:
            value = os.environ.get(name, "")
            where = name
            if not value.strip():
                value, where = _keys_store.stored(name) or "", f"the key stored for {name}"
            if value.strip():
                key = clean_key(value, where, self.provider)
                _secrets.add_secret(key, name)
                return Secret(key)
        return None

    def _secret_values(self) -> list[str]:
        try:
            key = self.api_key()
        except AuthenticationError:
            return [v for v in (_keys_store.lookup(n) or "" for n in self.key_env) if v.strip()]
        return [key.value] if key else []

    def _request_headers(self) -> dict[str, str]:
        key = self.api_key()
        if key is None and self.key_required:
            env = " or ".join(self.key_env)
            raise AuthenticationError(
                f"no API key for {self.provider}: set {env}, store one in the nbagent panel's Settings, or pass "
                f"api_key=... to the model",
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

    # -- what each adapter provides ---------------------------------------------------------------------
    def map_request(self, messages: Sequence[Message], tools: Sequence[Tool], names: ToolNames,
                    instructions: str | None, settings: dict[str, Any]) -> dict[str, Any]:
        """The request body (`settings`: the model's defaults updated with the request's, None values
        dropped; the adapter pops what it maps)."""
        raise NotImplementedError

    state_class: Callable[..., StreamState]
    """The adapter's stream state: `state_class(names, partial=...)`."""

    def new_state(self, names: ToolNames) -> StreamState:
        """A fresh stream state for one attempt."""
        return self.state_class(names, partial=self.partial_arguments)

    def parse_event(self, sse: ServerSentEvent) -> Any:
        """One server-sent event as the state takes it, a JSON object (None: nothing to process). An event
        without a `type` takes the SSE event name; a JSON array (Gemini through some proxies) its first item."""
        data = sse.data
        if not data or data == "[DONE]":
            return None
        try:
            event = loads(data)
        except ValueError:
            raise StreamError(f"{self.provider} sent a malformed event ({sse.event}): {data[:200]!r}",
                              provider=self.provider) from None
        if event.__class__ is list:
            event = event[0] if event else {}
        if event.__class__ is not dict:
            raise StreamError(f"{self.provider} sent an event that is not an object: {data[:200]!r}",
                              provider=self.provider)
        if "type" not in event and sse.event != "message":
            event["type"] = sse.event
        return event

    def map_messages(self, messages: Sequence[Message], names: ToolNames) -> Any:
        """A transcript in this provider's message format."""
        raise NotImplementedError

    def map_tool_result(self, message: ToolResultMessage) -> Any:
        """One tool result as this provider receives it."""
        raise NotImplementedError

    # -- written once ----------------------------------------------------------------------------------
    def build_request(
        self, messages: Sequence[Message], tools: Sequence[Tool] = (), *, instructions: str | None = None,
        **settings: Any,
    ) -> tuple[dict[str, Any], ToolNames]:
        """The request body for these messages and tools, and the tool-name map used to read the answer."""
        names = self.tool_names(messages, tools)
        body = self.map_request(messages, tools, names, instructions, self.request_settings(settings))
        if self.stream_field:
            body["stream"] = True
        return body, names

    def tool_names(self, messages: Sequence[Message], tools: Sequence[Tool] = ()) -> ToolNames:
        """The wire names of one request: the offered tools first, then names called in the history."""
        return names_for(messages, tools, self.name_rule)

    def wire_tool_result(self, message: ToolResultMessage) -> Any:
        """The JSON this provider receives for one tool result (shown as `call.wire`)."""
        return self.map_tool_result(message)

    def to_wire(self, messages: Sequence[Message]) -> Any:
        """A whole transcript in this provider's message format."""
        return self.map_messages(messages, self.tool_names(messages))

    async def stream(
        self,
        messages: Sequence[Message],
        tools: Sequence[Tool] = (),
        *,
        instructions: str | None = None,
        on_request: OnRequest | None = None,
        **settings: Any,
    ) -> AsyncIterator[StreamEvent | AssistantMessage]:
        """POST the request and stream it through a fresh state: its deltas, then its `result()`.

        An error carried INSIDE the stream (no HTTP status: the HTTP layer already retried statuses) is
        retried like its status (`retryable_in_stream`) while nothing has been shown; once a delta went
        out, it is raised. Nothing is sent until the first item is asked for.
        """
        body, names = self.build_request(messages, tools, instructions=instructions, **settings)
        policy = self.http.retry
        parse = self.parse_event
        stop_when_done = self.stop_when_done
        attempt = 0
        while True:
            attempt += 1
            state = self.new_state(names)
            process = state.process
            shown = False
            try:
                async with aclosing(self.http.stream_batches(self.path, body, on_request=on_request)) as batches:
                    async for batch in batches:
                        for sse in batch:
                            event = parse(sse)
                            if event is None:
                                continue
                            for delta in process(event):
                                shown = True
                                yield delta
                            if stop_when_done and state.done:
                                break
                        else:
                            continue
                        break
            except ProviderError as exc:
                if shown or not retryable_in_stream(exc) or attempt > policy.max_retries:
                    raise
                on_request = None  # the request was recorded once
                delay = policy.backoff(attempt, exc.retry_after)
                log.info("%s: %s; retrying in %.1fs (retry %d of %d)", self.provider, exc.message, delay, attempt,
                         policy.max_retries)
                report_retry(attempt, policy.max_retries, delay, retry_reason(exc))
                await policy.sleep(delay)
                continue
            yield state.result()
            return

    async def aclose(self) -> None:
        await self.http.aclose()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.spec} at {self.base_url}>"
