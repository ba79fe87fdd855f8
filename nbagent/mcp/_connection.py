"""Connections to MCP servers: started when first needed, shared by every run of the process, restarted
after they fail, closed with the process.

A connection lives on one event loop. By default that is a background thread's (`nbagent-mcp`), whatever
loop a run is on (a fresh `asyncio.run` per script call, a test's): a connection then outlives the loop of
the run that started it. A kernel, whose loop lives as long as the process, makes its loop the home of its
connections (`set_loop`), so its runs call servers without a hop between threads. A connection whose loop
has closed is started again on the next use.

    Connection.ensure()  starting: spawn (stdio) or connect (HTTP), negotiate, list the tools
                         ready:    calls go through; progress, log messages reach the call in flight
                         failed:   why (with the server's stderr) is kept; the next use starts it again
    Connection.call()    one tools/call, bounded by the server's `timeout` (reset by each progress report);
                         a timeout or a cancelled caller sends `notifications/cancelled` (the SDK does);
                         a server that does not answer a ping afterwards is restarted on next use
    close_all()          at exit, or `nbagent.mcp.close()`

Before anything is spawned or connected, `_check_trusted` refuses a configuration read from a workspace
file the person has not trusted (`_config.untrusted`), and `${VAR}` is expanded only through
`expand_trusted`: an untrusted configuration starts no program, sends no request and reads no variable.

This module imports the `mcp` SDK; nothing imports it before a server is used. It is one module because
the lifecycle above (start, the home loop, the stdio transport that keeps the pid and stderr, call,
restart, close) is one state machine over one connection object; split, each part would reach into the
others' state.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import logging
import os
import signal
import threading
import time
import warnings
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable

import anyio
import mcp_types
from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp.shared.message import SessionMessage

from ._config import ServerConfig, command_places, expand_trusted, find_command, server_environment, untrusted

__all__ = ["Connection", "ServerError", "close_all", "connection", "connections", "on_home", "run_blocking",
           "set_loop"]

log = logging.getLogger("nbagent.mcp")

STDERR_LINES = 200
"""Lines of a server's stderr kept for error messages and the status listing."""
RETRY_AFTER = 30.0
"""Seconds a server that failed to start is left alone before a new turn tries it again (a call always tries)."""
PING_TIMEOUT = 5.0
"""Seconds a server has to answer a ping after one of its calls timed out, before it is restarted."""
STOP_TIMEOUT = 2.0
"""Seconds a stdio server has to exit once its stdin is closed (then SIGTERM, then SIGKILL)."""
MAX_LINE = 64 * 1024 * 1024
"""The longest message a stdio server may write (images are big)."""


class ServerError(Exception):
    """A server could not be reached, or stopped answering: the message says why, for the model and the user."""


# --------------------------------------------------------------------------------------------------
# Where connections live: a background loop, or a home loop (a kernel's)
# --------------------------------------------------------------------------------------------------
_loop: asyncio.AbstractEventLoop | None = None
_thread: threading.Thread | None = None
_home: asyncio.AbstractEventLoop | None = None
_lock = threading.Lock()


def _background_loop() -> asyncio.AbstractEventLoop:
    global _loop, _thread
    with _lock:
        if _loop is None or _thread is None or not _thread.is_alive():
            loop = asyncio.new_event_loop()
            ready = threading.Event()

            def main() -> None:
                asyncio.set_event_loop(loop)
                loop.call_soon(ready.set)
                loop.run_forever()

            thread = threading.Thread(target=main, name="nbagent-mcp", daemon=True)
            thread.start()
            ready.wait()
            _loop, _thread = loop, thread
        return _loop


def set_loop(loop: asyncio.AbstractEventLoop | None) -> None:
    """Start new connections on this loop (a kernel's, which lives as long as the process) rather than on
    the background thread: calls made from it then need no hop between threads. None: the background thread."""
    global _home
    _home = loop


def _alive(loop: asyncio.AbstractEventLoop | None) -> bool:
    return loop is not None and not loop.is_closed() and loop.is_running()


def _default_loop() -> asyncio.AbstractEventLoop:
    home = _home
    return home if _alive(home) else _background_loop()


def _on_this_thread(loop: asyncio.AbstractEventLoop) -> bool:
    try:
        return asyncio.get_running_loop() is loop
    except RuntimeError:
        return False


def _home_of(conn: Connection) -> asyncio.AbstractEventLoop:
    """The loop a connection lives on (a connection whose loop is gone is reset: it starts again)."""
    if conn.loop is not None and not _alive(conn.loop):
        conn._orphaned()
    return conn.loop if conn.loop is not None else _default_loop()


