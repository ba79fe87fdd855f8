"""The Landlock fallback of `nbagent.safety.sandbox`: a ruleset made in the parent, and what the child sets
between fork and exec: no new privileges, no capabilities (so root cannot read other processes'
`/proc`), no network of any protocol (a seccomp filter), then the ruleset.

Landlock's own network rules cover TCP only (bind and connect); UDP, raw sockets, netlink, and every
other family stay open. `CommandFilter` is a classic-BPF seccomp program, built in the parent, that makes
`socket()` fail with EACCES for every address family, `AF_UNIX` included (a socket file in the
workspace or outside it, or an abstract one, can be a server outside the sandbox: a dev server, a kernel's
ipc transport, an ssh agent), and refuses `io_uring_setup` (io_uring can open sockets without calling
`socket()`). `socketpair()` stays: it only connects a process to itself or its children. On x86_64 the x32 system-call range is refused too, and a
process of another architecture is killed, so a 32-bit `socketcall` cannot walk around the filter. With the
network on or off, the same program refuses tracing another process and changing another process's resource
limits (what would let a command take apart what stops the processes it leaves running); bubblewrap gets it
too (`bubblewrap_seccomp`).

Landlock scopes `ptrace` (and so reading `/proc/<pid>/environ` and `/proc/<pid>/mem` of processes outside
the sandbox), but a process with `CAP_SYS_PTRACE` is exempt, which root has. `drop_capabilities()`
empties the bounding, ambient, effective, permitted and inheritable sets first, so a command run by a
root kernel reads only its own processes' `/proc` entries (measured here: Linux 6.18, Landlock ABI 7;
as root the environ of the kernel is readable without the drop and refused with it; as another user it
is refused either way).

Where the process may make a mount namespace of its own (CAP_SYS_ADMIN: root in a VM or a privileged
container, without bubblewrap), `MountPlan` gives the child one before the ruleset: protected paths bound
read-only over themselves and hidden files masked, as bubblewrap does, so the workspace itself can be
writable. Its mounts stay private to the command (`/` is made private first) and it cannot undo them:
Landlock refuses every mount call of a sandboxed process, and it has no capabilities left.

Without a PID namespace, `nbagent.safety.supervisor` keeps what a command leaves running in check. `stop_marked`
is the second net: it finds processes by a marker in their environment, which a process can clear.

It reads nothing anyone else wrote: it only builds and installs filters and mounts.
"""

from __future__ import annotations

import ctypes
import functools
import os
import signal
import struct
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:  # (typing costs 5 ms to import, a third of `nbagent.safety._launcher`'s start)
    from typing import Iterable

_MACHINE = os.uname().machine if hasattr(os, "uname") else ""
"""This machine's architecture (what the `platform` module's `machine()` gives on Linux, without importing it)."""

__all__ = ["MARKER_VARIABLE", "CommandFilter", "LandlockRuleset", "MountPlan", "bubblewrap_seccomp",
           "drop_capabilities", "landlock_abi", "mount_namespace", "stop_marked"]

_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER = 22, 2
_PR_CAPBSET_DROP, _PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL = 24, 47, 4
_RET_ALLOW, _RET_ERRNO, _RET_KILL = 0x7FFF0000, 0x00050000, 0x80000000
_EACCES, _EPERM = 13, 1
_AF_UNIX = 1
_LD_W_ABS, _JEQ_K, _JGE_K, _RET_K = 0x20, 0x15, 0x35, 0x06
_ARCHES = {  # machine -> (AUDIT_ARCH, socket, io_uring_setup, x32 bit or 0, ptrace, process_vm_writev, prlimit64,
    #                     setsid, setpgid, prctl)
    "x86_64": (0xC000003E, 41, 425, 0x40000000, 101, 311, 302, 112, 109, 157),
    "aarch64": (0xC00000B7, 198, 425, 0, 117, 271, 261, 157, 154, 167),
    "arm64": (0xC00000B7, 198, 425, 0, 117, 271, 261, 157, 154, 167),
}
_PR_SET_PDEATHSIG = 1


