"""The permission pipeline: rules, remembered grants, read-only auto-allow, modes, and the approver.

A call that passed its `before_tool_call` hooks goes through these gates, in order; the first that
decides, decides:

1. `deny` rules                      -> denied (nothing overrides a deny: no mode, grant or approval)
2. mode `plan`                       -> anything but a read-only call is not executed
3. `allow` rules                     -> allowed
4. `ask` rules                       -> ask (skips gates 5-7)
5. grants remembered this session    -> allowed
6. read-only tools and calls         -> allowed
7. the mode: `bypassPermissions` allows, `acceptEdits` allows file edits, `dontAsk` denies,
   `default` (and `acceptEdits` for anything else) asks
8. ask: the approver (buttons in a notebook, a callable in plain Python, a policy when headless)
   decides; `dontAsk` denies instead; with no approver, `NBAGENT_APPROVAL=allow|deny` decides, else deny.

Every decision is a `Decision` recorded on its call with what decided it (`source`) and why (`reason`).
An approval holds for exactly the arguments that were shown: if they change afterwards, it is void.
"""

from __future__ import annotations

import fnmatch
import inspect
import json
import os
import re
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Iterator

if TYPE_CHECKING:  # pragma: no cover
    from .records import CallRecord
    from .tools import Arguments, Tool

__all__ = [
    "ApprovalRequest",
    "Decision",
    "Grant",
    "Grants",
    "MODES",
    "PermissionPolicy",
    "Rule",
    "parse_rule",
]

MODES = ("default", "acceptEdits", "plan", "dontAsk", "bypassPermissions")
_RULE_RE = re.compile(r"^\s*(allow|deny|ask)\s*:\s*([^\s(]+)\s*(?:\((.*)\))?\s*$", re.S)


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


@dataclass(frozen=True, slots=True)
class Rule:
    """`allow: NAME`, `deny: NAME(pattern)`, `ask: NAME`. NAME may be a glob over tool names."""

    action: str
    tool: str
    pattern: str | None = None

    def __str__(self) -> str:
        return f"{self.action}: {self.tool}" + (f"({self.pattern})" if self.pattern is not None else "")

    def matches(self, tool: Tool, args: Arguments) -> bool:
        if self.tool != tool.name and not (_is_glob(self.tool) and fnmatch.fnmatchcase(tool.name, self.tool)):
            return False
        if self.pattern is None:
            return True
        try:
            return tool.matches_pattern(self.pattern, args)
        except Exception:
            # A matcher that fails: a deny rule must still deny (fail closed); allow/ask do not match.
            return self.action == "deny"


def _is_glob(text: str) -> bool:
    return any(c in text for c in "*?[")


def parse_rule(rule: str | Rule) -> Rule:
    """Parse `"allow: NAME"`, `"deny: NAME(pattern)"` or `"ask: NAME"`; raise `ValueError` if malformed."""
    if isinstance(rule, Rule):
        return rule
    if not isinstance(rule, str):
        raise ValueError(f"a permission rule is a string like 'allow: NAME', not {type(rule).__name__}")
    m = _RULE_RE.match(rule)
    if not m:
        raise ValueError(
            f"permission rule {rule!r} is not of the form 'allow: NAME', 'deny: NAME(pattern)' or 'ask: NAME'"
        )
    action, name, pattern = m.group(1), m.group(2), m.group(3)
    if pattern is not None:
        pattern = pattern.strip()
        if not pattern:
            raise ValueError(f"permission rule {rule!r} has an empty pattern: leave out the parentheses")
    return Rule(action, name, pattern)


@dataclass(frozen=True, slots=True)
class Grant:
    """An approval remembered for this session: a tool, and optionally the argument pattern it covers."""

    tool: str
    pattern: str | None = None
    created: float = field(default_factory=time.time, compare=False)

    def __str__(self) -> str:
        return self.tool + (f"({self.pattern})" if self.pattern is not None else "")

    def matches(self, tool: Tool, args: Arguments) -> bool:
        if self.tool != tool.name:
            return False
        if self.pattern is None:
            return True
        try:
            return tool.matches_pattern(self.pattern, args)
        except Exception:
            return False


class Grants:
    """The grants remembered this session: listed, added and revoked (`agent.grants`)."""

    def __init__(self) -> None:
        self._items: list[Grant] = []
        self._lock = threading.Lock()

    def add(self, tool: str, pattern: str | None = None) -> Grant:
        grant = Grant(tool, pattern)
        with self._lock:
            if grant not in self._items:
                self._items.append(grant)
        return grant

    def revoke(self, grant: Grant | str) -> int:
        """Revoke one grant, or every grant of a tool given by name (or `"tool(pattern)"`); return how many."""
        with self._lock:
            before = len(self._items)
            if isinstance(grant, Grant):
                self._items = [g for g in self._items if g != grant]
            else:
                self._items = [g for g in self._items if g.tool != grant and str(g) != grant]
            return before - len(self._items)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()

    def find(self, tool: Tool, args: Arguments) -> Grant | None:
        for grant in self._items:
            if grant.matches(tool, args):
                return grant
        return None

    def __iter__(self) -> Iterator[Grant]:
        return iter(list(self._items))

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, item: object) -> bool:
        return item in self._items or any(str(g) == item for g in self._items)

    def __repr__(self) -> str:
        return f"Grants([{', '.join(str(g) for g in self._items)}])"


