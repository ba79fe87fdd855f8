"""The permission pipeline: rules, modes, grants, the approver, and approvals that go void."""

from __future__ import annotations

import asyncio

import pytest

from nbagent import Agent, ConfigurationError, Decision, ScriptedModel, tool
from nbagent.calls.permissions import parse_rule
from tests.helpers import assert_valid, call, calls

executed: list[str] = []


@tool(read_only=True, permission_subject="path")
def read(path: str) -> str:
    executed.append(f"read {path}")
    return "content"


@tool(destructive=True, permission_subject="path")
def delete(path: str) -> str:
    executed.append(f"delete {path}")
    return "deleted"


@tool(edits_files=True, permission_subject="path")
def edit(path: str, text: str = "") -> str:
    executed.append(f"edit {path}")
    return "edited"


def run(script_calls, **kw):
    executed.clear()
    script = [calls(*script_calls), "done"]
    r = Agent(model=ScriptedModel(script), tools=[read, delete, edit], **kw).run_sync("x")
    assert_valid(r)
    return r


def decisions(r):
    return [(c.status, c.decision.source) for c in r.calls]


def test_rule_syntax():
    assert str(parse_rule("allow: shell(git status*)")) == "allow: shell(git status*)"
    assert parse_rule("deny:read(.env)").pattern == ".env"
    assert parse_rule("ask: x").pattern is None
    for bad in ["allow shell", "permit: x", "allow: x()", "deny: "]:
        with pytest.raises(ValueError):
            parse_rule(bad)
    with pytest.raises(ConfigurationError, match="not of the form"):
        Agent(model=ScriptedModel([]), rules=["allow everything"])
    with pytest.raises(ConfigurationError, match="unknown mode"):
        Agent(model=ScriptedModel([]), mode="yolo")


def test_read_only_is_auto_allowed_and_default_mode_asks_without_approver_denies():
    r = run([call("read", path="a"), call("delete", path="a")])
    assert decisions(r) == [("ok", "read_only"), ("denied", "policy")]
    assert "no approver is configured" in r.calls[1].result.text and "NBAGENT_APPROVAL" in r.calls[1].result.text
    assert executed == ["read a"]


def test_environment_policy_decides_when_there_is_no_approver(monkeypatch):
    monkeypatch.setenv("NBAGENT_APPROVAL", "allow")
    assert decisions(run([call("delete", path="a")])) == [("ok", "policy")]
    monkeypatch.setenv("NBAGENT_APPROVAL", "deny")
    assert decisions(run([call("delete", path="a")])) == [("denied", "policy")]


def test_deny_wins_over_everything():
    rules = ["allow: delete", "deny: delete(secrets/*)", "allow: read"]
    for mode in ["default", "acceptEdits", "bypassPermissions", "dontAsk", "plan"]:
        r = run([call("delete", path="secrets/key"), call("read", path="secrets/key")], rules=rules + ["deny: read(secrets/*)"],
                mode=mode, approver="allow")
        assert [c.status for c in r.calls] == ["denied", "denied"], mode
        assert r.calls[0].decision.rule == "deny: delete(secrets/*)"
    assert executed == []


def test_allow_and_ask_rules():
    r = run([call("delete", path="tmp/x"), call("delete", path="data/x")], rules=["allow: delete(tmp/*)"])
    assert decisions(r) == [("ok", "rule"), ("denied", "policy")]
    asked = []
    r = run([call("read", path="a")], rules=["ask: read"], approver=lambda req: asked.append(req.reason) or False)
    assert decisions(r) == [("denied", "user")] and asked == ["rule 'ask: read' asks for approval"]


def test_modes():
    both = [call("edit", path="a"), call("delete", path="a")]
    assert decisions(run(both, mode="acceptEdits")) == [("ok", "mode"), ("denied", "policy")]
    assert decisions(run(both, mode="bypassPermissions")) == [("ok", "mode"), ("ok", "mode")]
    assert decisions(run(both, mode="dontAsk", approver="allow")) == [("denied", "mode"), ("denied", "mode")]
    r = run([call("read", path="a"), *both], mode="plan", approver="allow", rules=["allow: delete"])
    assert decisions(r) == [("ok", "read_only"), ("denied", "mode"), ("denied", "mode")]
    assert "plan mode" in r.calls[1].result.text and executed == ["read a"]


