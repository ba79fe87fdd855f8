"""The permission pipeline: rules, remembered grants, read-only auto-allow, modes, and the approver.

A call that passed its `before_tool_call` hooks goes through these gates, in order; the first that
decides, decides:

1. `deny` rules                      -> denied (nothing overrides a deny: no mode, grant or approval)
2. mode `plan`                       -> anything but a read-only call is not executed
3. `allow` rules                     -> allowed
   a write to configuration that can run programs (`.mcp.json`, `.nbagent/`, `.git`, editor and
   Jupyter settings: `nbagent.safety.protected`)  -> ask, whatever the mode or grant (skips gates 4-7)
4. `ask` rules                       -> ask (skips gates 5-7)
5. grants remembered this session    -> allowed
6. read-only tools and calls         -> allowed
7. the mode: `bypassPermissions` allows, `acceptEdits` allows file edits, `dontAsk` denies,
   `default` (and `acceptEdits` for anything else) asks
8. ask: the approver (buttons in a notebook, a callable in plain Python, a policy when headless)
   decides; `dontAsk` denies instead; with no approver, `NBAGENT_APPROVAL=allow|deny` decides, else deny.

Every decision is a `Decision` recorded on its call with what decided it (`source`) and why (`reason`).
`PermissionPolicy.request_approval` keeps gate 8's bookkeeping: the arguments are frozen before anyone
sees the request (what runs is that copy), an approval is void if what was shown changed before the
decision, and an approval with `remember=True` becomes a grant.

How a rule's argument pattern (`NAME(pattern)`) is matched is the tool's own business (`Tool.rule_matcher`);
matchers see the rule's action, so a deny rule can match broadly (any part of a compound shell command)
while an allow rule matches strictly. Without one, the pattern is an `fnmatch` glob over the tool's
permission subject (its first required string parameter). Tools whose subject is a file path use
`path_rule_matcher` (in `nbagent.tools.paths`): patterns relative to the workspace, `*` within a path segment, `**` across segments,
a pattern without `/` matching a file or directory name at any depth (gitignore style), and a pattern
matching a directory covering everything inside it.
"""

from __future__ import annotations

import copy
import fnmatch
import inspect
import json
import os
import re
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Iterator

from ..decisions import Decision
from ..events import ApprovalDecided, ApprovalRequested
from ..records import ApprovalRequest, CallRecord
from ..tools.paths import (  # re-exported: rule patterns on paths
    glob_regex,
    match_path,
    path_rule_matcher,
    relative_inside,
)
from .grants import derived_grant

if TYPE_CHECKING:  # pragma: no cover
    from ..tools.definition import Arguments, Tool

__all__ = [
    "ApprovalRequest",
    "Decision",
    "Grant",
    "Grants",
    "MODES",
    "PermissionPolicy",
    "Rule",
    "env_approval",
    "glob_regex",
    "match_path",
    "parse_rule",
    "path_rule_matcher",
    "relative_inside",
]

MODES = ("default", "acceptEdits", "plan", "dontAsk", "bypassPermissions")
_RULE_RE = re.compile(r"^\s*(allow|deny|ask)\s*:\s*([^\s(]+)\s*(?:\((.*)\))?\s*$", re.S)


@dataclass(frozen=True, slots=True)
class Rule:
    """`allow: NAME`, `deny: NAME(pattern)`, `ask: NAME`. NAME may be a glob over tool names."""

    action: str
    tool: str
    pattern: str | None = None

    def __str__(self) -> str:
        return f"{self.action}: {self.tool}" + (f"({self.pattern})" if self.pattern is not None else "")

    def matches(self, tool: Tool, args: Arguments, ctx: Any = None) -> bool:
        if not self.names(tool):
            return False
        if self.pattern is None:
            return True
        try:
            return tool.matches_pattern(self.pattern, args, ctx, action=self.action)
        except Exception:
            # A matcher that fails: a deny rule must still deny (fail closed); allow/ask do not match.
            return self.action == "deny"


    def names(self, tool: Tool | str) -> bool:
        """Whether the rule's NAME (a tool name, or a glob over names) covers this tool."""
        name = tool if isinstance(tool, str) else tool.name
        return self.tool == name or (_is_glob(self.tool) and fnmatch.fnmatchcase(name, self.tool))


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

    def matches(self, tool: Tool, args: Arguments, ctx: Any = None) -> bool:
        if self.tool != tool.name:
            return False
        if self.pattern is None:
            return True
        try:
            return tool.matches_pattern(self.pattern, args, ctx, action="grant")
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

    def find(self, tool: Tool, args: Arguments, ctx: Any = None) -> Grant | None:
        for grant in list(self._items):
            if grant.matches(tool, args, ctx):
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


def _what_it_does(tool: Tool, args: Arguments, ctx: Any = None) -> str:
    """The call in the words its row's badge uses ("runs code": running code), else by what it changes."""
    badge = getattr(tool, "badge", None)
    if badge == "runs code":
        return "running code"
    try:
        edits = tool.is_edit_call(args, ctx)
    except Exception:
        edits = False
    if edits:
        return "changing files"
    if badge:
        return f"calls that are {badge}"
    return "destructive tools" if tool.destructive else "tools that are not read-only"


