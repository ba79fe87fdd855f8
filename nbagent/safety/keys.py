"""Provider keys and endpoints the person stored, kept beside the trust store, outside every notebook and workspace.

    $NBAGENT_CONFIG_DIR, else $XDG_CONFIG_HOME/nbagent, else ~/.config/nbagent   (folder 0700)
        keys.json   {"format": 1, "values": {"OPENAI_API_KEY": "...", "OLLAMA_BASE_URL": "http://..."}}   (0600)

A value is stored under the name of the environment variable a provider reads it from, and `lookup(name)` is
how providers read them: the environment first, then this file. So a key set in the environment always wins,
`openai:` and `openai-responses:` share one stored OpenAI key as they share the variable, and a stored key is
redacted as `[REDACTED:OPENAI_API_KEY]` like the environment's: every stored value whose name is a credential's
(`secrets.SECRET_VARIABLE_PATTERN`) is registered with `secrets.add_secret` whenever the file is read or written.

Why a file and not the OS keyring: the folder is the one the sandbox already hides from shell commands and the
file tools never reach (`sandbox.secret_places`), so what the model's tools can touch is known; a kernel often
runs where no keyring backend exists (a server, a container, a remote Jupyter), and a keyring that falls back to
another store would put keys where those walls do not stand.

Reads: this file, which only the person (and programs they run) can write. A file that cannot be read holds
nothing and says why in a warning (never its content); a file others may read is made 0600 again.
"""

from __future__ import annotations

import fcntl
import json
import os
import stat
import tempfile
import warnings
from pathlib import Path

from .secrets import SECRET_VARIABLE_PATTERN, add_secret
from .trust import config_dir

__all__ = ["KEYS_FILE", "keys_path", "lookup", "remove", "store", "stored", "stored_values"]

KEYS_FILE = "keys.json"
FORMAT = 1
MAX_VALUE = 4096


def keys_path() -> Path:
    """Where stored keys live (see the module docstring); not created here."""
    return config_dir() / KEYS_FILE


def _secret(name: str) -> bool:
    return SECRET_VARIABLE_PATTERN.search(name) is not None


def _register(values: dict[str, str]) -> None:
    for name, value in values.items():
        if _secret(name):
            add_secret(value, name)


def stored_values() -> dict[str, str]:
    """Everything stored, by variable name (registered with the secret gate as it is read)."""
    path = keys_path()
    try:
        info = path.stat()
        if info.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
            os.chmod(path, 0o600)  # someone made it readable by others: it holds keys
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        warnings.warn(f"nbagent's key file {path} cannot be read ({type(exc).__name__}); no stored key is used",
                      stacklevel=2)
        return {}
    raw = data.get("values") if isinstance(data, dict) else None
    values = {k: v for k, v in (raw or {}).items() if isinstance(k, str) and isinstance(v, str) and v.strip()} \
        if isinstance(raw, dict) else {}
    _register(values)
    return values


def stored(name: str) -> str | None:
    """The value stored under a variable's name (None: none)."""
    return stored_values().get(name)


def lookup(name: str) -> str | None:
    """A provider's setting: the environment variable when it is set, else the stored value (None: neither)."""
    value = os.environ.get(name, "")
    if value.strip():
        return value
    return stored(name)


def _check(name: str, value: str | None) -> None:
    if not isinstance(name, str) or not name.replace("_", "").isalnum() or not name.isupper():
        raise ValueError("a stored setting is named like an environment variable (OPENAI_API_KEY)")
    if value is not None and (not isinstance(value, str) or not value.strip() or len(value) > MAX_VALUE):
        raise ValueError(f"the value for {name} must be non-empty text of at most {MAX_VALUE} characters")


def _write(change: dict[str, str | None]) -> None:
    folder = config_dir()
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    if folder.stat().st_mode & (stat.S_IRWXG | stat.S_IRWXO):
        os.chmod(folder, 0o700)
    with open(folder / (KEYS_FILE + ".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        values = stored_values()
        for name, value in change.items():
            if value is None:
                values.pop(name, None)
            else:
                values[name] = value
        text = json.dumps({"format": FORMAT, "values": values}, indent=1, sort_keys=True)
        fd, temp = tempfile.mkstemp(prefix=".keys-", dir=folder)  # 0600 from the start
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                out.write(text)
                out.flush()
                os.fsync(out.fileno())
            os.chmod(temp, 0o600)
            os.replace(temp, folder / KEYS_FILE)
        except BaseException:
            Path(temp).unlink(missing_ok=True)
            raise


def store(name: str, value: str) -> None:
    """Keep `value` under the variable's name (registered with the secret gate first, so nothing shows it)."""
    _check(name, value)
    if _secret(name):
        add_secret(value, name)
    _write({name: value})


def remove(name: str) -> bool:
    """Forget what is stored under the variable's name; whether there was something."""
    _check(name, None)
    if name not in stored_values():
        return False
    _write({name: None})
    return True
