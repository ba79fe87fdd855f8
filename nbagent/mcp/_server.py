"""One MCP server of the process: a `Connection`, the state machine from start to stop, and its calls.

    Connection.ensure()  starting: spawn (stdio) or connect (HTTP), negotiate, list the tools
                         ready:    calls go through; progress, log messages reach the call in flight
                         failed:   why (with the server's stderr) is kept; the next use starts it again
    Connection.call()    one tools/call, bounded by the server's `timeout` (reset by each progress report);
                         a timeout or a cancelled caller sends `notifications/cancelled` (the SDK does);
                         a server that does not answer a ping afterwards is restarted on next use

Everything but `status()`, `kill()` and `_orphaned()` runs on the connection's loop (`_connection`). How it
reaches the server, and the trust check before it does, is `_transports`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import time
import warnings
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable

import anyio
import mcp_types
from mcp import Client
from mcp.shared.exceptions import MCPError

from ._config import ServerConfig
from ._errors import ServerError, describe, server_error
from ._transports import STOP_TIMEOUT, Transports

__all__ = ["Connection", "LogMessage", "ServerError"]

log = logging.getLogger("nbagent.mcp")

STDERR_LINES = 200
"""Lines of a server's stderr kept for error messages and the status listing."""
RETRY_AFTER = 30.0
"""Seconds a server that failed to start is left alone before a new turn tries it again (a call always tries)."""
PING_TIMEOUT = 5.0
"""Seconds a server has to answer a ping after one of its calls timed out, before it is restarted."""


@dataclass(slots=True, eq=False)
class _Call:
    """A call in flight: where its progress and the server's log messages go."""

    on_progress: Callable[[float, float | None, str | None], None] | None
    on_log: Callable[[str, str], None] | None
    bump: Callable[[], None] | None = None


@dataclass(slots=True)
class LogMessage:
    """A log message a server sent (`notifications/message`)."""

    level: str
    logger: str | None
    text: str
    time: float = field(default_factory=time.time)

    def __str__(self) -> str:
        who = f" {self.logger}" if self.logger else ""
        return f"[{self.level}{who}] {self.text}"


