"""Which workspace files a stdio server runs: every way its configuration can name code, one resolver each.

    pins = pinned_files(config, root)        # {"server.py": sha256, "pkg/__main__.py": sha256, ...}

Reads: a workspace configuration (`command`, `args`, `env`, `cwd`), and the workspace files they lead to,
which the model, a cloned repository or a download could have written. What could happen: the person
trusts `python -m tools.server`, and the module's file (or a file `BASH_ENV` points to) is edited after;
the next start runs the new content unasked. What stops it: `_workspace` hashes every file found here into
the configuration's digest, when it is read and again at every start (restarts included, `_workspace.
changed_since_read`), so a change to any of them asks again. Each way of naming code is one entry of
`RESOLVERS`; tests/security/test_trust_pins.py takes every entry and fails for a kind it has no example of.

How `python -m module` is resolved, and why this way: by searching, without running anything, the places
the interpreter it starts would search first, in its order (its working directory unless `-I`/`-P`, then
`PYTHONPATH` from the server's `env` unless `-I`/`-E`, then a workspace virtualenv's `site-packages`), with
the import system's own file finder (`importlib.machinery.FileFinder`, which only lists directories).
Asking the interpreter (`python -c "importlib.util.find_spec(...)"`) would start a program the configuration
names before the person trusted it: a workspace virtualenv's Python runs its `.pth` files on start, and
`find_spec("a.b")` imports `a` (runs `a/__init__.py`). A module found nowhere in the workspace comes from
the interpreter's own library, which no workspace file changes: nothing to pin. Because the search runs
again at every start, a file put earlier on the path later (a `json.py` beside the server) changes what
is pinned, and asks again.

What no resolver can see, by kind: what that code loads next (an imported `helper.py`, `require('./lib.js')`,
an `.npmrc`), covered by pinning every file in the folders it runs from (`code_folders`, walked by
`_workspace`); and a name a shell builds when it runs (`$`, backquotes, quotes, globs), for which
`unresolvable` gives the reason the configuration is refused trust.
"""

from __future__ import annotations

import importlib.machinery as machinery
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Iterator

from ._config import find_command

__all__ = ["Launch", "RESOLVERS", "code_folders", "launch_of", "resolved_files", "unresolvable"]

_MODULE_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")
_PIECES_RE = re.compile(r"[\s=,;&|'\"()<>`" + re.escape(os.pathsep) + r"]+")
"""Where a value or an argument is split into the pieces that may be paths (`bash -c "python x.py"`)."""
_STARTUP_MODULES = ("sitecustomize", "usercustomize")
"""Modules any Python imports on start from its path (its `PYTHONPATH` included) when they exist."""
_MAIN_FILES = ("__main__.py",)
"""What a Python runs when given a folder (or a package with `-m`)."""


@dataclass(frozen=True, slots=True)
class Launch:
    """A stdio server's start, as written (nothing expanded): the program, its arguments, its variables and
    its working directory (absolute), and the workspace's real path."""

    command: str
    args: tuple[str, ...]
    env: tuple[tuple[str, str], ...]
    cwd: Path
    root: str

    def env_value(self, name: str) -> str | None:
        return next((v for k, v in self.env if k == name), None)


def launch_of(command: str, args: Iterable[str], env: dict[str, str], cwd: Path, root: str) -> Launch:
    return Launch(command, tuple(args), tuple(sorted(env.items())), cwd, root)


# ---------------------------------------------------------------------------------------------------
# The resolvers: each takes a launch and yields candidate paths (the caller keeps workspace files only)
# ---------------------------------------------------------------------------------------------------
def _path_like(launch: Launch, text: str) -> Path | None:
    if not text or "${" in text or "\0" in text:
        return None
    return Path(text) if os.path.isabs(text) else launch.cwd / text


def _command(launch: Launch) -> Iterator[Path]:
    """The program itself: a path (relative to its cwd), or what PATH finds (a workspace folder on PATH)."""
    given = _path_like(launch, launch.command)
    if given is not None:
        yield given
    if launch.command and "${" not in launch.command and not os.path.dirname(launch.command):
        path = launch.env_value("PATH")  # what the server gets (`server_environment`): its own, else the kernel's
        kernel = os.environ.get("PATH", "")
        path = kernel if path is None else re.sub(r"\$\{PATH(?::-[^}]*)?\}", lambda _: kernel, path)
        found = find_command(launch.command, path)  # where the start looks (`_transports`)
        if found:
            yield _path_like(launch, found) or Path(found)


