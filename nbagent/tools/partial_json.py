"""Streamed tool-call arguments: an incremental parser for JSON that is still arriving.

A model streams a tool call's arguments as text fragments. `PartialJSON` follows the structure of that
text as it comes, doing work proportional to each fragment (inside long strings it jumps from quote to
backslash with a compiled regex, never re-reading what it has seen). At any moment it can describe "the
arguments parsed so far" with a cheap `mark()`; turning a mark into a value (`snapshot_at`) costs one
C-speed `json.loads` of the text so far, so it is done only when somebody asks (see
`ToolCallDelta.partial_arguments`).

A snapshot is always consistent with the final value: every string in it is a prefix of the final string,
every list a prefix of the final list (its last item possibly partial), every object a subset of the final
object's members, and numbers, booleans and null appear only once complete. Keys still being written and
values not yet started are left out.

    parser = PartialJSON()
    parser.feed('{"path": "notes.md", "content": "# Ti')
    parser.snapshot()   # {'path': 'notes.md', 'content': '# Ti'}
"""

from __future__ import annotations

import json
import re
from typing import Any

__all__ = ["PartialJSON", "parse_partial_json"]

_STRING_STOP = re.compile(r'["\\]').search
"""The next character that can end a string or start an escape."""
_STRING_BODY = re.compile(r'[^"\\]*(?:\\.[^"\\]*)*', re.S).match
"""A run of string content: plain characters and complete escapes."""
_SCALAR_STOP = re.compile(r"[\s,\]}:]").search
"""The character after a number or a literal (true, false, null)."""
_NON_SPACE = re.compile(r"\S").search
_CUT_ESCAPE = re.compile(r"\\u(?:[0-9a-fA-F]{0,3}|[dD][89abAB][0-9a-fA-F]{2})$").search
"""A `\\u` escape cut short, or a high surrogate whose low half has not arrived."""

# modes
_STRUCT, _STRING, _SCALAR, _FAILED = 0, 1, 2, 3
# what a container expects next
_KEY, _COLON, _VALUE, _NEXT, _DONE = 0, 1, 2, 3, 4

Mark = tuple[int, str, bool]
"""(end of the usable text, the suffix that closes it, whether it ends inside a string value)."""


