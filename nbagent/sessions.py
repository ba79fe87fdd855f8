"""Conversations that outlive the kernel: an append-only JSONL store per conversation.

    <workspace>/.nbagent/sessions/<id>.jsonl        one JSON object per line
    <workspace>/.nbagent/sessions/<id>.d/<name>     side files: whole texts too long for a line

The first line is the header (`kind: "session"`: id, format, created, notebook, workspace, model); every
later line is one fact, in the order it happened:

| kind | what |
|---|---|
| `run` | a run started: its prompt, model, mode |
| `message` | one message of the transcript, in nbagent's neutral form (`nbagent.transcript`) |
| `call` | the serialisable parts of a call record: status, decision and who made it, duration, activity |
| `request` | the exact body sent to the provider, secrets removed |
| `compaction` | the transcript was compacted: `messages[start:end]` (written earlier, kept whole) were replaced by `replacement`; the summary requests' responses, the reason, the sizes |
| `end` | a run ended: status, usage, cost, error |

Writing: lines are gathered as a run goes and `commit()`ed when a batch is complete (its messages are
in the transcript): one `write` under an exclusive `flock`, then `fsync`. A killed kernel loses at most
the batch in flight, and two kernels writing into one workspace never interleave lines of one file.
Every line passes `nbagent.secrets.redact_value`; a tool result's text longer than `SIDE_FILE_CHARS`
is stored cut, with the whole text in a side file (restored when the session is loaded).

Reading: `load_session` skips a truncated or corrupt line with a warning (never fatal), refuses a file
written by a newer format with a clear message, and gives calls that were in flight when the writer
died a synthesised "interrupted" result, so the transcript is valid before the next request.

Reads: files in the workspace, which the model, a cloned repository or anyone who can write the workspace
could have forged or changed. What could happen: a forged conversation resumed or replayed (calls nobody
saw, answers nobody gave), an id or a side-file name that builds a path outside the store. What stops it:
every line is signed (`nbagent.signing`: HMAC-SHA256, chained, with a key kept outside the workspace),
and `load_session` refuses a file whose lines do not verify, naming the file and the line; side files are
named by a digest inside their signed line; ids are checked (`_ID`) before they build a path, a header
must name its own file, and every path read stays inside the sessions folder. A file with no signatures
(written before they existed, or stripped) is refused unless explicitly allowed (`unsigned=True`, or
`NBAGENT_UNSIGNED_SESSIONS=allow`), and is then marked `signed=False`. A replay approves nothing by itself
either way: every call goes through the permission pipeline.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import secrets as _random
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from .messages import AssistantMessage, Message, TextBlock, ToolResultMessage, UserMessage
from .secrets import redact, redact_value
from .signing import START, has_mac, key_id, seal, signer, unseal
from .transcript import message_from_neutral, neutral_message
from .trust import config_dir, session_key

__all__ = ["FORMAT", "SIDE_FILE_CHARS", "SessionError", "SessionInfo", "SessionWriter", "StoredSession",
           "delete_session", "find_session", "list_sessions", "load_session", "new_session_id", "repair_transcript",
           "sessions_dir"]

FORMAT = 1
"""The store's format version, written in every header."""
SIDE_FILE_CHARS = 64_000
"""Tool result texts longer than this are stored cut, the whole text in a side file."""
INTERRUPTED = ("interrupted: the kernel stopped before this call finished, so it has no result. "
               "It may or may not have had its effect; check before repeating it.")
_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,80}$")
_SIDE_NAME = re.compile(r"^[A-Za-z0-9_-]{1,100}\.txt$")
UNSIGNED_VARIABLE = "NBAGENT_UNSIGNED_SESSIONS"
"""`allow`: resume and replay files with no signatures (read as untrusted: `StoredSession.signed` False)."""


class SessionError(ValueError):
    """A session cannot be found, read or written (the message says which and why)."""


def sessions_dir(workspace: str | os.PathLike[str]) -> Path:
    return Path(workspace) / ".nbagent" / "sessions"


def new_session_id() -> str:
    """Sortable by time, unique across kernels: `20261201-051530-a1b2c3`."""
    return time.strftime("%Y%m%d-%H%M%S", time.localtime()) + "-" + _random.token_hex(3)


def _check_id(session_id: str) -> str:
    if not isinstance(session_id, str) or not _ID.match(session_id) or session_id.endswith((".jsonl", ".d")):
        raise SessionError(f"{session_id!r} is not a session id (letters, digits, '-', '_', '.')")
    return session_id


