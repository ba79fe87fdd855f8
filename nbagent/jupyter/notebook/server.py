"""The Jupyter server that started this kernel, and the notebook the kernel serves there.

Reads: the kernel's connection file name (it carries the kernel's id), the server information files
(`jpserver-<pid>.json`) in Jupyter's runtime folder, and the server's sessions API. Who could have written
them: the runtime folder and its files are made by the server for its user (folder 0700, files 0600); another
process of the same user could write a forged file there (shell commands never see that folder, SECURITY.md
invariant 6; the model's file tools stay inside the workspace), and someone who set `JUPYTER_RUNTIME_DIR` to a
shared folder could too. What stops harm: a file is used only when it is this user's, neither it nor its folder
is writable by anyone else, and it names a process that started this kernel (its parent, or an ancestor); its
token goes only to the address written in that same file, and the server must then list this kernel's id in a
session, which gives the notebook's path. The notebook that comes back is untrusted as any notebook is: its
cells are text for the model, and a cell runs only with approval of exactly the code shown.
"""

from __future__ import annotations

import json
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

__all__ = ["NoEngine", "NoServer", "ServerInfo", "kernel_id", "server_candidates"]


class NoServer(Exception):
    """No Jupyter server that started this kernel could be found (the message says why)."""


class NoEngine(Exception):
    """The server runs no collaboration engine (or not one this kernel can join)."""


@dataclass(frozen=True)
class ServerInfo:
    """A Jupyter server as its information file describes it."""

    url: str
    """Its base URL, ending with "/" (`http://127.0.0.1:8888/`)."""
    token: str
    pid: int
    root_dir: str

    def api(self, path: str) -> str:
        return self.url + path.lstrip("/")

    def websocket(self, path: str) -> str:
        parts = urlsplit(self.api(path))
        return urlunsplit(("wss" if parts.scheme == "https" else "ws", *parts[1:]))


_KERNEL_FILE = re.compile(r"^kernel-([0-9A-Za-z-]{8,64})\.json$")


def kernel_id(connection_file: str | None = None) -> str:
    """This kernel's id, from its connection file's name (`kernel-<id>.json`, as Jupyter servers name it)."""
    if connection_file is None:
        try:
            from ipykernel.connect import get_connection_file

            connection_file = get_connection_file()
        except Exception as exc:
            raise NoServer(f"this is not a kernel with a connection file ({exc})") from None
    m = _KERNEL_FILE.match(Path(connection_file).name)
    if m is None:
        raise NoServer("the kernel's connection file was not named by a Jupyter server (kernel-<id>.json)")
    return m.group(1)


def _ancestors(limit: int = 12) -> list[int]:
    """This process's parent, its parent, ... (Linux's /proc; elsewhere just the parent)."""
    found = []
    pid = os.getppid()
    while pid > 1 and len(found) < limit:
        found.append(pid)
        try:
            text = Path(f"/proc/{pid}/stat").read_text()
            pid = int(text.rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            break
    return found


def _private(path: Path) -> bool:
    """Owned by this user, and writable by nobody else."""
    try:
        info = path.stat()
    except OSError:
        return False
    return info.st_uid == os.getuid() and not info.st_mode & (stat.S_IWGRP | stat.S_IWOTH)


def _runtime_dir() -> Path:
    from jupyter_core.paths import jupyter_runtime_dir

    return Path(jupyter_runtime_dir())


def server_candidates(runtime_dir: Path | None = None, ancestors: list[int] | None = None) -> list[ServerInfo]:
    """The servers whose information files may be trusted (see the module docstring), nearest ancestor first."""
    folder = runtime_dir or _runtime_dir()
    if not _private(folder):
        raise NoServer(f"Jupyter's runtime folder {folder} is missing or writable by others")
    parents = ancestors if ancestors is not None else _ancestors()
    found: list[tuple[int, ServerInfo]] = []
    for pid in parents:
        path = folder / f"jpserver-{pid}.json"
        if not path.is_file() or path.is_symlink() or not _private(path):
            continue
        try:
            data: Any = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        info = _info(data, pid)
        if info is not None:
            found.append((parents.index(pid), info))
    if not found:
        raise NoServer("no Jupyter server started this kernel (the kernel runs outside a server, "
                       "or under a server that left no information file)")
    return [info for _, info in sorted(found, key=lambda pair: pair[0])]


def _info(data: Any, pid: int) -> ServerInfo | None:
    if not isinstance(data, dict) or data.get("pid") != pid or data.get("sock"):
        return None  # another process's file, or a server on a Unix socket (not reached from here)
    url, token = data.get("url"), data.get("token", "")
    if not isinstance(url, str) or not isinstance(token, str):
        return None
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return None
    if parts.hostname in ("0.0.0.0", "::"):  # every interface: this machine's loopback is one of them
        parts = parts._replace(netloc=parts.netloc.replace(parts.hostname, "127.0.0.1", 1))
    base = urlunsplit((parts.scheme, parts.netloc, parts.path.rstrip("/") + "/", "", ""))
    return ServerInfo(base, token, pid, str(data.get("root_dir") or ""))