def _arguments(launch: Launch) -> Iterator[Path]:
    """A script or any file an argument names: the argument, or any piece of it (`--flag=FILE`, the words of
    `bash -c "python x.py"`); a folder argument runs its `__main__.py` (Python's rule for a folder)."""
    for arg in launch.args:
        for text in {arg, *_PIECES_RE.split(arg)} - {""}:
            path = _path_like(launch, text)
            if path is None:
                continue
            yield path
            for main in _MAIN_FILES:
                yield path / main


def _environment(launch: Launch) -> Iterator[Path]:
    """Files the environment points to: any piece of any value (split at spaces, `=`, `,` and the path
    separator) that is a path: `BASH_ENV`, `ENV`, `PYTHONSTARTUP`, `NODE_OPTIONS=--require ./x.js`, ..."""
    for _name, value in launch.env:
        for piece in _PIECES_RE.split(value):
            path = _path_like(launch, piece)
            if path is not None:
                yield path


def _python_path(launch: Launch) -> list[Path]:
    """Where the Python the server starts looks for modules, as far as workspace files can be there."""
    flags = set()
    for arg in launch.args:
        if not arg.startswith("-") or arg.startswith(("--", "-m", "-c")):
            break  # the options before the module, code or script
        flags.update(arg[1:])
    places: list[Path] = []
    if not flags & {"I", "P"}:
        places.append(launch.cwd)
    pythonpath = launch.env_value("PYTHONPATH")
    if pythonpath and not flags & {"I", "E"}:
        places.extend(p for p in (_path_like(launch, t) for t in pythonpath.split(os.pathsep)) if p is not None)
    places.extend(_venv_site_packages(launch))
    return places


def _venv(launch: Launch) -> Path | None:
    """The virtualenv the command belongs to (a `pyvenv.cfg` above its folder), if any."""
    command = _path_like(launch, launch.command)
    env_dir = command.parent.parent if command is not None else None
    return env_dir if env_dir is not None and (env_dir / "pyvenv.cfg").is_file() else None


def _venv_site_packages(launch: Launch) -> list[Path]:
    """The `site-packages` of the command's virtualenv."""
    env_dir = _venv(launch)
    if env_dir is None:
        return []
    found = [*env_dir.glob("lib*/python*/site-packages"), env_dir / "Lib" / "site-packages"]
    return sorted(p for p in found if p.is_dir())


def _find_module(name: str, places: list[Path]) -> list[Path]:
    """The files importing `name` runs, found the way the import system finds them (first place wins):
    each parent package's `__init__`, the module's file, and a package's `__init__` and `__main__`."""
    loaders = [(machinery.ExtensionFileLoader, machinery.EXTENSION_SUFFIXES),
               (machinery.SourceFileLoader, machinery.SOURCE_SUFFIXES),
               (machinery.SourcelessFileLoader, machinery.BYTECODE_SUFFIXES)]
    found: list[Path] = []
    search = [str(p) for p in places]
    parts = name.split(".")
    for depth, part in enumerate(parts):
        spec, portions = None, []
        for place in search:
            if not os.path.isdir(place):
                continue
            spec = machinery.FileFinder(place, *loaders).find_spec(part)
            if spec is not None and spec.loader is not None:
                break  # a module or a regular package: the first one wins
            if spec is not None:  # a namespace portion: the search goes on, as the import system's does
                portions.extend(spec.submodule_search_locations or [])
            spec = None
        if spec is None and not portions:
            return found
        if spec is not None and spec.origin and spec.has_location:
            found.append(Path(spec.origin))
        locations = list(spec.submodule_search_locations or []) if spec is not None else portions
        if depth == len(parts) - 1 and locations:  # `-m package` runs its __main__
            for main in _MAIN_FILES:
                found.extend(Path(loc) / main for loc in locations)
        search = locations
    return found


def _module(launch: Launch) -> Iterator[Path]:
    """`-m module` (also `-mmodule`): the module's file, its packages' `__init__`s, a package's `__main__`."""
    args = launch.args
    for i, arg in enumerate(args):
        name = args[i + 1] if arg == "-m" and i + 1 < len(args) else arg[2:] if arg.startswith("-m") else None
        if name and _MODULE_RE.match(name):
            yield from _find_module(name, _python_path(launch))


