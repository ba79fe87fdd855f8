"""The OS sandbox shell commands run in: a wall that holds when the command classifier is wrong.

Three policies, named as other agents name them:

| policy | reads | writes | network | processes |
|---|---|---|---|---|
| `read-only` (what auto-allow runs) | the workspace, system and runtime paths | none (a private `/tmp` that vanishes) | off | all gone when the call ends |
| `workspace-write` (what an approval runs) | the same | the workspace, except `PROTECTED_PATHS` (`.git`, `.nbagent/`, `.mcp.json`, editor settings...) | off unless allowed | all gone when the call ends |
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
- **Linux, Landlock** (kernel 5.13+; where bubblewrap is missing or cannot make namespaces, as in many
  containers): the same reads and writes, enforced by the kernel on every open, with TCP off (ABI 4+)
  and signals and abstract sockets scoped to the sandbox (ABI 6+); no privileges needed. It cannot hide
  single files below the workspace or keep `.git/hooks` read-only inside it, and it has no PID
  namespace: processes left running are found by a marker in their environment and stopped.
- **No sandbox** (neither can run, macOS, Windows, or `danger-full-access`): commands
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

__all__ = ["HIDDEN_SCAN_LIMIT", "MARKER_VARIABLE", "PROTECTED_PATHS", "Prepared", "SandboxBackend", "hidden_paths",
           "landlock_abi", "prepare", "SandboxPolicy", "sandbox_backend", "sandbox_command",
           "sandbox_policy"]

from .protected import PROTECTED_PATHS  # noqa: E402 - the one list: configuration that can run programs
"""Paths inside the workspace that `workspace-write` keeps read-only: configuration that can run programs
(`.git`, `.mcp.json`, `.nbagent/`, editor and Jupyter settings; see `nbagent.protected`)."""

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
    """"bubblewrap", "landlock", or "none"."""
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
    wanted = os.environ.get("NBAGENT_SANDBOX", "").strip().lower()
    if wanted in ("none", "off", "0", "false"):
        return SandboxBackend("none", reason="NBAGENT_SANDBOX=none")
    if not sys.platform.startswith("linux"):
        return SandboxBackend("none", reason=f"no sandbox is built for {sys.platform} yet")
    bubblewrap = _bubblewrap() if wanted != "landlock" else SandboxBackend("none", reason="NBAGENT_SANDBOX=landlock")
    if bubblewrap.available or wanted == "bubblewrap":
        return bubblewrap
    if landlock_abi() >= 1:
        return SandboxBackend("landlock", runtime_paths=_runtime_paths(),
                              reason=f"{bubblewrap.reason}; Landlock ABI {landlock_abi()} instead")
    return bubblewrap


def _bubblewrap() -> SandboxBackend:
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
        try:  # nbagent's own folder is protected even before nbagent first writes into it
            (ws / ".nbagent").mkdir(exist_ok=True)
        except OSError:
            pass
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


# -- Landlock: the fallback where bubblewrap cannot run ----------------------------------------------------
# Landlock (Linux 5.13+) restricts what a process and its children may open, with no namespaces and no
# privileges. It cannot hide single files below a directory it allows, nor keep `.git/hooks` read-only
# inside a writable workspace, and it has no PID namespace: processes that outlive the command are found
# by a marker in their environment and stopped (a program that wipes its environment escapes that sweep).

_SYS_CREATE_RULESET, _SYS_ADD_RULE, _SYS_RESTRICT_SELF = 444, 445, 446  # the same on x86_64 and arm64
_PR_SET_NO_NEW_PRIVS = 38
_FS_EXECUTE, _FS_WRITE_FILE, _FS_READ_FILE, _FS_READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
_FS_READ = _FS_EXECUTE | _FS_READ_FILE | _FS_READ_DIR
_FS_RIGHTS_BY_ABI = {1: (1 << 13) - 1, 2: (1 << 14) - 1, 3: (1 << 15) - 1, 4: (1 << 15) - 1,
                     5: (1 << 16) - 1, 6: (1 << 16) - 1}
_DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty")
MARKER_VARIABLE = "NBAGENT_SANDBOX_CALL"
"""The environment variable that marks a Landlock-sandboxed command's processes."""


@functools.lru_cache(maxsize=1)
def landlock_abi() -> int:
    """The kernel's Landlock ABI version (0: none)."""
    if not sys.platform.startswith("linux"):
        return 0
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        version = libc.syscall(_SYS_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(1))
    except (OSError, AttributeError):
        return 0
    return max(int(version), 0)


