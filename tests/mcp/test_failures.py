"""Servers that fail: to start, mid-call, by hanging, by answering garbage. Each gives an error result that
says why (with the server's stderr), the run goes on, and the next use starts the server again."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys

import nbagent.mcp
from nbagent import Agent, ScriptedModel
from nbagent.mcp import MCPServers, _connection
from tests.helpers import assert_valid, call, calls

from .conftest import free_port, misbehaving, start_everything_http, stop, teed, time_server


def run_calls(servers, *steps, **options):
    model = ScriptedModel([calls(*step) for step in steps] + ["done"])
    options.setdefault("rules", ["allow: *"])
    run = Agent(model=model, mcp_servers=servers, **options).run_sync("go")
    assert_valid(run)
    assert run.status == "done"  # a server's failure never takes the run down
    return run


def test_a_command_that_does_not_exist():
    servers = {"nope": {"command": "nbagent-no-such-mcp-server"}}
    run = run_calls(servers, [call("nope__anything", x=1)])
    rec = run.calls[0]
    assert rec.status == "error" and "was not found" in rec.result.text
    assert run.requests[0].tools == ()  # nothing offered from a server that never started


def test_an_unset_variable_of_a_server_the_run_never_uses_leaves_the_run_and_the_header_to_the_others(monkeypatch):
    """The guide's example as written (docs/guide/mcp.md), WEB_TOKEN unset: the time server's call works, and
    the run's header names the servers it has, not the one that failed to start (named apart)."""
    from nbagent import render

    monkeypatch.delenv("WEB_TOKEN", raising=False)
    servers = {"time": time_server(),
               "web": {"url": "http://127.0.0.1:9/mcp", "headers": {"Authorization": "Bearer ${WEB_TOKEN}"}}}
    run = run_calls(servers, [call("time__get_current_time", timezone="UTC")], rules=["allow: time__*"])
    assert run.calls[0].status == "ok", run.calls[0].result.text
    short, full = render.tools_summary(run)
    assert short == "tools: MCP time"
    assert "failed to start (left out): web" in full
    assert "MCP time" in render.run_text(run) and "MCP time, web" not in render.header_html(run)


def test_a_call_to_a_server_that_does_not_start_fails_before_anyone_is_asked():
    asked = []
    model = ScriptedModel([calls(call("nope__anything", x=1)), "done"])
    run = Agent(model=model, mcp_servers={"nope": {"command": "nbagent-no-such-mcp-server"}},
                approver=lambda request: asked.append(request) or True).run_sync("go")
    assert_valid(run)
    rec = run.calls[0]
    assert asked == [] and rec.decision is None  # nobody was asked to approve a call that cannot run
    assert rec.status == "error" and "was not found: looked in" in rec.result.text
    assert os.path.dirname(sys.executable) in rec.result.text  # this Python's own scripts are looked in first


def test_a_bare_command_is_found_among_this_pythons_scripts_without_it_on_path(tmp_path, monkeypatch):
    script = tmp_path / "bin" / "nbagent-test-time-server"
    script.parent.mkdir()
    script.write_text(f"#!{sys.executable}\nimport runpy, sys\nsys.argv[1:] = ['--local-timezone', 'UTC']\n"
                      "runpy.run_module('mcp_server_time', run_name='__main__')\n")
    script.chmod(0o755)
    monkeypatch.setattr(sys, "executable", str(script.parent / "python"))  # a virtualenv's bin, not on PATH
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    run = run_calls({"t": {"command": script.name}}, [call("t__get_current_time", timezone="UTC")])
    assert run.calls[0].status == "ok", run.calls[0].result.text


def test_a_server_that_exits_at_start_keeps_its_stderr(tmp_path):
    flag = tmp_path / "fixed"
    servers = {"flaky": misbehaving("exit", str(flag))}
    run = run_calls(servers, [call("flaky__log_then_answer", text="a")])
    text = run.calls[0].result.text
    assert run.calls[0].status == "error"
    assert "exited with code 3" in text and "missing configuration, giving up" in text
    flag.touch()  # the server is fixed: the next use starts it again
    run = run_calls(servers, [call("flaky__log_then_answer", text="b")])
    assert run.calls[0].status == "ok" and run.calls[0].result.text == "answer: b"


