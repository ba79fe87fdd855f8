"""Conversations that outlive the kernel, in real kernels: restarted, killed mid-batch, re-run offline.

- three `%agent` runs, the kernel restarted, `%agent --resume` continues with every earlier prompt sent;
- a kernel killed with SIGKILL while a tool runs: the resumed conversation answers that call
  "interrupted" and goes on, valid;
- a notebook whose model is an OpenAI-compatible server on 127.0.0.1, executed once (two requests),
  then re-run with `--replay`: zero requests, the same answers.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import nbformat
import pytest

from nbagent.jupyter.headless import execute_notebook

from ..kernelclient import KernelSession, kernel_env

pytestmark = pytest.mark.kernel

ECHO_MODEL = (
    "from nbagent import ScriptedModel, UserMessage\n"
    "echo = ScriptedModel([lambda messages: ' | '.join(m.text for m in messages if isinstance(m, UserMessage))] * 10)\n"
)


def test_a_conversation_resumed_after_a_restart_sends_every_earlier_prompt(tmp_path: Path) -> None:
    k = KernelSession(tmp_path, NBAGENT_APPROVAL="allow")
    try:
        k.execute("%load_ext nbagent")
        k.execute(ECHO_MODEL)
        for prompt in ("first", "second", "third"):
            k.execute(f"run = %agent --model echo --wait {prompt}")
        assert k.value("run.output") == "first | second | third"
        k.restart()
        k.execute("%load_ext nbagent")
        k.execute(ECHO_MODEL)
        listing = k.execute("%agent --sessions")
        assert "third" in json.dumps(listing["data"])  # the last prompt is listed
        out = k.execute("run = %agent --resume --model echo --wait and now?")
        assert k.value("run.output") == "first | second | third | and now?"
        assert k.value("[type(m).__name__ for m in run.messages].count('UserMessage')") == 4
        k.execute("more = %agent --model echo --wait more")  # the resumed conversation goes on
        assert k.value("more.output") == "first | second | third | and now? | more"
        k.execute("fresh = %agent --new --model echo --wait alone")
        assert k.value("fresh.output") == "alone"
        assert k.value("len(__import__('nbagent.sessions').sessions.list_sessions('.'))") == 2
        assert out["error"] is None
    finally:
        k.shutdown()


def test_a_kernel_killed_mid_batch_resumes_with_the_call_interrupted(tmp_path: Path) -> None:
    k = KernelSession(tmp_path, NBAGENT_APPROVAL="allow")
    try:
        k.execute("%load_ext nbagent")
        k.execute(
            "import time\n"
            "from nbagent import AssistantMessage, ToolCall, ScriptedModel\n"
            "def quick() -> str:\n    return 'quick done'\n"
            "def slow() -> str:\n    time.sleep(60)\n    return 'slow done'\n"
            "model = ScriptedModel([AssistantMessage(tool_calls=[ToolCall(name='quick', arguments={})]),\n"
            "                       AssistantMessage(tool_calls=[ToolCall(name='slow', arguments={})]), 'never'])\n")
        k.execute("run = %agent --model model --tools quick,slow go")
        k.wait_for("len(run.calls) == 2 and run.calls[1].status == 'running'", timeout=30)
        os.kill(k.km.provisioner.process.pid, signal.SIGKILL)  # the kernel dies mid-batch
        time.sleep(0.5)
        k.restart()
        k.execute("%load_ext nbagent")
        out = k.execute("%agent --resume")
        assert "1 call that was in flight got an 'interrupted' result" in out["stdout"]
        k.execute(ECHO_MODEL)
        k.execute("run = %agent --model echo --wait what happened?")
        assert k.value("run.status") == "done"
        assert k.value("__import__('nbagent').transcript.check_transcript(run.messages)") == []
        results = k.value("[m.content[0].text for m in run.messages if type(m).__name__ == 'ToolResultMessage']")
        assert results[0] == "quick done" and results[1].startswith("interrupted")
    finally:
        k.shutdown()


# -- re-running a notebook offline ---------------------------------------------------------------------------

def _chat_stream(text: str) -> bytes:
    chunks = [{"choices": [{"index": 0, "delta": {"role": "assistant", "content": text}, "finish_reason": None}]},
              {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
               "usage": {"prompt_tokens": 12, "completion_tokens": 5, "total_tokens": 17}}]
    body = "".join(f"data: {json.dumps({'id': 'c1', 'object': 'chat.completion.chunk', 'model': 'gpt-4.1', **c})}\n\n"
                   for c in chunks)
    return (body + "data: [DONE]\n\n").encode()


class _Server:
    """An OpenAI-compatible server on 127.0.0.1 that answers "answer N" and counts the requests."""

    def __init__(self) -> None:
        self.requests: list[dict] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.requests.append(body)
                payload = _chat_stream(f"answer {len(outer.requests)}")
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *args) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()


def test_a_notebook_rerun_with_replay_makes_no_request_and_gives_the_same_answers(tmp_path: Path) -> None:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(c) for c in (
        "%load_ext nbagent",
        "first = %agent --model openai:gpt-4.1 --wait What is the answer?",
        "second = %agent --wait And once more?",
        "print(first.output, '/', second.output, '/', len(second.messages))",
    )]
    path = tmp_path / "agent.ipynb"
    nbformat.write(nb, path)
    server = _Server()
    try:
        env = kernel_env(tmp_path, OPENAI_API_KEY="sk-test-0000", OPENAI_BASE_URL=server.url,
                         NBAGENT_APPROVAL="allow", NBAGENT_NOTEBOOK=str(path))
        live, _ = execute_notebook(path, output=tmp_path / "live.ipynb", env=env, summary=False)
        assert len(server.requests) == 2
        replayed, _ = execute_notebook(path, output=tmp_path / "replayed.ipynb", env={**env, "NBAGENT_REPLAY": "rerun"},
                                       summary=False)
        assert len(server.requests) == 2  # no request at all
    finally:
        server.close()

    def printed(book) -> str:
        return "".join(o.get("text", "") for o in book.cells[-1].outputs if o.get("output_type") == "stream")

    assert printed(live) == "answer 1 / answer 2 / 4\n"
    assert printed(replayed) == printed(live)
