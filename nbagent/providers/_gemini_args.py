"""Gemini's streamed function-call arguments (`partialArgs`): assignments by JSON path, replayed into an
object when read.

    json_path("$.a.b[0]")   ["a", "b", 0]
    StreamedCall            one call's log of assignments; `snapshot(n)` the object after the first n
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass, field
from typing import Any

__all__ = ["APPEND", "SET", "START", "StreamedCall", "json_path"]

_PATH_TOKEN = re.compile(r"\.([A-Za-z_$][\w$-]*)|\[(\d+)\]|\['((?:[^'\\]|\\.)*)'\]|\[\"((?:[^\"\\]|\\.)*)\"\]")


def json_path(path: str) -> list[str | int]:
    """`$.a.b[0]['c d']` -> ["a", "b", 0, "c d"]."""
    if not path.startswith("$"):
        raise ValueError(f"not a JSON path: {path!r}")
    out: list[str | int] = []
    at = 1
    while at < len(path):
        m = _PATH_TOKEN.match(path, at)
        if m is None:
            raise ValueError(f"cannot read JSON path {path!r} at {at}")
        name, index, single, double = m.groups()
        out.append(int(index) if index is not None else (name if name is not None else (single or double or "")))
        at = m.end()
    return out


def _set_path(root: dict[str, Any], path: list[str | int], value: Any) -> None:
    """Set `value` at `path` in `root`, making the objects and lists on the way (a path that runs into a
    value of another kind is ignored)."""
    node: Any = root
    for i, key in enumerate(path):
        last = i == len(path) - 1
        if isinstance(key, int):
            if not isinstance(node, list):
                return
            while len(node) <= key:
                node.append(None)
        elif not isinstance(node, dict):
            return
        if last:
            node[key] = value
            return
        child = node[key] if isinstance(key, int) else node.get(key)
        if not isinstance(child, (dict, list)):
            child = node[key] = [] if isinstance(path[i + 1], int) else {}
        node = child


@dataclass
class StreamedCall:
    """A call whose arguments arrive as `partialArgs`: a log of assignments, replayed into an object when
    someone reads it (`snapshot(n)` is the object after the first `n`). Each piece costs O(1) on arrival;
    a long string streamed in thousands of pieces is joined once per read, never re-copied per piece."""

    key: int
    index: int
    id: str | None = None
    name: str | None = None
    log: list[tuple[list[str | int], Any, int]] = field(default_factory=list)
    """(path, value, how): how is SET, START (a string's first piece) or APPEND (its next piece)."""
    open_strings: set[str] = field(default_factory=set)
    finished: bool = False

    def snapshot(self, n: int | None = None) -> dict[str, Any]:
        root: dict[str, Any] = {}
        strings: dict[tuple, tuple[list[str | int], list[str]]] = {}
        for path, value, how in self.log[:n] if n is not None else self.log:
            key = tuple(path)
            if how == APPEND and key in strings:
                strings[key][1].append(value)
            elif how == SET:
                strings.pop(key, None)
                _set_path(root, path, copy.deepcopy(value))
            else:
                strings[key] = (path, [value])
                _set_path(root, path, "")  # its place in the object, in order of arrival
        for path, pieces in strings.values():
            _set_path(root, path, "".join(pieces))
        return root


SET, START, APPEND = 0, 1, 2
"""How an entry of `StreamedCall.log` applies: set a value, start a string, append to it."""
