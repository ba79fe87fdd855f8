"""A batch's approvals grant what single calls grant, say so with the same words, and draw data escaped.

The batch view's "Approve all calls like ..." button and `PendingApproval.approve(all_like_this=True)` take
their label and their scope from the one grant code (`nbagent.calls.grants`: `batch_grant`, `grant_scope`);
a suggested scope that matches every call (`*`, made from the model's arguments) is never the whole tool,
whether it is clicked, sent by the page's comm or called from code; the row's HTML, made from a DataFrame's
index and values and the call's arguments, goes through the one renderer (`nbagent.safety.shown`).
"""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

from nbagent import Agent, AssistantMessage, ScriptedModel, ToolCall, tool
from nbagent.calls.grants import batch_grant, grant_label

RLO = "\u202e"
TAIL = "END-OF-ARGUMENT"


@tool(suggest_grant=lambda args: args["pattern"])
def lookup(pattern: str, note: str = "") -> str:
    """Look things up (not read-only: it asks; its grant is the pattern it suggests)."""
    return f"looked up {pattern}"


@tool(suggest_grant=lambda args: args["missing"])  # fails on every call: suggests nothing
def fragile(pattern: str) -> str:
    """Look things up, with a suggester that fails."""
    return "ok"


def _model(name: str, patterns: list[str], note: str = "") -> ScriptedModel:
    """Each item calls `name` with the pattern its prompt names."""
    def step(messages):
        last = messages[-1]
        if type(last).__name__ == "UserMessage":
            args = {"pattern": patterns[int(last.text)]}
            if note:
                args["note"] = note
            return AssistantMessage(tool_calls=[ToolCall(name=name, arguments=args)])
        return "done"
    return ScriptedModel([step] * (2 * len(patterns)))


async def _first_waiting(batch):
    """The first call that waits for a decision (one decided already may still be on the list a moment)."""
    for _ in range(3000):
        waiting = [p for p in batch.pending_approvals if not p.future.done()]
        if waiting:
            return waiting[0]
        assert not batch.done, "the batch ended with nothing asked"
        await asyncio.sleep(0.01)
    raise AssertionError("nothing waits for a decision")


# spellings that match every call: wildcards, and character classes that match any character
EVERYTHING = ["*", "**", "./**", "*/*", "", "  *  ", "**/*", "?*", "*?", "[!\x00]*", "[!]]*", "[!\x00]**",
              "[\x01-\U0010ffff]*", "[^\x00]*", "[*-\uffff]*", "[!\x00]**/**", "*[]]*", "*/**", "././**"]


@pytest.mark.parametrize("suggested", EVERYTHING)
async def test_a_suggested_scope_that_matches_everything_is_never_the_whole_tool(tmp_path, suggested):
    agent = Agent(model=_model("lookup", [suggested, "anything-else"]), tools=[lookup], workspace=tmp_path)
    batch = agent.map(["0", "1"], "{item}", concurrency=1).ask_here()
    first = await _first_waiting(batch)
    assert first.grant is None and grant_label(first.request) is None  # the same answer as a single call's
    assert "no grant" in first.label
    first.approve(all_like_this=True)  # asked for "all like this" anyway (code, or a forged comm message)
    second = await _first_waiting(batch)  # the next item's call still asks
    assert second is not first and list(agent.grants) == []
    second.deny()
    await batch
    assert [r.run.calls[0].decision.allow for r in batch.results] == [True, False]


@pytest.mark.parametrize("suggested", EVERYTHING)
def test_every_way_from_a_suggestion_to_a_grant_refuses_a_scope_wider_than_the_call(suggested):
    """Every path a suggested scope takes to a grant: `derived_grant` (single calls, `remember`),
    `grant_label`/`batch_grant` (the buttons) and `grant_scope` (the batch's Decision.scope round trip)."""
    from nbagent.calls.grants import GrantLabel, covers_everything, derived_grant, grant_scope

    assert covers_everything(suggested)
    assert derived_grant(lookup, suggested) == (False, None)
    request = SimpleNamespace(tool=lookup, suggested_scope=suggested, arguments={"pattern": suggested})
    assert grant_label(request) is None and batch_grant(request) is None
    assert grant_scope(GrantLabel("x", "x", suggested, "pattern")) is None  # a label built by hand grants nothing


@pytest.mark.parametrize("narrow", ["notes.txt", "*.csv", "https://api.example.com/v1/*", "./data/**",
                                    "[*]literal", "report-2024-??.pdf"])
def test_a_scope_no_wider_than_its_subject_still_grants(narrow):
    from nbagent.calls.grants import covers_everything, derived_grant

    assert not covers_everything(narrow) and derived_grant(lookup, narrow) == (True, narrow)


