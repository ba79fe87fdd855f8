"""Real servers through `Agent` runs played by `ScriptedModel`: naming, permissions, results, progress."""

from __future__ import annotations

import json
import subprocess

import pytest

from nbagent import Agent, ImageBlock, ScriptedModel, TextBlock
from nbagent.mcp import MCPResult
from tests.helpers import assert_valid, call, calls

from .conftest import python_server, time_server


def run_calls(servers, *steps, **agent_options):
    """Run an agent whose model makes these calls (one list of calls per turn), then answers "done"."""
    model = ScriptedModel([calls(*step) for step in steps] + ["done"])
    run = Agent(model=model, mcp_servers=servers, **agent_options).run_sync("go")
    assert_valid(run)
    return run


# -- mcp-server-time (PyPI, stdio) ------------------------------------------------------------------------
def test_time_tools_are_named_by_server_and_called_with_a_rule():
    run = run_calls({"time": time_server()}, [call("time__get_current_time", timezone="Europe/Paris")],
                    rules=["allow: time__*"])
    assert run.requests[0].tools == ("time__convert_time", "time__get_current_time")
    rec = run.calls[0]
    assert rec.status == "ok", rec.result
    assert rec.decision.source == "rule"
    details = rec.result.details
    assert isinstance(details, MCPResult) and details.structured["timezone"] == "Europe/Paris"
    assert details.raw.is_error is False  # the SDK's CallToolResult, kept whole
    assert json.loads(rec.result.content[0].text)["timezone"] == "Europe/Paris"


def test_an_untrusted_servers_read_only_claim_does_not_auto_allow():
    run = run_calls({"time": time_server()}, [call("time__get_current_time", timezone="UTC")])
    tool = run.calls[0].tool
    assert tool.read_only and not tool.destructive  # the metadata is there...
    assert run.calls[0].status == "denied"  # ...but default mode asks, and no one approved
    assert "no approver" in run.calls[0].result.text


def test_a_trusted_servers_read_only_tools_run_without_asking():
    run = run_calls({"time": time_server(trusted=True)}, [call("time__get_current_time", timezone="UTC")])
    assert run.calls[0].status == "ok"
    assert run.calls[0].decision.source == "read_only"


def test_a_deny_rule_names_a_server():
    run = run_calls({"time": time_server(trusted=True)}, [call("time__get_current_time", timezone="UTC")],
                    rules=["deny: time__*"])
    assert run.calls[0].status == "denied" and "time__*" in run.calls[0].decision.reason


def test_is_error_from_the_server_is_an_error_result():
    run = run_calls({"time": time_server()}, [call("time__get_current_time", timezone="Nowhere/Atlantis")],
                    rules=["allow: time__*"])
    rec = run.calls[0]
    assert rec.status == "error" and rec.result.is_error
    assert "Invalid timezone" in rec.result.text


def test_arguments_are_checked_against_the_servers_schema_before_the_call():
    run = run_calls({"time": time_server()}, [call("time__get_current_time")], rules=["allow: time__*"])
    assert run.calls[0].status == "invalid_arguments"
    assert "timezone" in run.calls[0].result.text


def test_deferred_tools_wait_behind_search_tools():
    run = run_calls({"time": time_server(defer=True)},
                    [call("search_tools", query="select:time__convert_time")],
                    [call("time__convert_time", source_timezone="UTC", time="12:00", target_timezone="Asia/Tokyo")],
                    rules=["allow: time__*"])
    assert run.requests[0].tools == ("search_tools",)
    assert "time__convert_time" in run.requests[1].tools
    assert run.calls[1].status == "ok" and "Asia/Tokyo" in run.calls[1].result.text