@dataclass(slots=True)
class ApprovalRequest:
    """What an approver is asked: this call, with exactly these arguments, for this reason."""

    call: CallRecord
    """The call record (its `arguments` are the validated arguments that would run)."""
    tool: Tool
    arguments: dict[str, Any]
    """The arguments shown for approval."""
    reason: str
    """Why the pipeline asks (e.g. "default mode asks before tools that are not read-only")."""
    suggested_scope: str | None = None
    """The argument pattern an "always allow" would cover (None: the whole tool)."""
    fingerprint: str = ""

    @property
    def name(self) -> str:
        return self.tool.name


def fingerprint(args: dict[str, Any]) -> str:
    """A canonical text of arguments, to detect any change after approval."""
    return json.dumps(args, sort_keys=True, default=repr, ensure_ascii=False)


Approver = Callable[[ApprovalRequest], Any]


class PermissionPolicy:
    """Rules, mode, grants and the approver of one agent."""

    def __init__(
        self,
        *,
        rules: list[str | Rule] | None = None,
        mode: str = "default",
        approver: Approver | str | None = None,
        grants: Grants | None = None,
    ) -> None:
        if mode not in MODES:
            raise ValueError(f"unknown permission mode {mode!r}; choose one of: {', '.join(MODES)}")
        if isinstance(approver, str) and approver not in ("allow", "deny"):
            raise ValueError(f"approver must be a callable, 'allow' or 'deny', not {approver!r}")
        self.rules = [parse_rule(r) for r in (rules or [])]
        self.mode = mode
        self.approver = approver
        self.grants = grants if grants is not None else Grants()

    def _first_rule(self, action: str, tool: Tool, args: Arguments) -> Rule | None:
        for rule in self.rules:
            if rule.action == action and rule.matches(tool, args):
                return rule
        return None

    def evaluate(self, tool: Tool, args: Arguments) -> tuple[Decision | None, str]:
        """Gates 1-7. Return (decision, "") when they decide, else (None, why the approver is asked)."""
        rule = self._first_rule("deny", tool, args)
        if rule is not None:
            return Decision(False, source="rule", reason=f"denied by rule '{rule}'", rule=str(rule)), ""
        read_only = tool.is_read_only_call(args)
        if self.mode == "plan" and not read_only:
            return Decision(False, source="mode", reason="plan mode: only read-only tools run; nothing was executed"), ""
        rule = self._first_rule("allow", tool, args)
        if rule is not None:
            return Decision(True, source="rule", reason=f"allowed by rule '{rule}'", rule=str(rule)), ""
        rule = self._first_rule("ask", tool, args)
        if rule is not None:
            return None, f"rule '{rule}' asks for approval"
        grant = self.grants.find(tool, args)
        if grant is not None:
            return Decision(True, source="grant", reason=f"remembered approval for {grant}"), ""
        if read_only:
            return Decision(True, source="read_only", reason="read-only calls are allowed"), ""
        if self.mode == "bypassPermissions":
            return Decision(True, source="mode", reason="bypassPermissions mode allows every call"), ""
        if self.mode == "acceptEdits" and tool.edits_files:
            return Decision(True, source="mode", reason="acceptEdits mode allows file edits in the workspace"), ""
        what = "destructive tools" if tool.destructive else "tools that are not read-only"
        return None, f"{self.mode} mode asks before {what}"

    async def ask(self, request: ApprovalRequest) -> Decision:
        """Gate 8: ask the approver (or the policy) and turn the answer into a `Decision`."""
        if self.mode == "dontAsk":
            return Decision(False, source="mode", reason=f"dontAsk mode denies what would ask ({request.reason})")
        approver = self.approver
        if approver is None:
            env = os.environ.get("NBAGENT_APPROVAL", "").strip().lower()
            if env in ("allow", "deny"):
                approver = env
        if approver is None:
            return Decision(
                False,
                source="policy",
                reason=(
                    f"approval needed ({request.reason}) but no approver is configured; pass approver=..., "
                    "add an allow rule, choose a mode, or set NBAGENT_APPROVAL=allow|deny"
                ),
            )
        if isinstance(approver, str):
            return Decision(approver == "allow", source="policy", reason=f"approval policy '{approver}'")
        try:
            answer = approver(request)
            if inspect.isawaitable(answer):
                answer = await answer
        except Exception as exc:
            request.call.errors.append(exc)
            return Decision(False, source="user", reason=f"the approver failed ({type(exc).__name__}: {exc}); counted as a denial")
        if isinstance(answer, Decision):
            if not answer.source or answer.source == "user":
                answer.source = "user"
            if not answer.reason:
                answer.reason = "approved" if answer.allow else "denied by the user"
            return answer
        if isinstance(answer, bool):
            return Decision(answer, source="user", reason="approved" if answer else "denied by the user")
        return Decision(False, source="user", reason=f"the approver returned {answer!r}, not True/False/Decision; counted as a denial")

    def remember(self, tool: Tool, decision: Decision, request: ApprovalRequest) -> None:
        scope = decision.scope if decision.scope is not None else request.suggested_scope
        if scope in ("*", ""):
            scope = None
        self.grants.add(tool.name, scope)