class Connection(Transports):
    """One server of the process: its state, its tools, its stderr, and the calls in flight.

    Everything but `status()`, `kill()` and `_orphaned()` runs on the connection's loop (`on_home`).
    """

    def __init__(self, config: ServerConfig) -> None:
        self.config = config
        self.name = config.name
        self.state = "idle"
        """idle, starting, ready, failed, closed."""
        self.tools: list[mcp_types.Tool] | None = None
        """The server's tools from its last good listing (kept while it is down, so calls can say why)."""
        self.error: str | None = None
        """Why the server is down (None while it is fine)."""
        self.stderr: deque[str] = deque(maxlen=STDERR_LINES)
        self.logs: deque[LogMessage] = deque(maxlen=STDERR_LINES)
        self.server_info: Any = None
        self.instructions: str | None = None
        self.protocol_version: str | None = None
        self.pid: int | None = None
        self.returncode: int | None = None
        self.starts = 0
        """How many times it was started."""
        self.failed_at = 0.0
        self.listing = 0
        """Bumped each time the tool list changes (a new start, or the server said its list changed)."""
        self.loop: asyncio.AbstractEventLoop | None = None
        """The loop the connection lives on while it is started."""
        self._client: Any = None
        self._owner: asyncio.Task | None = None
        self._starting: asyncio.Future | None = None
        self._stop: asyncio.Event | None = None
        self._process: asyncio.subprocess.Process | None = None
        self._calls: set[_Call] = set()
        self._stale = False
        self._stderr_tail = b""

    # -- status ---------------------------------------------------------------------------------------
    def status(self) -> dict[str, Any]:
        """The server as data: state, tools, error, pid, stderr tail (what `%agent --mcp-list` shows)."""
        return {
            "name": self.name, "transport": self.config.transport, "target": self.config.describe(),
            "state": self.state, "trusted": self.config.trusted, "pid": self.pid, "starts": self.starts,
            "tools": [t.name for t in self.tools or []], "error": self.error,
            "stderr": list(self.stderr)[-20:], "logs": [str(m) for m in list(self.logs)[-20:]],
        }

    def stderr_tail(self, lines: int = 20) -> str:
        return "\n".join(list(self.stderr)[-lines:])

    def _why(self, what: str) -> str:
        """A clear message: what happened, then the tail of the server's stderr."""
        text = f"MCP server {self.name!r} ({self.config.describe()}) {what}"
        tail = self.stderr_tail()
        if tail:
            text += f"\nIts stderr ends with:\n{tail}"
        return text

    # -- lifecycle ------------------------------------------------------------------------------------
    async def ensure(self, *, retry: bool = True) -> None:
        """Start the server unless it is ready (wait for a start in progress); raise `ServerError` if it fails.

        With `retry=False`, a server that failed less than `RETRY_AFTER` seconds ago is left as it is.
        """
        if self.state == "ready" and not self._stale:
            return
        if self.state == "ready" and self._stale:
            await self._relist()
            return
        if self._starting is None:
            if self.state == "failed" and not retry and time.monotonic() - self.failed_at < RETRY_AFTER:
                return  # it failed a moment ago: a new turn does not try again yet (a call does)
            self.loop = asyncio.get_running_loop()
            self._starting = self.loop.create_future()
            self._owner = self.loop.create_task(self._own(self._starting), name=f"mcp-{self.name}")
        starting = self._starting
        try:
            await asyncio.wait_for(asyncio.shield(starting), self.config.startup_timeout)
        except TimeoutError:
            self._fail(self._why(f"did not start within {self.config.startup_timeout:g} s (no answer to "
                                 "initialize or tools/list); it was stopped and will be started again on next use"))
            await self._halt()
            raise ServerError(self.error) from None
        finally:
            if self._starting is starting and starting.done():
                self._starting = None
        starting.result()  # raises ServerError when it failed

    async def _own(self, starting: asyncio.Future) -> None:
        """The task that holds the connection open, from start to stop (the SDK's contexts live here)."""
        self.state = "starting"
        self.error = None
        self.starts += 1
        self._stop = asyncio.Event()
        self.pid = self.returncode = None
        try:
            async with contextlib.AsyncExitStack() as stack:
                transport = self._stdio() if self.config.transport == "stdio" else self._http()
                client = Client(
                    transport,
                    logging_callback=self._on_log,
                    message_handler=self._on_message,
                    log_level=self.config.log_level,
                    client_info=mcp_types.Implementation(name="nbagent", version=_version()),
                    cache=None,
                )
                await stack.enter_async_context(client)
                self._client = client
                self.server_info = client.server_info
                self.instructions = client.instructions
                self.protocol_version = client.protocol_version
                await self._set_log_level(client)
                await self._relist()
                self.state = "ready"
                if not starting.done():
                    starting.set_result(None)
                await self._stop.wait()
        except BaseException as exc:
            if self.state != "closed" and self.state != "failed":
                known = server_error(exc)
                self._fail(str(known) if known is not None else self._why(f"failed to start: {describe(exc)}"))
            if not starting.done():
                starting.set_exception(ServerError(self.error or self._why("was stopped while starting")))
            if not isinstance(exc, (Exception, asyncio.CancelledError)):
                raise
        finally:
            self._client = None
            if self.state == "ready":
                self.state = "failed"
                self.failed_at = time.monotonic()
                self.error = self.error or self._why("closed its connection")
            if not starting.done():
                starting.set_exception(ServerError(self.error or self._why("stopped")))

    async def _set_log_level(self, client: Any) -> None:
        caps = client.server_capabilities
        if getattr(caps, "logging", None) is None or client.protocol_version not in _handshake_versions():
            return  # modern servers get the level with each request (Client(log_level=...))
        try:
            with anyio.fail_after(self.config.startup_timeout), warnings.catch_warnings():
                warnings.simplefilter("ignore")  # deprecated in the 2026 revision, needed by older servers
                await client.session.set_logging_level(self.config.log_level)
        except Exception as exc:
            log.debug("%s: logging/setLevel failed: %s", self.name, exc)

    async def _relist(self) -> None:
        client = self._client
        tools: list[mcp_types.Tool] = []
        cursor = None
        with anyio.fail_after(self.config.startup_timeout):
            for _ in range(100):
                page = await client.list_tools(cursor=cursor)
                tools.extend(page.tools)
                cursor = page.next_cursor
                if not cursor:
                    break
        self._stale = False
        self.tools = tools
        self.listing += 1

    def _fail(self, why: str) -> None:
        self.state = "failed"
        self.error = why
        self.failed_at = time.monotonic()

    async def _halt(self) -> None:
        """Stop the owner task (and with it the server); wait for it to finish."""
        owner = self._owner
        if self._stop is not None:
            self._stop.set()
        if owner is not None and not owner.done():
            try:
                await asyncio.wait_for(asyncio.shield(owner), STOP_TIMEOUT * 3)
            except (TimeoutError, asyncio.CancelledError):
                owner.cancel()
                with contextlib.suppress(BaseException):
                    await asyncio.wait_for(owner, STOP_TIMEOUT * 3)
        self._starting = None

    async def stop(self) -> None:
        """Stop the server for good (a later use starts it again)."""
        await self._halt()
        self.state = "closed"
        self.error = None

    def _orphaned(self) -> None:
        """The loop the connection lived on is gone (an `asyncio.run` that ended): forget it, kill what is
        left of the server, and let the next use start it again."""
        self.kill()
        self.loop = self._owner = self._starting = self._client = self._stop = None
        if self.state in ("ready", "starting"):
            self.state = "idle"

    def kill(self) -> None:
        """Last resort from any thread: kill the server's process group."""
        proc = self._process
        if proc is not None and proc.returncode is None:
            with contextlib.suppress(Exception):
                os.killpg(proc.pid, signal.SIGKILL)

    # -- calls ------------------------------------------------------------------------------------------
    async def call(self, tool: str, arguments: dict[str, Any], call: _Call, timeout: float | None = None) -> Any:
        """One tools/call; returns the SDK's `CallToolResult` or raises `ServerError` saying what went wrong.

        `timeout`: seconds without an answer or a progress report (default: the configuration's)."""
        await self.ensure()
        client = self._client
        timeout = timeout or self.config.timeout
        loop = asyncio.get_running_loop()

        async def progress(value: float, total: float | None, message: str | None) -> None:
            if cm is not None and cm.when() is not None:
                cm.reschedule(loop.time() + timeout)
            if call.on_progress is not None:
                call.on_progress(value, total, message)

        cm: asyncio.Timeout | None = None
        self._calls.add(call)
        try:
            async with asyncio.timeout(timeout) as cm:
                return await client.call_tool(tool, arguments, progress_callback=progress)
        except TimeoutError:
            if cm is None or not cm.expired():
                raise ServerError(self._why(f"timed out in {tool}")) from None
            why = f"did not answer {tool} within {timeout:g} s (nor report progress); the call was cancelled"
            if not await self._answers_ping(client):
                self._fail(self._why(why + ", and the server no longer answers pings: it was stopped and will be "
                                     "started again on next use"))
                await self._halt()
                raise ServerError(self.error) from None
            raise ServerError(self._why(why + " (the server still answers pings)")) from None
        except MCPError as exc:
            if exc.code == mcp_types.CONNECTION_CLOSED:
                await asyncio.sleep(0)  # let the transport record why
                reason = self.error or self._why("closed the connection during the call")
                self._fail(reason)
                await self._halt()
                self.error = reason
                raise ServerError(reason + "\nIt will be started again on next use.") from None
            raise ServerError(f"MCP server {self.name!r} answered {tool} with an error: {exc}") from None
        except (ServerError, asyncio.CancelledError):
            raise
        except Exception as exc:
            if self.state != "ready":
                raise ServerError((self.error or self._why("failed")) + "\nIt will be started again on next use.") from None
            if isinstance(exc, ValueError):  # pydantic's ValidationError: a result the protocol does not allow
                raise ServerError(self._why(f"gave an answer to {tool} that is not valid MCP: {describe(exc)}")) from None
            reason = self._why(f"failed during {tool}: {describe(exc)}")  # the transport: a connection lost
            self._fail(reason)
            await self._halt()
            self.error = reason
            raise ServerError(reason + "\nIt will be started again on next use.") from None
        finally:
            self._calls.discard(call)

    async def _answers_ping(self, client: Any) -> bool:
        """Whether the server still answers: a ping (tools/list where the 2026 protocol has no ping)."""
        if client is None or self.state != "ready":
            return False
        try:
            with anyio.fail_after(PING_TIMEOUT), warnings.catch_warnings():
                warnings.simplefilter("ignore")  # ping is deprecated for 2026 connections, which do not use it
                if client.protocol_version in _handshake_versions():
                    await client.send_ping()
                else:
                    await client.session.list_tools()
            return True
        except Exception:
            return False

    # -- what the server sends besides answers ----------------------------------------------------------
    async def _on_log(self, params: Any) -> None:
        data = params.data
        text = data if isinstance(data, str) else _json(data)
        message = LogMessage(str(params.level), params.logger, text)
        self.logs.append(message)
        for call in list(self._calls):
            if call.on_log is not None:
                call.on_log(message.level, str(message))

    async def _on_message(self, message: Any) -> None:
        if isinstance(message, Exception):
            log.debug("%s: transport error: %s", self.name, message)
            return
        method = getattr(message, "method", None)
        if method == "notifications/tools/list_changed":
            self._stale = True


def _handshake_versions() -> tuple[str, ...]:
    from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

    return tuple(HANDSHAKE_PROTOCOL_VERSIONS)


def _json(value: Any) -> str:
    import json

    try:
        return json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        return repr(value)


def _version() -> str:
    """nbagent's version, as the installed package says (the package root is above this layer)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("nbagent")
    except PackageNotFoundError:  # pragma: no cover - run from a checkout that is not installed
        return "0"
