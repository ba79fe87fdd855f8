"""Module paths that moved when the modules became wings: each old path still imports, for one release, as
the module at its new place (the same module object, so patching either patches both), with a
DeprecationWarning that names the new place.

One mapping, read by one import hook (`MovedModules`, installed by `nbagent/__init__.py`), instead of a
file per old module. Old paths that are now a wing's package (`nbagent.tools`, `nbagent.render`,
`nbagent.batch`, `nbagent.jupyter.session`, `nbagent.jupyter.panel`) need no entry: each wing's face
re-exports the names its old module had.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
import warnings
from types import ModuleType

MOVED: dict[str, str] = {
    "nbagent.secrets": "nbagent.safety.secrets",
    "nbagent.sanitize": "nbagent.safety.sanitize",
    "nbagent.sandbox": "nbagent.safety.sandbox",
    "nbagent.sandbox_linux": "nbagent.safety.sandbox_linux",
    "nbagent.protected": "nbagent.safety.protected",
    "nbagent.trust": "nbagent.safety.trust",
    "nbagent.signing": "nbagent.safety.signing",
    "nbagent.pricing": "nbagent.budget.pricing",
    "nbagent.window": "nbagent.budget.window",
    "nbagent.compaction": "nbagent.budget.compaction",
    "nbagent.ratelimit": "nbagent.budget.ratelimit",
    "nbagent.docstrings": "nbagent.tools.docstrings",
    "nbagent.schemas": "nbagent.tools.schemas",
    "nbagent.arguments": "nbagent.tools.arguments",
    "nbagent.results": "nbagent.tools.results",
    "nbagent.images": "nbagent.tools.images",
    "nbagent.paths": "nbagent.tools.paths",
    "nbagent.plan": "nbagent.tools.plan",
    "nbagent.structured": "nbagent.tools.structured",
    "nbagent.partial_json": "nbagent.tools.partial_json",
    "nbagent.hooks": "nbagent.calls.hooks",
    "nbagent.permissions": "nbagent.calls.permissions",
    "nbagent.grants": "nbagent.calls.grants",
    "nbagent.interrupt": "nbagent.calls.interrupt",
    "nbagent.execution": "nbagent.calls.execution",
    "nbagent.recording": "nbagent.sessions.recording",
    "nbagent.render_base": "nbagent.render.base",
    "nbagent.render_markdown": "nbagent.render.markdown",
    "nbagent.render_results": "nbagent.render.results",
    "nbagent.render_usage": "nbagent.render.usage",
    "nbagent.render_live": "nbagent.render.live",
    "nbagent.render_batch": "nbagent.render.batch",
    "nbagent.batch_items": "nbagent.batch.items",
    "nbagent.batch_dask": "nbagent.batch.dask",
    "nbagent.batch_worker": "nbagent.batch.dask_worker",
    "nbagent.batchstore": "nbagent.batch.store",
    "nbagent.loop": "nbagent.agent.loop",
    "nbagent.run": "nbagent.agent.run",
    "nbagent.jupyter.widget_kit": "nbagent.jupyter.live.widget_kit",
    "nbagent.jupyter.approval": "nbagent.jupyter.live.approval",
    "nbagent.jupyter.approval_panel": "nbagent.jupyter.live.approval_panel",
    "nbagent.jupyter.call_row": "nbagent.jupyter.live.call_row",
    "nbagent.jupyter.steering": "nbagent.jupyter.live.steering",
    "nbagent.jupyter.widgets": "nbagent.jupyter.live.widgets",
    "nbagent.jupyter.batch_view": "nbagent.jupyter.live.batch_view",
    "nbagent.jupyter.throttle": "nbagent.jupyter.live.throttle",
    "nbagent.jupyter.text": "nbagent.jupyter.live.text",
    "nbagent.jupyter.capture": "nbagent.jupyter.live.capture",
    "nbagent.jupyter.notebook_comm": "nbagent.jupyter.notebook.comm",
    "nbagent.jupyter.notebook_cells": "nbagent.jupyter.notebook.cells",
    "nbagent.jupyter.notebook_tools": "nbagent.jupyter.notebook.tools",
    "nbagent.jupyter.kernel_tools": "nbagent.jupyter.notebook.kernel_tools",
    "nbagent.jupyter.document": "nbagent.jupyter.notebook.document",
    "nbagent.jupyter.snapshots": "nbagent.jupyter.notebook.snapshots",
    "nbagent.jupyter.notebook_runs": "nbagent.jupyter.notebook.runs",
    "nbagent.jupyter.resolve": "nbagent.jupyter.session.resolve",
    "nbagent.jupyter.conversation": "nbagent.jupyter.session.conversation",
    "nbagent.jupyter.instructions": "nbagent.jupyter.session.instructions",
    "nbagent.jupyter.consent": "nbagent.jupyter.session.consent",
    "nbagent.jupyter.mcp": "nbagent.jupyter.session.mcp",
    "nbagent.jupyter.panel_model": "nbagent.jupyter.panel.model",
    "nbagent.jupyter.panel_prompts": "nbagent.jupyter.panel.prompts",
}
"""Old module path -> new module path."""


class MovedModules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds an old path of `MOVED` and gives the module at its new place."""

    def find_spec(self, fullname: str, path: object = None, target: object = None) -> importlib.machinery.ModuleSpec | None:
        if fullname not in MOVED:
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        new = MOVED[spec.name]
        warnings.warn(f"{spec.name} moved to {new}: import it from there (the old path goes in a later release)",
                      DeprecationWarning, stacklevel=2)  # warnings skips importlib's frames: the importer
        # the module itself, with its own __name__ and __spec__ (importlib keeps attributes already set)
        return importlib.import_module(new)

    def exec_module(self, module: ModuleType) -> None:
        """Nothing to run: the module at the new place ran when it was imported."""


def install() -> None:
    """Put the hook on `sys.meta_path` (once)."""
    if not any(isinstance(finder, MovedModules) for finder in sys.meta_path):
        sys.meta_path.append(MovedModules())
