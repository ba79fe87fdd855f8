"""Opening a path below a directory in one step, so that no symbolic link swapped in meanwhile is followed.

`open_beneath(root_fd, parts, flags)` opens `parts` (a path already resolved, so it holds no link and no
`..`) relative to the directory `root_fd`:

- with `openat2(2)` (Linux 5.6+), in one system call with `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
  RESOLVE_NO_MAGICLINKS`: the kernel itself refuses a link in any component and any way out of the root;
- elsewhere, one `openat(2)` per component, each with `O_NOFOLLOW` and relative to the descriptor of the
  component before it, so a component swapped for a link is refused (ELOOP or ENOTDIR), never followed.

Either way, what is opened is what was checked, or nothing. `openat2` is reached through `ctypes` (the
standard library has no binding) and probed once: a kernel or a seccomp filter without it falls back.
"""

from __future__ import annotations

import ctypes
import errno
import functools
import os
import platform
import sys

__all__ = ["O_CLOEXEC", "O_DIRECTORY", "O_NOFOLLOW", "O_NONBLOCK", "has_openat2", "open_beneath"]

O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
O_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
O_NONBLOCK = getattr(os, "O_NONBLOCK", 0)

_RESOLVE_NO_MAGICLINKS = 0x02
_RESOLVE_NO_SYMLINKS = 0x04
_RESOLVE_BENEATH = 0x08
_SYS_OPENAT2 = 437  # the same number on every architecture Linux has added it to (x86_64, arm64, ...)


class _OpenHow(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64), ("resolve", ctypes.c_uint64)]


@functools.lru_cache(maxsize=1)
def _libc():
    return ctypes.CDLL(None, use_errno=True)


def _openat2(dir_fd: int, path: str, flags: int) -> int:
    how = _OpenHow(flags, 0, _RESOLVE_BENEATH | _RESOLVE_NO_SYMLINKS | _RESOLVE_NO_MAGICLINKS)
    fd = _libc().syscall(ctypes.c_long(_SYS_OPENAT2), ctypes.c_int(dir_fd), ctypes.c_char_p(os.fsencode(path)),
                         ctypes.byref(how), ctypes.c_size_t(ctypes.sizeof(how)))
    if fd < 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err), path)
    return fd


@functools.lru_cache(maxsize=1)
def has_openat2() -> bool:
    """Whether this kernel (and any seccomp filter around this process) lets `openat2` be used."""
    if not sys.platform.startswith("linux") or platform.machine().lower() not in (
            "x86_64", "amd64", "aarch64", "arm64", "riscv64", "ppc64le", "s390x", "loongarch64"):
        return False
    try:
        fd = _openat2(-100, "/", os.O_RDONLY | O_DIRECTORY | O_CLOEXEC)  # AT_FDCWD; "/" is not beneath it
    except OSError as exc:
        return exc.errno == errno.EXDEV  # refused for leading out: the flags are understood
    except Exception:  # pragma: no cover - no syscall() in this libc
        return False
    os.close(fd)  # pragma: no cover - a kernel that let "/" through does not honour RESOLVE_BENEATH
    return False


def open_beneath(root_fd: int, parts: tuple[str, ...], flags: int, *, use_openat2: bool | None = None) -> int:
    """A descriptor for `parts` below `root_fd` (an empty `parts`: the root itself), opened with `flags`
    (`O_NOFOLLOW` is added for the last component). Raises OSError: ELOOP or ENOTDIR when a component is a
    link, EXDEV when the path leads out, EAGAIN when a rename raced the lookup (try again)."""
    if any(p in ("", ".", "..") or "/" in p for p in parts):
        raise OSError(errno.EINVAL, "not a resolved path", "/".join(parts))
    flags |= O_CLOEXEC | (O_NOFOLLOW if parts else 0)
    if use_openat2 if use_openat2 is not None else has_openat2():
        return _openat2(root_fd, "/".join(parts) or ".", flags)
    if not parts:
        return os.dup(root_fd)  # the root itself: a directory, already open
    current = root_fd
    opened = []
    try:
        for part in parts[:-1]:
            current = os.open(part, os.O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC, dir_fd=current)
            opened.append(current)
        return os.open(parts[-1], flags, dir_fd=current)
    finally:
        for f in opened:
            os.close(f)
