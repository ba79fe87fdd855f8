"""Writing a conversation into the store: `SessionWriter`, one per conversation and process.

Lines are gathered as a run goes and `commit()`ed when a batch is complete (its messages are in the
transcript): one `write` under an exclusive `flock`; the fsync follows on the store's own thread (`_syncer`:
what a commit promises, and when). A killed kernel loses at most the batch in flight, and two kernels
writing into one workspace never interleave lines of one file. Each line is JSON (`orjson`), redacted
(`nbagent.safety.secrets.redact`, once over the batch's text: every line but the store's own identifying
facts, the header and the notebook it belongs to, which name paths the store looks conversations up by; a
batch that `nothing_to_redact` tells at a glance redaction would leave as it is goes as it is, unchanged
either way), then signed (`nbagent.safety.signing`: HMAC-SHA256, chained, with a key kept outside the workspace; `close()`
records where the file ends, outside the workspace too: `_ends`); a tool
result's text longer than `SIDE_FILE_CHARS` is stored cut, with the whole text in a side file named in its
line with its digest.

Reads: the tail of its own file, to continue the chain when it resumes a conversation or another kernel
appended since; anyone who can write the workspace could have changed it. What could happen: lines
written after a forged one chain to it. What stops harm: nothing read here is trusted or acted on; the
reader (`_reader`) verifies every line and refuses the file at the first that does not verify.
"""

from __future__ import annotations

import asyncio
import fcntl
import hashlib
import json
import os
import re
import threading
import time
import warnings
import weakref
from pathlib import Path
from typing import Any, Iterable

import orjson

from ..messages import Message, TextBlock, ToolResultMessage, UserMessage
from ..safety.secrets import nothing_to_redact, redact, redact_value
from ..safety.signing import START, has_mac, key_id, seal, signer
from ..safety.trust import config_dir, session_key
from ..transcript import neutral_message
from ._ends import mark
from ._folder import FORMAT, SessionError, check_id, new_session_id, sessions_dir
from ._syncer import SYNCER

__all__ = ["SIDE_FILE_CHARS", "SessionWriter"]

SIDE_FILE_CHARS = 64_000
"""Tool result texts longer than this are stored cut, the whole text in a side file."""


