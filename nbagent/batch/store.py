"""Batches that outlive the kernel: one append-only JSONL file per batch, written by one writer task.

    <workspace>/.nbagent/batches/<id>.jsonl

The first line is the header (`kind: "batch"`: id, format, created, model, prompt, size); each later line
is one item that ended (`kind: "item"`: its key, index, status, output, error, usage, cost). An item's key
is a hash of its rendered prompt (which holds its input), the model, the tools and the output type, so
resuming with other inputs, another model or other tools asks again.

Writing is grouped: items hand their line to `BatchWriter.add` (serialising and redacting, a few µs), and
one writer task writes everything gathered in one `write` under an exclusive `flock`, then one `fsync`,
at most every `FLUSH_SECONDS` (and at the end). A killed kernel loses at most the items of the last
interval: they are run again on resume, never counted twice (the last line of a key wins).

Every line is signed as the session store's are (`nbagent.safety.signing`: HMAC-SHA256, chained, with the key
kept outside the workspace, `nbagent.safety.trust.session_key`).

Reads: the batch file. Who could have written it: anyone who can write the workspace (the model through a
file tool, a cloned repository). What stops harm: the file holds data, never decisions: nothing in it
approves a call or runs anything; ids are checked before they name a path; a line whose MAC does not
verify (edited, forged, moved, or in a file written without the key) is not used: its item is asked
again; a line that does not parse, or whose fields have the wrong types, is skipped; a stored output is
validated again against the batch's `output_type` before it is used, and one that does not fit is asked
again.
"""

from __future__ import annotations

import asyncio
import fcntl
import hashlib
import json
import os
import re
import time
import warnings
from pathlib import Path
from typing import Any

from ..safety.secrets import redact
from ..safety.signing import START, has_mac, seal, signer, unseal
from ..safety.trust import session_key

__all__ = ["BatchWriter", "FLUSH_SECONDS", "batches_dir", "item_key", "latest_batch", "load_batch"]

FORMAT = 1
FLUSH_SECONDS = 0.2
"""The longest an ended item waits to be written (its fsync is shared with the others of the interval)."""
_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,80}$")
_KEY = re.compile(r"^[0-9a-f]{64}$")
_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), default=str)


def batches_dir(workspace: str | os.PathLike[str]) -> Path:
    return Path(workspace) / ".nbagent" / "batches"


def check_id(batch_id: Any) -> str:
    if not isinstance(batch_id, str) or not _ID.match(batch_id) or batch_id.endswith(".jsonl"):
        raise ValueError(f"{batch_id!r} is not a batch id (letters, digits, '-', '_', '.')")
    return batch_id


def item_key(prompt: Any, model: str | None, tools: list[str], output_type: str | None) -> str:
    """The hash that says "this item was already done": its prompt, model, tools and output type."""
    text = prompt if isinstance(prompt, str) else _ENCODER.encode(prompt)
    raw = _ENCODER.encode([text, model, sorted(tools), output_type])
    return hashlib.sha256(raw.encode("utf-8")).hexdigest()


class BatchWriter:
    """Appends one batch's ended items to its file, grouped (see the module docstring)."""

    def __init__(self, workspace: str | os.PathLike[str], batch_id: str, *, header: dict[str, Any],
                 fsync: bool = True) -> None:
        self.dir = batches_dir(workspace)
        self.id = check_id(batch_id)
        self.path = self.dir / f"{self.id}.jsonl"
        self.fsync = fsync
        self._pending: list[str] = []
        self._wake: asyncio.Event | None = None
        self._task: asyncio.Task | None = None
        self._closed = False
        self.writes = 0
        try:
            key = session_key()
        except OSError as exc:  # storing never fails a batch: unsigned, its items are asked again on resume
            warnings.warn(f"nbagent cannot make its session key ({exc}): batch {self.id} is stored unsigned, "
                          "and a resume will ask for its items again", stacklevel=2)
            key = None
        self._signer = signer(key) if key is not None else None
        self._chain = START
        self.dir.mkdir(parents=True, exist_ok=True)
        self._newline = False
        if self.path.exists():
            self._chain = _last_mac(self.path) or START
            with open(self.path, "rb") as f:  # a file that ends in a line cut short (a killed kernel)
                if f.seek(0, os.SEEK_END) > 0:
                    f.seek(-1, os.SEEK_END)
                    self._newline = f.read(1) != b"\n"
        else:
            self._pending.append(_ENCODER.encode({"kind": "batch", "format": FORMAT, "id": self.id,
                                                  "created": time.time(), **header}))
            self._write(self._taken())

    def add(self, fact: dict[str, Any]) -> None:
        """Queue one line; the writer task writes it within `FLUSH_SECONDS`."""
        self._pending.append(_ENCODER.encode({"kind": "item", **fact}))
        if self._task is None:
            self._wake = asyncio.Event()
            self._task = asyncio.get_running_loop().create_task(self._writer(), name=f"nbagent-batch-store-{self.id}")
        assert self._wake is not None
        self._wake.set()

    async def _writer(self) -> None:
        assert self._wake is not None
        while True:
            await self._wake.wait()
            self._wake.clear()
            if self._closed:
                break
            await asyncio.sleep(FLUSH_SECONDS)  # gather what ends meanwhile: one fsync for all of it
            await asyncio.to_thread(self._write, self._taken())

    def _taken(self) -> list[str]:
        """The lines queued so far, taken on the loop's thread (where `add` queues them): a line queued while
        the store's thread writes goes with the next write, never into a list already written."""
        lines, self._pending = self._pending, []
        return lines

    def _write(self, lines: list[str]) -> None:
        if not lines:
            return
        data = redact("\n".join(lines)).encode("utf-8")  # redacted as text, once; then each line signed
        if self._signer is None:
            data += b"\n"
        else:
            data, self._chain = seal(self._signer, self._chain, data.split(b"\n"))
        if self._newline:  # start a line of our own after a line cut short
            data, self._newline = b"\n" + data, False
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            if self.fsync:
                os.fsync(fd)
        finally:
            os.close(fd)  # closing releases the lock
        self.writes += 1

    async def close(self) -> None:
        """Write what is left and stop the writer task."""
        self._closed = True
        if self._task is not None:
            assert self._wake is not None
            self._wake.set()
            await asyncio.gather(self._task, return_exceptions=True)
        await asyncio.to_thread(self._write, self._taken())