def _insn(code: int, jt: int, jf: int, k: int) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


class CommandFilter:
    """The seccomp program every sandboxed command runs under, ready to install in a child (`install()`) or to
    hand to bubblewrap (`program`). Always: a command may not trace another process (`ptrace`,
    `process_vm_writev`: under bubblewrap it could otherwise clear the death signal of its namespace's first
    process, which then outlives the kernel) nor change another process's resource limits (`prlimit64` with a
    pid and new limits: it could otherwise starve the Landlock supervisor of files or CPU, which then exits
    without stopping what the command left running); both fail with EPERM. With `network=False`, also no
    socket of any family and no io_uring (EACCES). And `setsid` and `setpgid` return success and do nothing:
    every process the command starts stays in its process group, which one SIGKILL then ends whole (the kernel
    kills a group at once, forks in flight included), so none can hop from pid to pid out of a kill's reach (a
    process that forks and exits every tenth of a millisecond outran every list of pids read from /proc);
    programs that start theirs in a session of their own (`setsid`, `start_new_session=True`) go on working.
    Nor can a command change its own death signal (`prctl(PR_SET_PDEATHSIG)`: success, nothing done): under
    bubblewrap the command is the namespace's first process (`--as-pid-1`: no other process in it to take over,
    which an outside try did through `/proc/1/mem`), and its death signal is what takes the namespace down with
    the kernel; under Landlock, with its supervisor. `supported` is False on a machine whose system-call numbers it
    does not know (then the caller must not call the network off)."""

    def __init__(self, *, network: bool = False) -> None:
        arch = _ARCHES.get(_MACHINE)
        self.supported = arch is not None and hasattr(ctypes, "CDLL")
        if not self.supported:
            return
        (audit, nr_socket, nr_uring, x32, nr_ptrace, nr_vm_writev, nr_prlimit, nr_setsid, nr_setpgid,
         nr_prctl) = arch  # type: ignore[misc]
        denied = _RET_ERRNO | _EACCES
        refused = _RET_ERRNO | _EPERM
        program: list[tuple] = [
            (_LD_W_ABS, None, None, 4),                      # arch
            (_JEQ_K, "ours", None, audit),
            (_RET_K, None, None, _RET_KILL),                 # another architecture: killed
            "ours", (_LD_W_ABS, None, None, 0),              # system call number
            (_JGE_K, None, "not_x32", x32 or 0xFFFFFFFF),
            (_RET_K, None, None, denied),                    # the x32 range
            "not_x32", (_JEQ_K, "refused", None, nr_ptrace),
            (_JEQ_K, "refused", None, nr_vm_writev),
            (_JEQ_K, "prlimit", None, nr_prlimit),
            (_JEQ_K, "kept", None, nr_setsid),
            (_JEQ_K, "kept", None, nr_setpgid),
            (_JEQ_K, "prctl", None, nr_prctl),
        ]
        if not network:
            program += [(_JEQ_K, "denied", None, nr_uring),
                        (_JEQ_K, "denied", None, nr_socket)]
        program += [
            (_RET_K, None, None, _RET_ALLOW),
            "prlimit", (_LD_W_ABS, None, None, 16),          # args[0]: the pid (0: this process)
            (_JEQ_K, "allowed", None, 0),
            (_LD_W_ABS, None, None, 32),                     # args[2]: the new limits, low half
            (_JEQ_K, None, "refused", 0),
            (_LD_W_ABS, None, None, 36),                     # high half
            (_JEQ_K, "allowed", "refused", 0),
            "prctl", (_LD_W_ABS, None, None, 16),            # args[0]: the option
            (_JEQ_K, "kept", "allowed", _PR_SET_PDEATHSIG),
            "allowed", (_RET_K, None, None, _RET_ALLOW),
            "refused", (_RET_K, None, None, refused),
            "denied", (_RET_K, None, None, denied),
            "kept", (_RET_K, None, None, _RET_ERRNO),          # "done", and nothing done
        ]
        code = _assemble(program)
        self.program = b"".join(code)
        """The raw filter (an array of `struct sock_filter`), as bubblewrap's `--seccomp FD` reads it."""
        self._code = ctypes.create_string_buffer(self.program, 8 * len(code))
        # struct sock_fprog { unsigned short len; struct sock_filter *filter; }
        self._prog = ctypes.create_string_buffer(struct.pack("=HxxxxxxQ", len(code), ctypes.addressof(self._code)))
        self._libc = ctypes.CDLL(None, use_errno=True)

    def install(self) -> bool:
        """In the child (no_new_privs already set): True when the filter is in place."""
        if not self.supported:
            return False
        return self._libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(self._prog), 0, 0) == 0


