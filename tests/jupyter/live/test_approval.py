"""Who decides in a notebook: the configured approver, else NBAGENT_APPROVAL, else the buttons."""

from __future__ import annotations

import asyncio
import threading
from types import SimpleNamespace

import pytest

from nbagent import Decision
from nbagent.jupyter.live.approval import NotebookApprover, PendingApproval, resolve_approver


class FakeView:
    def __init__(self) -> None:
        self.asked = []

    async def ask(self, request):
        self.asked.append(request)
        return Decision(True, reason="clicked")


def approver_with(setting, view=None):
    return NotebookApprover(lambda: setting, lambda call: view)


REQUEST = SimpleNamespace(call=object(), name="wipe", arguments={})


async def test_the_buttons_decide_when_nothing_else_does():
    view = FakeView()
    decision = await approver_with(None, view)(REQUEST)
    assert decision.reason == "clicked" and view.asked == [REQUEST]


async def test_the_environment_decides_instead_of_the_buttons(monkeypatch):
    monkeypatch.setenv("NBAGENT_APPROVAL", "deny")
    view = FakeView()
    decision = await approver_with(None, view)(REQUEST)
    assert not decision.allow and decision.source == "policy" and decision.reason == "NBAGENT_APPROVAL=deny"
    assert view.asked == []
    assert (await approver_with("buttons", view)(REQUEST)).reason == "clicked"  # 'buttons' ignores it


async def test_a_configured_approver_wins(monkeypatch):
    monkeypatch.setenv("NBAGENT_APPROVAL", "deny")
    assert (await approver_with("allow")(REQUEST)).allow

    async def careful(request):
        return request.name != "wipe"

    decision = await approver_with(careful)(REQUEST)
    assert decision.allow is False and decision.source == "policy"  # credited to the approver, not to "you"
    assert "careful" in decision.reason and "NBAgent.approver" in decision.reason

    def explained(request):
        return Decision(True, reason="small files only")

    decision = await approver_with(explained)(REQUEST)
    assert decision.allow and decision.source == "policy" and decision.reason.startswith("small files only (the approver")
    assert resolve_approver("os.path:isabs") is __import__("os").path.isabs
    with pytest.raises(ValueError, match="cannot be imported"):
        resolve_approver("nbagent_nothing:here")


async def test_nobody_to_ask_is_a_denial_that_says_what_to_do():
    decision = await approver_with(None, None)(REQUEST)
    assert not decision.allow and "NBAGENT_APPROVAL" in decision.reason


async def test_a_pending_approval_is_resolved_once_from_any_thread():
    loop = asyncio.get_running_loop()
    pending = PendingApproval(REQUEST, loop)
    results = []
    threads = [threading.Thread(target=lambda a=a: results.append(pending.decide(Decision(a)))) for a in (True, False)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(5)
    decision = await asyncio.wait_for(pending.future, 5)
    assert sorted(results) == [False, True] and pending.decided
    assert isinstance(decision, Decision)
