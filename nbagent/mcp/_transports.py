"""How a connection reaches its server: the stdio transport (a process it spawns) and streamable HTTP.

Each is an async context manager yielding the SDK's stream pair, written as methods of `Connection`
(mixed in from `Transports`): what they learn is the connection's state (the process and its pid, its
exit code, its stderr, why it failed).

Before anything is spawned or connected, `_check_trusted` refuses a configuration read from a workspace
file the person has not trusted (`_config.untrusted`), and `${VAR}` is expanded only through
`expand_trusted`: an untrusted configuration starts no program, sends no request and reads no variable.
A stdio server gets exactly the environment its configuration gives it (`server_environment`), runs in a
process group of its own, and is stopped as the spec says (stdin closed, then SIGTERM, then SIGKILL for
the whole group); a line on its stdout that is not an MCP message, or longer than `MAX_LINE`, stops it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from collections import deque
from typing import Callable

import anyio
import mcp_types
from mcp.shared.message import SessionMessage

from ._config import (
    ServerConfig,
    command_places,
    expand_trusted,
    find_command,
    register_secrets,
    server_environment,
    untrusted,
)
from ._errors import ServerError

__all__ = ["MAX_LINE", "STOP_TIMEOUT", "Transports", "exit_code"]

STOP_TIMEOUT = 2.0
"""Seconds a stdio server has to exit once its stdin is closed (then SIGTERM, then SIGKILL)."""
MAX_LINE = 64 * 1024 * 1024
"""The longest message a stdio server may write (images are big)."""


class Transports:
    """The transports, as methods of the connection they serve (see the module docstring)."""

    config: ServerConfig
    name: str
    error: str | None
    stderr: deque[str]
    pid: int | None
    returncode: int | None
    _process: asyncio.subprocess.Process | None
    _stop: asyncio.Event | None
    _stderr_tail: bytes
    _why: Callable[[str], str]
    _fail: Callable[[str], None]

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
                    code = await exit_code(proc, 1.0)
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
        """Nothing from a workspace file the person has not trusted starts or connects, and nothing whose file
        or the workspace files it runs changed since they were read and trusted (see `_workspace`, `_pins`)."""
        from ._workspace import changed_since_read

        why = untrusted(self.config) or changed_since_read(self.config)  # hashed again at every start
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
            if await exit_code(proc, STOP_TIMEOUT) is None:
                for sig in (signal.SIGTERM, signal.SIGKILL):
                    with contextlib.suppress(ProcessLookupError, PermissionError):
                        os.killpg(proc.pid, sig)
                    if await exit_code(proc, STOP_TIMEOUT) is not None:
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
        register_secrets(headers)  # as sent: a header's credential is a secret wherever it shows up again
        client = create_mcp_http_client(headers=headers, timeout=httpx2.Timeout(config.startup_timeout, read=300.0))
        async with client:
            async with streamable_http_client(url, http_client=client) as streams:
                yield streams


async def exit_code(proc: asyncio.subprocess.Process, timeout: float) -> int | None:
    deadline = time.monotonic() + timeout
    while proc.returncode is None and time.monotonic() < deadline:
        await asyncio.sleep(0.01)
    return proc.returncode
