"""Who decides, in a notebook, the calls that need consent.

    NBAgent.approver set ('allow', 'deny', a callable, 'module:function')  -> it decides
    else NBAGENT_APPROVAL=allow|deny in the kernel's environment            -> it decides (headless runs, CI)
    else the Approve / Deny / Always-allow buttons on the call's row         -> the person decides

The buttons are awaited, never polled: the run's task awaits an `asyncio.Future` created on the run's loop,
and a click resolves it through `loop.call_soon_threadsafe`. A click handler may run on a kernel subshell's
thread, which has its own event loop, so it never looks for "the running loop": it uses the run's.

A question is bound to exactly what it shows: `digest` names the call and every byte of the arguments asked
about. The view draws it into the question it shows, and the page sends it back with a decision that comes
through nbagent's own comm (panel/hub.py `decide`); a decision with another digest is refused. However many
paths a decision may come by (the buttons, the page's comm, the cell's review, code), `PendingApproval.decide`
takes the first and only the first.

The approver does not know who keeps the views: it is handed two functions, one that reads the configured
setting and one that finds the view showing a call's run (the session's), so nothing here imports the session.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import importlib
import inspect
import json
import threading
from typing import Any, Callable

from nbagent.calls.permissions import env_approval
from nbagent.decisions import Decision
from nbagent.records import ApprovalRequest

__all__ = ["NotebookApprover", "PendingApproval", "digest", "resolve_approver"]


def digest(call_id: str, arguments: Any) -> str:
    """What a decision is bound to: this call, with exactly these arguments."""
    text = json.dumps([call_id, arguments], sort_keys=True, default=repr, ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def resolve_approver(value: Any) -> Callable[[ApprovalRequest], Any] | str | None:
    """A configured approver: 'allow' / 'deny' / 'buttons' / None as they are, 'module:function' imported."""
    if value is None or callable(value) or value in ("allow", "deny", "buttons"):
        return value
    module_name, _, attr = str(value).partition(":")
    try:
        target: Any = importlib.import_module(module_name)
        for part in attr.split("."):
            target = getattr(target, part)
    except (ImportError, AttributeError) as exc:
        raise ValueError(f"NBAgent.approver {value!r} cannot be imported: {exc}") from None
    if not callable(target):
        raise ValueError(f"NBAgent.approver {value!r} is not callable")
    return target


class PendingApproval:
    """One question waiting for a click: resolved exactly once, from any thread."""

    def __init__(self, request: ApprovalRequest, loop: asyncio.AbstractEventLoop) -> None:
        self.request = request
        self.loop = loop
        self.future: asyncio.Future[Decision] = loop.create_future()
        self._lock = threading.Lock()
        self._sent = False

    def decide(self, decision: Decision) -> bool:
        """Hand a decision to the run's loop (safe from any thread). Returns False if one was already given."""
        with self._lock:
            if self._sent:
                return False
            self._sent = True
        try:
            self.loop.call_soon_threadsafe(self._resolve, decision)
        except RuntimeError:  # the loop is closed: the run is long over
            return False
        return True

    def _resolve(self, decision: Decision) -> None:
        if not self.future.done():
            self.future.set_result(decision)

    @property
    def digest(self) -> str:
        """The digest of the call asked about and the exact arguments shown (`digest`)."""
        return digest(self.request.call.id, dict(self.request.arguments or {}))

    @property
    def decided(self) -> bool:
        return self._sent


def _credited(answer: Any, approver: Any) -> Any:
    """A configured approver's answer as a decision credited to it, not to the person ("approved by you")."""
    name = getattr(approver, "__qualname__", None) or getattr(approver, "__name__", None) or type(approver).__name__
    module = getattr(approver, "__module__", None)
    if module and module not in ("__main__", "builtins"):
        name = f"{module}.{name}"
    reason = f"the approver {name} (NBAgent.approver)"
    if isinstance(answer, Decision):
        if answer.source != "user":  # it said who decided
            return answer
        return dataclasses.replace(answer, source="policy", reason=f"{answer.reason} ({reason})" if answer.reason else reason)
    if isinstance(answer, bool):
        return Decision(answer, source="policy", reason=reason)
    return answer


class NotebookApprover:
    """The approver of notebook runs: the configured policy, else NBAGENT_APPROVAL, else the buttons."""

    def __init__(self, setting: Callable[[], Any], find_view: Callable[[Any], Any]) -> None:
        self.setting = setting
        """Reads `NBAgent.approver` when a call asks (a `%config` between two calls counts)."""
        self.find_view = find_view
        """The view showing the run a call belongs to, or None: the one that asks the person."""

    async def __call__(self, request: ApprovalRequest) -> Any:
        configured = resolve_approver(self.setting())
        if callable(configured):
            answer = configured(request)
            answer = await answer if inspect.isawaitable(answer) else answer
            return _credited(answer, configured)
        if configured in ("allow", "deny"):
            return Decision(configured == "allow", source="policy",
                            reason=f"approval policy '{configured}' (NBAgent.approver)")
        policy = env_approval() if configured is None else None
        if policy is not None:
            return Decision(policy == "allow", source="policy", reason=f"NBAGENT_APPROVAL={policy}")
        view = self.find_view(request.call)
        if view is None:
            return Decision(False, source="policy", reason=(
                "nobody can be asked (no live view shows this run); set NBAGENT_APPROVAL=allow|deny or "
                "%config NBAgent.approver"))
        return await view.ask(request)

    def __repr__(self) -> str:
        return "<NotebookApprover: NBAgent.approver, else NBAGENT_APPROVAL, else the buttons>"
