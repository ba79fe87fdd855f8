"""A grant is exactly as wide as its label: the table in `nbagent.calls.grants`, checked for every built-in tool.

For each tool: the label the Always-allow button shows, and what remembering that approval then lets
through without asking (the same call; a neighbour of it), agree. Each defence is also turned off once, to
see the wider grant get through.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from nbagent import Agent, AssistantMessage, Decision, ScriptedModel, ToolCall, toolbox
from nbagent.calls import grants as grants_module
from nbagent.calls.grants import GRANT_SCOPES, derived_grant, grant_label
from nbagent.calls.permissions import PermissionPolicy
from nbagent.tools import paths as paths_module


def builtin_tools(ws: Path) -> dict:
    from nbagent.jupyter.notebook.tools import notebook_tools

    tools = {t.name: t for t in toolbox.all(workspace=ws)}
    tools.update({t.name: t for t in notebook_tools(SimpleNamespace())})
    return tools


# One call per tool, and a neighbour: a call that a grant of the first must not cover unless its label says
# "every ... call". Paths: `sub` is a directory, so its neighbour is a file inside it.
CALLS = {
    "write_file": ({"path": "sub", "content": "x"}, {"path": "sub/inner.txt", "content": "x"}),
    "edit_file": ({"path": "notes.txt", "old": "a", "new": "b"}, {"path": "notes.txt.bak", "old": "a", "new": "b"}),
    "shell": ({"command": "git status"}, {"command": "git status; rm -rf ~"}),
    "python": ({"code": "print(1)"}, {"code": "print(1); import shutil; shutil.rmtree('/')"}),
    "run_cell": ({"cell_id": "abc"}, {"cell_id": "abc"}),
    "process": ({"action": "write", "id": "p1", "input": "ls\n"}, {"action": "write", "id": "p1", "input": "rm -rf ~\n"}),
    "insert_cell": ({"source": "x = 1"}, {"source": "y = 2"}),
    "edit_cell": ({"cell_id": "abc", "source": "x = 1"}, {"cell_id": "def", "source": "y"}),
    "delete_cell": ({"cell_id": "abc"}, {"cell_id": "def"}),
    "read_file": ({"path": "notes.txt"}, {"path": "other.txt"}),
    "list_files": ({"pattern": "*.txt"}, {"pattern": "**"}),
    "grep": ({"pattern": "x"}, {"pattern": "y"}),
    "read_notebook": ({}, {"cell_id": "abc"}),
    "list_variables": ({}, {"pattern": "x*"}),
    "inspect_variable": ({"name": "df"}, {"name": "secret"}),
    "history": ({}, {"last": 3}),
}


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    (tmp_path / "sub").mkdir()
    (tmp_path / "notes.txt").write_text("a\n")
    return tmp_path


def remember(tool, args):
    """What the Always-allow button says for this call, and the grant a click on it makes (or None)."""
    request = SimpleNamespace(name=tool.name, tool=tool, arguments=args, suggested_scope=tool.suggested_scope(args))
    label = grant_label(request)
    policy = PermissionPolicy()
    decision = Decision(True, remember=True)
    policy.remember(tool, decision, request)
    made = list(policy.grants)
    return label, made, policy, decision


def test_the_table_names_every_built_in_tool_and_only_them(ws):
    tools = builtin_tools(ws)
    assert set(GRANT_SCOPES) == set(tools) == set(CALLS)


@pytest.mark.parametrize("name", sorted(CALLS))
def test_the_label_and_the_grant_agree(ws, name):
    tool = builtin_tools(ws)[name]
    first, neighbour = CALLS[name]
    label, made, policy, decision = remember(tool, first)
    kind = GRANT_SCOPES[name]
    if kind == "once":
        assert label is None and made == [] and decision.remember is False
        assert "asked each time" in decision.reason
        return
    assert label is not None and len(made) == 1
    grant = made[0]
    assert grant.pattern == label.pattern
    assert grant.matches(tool, first), "a grant covers the call it was made for"
    if label.pattern is None:
        assert label.short == f"every {name} call"
        assert grant.matches(tool, neighbour), "a grant of the whole tool covers every call, as its label says"
        return
    assert not grant.matches(tool, neighbour), (name, label, neighbour)
    if kind == "path":
        assert label.short == f"{name} ./{first['path']} (this file only)"
    elif kind == "command":
        assert label.short == f"`{first['command']}` (this exact command)"
    elif kind == "code":
        assert label.short == "python: exactly this code" and first["code"] in label.full


def test_code_tools_never_grant_the_whole_tool(ws):
    tools = builtin_tools(ws)
    for name, args in (("python", {"code": ""}), ("shell", {"command": "   "})):
        label, made, _, _ = remember(tools[name], args)
        assert all(g.pattern is not None for g in made), (name, made)
        assert label is None or label.pattern is not None


def test_a_directory_grant_says_everything_under_it_and_covers_exactly_that(ws):
    tool = builtin_tools(ws)["write_file"]
    granted, pattern = derived_grant(tool, "./sub", scope="./sub/**")
    label = grants_module.label_for(tool, pattern)
    assert granted and label.short == "write_file: everything under ./sub/"
    policy = PermissionPolicy()
    policy.grants.add("write_file", pattern)
    assert policy.grants.find(tool, {"path": "sub/inner.txt"}) is not None
    assert policy.grants.find(tool, {"path": "subway.txt"}) is None


def test_a_bare_name_pattern_is_not_labelled_as_one_path(ws):
    tool = builtin_tools(ws)["write_file"]
    label = grants_module.label_for(tool, "notes.txt")
    assert "this file only" not in label.short and "matching" in label.short


def _run_writes(ws: Path, *paths: str) -> list:
    asked: list[str] = []

    def approver(request):
        asked.append(request.arguments["path"])
        return Decision(True, remember=True) if len(asked) == 1 else Decision(False)

    calls = [AssistantMessage(tool_calls=[ToolCall(name="write_file", arguments={"path": p, "content": "x"})])
             for p in paths]
    agent = Agent(model=ScriptedModel(calls + ["done"]), tools=toolbox.all(workspace=ws), workspace=ws,
                  approver=approver)
    agent.run_sync("go")
    return asked


def test_always_allow_on_a_directory_does_not_cover_the_files_in_it(ws):
    asked = _run_writes(ws, "sub", "sub/inner.txt")
    assert asked == ["sub", "sub/inner.txt"]
    assert not (ws / "sub" / "inner.txt").exists()


def test_with_grants_matching_contents_the_directory_grant_gets_through(ws, monkeypatch):
    real = paths_module.match_path
    monkeypatch.setattr(paths_module, "match_path", lambda *a, **k: real(*a, **{**k, "contents": True}))
    asked = _run_writes(ws, "sub", "sub/inner.txt")
    assert asked == ["sub"] and (ws / "sub" / "inner.txt").exists()


def test_without_the_table_run_cell_would_be_granted_whole(ws, monkeypatch):
    monkeypatch.setitem(GRANT_SCOPES, "run_cell", "tool")
    tool = builtin_tools(ws)["run_cell"]
    label, made, _, _ = remember(tool, {"cell_id": "abc"})
    assert made and made[0].pattern is None and label.short == "every run_cell call"


def test_labels_show_hidden_characters_of_the_pattern(ws):
    tool = builtin_tools(ws)["shell"]
    label, _, _, _ = remember(tool, {"command": "echo \u202eabc"})
    assert "⟨U+202E RIGHT-TO-LEFT OVERRIDE⟩" in label.short and "bidi" in label.full


def test_a_write_of_configuration_that_runs_code_offers_no_always_allow(ws):
    write = builtin_tools(ws)["write_file"]
    label, _, _, _ = remember(write, {"path": ".mcp.json", "content": "{}"})
    assert label is None  # it always asks: a remembered grant would never be used, so none is offered
    label, _, _, _ = remember(write, {"path": "notes.md", "content": "x"})
    assert label is not None  # an ordinary file still can be always allowed
