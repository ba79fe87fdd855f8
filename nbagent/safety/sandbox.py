"""The OS sandbox shell commands run in: a wall that holds when the command classifier is wrong.

Three policies, named as other agents name them:

| policy | reads | writes | network | processes |
|---|---|---|---|---|
| `read-only` (what auto-allow runs) | the workspace, system and runtime paths | none (a private `/tmp` that vanishes) | off | all gone when the call ends |
| `workspace-write` (what an approval runs) | the same | the workspace, except `PROTECTED_PATHS` (`.git`, `.nbagent/`, `.mcp.json`, editor settings...), each kept whole | off unless allowed | all gone when the call ends |
| `danger-full-access` (explicit opt-in) | everything | everything | on | the process group is stopped |

Never shown, under either backend: `secret_places()` (credential stores under home and Jupyter's runtime
folder), wherever a runtime path or the workspace would bring them in. Runtime paths are the Python
runtime and `PATH`'s directories; an entry's parent (`~/.local` for `~/.local/bin`) only when it holds
none of those places.

Backends, chosen once per process by `sandbox_backend()`:

- **Linux, bubblewrap** (`bwrap`, Debian's `bubblewrap`): a new mount namespace that shows only the
  system paths (`/usr`, `/etc`, `/opt`, the `/lib*` and `/bin` links), the runtime paths, then the
  workspace; the home directory is an empty `tmpfs` (`~/.gitconfig` is shown read-only for git's
  identity); secret places inside what is shown are masked. Its own PID namespace, killed with its
  parent, so every process the command starts is gone when the call ends and no other process's `/proc`
  is there; its own network namespace (only loopback: every protocol off); no capabilities, even as
  root; `no_new_privs`. Protected paths are bound read-only over themselves, and the directories between
  them and the workspace (`.git`) over themselves, so none of them can be renamed away (EBUSY on a
  mount point). Files hidden by read deny rules look empty.
- **Linux, Landlock** (kernel 5.13+; where bubblewrap is missing or cannot make namespaces, as in many
  containers): the same reads and writes, enforced by the kernel on every open (`nbagent.safety.sandbox_linux`);
  TCP off by Landlock and every other protocol by a seccomp filter; no capabilities (root's CAP_SYS_PTRACE
  would read other processes' `/proc/<pid>/environ` past Landlock's ptrace scoping); no privileges needed.
  A right on a directory holds for all beneath it, so protected paths are kept in one of two ways
  (`nbagent.safety.sandbox_landlock`), and the whole workspace is writable in both: where the process may
  make a mount namespace, each command gets one with protected paths as read-only mounts and hidden files
  masked, as under bubblewrap; where it may not, what can run programs in each protected path is copied
  before the command and put back after it, and the result names what was put back
  (`nbagent.safety.sandbox_restore`; a command left running in the background is checked before every
  later tool call). Hidden files are then refused, not empty, and the top level takes no new entry while
  a hidden file or a secret place is there. It has no PID namespace: what a command leaves running (read-only
  or writing) is adopted by the process it was started as, which stays outside the sandbox and stops it all
  when the command ends, or when the kernel dies however it dies (`supervise_command`); a marker in the
  environment is the second net; other processes' `/proc` entries stay readable.
- **No sandbox** (neither can run, macOS, Windows, or `danger-full-access`): commands
  run as plain processes in their own process group. The view's header says so, and shell auto-allow
  shrinks to `STRICT_READ_ONLY_COMMANDS`, whose options are fully known.

A scan that cannot finish fails closed (`hidden_paths`); a protected path a command made is removed, and
one that is a symbolic link (a mount follows it) is put back if the command replaced it.

macOS (`sandbox-exec`) is planned, not built. The `python` tool runs in the kernel: no sandbox applies.

It reads the workspace's names (to find what deny rules protect), which anyone could have written: they
are only compared with the rules; nothing found there is run."""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from . import trust as _trust
from .sandbox_landlock import (Prepared, landlock_prepared, make_own_folder, missing_protected, protected_links,
                               protected_mounts, remove_created)
from .sandbox_linux import MARKER_VARIABLE, bubblewrap_seccomp, landlock_abi, mount_namespace

__all__ = ["CREDENTIAL_STORES", "HIDDEN_SCAN_LIMIT", "HiddenScanError", "MARKER_VARIABLE", "PROTECTED_PATHS",
           "Prepared", "SandboxBackend", "SandboxPolicy", "hidden_paths", "jupyter_runtime_dirs", "landlock_abi",
           "prepare", "remove_created", "sandbox_backend", "sandbox_command", "sandbox_policy", "secret_places"]

