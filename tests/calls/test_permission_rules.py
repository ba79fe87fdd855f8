"""Rules with argument patterns, modes and remembered grants, governing the built-in tools; and the
core hooks they rest on (path patterns, context-aware matchers, per-call edits, thread interruption)."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest

from nbagent import Agent, AssistantMessage, Decision, ScriptedModel, ToolCall, tool, toolbox
from nbagent.calls.permissions import Rule, match_path, parse_rule, path_rule_matcher
from nbagent.tools import Arguments


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / "notebooks").mkdir(parents=True)
    (root / "notes.txt").write_text("hello\n")
    (root / ".env").write_text("KEY=1\n")
    return root


def run_calls(ws: Path, *calls: ToolCall, tools: list[Any] | None = None, **kwargs: Any):
    model = ScriptedModel([AssistantMessage(tool_calls=[c]) for c in calls] + ["done"])
    agent = kwargs.pop("agent", None)
    if agent is None:
        agent = Agent(model=model, tools=tools if tools is not None else toolbox.all(workspace=ws), workspace=ws, **kwargs)
    else:
        agent.model = model
    return agent.run_sync("go")


def call(name: str, **arguments: Any) -> ToolCall:
    return ToolCall(name=name, arguments=arguments)


# --------------------------------------------------------------------------------------------------
# Path patterns
# --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("pattern, path, expected", [
    ("notebooks/**", "notebooks/a.ipynb", True),
    ("notebooks/**", "notebooks/deep/b.ipynb", True),
    ("notebooks/**", "notebooks", True),
    ("notebooks/**", "other/notebooks/a.ipynb", False),
    ("notebooks/*.ipynb", "notebooks/deep/b.ipynb", False),
    ("notebooks/**/*.ipynb", "notebooks/deep/b.ipynb", True),
    ("notebooks/**/*.ipynb", "notebooks/b.ipynb", True),
    (".env", ".env", True),
    (".env", "config/.env", True),
    (".env", ".envrc", False),
    ("secrets", "secrets/key.pem", True),
    ("*.csv", "data/x.csv", True),
    ("data/*.csv", "data/x.csv", True),
    ("./data/*.csv", "data/x.csv", True),
    ("data/[ab].csv", "data/a.csv", True),
    ("data/[!ab].csv", "data/a.csv", False),
    ("**", "anything/at/all", True),
])
def test_match_path(pattern: str, path: str, expected: bool) -> None:
    assert match_path(pattern, path) is expected


def test_match_path_case_and_anchoring() -> None:
    assert not match_path(".env", ".ENV")
    assert match_path(".env", ".ENV", ignore_case=True)
    assert match_path("/etc/**", "/etc/passwd", anchored=True)
    assert not match_path("/etc/**", "/home/etc/passwd", anchored=True)


def test_path_rule_matcher_is_strict_for_allow_and_broad_for_deny(ws: Path, tmp_path: Path) -> None:
    os.symlink(ws / ".env", ws / "notebooks" / "alias")
    m = path_rule_matcher("path", ws)
    # a link inside notebooks/ that leads to .env: an allow of notebooks/** does not cover it...
    assert not m("notebooks/**", Arguments(path="notebooks/alias"), None, "allow")
    # ...and a deny of .env does
    assert m(".env", Arguments(path="notebooks/alias"), None, "deny")
    assert m(".env", Arguments(path="notebooks/../.env"), None, "deny")
    assert m(".env", Arguments(path=str(ws / ".env")), None, "deny")
    assert m(".env", Arguments(path="x\x00y"), None, "deny")
    assert not m(".env", Arguments(path="x\x00y"), None, "allow")
    assert not m("**", Arguments(path="../elsewhere"), None, "allow")


def test_old_style_two_argument_rule_matchers_still_work() -> None:
    @tool(rule_matcher=lambda pattern, args: args.city.startswith(pattern))
    def weather(city: str) -> str:
        """Weather."""
        return city

    assert weather.matches_pattern("Par", Arguments(city="Paris"))
    assert Rule("allow", "weather", "Par").matches(weather, Arguments(city="Paris"))


def test_rule_matchers_get_the_action_and_context() -> None:
    seen: list[tuple] = []

    def matcher(pattern, args, ctx, action):
        seen.append((pattern, ctx, action))
        return action == "deny"

    @tool(rule_matcher=matcher)
    def thing(x: str) -> str:
        """Thing."""
        return x

    assert Rule("deny", "thing", "p").matches(thing, Arguments(x="1"), "CTX")
    assert not Rule("allow", "thing", "p").matches(thing, Arguments(x="1"), "CTX")
    assert seen == [("p", "CTX", "deny"), ("p", "CTX", "allow")]


def test_rules_parse_with_patterns() -> None:
    assert parse_rule("allow: shell(git status*)") == Rule("allow", "shell", "git status*")
    assert parse_rule("deny: read_file(.env)") == Rule("deny", "read_file", ".env")
    assert parse_rule("allow: write_file(notebooks/**)") == Rule("allow", "write_file", "notebooks/**")
    with pytest.raises(ValueError):
        parse_rule("allow: shell()")


# --------------------------------------------------------------------------------------------------
# Rules on the built-in tools
# --------------------------------------------------------------------------------------------------
def test_write_rule_scoped_to_a_directory(ws: Path) -> None:
    run = run_calls(ws, call("write_file", path="notebooks/a.md", content="x"),
                    call("write_file", path="notes.txt", content="x"),
                    rules=["allow: write_file(notebooks/**)"])
    assert run.calls[0].status == "ok" and run.calls[0].decision.source == "rule"
    assert run.calls[0].decision.rule == "allow: write_file(notebooks/**)"
    assert run.calls[1].status == "denied"
    assert (ws / "notes.txt").read_text() == "hello\n"


def test_deny_wins_over_allow_and_over_every_mode(ws: Path) -> None:
    for mode in ("default", "acceptEdits", "dontAsk", "bypassPermissions"):
        run = run_calls(ws, call("read_file", path=".env"), mode=mode,
                        rules=["allow: read_file", "allow: read_file(.env)", "deny: read_file(.env)"],
                        approver=lambda request: True)
        rec = run.calls[0]
        assert rec.status == "denied", mode
        assert rec.decision.source == "rule" and rec.decision.rule == "deny: read_file(.env)"
        assert "denied by rule 'deny: read_file(.env)'" in rec.result.text


def test_ask_rule_asks_even_for_read_only_tools(ws: Path) -> None:
    asked: list[str] = []
    run = run_calls(ws, call("read_file", path="notes.txt"), rules=["ask: read_file(notes.txt)"],
                    approver=lambda request: asked.append(request.reason) or True)
    assert run.calls[0].status == "ok"
    assert asked == ["rule 'ask: read_file(notes.txt)' asks for approval"]


def test_shell_rules_match_commands(ws: Path) -> None:
    run = run_calls(ws, call("shell", command="echo made > made.txt"), call("shell", command="touch other"),
                    rules=["allow: shell(echo made > made.txt)", "allow: shell(touch made*)"])
    assert run.calls[0].status == "ok"  # the exact line, though it has a redirection
    assert run.calls[1].status == "denied"


# --------------------------------------------------------------------------------------------------
# Modes
# --------------------------------------------------------------------------------------------------
def test_accept_edits_allows_file_edits_and_asks_for_the_rest(ws: Path) -> None:
    run = run_calls(ws, call("write_file", path="notebooks/new.md", content="x"),
                    call("edit_file", path="notes.txt", old="hello", new="hi"),
                    call("shell", command="touch ran"),
                    call("python", code="1"),
                    mode="acceptEdits")
    assert [c.status for c in run.calls] == ["ok", "ok", "denied", "denied"]
    assert run.calls[0].decision.source == "mode"
    assert "acceptEdits" in run.calls[0].decision.reason
    assert not (ws / "ran").exists()


def test_plan_mode_runs_read_only_tools_only(ws: Path) -> None:
    run = run_calls(ws, call("read_file", path="notes.txt"), call("list_files"), call("shell", command="ls"),
                    call("write_file", path="a.txt", content="x"), call("shell", command="touch x"),
                    mode="plan", approver=lambda request: True)
    assert [c.status for c in run.calls] == ["ok", "ok", "ok", "denied", "denied"]
    assert "plan mode" in run.calls[3].decision.reason


def test_dont_ask_denies_what_would_ask_but_keeps_rules_and_read_only(ws: Path) -> None:
    run = run_calls(ws, call("read_file", path="notes.txt"), call("shell", command="touch a"),
                    call("shell", command="touch b"), mode="dontAsk", rules=["allow: shell(touch b)"],
                    approver=lambda request: True)
    assert [c.status for c in run.calls] == ["ok", "denied", "ok"]
    assert "dontAsk" in run.calls[1].decision.reason


def test_bypass_allows_everything_but_deny_rules_and_the_boundary(ws: Path, tmp_path: Path) -> None:
    (tmp_path / "secret.txt").write_text("s")
    run = run_calls(ws, call("shell", command="touch made"), call("shell", command="rm -f made"),
                    call("read_file", path="../secret.txt"), mode="bypassPermissions",
                    rules=["deny: shell(rm *)"])
    assert [c.status for c in run.calls] == ["ok", "denied", "error"]
    assert (ws / "made").exists()


def test_capability_modes_filter_the_tool_plan(ws: Path) -> None:
    model = ScriptedModel(["done"])
    Agent(model=model, tools=toolbox.all(workspace=ws), workspace=ws, capability_mode="read-only").run_sync("hi")
    assert set(model.requests[0].tools) == {"read_file", "list_files", "grep", "list_variables", "inspect_variable", "history"}
    model = ScriptedModel(["done"])
    Agent(model=model, tools=toolbox.all(workspace=ws), workspace=ws, capability_mode="read-write").run_sync("hi")
    assert {"write_file", "edit_file"} <= set(model.requests[0].tools)
    assert not {"python", "shell"} & set(model.requests[0].tools)


# --------------------------------------------------------------------------------------------------
# Grants
# --------------------------------------------------------------------------------------------------
def test_always_allow_remembers_exactly_the_command_and_can_be_revoked(ws: Path) -> None:
    asked: list[str] = []

    def approver(request):
        asked.append(request.arguments["command"])
        return Decision(True, remember=True)

    model = ScriptedModel([])
    agent = Agent(model=model, tools=toolbox.all(workspace=ws), workspace=ws, approver=approver)
    run = run_calls(ws, call("shell", command="touch one"), call("shell", command="touch one"),
                    call("shell", command="touch two"), agent=agent)
    assert asked == ["touch one", "touch two"]  # the second was covered by the grant, the third was not
    assert run.calls[1].decision.source == "grant"
    assert "remembered approval for shell(touch one)" in run.calls[1].decision.reason
    assert [str(g) for g in agent.grants] == ["shell(touch one)", "shell(touch two)"]

    assert agent.grants.revoke("shell(touch one)") == 1
    run_calls(ws, call("shell", command="touch one"), agent=agent)
    assert asked == ["touch one", "touch two", "touch one"]


def test_a_grant_for_a_write_covers_that_file_only(ws: Path) -> None:
    answers = iter([Decision(True, remember=True), False])
    agent = Agent(model=ScriptedModel([]), tools=toolbox.all(workspace=ws), workspace=ws,
                  approver=lambda request: next(answers))
    run = run_calls(ws, call("write_file", path="notebooks/a.md", content="1"),
                    call("write_file", path="notebooks/a.md", content="2"),
                    call("write_file", path="notebooks/b.md", content="3"), agent=agent)
    assert [c.status for c in run.calls] == ["ok", "ok", "denied"]
    assert [str(g) for g in agent.grants] == ["write_file(./notebooks/a.md)"]


def test_a_decision_can_scope_its_grant(ws: Path) -> None:
    answers = iter([Decision(True, remember=True, scope="notebooks/**")])
    agent = Agent(model=ScriptedModel([]), tools=toolbox.all(workspace=ws), workspace=ws,
                  approver=lambda request: next(answers))
    run = run_calls(ws, call("write_file", path="notebooks/a.md", content="1"),
                    call("write_file", path="notebooks/deep/b.md", content="2"),
                    call("write_file", path="notes.txt", content="3"), agent=agent)
    assert [c.status for c in run.calls] == ["ok", "ok", "denied"]


def test_grants_scoped_to_a_whole_tool(ws: Path) -> None:
    agent = Agent(model=ScriptedModel([]), tools=toolbox.all(workspace=ws), workspace=ws)
    agent.grants.add("write_file")
    run = run_calls(ws, call("write_file", path="x.txt", content="1"), call("write_file", path="y.txt", content="2"),
                    agent=agent)
    assert [c.status for c in run.calls] == ["ok", "ok"]
    assert "write_file" in agent.grants
    agent.grants.clear()
    assert len(agent.grants) == 0


def test_every_decision_says_what_decided_and_why(ws: Path) -> None:
    run = run_calls(ws, call("read_file", path="notes.txt"), call("write_file", path="a.txt", content="x"),
                    call("shell", command="touch z"), rules=["allow: write_file(a.txt)"])
    sources = [(c.decision.source, bool(c.decision.reason)) for c in run.calls]
    assert sources == [("read_only", True), ("rule", True), ("policy", True)]


# --------------------------------------------------------------------------------------------------
# Core behaviour the toolbox relies on
# --------------------------------------------------------------------------------------------------
def test_edits_files_can_decide_per_call() -> None:
    @tool(edits_files=lambda args: not args.path.startswith(".git/"))
    def save(path: str) -> str:
        """Save."""
        return path

    assert save.capability == "write"
    assert save.is_edit_call(Arguments(path="a.txt"))
    assert not save.is_edit_call(Arguments(path=".git/config"))


def test_a_sync_tool_that_swallows_exceptions_is_still_stopped(tmp_path: Path) -> None:
    state = {"n": 0}

    @tool(timeout=0.3)
    def stubborn() -> str:
        """Loops forever, catching everything it can."""
        while True:
            try:
                state["n"] += 1
            except Exception:
                pass

    rec = run_calls(tmp_path, call("stubborn"), tools=[stubborn], mode="bypassPermissions").calls[0]
    assert rec.status == "timeout" and "was stopped" in rec.result.text
    n = state["n"]
    time.sleep(0.2)
    assert state["n"] == n


def test_a_sync_tool_blocked_outside_python_is_reported_honestly(tmp_path: Path) -> None:
    @tool(timeout=0.2)
    def sleepy() -> str:
        """Sleeps in C."""
        time.sleep(2.5)
        return "woke"

    rec = run_calls(tmp_path, call("sleepy"), tools=[sleepy], mode="bypassPermissions").calls[0]
    assert rec.status == "timeout"
    assert "could not be stopped" in rec.result.text


def test_the_agents_workspace_is_fixed_when_it_is_made(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    agent = Agent(model=ScriptedModel([]))
    monkeypatch.chdir("/")
    assert agent.workspace == tmp_path.resolve()


def test_a_grant_for_a_top_level_file_does_not_cover_files_of_that_name_elsewhere(ws: Path) -> None:
    answers = iter([Decision(True, remember=True), False])
    agent = Agent(model=ScriptedModel([]), tools=toolbox.all(workspace=ws), workspace=ws,
                  approver=lambda request: next(answers))
    run = run_calls(ws, call("write_file", path="notes.txt", content="1"),
                    call("write_file", path="notebooks/notes.txt", content="2"), agent=agent)
    assert [c.status for c in run.calls] == ["ok", "denied"]
    assert [str(g) for g in agent.grants] == ["write_file(./notes.txt)"]


def test_always_allow_never_grants_a_whole_tool_by_accident(ws: Path) -> None:
    tools = toolbox.all(workspace=ws)
    write = next(t for t in tools if t.name == "write_file")
    shell = next(t for t in tools if t.name == "shell")
    assert write.suggested_scope(Arguments(path="../outside.txt")) == "./../outside.txt"
    assert shell.suggested_scope(Arguments(command="   ")) not in (None, "", "*")
    run = run_calls(ws, call("shell", command="   "), mode="bypassPermissions")
    assert run.calls[0].status == "error" and "empty" in run.calls[0].result.text


def test_anchored_path_patterns() -> None:
    assert match_path("./notes.txt", "notes.txt")
    assert not match_path("./notes.txt", "sub/notes.txt")
    assert match_path("notes.txt", "sub/notes.txt")