class PartialJSON:
    """An incremental parser for one JSON value arriving in fragments.

    `feed(fragment)` costs time proportional to the fragment. `mark()` notes, in O(1), where a snapshot
    of the value so far would be cut; `snapshot_at(mark)` builds that value (O(size), C speed).
    `text` is everything fed so far and `value()` the final value, parsed by `json.loads`.
    """

    __slots__ = ("_pieces", "_size", "_text", "_joined", "_stack", "_closers", "_string_suffix", "_mode", "_escape",
                 "_key")

    def __init__(self) -> None:
        self._pieces: list[str] = []
        self._size = 0
        self._text = ""
        self._joined = 0
        # one entry per open container: [kind ('{', '[' or '' for the top level), expects, cut]
        # `cut` is where this container's text can be cut after its last complete member
        self._stack: list[list[Any]] = [["", _VALUE, 0]]
        self._closers = ""
        self._string_suffix = '"'
        self._mode = _STRUCT
        self._escape = False
        self._key = False

    # -- feeding -----------------------------------------------------------------------------------------
    def feed(self, fragment: str) -> None:
        """Take the next fragment of text."""
        if not fragment:
            return
        base = self._size
        self._pieces.append(fragment)
        self._size = base + len(fragment)
        if self._mode == _FAILED:
            return
        i, n = 0, len(fragment)
        stack = self._stack
        while i < n:
            mode = self._mode
            if mode == _STRING:
                if self._escape:
                    self._escape = False
                    i += 1
                    continue
                m = _STRING_STOP(fragment, i)
                if m is None:
                    return
                j = m.start()
                if fragment[j] == "\\":
                    # escapes ahead: one C-speed match over escapes and plain runs together
                    j = _STRING_BODY(fragment, j).end()
                    if j >= n:
                        return
                    if fragment[j] == "\\":  # a backslash ending the fragment: its pair comes next
                        self._escape = True
                        return
                i = j + 1
                self._mode = _STRUCT
                if not self._key:
                    self._value_done(base + i)
                continue
            if mode == _SCALAR:
                m = _SCALAR_STOP(fragment, i)
                if m is None:
                    return
                i = m.start()
                self._mode = _STRUCT
                self._value_done(base + i)
                continue
            m = _NON_SPACE(fragment, i)
            if m is None:
                return
            i = m.start()
            c = fragment[i]
            top = stack[-1]
            expects = top[1]
            if expects == _VALUE:
                top[1] = _NEXT if top[0] else _DONE
                if c == '"':
                    self._mode, self._key = _STRING, False
                elif c == "{" or c == "[":
                    stack.append([c, _KEY if c == "{" else _VALUE, base + i + 1])
                    self._closers = ("}" if c == "{" else "]") + self._closers
                    self._string_suffix = '"' + self._closers
                elif c == "]" and top[0] == "[":  # an empty list (or a trailing comma)
                    self._close(base + i + 1)
                elif c in ",:}]":
                    self._mode = _FAILED
                    return
                else:
                    self._mode = _SCALAR
                    continue  # the scalar starts here: scan it from i
            elif expects == _KEY:
                if c == '"':
                    top[1] = _COLON
                    self._mode, self._key = _STRING, True
                elif c == "}":
                    self._close(base + i + 1)
                else:
                    self._mode = _FAILED
                    return
            elif expects == _COLON:
                if c != ":":
                    self._mode = _FAILED
                    return
                top[1] = _VALUE
            elif expects == _NEXT:
                if c == ",":
                    top[1] = _KEY if top[0] == "{" else _VALUE
                elif (c == "}" and top[0] == "{") or (c == "]" and top[0] == "["):
                    self._close(base + i + 1)
                else:
                    self._mode = _FAILED
                    return
            else:  # _DONE: only whitespace may follow the top-level value
                self._mode = _FAILED
                return
            i += 1

    def end(self) -> None:
        """No more text will come: a number or literal still open at the end is complete."""
        if self._mode == _SCALAR:
            self._mode = _STRUCT
            self._value_done(self._size)

    def _value_done(self, end: int) -> None:
        self._stack[-1][2] = end

    def _close(self, end: int) -> None:
        self._stack.pop()
        self._closers = self._closers[1:]
        self._string_suffix = '"' + self._closers
        self._value_done(end)

    # -- reading ---------------------------------------------------------------------------------------
    @property
    def failed(self) -> bool:
        """True once the text stopped being JSON (snapshots are then None; `value()` raises)."""
        return self._mode == _FAILED

    @property
    def complete(self) -> bool:
        """True when a whole top-level value has been read."""
        return self._mode == _STRUCT and len(self._stack) == 1 and self._stack[0][1] == _DONE

    @property
    def text(self) -> str:
        """Everything fed so far."""
        if self._joined < len(self._pieces):
            self._text += "".join(self._pieces[self._joined :])
            self._joined = len(self._pieces)
        return self._text

    def __len__(self) -> int:
        return self._size

    def mark(self) -> Mark | None:
        """Where a snapshot of the value so far would be cut (O(1)); None once the text is not JSON."""
        mode = self._mode
        if mode == _FAILED:
            return None
        if mode == _STRING and not self._key:
            return (self._size - 1 if self._escape else self._size, self._string_suffix, True)
        return (self._stack[-1][2], self._closers, False)

    def snapshot_at(self, mark: Mark | None) -> Any:
        """The value as it stood at `mark` (None when nothing usable had arrived)."""
        if mark is None:
            return None
        end, suffix, in_string = mark
        text = self.text[:end]
        if in_string:
            text = _trim_cut_escape(text)
        elif not suffix and end == 0:
            return None
        try:
            return json.loads(text + suffix, strict=False)
        except ValueError:
            return None

    def snapshot(self) -> Any:
        """The value parsed so far (see the module docstring for what is left out)."""
        return self.snapshot_at(self.mark())

    def value(self) -> Any:
        """The final value: `json.loads` of everything fed (raises ValueError when it is not JSON)."""
        return json.loads(self.text)


def _trim_cut_escape(text: str) -> str:
    """Drop an escape sequence cut off at the end of a string's text (it cannot be decoded yet)."""
    if text.endswith("\\") and _escaping(text, len(text) - 1):
        text = text[:-1]
    for _ in range(2):  # a cut escape, then the high surrogate it would have completed
        m = _CUT_ESCAPE(text, max(0, len(text) - 6))
        if m is None or not _escaping(text, m.start()):
            break
        text = text[: m.start()]
    return text


def _escaping(text: str, at: int) -> bool:
    """Whether the backslash at `at` starts an escape (it is preceded by an even number of backslashes)."""
    k = at
    while k > 0 and text[k - 1] == "\\":
        k -= 1
    return (at - k) % 2 == 0


def parse_partial_json(text: str) -> Any:
    """The value of JSON text that may be cut off, or None (a one-shot `PartialJSON` snapshot)."""
    try:
        return json.loads(text)
    except ValueError:
        pass
    parser = PartialJSON()
    parser.feed(text)
    return parser.snapshot()
