"""An OpenAI-compatible chat server on 127.0.0.1 for kernel and browser tests: it answers every request with a
streamed "answer N" and keeps what it was sent (the body and the headers), so a test can tell which key a run
used."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["FakeOpenAI"]


def chat_stream(text: str) -> bytes:
    chunks = [{"choices": [{"index": 0, "delta": {"role": "assistant", "content": text}, "finish_reason": None}]},
              {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
               "usage": {"prompt_tokens": 12, "completion_tokens": 5, "total_tokens": 17}}]
    body = "".join(f"data: {json.dumps({'id': 'c1', 'object': 'chat.completion.chunk', 'model': 'local', **c})}\n\n"
                   for c in chunks)
    return (body + "data: [DONE]\n\n").encode()


class FakeOpenAI:
    """`url` ends in /v1; `requests` holds {"path", "headers" (lower-case names), "body"} per request."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.requests.append({"path": self.path, "headers": {k.lower(): v for k, v in self.headers.items()},
                                       "body": body})
                payload = chat_stream(f"answer {len(outer.requests)}")
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
