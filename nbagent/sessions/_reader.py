"""Reading conversations back from the store: `load_session`, `list_sessions`, `find_session`.

`load_session` skips a truncated or corrupt line with a warning (never fatal), refuses a file written by
a newer format with a clear message, and gives calls that were in flight when the writer died a
synthesised "interrupted" result (`_transcript.repair_transcript`), so the transcript is valid before the next request.

Reads: files in the workspace, which the model, a cloned repository or anyone who can write the workspace could
have forged or changed. What could happen: a forged conversation resumed or replayed (calls nobody saw, answers
nobody gave), an id or a side-file name that builds a path outside the store. What stops it: every line is signed
(`nbagent.safety.signing`: HMAC-SHA256, chained, with a key kept outside the workspace), and `load_session`
refuses a file whose lines do not verify, naming the file and the line, or that ends before the line its writer
last closed it at (`_ends`: lines removed from its end); side files are named by a digest inside their signed
line; ids are checked (`_folder.check_id`) before they build a path, a header must name its own file, and every
path read stays inside the sessions folder. A listing (`list_sessions`, and so every "latest conversation") holds
only files that verify, and names the others (`Sessions.skipped`). A file with no signatures (written before they
existed, or stripped) is refused unless explicitly allowed (`unsigned=True`, or `NBAGENT_UNSIGNED_SESSIONS=allow`),
and is then marked `signed=False`. A replay approves nothing by itself either way: every call goes through the
permission pipeline.
"""

from __future__ import annotations

import json
import os
import re
import time
import warnings
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import orjson

from ..messages import AssistantMessage, Message
from ..reprs import shortened
from ..safety.signing import START, key_id, signer, unseal
from ..safety.trust import config_dir, session_key
from ..transcript import message_from_neutral
from . import _ends
from ._folder import FORMAT, ID, SessionError, check_id, inside, sessions_dir
from ._transcript import repair_transcript, restore_side_files, whole_body

__all__ = ["UNSIGNED_VARIABLE", "SessionInfo", "Sessions", "Skipped", "StoredSession", "delete_session", "find_session",
           "list_sessions", "load_session"]

UNSIGNED_VARIABLE = "NBAGENT_UNSIGNED_SESSIONS"
"""`allow`: resume and replay files with no signatures (read as untrusted: `StoredSession.signed` False)."""


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
    first_prompt: str = ""
    """What the person said to start it (the first run's prompt, their own words)."""
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
        prompt = shortened(self.last_prompt, 50)
        from ..safety.sanitize import terminal_safe  # the file is stored state: anyone who can write it chose these
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
    key: Any = None
    chain = START
    signed = False
    reached = (end := _ends.expected(path) if verify else None) is None  # the line a writer last closed it at
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            fact = _parse(line)
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
                key = signer(_reading_key(path, fact)) if signed else None
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
                reached = reached or chain == end
        fact.pop("mac", None)
        facts.append(fact)
    if signed and not reached:
        raise SessionError(f"{path} ends before the last line nbagent wrote to it when it last closed it (recorded "
                           "outside the workspace): lines were removed from its end, so it is not resumed or replayed")
    return facts, problems, signed


_LONG_DIGITS = re.compile(rb"[0-9]{19}")


def _parse(line: bytes) -> Any:
    """One line's JSON: orjson, but for what it reads differently from `json` (an integer beyond 64 bits it
    makes a float, so a line with 19 digits in a row goes to `json`) or refuses (NaN, a lone surrogate)."""
    if _LONG_DIGITS.search(line) is None:
        try:
            return orjson.loads(line)
        except orjson.JSONDecodeError:
            pass
    return json.loads(line)


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
    if not isinstance(given, str) or given != path.stem or not ID.match(given):
        raise SessionError(f"{path}: its header names the session {given!r}, not {path.stem!r}, the file's own "
                           "name (the file was renamed, copied or forged), so it is not used")
    text = lambda v: v if isinstance(v, str) else None  # noqa: E731
    created = head.get("created")
    info = SessionInfo(given, path, text(head.get("notebook")),
                       created if isinstance(created, (int, float)) and not isinstance(created, bool) else 0.0,
                       model=text(head.get("model")), origin=text(head.get("origin")),
                       notebook_id=text(head.get("notebook_id")))
    asked_calls = 0
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
            if info.runs == 1:
                info.first_prompt = info.last_prompt
            info.model = fact.get("model") or info.model
        elif kind == "message" and (fact.get("message") or {}).get("role") == "assistant":
            info.turns += 1
            asked = fact["message"].get("tool_calls")
            asked_calls += len(asked) if isinstance(asked, list) else 0
        elif kind == "call":
            info.calls += 1
    # a call in flight when the kernel went has no record yet, but the model asked for it (and resuming answers
    # it "interrupted"): counted as the model's answers name them
    info.calls = max(info.calls, asked_calls)
    try:
        info.updated = path.stat().st_mtime
    except OSError:
        info.updated = info.created
    return info


@dataclass(frozen=True, slots=True)
class Skipped:
    """A file of the sessions folder that `list_sessions` left out, and why (it does not verify)."""

    name: str
    """The file's name, control characters written as escapes."""
    why: str

    def __str__(self) -> str:
        return f"{self.name}: {self.why}"