class SessionWriter:
    """Appends one conversation's facts to its file (see the module docstring)."""

    fsync = True
    """Whether what is written is also fsynced (off the caller's thread; `close()` waits for it). Off only
    for folders nobody needs after a machine stops (a benchmark's)."""

    def __init__(self, workspace: str | os.PathLike[str], session_id: str | None = None, *,
                 notebook: str | None = None, model: str | None = None, resume: bool = False,
                 origin: str | None = None, notebook_id: str | None = None) -> None:
        self.dir = sessions_dir(workspace)
        self.id = check_id(session_id) if session_id else new_session_id()
        self.path = self.dir / f"{self.id}.jsonl"
        self._pending: list[bytes] = []
        self._side: dict[str, str] = {}
        self._last_body: Any = None
        self._fd = -1
        self._newline = False
        self._signer: Any = None
        self._size = 0
        self._synced = 0
        self._held = False
        self._file: tuple[int, int] = (0, 0)
        self._sync_lock = threading.Lock()
        self._sync_error: OSError | None = None
        self.dir.mkdir(parents=True, exist_ok=True)
        if not resume or not self.path.exists():
            if self.path.exists():
                raise SessionError(f"session {self.id} exists already")
            self._key, self._chain = _writing_key(), START
            self._add({"kind": "session", "format": FORMAT, "id": self.id, "created": time.time(),
                       "notebook": notebook, "workspace": str(Path(workspace).resolve()), "model": model,
                       "origin": origin, "key_id": key_id(self._key) if self._key else None,
                       "notebook_id": notebook_id}, own=True)
            self.commit()
        else:
            self._key, self._chain, self._newline, self._size = _resume_chain(self.path)
            self._synced = self._size

    # facts
    def notebook(self, notebook_id: str | None, path: str | None) -> None:
        """Which notebook the conversation belongs to, learned (or changed: a rename) after it started."""
        self._add({"kind": "notebook", "time": time.time(), "notebook_id": notebook_id, "notebook": path}, own=True)

    def settings(self, settings: dict[str, Any]) -> None:
        """What the next run was started with (model, tools, mode...): what a resumed conversation keeps."""
        self._add({"kind": "settings", "time": time.time(), "settings": settings})

    def run_started(self, prompt: Any, *, model: str | None = None, mode: str | None = None) -> None:
        self._add({"kind": "run", "time": time.time(), "prompt": _prompt_text(prompt), "model": model,
                   "mode": mode})

    def messages(self, messages: Iterable[Message]) -> None:
        for m in messages:
            data = neutral_message(m)
            if isinstance(m, ToolResultMessage) and _long(m):
                data = self._cut(data)
            self._add({"kind": "message", "message": data})

    def compaction(self, compaction: Any) -> None:
        """A compaction: the range it replaced (those messages are already in the file, whole) and what
        replaced them, so loading gives the compacted transcript and the record keeps everything."""
        self._add({"kind": "compaction", "time": time.time(), "start": compaction.start, "end": compaction.end,
                   "replacement": [self._cut(neutral_message(m)) if isinstance(m, ToolResultMessage) and _long(m)
                                   else neutral_message(m) for m in compaction.replacement],
                   "responses": [neutral_message(m) for m in compaction.responses],
                   "reason": compaction.reason, "stubbed": compaction.stubbed, "summarized": compaction.summarized,
                   "tokens_before": compaction.tokens_before, "tokens_after": compaction.tokens_after})

    def call(self, record: Any) -> None:
        """The serialisable parts of a `CallRecord` (the live `details` object stays in the kernel)."""
        decision = getattr(record, "decision", None)
        details = getattr(getattr(record, "result", None), "details", None)
        arguments = record.arguments
        if details is not None:
            details = f"{type(details).__module__}.{type(details).__qualname__}"
        self._add({
            "kind": "call", "id": record.id, "name": record.name, "status": record.status,
            "arguments": arguments if isinstance(arguments, dict) else None,
            "decision": None if decision is None else {
                "allow": decision.allow, "source": decision.source, "reason": decision.reason,
                "rule": getattr(decision, "rule", None)},
            "duration": getattr(record, "duration", None), "activity": getattr(record, "activity", None),
            "details_type": details,
            "state": _state(record),
        })

    def request(self, body: Any) -> None:
        """The body as sent. A list field (the conversation) that starts with the whole of the previous
        request's is stored as `{"$prefix": n, "rest": [...]}`: bodies grow with the conversation, and
        storing each whole would make the store grow with its square."""
        if hasattr(body, "message_count") and hasattr(body, "body"):  # a ScriptedModel's request: its
            # messages are the transcript's first `message_count`, already in the store
            body = {"model": body.model, "instructions": body.instructions, "tools": list(body.tools),
                    "messages": {"$transcript": body.message_count}}
        stored = body
        previous = self._last_body
        if isinstance(body, dict) and isinstance(previous, dict):
            for key, value in body.items():
                if not isinstance(value, list):
                    continue
                before = previous.get(key)
                if (isinstance(before, list) and len(before) > 1 and len(value) >= len(before)
                        and value[: len(before)] == before):
                    if stored is body:
                        stored = dict(body)
                    stored[key] = {"$prefix": len(before), "rest": value[len(before):]}
        self._last_body = body
        self._add({"kind": "request", "body": stored})

    def run_ended(self, status: str, *, usage: Any = None, error: BaseException | None = None,
                  output: str | None = None, cost: float | None = None) -> None:
        self._add({"kind": "end", "time": time.time(), "status": status,
                   "usage": None if usage is None else {k: getattr(usage, k, 0) for k in (
                       "input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens",
                       "reasoning_tokens")},
                   "cost": cost,
                   "error": None if error is None else f"{type(error).__name__}: {error}",
                   "output": output})

    # mechanics
    def _add(self, fact: dict[str, Any], *, own: bool = False) -> None:
        """One line, encoded now (the objects it names may change later). `own`: one of the store's
        identifying facts (the header, the notebook), not redacted: a path that shares six characters with
        a key must still find its conversations."""
        try:
            line = orjson.dumps(fact, default=_jsonable, option=_ORJSON)
        except TypeError:  # what orjson does not write (an integer beyond 64 bits, a lone surrogate, which
            # can only be in a string, and goes as the escape JSON has for it)
            line = _FALLBACK.encode(fact).encode("utf-8", "backslashreplace")
        self._pending.append(_Own(line) if own else line)

    def _cut(self, data: dict[str, Any]) -> dict[str, Any]:
        content = data.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        changed = False
        out = []
        for i, block in enumerate(blocks or []):
            text = block.get("text") if block.get("type") == "text" else None
            if text is not None and len(text) > SIDE_FILE_CHARS:
                name = f"{_safe(data.get('tool_call_id', 'result'))}-{i}.txt"
                self._side[name] = whole = redact_value(text)
                head, tail = text[: SIDE_FILE_CHARS // 2], text[-SIDE_FILE_CHARS // 4:]
                block = {**block, "text": f"{head}\n[... {len(text) - len(head) - len(tail):,} characters in "
                                        f"side file {name} ...]\n{tail}", "side_file": name,
                         "side_sha256": hashlib.sha256(whole.encode("utf-8")).hexdigest()}
                changed = True
            out.append(block)
        return {**data, "content": out} if changed else data

    def commit(self, *, fsync: bool = True) -> None:
        """Write what was gathered: side files first, then the lines in one write under a lock. When it
        returns, the lines are in the file; with `fsync`, the store's thread makes them durable at once
        (see `_syncer`), and `close()` waits for that."""
        if self._sync_error is not None:
            error, self._sync_error = self._sync_error, None
            raise error
        if self._side:
            side = self.dir / f"{self.id}.d"
            side.mkdir(exist_ok=True)
            for name, text in self._side.items():
                (side / name).write_text(text, encoding="utf-8")  # redacted when it was cut
            self._side.clear()
        if not self._pending:
            return
        lines, self._pending = self._pending, []
        try:
            data = self._redacted(lines)
            size = self._lock()
        except BaseException:  # nothing was written (a read-only workspace): the lines wait for the next try
            self._pending[:0] = lines
            raise
        try:
            data, chain = self._sealed(data)
            written = os.write(self._fd, data)  # (a regular file takes it whole; the loop is for one that does not)
            if written < len(data):
                view = memoryview(data)[written:]
                while view:
                    view = view[os.write(self._fd, view):]
            self._chain, self._size = chain, size + len(data)
        finally:
            if not self._held:
                fcntl.flock(self._fd, fcntl.LOCK_UN)
        if fsync and self.fsync:
            SYNCER.soon(self)

    def _lock(self) -> int:
        """Take the file's lock (or keep it: see below) and return its size; when another kernel appended
        since, our lines continue its chain.

        Inside a running event loop the lock is kept until the loop next waits (`call_soon`), so a run whose
        loop does not wait between turns (a model that answers at once) pays for one lock, not one a turn.
        Another kernel's writer waits for it that long; a writer of this process takes it over at once."""
        if self._held:
            return self._size  # held since our last write: nobody appended
        if self._fd < 0:
            self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
            info = os.fstat(self._fd)
            self._file = (info.st_dev, info.st_ino)
        holder = _HOLDERS.get(self._file)
        if holder is not None:  # a writer of this process keeps the lock: it would wait for us to wait
            holder._unlock()
        fcntl.flock(self._fd, fcntl.LOCK_EX)
        try:
            size = os.fstat(self._fd).st_size
            if size != self._size:  # another kernel appended since: our lines continue its chain
                mac, self._newline = _tail(self.path)
                if mac is not None and self._key is not None:
                    self._chain = mac
        except BaseException:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            raise
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return size
        self._held = True
        _HOLDERS[self._file] = self
        loop.call_soon(self._unlock)
        return size

    def _unlock(self) -> None:
        if not self._held:
            return
        self._held = False
        if _HOLDERS.get(self._file) is self:
            del _HOLDERS[self._file]
        if self._fd >= 0:
            fcntl.flock(self._fd, fcntl.LOCK_UN)

    def _encode(self, lines: list[bytes]) -> tuple[bytes, bytes]:
        """The record-encoding step: the lines redacted, then signed. Returns the bytes and the chain after."""
        return self._sealed(self._redacted(lines))

    def _redacted(self, lines: list[bytes]) -> list[bytes]:
        """The lines redacted as one text, in one pass (secrets are also matched in their JSON-escaped
        spelling, see nbagent.safety.secrets; the replacement holds no character JSON would escape and no
        newline), but for the store's own identifying facts (`_add(own=True)`)."""
        if _Own in map(type, lines):
            out: list[bytes] = []
            run: list[bytes] = []
            for line in lines:
                if type(line) is _Own:
                    out += self._redacted(run) if run else []
                    out.append(bytes(line))
                    run = []
                else:
                    run.append(line)
            return out + (self._redacted(run) if run else [])
        joined = b"\n".join(lines)
        if nothing_to_redact(joined):  # told at a glance, on the bytes (most batches: see the function)
            return lines
        text = joined.decode("utf-8")
        clean = redact(text)
        return lines if clean is text else clean.encode("utf-8").split(b"\n")

    def _sealed(self, lines: list[bytes]) -> tuple[bytes, bytes]:
        """Each line signed (`nbagent.safety.signing`), the chain continued; the bytes to write and the chain after."""
        if self._key is None:
            data, chain = b"\n".join(lines) + b"\n", self._chain
        else:
            if self._signer is None:
                self._signer = signer(self._key)
            data, chain = seal(self._signer, self._chain, lines)
        if self._newline:  # the file ended in a line cut short (a killed kernel): start a line of our own
            data, self._newline = b"\n" + data, False
        return data, chain

    def _sync(self) -> None:
        """fsync what was written so far (on the store's thread; `close()` on the caller's)."""
        with self._sync_lock:
            size = self._size
            if self._fd < 0 or size <= self._synced:
                return
            try:
                os.fsync(self._fd)
            except OSError as exc:
                self._sync_error = exc
                return
            self._synced = size

    def close(self) -> None:
        """Write what is left, wait until everything written is on the disk, and let the file go."""
        try:
            self.commit(fsync=False)
        finally:
            self._unlock()
            if self.fsync:
                self._sync()
            with self._sync_lock:
                if self._fd >= 0:
                    os.close(self._fd)
                    self._fd = -1
        if self._sync_error is not None:
            error, self._sync_error = self._sync_error, None
            raise error
        if self._key is not None and self._chain != START:  # where the file ends, kept outside the workspace
            mark(self.path, self._chain)

    def __del__(self) -> None:
        if getattr(self, "_fd", -1) >= 0:
            os.close(self._fd)


_HOLDERS: weakref.WeakValueDictionary[tuple[int, int], SessionWriter] = weakref.WeakValueDictionary()
"""The writer of this process keeping each file's lock until its loop next waits (`SessionWriter._lock`);
one whose loop was closed first is let go, and closing its file lets the lock go."""


def _long(message: ToolResultMessage) -> bool:
    """Whether a result holds a text long enough to go to a side file (`SessionWriter._cut`)."""
    content = message.content
    if isinstance(content, str):
        return len(content) > SIDE_FILE_CHARS
    for block in content:
        if len(getattr(block, "text", "")) > SIDE_FILE_CHARS:
            return True
    return False


class _Own(bytes):
    """A line of the store's own identifying facts: written as it is, not redacted (see `SessionWriter._add`)."""


def _writing_key() -> bytes | None:
    """The signing key for a new file; None (the file is then unsigned, and says so when read) when it
    cannot be made: recording never fails a run."""
    try:
        return session_key()
    except OSError as exc:
        warnings.warn(f"nbagent cannot make its session key in {config_dir()} ({exc}): this conversation is "
                      "stored unsigned, and will be refused for resume and replay unless unsigned files are "
                      "allowed", stacklevel=3)
        return None


def _tail(path: Path) -> tuple[bytes | None, bool]:
    """The MAC of a file's last whole line (None: it has none), and whether the file ends in a line cut
    short (a killed writer)."""
    with open(path, "rb") as f:
        at = f.seek(0, os.SEEK_END)
        tail = b""
        while at > 0 and tail.count(b"\n") < 2:
            step = min(at, 65536)
            at -= step
            f.seek(at)
            tail = f.read(step) + tail
    cut = bool(tail) and not tail.endswith(b"\n")
    lines = [line for line in tail.split(b"\n")[:-1] if line.strip()]
    last = lines[-1].rstrip(b"\r") if lines else b""
    return (bytes.fromhex(last[-66:-2].decode("ascii")) if has_mac(last) else None), cut


def _resume_chain(path: Path) -> tuple[bytes | None, bytes, bool, int]:
    """To append to a file: the key (None when the file is unsigned), the chain value of its last whole
    line, whether it ends in a line cut short, and its size."""
    size = path.stat().st_size
    mac, cut = _tail(path)
    if mac is None:
        return None, START, cut, size
    try:
        key = session_key(create=False)
    except OSError:
        key = None
    if key is None:  # its key is gone: what is written now would not verify either way
        return None, START, cut, size
    return key, mac, cut, size


def _state(record: Any) -> Any:
    """What a call that ran code did to the namespace's names (`StateChange.to_json`), else None."""
    change = getattr(record, "state_change", None)
    return change.to_json() if hasattr(change, "to_json") else None


def _safe(name: Any) -> str:
    return re.sub(r"[^A-Za-z0-9_-]", "_", str(name))[:80] or "x"


def _jsonable(value: Any) -> Any:
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    if isinstance(value, bytes):
        return f"<{len(value)} bytes>"
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    return repr(value)


_ORJSON = orjson.OPT_NON_STR_KEYS | orjson.OPT_PASSTHROUGH_DATACLASS | orjson.OPT_PASSTHROUGH_DATETIME
"""Keys that are not strings written as strings (as `json` does); dataclasses and dates through `_jsonable`
(their repr, as `json` would have them)."""
_FALLBACK = json.JSONEncoder(ensure_ascii=False, default=_jsonable, separators=(",", ":"))


def _prompt_text(prompt: Any) -> str:
    if isinstance(prompt, UserMessage):
        if prompt.said is not None:  # the person's own words, not the context a button sent with them
            return prompt.said
        prompt = prompt.content
    if isinstance(prompt, str):
        return prompt
    if isinstance(prompt, list):
        return " ".join(b.text if isinstance(b, TextBlock) else "[image]" for b in prompt)
    return str(prompt)