def env_approval() -> str | None:
    """`"allow"` or `"deny"` when the `NBAGENT_APPROVAL` environment variable says so, else None."""
    value = os.environ.get("NBAGENT_APPROVAL", "").strip().lower()
    return value if value in ("allow", "deny") else None


def frozen_copy(args: Any) -> Any:
    """A deep copy of arguments (the originals when they cannot be copied)."""
    try:
        return type(args)(copy.deepcopy(dict(args)))
    except Exception:
        return args


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

    def _first_rule(self, action: str, tool: Tool, args: Arguments, ctx: Any = None) -> Rule | None:
        for rule in self.rules:
            if rule.action == action and rule.matches(tool, args, ctx):
                return rule
        return None

    def evaluate(self, tool: Tool, args: Arguments, ctx: Any = None) -> tuple[Decision | None, str]:
        """Gates 1-7. Return (decision, "") when they decide, else (None, why the approver is asked).

        `ctx` (the call's `ToolContext`) is handed to the tool's permission hooks: the workspace a path
        is relative to (`ctx.constraints.workspace`).
        """
        rule = self._first_rule("deny", tool, args, ctx)
        if rule is not None:
            return Decision(False, source="rule", reason=f"denied by rule '{rule}'", rule=str(rule)), ""
        read_only = tool.is_read_only_call(args, ctx)
        if self.mode == "plan" and not read_only:
            return Decision(False, source="mode", reason="plan mode: only read-only tools run; nothing was executed"), ""
        rule = self._first_rule("allow", tool, args, ctx)
        if rule is not None:
            return Decision(True, source="rule", reason=f"allowed by rule '{rule}'", rule=str(rule)), ""
        protected = tool.protected_write_reason(args, ctx)
        if protected:
            return None, f"{protected}; this always asks (no mode or grant covers it)"
        rule = self._first_rule("ask", tool, args, ctx)
        if rule is not None:
            return None, f"rule '{rule}' asks for approval"
        grant = self.grants.find(tool, args, ctx)
        if grant is not None:
            return Decision(True, source="grant", reason=f"remembered approval for {grant}"), ""
        if read_only:
            return Decision(True, source="read_only", reason="read-only calls are allowed"), ""
        if self.mode == "bypassPermissions":
            return Decision(True, source="mode", reason="bypassPermissions mode allows every call"), ""
        if self.mode == "acceptEdits" and tool.is_edit_call(args, ctx):
            return Decision(True, source="mode", reason="acceptEdits mode allows file edits in the workspace"), ""
        return None, f"{self.mode} mode asks before {_what_it_does(tool, args, ctx)}"

    async def ask(self, request: ApprovalRequest) -> Decision:
        """Gate 8: ask the approver (or the policy) and turn the answer into a `Decision`."""
        if self.mode == "dontAsk":
            return Decision(False, source="mode", reason=f"dontAsk mode denies what would ask ({request.reason})")
        approver = self.approver
        if approver is None:
            approver = env_approval()
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

    async def request_approval(self, rec: CallRecord, tool: Tool, args: Arguments, why: str, ctx: Any,
                               emit: Callable[[Any], None]) -> tuple[Decision, Arguments]:
        """Ask for consent to run the call with exactly `args`; return the decision and what may run.

        What may run is a private copy frozen before anyone (listener, approver, view) sees the request,
        which shows a copy of its own: nothing done to the arguments anyone is shown changes what runs.
        An approval is void when the call's arguments, or the shown ones, changed before the decision; an
        approval with `remember=True` becomes a grant. `emit` gets `ApprovalRequested` and `ApprovalDecided`.
        """
        frozen = frozen_copy(args)
        shown = fingerprint(frozen)
        request = ApprovalRequest(rec, tool, frozen_copy(frozen), why, tool.suggested_scope(frozen, ctx), shown)
        rec.status = "waiting_for_approval"
        emit(ApprovalRequested(rec, request))
        try:
            decision = await self.ask(request)
        finally:
            rec.status = "pending"
        if decision.allow and (fingerprint(args) != shown or fingerprint(request.arguments) != shown):
            decision = Decision(False, source="user",
                                reason="the arguments changed after they were approved, so the approval is void")
        if decision.allow and decision.remember:
            self.remember(tool, decision, request)
        emit(ApprovalDecided(rec, decision))
        return decision, frozen

    def remember(self, tool: Tool, decision: Decision, request: ApprovalRequest) -> None:
        """Make an approval with `remember=True` a grant, exactly as wide as its label (`nbagent.calls.grants`);
        a call that cannot be always allowed (`run_cell`) is allowed once, and the decision says so."""
        grants, pattern = derived_grant(tool, request.suggested_scope, decision.scope)
        if not grants:
            decision.remember = False
            decision.reason = (decision.reason + "; " if decision.reason else "") + (
                f"allowed once: {tool.name} is asked each time (no grant)")
            return
        self.grants.add(tool.name, pattern)
