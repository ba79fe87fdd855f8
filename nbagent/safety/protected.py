"""Which writes ask first, decided by what a path does, not what it is called: one function, `write_reason`.

Reads: paths the model gives (untrusted: it may spell a name in another case, add trailing dots or spaces,
zero-width characters, a Windows short name or stream suffix, or reach the file through a link or `..`),
and what is on disk around them. What could happen: a write makes a later program (Python starting from a
virtualenv, git, an editor, Jupyter, direnv, a shell, another agent, nbagent's own MCP client) run code or
send requests the person never saw. What stops it: every call that writes files names what it writes
(`Tool(writes=...)`, by default its permission subject), and the permission pipeline asks `write_reason`
about each before any mode or grant: a write of one of these kinds always asks; only an allow rule the
person wrote allows it. A tool that cannot say what it writes is never allowed by `acceptEdits`.

The kinds (below the workspace's root; the folders above it are the person's choice):

- hidden: any component that starts with `.` (`.git/`, `.vscode/`, `.envrc`, `.gitattributes`,
  `.python-version`...): dot-files and dot-folders are where programs keep the settings they load (hooks,
  filters, tasks, interpreters, servers);
- inside an environment or package tree: a `pyvenv.cfg` or `conda-meta` in a folder above it (up to the
  workspace root), or a `site-packages`, `dist-packages`, `__pypackages__`, `node_modules` or `__pycache__`
  component: Python runs `.pth` files and imports from there when it starts, npm runs packages' scripts,
  a bytecode cache is run instead of its source;
- executable: an existing file with an execute bit, or a file in a folder on `PATH` (a program run by name);
- configuration a program loads: Jupyter's and IPython's files (`jupyter_*_config.py/.json`,
  `ipython_*config.py`), Python's start-up modules (`sitecustomize.py`, `usercustomize.py`), `pyvenv.cfg`,
  the files that make a folder a bare repository (`HEAD`, `config`, `commondir`, `packed-refs`, `gitdir`),
  a folder the environment names as a program's configuration or code (`JUPYTER_CONFIG_DIR`, `JUPYTER_PATH`,
  `IPYTHONDIR`, `XDG_CONFIG_HOME`, `PYTHONSTARTUP`, `PYTHONUSERBASE`...) when the workspace holds it, and
  every file nbagent itself read as configuration (an MCP file the person named: `note_loaded_configuration`);
  all loaded by a program that starts without the person running the project;
- nbagent's trust store (`trust.config_dir()`): it says which configurations may start.
- a Windows short name (`GIT~1`), which may stand for any of the above.

Left out on purpose: the project's own code and build files (`setup.py`, `Makefile`, `package.json`,
`conftest.py`, `noxfile.py`...): they run only when the person runs them, and a model is expected to edit
code; a person reviews code as code. So is content: a `.py` file that shadows a module is code like any other.

`PROTECTED_PATHS` is the sandbox's list: the names it keeps read-only at the workspace root for shell
commands (a mount needs a name; every one of them is hidden, so `write_reason` covers them by kind).
"""

from __future__ import annotations

import fnmatch
import os
import re
import stat
import threading
import unicodedata
from dataclasses import dataclass
from typing import Iterable

from .hidden import ANY_HIDDEN

__all__ = ["PROTECTED_PATHS", "PROTECTED_PATTERNS", "REASON", "Target", "normalize_name",
           "note_loaded_configuration", "protected_reason", "write_reason"]

PROTECTED_PATHS = (".git", ".nbagent", ".mcp.json", ".vscode", ".idea", ".devcontainer", ".jupyter", ".ipython",
                   ".envrc", ".pre-commit-config.yaml", ".husky", ".hg", ".claude", ".cursor", ".gemini", ".codex",
                   ".continue", ".windsurf", ".pdbrc")
"""Names the sandbox keeps read-only, each whole, at the workspace root for shell commands (file tools ask
for every hidden path, these included, at any depth)."""
PROTECTED_PATTERNS = ("jupyter_*_config.py", "jupyter_*_config.json", "jupyter_config.py", "jupyter_config.json",
                      "ipython_config.py", "ipython_*_config.py", "ipython_kernel_config.py", "sitecustomize.py",
                      "usercustomize.py", "pyvenv.cfg", ".pdbrc")
"""File names, at any depth, that a program loads from the folder it starts in or from its path."""
_BARE_REPO_NAMES = frozenset({"head", "config", "commondir", "packed-refs", "gitdir"})
_PACKAGE_TREES = {"site-packages": "Python runs its `.pth` files and imports from it when it starts",
                  "dist-packages": "Python runs its `.pth` files and imports from it when it starts",
                  "__pypackages__": "Python tools import from it",
                  "node_modules": "npm and node run the packages' scripts and code from it",
                  "__pycache__": "Python runs a cached module instead of its source"}