# -- writing ---------------------------------------------------------------------------------------------

class SessionWriter:
    """Appends one conversation's facts to its file (see the module docstring)."""

    def __init__(self, workspace: str | os.PathLike[str], session_id: str | None = None, *,
                 notebook: str | None = None, model: str | None = None, resume: bool = False,
                 origin: str | None = None, notebook_id: str | None = None) -> None:
        self.dir = sessions_dir(workspace)
        self.id = _check_id(session_id) if session_id else new_session_id()
        self.path = self.dir / f"{self.id}.jsonl"
        self._pending: list[str] = []
        self._side: dict[str, str] = {}
        self._last_body: Any = None
        self._fd = -1
        self._newline = False
        self._signer: Any = None
        self._size = 0
        self.dir.mkdir(parents=True, exist_ok=True)
        if not resume or not self.path.exists():
            if self.path.exists():
                raise SessionError(f"session {self.id} exists already")
            self._key, self._chain = _writing_key(), START
            self._add({"kind": "session", "format": FORMAT, "id": self.id, "created": time.time(),
                       "notebook": notebook, "workspace": str(Path(workspace).resolve()), "model": model,
                       "origin": origin, "key_id": key_id(self._key) if self._key else None,
                       "notebook_id": notebook_id})
            self.commit()
        else:
            self._key, self._chain, self._newline, self._size = _resume_chain(self.path)

    # facts
    def notebook(self, notebook_id: str | None, path: str | None) -> None:
        """Which notebook the conversation belongs to, learned (or changed: a rename) after it started."""
        self._add({"kind": "notebook", "time": time.time(), "notebook_id": notebook_id, "notebook": path})

    def settings(self, settings: dict[str, Any]) -> None:
        """What the next run was started with (model, tools, mode...): what a resumed conversation keeps."""
        self._add({"kind": "settings", "time": time.time(), "settings": settings})

    def run_started(self, prompt: Any, *, model: str | None = None, mode: str | None = None) -> None:
        self._add({"kind": "run", "time": time.time(), "prompt": _prompt_text(prompt), "model": model,
                   "mode": mode})

    def messages(self, messages: Iterable[Message]) -> None:
        for m in messages:
            data = neutral_message(m)
            if isinstance(m, ToolResultMessage):
                data = self._cut(data)
            self._add({"kind": "message", "message": data})

    def compaction(self, compaction: Any) -> None:
        """A compaction: the range it replaced (those messages are already in the file, whole) and what
        replaced them, so loading gives the compacted transcript and the record keeps everything."""
        self._add({"kind": "compaction", "time": time.time(), "start": compaction.start, "end": compaction.end,
                   "replacement": [self._cut(neutral_message(m)) if isinstance(m, ToolResultMessage)
                                   else neutral_message(m) for m in compaction.replacement],
                   "responses": [neutral_message(m) for m in compaction.responses],
                   "reason": compaction.reason, "stubbed": compaction.stubbed, "summarized": compaction.summarized,
                   "tokens_before": compaction.tokens_before, "tokens_after": compaction.tokens_after})

    def call(self, record: Any) -> None:
        """The serialisable parts of a `CallRecord` (the live `details` object stays in the kernel)."""
        decision = getattr(record, "decision", None)
        details = getattr(getattr(record, "result", None), "details", None)
        self._add({
            "kind": "call", "id": record.id, "name": record.name, "status": record.status,
            "arguments": record.arguments if isinstance(record.arguments, dict) else None,
            "decision": None if decision is None else {
                "allow": decision.allow, "source": decision.source, "reason": decision.reason,
                "rule": getattr(decision, "rule", None)},
            "duration": getattr(record, "duration", None), "activity": getattr(record, "activity", None),
            "details_type": None if details is None else f"{type(details).__module__}.{type(details).__qualname__}",
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
            stored = dict(body)
            for key, value in body.items():
                before = previous.get(key)
                if (isinstance(value, list) and isinstance(before, list) and len(before) > 1
                        and len(value) >= len(before) and value[: len(before)] == before):
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
    def _add(self, fact: dict[str, Any]) -> None:
        self._pending.append(_ENCODER.encode(fact))

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
        """Write what was gathered: side files first, then the lines in one write under a lock."""
        if self._side:
            side = self.dir / f"{self.id}.d"
            side.mkdir(exist_ok=True)
            for name, text in self._side.items():
                (side / name).write_text(text, encoding="utf-8")  # redacted when it was cut
            self._side.clear()
        if not self._pending:
            return
        if self._fd < 0:
            self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
        fd = self._fd
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            size = os.fstat(fd).st_size
            if size != self._size:  # another kernel appended since: our lines continue its chain
                mac, self._newline = _tail(self.path)
                if mac is not None and self._key is not None:
                    self._chain = mac
            data, chain = self._encode(self._pending)
            self._pending.clear()
            view = memoryview(data)
            while view:
                written = os.write(fd, view)
                view = view[written:]
            if fsync:
                os.fsync(fd)
            self._chain, self._size = chain, size + len(data)
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)

    def _encode(self, lines: list[str]) -> tuple[bytes, bytes]:
        """The record-encoding step, one place: the batch redacted as text, once (one regex pass; secrets are
        also matched in their JSON-escaped spelling, see nbagent.secrets; the replacement holds no character
        JSON would escape), then each line signed (`nbagent.signing`). Returns the bytes and the chain after."""
        data = redact("\n".join(lines)).encode("utf-8")
        if self._key is None:
            data, chain = data + b"\n", self._chain
        else:
            if self._signer is None:
                self._signer = signer(self._key)
            data, chain = seal(self._signer, self._chain, data.split(b"\n"))
        if self._newline:  # the file ended in a line cut short (a killed kernel): start a line of our own
            data, self._newline = b"\n" + data, False
        return data, chain

    def close(self) -> None:
        """Write what is left and let the file go."""
        self.commit()
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __del__(self) -> None:
        if getattr(self, "_fd", -1) >= 0:
            os.close(self._fd)


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


_ENCODER = json.JSONEncoder(ensure_ascii=False, default=_jsonable, separators=(",", ":"))


def _prompt_text(prompt: Any) -> str:
    if isinstance(prompt, UserMessage):
        prompt = prompt.content
    if isinstance(prompt, str):
        return prompt
    if isinstance(prompt, list):
        return " ".join(b.text if isinstance(b, TextBlock) else "[image]" for b in prompt)
    return str(prompt)


# -- reading ---------------------------------------------------------------------------------------------

@dataclass(slots=True)
class SessionInfo:
    """One stored conversation, as `%agent --sessions` lists it."""

    id: str
    path: Path
    notebook: str | None = None
    created: float = 0.0
    updated: float = 0.0
    runs: int = 0
    turns: int = 0
    calls: int = 0
    last_prompt: str = ""
    model: str | None = None
    origin: str | None = None
    """Which process wrote it (a notebook's kernel): the conversations of one execution share it."""
    notebook_id: str | None = None
    """The id kept in the notebook's metadata (`nbagent.id`): it follows the notebook through renames."""
    settings: dict[str, Any] | None = None
    """What its last run was started with (`settings` facts): model, tools, mode..."""
    ended: list[str] = field(default_factory=list)
    """How each run ended (done, failed, cancelled), in order."""

    @property
    def empty(self) -> bool:
        """Nothing the model said: every run failed (or was stopped) before an answer."""
        return self.turns == 0

    def __str__(self) -> str:
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(self.created))
        nb = _printable(Path(self.notebook).name) if self.notebook else "-"  # a stored name may carry escapes
        prompt = self.last_prompt if len(self.last_prompt) <= 50 else self.last_prompt[:49] + "…"
        from .sanitize import terminal_safe  # the file is stored state: anyone who can write it chose these

        return terminal_safe(f"{self.id}  {nb}  {when}  {self.runs} run{'s' if self.runs != 1 else ''}, {self.turns} "
                             f"turn{'s' if self.turns != 1 else ''}, {self.calls} call{'s' if self.calls != 1 else ''}"
                             f"  {prompt!r}")


