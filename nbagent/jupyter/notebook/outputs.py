"""What the model reads of a cell's outputs: each output summarised in a line or a few (a stream's text, an
error's last traceback lines, a table's shape, an image or HTML named rather than shown), cut to `MAX_OUTPUT`.

Outputs come from the notebook, which the person, a collaborator or anything that can write the file could
have written: they are read as text, never run or rendered here.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["MAX_OUTPUT", "cut_text", "summarize_output", "summarize_outputs"]

MAX_OUTPUT = 2500
"""Characters of one output shown to the model (a cell's outputs together: twice that)."""
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_FRAME_SHAPE = re.compile(r"([\d,]+) rows\s*(?:×|x|&times;)\s*([\d,]+) columns")


def _text(value: Any) -> str:
    if isinstance(value, list):
        return "".join(str(v) for v in value)
    return "" if value is None else str(value)


def cut_text(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    head = text[: limit * 2 // 3]
    tail = text[-(limit // 3):]
    return f"{head}\n… ({len(text) - len(head) - len(tail):,} characters left out) …\n{tail}"


def _shape_of(value: Any) -> str | None:
    shape = getattr(value, "shape", None)
    if isinstance(shape, tuple) and getattr(value, "columns", None) is not None and len(shape) == 2:
        return f"a {type(value).__name__} {shape[0]} x {shape[1]}"
    if isinstance(shape, tuple) and type(value).__name__ in ("Series", "ndarray"):
        return f"a {type(value).__name__} of shape {' x '.join(str(n) for n in shape)}"
    return None


def summarize_output(output: dict[str, Any], value: Any = None) -> str:
    """One output of a cell, bounded: text, an error with its traceback's last lines, "an image",
    "a DataFrame 1000 x 20". `value` is the live object behind an execute_result, when known."""
    kind = output.get("output_type")
    if kind == "stream":
        text = _text(output.get("text")).rstrip("\n")
        return f"[{output.get('name', 'stdout')}] {cut_text(text, MAX_OUTPUT)}" if text else ""
    if kind == "error":
        tb = [_ANSI.sub("", _text(line)) for line in output.get("traceback") or []]
        lines = "\n".join(tb).strip().splitlines()
        last = "\n".join(lines[-4:])
        return cut_text(f"[error] {output.get('ename', 'Error')}: {output.get('evalue', '')}\n"
                    f"traceback (last lines):\n{last}", MAX_OUTPUT)
    data = output.get("data") or {}
    parts: list[str] = []
    shape = _shape_of(value) if value is not None else None
    html_text = _text(data.get("text/html"))
    if shape is None and html_text:
        m = _FRAME_SHAPE.search(html_text)
        if m and "dataframe" in html_text:
            shape = f"a DataFrame {m.group(1).replace(',', '')} x {m.group(2).replace(',', '')}"
        elif 'class="dataframe"' in html_text:
            rows = html_text.count("<tr") - 1
            cols = max(0, html_text.split("</tr>", 1)[0].count("<th") - 1)
            if rows >= 0 and cols:
                shape = f"a DataFrame {rows} x {cols}"
    images = [m for m in data if m.startswith("image/")]
    if shape:
        parts.append(shape)
    if images:
        parts.append(f"an image ({', '.join(images)})")
    plain = _text(data.get("text/plain"))
    if "application/vnd.jupyter.widget-view+json" in data:
        parts.append("a widget")
    elif plain and not (images and plain.startswith("<Figure")):
        parts.append(cut_text(plain.rstrip("\n"), MAX_OUTPUT if not shape else 800))
    elif plain and images:
        parts.append(plain.strip())
    elif html_text and not shape:
        stripped = re.sub(r"<[^>]+>", " ", html_text)
        parts.append(f"HTML: {cut_text(' '.join(stripped.split()), 400)}")
    elif not parts and data:
        parts.append(f"a display of {', '.join(sorted(data))}")
    label = "[out]" if kind == "execute_result" else "[display]"
    return f"{label} " + "\n".join(parts) if parts else ""


def summarize_outputs(outputs: list[dict[str, Any]], values: dict[int, Any] | None = None) -> str:
    pieces = []
    for out in outputs:
        value = None
        if values is not None and out.get("output_type") == "execute_result":
            value = values.get(out.get("execution_count"))
        piece = summarize_output(out, value)
        if piece:
            pieces.append(piece)
    return cut_text("\n".join(pieces), MAX_OUTPUT * 2)
