"""What a live view leaves behind when the kernel goes before its run ends.

A kernel restarted (or killed) while a run waits for approval cannot replace the run's display with its
static rendering: JupyterLab forgets the old kernel's messages as soon as it asks for the restart, and the
widget's model dies with the kernel, so the saved notebook would say "Error displaying widget: model not
found" and keep nothing of the run. So while a run goes on, the kernel sends the frontend part (frontend/,
over the `nbagent.notebook` comm) the run's static rendering as it would read if the kernel stopped now, at
the moments that matter (shown, a call waiting for approval, a call finished, a response, a compaction).
The frontend keeps the latest in the cell's metadata (`nbagent_live`, by widget model id: nothing is
redrawn) and puts it in place of the widget when the kernel restarts or when the widget's model is gone,
so the saved notebook holds the run as far as it went. When the run ends normally the kernel's own update
replaces the display, and the kept copy is dropped.

The same holds for every other live display that ends as a static rendering: a batch's view (`%agent --map`)
and the MCP trust prompt keep theirs the same way (`keep`), each saying what the person can do after the
restart.

Where no frontend part answers (nbclient, papermill, a frontend without the extension) nothing is sent;
those keep the display updates of document.py.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any, Callable

__all__ = ["SNAPSHOT_EVENTS", "STOPPED", "Snapshots"]

log = logging.getLogger("nbagent.jupyter")

STOPPED = "the kernel stopped while the run was going on"
"""What the kept rendering says of a run the kernel's end cut short."""
SNAPSHOT_EVENTS = frozenset({"approval_requested", "approval_decided", "tool_call_finished", "model_response",
                             "compacted"})
"""The events after which the kept rendering is renewed (not text deltas: a response renews it once)."""
SPACING = 0.5
"""Seconds between two renewals of one kernel's kept renderings (bursts of events make one)."""


class Snapshots:
    """Keeps the frontend's copy of each live display's static rendering current (see the module docstring)."""

    def __init__(self, frontend: Any) -> None:
        self.frontend = frontend
        """A callable giving the kernel's `NotebookFrontend` (made on first use)."""
        self._pending: dict[str, Callable[[], dict[str, str] | None]] = {}
        self._task: asyncio.Task | None = None
        self.sent = 0
        """How many renderings were accepted by the frontend (for tests and the curious)."""
        self._absent_until = 0.0
        self._urgent = False
        """A call waits for a person (who may restart the kernel meanwhile): no spacing before the next send."""

    def follow(self, view: Any) -> None:
        """Send a run view's rendering now, again after the events that change it, and drop it when the run ends."""
        model_id = getattr(getattr(view, "widget", None), "model_id", None)
        if not model_id:
            return

        def rendering() -> dict[str, str] | None:
            return None if view.run.done else _stopped_bundle(view)

        def on_event(event: Any) -> None:
            if event.kind in SNAPSHOT_EVENTS:
                self.keep(model_id, rendering, urgent=event.kind == "approval_requested")
            elif event.kind == "run_finished":
                self.drop(model_id)

        view.run.subscribe(on_event)
        self.keep(model_id, rendering)

    def keep(self, model_id: str | None, rendering: Callable[[], dict[str, str] | None], *,
             urgent: bool = False) -> None:
        """Have the page keep `rendering()` (HTML and plain text, read when it is sent; None drops it) for the
        widget `model_id`: what takes the widget's place if the kernel goes first. `urgent`: a person is asked
        something now (who may restart the kernel meanwhile), so it goes without the usual spacing."""
        if not model_id:
            return
        self._pending[model_id] = rendering
        self._urgent = self._urgent or urgent
        if self._task is None or self._task.done():
            try:
                self._task = asyncio.get_running_loop().create_task(self._flush())
            except RuntimeError:  # no loop (terminal IPython): no widgets either
                self._pending.clear()

    def drop(self, model_id: str | None) -> None:
        """The display ended normally (the kernel replaced it): the page drops its copy."""
        self.keep(model_id, _nothing)

    async def _flush(self) -> None:
        from .comm import FrontendError, NoFrontend

        while self._pending:
            if time.monotonic() < self._absent_until:
                self._pending.clear()
                return
            model_id, rendering = self._pending.popitem()
            fields: dict[str, Any] = {"model_id": model_id, "html": None, "text": None}
            try:
                bundle = rendering()
            except Exception:  # pragma: no cover - a display never fails for this
                log.debug("rendering %s for the page failed", model_id, exc_info=True)
                continue
            if bundle is not None:
                fields.update(html=bundle["text/html"], text=bundle["text/plain"])
            try:
                await self.frontend().request("snapshot", timeout=10.0, **fields)
                self.sent += 1
            except NoFrontend:
                # nobody keeps them here (nbclient, say): not asked again for a while; the notebook tools,
                # which ask for themselves, are not told the page is absent
                self._absent_until = time.monotonic() + 30.0
                frontend = self.frontend()
                if not frontend.connected:
                    frontend._absent_until = 0.0
                self._pending.clear()
                return
            except FrontendError as exc:  # the cell is gone, say: nothing to keep
                log.debug("snapshot of %s not kept: %s", model_id, exc)
            except Exception:  # pragma: no cover - a run never fails for this
                log.debug("snapshot of %s failed", model_id, exc_info=True)
            if self._urgent:
                self._urgent = False
                continue
            await asyncio.sleep(SPACING)


def _nothing() -> None:
    return None


def _stopped_bundle(view: Any) -> dict[str, str]:
    from nbagent import render

    waits = view.waits
    # no stylesheet: the frontend part that puts it in place ships it (frontend/style/index.css)
    return {"text/html": render.run_html(view.run, stopped=STOPPED, waits=waits, style=False),
            "text/plain": render.run_text(view.run, stopped=STOPPED, waits=waits)}
