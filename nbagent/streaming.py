"""Helpers for streamed tool-call arguments."""

from __future__ import annotations

import json
from typing import Any

__all__ = ["parse_partial_json"]


def parse_partial_json(text: str) -> Any:
    """Parse JSON that may be cut off: the value so far (open strings and containers closed), or None."""
    from .arguments import _close_truncated

    text = text.strip()
    if not text:
        return None
    try:
        return json.loads(text)
    except ValueError:
        pass
    fixed = _close_truncated(text)
    if fixed is None:
        return None
    try:
        return json.loads(fixed)
    except ValueError:
        return None
