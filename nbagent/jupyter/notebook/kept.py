"""Live displays other than a run's view that end as a static rendering: a batch's view (`%agent --map`) and
the MCP trust prompt. They get what run views get (document.py, snapshots.py):

- shown with a display id, so that when one ends every display of it is replaced by its final rendering
  (what the saved notebook holds) and its widgets are closed;
- while it is live, the page keeps its rendering as it would read if the kernel stopped now, and puts it in
  place of the widget on a restart or in a reopened notebook (no "Error displaying widget: model not found",
  no dead buttons, no "running 7/8" forever);
- when the kernel shuts down first, that stopped rendering replaces it as far as a frontend still listens.

A kept display is any object with `widget` (its root ipywidget), `display_id`, `live_text()` (what a frontend
without widgets shows meanwhile), `stopped_bundle()` and `final_bundle()` (each a mimebundle with text/html
and text/plain), and `key`, a (kind, id) pair by which the
page's comm finds it (a batch by its id, a trust prompt by the digest of the configuration it shows). It tells
its keeper when it changed (`changed`) and when it ended (`end`); it knows nothing of cells or comms.
"""

from __future__ import annotations

import logging
from typing import Any

from IPython.display import display

__all__ = ["KeptDisplays"]

log = logging.getLogger("nbagent.jupyter")


class KeptDisplays:
    """The kernel's live displays that are not run views (see the module's docstring)."""

    def __init__(self, displays: Any, snapshots: Any) -> None:
        self.displays = displays
        """Updates displays so that the executing cell's reader hears it (document.py)."""
        self.snapshots = snapshots
        """What the page keeps of each live display (snapshots.py)."""
        self.live: list[Any] = []
        """The displays shown and not ended yet, oldest first."""

    def show(self, item: Any) -> None:
        """Display `item` live in the executing cell, and have the page keep its stopped rendering."""
        item.keeper = self
        data = item.widget._repr_mimebundle_()
        data["text/plain"] = item.live_text()  # the fallback of a frontend without widgets
        display(data, raw=True, display_id=item.display_id)
        self.live.append(item)
        self.snapshots.keep(_model_id(item), item.stopped_bundle)

    def changed(self, item: Any, *, urgent: bool = False) -> None:
        """`item` looks different now: the page's copy is renewed (`urgent`: a person is asked something)."""
        if item in self.live:
            self.snapshots.keep(_model_id(item), item.stopped_bundle, urgent=urgent)

    def end(self, item: Any) -> None:
        """`item` ended: every display of it holds its final rendering, the page drops its copy, the widgets go."""
        if item not in self.live:
            return
        self.live.remove(item)
        self.displays.update(item.display_id, item.final_bundle())
        self.snapshots.drop(_model_id(item))
        close_all(item.widget)

    def find(self, kind: str, key: str) -> Any:
        """The live display whose `key` is (kind, key), or None."""
        for item in self.live:
            if getattr(item, "key", None) == (kind, key):
                return item
        return None

    def stop_showing(self) -> None:
        """The kernel is going away: each live display becomes its stopped rendering (as far as it reaches)."""
        for item in list(self.live):
            try:
                self.displays.update(item.display_id, item.stopped_bundle())
            except Exception:  # the kernel is going away: do what can be done
                log.debug("the stopped rendering of %r was not sent", item, exc_info=True)


def _model_id(item: Any) -> str | None:
    return getattr(getattr(item, "widget", None), "model_id", None)


def close_all(widget: Any) -> None:
    """Close a widget and every widget inside it: the frontend forgets them."""
    for child in getattr(widget, "children", ()):
        close_all(child)
    widget.close()  # (layouts and styles are not children: the shared ones stay)