class Sessions(list):  # type: ignore[type-arg]
    """What `list_sessions` answers: the conversations whose every line verifies (a list of `SessionInfo`,
    oldest first), and in `skipped` the files left out because they do not (unsigned, forged, edited, signed
    with another key), so a listing can name them."""

    def __init__(self, infos: Any = (), skipped: Any = ()) -> None:
        super().__init__(infos)
        self.skipped: list[Skipped] = list(skipped)


_VERIFIED: dict[tuple[Any, ...], SessionInfo] = {}
"""Files verified by a listing, by what `stat` says of them (device, inode, size, modification and change
times: any write changes the change time, which no program can set back), so that listing again reads
only what changed."""
_VERIFIED_MAX = 512


def _verified_info(path: Path) -> SessionInfo:
    """The `SessionInfo` of a file whose every line verifies (`SessionError` saying why when one does not)."""
    st = path.stat()  # before the read: what is cached under this key was read at or after it
    key = (str(path), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
    known = _VERIFIED.get(key)
    if known is not None:
        return replace(known)
    facts, _, _ = _read_lines(path, verify=True, unsigned=False)
    info = _info(path, facts)
    if len(_VERIFIED) >= _VERIFIED_MAX:
        _VERIFIED.clear()
    _VERIFIED[key] = replace(info)
    return info


def list_sessions(workspace: str | os.PathLike[str], *, notebook: str | None = None,
                  notebook_id: str | None = None) -> Sessions:
    """The stored conversations of a workspace, oldest first (only `notebook`'s, when given: those that carry
    its `notebook_id`, or, written without one, its path).

    Only files whose every line verifies are listed: the order (a header's `created`), the notebook a file
    names and its counts are read from signed lines, so a forged or edited file (or an unsigned one, even with
    `NBAGENT_UNSIGNED_SESSIONS=allow`: that lets a file be resumed by its id, never be picked) is never "the
    latest". The files left out are in the answer's `skipped`, each with why."""
    found = Sessions()
    folder = sessions_dir(workspace)
    if not folder.is_dir():
        return found
    for path in sorted(folder.glob("*.jsonl")):
        try:
            check_id(path.stem)
            inside(path, folder)
            info = _verified_info(path)
        except SessionError as exc:
            found.skipped.append(Skipped(_printable(path.name), _printable(str(exc).replace(str(path), path.name))))
            continue
        except OSError as exc:
            found.skipped.append(Skipped(_printable(path.name), f"cannot be read: {exc.strerror or exc}"))
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


def load_session(workspace: str | os.PathLike[str], session_id: str, *, unsigned: bool | None = None) -> StoredSession:
    """Read a stored conversation back (see the module docstring for what is repaired and verified).

    `unsigned`: accept a file with no signatures, as untrusted (default: `NBAGENT_UNSIGNED_SESSIONS=allow`)."""
    if unsigned is None:
        unsigned = os.environ.get(UNSIGNED_VARIABLE, "").strip().lower() == "allow"
    folder = sessions_dir(workspace)
    path = folder / f"{check_id(session_id)}.jsonl"
    if not path.exists():
        known = ", ".join(i.id for i in list_sessions(workspace)[-5:]) or "none"
        raise SessionError(f"no session {session_id!r} in {path.parent} (recent: {known})")
    inside(path, folder)
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
                data = restore_side_files(fact["message"], side, signed)
                message = message_from_neutral(data)
                stored.messages.append(message)
                if isinstance(message, AssistantMessage):
                    stored.responses.append(message)
            elif kind == "compaction":
                start, end = int(fact["start"]), int(fact["end"])
                if not 0 <= start <= end <= len(stored.messages):
                    raise ValueError(f"it replaces messages {start}:{end} of {len(stored.messages)}")
                stored.messages[start:end] = [message_from_neutral(restore_side_files(m, side, signed)) for m in fact["replacement"]]
                stored.responses.extend(message_from_neutral(m) for m in fact.get("responses", []))
                stored.compactions.append(fact)
            elif kind == "call":
                stored.calls.append(fact)
            elif kind == "request":
                stored.requests.append(whole_body(fact.get("body"), stored.requests[-1] if stored.requests else None))
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


def find_session(workspace: str | os.PathLike[str], session_id: str | None = None, *,
                 notebook: str | None = None, unsigned: bool | None = None) -> StoredSession:
    """`load_session(session_id)`, or with None the latest conversation of `notebook` (when given and it
    has one), else the workspace's latest; `SessionError` saying so when there is none."""
    if session_id is None:
        listed = list_sessions(workspace)
        found = (list_sessions(workspace, notebook=notebook) if notebook else []) or listed
        if not found:
            left = f" ({len(listed.skipped)} file(s) that do not verify were left out)" if listed.skipped else ""
            raise SessionError(f"no stored conversation in {workspace} to resume{left}")
        session_id = found[-1].id
    return load_session(workspace, session_id, unsigned=unsigned)


def delete_session(workspace: str | os.PathLike[str], session_id: str) -> Path:
    """Remove a stored conversation and its side files; returns the path it had."""
    import shutil

    path = sessions_dir(workspace) / f"{check_id(session_id)}.jsonl"
    if not path.exists():
        raise SessionError(f"no session {session_id!r} in {path.parent}")
    _ends.forget(path)
    path.unlink()
    shutil.rmtree(path.parent / f"{session_id}.d", ignore_errors=True)
    return path