def test_a_server_that_never_answers_then_works_after_restart(tmp_path):
    flag = tmp_path / "fixed"
    servers = {"mute": misbehaving("silent", str(flag), startup_timeout=1)}
    run = run_calls(servers, [call("mute__log_then_answer", text="a")])
    text = run.calls[0].result.text
    assert run.calls[0].status == "error"
    assert "did not start within 1 s" in text and "listening and saying nothing" in text
    flag.touch()
    run = run_calls(servers, [call("mute__log_then_answer", text="b")])
    assert run.calls[0].status == "ok", run.calls[0].result


def test_a_server_that_answers_garbage(tmp_path):
    flag = tmp_path / "fixed"
    servers = {"noisy": misbehaving("garbage", str(flag))}
    run = run_calls(servers, [call("noisy__log_then_answer", text="a")])
    text = run.calls[0].result.text
    assert "not an MCP message" in text and "hello, this is not JSON-RPC" in text
    assert "about to answer nonsense" in text  # its stderr
    flag.touch()
    run = run_calls(servers, [call("noisy__log_then_answer", text="b")])
    assert run.calls[0].status == "ok"


def test_a_server_killed_mid_call_gives_an_error_then_restarts(everything):
    servers = {"everything": everything}
    toolset = MCPServers(servers)

    async def main():
        killed = asyncio.Event()

        def on_event(event):
            if type(event).__name__ == "ToolCallProgress" and not killed.is_set():
                killed.set()
                pid = next(s["pid"] for s in toolset.status() if s["name"] == "everything")
                os.kill(pid, signal.SIGKILL)

        model = ScriptedModel([calls(call("everything__trigger-long-running-operation", duration=30, steps=60)),
                               calls(call("everything__echo", message="back")), "done"])
        agent = Agent(model=model, mcp_servers=toolset, rules=["allow: *"])
        return await agent.run("go", on_event=on_event)

    run = asyncio.run(main())
    assert_valid(run)
    dead, again = run.calls
    assert dead.status == "error" and "was killed by signal 9" in dead.result.text
    assert again.status == "ok" and "back" in again.result.text
    assert next(s for s in toolset.status() if s["name"] == "everything")["starts"] >= 2


def test_a_call_that_hangs_times_out_and_the_server_is_restarted(tmp_path):
    servers = {"frozen": misbehaving("ok", timeout=2)}
    run = run_calls(servers, [call("frozen__freeze", seconds=3600)], [call("frozen__log_then_answer", text="b")])
    frozen, after = run.calls
    assert frozen.status == "error"
    assert "did not answer freeze within 2 s" in frozen.result.text and "no longer answers pings" in frozen.result.text
    assert after.status == "ok" and after.result.text == "answer: b"


def test_stop_and_timeouts_send_the_protocols_cancellation(tmp_path, everything):
    log = tmp_path / "sent.jsonl"
    servers = {"slow": teed(log, everything)}

    async def main():
        model = ScriptedModel([calls(call("slow__trigger-long-running-operation", duration=30, steps=60)), "done"])
        agent = Agent(model=model, mcp_servers=servers, rules=["allow: *"])
        run = agent.start("go", on_event=lambda e: type(e).__name__ == "ToolCallProgress" and run.cancel("Stop"))
        try:
            await run
        except BaseException:
            pass
        for _ in range(200):
            if "notifications/cancelled" in log.read_text():
                break
            await asyncio.sleep(0.05)
        return run

    run = asyncio.run(main())
    assert run.status == "cancelled" and run.calls[0].status == "cancelled"
    sent = [json.loads(line) for line in log.read_text().splitlines()]
    request = next(m for m in sent if m.get("method") == "tools/call")
    cancels = [m for m in sent if m.get("method") == "notifications/cancelled"]
    assert [c["params"]["requestId"] for c in cancels] == [request["id"]]


def test_a_timeout_sends_cancellation_and_keeps_a_server_that_still_answers(tmp_path, everything):
    log = tmp_path / "sent.jsonl"
    servers = {"slow": teed(log, {**everything, "timeout": 1})}
    run = run_calls(servers, [call("slow__trigger-long-running-operation", duration=4, steps=1)],
                    [call("slow__echo", message="still here")])
    slow, echo = run.calls
    assert slow.status == "error" and "within 1 s" in slow.result.text and "still answers pings" in slow.result.text
    assert echo.status == "ok"
    sent = [json.loads(line) for line in log.read_text().splitlines()]
    assert any(m.get("method") == "notifications/cancelled" for m in sent)