from .protected import PROTECTED_PATHS  # noqa: E402 - the one list: configuration that can run programs
"""Paths inside the workspace that `workspace-write` keeps read-only: configuration that can run programs
(`.git`, `.mcp.json`, `.nbagent/`, editor and Jupyter settings; see `nbagent.safety.protected`)."""

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
    mounts: bool = False
    """Landlock: commands get a mount namespace of their own (protected paths as read-only mounts); without
    one, protected paths are copied before each command and put back after it (`nbagent.safety.sandbox_restore`)."""

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
        if self.name == "landlock" and not self.mounts and policy.name == "workspace-write":
            return (f"sandbox: landlock, {policy} (no mount namespace: protected paths are put back after each "
                    "command)")
        return f"sandbox: {self.name}, {policy}"


@functools.lru_cache(maxsize=1)
def sandbox_backend() -> SandboxBackend:
    """The sandbox this machine offers, probed once. `NBAGENT_SANDBOX` chooses: `none` turns it off,
    `bubblewrap` or `landlock` forces that backend even where the other works, and `landlock-nomount`
    forces Landlock without a mount namespace (what a container without user namespaces or privileges
    gets: the test lane that sees what those hosts see)."""
    wanted = os.environ.get("NBAGENT_SANDBOX", "").strip().lower()
    if wanted in ("none", "off", "0", "false"):
        return SandboxBackend("none", reason="NBAGENT_SANDBOX=none")
    if not sys.platform.startswith("linux"):
        return SandboxBackend("none", reason=f"no sandbox is built for {sys.platform} yet")
    forced = wanted in ("landlock", "landlock-nomount")
    bubblewrap = _bubblewrap() if not forced else SandboxBackend("none", reason=f"NBAGENT_SANDBOX={wanted}")
    if bubblewrap.available or wanted == "bubblewrap":
        return bubblewrap
    if landlock_abi() >= 1:
        mounts = wanted != "landlock-nomount" and mount_namespace()
        how = "with a mount namespace per command" if mounts else "no mount namespace"
        return SandboxBackend("landlock", runtime_paths=_runtime_paths(), mounts=mounts,
                              reason=f"{bubblewrap.reason}; Landlock ABI {landlock_abi()} instead ({how})")
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


CREDENTIAL_STORES = (".ssh", ".aws", ".azure", ".config/gcloud", ".netrc", ".docker", ".kube", ".gnupg",
                     ".git-credentials", ".npmrc", ".pypirc", ".cargo/credentials", ".cargo/credentials.toml",
                     ".config/gh", ".config/hub", ".password-store", ".terraform.d", ".config/nbagent",
                     ".local/share/nbagent")
"""Places under home that hold credentials (or nbagent's own trust and keys): never shown to a command."""


def jupyter_runtime_dirs() -> tuple[str, ...]:
    """Where Jupyter keeps kernels' connection files (their HMAC keys): `jupyter_core.paths.
    jupyter_runtime_dir()` when jupyter_core is installed, and the places it would choose from the
    environment (`JUPYTER_RUNTIME_DIR`, `JUPYTER_DATA_DIR`, `XDG_DATA_HOME`, `~/.local/share/jupyter`)."""
    home = os.path.expanduser("~")
    data = os.environ.get("JUPYTER_DATA_DIR") or os.path.join(
        os.environ.get("XDG_DATA_HOME") or os.path.join(home, ".local", "share"), "jupyter")
    found = [os.environ.get("JUPYTER_RUNTIME_DIR") or "", os.path.join(data, "runtime"),
             os.path.join(home, ".local", "share", "jupyter", "runtime")]
    try:
        from jupyter_core.paths import jupyter_runtime_dir

        found.append(jupyter_runtime_dir())
    except Exception:  # not installed, or it could not tell
        pass
    return tuple(dict.fromkeys(os.path.realpath(p) for p in found if p))


def secret_places() -> tuple[str, ...]:
    """Real paths no sandboxed command (and no file tool: `nbagent.safety.reach`) may see: `CREDENTIAL_STORES`
    under home, the Jupyter runtime folders and nbagent's trust store and key (whether they exist or not)."""
    env = os.environ
    return _secret_places(*(env.get(v, "") for v in ("HOME", "JUPYTER_RUNTIME_DIR", "JUPYTER_DATA_DIR",
                                                      "XDG_DATA_HOME", "XDG_CONFIG_HOME", "NBAGENT_CONFIG_DIR")))


