"""The stages of one tool call, in the order it passes them: hooks before it (`hooks`), the permission
pipeline (`permissions`: rules, modes, grants as wide as their labels in `grants`, the approver), execution
in a batch, parallel or sequential (`execution`), with timeouts and interruption of threads (`interrupt`),
then hooks after it. Every call gets exactly one result, whatever happens.

The rule: this wing imports only `tools`, the vocabulary at the top of nbagent and `safety`; it never
reaches into the run or the loop (`agent`), which hand each stage what it uses.
"""

from __future__ import annotations

from .execution import BatchOutcome, CallEnvironment, execute_batch
from .grants import GrantLabel, grant_label
from .hooks import Block, Hooks, StopAfterBatch
from .permissions import MODES, ApprovalRequest, Decision, Grant, Grants, PermissionPolicy, Rule, parse_rule

__all__ = [
    "MODES",
    "ApprovalRequest",
    "BatchOutcome",
    "Block",
    "CallEnvironment",
    "Decision",
    "Grant",
    "GrantLabel",
    "Grants",
    "Hooks",
    "PermissionPolicy",
    "Rule",
    "StopAfterBatch",
    "execute_batch",
    "grant_label",
    "parse_rule",
]
