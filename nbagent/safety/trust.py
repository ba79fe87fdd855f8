"""The person's trust, kept outside the workspace: which workspace configurations may start, and the key
that signs stored sessions.

    $NBAGENT_CONFIG_DIR, else $XDG_CONFIG_HOME/nbagent, else ~/.config/nbagent   (folder 0700)
        trusted.json   {"format": 1, "trusted": [{"path": REAL PATH, "sha256": DIGEST, "time": T}, ...]}
        session.key    the HMAC-SHA256 key of stored sessions: 32 random bytes as hex, 0600, made on first use

A trust is for one file's real path and the sha256 of its exact content: a changed file is not trusted
until the person trusts it again. Reads: the two files above, which only the person (and programs they run)
can write: the model's file tools ask before writing into this folder (see `nbagent.safety.protected`), and it is
outside the workspace unless the workspace is a home folder. A trust store that cannot be read trusts
nothing (fails closed) and says why in a warning.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import secrets
import time
import warnings
from pathlib import Path
from typing import Any

__all__ = ["CONFIG_DIR_VARIABLE", "config_dir", "content_digest", "forget", "is_trusted", "session_key", "trust",
           "trusted_entries"]

CONFIG_DIR_VARIABLE = "NBAGENT_CONFIG_DIR"
"""Where the trust store and the session key live, when set (tests and unusual setups)."""
FORMAT = 1


def config_dir() -> Path:
    """The person's nbagent folder (see the module docstring); not created here."""
    given = os.environ.get(CONFIG_DIR_VARIABLE)
    if given:
        return Path(given).expanduser()
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return Path(base) / "nbagent"


def content_digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _store() -> Path:
    return config_dir() / "trusted.json"


def trusted_entries() -> list[dict[str, Any]]:
    """What the store holds (an unreadable store holds nothing)."""
    path = _store()
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return []
    except (OSError, ValueError) as exc:
        warnings.warn(f"nbagent's trust store {path} cannot be read ({exc}); nothing in a workspace is trusted",
                      stacklevel=2)
        return []
    entries = data.get("trusted") if isinstance(data, dict) else None
    if not isinstance(entries, list):
        return []
    return [e for e in entries if isinstance(e, dict) and isinstance(e.get("path"), str)
            and isinstance(e.get("sha256"), str)]


def _key(path: str | os.PathLike[str]) -> str:
    return os.path.normcase(os.path.realpath(os.fspath(path)))


def is_trusted(path: str | os.PathLike[str], digest: str) -> bool:
    """Whether the person trusted this file (by real path) with exactly this content."""
    key = _key(path)
    return any(e["path"] == key and e["sha256"] == digest for e in trusted_entries())


def trust(path: str | os.PathLike[str], digest: str) -> None:
    """Record that the person trusts this file with this content (an older trust of the file is replaced)."""
    key = _key(path)
    _update(lambda entries: [e for e in entries if e["path"] != key]
            + [{"path": key, "sha256": digest, "time": time.time()}])


def forget(path: str | os.PathLike[str]) -> int:
    """Forget every trust of this file; return how many there were."""
    key = _key(path)
    before = len(trusted_entries())
    _update(lambda entries: [e for e in entries if e["path"] != key])
    return before - len(trusted_entries())


def _update(change: Any) -> None:
    folder = config_dir()
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    lock = os.open(folder / ".lock", os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        entries = change(trusted_entries())
        _write_private(_store(), json.dumps({"format": FORMAT, "trusted": entries}, indent=1).encode("utf-8"))
    finally:
        os.close(lock)


def _write_new(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_private(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}")
    _write_new(tmp, data)
    os.replace(tmp, path)


def session_key(*, create: bool = True) -> bytes | None:
    """The key stored sessions are signed with (made, 0600, on first use when `create`); None when there
    is none and `create` is False. Read each time it is asked for (a writer asks once)."""
    folder = config_dir()
    path = folder / "session.key"
    try:
        text = path.read_text(encoding="ascii").strip()
    except FileNotFoundError:
        if not create:
            return None
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        tmp = folder / f".session.key.{secrets.token_hex(4)}"
        _write_new(tmp, (secrets.token_hex(32) + "\n").encode("ascii"))
        try:
            os.link(tmp, path)  # appears whole or not at all; another kernel's key wins a race
        except FileExistsError:
            pass
        finally:
            tmp.unlink()
        text = path.read_text(encoding="ascii").strip()
    try:
        key = bytes.fromhex(text)
    except ValueError:
        raise OSError(f"nbagent's session key {path} is damaged (not hex); move it away to make a new one "
                      "(sessions signed with it can then no longer be verified)") from None
    if len(key) < 16:
        raise OSError(f"nbagent's session key {path} is too short ({len(key)} bytes)")
    return key
