"""The OS sandbox shell commands run in: a wall that holds when the command classifier is wrong.

Three policies, named as other agents name them:

| policy | reads | writes | network | processes |
|---|---|---|---|---|
| `read-only` (what auto-allow runs) | the workspace, system and runtime paths | none (a private `/tmp` that vanishes) | off | all gone when the call ends |
| `workspace-write` (what an approval runs) | the same | the workspace, except `.git/config`, `.git/hooks`, `.git/modules`, `.nbagent/` | off unless allowed | all gone when the call ends |
| `danger-full-access` (explicit opt-in) | everything | everything | on | the process group is stopped |

Backends, chosen once per process by `sandbox_backend()`:

- **Linux, bubblewrap** (`bwrap`, Debian's `bubblewrap`): a new mount namespace that shows only the
  system paths (`/usr`, `/etc`, `/opt`, the `/lib*` and `/bin` links), the Python runtime and the
  directories on `PATH`, then the workspace; the home directory is an empty `tmpfs` (so `~/.ssh`,
  `~/.aws`, dotfiles are not there; `~/.gitconfig` is shown read-only for git's identity). Its own PID
  namespace, killed with its parent, so every process the command starts (`setsid`, `nohup`, daemons)
  is gone when the call ends; its own network namespace (only loopback); no capabilities, even as root;
  `no_new_privs`, so setuid programs cannot raise privileges. Files hidden by read deny rules
  (`deny: read_file(.env)`) are replaced by empty ones inside the sandbox.
- **No sandbox** (bubblewrap missing or unusable, macOS, Windows, or `danger-full-access`): commands
  run as plain processes in their own process group. The view's header says so, and shell auto-allow
  shrinks to `STRICT_READ_ONLY_COMMANDS`, whose options are fully known.

macOS (`sandbox-exec` with a generated profile) is planned, not built: it cannot be tested here.
The `python` tool runs in the kernel itself, by design: no sandbox applies to it.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

__all__ = ["HIDDEN_SCAN_LIMIT", "PROTECTED_PATHS", "SandboxBackend", "hidden_paths", "SandboxPolicy", "sandbox_backend", "sandbox_command",
           "sandbox_policy"]

PROTECTED_PATHS = (".git/config", ".git/hooks", ".git/modules", ".git/info", ".nbagent")
"""Paths inside the workspace that `workspace-write` keeps read-only: what could make a later git
(yours, outside nbagent) run a program, and nbagent's own records."""

_SYSTEM_PATHS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt", "/nix", "/snap")
_HOME_FILES_SHOWN = (".gitconfig", ".config/git")


@dataclass(frozen=True, slots=True)
class SandboxPolicy:
    """What a sandboxed command may touch. `Agent(sandbox=...)` takes one of these or its name."""

    name: str = "workspace-write"
    """read-only, workspace-write or danger-full-access."""
    network: bool = False
    """Let the command reach the network (workspace-write only; read-only never does)."""
    writable: tuple[str, ...] = ()
    """More directories `workspace-write` may write to (absolute paths)."""

    def __post_init__(self) -> None:
        if self.name not in ("read-only", "workspace-write", "danger-full-access"):
            raise ValueError(f"unknown sandbox {self.name!r}; choose read-only, workspace-write or danger-full-access")

    def __str__(self) -> str:
        extra = " + network" if self.network and self.name == "workspace-write" else ""
        return self.name + extra


def sandbox_policy(value: Any) -> SandboxPolicy:
    """A `SandboxPolicy` from a policy or its name."""
    if isinstance(value, SandboxPolicy):
        return value
    if value is None:
        return SandboxPolicy()
    return SandboxPolicy(str(value))


@dataclass(frozen=True, slots=True)
class SandboxBackend:
    """Which OS sandbox this process can use."""

    name: str
    """"bubblewrap", or "none"."""
    path: str | None = None
    """The sandbox program."""
    reason: str = ""
    """Why there is none, when there is none."""
    runtime_paths: tuple[str, ...] = field(default=())
    """Directories outside the system paths that commands need (the Python runtime, PATH entries)."""

    @property
    def available(self) -> bool:
        return self.name != "none"

    def describe(self, policy: Any = None) -> str:
        """One line for a header: "sandbox: bubblewrap, workspace-write" or why there is none."""
        policy = sandbox_policy(policy)
        if policy.name == "danger-full-access":
            return "no sandbox (danger-full-access): shell auto-allow limited to a fixed list"
        if not self.available:
            return f"no sandbox ({self.reason}): shell auto-allow limited to a fixed list"
        return f"sandbox: {self.name}, {policy}"


@functools.lru_cache(maxsize=1)
def sandbox_backend() -> SandboxBackend:
    """The sandbox this machine offers, probed once (set `NBAGENT_SANDBOX=none` to turn it off)."""
    if os.environ.get("NBAGENT_SANDBOX", "").strip().lower() in ("none", "off", "0", "false"):
        return SandboxBackend("none", reason="NBAGENT_SANDBOX=none")
    if not sys.platform.startswith("linux"):
        return SandboxBackend("none", reason=f"no sandbox is built for {sys.platform} yet")
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return SandboxBackend("none", reason="bubblewrap is not installed (Debian/Ubuntu: apt install bubblewrap)")
    try:
        probe = subprocess.run(
            [bwrap, "--ro-bind", "/", "/", "--unshare-pid", "--unshare-net", "--die-with-parent",
             "--cap-drop", "ALL", "--proc", "/proc", "--dev", "/dev", "true"],
            capture_output=True, timeout=10, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError) as exc:
        return SandboxBackend("none", reason=f"bubblewrap could not start: {exc}")
    if probe.returncode != 0:
        why = probe.stderr.decode(errors="replace").strip().splitlines()
        return SandboxBackend("none", reason="bubblewrap cannot create namespaces here"
                              + (f": {why[-1]}" if why else ""))
    return SandboxBackend("bubblewrap", bwrap, runtime_paths=_runtime_paths())