def test_log_messages_go_to_the_calls_output():
    run = run_calls({"talk": misbehaving("ok")}, [call("talk__log_then_answer", text="x")])
    rec = run.calls[0]
    assert rec.status == "ok"
    output = rec.output_tail.text
    assert "[info] working on x" in output and "[warning] almost done" in output


def test_the_server_sees_only_the_environment_it_needs_and_what_is_configured(monkeypatch, everything):
    monkeypatch.setenv("NBAGENT_TEST_SERVICE_API_KEY", "sk-test-not-for-servers-123456")
    monkeypatch.setenv("NBAGENT_TEST_PASSED_KEY", "given-on-purpose")
    monkeypatch.setenv("NBAGENT_TEST_UNRELATED", "x")
    servers = {"env": {**everything, "env": {"CONFIGURED": "yes", "MY_KEY": "${NBAGENT_TEST_PASSED_KEY}"}}}
    run = run_calls(servers, [call("env__get-env")])
    env = json.loads(run.calls[0].result.details.text)
    assert "NBAGENT_TEST_SERVICE_API_KEY" not in env and "NBAGENT_TEST_UNRELATED" not in env
    assert env["CONFIGURED"] == "yes" and env["MY_KEY"] == "given-on-purpose"
    assert "PATH" in env and "HOME" in env


def test_the_time_server_is_shared_by_runs():
    servers = {"time": time_server()}
    run_calls(servers, [call("time__get_current_time", timezone="UTC")])
    toolset = MCPServers(servers)
    before = next(s for s in toolset.status() if s["name"] == "time")
    run_calls(servers, [call("time__get_current_time", timezone="UTC")])
    after = next(s for s in toolset.status() if s["name"] == "time")
    assert before["pid"] == after["pid"] and after["starts"] == before["starts"] == 1


def test_an_http_server_that_goes_away_and_comes_back():
    port = free_port()
    servers = {"web": {"url": f"http://127.0.0.1:{port}/mcp"}}
    proc = start_everything_http(port)
    try:
        assert run_calls(servers, [call("web__echo", message="one")]).calls[0].result.text == "Echo: one"
        stop(proc)
        gone = run_calls(servers, [call("web__echo", message="two")]).calls[0]
        assert gone.status == "error" and f"127.0.0.1:{port}" in gone.result.text
        assert "started again on next use" in gone.result.text
        proc = start_everything_http(port)
        assert run_calls(servers, [call("web__echo", message="three")]).calls[0].result.text == "Echo: three"
    finally:
        nbagent.mcp.close()
        stop(proc)


def test_stop_on_a_kernels_loop_sends_the_cancellation_too(tmp_path, everything):
    """In a kernel the connection lives on the run's own loop (no thread between them)."""
    log = tmp_path / "sent.jsonl"
    servers = {"slow": teed(log, {**everything, "env": {"HOME_LOOP": "kernel"}})}

    async def main():
        nbagent.mcp.use_loop(asyncio.get_running_loop())
        try:
            model = ScriptedModel([calls(call("slow__trigger-long-running-operation", duration=30, steps=60)), "done"])
            agent = Agent(model=model, mcp_servers=servers, rules=["allow: *"])
            run = agent.start("go", on_event=lambda e: type(e).__name__ == "ToolCallProgress" and run.cancel("Stop"))
            try:
                await run
            except BaseException:
                pass
            conn = next(c for c in _connection.connections() if c.name == "slow" and "HOME_LOOP" in c.config.env)
            assert conn.loop is asyncio.get_running_loop()
            for _ in range(200):
                if "notifications/cancelled" in log.read_text():
                    break
                await asyncio.sleep(0.05)
            await conn.stop()
            return run
        finally:
            nbagent.mcp.use_loop(None)

    run = asyncio.run(main())
    assert run.status == "cancelled"
    assert any(json.loads(line).get("method") == "notifications/cancelled" for line in log.read_text().splitlines())
