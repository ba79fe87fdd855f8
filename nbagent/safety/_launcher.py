"""What a command's process does before it becomes the command (`set_up`), and a small program that does it
outside the kernel's process (`python -I -S _launcher.py SPEC -- ARGV...`), for a kernel too big to fork cheaply.

Every command a tool starts (sandboxed or not) first asks Linux to kill it when the kernel dies (`die_with`:
PR_SET_PDEATHSIG, the kernel's death checked for after it), then, under Landlock, takes its mount namespace,
leaves a supervisor outside the sandbox (`nbagent.safety.supervisor`) and restricts itself (`restrict_to`:
no new privileges, no capabilities, the command filter, the ruleset). The steps are a plain value, the `spec`
(`(starter pid, mount steps or None, supervise, ruleset fd or -1, network)`), and `set_up(spec)` takes them the
same way whichever way the process was started:

- forked from the kernel, `set_up` runs between fork and exec (`preexec_fn`). Forking copies the kernel's
  page tables: about 16 ms a GB of memory it holds (measured here: 2 ms at 11 MB, 9 ms at 511 MB, 32 ms at
  2 GB), twice under Landlock, whose supervisor forks again;
- started through this program (`vfork` and exec of a fresh interpreter, `-I -S`: no site, no environment
  variables of Python's, nothing but the standard library and this folder's `sandbox_linux` and `supervisor`,
  loaded by their paths), `set_up` runs in it, then it execs the command: 13.7 ms here whatever the kernel's
  size. `Prepared.how_to_start` (`nbagent.safety.sandbox_landlock`) chooses (`LAUNCH_ABOVE`).

Reads: its arguments (the spec, the command), which only the kernel that starts it writes, and the files it runs
from (its interpreter, the standard library, this folder), which the kernel uses it only when they lie outside
the workspace, where commands write (`sandbox_landlock._writable_launcher`).
"""

from __future__ import annotations

import marshal
import os
import signal  # (its siblings import it too: no cost of its own)
import sys

if __package__:  # imported: nbagent.safety._launcher
    from . import sandbox_linux as _linux
    from . import supervisor as _supervisor
else:  # run as a program: its two stdlib-only siblings, by their paths (no package, no site)
    from importlib.machinery import SourceFileLoader

    def _sibling(name: str) -> object:
        path = os.path.join(os.path.dirname(os.path.abspath(__file__)), f"{name}.py")
        module = sys.modules[f"_nbagent_{name}"] = type(sys)(f"_nbagent_{name}")
        module.__file__ = path
        exec(SourceFileLoader(module.__name__, path).get_code(module.__name__), module.__dict__)  # (its cached
        return module  # bytecode, as an import reads it: `importlib.util` would cost 3 ms more to import)

    _linux, _supervisor = _sibling("sandbox_linux"), _sibling("supervisor")

__all__ = ["PROGRAM", "set_up"]

PROGRAM = os.path.abspath(__file__)
"""This file, run as the program that starts a command outside the kernel's process."""


def set_up(spec: tuple[object, ...], command_filter: object = None) -> None:
    """In the command's process, before exec: the steps `spec` names (see the module docstring), in order. A
    step that fails ends the process (exit 126, with why on stderr): the command never runs with less.
    `command_filter`: the filter already built for `spec`'s network setting (the forked child's parent made it)."""
    starter, steps, supervise, ruleset, network = spec
    die_with(starter)
    if steps is not None:
        _linux.apply_mounts(steps)
    if supervise:
        _supervisor.supervise_command()
    if ruleset >= 0:
        _linux.restrict_to(ruleset, command_filter or _linux.CommandFilter(network=network))


def die_with(starter: int) -> None:
    """SIGKILL this process when the process that started it dies, however it dies (a kernel killed outright runs
    no exit handler); if it died already, now."""
    if _linux._LIBC is None:  # not Linux
        return
    _linux._LIBC.prctl(_linux._PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != starter:  # it died before this process asked
        os.kill(os.getpid(), signal.SIGKILL)


def main(args: list[str]) -> None:
    """`SPEC -- ARGV...`: set up as `SPEC` says (hex of its `marshal` form), then exec `ARGV` (found on `PATH`)."""
    try:
        if len(args) < 3 or args[1] != "--":
            raise ValueError("usage: _launcher.py SPEC -- ARGV...")
        spec = marshal.loads(bytes.fromhex(args[0]))
        set_up(spec)
        if spec[3] >= 0:
            os.close(spec[3])  # the ruleset: enforced now, and not the command's
        os.execvp(args[2], args[2:])
    except OSError as exc:
        os.write(2, f"nbagent: {args[2] if len(args) > 2 else 'the command'}: {exc.strerror or exc}\n".encode())
        os._exit(127 if isinstance(exc, FileNotFoundError) else 126)
    except Exception as exc:  # nothing runs with less than its spec
        os.write(2, f"nbagent: the command could not be set up ({type(exc).__name__}: {exc}); it did not run\n"
                 .encode())
        os._exit(126)


if __name__ == "__main__":
    main(sys.argv[1:])