def _assemble(program: list) -> list[bytes]:
    """Classic BPF from instructions `(code, jump if true, jump if false, k)` whose jumps name labels (strings
    placed before an instruction; None: the next instruction)."""
    labels: dict[str, int] = {}
    at = 0
    for item in program:
        if isinstance(item, str):
            labels[item] = at
        else:
            at += 1
    out: list[bytes] = []
    for item in program:
        if isinstance(item, str):
            continue
        code, jt, jf, k = item
        here = len(out)
        true = 0 if jt is None else labels[jt] - here - 1
        false = 0 if jf is None else labels[jf] - here - 1
        out.append(_insn(code, true, false, k))
    return out


def bubblewrap_seccomp(args: list[str], *, network: bool = False) -> tuple[int, ...]:
    """Add `--seccomp FD` with `CommandFilter`'s program to bubblewrap's `args` (in place); the fds to pass."""
    command_filter = CommandFilter(network=network)
    if not command_filter.supported:
        return ()
    read_end, write_end = os.pipe()
    os.write(write_end, command_filter.program)
    os.close(write_end)
    args[1:1] = ["--seccomp", str(read_end)]
    return (read_end,)


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


_SYS_CAPSET = {"x86_64": 126, "aarch64": 91, "arm64": 91}.get(_MACHINE)


def _last_capability() -> int:
    try:
        with open("/proc/sys/kernel/cap_last_cap") as f:
            return int(f.read().strip())
    except (OSError, ValueError):
        return 40


_LAST_CAP = _last_capability()
_LIBC = ctypes.CDLL(None, use_errno=True) if os.name == "posix" else None


def drop_capabilities() -> bool:
    """In the child: no capabilities left in any set, for this process and what it executes (root
    included). True when none remain effective."""
    if _LIBC is None or _SYS_CAPSET is None:
        return False
    for cap in range(_LAST_CAP + 1):
        _LIBC.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0)  # fails without CAP_SETPCAP: then there is none to drop
    _LIBC.prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    header = _CapHeader(0x20080522, 0)
    data = (_CapData * 2)()
    return _LIBC.syscall(_SYS_CAPSET, ctypes.byref(header), ctypes.byref(data)) == 0


# -- Landlock ---------------------------------------------------------------------------------------------
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
                 network: bool, excluded: Iterable[str] = (), read_only: Iterable[str] = ()) -> None:
        """`excluded`: neither readable nor writable; `read_only`: readable, but left out of `writable`'s
        trees (and so is every directory above one of them: nothing there can be removed or renamed)."""
        import ctypes

        abi = landlock_abi()
        excluded = [os.path.realpath(p) for p in excluded]
        self.command_filter = CommandFilter(network=network)
        if not network and not self.command_filter.supported:
            raise OSError(f"the network cannot be turned off for every protocol on {os.uname().machine}")
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
        for root in readable:
            for path, whole in _tree_except(root, excluded):
                self._allow(path, _FS_READ if whole else _FS_READ_DIR, fs)
        for path in devices:
            self._allow(path, _FS_READ_FILE | _FS_WRITE_FILE | (1 << 15 if abi >= 5 else 0), fs)
        kept = excluded + [os.path.realpath(p) for p in read_only]
        for root in writable:
            for path, whole in _tree_except(root, kept):
                if whole:
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
        """In the child, before exec: no new privileges, then the ruleset (`restrict_to`)."""
        restrict_to(self.fd, self.command_filter)

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


