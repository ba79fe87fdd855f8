"""The small parts every widget of a run view is made of: shared layouts and styles, and setting traits
in as few widget messages as possible (a view counts the messages it sends, see throttle.py)."""

from __future__ import annotations

import functools
from typing import Any

import ipywidgets as W
from ipywidgets.widgets.widget_string import HTMLStyle, TextStyle

__all__ = ["html_part", "make_button", "set_traits", "shared"]


@functools.cache
def shared() -> Any:
    """Layout and style objects every view shares: a row costs two widget models, not six."""

    class Shared:
        plain = W.Layout()
        hidden = W.Layout(display="none")
        html = HTMLStyle()
        button = W.ButtonStyle()
        text = TextStyle()

    return Shared


def set_traits(widget: W.Widget, **values: Any) -> int:
    """Set traits that differ, in one message; return how many messages that was (0 or 1)."""
    changed = {k: v for k, v in values.items() if getattr(widget, k) != v}
    if not changed:
        return 0
    with widget.hold_sync():
        for key, value in changed.items():
            setattr(widget, key, value)
    return 1


def html_part(value: str = "", *classes: str) -> W.HTML:
    s = shared()
    return W.HTML(value, layout=s.plain, style=s.html, _dom_classes=classes)


def make_button(description: str, icon: str, tooltip: str, cls: str) -> W.Button:
    s = shared()
    return W.Button(description=description, icon=icon, tooltip=tooltip, layout=s.plain, style=s.button,
                    _dom_classes=(cls,))