_ENV_MARKERS = (("pyvenv.cfg", False), ("conda-meta", True))
_CONFIG_VARIABLES = ("JUPYTER_CONFIG_DIR", "JUPYTER_DATA_DIR", "IPYTHONDIR", "XDG_CONFIG_HOME", "PYTHONSTARTUP",
                     "PYTHONUSERBASE", "JUPYTER_PATH", "JUPYTER_CONFIG_PATH")
"""Variables that name a folder (or file) a program loads configuration or code from."""
REASON = "configuration that can run programs"
"""What an approval for such a write says, after the path."""

_SHORT = re.compile(r"^([a-z0-9_-]{1,6})~[0-9]+$")
_loaded: set[str] = set()
_loaded_lock = threading.Lock()


@dataclass(frozen=True, slots=True)
class Target:
    """A file a call writes: the path as the call gives it, and the workspace it is relative to."""

    path: str
    """As given: relative to `workspace`, or absolute."""
    workspace: str
    """The root of the workspace the call works in."""


def normalize_name(name: str) -> str:
    """One path component as a case-insensitive, Unicode-normalising or Windows file system sees it: case
    folded, NFKC, hidden characters dropped (the one list, `hidden.ANY_HIDDEN`: invisible, bidi, control),
    trailing dots and spaces and an NTFS stream (`:$DATA`) cut."""
    text = unicodedata.normalize("NFKC", ANY_HIDDEN.sub("", name)).casefold()
    text = text.split(":", 1)[0] if ":" in text else text
    return text.rstrip(". ") or text


def note_loaded_configuration(path: str | os.PathLike[str]) -> None:
    """Record that nbagent read this file as configuration (an MCP servers file the person named): from now
    on, a write to it asks first, whatever its name."""
    with _loaded_lock:
        _loaded.add(os.path.realpath(os.fspath(path)))


def write_reason(targets: Iterable[Target | str], workspace: str | None = None) -> str | None:
    """Why writing these files asks first (the first one that does), or None: the one decision, by kind (see
    the module docstring). A plain string target is relative to `workspace` (default: the working
    directory)."""
    for target in targets:
        if not isinstance(target, Target):
            target = Target(os.fspath(target), workspace or os.getcwd())
        reason = _one(target)
        if reason:
            return reason
    return None


def protected_reason(rel_paths: Iterable[str], *, extra_roots: Iterable[str] = (), real_path: str | None = None,
                     workspace: str | None = None) -> str | None:
    """`write_reason` for paths relative to a workspace (default: the working directory); `real_path` and
    `extra_roots` (folders that count as nbagent's trust store) are checked as well."""
    root = workspace or os.getcwd()
    paths = [p for p in rel_paths if p is not None]
    if real_path is not None:
        paths.append(real_path)
        for top in extra_roots:
            if _inside(os.path.realpath(real_path), os.path.realpath(top)):
                return f"{real_path} is in nbagent's trust store ({REASON}: it says which configurations may start)"
    return write_reason([Target(str(p), root) for p in paths])


# -- the kinds --------------------------------------------------------------------------------------------------
def _one(target: Target) -> str | None:
    root = os.path.realpath(target.workspace)
    given = str(target.path).replace("\\", "/")
    lexical = os.path.normpath(os.path.join(root, given))
    real = os.path.realpath(lexical)
    shown = _shown(str(target.path))
    if _inside(real, os.path.realpath(_config_dir())) or _inside(lexical, os.path.realpath(_config_dir())):
        return f"{shown} is in nbagent's trust store ({REASON}: it says which configurations may start)"
    if real in _loaded or lexical in _loaded:
        return f"{shown} is a file nbagent reads its MCP servers from, so it is {REASON} (programs it starts)"
    forms = [rel for rel in (_relative(root, lexical), _relative(root, real)) if rel is not None]
    if not forms:
        return f"{shown} is outside the workspace ({root}): only writes inside it count as file edits"
    spelled = ([_parts(given)] if not os.path.isabs(given) else []) + [_parts(rel) for rel in forms]
    for parts in spelled:
        kind = _named_kind(parts)
        if kind:
            return f"{shown}: {kind[0]}, so it counts as {REASON} ({kind[1]})"
    kind = _disk_kind(real, root)
    if kind:
        return f"{shown}: {kind[0]}, so it counts as {REASON} ({kind[1]})"
    return None