OOM_FIRST = "1000"
"""A Landlock-sandboxed command's `oom_score_adj`: under memory pressure (a container's limit) the kernel kills
it and what it started before its supervisor or the kernel, however small each of its processes (an outside try
filled a 400 MB limit with 30 small processes: the kernel went first, then the supervisor, a copy of the
kernel's memory, before it stopped anything). Set before the ruleset, which then refuses writing it again
(`/proc` is only readable), so the command cannot lower it."""


def restrict_to(ruleset: int, command_filter: CommandFilter) -> None:
    """In the command's process, before exec: no new privileges, no capabilities, `command_filter`, then the
    Landlock ruleset `ruleset` (a file descriptor); any step that fails ends the process (exit 126). First, the
    command and all it starts become the out-of-memory killer's first choice (`OOM_FIRST`)."""
    try:
        with open("/proc/self/oom_score_adj", "w") as f:
            f.write(OOM_FIRST)
    except OSError:
        os._exit(126)
    if _LIBC is None or _LIBC.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        os._exit(126)
    drop_capabilities()  # root's CAP_SYS_PTRACE would let it read the kernel's /proc/<pid>/environ
    if command_filter.supported and not command_filter.install():
        os._exit(126)
    if _LIBC.syscall(_SYS_RESTRICT_SELF, ctypes.c_int(ruleset), ctypes.c_uint32(0)) != 0:
        os._exit(126)


def _tree_except(root: str, excluded: list[str]) -> list[tuple[str, bool]]:
    """Landlock rules that give `root`'s tree, but none of `excluded` inside it: `(path, whole)`, where
    whole=False is a directory on the way to an excluded place (it may be listed, not read or written;
    so a file made in it later cannot be read either). Symbolic links get no rule of their own."""
    inside = [e for e in excluded if e.startswith(root.rstrip("/") + "/")]
    if any(root == e or root.startswith(e + "/") for e in excluded):
        return []
    if not inside:
        return [(root, True)]
    out: list[tuple[str, bool]] = [(root, False)]
    try:
        entries = list(os.scandir(root))
    except OSError:
        return out
    for entry in entries:
        if entry.path in inside or entry.is_symlink():
            continue
        if entry.is_dir(follow_symlinks=False) and any(e.startswith(entry.path + "/") for e in inside):
            out += _tree_except(entry.path, inside)
        else:
            out.append((entry.path, True))
    return out


def stop_marked(marker: str) -> int:
    """SIGKILL every process whose environment carries `MARKER_VARIABLE=marker`; how many there were."""
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


# -- a mount namespace of the command's own (where the process may make one) -------------------------------
_CLONE_NEWNS = 0x00020000
_MS_RDONLY, _MS_NOSUID, _MS_NODEV, _MS_NOEXEC = 1, 2, 4, 8
_MS_REMOUNT, _MS_BIND, _MS_REC, _MS_PRIVATE = 32, 4096, 16384, 1 << 18
_KEPT_FLAGS = ((os.ST_NOSUID, _MS_NOSUID), (os.ST_NODEV, _MS_NODEV), (os.ST_NOEXEC, _MS_NOEXEC),
               (1024, 1024), (2048, 2048), (4096, 1 << 21))  # noatime, nodiratime, relatime