def _runtime_paths() -> tuple[str, ...]:
    """The Python runtime and PATH's directories, where they lie outside the system paths."""
    home = os.path.realpath(os.path.expanduser("~"))
    found: list[str] = []
    candidates = [sys.prefix, sys.base_prefix, sys.exec_prefix, os.path.dirname(sys.executable)]
    candidates += os.environ.get("PATH", "").split(os.pathsep)
    for entry in candidates:
        if not entry or not os.path.isabs(entry):
            continue
        real = os.path.realpath(entry)
        if os.path.basename(real) in ("bin", "shims"):
            real = os.path.dirname(real)  # ~/.local/bin -> ~/.local, ~/.pyenv/shims -> ~/.pyenv
        if not os.path.isdir(real) or real in ("/", home) or home.startswith(real.rstrip("/") + "/"):
            continue  # never the root or the home directory itself, nor a parent of home
        if _under_system(real) or real.startswith("/tmp/"):
            continue
        if not any(real == f or real.startswith(f + "/") for f in found):
            found = [f for f in found if not f.startswith(real + "/")] + [real]
    return tuple(sorted(found))


def _under_system(path: str) -> bool:
    return any(path == s or path.startswith(s + "/") for s in _SYSTEM_PATHS)


def sandbox_command(
    argv: list[str],
    *,
    workspace: Path,
    cwd: Path | None = None,
    policy: Any = "workspace-write",
    hidden: Iterable[Path] = (),
    backend: SandboxBackend | None = None,
) -> list[str]:
    """`argv` wrapped so it runs under `policy` (unchanged where there is no sandbox).

    `hidden`: files and directories inside the workspace that must look empty to the command (what read
    deny rules protect).
    """
    policy = sandbox_policy(policy)
    backend = backend or sandbox_backend()
    if policy.name == "danger-full-access" or not backend.available:
        return list(argv)
    ws = Path(os.path.realpath(workspace))
    home = os.path.realpath(os.path.expanduser("~"))
    args: list[str] = [backend.path or "bwrap", "--die-with-parent", "--new-session", "--unshare-pid",
                       "--cap-drop", "ALL"]
    if not (policy.network and policy.name == "workspace-write"):
        args.append("--unshare-net")
    for path in _SYSTEM_PATHS:
        if os.path.islink(path):
            args += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            args += ["--ro-bind", path, path]
    args += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--tmpfs", "/var/tmp", "--tmpfs", "/run"]
    if home != "/" and os.path.isdir(home) and not _under_system(home):
        args += ["--tmpfs", home]  # an empty home: no keys, no dotfiles
        for name in _HOME_FILES_SHOWN:
            shown = os.path.join(home, name)
            if os.path.exists(shown):
                args += ["--ro-bind", shown, shown]
    for path in backend.runtime_paths:
        args += ["--ro-bind", path, path]
    writes = policy.name == "workspace-write"
    args += ["--bind" if writes else "--ro-bind", str(ws), str(ws)]
    if writes:
        for extra in policy.writable:
            real = os.path.realpath(extra)
            if os.path.isdir(real):
                args += ["--bind", real, real]
        for rel in PROTECTED_PATHS:
            target = ws / rel
            if target.exists() and not target.is_symlink():
                args += ["--ro-bind", str(target), str(target)]
    for path in hidden:
        real = Path(os.path.realpath(path))
        if real != ws and ws in real.parents and real.exists():
            if real.is_dir():
                args += ["--tmpfs", str(real), "--remount-ro", str(real)]
            else:
                args += ["--ro-bind", "/dev/null", str(real)]
    args += ["--chdir", str(Path(os.path.realpath(cwd)) if cwd is not None else ws), "--"]
    return args + list(argv)


HIDDEN_SCAN_LIMIT = 50_000
"""How many entries of the workspace `hidden_paths` looks at, at most."""
_SKIP_DIRS = {".git", "node_modules", "__pycache__", ".venv", "venv", ".tox", ".mypy_cache", ".pytest_cache"}


def hidden_paths(root: Path, denied: Any) -> tuple[Path, ...]:
    """The files and directories under `root` that `denied(rel, real)` (read deny rules) protects: the
    sandbox shows them empty. A directory that is denied hides all it holds. Bounded by
    `HIDDEN_SCAN_LIMIT`; `.git`'s internals and virtual environments are not searched (a pattern naming
    one of them directly, such as `.venv`, still hides it)."""
    found: list[Path] = []
    seen = 0
    stack = [Path(os.path.realpath(root))]
    base = stack[0]
    while stack and seen < HIDDEN_SCAN_LIMIT:
        directory = stack.pop()
        try:
            entries = list(os.scandir(directory))
        except OSError:
            continue
        for entry in entries:
            seen += 1
            if seen > HIDDEN_SCAN_LIMIT:
                break
            path = Path(entry.path)
            rel = path.relative_to(base).as_posix()
            # walked from a real path without following links: only a link's real path differs
            real = os.path.realpath(entry.path) if entry.is_symlink() else entry.path
            try:
                if denied(rel, real):
                    found.append(path)
                    continue
            except Exception:  # a broken rule hides nothing more; the classifier still applies
                continue
            if entry.is_dir(follow_symlinks=False) and entry.name not in _SKIP_DIRS:
                stack.append(path)
    return tuple(found)
