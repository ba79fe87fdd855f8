"""Real MCP servers from the package registries, started by the tests: `mcp-server-time` and `mcp-server-git`
from PyPI, `@modelcontextprotocol/server-everything` from npm (installed by `./dev` into tests/mcp/node),
plus `servers/misbehaving.py` for the failures. Nothing here reaches the internet."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

import nbagent.mcp

HERE = Path(__file__).parent
SERVERS = HERE / "servers"
EVERYTHING = HERE / "node" / "node_modules" / "@modelcontextprotocol" / "server-everything" / "dist" / "index.js"


def python_server(*args: str, **entry) -> dict:
    """A stdio server entry that runs `python ARGS` with the Python of the tests."""
    return {"command": sys.executable, "args": list(args), **entry}


def time_server(**entry) -> dict:
    return python_server("-m", "mcp_server_time", "--local-timezone", "UTC", **entry)


def misbehaving(mode: str, *extra: str, **entry) -> dict:
    return python_server(str(SERVERS / "misbehaving.py"), mode, *extra, **entry)


def teed(log: Path, entry: dict) -> dict:
    """The same server behind `servers/tee.py`, which logs what the client sends it."""
    return {**entry, "command": sys.executable,
            "args": [str(SERVERS / "tee.py"), str(log), "--", entry["command"], *entry.get("args", [])]}


def _node() -> str:
    node = shutil.which("node")
    if node is None or not EVERYTHING.exists():
        message = "the npm test servers are not installed: ./dev setup installs them (npm ci in tests/mcp/node)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return node


@pytest.fixture
def everything() -> dict:
    """`@modelcontextprotocol/server-everything` over stdio."""
    return {"command": _node(), "args": [str(EVERYTHING), "stdio"]}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_everything_http(port: int) -> subprocess.Popen:
    """`@modelcontextprotocol/server-everything` over streamable HTTP on 127.0.0.1:PORT, once it listens."""
    proc = subprocess.Popen([_node(), str(EVERYTHING), "streamableHttp"], env={**os.environ, "PORT": str(port)},
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return proc
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                pytest.fail(f"the everything server did not listen on port {port}")
            time.sleep(0.1)


def stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@pytest.fixture
def everything_http():
    """`@modelcontextprotocol/server-everything` over streamable HTTP on 127.0.0.1 (a free port)."""
    proc = start_everything_http(port := free_port())
    yield {"url": f"http://127.0.0.1:{port}/mcp"}
    nbagent.mcp.close()
    stop(proc)


@pytest.fixture(autouse=True, scope="module")
def _stop_servers():
    """Servers are shared by the runs of a process; each test module stops the ones it started."""
    yield
    nbagent.mcp.close()