async def on_home(conn: Connection, make: Callable[[], Any]) -> Any:
    """Await `make()` on the connection's loop: here when it lives here (no hop), else through its thread.
    Cancelling the caller cancels it there."""
    home = _home_of(conn)
    if _on_this_thread(home):
        return await make()
    return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(make(), home))


def run_blocking(conn: Connection, make: Callable[[], Any], timeout: float) -> Any:
    """`make()` on the connection's loop, from synchronous code; None when that loop is this thread's, busy
    running the caller (it cannot be waited for here)."""
    home = _home_of(conn)
    if _on_this_thread(home):
        return None
    return asyncio.run_coroutine_threadsafe(make(), home).result(timeout)


def start_now(conn: Connection, timeout: float) -> None:
    """Start a server from synchronous code and wait for it (`%agent --mcp-list`): on its loop when that is
    another thread's; when it is this thread's, busy running the caller, on the background thread's (the
    connection then lives there). A failure is left in `conn.state` / `conn.error`."""
    if conn.state in ("ready", "starting"):
        return
    home = _home_of(conn)
    if _on_this_thread(home):
        home = _background_loop()
    try:
        asyncio.run_coroutine_threadsafe(conn.ensure(), home).result(timeout)
    except Exception as exc:  # ServerError: recorded on the connection; a timeout: ensure() records it
        log.debug("%s: %s", conn.name, exc)


# --------------------------------------------------------------------------------------------------
# The connections of this process
# --------------------------------------------------------------------------------------------------
_connections: dict[str, Connection] = {}


def connection(config: ServerConfig) -> Connection:
    """The process's connection for this configuration (made, not started, the first time)."""
    with _lock:
        conn = _connections.get(config.key)
        if conn is None:
            conn = _connections[config.key] = Connection(config)
            if len(_connections) == 1:
                atexit.register(close_all)
        return conn


def connections() -> list[Connection]:
    with _lock:
        return list(_connections.values())


def close_all(timeout: float = 10.0) -> None:
    """Stop every server of this process (registered with atexit; safe to call again). Servers whose loop is
    busy running the caller (a notebook cell calling `nbagent.mcp.close()`) are killed and cleaned up after."""
    for conn in connections():
        loop = conn.loop
        if loop is None:
            continue
        if not _alive(loop):
            conn._orphaned()
        elif _on_this_thread(loop):
            conn.kill()
            loop.create_task(conn.stop())
        else:
            try:
                asyncio.run_coroutine_threadsafe(conn.stop(), loop).result(timeout)
            except Exception:  # a server that will not stop: kill what is left
                conn.kill()


# --------------------------------------------------------------------------------------------------
# One server
# --------------------------------------------------------------------------------------------------
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


