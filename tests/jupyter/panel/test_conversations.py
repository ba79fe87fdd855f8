"""The panel's conversations, in a real kernel, played by the test over jupyter_client as the page plays it.

The list holds this notebook's stored conversations, newest first, each with the words the person started it
with, its runs and calls; "New chat" (start with new) starts another; a conversation picked from the list is
opened (its messages) and the next prompt continues it; one the session store does not verify (its
signatures stripped) is listed as such, and neither opening it nor a start that names it continues it.
"""

from __future__ import annotations

import json

import pytest

from .test_comm import Page, kernel  # noqa: F401  (the fixture checks every message against the protocol)

pytestmark = pytest.mark.kernel

SETUP = r'''%load_ext nbagent
from nbagent import ScriptedModel
model = ScriptedModel(["It is 42.", "Hello again.", "Continued.", "Never sent."], delay=0.01)
%config NBAgent.model = "model"
%config NBAgent.notebook_path = "analysis.ipynb"
'''
SESSION = "__import__('nbagent.jupyter').jupyter.get_session()"


def strip_signatures(path) -> None:
    lines = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    for fact in lines:
        fact.pop("mac", None)
    path.write_text("".join(json.dumps(fact) + "\n" for fact in lines))


def finish(page: Page, started: dict) -> dict:
    assert started["ok"], started
    run = started["result"]
    return page.pushed(lambda r: r["id"] == run["id"] and r["status"] == "done")


def test_conversations_are_listed_newest_first_and_a_picked_one_is_continued(kernel, tmp_path):  # noqa: F811
    (tmp_path / "analysis.ipynb").write_text("{}")
    kernel.execute(SETUP)
    page = Page(kernel)
    assert page.ask("conversations")["result"] == {"conversations": [], "current": None, "more": 0}
    finish(page, page.ask("start", prompt="What is 6 * 7?", kind="prompt"))
    first_id = kernel.value(f"{SESSION}.stored.session_id")
    finish(page, page.ask("start", prompt="Say hello", kind="prompt", new=True))  # New chat
    second_id = kernel.value(f"{SESSION}.stored.session_id")
    assert second_id != first_id
    listed = page.ask("conversations")["result"]
    assert listed["current"] == second_id
    items = listed["conversations"]
    assert [(i["id"], i["first"], i["runs"], i["calls"], i["resumable"]) for i in items] == [
        (second_id, "Say hello", 1, 0, True), (first_id, "What is 6 * 7?", 1, 0, True)]
    assert items[0]["updated"] >= items[1]["updated"] > 0

    # picked from the list: its messages, then the next prompt continues it
    opened = page.ask("open", session=first_id)["result"]
    assert opened["id"] == first_id
    assert [(m["role"], m["text"]) for m in opened["messages"]] == [("you", "What is 6 * 7?"), ("nbagent", "It is 42.")]
    finish(page, page.ask("start", prompt="And then?", kind="prompt", resume=first_id))
    assert kernel.value(f"{SESSION}.stored.session_id") == first_id
    assert kernel.value(f"[m.words for m in {SESSION}.runs[-1].messages if m.kind == 'user']") == [
        "What is 6 * 7?", "And then?"]
    assert page.ask("conversations")["result"]["conversations"][0]["id"] == first_id  # written last: newest

    # a conversation whose signatures were stripped: listed, said why, not opened, not continued
    strip_signatures(tmp_path / ".nbagent" / "sessions" / f"{second_id}.jsonl")
    items = page.ask("conversations")["result"]["conversations"]
    unsigned = next(i for i in items if i["id"] == second_id)
    assert unsigned["resumable"] is False and "not signed" in unsigned["why"]
    refused = page.ask("open", session=second_id)
    assert refused["ok"] is False and "not signed" in refused["error"]
    runs = kernel.value(f"len({SESSION}.runs)")
    refused = page.ask("start", prompt="go on", kind="prompt", resume=second_id)
    assert refused["ok"] is False and "cannot be continued" in refused["error"]
    assert kernel.value(f"len({SESSION}.runs)") == runs  # nothing started
    assert kernel.value(f"{SESSION}.stored.session_id") == first_id  # the box still continues the one it did
    # another notebook's conversation is not opened through this one
    other = page.ask("open", session="abcdefgh12345678")
    assert other["ok"] is False and "not a stored conversation of this notebook" in other["error"]
