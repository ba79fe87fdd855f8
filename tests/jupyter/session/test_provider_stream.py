"""`%agent` with a real provider adapter, streaming from a local fake server: the model is picked from the
key that is set, the call's arguments arrive in pieces, and the header counts the tokens."""

from __future__ import annotations

import contextlib

from nbagent.jupyter import view
from nbagent.transcript import check_transcript

from ...providers.fakeserver import FakeServer, Reply, load_stream
from ..conftest import finish, run_cell, settle

FINAL = """\
event: message_start
data: {"type":"message_start","message":{"id":"msg_2","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[],"stop_reason":null,"usage":{"input_tokens":420,"output_tokens":1}}}

event: content_block_start
data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"It is **sunny** in Paris."}}

event: content_block_stop
data: {"type":"content_block_stop","index":0}

event: message_delta
data: {"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":9}}

event: message_stop
data: {"type":"message_stop"}

"""


async def test_an_anthropic_stream_in_the_live_view(shell, monkeypatch):
    async with FakeServer() as server:
        server.add(Reply.sse(load_stream("anthropic", "text_then_tool_call"), delay=0.005), Reply.sse(FINAL))
        monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
        shell.run_line_magic("config", "NBAgent.approver = 'allow'")
        await run_cell(shell, "def get_weather(location: str) -> str:\n    return f'sunny in {location}'")
        result = await run_cell(shell, "run = %agent --tools get_weather What is the weather in Paris?")
        assert result.error_in_exec is None
        run = await finish(shell.user_ns["run"])
    assert run.model.spec == "anthropic:claude-sonnet-4-5"  # from the key that is set
    assert run.output == "It is **sunny** in Paris." and check_transcript(run.messages) == []
    assert run.calls[0].name == "get_weather" and run.calls[0].result.text.startswith("sunny in")
    row = view(run).rows[0]
    assert row.record is run.calls[0]
    assert row.partial == run.calls[0].arguments  # what streamed in, piece by piece, ended as the call's arguments
    await settle(lambda: view(run).throttle.closed)  # the view's last update went out
    head = view(run)._head_info.value
    assert "in · " in head and "out tokens" in head
    assert server.requests[0].headers["x-api-key"] == "test-key"


async def test_a_provider_that_sends_nothing_is_shown_as_such_in_the_header(shell, monkeypatch):
    from nbagent.providers import _http

    monkeypatch.setattr(_http, "SILENCE_NOTICE", 0.05)
    monkeypatch.setattr(_http, "SILENCE_EVERY", 0.05)
    async with FakeServer() as server:
        server.add(Reply.sse(FINAL, before=60.0))  # accepts the request, then says nothing
        monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
        await run_cell(shell, "run = %agent Hello?")
        run = shell.user_ns["run"]
        host = server.url.split("//")[1]
        await settle(lambda: f"no answer from {host} for" in view(run)._head_info.value, timeout=30)
        assert run.status == "running"
        run.cancel("the test is over")
        with contextlib.suppress(BaseException):
            await finish(run)
        assert run.done