def _named_kind(parts: list[str]) -> tuple[str, str] | None:
    """A kind told by the path's components (normalised as a lenient file system would)."""
    for i, part in enumerate(parts):
        if part.startswith("."):
            folder = i < len(parts) - 1
            return f"{'the folder ' if folder else ''}{part!r} is hidden", _why_hidden(part, folder)
        if _SHORT.match(part):
            return (f"{part!r} is a Windows short name, which may stand for any name (a hidden one too)",
                    "the long name it stands for may be a folder programs load settings from")
        if part in _PACKAGE_TREES:
            return f"it is inside a package tree ({part!r})", _PACKAGE_TREES[part]
    last = parts[-1] if parts else ""
    if any(fnmatch.fnmatchcase(last, p) for p in PROTECTED_PATTERNS):
        return f"{last!r} is a file a program loads at start-up", _why_loaded(last)
    if last in _BARE_REPO_NAMES:
        return (f"{last!r} is one of the files that make a folder a bare repository",
                "a repository's settings and hooks make later git commands run programs")
    return None


def _disk_kind(real: str, root: str) -> tuple[str, str] | None:
    """A kind told by what is on disk around the path: environments, executables, configured folders."""
    folder = os.path.dirname(real)
    while _inside(folder, root):
        for marker, is_dir in _ENV_MARKERS:
            where = os.path.join(folder, marker)
            if os.path.isdir(where) if is_dir else os.path.isfile(where):
                return (f"it is inside a Python environment ({_relative(root, folder)}/ holds {marker})",
                        "the environment's Python runs `.pth` files, `sitecustomize` and scripts from it")
        if folder == root:
            break
        folder = os.path.dirname(folder)
    try:
        st = os.stat(real, follow_symlinks=False)
    except OSError:
        st = None
    if st is not None and stat.S_ISREG(st.st_mode) and st.st_mode & 0o111:
        return "it is an executable file", "a program, run by its name or path"
    parent = os.path.dirname(real)
    for entry in os.environ.get("PATH", "").split(os.pathsep):
        if entry and os.path.isabs(entry) and os.path.realpath(entry) == parent:
            return "its folder is on PATH", "a file there is a program that commands run by name"
    for variable, place in _configured_places():
        if _inside(place, root) and _inside(real, place):  # a folder the workspace holds (or is)
            return (f"it is in {place}, which {variable} names as a program's configuration",
                    "Jupyter, IPython, Python or other programs load what they find there")
    return None


def _configured_places() -> list[tuple[str, str]]:
    found = []
    for variable in _CONFIG_VARIABLES:
        for value in os.environ.get(variable, "").split(os.pathsep):
            if value and os.path.isabs(value):
                found.append((variable, os.path.realpath(value)))
    return found


def _config_dir() -> str:
    from .trust import config_dir

    return str(config_dir())


def _inside(path: str, top: str) -> bool:
    return path == top or path.startswith(top.rstrip(os.sep) + os.sep)


def _relative(root: str, path: str) -> str | None:
    if not _inside(path, root):
        return None
    rel = os.path.relpath(path, root)
    return "." if rel == "." else rel.replace(os.sep, "/")


def _parts(path: str) -> list[str]:
    out: list[str] = []
    for raw in path.replace("\\", "/").split("/"):
        if raw in ("", "."):
            continue
        if raw == "..":
            if out:
                out.pop()
            continue
        out.append(normalize_name(raw))
    return out


def _shown(path: str) -> str:
    """The path with invisible and control characters written as escapes, so the person sees them."""
    return "".join(c if c.isprintable() and not ANY_HIDDEN.match(c) else f"\\u{ord(c):04x}" for c in path)


def _why_hidden(name: str, folder: bool) -> str:
    name = name.lstrip(".")
    if name in ("git", "hg") or name.startswith("gitattributes") or name.startswith("gitmodules"):
        return "a repository's settings, hooks and attributes make later git commands run programs"
    if name == "nbagent":
        return "nbagent's own settings: MCP servers it starts, and its stored sessions"
    if name == "mcp.json":
        return "MCP servers: programs started and URLs called with your keys"
    if name in ("jupyter", "ipython"):
        return "Jupyter and IPython load and run it"
    if name == "envrc":
        return "direnv runs it"
    if name in ("pre-commit-config.yaml", "husky"):
        return "git commit runs what it names"
    if folder and name in ("venv", "env", "tox", "nox", "conda"):
        return "an environment: its Python runs what it finds there"
    if name.startswith("env"):
        return "programs load the variables it sets, and act on them"
    return "programs keep the settings they load in hidden files and folders: hooks, tasks, interpreters, servers"


def _why_loaded(name: str) -> str:
    if name.startswith(("jupyter", "ipython")):
        return "Jupyter and IPython load and run it"
    if name == "pyvenv.cfg":
        return "it makes a folder a Python environment and names its interpreter"
    return "Python imports it when it starts"