class Connection:
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
                known = _server_error(exc)
                self._fail(str(known) if known is not None else self._why(f"failed to start: {_describe(exc)}"))
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
                raise ServerError(self._why(f"gave an answer to {tool} that is not valid MCP: {_describe(exc)}")) from None
            reason = self._why(f"failed during {tool}: {_describe(exc)}")  # the transport: a connection lost
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

    # -- transports ------------------------------------------------------------------------------------
    @contextlib.asynccontextmanager
    async def _stdio(self):
        """Spawn the server with exactly the environment it is given; yield the SDK's stream pair."""
        config = self.config
        self._check_trusted()
        env = server_environment(config)
        command = expand_trusted(config, config.command or "")
        args = [expand_trusted(config, a) for a in config.args]
        exe = find_command(command, env.get("PATH", ""))
        if exe is None:
            places = ", ".join(command_places(env.get("PATH", "")))
            raise ServerError(self._why(f"could not be started: {command!r} was not found: looked in {places}"))
        try:
            proc = await asyncio.create_subprocess_exec(
                exe, *args, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE, env=env, cwd=config.cwd, start_new_session=True, limit=MAX_LINE,
            )
        except FileNotFoundError:
            raise ServerError(self._why(f"could not be started: {command!r} was not found (PATH={env.get('PATH', '')})")) from None
        except OSError as exc:
            raise ServerError(self._why(f"could not be started: {exc}")) from None
        self._process = proc
        self.pid = proc.pid
        read_send, read_recv = anyio.create_memory_object_stream[SessionMessage | Exception](16)
        write_send, write_recv = anyio.create_memory_object_stream[SessionMessage](16)

        async def reader() -> None:
            try:
                while True:
                    try:
                        line = await proc.stdout.readline()
                    except ValueError:  # longer than MAX_LINE
                        self._fail(self._why(f"wrote a message longer than {MAX_LINE:,} bytes on stdout"))
                        break
                    if not line:
                        break
                    if not line.strip():
                        continue
                    try:
                        message = mcp_types.jsonrpc_message_adapter.validate_json(line, by_name=False)
                    except ValueError:
                        shown = line[:300].decode("utf-8", "replace").rstrip()
                        self._fail(self._why(f"wrote something that is not an MCP message on stdout: {shown!r}; "
                                             "it was stopped and will be started again on next use"))
                        break
                    await read_send.send(SessionMessage(message))
            except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                pass
            finally:
                if self.error is None and self._stop is not None and not self._stop.is_set():
                    code = await _exit_code(proc, 1.0)
                    self.returncode = code
                    what = f"exited with code {code}" if code is not None and code >= 0 else (
                        f"was killed by signal {-code}" if code is not None else "closed its stdout")
                    self._fail(self._why(what))
                await read_send.aclose()
                if self._stop is not None:
                    self._stop.set()

        async def writer() -> None:
            try:
                async for message in write_recv:
                    data = message.message.model_dump_json(by_alias=True, exclude_unset=True)
                    proc.stdin.write(data.encode("utf-8") + b"\n")
                    await proc.stdin.drain()
            except (BrokenPipeError, ConnectionResetError, anyio.ClosedResourceError, anyio.BrokenResourceError):
                await read_send.aclose()

        async def errors() -> None:
            while True:
                chunk = await proc.stderr.read(65536)
                if not chunk:
                    break
                self._on_stderr(chunk)

        tasks = [asyncio.create_task(t(), name=f"mcp-{self.name}-{t.__name__}") for t in (reader, writer, errors)]
        try:
            yield read_recv, write_send
        finally:
            await self._terminate(proc)
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            for s in (read_send, read_recv, write_send, write_recv):
                await s.aclose()
            self.returncode = proc.returncode
            self._process = None
            transport = getattr(proc, "_transport", None)  # closed now, not when collected after its loop closed
            if transport is not None:
                with contextlib.suppress(Exception):
                    transport.close()

    def _check_trusted(self) -> None:
        """Nothing from a workspace file the person has not trusted starts or connects (see `_workspace`)."""
        why = untrusted(self.config)
        if why is not None:
            raise ServerError(why)

    def _on_stderr(self, chunk: bytes) -> None:
        data = self._stderr_tail + chunk
        *lines, self._stderr_tail = data.split(b"\n")
        if len(self._stderr_tail) > 4096:
            lines.append(self._stderr_tail)
            self._stderr_tail = b""
        for line in lines:
            self.stderr.append(line.decode("utf-8", "replace").rstrip())

    async def _terminate(self, proc: asyncio.subprocess.Process) -> None:
        """The spec's shutdown: close stdin, wait; then SIGTERM the process group, wait; then SIGKILL."""
        if proc.returncode is None:
            with contextlib.suppress(Exception):
                proc.stdin.close()
            if await _exit_code(proc, STOP_TIMEOUT) is None:
                for sig in (signal.SIGTERM, signal.SIGKILL):
                    with contextlib.suppress(ProcessLookupError, PermissionError):
                        os.killpg(proc.pid, sig)
                    if await _exit_code(proc, STOP_TIMEOUT) is not None:
                        break
        # Whatever the server left behind in its process group goes too.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)

    @contextlib.asynccontextmanager
    async def _http(self):
        import httpx2
        from mcp.client.streamable_http import streamable_http_client
        from mcp.shared._httpx_utils import create_mcp_http_client

        config = self.config
        self._check_trusted()
        url = expand_trusted(config, config.url or "")
        headers = {k: expand_trusted(config, v) for k, v in config.headers.items()}
        client = create_mcp_http_client(headers=headers, timeout=httpx2.Timeout(config.startup_timeout, read=300.0))
        async with client:
            async with streamable_http_client(url, http_client=client) as streams:
                yield streams


async def _exit_code(proc: asyncio.subprocess.Process, timeout: float) -> int | None:
    deadline = time.monotonic() + timeout
    while proc.returncode is None and time.monotonic() < deadline:
        await asyncio.sleep(0.01)
    return proc.returncode


def _handshake_versions() -> tuple[str, ...]:
    from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

    return tuple(HANDSHAKE_PROTOCOL_VERSIONS)


def _server_error(exc: BaseException) -> ServerError | None:
    if isinstance(exc, ServerError):
        return exc
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            found = _server_error(inner)
            if found is not None:
                return found
    return None


def _describe(exc: BaseException) -> str:
    if isinstance(exc, BaseExceptionGroup):
        inner = [e for e in exc.exceptions]
        if inner:
            return _describe(inner[0])
    if isinstance(exc, ServerError):
        return str(exc)
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


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
