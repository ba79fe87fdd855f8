"""An incremental reader of server-sent events: bytes in, split anywhere (inside a line, a CRLF or a
multi-byte UTF-8 character), `ServerSentEvent`s out, with `event:`/`data:`/`id:`/`retry:` fields,
multi-line data and comments, as the HTML standard defines the format."""

from __future__ import annotations

import json
import json.scanner
import re
from codecs import utf_8_decode as _utf8_decode
from typing import Any

__all__ = ["SSEDecoder", "ServerSentEvent", "loads"]


class ServerSentEvent:
    """One event of a `text/event-stream`: `event` (default "message"), `data` (lines joined by "\\n"), `id`."""

    __slots__ = ("event", "data", "id", "retry")

    def __init__(self, event: str = "message", data: str = "", id: str | None = None, retry: int | None = None):
        self.event = event
        self.data = data
        self.id = id
        self.retry = retry

    def json(self) -> Any:
        return json.loads(self.data)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ServerSentEvent):
            return NotImplemented
        return (self.event, self.data, self.id, self.retry) == (other.event, other.data, other.id, other.retry)

    def __repr__(self) -> str:
        data = self.data if len(self.data) <= 200 else self.data[:197] + "..."
        extra = (f", id={self.id!r}" if self.id is not None else "") + (
            f", retry={self.retry}" if self.retry is not None else "")
        return f"ServerSentEvent(event={self.event!r}, data={data!r}{extra})"


_LINE_BREAK = re.compile(r"\r\n|\r|\n")
_scan_once = json.scanner.make_scanner(json.JSONDecoder())  # the C scanner behind json.loads


def loads(text: str) -> Any:
    """`json.loads` for the many small documents of a stream, without its Python-level wrapping (the same
    C scanner; anything unusual, like surrounding whitespace or an error, goes through `json.loads`)."""
    try:
        value, end = _scan_once(text, 0)
    except StopIteration:
        return json.loads(text)
    if end != len(text):
        return json.loads(text)
    return value


class SSEDecoder:
    """An incremental `text/event-stream` decoder (the WHATWG rules).

    `feed(chunk)` takes bytes split anywhere (inside a line, a CRLF, or a multi-byte UTF-8 character) and
    returns the events completed by them; `end()` returns the last event when the stream stops without
    its closing blank line. Comment lines (`:`) are skipped, `data:` lines of one event are joined with
    newlines, and one space after the colon is dropped. Invalid UTF-8 becomes U+FFFD, as the spec says.
    Lines end at CRLF, LF or CR only (never at the other characters `str.splitlines` knows).
    """

    __slots__ = ("_rest", "_tail", "_parts", "_skip_lf", "_event", "_data", "_id", "_retry", "bytes_read",
                 "events_read")

    def __init__(self) -> None:
        self._rest = b""
        self._tail = ""
        self._parts: list[str] = []
        """Pieces of a line still arriving after `_tail` (a long event in many chunks: joined once, at its end)."""
        self._skip_lf = False
        self._event = ""
        self._data: list[str] = []
        self._id: str | None = None
        self._retry: int | None = None
        self.bytes_read = 0
        """Bytes fed so far."""
        self.events_read = 0
        """Events returned so far."""

    def feed(self, chunk: bytes) -> list[ServerSentEvent]:
        self.bytes_read += len(chunk)
        if self._rest:
            chunk = self._rest + chunk
        # C-speed decoding that stops before a character cut at the end of the chunk
        text, used = _utf8_decode(chunk, "replace", False)
        self._rest = chunk[used:] if used < len(chunk) else b""
        if not text:
            return []
        n = len(text)
        if (n > 8 and text[-2:] == "\n\n" and not self._tail and not self._skip_lf and not self._data
                and not self._event and not self._parts and "\r" not in text):
            # the common cases: a chunk holding exactly one event, `data: ...` or `event: ...` + `data: ...`
            if text[:6] == "data: ":
                if text.find("\n", 6, n - 2) < 0:
                    self.events_read += 1
                    retry, self._retry = self._retry, None
                    return [ServerSentEvent("message", text[6:-2], self._id, retry)]
            elif text[:7] == "event: ":
                nl = text.find("\n", 7)
                if text[nl + 1 : nl + 7] == "data: " and text.find("\n", nl + 7, n - 2) < 0:
                    self.events_read += 1
                    retry, self._retry = self._retry, None
                    return [ServerSentEvent(text[7:nl] or "message", text[nl + 7 : -2], self._id, retry)]
        if self._skip_lf:
            self._skip_lf = False
            if text[0] == "\n":
                text = text[1:]
        if "\n" not in text and "\r" not in text:
            self._parts.append(text)  # no line ends here: keep the piece, copy and split nothing
            return []
        if self._parts:
            text = "".join(self._parts) + text
            self._parts = []
        if self._tail:
            text = self._tail + text
        if "\r" in text:
            lines = _LINE_BREAK.split(text)
            # a CR at the very end may be the first half of a CRLF split across chunks
            self._skip_lf = text[-1] == "\r"
        else:
            lines = text.split("\n")
        self._tail = lines.pop()
        if not lines:
            return []
        out: list[ServerSentEvent] = []
        data = self._data
        for line in lines:
            if not line:
                if data:
                    out.append(ServerSentEvent(self._event or "message", "\n".join(data), self._id, self._retry))
                    data = self._data = []
                    self._retry = None
                self._event = ""
            elif line[:6] == "data: ":
                data.append(line[6:])
            else:
                self._field(line, data)
        self.events_read += len(out)
        return out

    def end(self) -> list[ServerSentEvent]:
        """Flush at the end of the stream: a last unterminated line and event are dispatched."""
        tail = self._tail + "".join(self._parts) + (self._rest.decode("utf-8", "replace") if self._rest else "")
        self._tail, self._parts, self._rest = "", [], b""
        lines = _LINE_BREAK.split(tail) if tail else []
        out: list[ServerSentEvent] = []
        for line in lines:
            if line:
                self._field(line, self._data)
        if self._data:
            out.append(ServerSentEvent(self._event or "message", "\n".join(self._data), self._id, self._retry))
            self._data = []
        self._event = ""
        self.events_read += len(out)
        return out

    @property
    def pending(self) -> bool:
        """Whether part of an event has been read but not dispatched."""
        return bool(self._tail or self._parts or self._rest or self._data or self._event)

    def _field(self, line: str, data: list[str]) -> None:
        name, colon, value = line.partition(":")
        if not name:
            return  # a comment
        if colon and value[:1] == " ":
            value = value[1:]
        if name == "data":
            data.append(value)
        elif name == "event":
            self._event = value
        elif name == "id":
            if "\0" not in value:
                self._id = value
        elif name == "retry":
            if value.isdigit():
                self._retry = int(value)