@functools.lru_cache(maxsize=8)
def _secret_places(*_environment: str) -> tuple[str, ...]:
    home, nbagent = os.path.realpath(os.path.expanduser("~")), os.path.realpath(_trust.config_dir())
    return tuple(dict.fromkeys([os.path.realpath(os.path.join(home, p)) for p in CREDENTIAL_STORES]
                               + list(jupyter_runtime_dirs()) + [nbagent]))


def _holds(path: str, places: Iterable[str]) -> bool:
    """Whether `path` is one of `places`, inside one, or holds one."""
    return any(p == path or p.startswith(path.rstrip("/") + "/") or path.startswith(p + "/") for p in places)


_NOT_BOUND = ("/tmp/",)
"""Runtime paths never bound (the sandbox has a /tmp of its own)."""


def _runtime_paths() -> tuple[str, ...]:
    """The Python runtime and PATH's directories, where they lie outside the system paths: a PATH entry
    named `bin` or `shims` brings its parent (a virtual environment, `~/.pyenv`) unless that parent holds
    a credential store or the Jupyter runtime folder (`~/.local`, `~/.cargo`): then only the entry itself,
    and never a directory that is or holds one of `secret_places()`."""
    import site

    home = os.path.realpath(os.path.expanduser("~"))
    places = secret_places()
    found: list[str] = []
    candidates = [sys.prefix, sys.base_prefix, sys.exec_prefix, os.path.dirname(sys.executable)]
    candidates += os.environ.get("PATH", "").split(os.pathsep)
    try:
        candidates.append(site.getusersitepackages())  # what programs in ~/.local/bin import
    except Exception:  # pragma: no cover
        pass
    for entry in candidates:
        if not entry or not os.path.isabs(entry):
            continue
        real = os.path.realpath(entry)
        choices = [os.path.dirname(real), real] if os.path.basename(real) in ("bin", "shims") else [real]
        for choice in choices:
            if not os.path.isdir(choice) or choice in ("/", home) or home.startswith(choice.rstrip("/") + "/"):
                continue  # never the root or the home directory itself, nor a parent of home
            if _under_system(choice) or choice.startswith(_NOT_BOUND) or _holds(choice, places):
                continue
            if not any(choice == f or choice.startswith(f + "/") for f in found):
                found = [f for f in found if not f.startswith(choice + "/")] + [choice]
            break
    return tuple(sorted(found))


def _under_system(path: str) -> bool:
    return any(path == s or path.startswith(s + "/") for s in _SYSTEM_PATHS)


def _in_force(policy: Any, backend: SandboxBackend | None) -> tuple[SandboxPolicy, SandboxBackend] | None:
    """The policy and backend a command starts under, or None when it starts plainly (full access asked, or
    no sandbox on this machine): the one place `sandbox_command` and `prepare` decide it."""
    policy = sandbox_policy(policy)
    backend = backend or sandbox_backend()
    return None if policy.name == "danger-full-access" or not backend.available else (policy, backend)


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
    if (in_force := _in_force(policy, backend)) is None:
        return list(argv)
    policy, backend = in_force
    ws = Path(os.path.realpath(workspace))
    home = os.path.realpath(os.path.expanduser("~"))
    args: list[str] = [backend.path or "bwrap", "--die-with-parent", "--new-session", "--unshare-pid", "--as-pid-1",
                       "--cap-drop", "ALL"]  # (the command is the namespace's first process: no other to take over)
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
        args += protected_binds(ws)
    bound = [str(ws), *backend.runtime_paths, *(os.path.realpath(p) for p in policy.writable)]
    for place in secret_places():  # a credential store or Jupyter's runtime folder inside what is shown
        if any(place == b or place.startswith(b + "/") for b in bound) and os.path.lexists(place):
            args += _masked(place)
    for path in hidden:
        real = Path(os.path.realpath(path))
        if real != ws and ws in real.parents and real.exists():
            args += _masked(str(real))
    args += ["--chdir", str(Path(os.path.realpath(cwd)) if cwd is not None else ws), "--"]
    return args + list(argv)


def _masked(path: str) -> list[str]:
    """bubblewrap arguments that make `path` look empty (a directory) or blank (a file), read-only."""
    if os.path.isdir(path) and not os.path.islink(path):
        return ["--tmpfs", path, "--remount-ro", path]
    return ["--ro-bind", "/dev/null", path]


def protected_binds(ws: Path) -> list[str]:
    """bubblewrap arguments that keep `PROTECTED_PATHS` read-only as a whole (`protected_mounts`): each one
    that exists bound read-only over itself, each directory between one and the workspace bound over
    itself. One that does not exist yet is removed after the call if the command made it."""
    make_own_folder(ws)
    pinned, read_only = protected_mounts(ws)
    return [a for p in pinned for a in ("--bind", p, p)] + [a for p in read_only for a in ("--ro-bind", p, p)]


