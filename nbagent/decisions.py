"""`Decision`: what the permission pipeline decided about a call, as plain data.

It lives below the pipeline (`nbagent.calls.permissions`), so that records, events and views hold decisions
without importing the stage that makes them. It imports nothing from nbagent.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Decision"]


@dataclass(slots=True)
class Decision:
    """A permission decision: what an approver returns, and what is recorded on every call.

    `Decision(allow, remember=False, reason="")` from an approver; `remember=True` makes it a grant for the
    session (scoped to `scope`, a rule pattern, or to what the tool suggests, or to the whole tool).
    """

    allow: bool
    """Whether the call may run."""
    remember: bool = False
    """Approvers: remember this approval as a grant for the rest of the session."""
    reason: str = ""
    """Why (shown to the person; a denial's reason is also told to the model)."""
    source: str = "user"
    """What decided: rule, mode, grant, read_only, user, hook, policy."""
    scope: str | None = None
    """Approvers: the argument pattern a remembered grant covers (None: the tool's suggestion)."""
    rule: str | None = None
    """The rule that decided, when a rule did."""

    def __bool__(self) -> bool:
        return self.allow

    def __str__(self) -> str:
        verdict = "allowed" if self.allow else "denied"
        return f"{verdict} by {self.source}" + (f": {self.reason}" if self.reason else "")