def load_batch(workspace: str | os.PathLike[str], batch_id: str) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """The header of a stored batch and its ended items by key (the last line of a key wins)."""
    path = batches_dir(workspace) / f"{check_id(batch_id)}.jsonl"
    if not path.exists():
        raise ValueError(f"no stored batch {batch_id!r} in {path.parent}")
    header: dict[str, Any] = {}
    items: dict[str, dict[str, Any]] = {}
    bad = unsigned = 0
    key = session_key(create=False)
    chain = START
    with open(path, "rb") as f:
        for number, raw in enumerate(f, 1):
            raw = raw.rstrip(b"\n")
            opened = unseal(key, chain, raw) if key is not None else None
            if has_mac(raw):  # the next line is checked against this one's MAC, verified or not
                chain = bytes.fromhex(raw[-66:-2].decode("ascii"))
            if opened is None:
                unsigned += 1
                if number == 1:  # the header says what the file is; an item from an unverified file is not used
                    try:
                        first = json.loads(raw)
                    except ValueError:
                        first = None
                    if isinstance(first, dict) and first.get("kind") == "batch":
                        header = {k: v for k, v in first.items() if k != "mac"}
                        header["verified"] = False
                continue
            try:
                fact = json.loads(opened[0])
            except ValueError:
                bad += 1
                continue
            if not isinstance(fact, dict):
                bad += 1
            elif number == 1 and fact.get("kind") == "batch":
                header = fact
            elif (fact.get("kind") == "item" and isinstance(fact.get("key"), str) and _KEY.match(fact["key"])
                  and fact.get("status") in ("done", "failed", "cancelled") and isinstance(fact.get("index"), int)):
                items[fact["key"]] = fact
            else:
                bad += 1
    if not header:
        raise ValueError(f"{path} is not a stored batch (no header line)")
    if unsigned:
        warnings.warn(f"batch {batch_id}: {unsigned} line(s) could not be verified (changed, or written without "
                      "nbagent's key) and were not used: their items are asked again", stacklevel=2)
    if isinstance(header.get("format"), int) and header["format"] > FORMAT:
        raise ValueError(f"batch {batch_id} was written by a newer nbagent (format {header['format']})")
    if bad:
        warnings.warn(f"batch {batch_id}: {bad} line(s) could not be read and were skipped", stacklevel=2)
    return header, items


def _last_mac(path: Path) -> bytes | None:
    """The MAC of a file's last whole line (the chain a writer continues from)."""
    with open(path, "rb") as f:
        at = f.seek(0, os.SEEK_END)
        f.seek(max(0, at - 65536))
        tail = f.read()
    whole = tail.split(b"\n")[:-1]  # what follows the last newline is a line cut short, if anything
    lines = [line for line in whole if line.strip()]
    last = lines[-1].rstrip(b"\r") if lines else b""
    return bytes.fromhex(last[-66:-2].decode("ascii")) if has_mac(last) else None


def latest_batch(workspace: str | os.PathLike[str]) -> str | None:
    """The id of the workspace's most recently written batch (None: there is none)."""
    folder = batches_dir(workspace)
    if not folder.is_dir():
        return None
    files = [p for p in folder.glob("*.jsonl") if _ID.match(p.stem)]
    return max(files, key=lambda p: p.stat().st_mtime).stem if files else None
