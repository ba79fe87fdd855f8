"""The TLS settings the provider clients share (`nbagent.providers._http.tls_context`): httpx's own default,
made once for each setting of the variables it reads, and still verifying: a server whose certificate no root
vouches for is refused, and one whose certificate `SSL_CERT_FILE` names is reached. A real HTTPS server on
127.0.0.1 with a certificate made for the test."""

from __future__ import annotations

import asyncio
import http.server
import shutil
import ssl
import subprocess
import threading

import httpx
import pytest

from nbagent import load_model
from nbagent.providers import _http

pytestmark = pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl program")


@pytest.fixture
def https_server(tmp_path):
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
                   check=True, capture_output=True)

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - the standard library's name
            body = b'{"ok": true}'
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"https://127.0.0.1:{server.server_address[1]}", cert
    server.shutdown()
    server.server_close()


def client_of(url: str):
    return load_model("openai:gpt-4o-mini", api_key="sk-test", base_url=url + "/v1").http.client()


def test_clients_share_httpx_default_context_made_once_per_setting(monkeypatch, tmp_path):
    monkeypatch.setattr(_http, "_TLS", {})
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)

    async def contexts():
        one = client_of("http://127.0.0.1:9")._transport._pool._ssl_context
        two = client_of("http://127.0.0.1:9")._transport._pool._ssl_context
        return one, two

    one, two = asyncio.run(contexts())
    assert one is two is _http.tls_context()
    assert one.verify_mode is ssl.CERT_REQUIRED and one.check_hostname
    assert len(_http._TLS) == 1
    bundle = tmp_path / "roots.pem"
    bundle.write_text("")
    monkeypatch.setenv("SSL_CERT_DIR", str(tmp_path))
    assert _http.tls_context() is not one  # another setting: its own context
    assert len(_http._TLS) == 2


def test_a_certificate_no_root_vouches_for_is_refused_and_ssl_cert_file_is_honoured(https_server, monkeypatch):
    url, cert = https_server
    monkeypatch.setattr(_http, "_TLS", {})
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)

    async def get():
        client = client_of(url)
        try:
            return await client.get(url + "/v1/models")
        finally:
            await client.aclose()

    with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
        asyncio.run(get())
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))
    assert asyncio.run(get()).json() == {"ok": True}
    monkeypatch.delenv("SSL_CERT_FILE")
    with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):  # the first context again
        asyncio.run(get())
