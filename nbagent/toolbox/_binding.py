"""What a set of toolbox tools works with: a workspace, a code runner, a history source.

Each may be fixed when the tools are made (`toolbox.all(workspace=..., runner=..., history=...)`), or
left open: then a call takes the session's workspace (`ctx.constraints.workspace`: the agent's
`workspace`, by default the working directory when the agent was made), and the runner and history
registered as typed extensions (`Agent(extensions=[runner])`, fetched with `ctx.get(PythonRunner)`),
else a namespace of the tools' own.
"""

from __future__ import annotations

import os
import threading
from typing import Any

from ..tools.paths import match_path
from ._runner import HistorySource, PythonRunner
from ._workspace import Workspace, workspace_of

__all__ = ["Binding", "read_denied_check"]


class Binding:
    """The workspace, runner and history one set of tools uses (each None: decided per call)."""

    def __init__(self, workspace: str | os.PathLike[str] | Workspace | None = None,
                 runner: PythonRunner | None = None, history: HistorySource | None = None) -> None:
        self.workspace = workspace if workspace is None or isinstance(workspace, Workspace) else Workspace(workspace)
        self.runner = runner
        self.history = history
        self._own_runner: PythonRunner | None = None
        self._lock = threading.Lock()

    def workspace_for(self, ctx: Any) -> Workspace:
        return workspace_of(self.workspace, ctx)

    def runner_for(self, ctx: Any) -> PythonRunner:
        if self.runner is not None:
            return self.runner
        if ctx is not None and hasattr(ctx, "get"):
            found = ctx.get(PythonRunner, None)
            if found is not None:
                return found
        with self._lock:
            if self._own_runner is None:
                self._own_runner = PythonRunner()
            return self._own_runner

    def history_for(self, ctx: Any) -> HistorySource:
        if self.history is not None:
            return self.history
        if ctx is not None and hasattr(ctx, "get"):
            found = ctx.get(HistorySource, None)
            if found is not None:
                return found
        return self.runner_for(ctx).history_source()


def read_denied_check(ctx: Any):
    """`f(relative path, real path) -> bool` for the session's deny rules on reading files (`read_file`
    and `grep` rules), or None when there are none. Tools that read many files skip what it denies."""
    rules = getattr(ctx, "rules", None) or ()
    denying = [r for r in rules if r.action == "deny" and (r.names("read_file") or r.names("grep"))]
    if not denying:
        return None

    def check(rel: str, real: str) -> bool:
        for rule in denying:
            pattern = rule.pattern
            if pattern is None:
                return True
            if pattern.startswith("/"):
                if match_path(pattern, real, ignore_case=True, anchored=True):
                    return True
                continue
            if match_path(pattern, rel, ignore_case=True):
                return True
        return False

    return check
