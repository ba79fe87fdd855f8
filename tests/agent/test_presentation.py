"""Presentation payloads: a tool returns them beside its content; the view renders them, the model never
sees them (no provider's wire, no later request)."""

from __future__ import annotations

import json

import pytest

from nbagent import Agent, Presentation, ScriptedModel, ToolResult, load_model, tool
from nbagent.events import ToolPresented
from tests.helpers import assert_valid, call, calls

PROVIDERS = ("anthropic", "openai", "openai-responses", "google", "mistral")


@tool(read_only=True)
def chart(city: str) -> ToolResult:
    """Make a chart."""
    return ToolResult("chart of " + city + " made", presentation=[
        Presentation("markdown", "## Rain in **" + city + "** <script>alert(1)</script>", title="UI-ONLY-TITLE"),
        Presentation("json", {"series": [1, 2, 3], "marker": "UI-ONLY-JSON"}),
        Presentation("text", "UI-ONLY-TEXT"),
    ])


def test_the_view_shows_it_and_the_model_never_sees_it():
    model = ScriptedModel([calls(call("chart", city="Paris")), "done"])
    events = []
    run = Agent(model=model, tools=[chart]).run_sync("x", on_event=events.append)
    rec = run.calls[0]
    assert [p.kind for p in rec.result.presentation] == ["markdown", "json", "text"]
    assert [e.presentation.kind for e in events if isinstance(e, ToolPresented)] == ["markdown", "json", "text"]
    html = run._repr_html_()
    assert "UI-ONLY-TITLE" in html and "UI-ONLY-JSON" in html and "UI-ONLY-TEXT" in html
    assert "<strong>Paris</strong>" in html and "<script>" not in html
    assert "UI-ONLY-TEXT" in str(run)
    for spec in PROVIDERS:
        wire = json.dumps(load_model(f"{spec}:m", api_key="sk-test-0123456789abcdef0123").to_wire(run.messages),
                          default=str)
        assert "UI-ONLY" not in wire and "chart of Paris made" in wire
    second = model.requests[1].body()
    assert "UI-ONLY" not in json.dumps(second, default=str)
    assert_valid(run)


def test_secrets_are_redacted_from_presentations():
    key = "sk-ant-api03-" + "a" * 40

    @tool(read_only=True)
    def leaky() -> ToolResult:
        return ToolResult("ok", presentation=[Presentation("text", f"token {key}")])

    run = Agent(model=ScriptedModel([calls(call("leaky")), "done"]), tools=[leaky]).run_sync("x")
    assert key not in run.calls[0].result.presentation[0].data
    assert key not in run._repr_html_()


def test_an_unknown_presentation_kind_is_refused():
    with pytest.raises(ValueError, match="markdown, text, json"):
        Presentation("html", "<b>x</b>")
