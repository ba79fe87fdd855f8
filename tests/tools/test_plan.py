"""The per-turn tool plan: filters, stable order, toolsets, deferred tools and tool search."""

from __future__ import annotations

import pytest

from nbagent import Agent, ScriptedModel, Toolset, tool
from nbagent.tools.plan import build_plan
from tests.helpers import assert_valid, call, calls


@tool(read_only=True)
def look(q: str) -> str:
    return "seen " + q


@tool(edits_files=True)
def save(text: str) -> str:
    return "saved"


@tool
def run_code(code: str) -> str:
    return "ran"


@tool(namespace="gh", namespace_description="GitHub", defer_loading=True, read_only=True)
def create_issue(title: str) -> str:
    """Create a GitHub issue."""
    return f"issue {title!r} created"


@tool(namespace="gh", defer_loading=True, read_only=True)
def list_pulls() -> str:
    """List open pull requests."""
    return "no pulls"


def names(plan):
    return [t.name for t in plan.tools]


def test_capability_modes_filter_and_order_is_stable():
    sources = [run_code, save, look]
    assert names(build_plan(sources)) == ["look", "run_code", "save"]
    assert names(build_plan(sources, capability_mode="read-only")) == ["look"]
    assert names(build_plan(sources, capability_mode="read-write")) == ["look", "save"]
    assert names(build_plan(sources, capability_mode="execute")) == ["look", "run_code", "save"]
    assert names(build_plan(sources, allowed_tools=("lo*", "save"))) == ["look", "save"]
    specs = [[t.spec() for t in build_plan(sources).tools] for _ in range(3)]
    assert specs[0] == specs[1] == specs[2]


def test_duplicate_names_are_refused():
    @tool(name="look")
    def other(q: str) -> str:
        return ""

    with pytest.raises(ValueError, match="two tools are named 'look'"):
        build_plan([look, other])


def test_toolsets_are_asked_every_turn():
    turns = []

    def dynamic(run):
        turns.append(run.turns)
        return [look] if run.turns == 1 else [look, save]

    model = ScriptedModel([calls(call("look", q="x")), "done"])
    r = Agent(model=model, tools=[Toolset(dynamic)]).run_sync("x")
    assert turns == [1, 2]
    assert [req.tools for req in model.requests] == [("look",), ("look", "save")]
    assert_valid(r)


def test_deferred_tools_stay_out_until_searched_and_then_load():
    model = ScriptedModel([
        calls(call("search_tools", query="github issue")),
        calls(call("gh__create_issue", title="bug")),
        "done",
    ])
    r = Agent(model=model, tools=[look, create_issue, list_pulls]).run_sync("x")
    assert model.requests[0].tools == ("look", "search_tools")
    assert "gh__create_issue" in r.calls[0].result.text and r.calls[0].result.text.startswith("Loaded")
    assert "gh__create_issue" in model.requests[1].tools and "gh__list_pulls" not in model.requests[1].tools
    assert r.calls[1].status == "ok" and r.calls[1].result.text == "issue 'bug' created"
    assert_valid(r)


def test_a_deferred_tool_never_loaded_is_resolved_on_the_spot():
    model = ScriptedModel([calls(call("gh__list_pulls")), "done"])
    r = Agent(model=model, tools=[create_issue, list_pulls]).run_sync("x")
    assert r.calls[0].status == "ok" and r.calls[0].result.text == "no pulls"
    assert "gh__list_pulls" in model.requests[1].tools  # and it stays loaded


def test_search_by_exact_names_and_misses():
    model = ScriptedModel([calls(call("search_tools", query="select:gh__list_pulls,nope")),
                           calls(call("search_tools", query="weather forecast")), "done"])
    r = Agent(model=model, tools=[create_issue, list_pulls]).run_sync("x")
    assert "Not found: nope" in r.calls[0].result.text
    assert r.calls[1].result.text.startswith("No tools matched")


def test_tool_resolver_is_the_last_resort():
    model = ScriptedModel([calls(call("late", q="1")), "done"])

    def resolver(name):
        if name == "late":
            return tool(name="late", read_only=True)(lambda q: f"late {q}")
        return None

    r = Agent(model=model, tools=[look], tool_resolver=resolver).run_sync("x")
    assert r.calls[0].status == "ok" and r.calls[0].result.text == "late 1"


def test_namespace_description_reaches_the_model():
    @tool(namespace="gh", namespace_description="GitHub: issues and pull requests of the current repository",
          read_only=True)
    def open_issue(title: str) -> str:
        return "opened"

    @tool(namespace="db", read_only=True)
    def query(sql: str) -> str:
        return "rows"

    run = Agent(model=ScriptedModel(["done"]), tools=[open_issue, query, look], instructions="Be brief.").run_sync("x")
    sent = run.requests[0].instructions
    assert sent.startswith("Be brief.\n\n")
    assert "`gh__*`: GitHub: issues and pull requests of the current repository" in sent
    assert "db__" not in sent  # no description, no line


def test_deferred_namespace_description_appears_once_its_tools_are_offered():
    model = ScriptedModel([calls(call("search_tools", query="select:gh__create_issue")), "done"])
    run = Agent(model=model, tools=[create_issue]).run_sync("x")
    assert run.requests[0].instructions is None
    assert "`gh__*`: GitHub" in run.requests[1].instructions