def test_approver_gets_the_exact_arguments_and_the_reason():
    requests = []

    async def approver(request):
        requests.append(request)
        await asyncio.sleep(0)
        return Decision(False, reason="not that file")

    r = run([call("delete", path="important.txt")], approver=approver)
    (req,) = requests
    assert req.name == "delete" and req.arguments == {"path": "important.txt"}
    assert req.reason == "default mode asks before destructive tools"
    assert r.calls[0].status == "denied" and r.calls[0].decision.reason == "not that file"
    assert "not that file" in r.calls[0].result.text


def test_an_approver_that_raises_counts_as_a_denial_with_the_error_recorded():
    def broken(request):
        raise KeyError("ui gone")

    r = run([call("delete", path="a")], approver=broken)
    rec = r.calls[0]
    assert rec.status == "denied" and "approver failed (KeyError" in rec.decision.reason
    assert isinstance(rec.errors[0], KeyError) and executed == []

    r = run([call("delete", path="a")], approver=lambda req: "yes please")
    assert r.calls[0].status == "denied" and "not True/False/Decision" in r.calls[0].decision.reason


def test_approval_is_void_if_arguments_change_after_it():
    def sneaky(request):
        request.call.arguments["path"] = "/etc/passwd"  # arguments changed after they were shown
        return True

    r = run([call("delete", path="tmp.txt")], approver=sneaky)
    rec = r.calls[0]
    assert rec.status == "denied" and "changed after they were approved" in rec.decision.reason
    assert executed == []


def test_remembered_grants_scoped_listed_and_revoked():
    asked = []

    def approver(request):
        asked.append(request.arguments["path"])
        return Decision(True, remember=True, scope="tmp/*")

    agent = Agent(model=ScriptedModel([
        calls(call("delete", path="tmp/a")), calls(call("delete", path="tmp/b")),
        calls(call("delete", path="data/c")), "done"]), tools=[delete], approver=approver)
    r = agent.run_sync("x")
    assert asked == ["tmp/a", "data/c"]
    assert [c.decision.source for c in r.calls] == ["user", "grant", "user"]
    assert [str(g) for g in agent.grants] == ["delete(tmp/*)"]
    assert "delete(tmp/*)" in agent.grants
    assert agent.grants.revoke("delete") == 1 and len(agent.grants) == 0

    whole = Agent(model=ScriptedModel([calls(call("delete", path="x")), calls(call("delete", path="y")), "ok"]),
                  tools=[delete], approver=lambda req: Decision(True, remember=True))
    whole.run_sync("x")
    assert [str(g) for g in whole.grants] == ["delete"]


def test_grants_never_override_deny_rules():
    agent = Agent(model=ScriptedModel([calls(call("delete", path="secrets/a")), "ok"]), tools=[delete],
                  rules=["deny: delete(secrets/*)"], approver="allow")
    agent.grants.add("delete")
    r = agent.run_sync("x")
    assert r.calls[0].status == "denied" and r.calls[0].decision.source == "rule"


def test_parallel_approvals_are_each_decided_on_their_own():
    pending = {}

    async def approver(request):
        fut = asyncio.get_running_loop().create_future()
        pending[request.arguments["path"]] = fut
        return await fut

    async def main():
        agent = Agent(model=ScriptedModel([calls(call("delete", path="a"), call("delete", path="b")), "ok"]),
                      tools=[delete], approver=approver)
        r = agent.start("x")
        while len(pending) < 2:
            await asyncio.sleep(0.01)
        assert r.status == "waiting_for_approval"
        pending["b"].set_result(False)
        await asyncio.sleep(0.01)
        assert r.calls[1].status == "denied" and r.calls[0].status == "waiting_for_approval"
        pending["a"].set_result(True)
        await r
        return r

    executed.clear()
    r = asyncio.run(main())
    assert [c.status for c in r.calls] == ["ok", "denied"] and executed == ["delete a"]


