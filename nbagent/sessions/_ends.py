"""Where a conversation's file ended when a writer last closed it, kept outside the workspace, so that a file cut
short at its end is told from a whole one.

Every line is signed and chained (`nbagent.safety.signing`): a line edited, added, moved, or removed before the
last breaks the chain. Lines removed from the end leave a file whose every line still verifies. So when a writer
closes a signed file (a run's end), `mark` records the chain value of its last line in nbagent's config folder
(beside the session key, outside any workspace: `<config>/session-ends/<digest of the file's path>.json`), and
the reader (`_reader._read_lines`) refuses a file whose chain does not pass through the recorded value. Lines
appended later (the next run, another kernel) continue the chain, so the recorded line stays inside a file that
grew. Not covered: what was written after the last close (a kernel killed during a run leaves its lines since the
previous run's end unmarked), and a file whose workspace moved (its record is found by the file's real path).

Reads: a record in the person's config folder (written by nbagent's writer; the model's tools cannot write
there, a program running as the person could, as it could read the session key itself). What could happen: a
record naming another line makes a whole file refused (resume fails with a message naming the file); nothing in
it is run or shown as markup; a record that is not what `mark` writes is ignored.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
from pathlib import Path

from ..safety.trust import config_dir

__all__ = ["expected", "forget", "mark"]


def _place(path: Path) -> Path:
    return config_dir() / "session-ends" / (hashlib.sha256(str(path.resolve()).encode("utf-8")).hexdigest()[:32]
                                            + ".json")


def mark(path: Path, mac: bytes) -> None:
    """Record that `path`'s last line, when its writer closed it, is the one whose chain value is `mac`. Never
    fails the run: a record that cannot be written leaves the file checked as before (line by line)."""
    try:
        place = _place(path)
        place.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        tmp = place.with_name(f".{place.name}.{secrets.token_hex(4)}")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        try:
            os.write(fd, json.dumps({"path": str(path.resolve()), "mac": mac.hex()}).encode("ascii"))
        finally:
            os.close(fd)
        os.replace(tmp, place)  # whole or not at all
    except (OSError, ValueError):
        pass


def expected(path: Path) -> bytes | None:
    """The chain value of `path`'s last line when a writer last closed it (None: no record)."""
    try:
        record = json.loads(_place(path).read_text(encoding="ascii"))
        if record.get("path") == str(path.resolve()) and isinstance(record.get("mac"), str):
            mac = bytes.fromhex(record["mac"])
            return mac if len(mac) == 32 else None
    except (OSError, ValueError, AttributeError, UnicodeDecodeError):
        pass
    return None


def forget(path: Path) -> None:
    """The file is deleted: so is its record."""
    try:
        _place(path).unlink()
    except OSError:
        pass
