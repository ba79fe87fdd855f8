"""A provider that accepts the connection and never answers, in a real kernel: the run's live view says so in
its header ("no answer from HOST for N s", renewed while it lasts) instead of a silent "running", and the
read timeout ends the run with an error naming the host.
"""

from __future__ import annotations

import socket
import threading
from pathlib import Path

import pytest

from ..kernelclient import KernelSession

pytestmark = pytest.mark.kernel


class _Silent:
    """A server on 127.0.0.1 that accepts connections, reads what comes, and never answers."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen()
        self.port = self.sock.getsockname()[1]
        self.conns: list[socket.socket] = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.conns.append(conn)  # kept open, never written to

    def close(self) -> None:
        self.sock.close()
        for conn in self.conns:
            conn.close()


def test_a_provider_that_never_answers_is_shown_as_such_then_ends_naming_the_host(tmp_path: Path) -> None:
    server = _Silent()
    k = KernelSession(tmp_path, ANTHROPIC_API_KEY="test-key", ANTHROPIC_BASE_URL=f"http://127.0.0.1:{server.port}")
    host = f"127.0.0.1:{server.port}"
    try:
        k.execute("%load_ext nbagent")
        k.execute("import httpx\nfrom nbagent.providers import _http, load_model\n"
                  "_http.SILENCE_NOTICE = _http.SILENCE_EVERY = 0.2\n"
                  "slow = load_model('anthropic:claude-sonnet-4-5', timeout=httpx.Timeout(60.0, read=3.0))\n"
                  "from nbagent.jupyter import view")
        k.execute("run = %agent --model slow Hello?")
        k.wait_for(f"'no answer from {host} for' in view(run)._head_info.value", timeout=30)
        assert k.value("run.status") == "running"
        k.wait_for("run.done", timeout=60)
        assert k.value("run.status") == "failed"
        error = k.value("str(run.error)")
        assert f"no answer from {host} for 3 s" in error and "not retried" in error, error
        assert len(server.conns) == 1  # not retried
    finally:
        k.shutdown()
        server.close()