# -- mcp-server-git (PyPI, stdio) on a repository made here --------------------------------------------
@pytest.fixture
def repo(tmp_path):
    def git(*args):
        subprocess.run(["git", *args], cwd=tmp_path, check=True, capture_output=True,
                       env={"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com", "GIT_COMMITTER_NAME": "t",
                            "GIT_COMMITTER_EMAIL": "t@example.com", "HOME": str(tmp_path), "PATH": "/usr/bin:/bin"})

    git("init", "-q", "-b", "main")
    (tmp_path / "notes.md").write_text("first\n")
    git("add", "notes.md")
    git("commit", "-q", "-m", "Add the first notes")
    (tmp_path / "notes.md").write_text("first\nsecond\n")
    return tmp_path


def test_git_server_on_a_repository(repo):
    servers = {"git": python_server("-m", "mcp_server_git", "--repository", str(repo), trusted=True)}
    run = run_calls(servers, [call("git__git_status", repo_path=str(repo)),
                              call("git__git_log", repo_path=str(repo))],
                    [call("git__git_add", repo_path=str(repo), files=["notes.md"])])
    status, log, add = run.calls
    assert status.status == "ok" and "notes.md" in status.result.text
    assert log.status == "ok" and "Add the first notes" in log.result.text
    assert status.decision.source == "read_only"  # trusted: its readOnlyHint is believed
    assert add.tool.read_only is False and add.status == "denied"  # a write asks (no one approved)


# -- @modelcontextprotocol/server-everything (npm), stdio and streamable HTTP -----------------------------
@pytest.fixture(params=["stdio", "http"])
def everything_any(request):
    return request.getfixturevalue("everything" if request.param == "stdio" else "everything_http")


def test_everything_progress_reaches_the_call(everything_any):
    seen = []
    model = ScriptedModel([calls(call("everything__trigger-long-running-operation", duration=0.4, steps=4)), "done"])
    agent = Agent(model=model, mcp_servers={"everything": everything_any}, rules=["allow: everything__*"])
    run = agent.run_sync("go", on_event=lambda e: seen.append(e))
    rec = run.calls[0]
    assert rec.status == "ok", rec.result
    assert "Long running operation completed" in rec.result.text
    assert [round(p.fraction, 2) for p in rec.progress] == [0.25, 0.5, 0.75, 1.0]
    assert any(type(e).__name__ == "ToolCallProgress" for e in seen)


def test_everything_images_annotations_structured_content_and_links(everything_any):
    run = run_calls({"everything": everything_any},
                    [call("everything__get-tiny-image"),
                     call("everything__get-annotated-message", messageType="debug", includeImage=True),
                     call("everything__get-structured-content", location="New York"),
                     call("everything__get-resource-links", count=2)],
                    rules=["allow: everything__*"])
    image, annotated, structured, links = run.calls
    assert all(r.status == "ok" for r in run.calls), [r.result for r in run.calls]
    assert any(isinstance(b, ImageBlock) and b.mime_type == "image/png" for b in image.result.content)
    assert image.result.details.images and image.result.details.images[0].data.startswith(b"\x89PNG")
    # annotations: a tool's hints become metadata; content for the user only stays out of the model's view
    assert annotated.tool.read_only and not annotated.tool.destructive
    assert [b.text for b in annotated.result.content] == ["Debug: Cache hit ratio 0.95, latency 150ms"]
    assert [c.type for c in annotated.result.details.hidden] == ["image"]  # audience: user
    assert structured.result.details.structured["temperature"] is not None
    assert len(links.result.details.resource_links) == 2
    assert sum("Resource link:" in b.text for b in links.result.content if isinstance(b, TextBlock)) == 2


def test_everything_a_tool_that_writes_asks_even_from_a_trusted_server(everything):
    run = run_calls({"everything": {**everything, "trusted": True}}, [call("everything__toggle-subscriber-updates")])
    rec = run.calls[0]
    assert not rec.tool.read_only and not rec.tool.destructive  # readOnlyHint false, destructiveHint false
    assert rec.status == "denied" and "not read-only" in rec.decision.reason