HIDDEN_SCAN_LIMIT = 50_000
"""How many entries of the workspace `hidden_paths` looks at, at most."""
_SCANNED_LAST = {".git", "node_modules", "__pycache__", ".venv", "venv", ".tox", ".mypy_cache", ".pytest_cache"}


class HiddenScanError(OSError):
    """The workspace's top folder alone holds more entries than `hidden_paths` may look at."""


def hidden_paths(root: Path, denied: Any) -> tuple[Path, ...]:
    """The files and directories under `root` that `denied(rel, real)` (read deny rules) protects: the
    sandbox shows them empty. A directory that is denied hides all it holds. It fails closed: a folder it
    cannot finish looking through (past `HIDDEN_SCAN_LIMIT` entries, or unreadable) is hidden whole, and so
    is an entry the rule raises on; `.git`, virtual environments and caches are looked through last.
    Raises `HiddenScanError` when the workspace's top folder itself cannot be looked through."""
    found: list[Path] = []
    seen = 0
    base = Path(os.path.realpath(root))
    pending: list[Path] = [base]
    later: list[Path] = []
    while pending or later:
        directory = pending.pop() if pending else later.pop()
        try:
            entries = list(os.scandir(directory))
        except OSError:
            entries = None
        if entries is None or seen + len(entries) > HIDDEN_SCAN_LIMIT:
            if directory == base:
                raise HiddenScanError(f"the workspace cannot be looked through for the files deny rules protect "
                                      f"(more than {HIDDEN_SCAN_LIMIT:,} entries at its top, or unreadable)")
            found.append(directory)  # not looked through: hidden whole
            seen = HIDDEN_SCAN_LIMIT if entries is not None else seen
            continue
        for entry in entries:
            seen += 1
            path = Path(entry.path)
            rel = path.relative_to(base).as_posix()
            # walked from a real path without following links: only a link's real path differs
            real = os.path.realpath(entry.path) if entry.is_symlink() else entry.path
            try:
                hide = denied(rel, real)
            except Exception:  # a rule that cannot answer hides the entry
                hide = True
            if hide:
                found.append(path)
            elif entry.is_dir(follow_symlinks=False):
                (later if entry.name in _SCANNED_LAST else pending).append(path)
    return tuple(found)


def prepare(
    argv: list[str],
    *,
    workspace: Path,
    cwd: Path | None = None,
    policy: Any = "workspace-write",
    hidden: Iterable[Path] = (),
    backend: SandboxBackend | None = None,
    long_lived: bool = False,
) -> Prepared:
    """How to start `argv` under `policy` with this machine's backend (plainly where there is none); the
    parameters are `sandbox_command`'s, which builds the bubblewrap command line. `long_lived`: the command
    may go on in the background (Landlock without a mount namespace then keeps the top level closed)."""
    if (in_force := _in_force(policy, backend)) is None:
        return Prepared(list(argv))
    policy, backend = in_force
    ws = os.path.realpath(workspace)
    writes = policy.name == "workspace-write"
    network = policy.network and writes
    if backend.name == "bubblewrap":
        if writes:
            make_own_folder(Path(ws))  # bound read-only like the others, before nbagent first writes in it
        watched = missing_protected(Path(ws)) if writes else []
        links = protected_links(Path(ws)) if writes else {}
        wrapped = sandbox_command(argv, workspace=workspace, cwd=cwd, policy=policy, hidden=hidden, backend=backend)
        fds = bubblewrap_seccomp(wrapped, network=network)  # (off: a unix socket of the workspace is a way out;
        # always: tracing the namespace's first process, which would then outlive the kernel)
        return Prepared(wrapped, watched=watched, links=links, pass_fds=fds, workspace=ws)
    if any(ws == p or ws.startswith(p + "/") for p in secret_places()):
        raise OSError("the workspace is inside a credential store or Jupyter's runtime folder")
    home = os.path.realpath(os.path.expanduser("~"))
    readable = [p for p in _SYSTEM_PATHS if os.path.exists(p)] + list(backend.runtime_paths) + [ws, "/proc"]
    readable += [os.path.join(home, name) for name in _HOME_FILES_SHOWN]
    writable = [ws] + [os.path.realpath(p) for p in policy.writable] if writes else []
    return landlock_prepared(list(argv), ws=ws, writes=writes, network=network, readable=readable,
                             writable=writable, secret=secret_places(), hidden=hidden, mounts=backend.mounts,
                             long_lived=long_lived)
