"""API keys never appear in tool results, records, error messages or requests (shell, python, tools,
provider errors in a 200 stream, redirects to another origin, keys with a trailing newline)."""

from __future__ import annotations

import asyncio
import json

import pytest

from nbagent import Agent, AssistantMessage, ScriptedModel, load_model, tool, toolbox

from ..providers.fakeserver import FakeServer, Reply, chunks_to_sse
from .conftest import Recorder, call, everything_recorded, run_agent, sh, text_of

pytestmark = pytest.mark.timeout(60)

KEY = "sk-redteam-0123456789abcdefXYZ"


@pytest.fixture
def key_env(monkeypatch):
    # a small environment, so that failures print nothing of the machine's own
    import os
    for name in list(os.environ):
        if name not in ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "PYTHONPATH", "VIRTUAL_ENV"):
            monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("NBRT_CANARY", "visible-canary-value")
    return KEY


SHELL_READS = {
    "env": "env",
    "printenv_one": "printenv OPENAI_API_KEY",
    "export_builtin": "export -p",
    "python_subprocess": "python3 -c \"import os; print(os.environ.get('OPENAI_API_KEY'))\"",
    "reversed_pieces": "printenv OPENAI_API_KEY | cut -c1-12; printenv OPENAI_API_KEY | cut -c13-",
}


@pytest.mark.parametrize("name", sorted(SHELL_READS))
def test_shell_command_reveals_api_key(ws, key_env, name):
    run = run_agent(ws, [sh(SHELL_READS[name]), sh("printenv NBRT_CANARY")], approver=Recorder(True))
    assert "visible-canary-value" in text_of(run.calls[1])   # control: the environment is there
    seen = everything_recorded(run)
    assert KEY not in seen
    if name == "reversed_pieces":
        assert KEY[:12] not in seen or KEY[12:] not in seen


def test_api_key_with_trailing_newline(ws, key_env, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY + "\n")
    run = run_agent(ws, [sh("printenv OPENAI_API_KEY"), sh("echo ok")], approver=Recorder(True))
    assert "ok" in text_of(run.calls[1])
    assert KEY not in everything_recorded(run)


def test_python_tool_reads_api_key(ws, key_env):
    run = run_agent(ws, [call("python", code="import os\nos.environ['OPENAI_API_KEY']"),
                         call("python", code="import os\nos.environ['NBRT_CANARY']")], approver=Recorder(True))
    assert "visible-canary-value" in text_of(run.calls[1])
    assert KEY not in everything_recorded(run)


def test_tool_error_message_carries_api_key(ws, key_env):
    import os

    @tool
    def connect() -> str:
        """Connect somewhere."""
        raise RuntimeError(f"could not connect with key {os.environ['OPENAI_API_KEY']}")

    agent = Agent(model=ScriptedModel([AssistantMessage(tool_calls=[call("connect")]), AssistantMessage(text="done")]),
                  tools=[connect], approver=Recorder(True), workspace=ws)
    run = agent.run_sync("go")
    assert run.calls[0].status == "error"
    assert "could not connect" in text_of(run.calls[0])    # control: the error reached the model
    assert KEY not in everything_recorded(run)


def test_tool_result_details_and_progress_carry_api_key(ws, key_env):
    import os

    from nbagent import ToolContext

    @tool
    def fetch(ctx: ToolContext) -> str:
        """Fetch something."""
        ctx.progress(f"using {os.environ['OPENAI_API_KEY']}")
        return f"token={os.environ['OPENAI_API_KEY']}"

    agent = Agent(model=ScriptedModel([AssistantMessage(tool_calls=[call("fetch")]), AssistantMessage(text="done")]),
                  tools=[fetch], approver=Recorder(True), workspace=ws)
    run = agent.run_sync("go")
    assert "token=" in text_of(run.calls[0])
    assert KEY not in everything_recorded(run)


