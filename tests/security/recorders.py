"""Shared pieces of the redteam3 attacks: local servers that record what reaches them, git set-up."""

from __future__ import annotations

import http.server
import os
import socket
import subprocess
import threading
from pathlib import Path

from nbagent import AssistantMessage, ScriptedModel, ToolCall


class HTTPRecorder:
    """A 127.0.0.1 HTTP server that records every request (path and headers); started and stopped by a test."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, str, dict[str, str]]] = []
        recorder = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def _any(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                if length:
                    self.rfile.read(length)
                recorder.requests.append((self.command, self.path, dict(self.headers)))
                self.send_response(404)
                self.send_header("Content-Length", "0")
                self.end_headers()

            do_GET = do_POST = do_DELETE = do_PUT = _any

            def log_message(self, *args) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> "HTTPRecorder":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()


class UDPRecorder:
    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.settimeout(0.5)
        self.port = self.sock.getsockname()[1]

    def received(self) -> bytes:
        try:
            return self.sock.recv(4096)
        except OSError:
            return b""

    def close(self) -> None:
        self.sock.close()


class UnixRecorder:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.got: list[bytes] = []
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(str(path))
        self.sock.listen(4)
        self.sock.settimeout(0.2)
        self._stop = False
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while not self._stop:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            with conn:
                conn.settimeout(1)
                try:
                    self.got.append(conn.recv(4096))
                except OSError:
                    self.got.append(b"(connected)")

    def close(self) -> None:
        self._stop = True
        self.thread.join(2)
        self.sock.close()


def turns(*batches) -> ScriptedModel:
    msgs = []
    for b in batches:
        if isinstance(b, ToolCall):
            b = [b]
        msgs.append(AssistantMessage(tool_calls=list(b)))
    msgs.append(AssistantMessage(text="done"))
    return ScriptedModel(msgs)


def git(ws: Path, *args: str, env: dict | None = None) -> str:
    e = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    e.update({"GIT_AUTHOR_NAME": "a", "GIT_AUTHOR_EMAIL": "a@b", "GIT_COMMITTER_NAME": "a",
              "GIT_COMMITTER_EMAIL": "a@b", "HOME": str(ws.parent)})
    e.update(env or {})
    return subprocess.run(["git", *args], cwd=ws, env=e, check=True, capture_output=True, text=True).stdout


def init_repo(ws: Path) -> None:
    git(ws, "init", "-q", "-b", "main")
    git(ws, "add", "-A")
    git(ws, "commit", "-q", "-m", "first")