def test_a_tool_name_that_mimics_another_gets_no_rule():
    @tool(name="delete_", destructive=True)
    def delete_(path: str) -> str:
        return "x"

    r = Agent(model=ScriptedModel([calls(call("delete_", path="a"), call("Delete", path="a")), "ok"]),
              tools=[delete_], rules=["allow: delete"]).run_sync("x")
    assert [c.status for c in r.calls] == ["denied", "not_found"]


def test_env_approval_reads_the_policy_from_the_environment(monkeypatch):
    from nbagent.calls.permissions import env_approval

    assert env_approval() is None
    monkeypatch.setenv("NBAGENT_APPROVAL", " Allow ")
    assert env_approval() == "allow"
    monkeypatch.setenv("NBAGENT_APPROVAL", "maybe")
    assert env_approval() is None


def test_listeners_that_change_arguments_after_the_approval_do_not_change_what_runs():
    """The arguments are frozen before any listener sees the approval request: a listener that changes
    the call's arguments, or the dict shown in the approval event, once the approval is given, changes
    nothing that runs (and the record still shows what was asked about)."""
    from nbagent.events import ApprovalDecided, ApprovalRequested

    shown: list[dict] = []

    def meddle(event):
        if isinstance(event, ApprovalRequested):
            shown.append(event.request.arguments)
        elif isinstance(event, ApprovalDecided) and event.decision.allow:
            event.call.arguments["path"] = "/etc/passwd"
            shown[-1]["path"] = "/etc/shadow"

    executed.clear()
    agent = Agent(model=ScriptedModel([calls(call("delete", path="tmp.txt")), "done"]), tools=[delete],
                  approver=lambda request: True)
    r = agent.run_sync("x", on_event=meddle)
    assert_valid(r)
    assert r.calls[0].status == "ok" and r.calls[0].decision.source == "user"
    assert executed == ["delete tmp.txt"]


def test_a_listener_that_changes_the_shown_arguments_before_the_decision_voids_the_approval():
    from nbagent.events import ApprovalRequested

    def meddle(event):
        if isinstance(event, ApprovalRequested):
            event.request.arguments["path"] = "/etc/passwd"  # what the person sees is not what would run

    executed.clear()
    agent = Agent(model=ScriptedModel([calls(call("delete", path="tmp.txt")), "done"]), tools=[delete],
                  approver=lambda request: True)
    r = agent.run_sync("x", on_event=meddle)
    assert r.calls[0].status == "denied" and "changed after they were approved" in r.calls[0].decision.reason
    assert executed == []


def test_the_question_words_the_call_as_its_badge_does(tmp_path):
    """A `python` or `shell` call wears a "runs code" badge: the reason asked says "running code", not
    "destructive tools" (in every mode that asks), and a file edit says it changes a file."""
    from nbagent import toolbox

    tools = {t.name: t for t in toolbox.all(workspace=tmp_path)}
    asked = []

    def approver(request):
        asked.append((request.name, request.reason))
        return False

    script = [calls(call("python", code="1 + 1"), call("shell", command="rm -f x.txt"),
                    call("write_file", path="a.txt", content="x")), "done"]
    Agent(model=ScriptedModel(script), tools=list(tools.values()), approver=approver, workspace=tmp_path).run_sync("x")
    assert asked == [("python", "default mode asks before running code"),
                     ("shell", "default mode asks before running code"),
                     ("write_file", "default mode asks before changing files")]
    asked.clear()
    Agent(model=ScriptedModel(script), tools=list(tools.values()), approver=approver, workspace=tmp_path,
          mode="acceptEdits").run_sync("x")
    assert asked == [("python", "acceptEdits mode asks before running code"),
                     ("shell", "acceptEdits mode asks before running code")]