class LandlockRuleset:
    """A ruleset made in the parent; the child only restricts itself with it (little work after fork)."""

    def __init__(self, *, readable: Iterable[str], writable: Iterable[str], devices: Iterable[str],
                 network: bool) -> None:
        import ctypes

        abi = landlock_abi()
        if abi < 1:
            raise OSError("Landlock is not available")
        self._libc = ctypes.CDLL(None, use_errno=True)
        fs = _FS_RIGHTS_BY_ABI.get(abi, _FS_RIGHTS_BY_ABI[6])
        net = 0 if network or abi < 4 else 0b11  # bind and connect over TCP
        scoped = 0b11 if abi >= 6 else 0  # abstract unix sockets and signals outside the sandbox
        attr = (ctypes.c_uint64 * 3)(fs, net, scoped)
        size = 8 if abi < 4 else 16 if abi < 6 else 24
        fd = self._libc.syscall(_SYS_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0))
        if fd < 0:
            raise OSError(ctypes.get_errno(), "landlock_create_ruleset failed")
        self.fd = fd
        for path in readable:
            self._allow(path, _FS_READ, fs)
        for path in devices:
            self._allow(path, _FS_READ_FILE | _FS_WRITE_FILE | (1 << 15 if abi >= 5 else 0), fs)
        for path in writable:
            self._allow(path, fs, fs)

    def _allow(self, path: str, rights: int, handled: int) -> None:
        import ctypes

        try:
            target = os.open(path, os.O_PATH | os.O_CLOEXEC)
        except OSError:
            return
        try:
            if not os.path.isdir(path):  # a file takes only the rights that apply to files
                rights &= _FS_EXECUTE | _FS_WRITE_FILE | _FS_READ_FILE | (1 << 14) | (1 << 15)
            attr = (ctypes.c_ubyte * 12).from_buffer_copy(
                int(rights & handled).to_bytes(8, "little") + int(target).to_bytes(4, "little", signed=True))
            if self._libc.syscall(_SYS_ADD_RULE, ctypes.c_int(self.fd), ctypes.c_int(1), ctypes.byref(attr),
                                  ctypes.c_uint32(0)) < 0:
                raise OSError(ctypes.get_errno(), f"landlock_add_rule failed for {path}")
        finally:
            os.close(target)

    def restrict(self) -> None:
        """In the child, before exec: no new privileges, then the ruleset."""
        import ctypes

        if self._libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            os._exit(126)
        if self._libc.syscall(_SYS_RESTRICT_SELF, ctypes.c_int(self.fd), ctypes.c_uint32(0)) != 0:
            os._exit(126)

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


@dataclass(slots=True)
class Prepared:
    """A command ready to start under a sandbox: what to run, with what, and what to do after."""

    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)
    """Variables to add to the command's environment."""
    preexec_fn: Any = None
    ruleset: LandlockRuleset | None = None
    marker: str | None = None
    tmpdir: str | None = None

    def stop_leftovers(self) -> None:
        """Once the command exited: stop what it left running (Landlock; bubblewrap's PID namespace
        already did)."""
        if self.marker is not None:
            stop_marked(self.marker)

    def cleanup(self) -> None:
        """After the command: stop what it left running, free what was made for it."""
        self.stop_leftovers()
        if self.ruleset is not None:
            self.ruleset.close()
        if self.tmpdir is not None:
            shutil.rmtree(self.tmpdir, ignore_errors=True)


def stop_marked(marker: str) -> int:
    """SIGKILL every process whose environment carries `MARKER_VARIABLE=marker`; how many there were."""
    import signal

    needle = f"{MARKER_VARIABLE}={marker}".encode()
    stopped = 0
    for _ in range(3):  # a process may fork while the sweep runs
        found = 0
        for entry in os.listdir("/proc"):
            if not entry.isdigit() or int(entry) == os.getpid():
                continue
            try:
                with open(f"/proc/{entry}/environ", "rb") as f:
                    if needle not in f.read():
                        continue
                os.kill(int(entry), signal.SIGKILL)
                found += 1
            except OSError:
                continue
        stopped += found
        if not found:
            break
    return stopped


def prepare(
    argv: list[str],
    *,
    workspace: Path,
    cwd: Path | None = None,
    policy: Any = "workspace-write",
    hidden: Iterable[Path] = (),
    backend: SandboxBackend | None = None,
) -> Prepared:
    """How to start `argv` under `policy` with this machine's backend (plainly where there is none)."""
    policy = sandbox_policy(policy)
    backend = backend or sandbox_backend()
    if policy.name == "danger-full-access" or not backend.available:
        return Prepared(list(argv))
    if backend.name == "bubblewrap":
        return Prepared(sandbox_command(argv, workspace=workspace, cwd=cwd, policy=policy, hidden=hidden,
                                        backend=backend))
    import tempfile
    import uuid

    ws = os.path.realpath(workspace)
    tmpdir = tempfile.mkdtemp(prefix="nbagent-sandbox-")
    writable = [tmpdir]
    if policy.name == "workspace-write":
        writable += [ws] + [os.path.realpath(p) for p in policy.writable]
    home = os.path.realpath(os.path.expanduser("~"))
    readable = [p for p in _SYSTEM_PATHS if os.path.exists(p)] + list(backend.runtime_paths) + [ws, "/proc"]
    readable += [os.path.join(home, name) for name in _HOME_FILES_SHOWN]
    ruleset = LandlockRuleset(readable=readable, writable=writable, devices=_DEVICES,
                              network=policy.network and policy.name == "workspace-write")
    marker = uuid.uuid4().hex
    env = {MARKER_VARIABLE: marker, "TMPDIR": tmpdir, "TMP": tmpdir, "TEMP": tmpdir}
    return Prepared(list(argv), env=env, preexec_fn=ruleset.restrict, ruleset=ruleset, marker=marker, tmpdir=tmpdir)
