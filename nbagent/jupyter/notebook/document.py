"""The notebook as a document: what a run leaves in the cell that started it.

The live view is a widget, and a saved notebook keeps no widget (JupyterLab does not save their state by
default; nbconvert, GitHub and papermill show none). So `%agent` displays the view with a display id, and
when the run ends every display of that id is replaced by the run's static rendering (HTML and plain
text, `RunView.static_bundle()`); the widgets are then closed. A frontend updates a display by its id
wherever it is; nbclient (and so papermill and `jupyter execute`) only reads the messages of the cell it
is executing, so the update is sent on behalf of the cell executing at that moment (a later cell that
awaits the run, say), and, when no cell was executing, sent again when the next one starts.

Where the notebook is the server's shared document (shared.py), the page that ran `%agent` may have been
closed before the run ended: nobody is left to write the update into the document, which would keep a
widget whose model is gone. So a moment after the update, a display of the run's widget still in the shared
document is replaced there by the same static rendering (`Displays.settle`); where a page did write the
update, there is no widget left to replace and nothing is written twice.

When the kernel shuts down (a restart, `shutdown`, the end of a headless run) while runs are still
going, their views are drawn as stopped ("the kernel stopped while the run was going on") and their
displays replaced by that static rendering, as far as the frontend still listens.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

__all__ = ["SETTLE_AFTER", "Displays"]

log = logging.getLogger("nbagent.jupyter")

SETTLE_AFTER = 3.0
"""Seconds a page gets to write a run's final display into the shared document before the kernel does."""


class Displays:
    """Follows which cell is executing, and updates displays so that the executing cell's reader hears it."""

    def __init__(self, shell: Any) -> None:
        self.shell = shell
        self.executing: Any = None
        """The parent message of the cell being executed (None between cells)."""
        self.cell_id: str | None = None
        """The id of the cell being executed (or last executed), when the frontend sends one."""
        self.execution_count: int | None = None
        self._unheard: dict[str, dict[str, Any]] = {}
        self._settling: set[asyncio.Task] = set()
        events = getattr(shell, "events", None)
        if events is not None:
            events.register("pre_run_cell", self._pre_run_cell)
            events.register("post_run_cell", self._post_run_cell)

    def close(self) -> None:
        events = getattr(self.shell, "events", None)
        if events is None:
            return
        for name, callback in (("pre_run_cell", self._pre_run_cell), ("post_run_cell", self._post_run_cell)):
            try:
                events.unregister(name, callback)
            except ValueError:
                pass

    # -- which cell -----------------------------------------------------------------------------------------
    def _pre_run_cell(self, info: Any) -> None:
        self.cell_id = getattr(info, "cell_id", None)
        self.execution_count = getattr(self.shell, "execution_count", None)
        self.executing = getattr(self.shell, "parent_header", None) or None
        unheard, self._unheard = self._unheard, {}
        for display_id, bundle in unheard.items():
            self._send(display_id, bundle)

    def _post_run_cell(self, result: Any) -> None:
        self.executing = None

    # -- updates --------------------------------------------------------------------------------------------
    def update(self, display_id: str, bundle: dict[str, Any]) -> None:
        """Replace every display of `display_id` with `bundle` (a raw mimebundle)."""
        publisher = getattr(self.shell, "display_pub", None)
        token = None
        if self.executing is not None and hasattr(publisher, "set_thread_parent"):
            token = publisher.set_thread_parent(self.executing)
        try:
            self._send(display_id, bundle)
        finally:
            if token is not None:
                publisher.reset_thread_parent(token)
        if self.executing is None:
            self._unheard[display_id] = bundle

    def settle(self, model_id: str | None, bundle: dict[str, Any]) -> None:
        """In a moment, put `bundle` in place of every display of the widget `model_id` still in the server's
        shared document, where there is one (see the module docstring)."""
        from .shared import shared_document_for

        shared = shared_document_for(self.shell)
        if not model_id or shared is None:
            return

        async def later() -> None:
            await asyncio.sleep(SETTLE_AFTER)
            try:
                if await shared.available():
                    await shared.request("settle", model_id=model_id, bundle=bundle)
            except Exception:  # the document went away: the page's copy (snapshots.py) is what remains
                log.debug("settling the display of %s failed", model_id, exc_info=True)

        try:
            task = asyncio.get_running_loop().create_task(later())
        except RuntimeError:  # no loop: no kernel, no shared document
            return
        self._settling.add(task)
        task.add_done_callback(self._settling.discard)

    def _send(self, display_id: str, bundle: dict[str, Any]) -> None:
        from IPython.display import update_display

        try:
            update_display(bundle, raw=True, display_id=display_id)
        except Exception:  # the kernel is going away: nothing more to tell
            log.debug("updating display %s failed", display_id, exc_info=True)