def test_the_check_is_by_what_a_scope_matches_not_how_it_is_spelled(monkeypatch):
    """With the probes turned off (only the old spelling check left), the character classes get through:
    the probes are what catches them."""
    from nbagent.calls import grants

    monkeypatch.setattr(grants, "_PROBES", ())
    assert not grants.covers_everything("[!\x00]*") and not grants.covers_everything("[!]]*")
    assert grants.derived_grant(lookup, "[\x01-\U0010ffff]*") == (True, "[\x01-\U0010ffff]*")


async def test_a_suggester_that_fails_grants_nothing(tmp_path):
    agent = Agent(model=_model("fragile", ["a", "b"]), tools=[fragile], workspace=tmp_path)
    batch = agent.map(["0", "1"], "{item}", concurrency=1).ask_here()
    first = await _first_waiting(batch)
    assert first.grant is None
    first.approve(all_like_this=True)
    second = await _first_waiting(batch)
    second.approve()
    await batch
    assert list(agent.grants) == []


async def test_control_a_narrow_suggestion_is_granted_exactly_as_labelled(tmp_path):
    agent = Agent(model=_model("lookup", ["docs/*", "docs/b", "src/c"]), tools=[lookup], workspace=tmp_path)
    batch = agent.map(["0", "1", "2"], "{item}", concurrency=1).ask_here()
    first = await _first_waiting(batch)
    assert first.grant == batch_grant(first.request) == grant_label(first.request)  # one grant code
    assert first.label == "lookup(`docs/*`)"
    first.approve(all_like_this=True)
    third = await _first_waiting(batch)  # docs/b went on under the grant; src/c asks
    assert third.request.arguments["pattern"] == "src/c"
    third.deny()
    await batch
    assert [str(g) for g in agent.grants] == ["lookup(docs/*)"]
    assert [r.run.calls[0].decision.source for r in batch.results][:2] == ["user", "grant"]


async def test_the_view_row_offers_no_approve_all_for_a_star_and_the_comm_cannot_make_one(tmp_path):
    pytest.importorskip("ipywidgets")
    from nbagent.jupyter.live.batch_view import BatchView

    agent = Agent(model=_model("lookup", ["*", "x"]), tools=[lookup], workspace=tmp_path)
    batch = agent.map(["0", "1"], "{item}", concurrency=1).ask_here()
    view = BatchView(batch)
    first = await _first_waiting(batch)
    view.refresh()
    [(_pending, row)] = view._rows
    _question, buttons = row.children
    assert not [b for b in buttons.children if "nba-always" in b._dom_classes]
    assert view.decide(first.request.call.id, view.digest(first), "always") == {"taken": True}
    second = await _first_waiting(batch)
    assert list(agent.grants) == []
    second.deny()
    await batch


async def test_hostile_data_in_a_dataframe_and_arguments_is_escaped_and_shown_whole(tmp_path):
    pd = pytest.importorskip("pandas")
    pytest.importorskip("ipywidgets")
    from nbagent.jupyter.live.batch_view import BatchView

    index_label = f"<img src=x onerror=alert(1)>{RLO}gpj.exe"
    value = "<script>alert(2)</script>\u200b"
    long_note = "n" * 6000 + TAIL
    frame = pd.DataFrame({"text": [value]}, index=[index_label])
    agent = Agent(model=_model("lookup", ["<b>docs</b>/*\u200b"], note=long_note), tools=[lookup], workspace=tmp_path)

    def prompt(row):
        return "0"

    batch = agent.map(frame, prompt, concurrency=1).ask_here()
    view = BatchView(batch)
    first = await _first_waiting(batch)
    view.refresh()
    [(_pending, row)] = view._rows
    question, buttons = row.children
    page = question.value + view.summary.value
    for raw in ("<img", "<script", "<b>docs", RLO, "\u200b"):
        assert raw not in page, f"{raw!r} reached the page raw"
    assert "&lt;img src=x onerror=alert(1)&gt;" in question.value and "⟨U+202E" in question.value
    assert TAIL in question.value  # the long argument is shown whole: what is approved is what is seen
    [like] = [b for b in buttons.children if "nba-always" in b._dom_classes]
    assert "⟨U+200B" in like.description and "\u200b" not in like.description + like.tooltip
    assert like.description == f"Approve all: {first.grant.short}"
    first.deny()
    await batch
    final = view.final_bundle()["text/html"]
    assert "<img" not in final and "<script" not in final and RLO not in final


def test_the_grant_scope_reads_back_as_the_label_says():
    """`grant_scope` is `derived_grant`'s inverse for an approver's scope: what is granted is the label's."""
    from nbagent.calls.grants import GrantLabel, derived_grant, grant_scope

    some = SimpleNamespace(name="lookup", _suggest_grant=lambda *a, **k: "x")
    assert derived_grant(some, "docs/*", grant_scope(GrantLabel("l", "l", "docs/*", "pattern"))) == (True, "docs/*")
    assert derived_grant(some, None, grant_scope(GrantLabel("l", "l", None, "tool"))) == (True, None)