def _printable(text: str) -> str:
    """Control characters (terminal escapes among them) written as escapes, never sent to a terminal."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


@dataclass(slots=True)
class StoredSession:
    """What `load_session` read back."""

    info: SessionInfo
    why: str = ""
    """Why `%agent --resume` picked it (set by the notebook front)."""
    messages: list[Message] = field(default_factory=list)
    """The transcript, repaired so it is valid (interrupted calls answered)."""
    calls: list[dict[str, Any]] = field(default_factory=list)
    requests: list[Any] = field(default_factory=list)
    runs: list[dict[str, Any]] = field(default_factory=list)
    responses: list[AssistantMessage] = field(default_factory=list)
    """The model's responses, in order (what replay answers with), summary requests' included."""
    compactions: list[dict[str, Any]] = field(default_factory=list)
    """The `compaction` facts, in order (`messages` is the compacted transcript)."""
    interrupted: list[str] = field(default_factory=list)
    """Ids of calls that got a synthesised "interrupted" result."""
    warnings: list[str] = field(default_factory=list)
    signed: bool = True
    """False for a file with no signatures that was explicitly allowed (`unsigned=True`): untrusted."""


def _read_lines(path: Path, *, verify: bool = False,
                unsigned: bool = False) -> tuple[list[dict[str, Any]], list[str], bool]:
    """The facts of a file, the problems skipped, and whether it was verified. With `verify`, a line that
    does not verify raises `SessionError` naming the file and the line; an unsigned file does unless
    `unsigned`."""
    facts: list[dict[str, Any]] = []
    problems: list[str] = []
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise SessionError(f"cannot read {path}: {exc}") from None
    lines = raw.split(b"\n")
    key: bytes | None = None
    chain = START
    signed = False
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            fact = json.loads(line)
            if not isinstance(fact, dict):
                raise ValueError("not an object")
        except ValueError as exc:
            last = number == len(lines) or (number == len(lines) - 1 and not lines[-1])
            what = "truncated last line" if last else f"corrupt line {number}"
            problems.append(f"{path.name}: {what} skipped ({exc})")
            continue
        if verify:
            if not facts:
                _header(path, [fact])  # a newer format says so (it may sign differently); no header says so
                signed = "mac" in fact
                key = _reading_key(path, fact) if signed else None
                if not signed and not unsigned:
                    raise SessionError(
                        f"{path} is not signed (written before nbagent signed its sessions, or its signatures were "
                        f"removed): it cannot be told apart from a forged one, so it is not resumed or replayed. "
                        f"If you know where it came from: {UNSIGNED_VARIABLE}=allow, or unsigned=True")
            if signed:
                opened = unseal(key, chain, line)  # type: ignore[arg-type]
                if opened is None:
                    why = "it has no signature" if "mac" not in fact else "its signature does not match"
                    raise SessionError(
                        f"{path}: line {number} does not verify ({why}): the file was changed by something other "
                        "than nbagent (a line edited, added, moved, taken from another file, or one before it "
                        "removed), so it is not resumed or replayed")
                chain = opened[1]
        fact.pop("mac", None)
        facts.append(fact)
    return facts, problems, signed


def _reading_key(path: Path, header: dict[str, Any]) -> bytes:
    try:
        key = session_key(create=False)
    except OSError as exc:
        raise SessionError(f"{path} is signed, but nbagent's session key cannot be read: {exc}") from None
    if key is None:
        raise SessionError(f"{path} is signed, but nbagent's session key ({config_dir() / 'session.key'}) is "
                           "missing, so it cannot be verified: it was written on another machine or account, or "
                           "the key was removed")
    if header.get("key_id") != key_id(key):
        raise SessionError(f"{path} was signed with another session key than this one ({config_dir()}): "
                           "written on another machine or account, or the key was replaced; it cannot be verified")
    return key


def _header(path: Path, facts: list[dict[str, Any]]) -> dict[str, Any]:
    if not facts or facts[0].get("kind") != "session":
        raise SessionError(f"{path} is not an nbagent session (no header line)")
    head = facts[0]
    fmt = head.get("format")
    if not isinstance(fmt, int):
        raise SessionError(f"{path} has no format version: it was not written by nbagent's session store")
    if fmt > FORMAT:
        raise SessionError(f"{path} was written by a newer nbagent (format {fmt}; this one reads up to {FORMAT}): "
                           "upgrade nbagent to resume it")
    return head


def _info(path: Path, facts: list[dict[str, Any]]) -> SessionInfo:
    head = _header(path, facts)
    given = head.get("id")
    if not isinstance(given, str) or given != path.stem or not _ID.match(given):
        raise SessionError(f"{path}: its header names the session {given!r}, not {path.stem!r}, the file's own "
                           "name (the file was renamed, copied or forged), so it is not used")
    text = lambda v: v if isinstance(v, str) else None  # noqa: E731
    created = head.get("created")
    info = SessionInfo(given, path, text(head.get("notebook")),
                       created if isinstance(created, (int, float)) and not isinstance(created, bool) else 0.0,
                       model=text(head.get("model")), origin=text(head.get("origin")),
                       notebook_id=text(head.get("notebook_id")))
    for fact in facts[1:]:
        kind = fact.get("kind")
        if kind == "notebook":
            info.notebook_id = text(fact.get("notebook_id")) or info.notebook_id
            info.notebook = text(fact.get("notebook")) or info.notebook
        elif kind == "settings" and isinstance(fact.get("settings"), dict):
            info.settings = fact["settings"]
        elif kind == "end":
            info.ended.append(str(fact.get("status")))
        elif kind == "run":
            info.runs += 1
            info.last_prompt = fact.get("prompt") or ""
            info.model = fact.get("model") or info.model
        elif kind == "message" and (fact.get("message") or {}).get("role") == "assistant":
            info.turns += 1
        elif kind == "call":
            info.calls += 1
    try:
        info.updated = path.stat().st_mtime
    except OSError:
        info.updated = info.created
    return info


def list_sessions(workspace: str | os.PathLike[str], *, notebook: str | None = None,
                  notebook_id: str | None = None) -> list[SessionInfo]:
    """The stored conversations of a workspace, oldest first (only `notebook`'s, when given: those that carry
    its `notebook_id`, or, written without one, its path)."""
    found: list[SessionInfo] = []
    folder = sessions_dir(workspace)
    if not folder.is_dir():
        return found
    for path in folder.glob("*.jsonl"):
        try:
            _check_id(path.stem)
            _inside(path, folder)
            facts, _, _ = _read_lines(path)
            info = _info(path, facts)
        except SessionError:
            continue
        if notebook_id is not None and info.notebook_id is not None:
            if info.notebook_id == notebook_id:
                found.append(info)
        elif notebook is None and notebook_id is None or notebook is not None and _same_notebook(info.notebook, notebook):
            found.append(info)
    found.sort(key=lambda i: (i.created, i.id))
    return found


def _same_notebook(a: str | None, b: str) -> bool:
    if a is None:
        return False
    return os.path.normcase(os.path.abspath(a)) == os.path.normcase(os.path.abspath(b))


def _inside(path: Path, folder: Path) -> Path:
    """The real path of `path`, which must stay inside `folder` (no link or name leads out)."""
    real, top = os.path.realpath(path), os.path.realpath(folder)
    if not real.startswith(top.rstrip(os.sep) + os.sep):
        raise SessionError(f"{path} leads outside {folder} (a symbolic link?), so it is not read")
    return Path(real)


def load_session(workspace: str | os.PathLike[str], session_id: str, *, unsigned: bool | None = None) -> StoredSession:
    """Read a stored conversation back (see the module docstring for what is repaired and verified).

    `unsigned`: accept a file with no signatures, as untrusted (default: `NBAGENT_UNSIGNED_SESSIONS=allow`)."""
    if unsigned is None:
        unsigned = os.environ.get(UNSIGNED_VARIABLE, "").strip().lower() == "allow"
    folder = sessions_dir(workspace)
    path = folder / f"{_check_id(session_id)}.jsonl"
    if not path.exists():
        known = ", ".join(i.id for i in list_sessions(workspace)[-5:]) or "none"
        raise SessionError(f"no session {session_id!r} in {path.parent} (recent: {known})")
    _inside(path, folder)
    facts, problems, signed = _read_lines(path, verify=True, unsigned=unsigned)
    info = _info(path, facts)
    stored = StoredSession(info, warnings=problems, signed=signed)
    if not signed:
        stored.warnings.append(f"{path.name} is not signed: read as untrusted, because unsigned files were allowed")
    side = path.parent / f"{info.id}.d"
    for fact in facts[1:]:
        kind = fact.get("kind")
        try:
            if kind == "message":
                data = _restore(fact["message"], side, signed)
                message = message_from_neutral(data)
                stored.messages.append(message)
                if isinstance(message, AssistantMessage):
                    stored.responses.append(message)
            elif kind == "compaction":
                start, end = int(fact["start"]), int(fact["end"])
                if not 0 <= start <= end <= len(stored.messages):
                    raise ValueError(f"it replaces messages {start}:{end} of {len(stored.messages)}")
                stored.messages[start:end] = [message_from_neutral(_restore(m, side, signed)) for m in fact["replacement"]]
                stored.responses.extend(message_from_neutral(m) for m in fact.get("responses", []))
                stored.compactions.append(fact)
            elif kind == "call":
                stored.calls.append(fact)
            elif kind == "request":
                stored.requests.append(_whole_body(fact.get("body"), stored.requests[-1] if stored.requests else None))
            elif kind in ("run", "end"):
                stored.runs.append(fact)
        except SessionError:
            raise
        except (KeyError, TypeError, ValueError) as exc:
            stored.warnings.append(f"{path.name}: a {kind} line could not be read ({exc}); skipped")
    stored.messages, stored.interrupted = repair_transcript(stored.messages)
    for problem in stored.warnings:
        warnings.warn(problem, stacklevel=2)
    return stored


def _whole_body(body: Any, previous: Any) -> Any:
    """A request body as sent, from its stored form (see `SessionWriter.request`)."""
    if not isinstance(body, dict):
        return body
    whole = dict(body)
    for key, value in body.items():
        if isinstance(value, dict) and set(value) == {"$prefix", "rest"}:
            before = previous.get(key) if isinstance(previous, dict) else None
            if not isinstance(before, list) or len(before) < value["$prefix"]:
                raise ValueError(f"request field {key!r} continues a request that is missing")
            whole[key] = before[: value["$prefix"]] + list(value["rest"])
    return whole


def find_session(workspace: str | os.PathLike[str], session_id: str | None = None, *,
                 notebook: str | None = None, unsigned: bool | None = None) -> StoredSession:
    """`load_session(session_id)`, or with None the latest conversation of `notebook` (when given and it
    has one), else the workspace's latest; `SessionError` saying so when there is none."""
    if session_id is None:
        found = (list_sessions(workspace, notebook=notebook) if notebook else []) or list_sessions(workspace)
        if not found:
            raise SessionError(f"no stored conversation in {workspace} to resume")
        session_id = found[-1].id
    return load_session(workspace, session_id, unsigned=unsigned)


