"""Connections to MCP servers: started when first needed, shared by every run of the process, restarted
after they fail, closed with the process.

A connection lives on one event loop. By default that is a background thread's (`nbagent-mcp`), whatever
loop a run is on (a fresh `asyncio.run` per script call, a test's): a connection then outlives the loop of
the run that started it. A kernel, whose loop lives as long as the process, makes its loop the home of its
connections (`set_loop`), so its runs call servers without a hop between threads. A connection whose loop
has closed is started again on the next use.

This module is the process's side: where connections live (a background loop, or a home loop), the
connections of this process (`connection`, `connections`), and `close_all()` at exit (or
`nbagent.mcp.close()`). One server's state machine and calls are `_server.Connection`; how it reaches
its server (and the trust check before it does) is `_transports`. This module imports the `mcp` SDK
(through them); nothing imports it before a server is used.
"""

from __future__ import annotations

import asyncio
import atexit
import logging
import threading
from typing import Any, Callable

from ._config import ServerConfig
from ._errors import ServerError
from ._server import Connection

__all__ = ["Connection", "ServerError", "close_all", "connection", "connections", "on_home", "run_blocking",
           "set_loop", "start_now"]

log = logging.getLogger("nbagent.mcp")


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
