"""How data shows itself (`str(record)`, `_repr_html_`) without importing the code that renders it.

Data classes delegate to the functions registered here by name; `nbagent.render` registers its own when
it is imported (the package imports it), so the arrow goes from the renderer to the data, never back.
Here too the two cuts every layer shows text with: `shortened` (cut at a limit, with an ellipsis) and
`short_line` (on one line, then shortened).
"""

from __future__ import annotations

from typing import Any, Callable

__all__ = ["register", "render", "short_line", "shortened"]

_RENDERERS: dict[str, Callable[[Any], str]] = {}


def register(**renderers: Callable[[Any], str]) -> None:
    """Register renderers by name: `register(call_text=fn, call_record_html=fn, tool_result_html=fn)`."""
    _RENDERERS.update(renderers)


def render(name: str, obj: Any) -> str:
    """`obj` rendered by the renderer registered as `name` (its repr when there is none)."""
    fn = _RENDERERS.get(name)
    return fn(obj) if fn is not None else repr(obj)


def shortened(text: str, limit: int) -> str:
    """`text` as it is when it fits in `limit` characters, else its first `limit - 1` and an ellipsis."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def short_line(text: Any, limit: int = 60) -> str:
    """`str(text)` on one line (every run of whitespace, newlines included, one space), `shortened` at `limit`."""
    return shortened(" ".join(str(text).split()), limit)