def _restore(data: dict[str, Any], side: Path, signed: bool = False) -> dict[str, Any]:
    content = data.get("content")
    if not isinstance(content, list) or not any(isinstance(b, dict) and b.get("side_file") for b in content):
        return data
    blocks = []
    for block in content:
        name = block.get("side_file") if isinstance(block, dict) else None
        if isinstance(name, str) and _SIDE_NAME.match(name):
            try:
                path = _inside(side / name, side.parent)
                text = path.read_text(encoding="utf-8")
            except (OSError, SessionError):
                pass  # the cut copy stands in
            else:
                digest = block.get("side_sha256")
                if digest != hashlib.sha256(text.encode("utf-8")).hexdigest() and (signed or digest is not None):
                    raise SessionError(f"the side file {side.name}/{name} is not the one its signed line names (it "
                                       "was changed or replaced), so this session is not resumed or replayed")
                block = {k: v for k, v in block.items() if k != "side_sha256"}
                block["text"] = text
        blocks.append(block)
    return {**data, "content": blocks}


def repair_transcript(messages: list[Message]) -> tuple[list[Message], list[str]]:
    """The transcript with every unanswered tool call given an "interrupted" result right after its
    message, results whose call is missing dropped, and a prompt directly followed by another prompt (a
    run that failed before any answer) left out: valid for every provider."""
    out: list[Message] = []
    interrupted: list[str] = []
    pending: dict[str, str] = {}

    def close_pending() -> None:
        for call_id, name in pending.items():
            out.append(ToolResultMessage(call_id, name, [TextBlock(INTERRUPTED)], True))
            interrupted.append(call_id)
        pending.clear()

    answered: set[str] = set()
    for i, m in enumerate(messages):
        if isinstance(m, UserMessage) and i + 1 < len(messages) and isinstance(messages[i + 1], UserMessage):
            continue  # the prompt of a run that failed before any answer: the next prompt replaces it
        if isinstance(m, ToolResultMessage):
            if m.tool_call_id in pending:
                del pending[m.tool_call_id]
                answered.add(m.tool_call_id)
                out.append(m)
            continue  # a result without its call (or a second one) cannot be sent
        close_pending()
        out.append(m)
        if isinstance(m, AssistantMessage):
            for call in m.tool_calls:
                if call.id not in answered:
                    pending[call.id] = call.name
    close_pending()
    return out, interrupted


def delete_session(workspace: str | os.PathLike[str], session_id: str) -> Path:
    """Remove a stored conversation and its side files; returns the path it had."""
    import shutil

    path = sessions_dir(workspace) / f"{_check_id(session_id)}.jsonl"
    if not path.exists():
        raise SessionError(f"no session {session_id!r} in {path.parent}")
    path.unlink()
    shutil.rmtree(path.parent / f"{session_id}.d", ignore_errors=True)
    return path
