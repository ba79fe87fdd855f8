"""What a tool returned, as the view shows it: a disclosure with a one-line summary, then the object
rendered (a DataFrame's table, a matplotlib figure) or the text and images the model received.

Reads what someone else wrote: a result's text and images (a tool's, an MCP server's), its details
object's `_repr_html_()` (a library's repr over data from a file, a web page or a server) and its
`link_html()`. Text goes through `_esc` / `_esc_output`; the object's HTML and the link through
`sanitize.sanitize_html` (the object's in a `.nba-safe` wrapper of its own), which never keeps the page's
own classes (among them the marker of the model's code blocks, `nba-code-block`); an image is shown only
when it is an inline raster image.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..messages import ImageBlock, TextBlock
from ..safety import sanitize
from .base import MAX_RICH, _clip, _esc, _esc_output, _style, describe_object, one_line

if TYPE_CHECKING:  # pragma: no cover
    from ..messages import ToolResult

_FIGURES: Any = None


def _figure_html(obj: Any) -> str | None:
    """A matplotlib figure as a PNG (once per figure); None for anything else. matplotlib is not imported."""
    global _FIGURES
    if not (type(obj).__module__.startswith("matplotlib.") and hasattr(obj, "savefig") and hasattr(obj, "axes")):
        return None
    import weakref

    if _FIGURES is None:
        _FIGURES = weakref.WeakKeyDictionary()
    try:
        cached = _FIGURES.get(obj)
    except TypeError:
        cached = None
    if cached is not None:
        return cached
    import base64
    import io

    try:
        buf = io.BytesIO()
        obj.savefig(buf, format="png", bbox_inches="tight", dpi=80)
    except Exception:
        return None
    out = f'<img class="nba-figure" src="data:image/png;base64,{base64.b64encode(buf.getvalue()).decode()}" alt="figure"/>'
    try:
        _FIGURES[obj] = out
    except TypeError:
        pass
    return out


def _rich_html(obj: Any) -> str | None:
    figure = _figure_html(obj)
    if figure is not None:
        return figure
    method = getattr(type(obj), "_repr_html_", None)
    if method is None or obj is None:
        return None
    try:
        out = method(obj)
    except Exception:
        return None
    if isinstance(out, tuple):
        out = out[0]
    if not isinstance(out, str) or len(out) > MAX_RICH:
        return None
    return sanitize.sanitize_html(out)


def _blocks_html(blocks: list) -> str:
    parts = []
    for b in blocks:
        if isinstance(b, TextBlock):
            parts.append(f'<div class="nba-pre">{_esc_output(_clip(b.text))}</div>')
        elif isinstance(b, ImageBlock):
            url = f"data:{b.mime_type};base64,{b.base64}"
            if sanitize.image_data_url(url):  # an inline raster image, nothing else (no SVG, no quotes)
                parts.append(f'<img src="{url}" alt="image result"/>')
            else:
                parts.append(f'<div class="nba-pre">{_esc(f"[an image of type {b.mime_type!r} is not shown]")}</div>')
    return "".join(parts)


def diff_html(diff: str) -> str:
    """A unified diff (or `+`/`-` lines under a `#` heading) as a block with added and removed lines marked."""
    rows = []
    for line in diff.splitlines():
        cls = ("nba-diff-add" if line.startswith("+") and not line.startswith("+++") else
               "nba-diff-del" if line.startswith("-") and not line.startswith("---") else
               "nba-diff-at" if line.startswith(("@@", "#")) else "")
        rows.append(f'<span class="{cls}">{_esc(line)}</span>' if cls else _esc(line))
    return f'<div class="nba-pre nba-diff">{chr(10).join(rows)}</div>'


def _link_html(details: Any) -> str:
    """The link a result's details offer to where they live (a notebook cell), or ''."""
    method = getattr(details, "link_html", None)
    if not callable(method):
        return ""
    try:
        return sanitize.sanitize_html(str(method()), wrap=False)
    except Exception:
        return ""


def result_html(result: ToolResult, *, index: int | None = None, open: bool = False) -> str:
    """A result as a disclosure: a one-line summary, then the object rendered (or the text the model saw)."""
    details = result.details
    what = describe_object(details) if details is not None else ""
    text = result.text
    rich = _rich_html(details)
    if rich is not None and rich.startswith('<img class="nba-figure"'):
        open = True  # a figure is there to be seen
    preview = one_line(text, 90) if text and rich is None and not result.images else ""
    if result.images:
        preview = f"{len(result.images)} image{'s' if len(result.images) > 1 else ''}"
    where = ""
    if index is not None and details is not None:
        where = f' · <span class="nba-code">calls[{index}].details</span>'
    summary = "Result" + (f" · {_esc(what)}" if what else "") + where
    link = _link_html(details)
    if link:
        summary += f" · {link}"
    if preview:
        summary += f' · <span class="nba-result-preview">{_esc(preview)}</span>'
    if rich is not None:
        body = f'<div class="nba-rich">{rich}</div>'
        if text:
            body += (f'<details class="nba-wire"><summary>what the model received ({len(text):,} characters)'
                     f'</summary>{_blocks_html(result.content)}</details>')
        else:
            body += _blocks_html(result.images)
    else:
        body = _blocks_html(result.content)
    return (f'<details class="nba-result"{" open" if open else ""}><summary>{summary}</summary>'
            f'<div class="nba-result-body">{body}</div></details>')


def tool_result_html(result: ToolResult) -> str:
    """`ToolResult._repr_html_`: the result, open."""
    flags = " · error" if result.is_error else ""
    flags += " · terminates the run" if result.terminate else ""
    inner = result_html(result, open=True)
    if flags:
        inner = inner.replace("<summary>Result", f"<summary>Result{_esc(flags)}", 1)
    return f'{_style()}<div class="nba nba-bare">{inner}</div>'