class MountPlan:
    """Mounts made in the child before the Landlock ruleset: `read_only` paths bound read-only over
    themselves (a mount point cannot be renamed, removed or replaced: EBUSY), `pinned` directories bound
    over themselves, writable (so the directory above a protected path cannot be renamed away either),
    `masked` paths made empty and read-only (a directory: an empty tmpfs; a file: `/dev/null`).

    Everything is computed in the parent; the child only calls mount(2). A failure stops the child
    before the command runs (exit 126, with the reason on stderr): it never runs unprotected."""

    def __init__(self, *, read_only: Iterable[str] = (), pinned: Iterable[str] = (), masked: Iterable[str] = ()) -> None:
        self._steps: list[tuple[bytes | None, bytes, bytes | None, int, bytes | None]] = []
        for path in pinned:
            self._steps.append((path.encode(), path.encode(), None, _MS_BIND | _MS_REC, None))
        for path in read_only:
            self._bind_read_only(path, path)
        for path in masked:
            if os.path.isdir(path) and not os.path.islink(path):
                self._steps.append((b"tmpfs", path.encode(), b"tmpfs", _MS_RDONLY | _MS_NOSUID | _MS_NODEV,
                                    b"mode=0755,size=4k"))
            else:
                self._bind_read_only("/dev/null", path)
        self.paths = [step[1].decode() for step in self._steps]
        """Every mount point, in order (for a message)."""

    def _bind_read_only(self, source: str, target: str) -> None:
        try:
            now = os.statvfs(target).f_flag
        except OSError:
            now = 0
        kept = 0
        for st_flag, ms_flag in _KEPT_FLAGS:
            if now & st_flag:
                kept |= ms_flag  # flags a user namespace may have locked must be kept on a remount
        self._steps.append((source.encode(), target.encode(), None, _MS_BIND | _MS_REC, None))
        self._steps.append((None, target.encode(), None,
                            _MS_BIND | _MS_REMOUNT | _MS_RDONLY | _MS_NOSUID | _MS_NODEV | kept, None))

    @property
    def steps(self) -> list[tuple[bytes | None, bytes, bytes | None, int, bytes | None]]:
        """The mount(2) calls, in order, as `apply_mounts` takes them (a plain value: `nbagent.safety._launcher`)."""
        return list(self._steps)

    def apply(self) -> None:
        """In the child, before the ruleset: `apply_mounts(self.steps)`."""
        apply_mounts(self._steps)


def apply_mounts(steps: Iterable[tuple[bytes | None, bytes, bytes | None, int, bytes | None]]) -> None:
    """In the command's process, before the ruleset: a mount namespace of its own, `/` private, then each
    `(source, target, fstype, flags, data)` mounted (`MountPlan.steps`); a failure ends the process (exit 126)."""
    if _LIBC is None:
        _fail(b"no C library")
    if _LIBC.unshare(_CLONE_NEWNS) != 0:
        _fail(b"unshare(CLONE_NEWNS) failed")
    if _LIBC.mount(None, b"/", None, ctypes.c_ulong(_MS_REC | _MS_PRIVATE), None) != 0:
        _fail(b"making / private failed")
    for source, target, fstype, flags, data in steps:
        if _LIBC.mount(source, target, fstype, ctypes.c_ulong(flags), data) != 0:
            _fail(b"mounting over " + target + b" failed")


def _fail(why: bytes) -> None:
    os.write(2, b"nbagent: the sandbox's mount namespace could not be set up (" + why + b"); the command did not run\n")
    os._exit(126)


@functools.lru_cache(maxsize=1)
def mount_namespace() -> bool:
    """Whether this process can give a command a mount namespace of its own (probed once: a child makes
    one, binds a folder read-only and mounts an empty tmpfs, as `MountPlan` would)."""
    import shutil
    import subprocess
    import tempfile

    true = shutil.which("true")
    if not sys.platform.startswith("linux") or _LIBC is None or true is None:
        return False
    probe_dir = tempfile.mkdtemp(prefix="nbagent-mount-probe-")
    try:
        os.mkdir(os.path.join(probe_dir, "empty"))
        plan = MountPlan(read_only=[probe_dir], masked=[os.path.join(probe_dir, "empty")])
        done = subprocess.run([true], preexec_fn=plan.apply, capture_output=True, timeout=10,
                              stdin=subprocess.DEVNULL, check=False)
        return done.returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False
    finally:
        shutil.rmtree(probe_dir, ignore_errors=True)