def _startup(launch: Launch) -> Iterator[Path]:
    """What a Python runs on start from the workspace: `sitecustomize` / `usercustomize` on its
    `PYTHONPATH`, and a workspace virtualenv's `pyvenv.cfg` and `.pth` files."""
    places = _python_path(launch)
    for name in _STARTUP_MODULES:
        yield from _find_module(name, places[1:] if places and places[0] == launch.cwd else places)
    env_dir = _venv(launch)
    if env_dir is not None:
        yield env_dir / "pyvenv.cfg"
        for site in _venv_site_packages(launch):
            yield from sorted(site.glob("*.pth"))


RESOLVERS: dict[str, Callable[[Launch], Iterable[Path]]] = {
    "command": _command,
    "argument": _arguments,
    "module": _module,
    "environment": _environment,
    "startup": _startup,
}
"""Every way a stdio server's configuration names code it runs, by kind (see the module docstring)."""


def resolved_files(launch: Launch) -> dict[str, str]:
    """The workspace files `launch` runs (every resolver's): their path relative to the workspace -> the
    path to read. A file is the workspace's when it is there, or when the path naming it is a link in the
    workspace (its content, wherever the link leads, is what runs: a link retargeted, or its target
    edited, changes what is pinned)."""
    root = launch.root
    out: dict[str, str] = {}

    def inside(path: str) -> bool:
        return path == root or path.startswith(root + os.sep)

    for resolve in RESOLVERS.values():
        for path in resolve(launch):
            try:
                given = os.path.normpath(os.path.abspath(path))
                real = os.path.realpath(given)
                here = os.path.join(os.path.realpath(os.path.dirname(given)), os.path.basename(given))
            except (OSError, ValueError):
                continue
            name = real if inside(real) else here if inside(here) else None
            if name is not None and os.path.isfile(real):
                out.setdefault(os.path.relpath(name, root), real)
    return dict(sorted(out.items()))


# ---------------------------------------------------------------------------------------------------
# What the resolvers cannot see: what the code loads next, and names a shell builds when it runs
# ---------------------------------------------------------------------------------------------------
_CONFIG_REF_RE = re.compile(r"\$\{[A-Za-z_][A-Za-z0-9_]*(?::-[^}]*)?\}")
"""`${NAME}` / `${NAME:-default}`: nbagent's own expansion from the kernel's environment, not the shell's."""
_SHELL_BUILT_RE = re.compile(r"[$`'\"*?\[]")
"""What a shell expands or joins before it reads a name: `$`, backquotes, quotes, globs."""


def _shell_built(text: str) -> str | None:
    found = _SHELL_BUILT_RE.search(_CONFIG_REF_RE.sub("", text))
    return found.group(0) if found else None


def unresolvable(launch: Launch) -> str | None:
    """Why the files `launch` runs cannot be read from its configuration literally (None: they can): a shell
    `-c` string, or an environment value, holding a name the shell builds when it runs (`BASH_ENV=$PWD/x.sh`,
    `. ./e""vil.sh`, `source ./*.sh`). A pin taken from such text would pin nothing; the caller refuses."""
    shell = os.path.basename(launch.command).endswith("sh")  # sh, bash, dash, zsh, ksh...: by kind of name
    for i, arg in enumerate(launch.args):
        if shell and i > 0 and launch.args[i - 1].startswith("-") and "c" in launch.args[i - 1].lstrip("-"):
            char = _shell_built(arg)
            if char:
                return f"its shell command {arg!r} builds names when it runs ({char!r})"
    for name, value in launch.env:
        char = _shell_built(value)
        if char and ("/" in value or os.sep in value or char in "$`"):
            return f"its environment value {name}={value!r} builds a name when it runs ({char!r})"
    return None


def code_folders(launch: Launch, files: Iterable[str]) -> list[str]:
    """(`files`: relative to the workspace.) The workspace folders whose every file a trust covers: the server's cwd and the folder of each file
    it runs, when inside the workspace; what its code imports, requires or reads next (`helper.py`, a
    `json.py` beside it, `./lib.js`, `.npmrc`, `pyproject.toml`) is there. Nested folders are kept once."""
    root = launch.root
    found = {os.path.realpath(launch.cwd), *(os.path.dirname(os.path.join(root, f)) for f in files)}
    inside = sorted(f for f in found if f == root or f.startswith(root + os.sep))
    return [f for f in inside if not any(f.startswith(o + os.sep) for o in inside if o != f)]