# ---------------------------------------------------------------------------------------------
# provider level, over 127.0.0.1
# ---------------------------------------------------------------------------------------------
def _final_answer_sse() -> bytes:
    chunk = {"id": "c1", "object": "chat.completion.chunk", "created": 0, "model": "gpt-4.1",
             "choices": [{"index": 0, "delta": {"role": "assistant", "content": "hello"}, "finish_reason": None}]}
    end = {"id": "c1", "object": "chat.completion.chunk", "created": 0, "model": "gpt-4.1",
           "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
    return chunks_to_sse([json.dumps(chunk), json.dumps(end)])


async def _run_against(server: FakeServer, ws):
    model = load_model("openai:gpt-4.1", base_url=server.url + "/v1")
    agent = Agent(model=model, tools=[], workspace=ws)
    run = agent.start("hi")
    error = None
    try:
        await asyncio.wait_for(_await(run), 30)
    except Exception as exc:  # noqa: BLE001 - the error is what we inspect
        error = exc
    return run, error


async def _await(run):
    await run


def _all_text(run, error) -> str:
    parts = [everything_recorded(run), repr(error), str(error)]
    cause = getattr(error, "__cause__", None)
    while cause is not None:
        parts.append(repr(cause))
        cause = getattr(cause, "__cause__", None)
    return "\n".join(parts)


async def test_control_fake_provider_answers(ws, key_env):
    async with FakeServer() as server:
        server.add(Reply.sse(_final_answer_sse()))
        run, error = await _run_against(server, ws)
        assert error is None, error
        assert run.output == "hello"
        assert server.requests[0].headers.get("authorization") == f"Bearer {KEY}"


async def test_provider_401_error_echoing_key(ws, key_env):
    async with FakeServer() as server:
        server.add(Reply.json(401, {"error": {"message": f"Incorrect API key provided: {KEY}.", "type": "invalid_request_error"}}))
        run, error = await _run_against(server, ws)
        assert error is not None or run.status == "failed"
        assert KEY not in _all_text(run, error)


async def test_provider_error_event_inside_200_stream_echoing_key(ws, key_env):
    body = f'data: {{"error": {{"message": "key {KEY} was revoked", "type": "auth"}}}}\n\n'.encode()
    async with FakeServer() as server:
        server.add(Reply.sse(body))
        run, error = await _run_against(server, ws)
        assert error is not None or run.status == "failed"
        assert KEY not in _all_text(run, error)


async def test_provider_400_echoing_key_with_trailing_newline(ws, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY + "\n")
    async with FakeServer() as server:
        server.add(Reply.json(400, {"error": {"message": f"bad header value 'Bearer {KEY}\\n'"}}),
                   Reply.sse(_final_answer_sse()))
        run, error = await _run_against(server, ws)
        assert KEY not in _all_text(run, error)


async def test_redirect_to_other_origin_does_not_carry_key(ws, key_env):
    async with FakeServer() as other, FakeServer() as server:
        other.add(Reply.sse(_final_answer_sse()))
        # a different origin: another port on 127.0.0.1 (and localhost as another host name)
        server.add(Reply(307, b"", headers={"location": f"http://localhost:{other.port}/v1/chat/completions"},
                         content_type="text/plain"))
        run, error = await _run_against(server, ws)
        for request in other.requests:
            assert KEY not in json.dumps(request.headers)
            assert KEY not in request.body.decode("utf-8", "replace")
        assert KEY not in _all_text(run, error)


async def _run_spec(spec: str, base_url: str, ws):
    model = load_model(spec, base_url=base_url)
    agent = Agent(model=model, tools=[], workspace=ws)
    run = agent.start("hi")
    error = None
    try:
        await asyncio.wait_for(_await(run), 30)
    except Exception as exc:  # noqa: BLE001
        error = exc
    return run, error


async def test_gemini_key_not_in_error_after_server_errors(ws, monkeypatch):
    """Gemini keys may travel in the URL; an httpx error naming the URL must not carry the key."""
    monkeypatch.setenv("GEMINI_API_KEY", KEY)
    async with FakeServer() as server:
        for _ in range(8):
            server.add(Reply.json(404, {"error": {"code": 404, "message": "model not found", "status": "NOT_FOUND"}}))
        run, error = await _run_spec("google:gemini-2.5-flash", server.url, ws)
        assert server.requests, "no request reached the fake server"
        assert error is not None or run.status == "failed"
        assert KEY not in _all_text(run, error)


async def test_gemini_key_not_in_error_after_dropped_connection(ws, monkeypatch):
    monkeypatch.setenv("GEMINI_API_KEY", KEY)
    body = b'data: {"candidates": [{"content": {"parts": [{"text": "hel"}], "role": "model"}}]}\n\n' * 50
    async with FakeServer() as server:
        for _ in range(8):
            server.add(Reply.sse(body, drop_after=100))
        run, error = await _run_spec("google:gemini-2.5-flash", server.url, ws)
        assert server.requests
        assert KEY not in _all_text(run, error)


async def test_anthropic_error_event_in_200_stream_echoing_key(ws, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    body = (b'event: error\ndata: {"type": "error", "error": {"type": "authentication_error", "message": "x-api-key '
            + KEY.encode() + b' is invalid"}}\n\n')
    async with FakeServer() as server:
        server.add(Reply.sse(body))
        run, error = await _run_spec("anthropic:claude-sonnet-4-5", server.url, ws)
        assert server.requests
        assert KEY not in _all_text(run, error)


def test_read_only_inspect_variable_reveals_key_held_in_namespace(ws, key_env):
    import os as _os
    namespace = {"os": _os, "api_key": _os.environ["OPENAI_API_KEY"], "n_rows": 12345}
    agent = Agent(model=ScriptedModel([AssistantMessage(tool_calls=[call("inspect_variable", name="api_key"),
                                                                    call("inspect_variable", name="os.environ"),
                                                                    call("list_variables"),
                                                                    call("inspect_variable", name="n_rows")]),
                                       AssistantMessage(text="done")]),
                  tools=toolbox.all(workspace=ws, namespace=namespace), workspace=ws, approver=Recorder(False))
    run = agent.run_sync("go")
    assert "12345" in text_of(run.calls[3])               # control: inspection works
    leaked = [r.arguments.get("name", r.name) for r in run.calls if KEY in text_of(r)]
    assert not leaked, f"read-only calls revealed the key: {leaked}"   # (no dump of the environment)


@pytest.mark.parametrize("spec,env,path", [
    ("anthropic:claude-sonnet-4-5", "ANTHROPIC_API_KEY", "/v1/messages"),
    ("google:gemini-2.5-flash", "GEMINI_API_KEY", "/v1beta/models/gemini-2.5-flash:streamGenerateContent"),
    ("mistral:mistral-large-latest", "MISTRAL_API_KEY", "/v1/chat/completions"),
])
async def test_redirect_to_other_origin_does_not_carry_custom_key_header(ws, monkeypatch, spec, env, path):
    """httpx drops Authorization on a cross-origin redirect, but not x-api-key or x-goog-api-key."""
    monkeypatch.setenv(env, KEY)
    async with FakeServer() as other, FakeServer() as server:
        other.add(Reply.json(500, {"error": {"message": "other origin"}}))
        for _ in range(6):
            server.add(Reply(307, b"", headers={"location": f"http://localhost:{other.port}{path}?alt=sse"},
                             content_type="text/plain"))
        base = server.url + ("/v1" if spec.startswith("mistral") else "")
        run, error = await _run_spec(spec, base, ws)
        assert server.requests, "no request reached the first server"
        for request in other.requests:
            assert KEY not in json.dumps(request.headers), f"{spec}: key sent to another origin"
            assert KEY not in request.path
        assert KEY not in _all_text(run, error)
