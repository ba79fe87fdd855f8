"""Workspace paths that are configuration that runs code or sends requests: the one list.

Reads: paths the model gives (untrusted: it may spell a name in another case, add trailing dots or spaces,
zero-width characters, a Windows short name or stream suffix, or reach the file through a link or `..`).
What could happen: a write to one of these makes a later program (nbagent's MCP client, git, an editor,
Jupyter, direnv, pre-commit, another agent) run code or send requests the person never saw. What stops
it: every tool that writes files asks for these (`protected_reason`), whatever the mode or grant, and the
sandbox keeps them read-only for shell commands (`nbagent.safety.sandbox` takes `PROTECTED_PATHS` from here).

Every entry is matched at any depth, case-insensitively, as given and as it resolves.

| entry | why |
|---|---|
| `.git` (the directory, its config, hooks, info, everything) | hooks, `core.fsmonitor`, `core.pager`, filters run programs |
| the files that make a folder a bare repository (`HEAD`, `config`, `commondir`, `packed-refs`, `gitdir`) | same, for a repository without `.git` |
| `.nbagent/` | nbagent's own MCP configuration and stored sessions |
| `.mcp.json` | MCP servers: programs nbagent (and other MCP clients) start |
| `.vscode/`, `.idea/`, `.devcontainer/` | tasks that run on open, interpreter paths, container commands |
| `.jupyter/`, `.ipython/`, `jupyter_*_config.py/.json`, `ipython_*config.py` | Jupyter and IPython load these and run them |
| `.envrc` | direnv runs it on `cd` |
| `.pre-commit-config.yaml`, `.husky/` | programs run by `git commit` |
| `.hg/` | Mercurial hooks |
| `.claude/`, `.cursor/`, `.gemini/`, `.codex/`, `.continue/`, `.windsurf/` | other agents' settings: hooks and MCP servers |

Left out on purpose: the project's own code and build files (`setup.py`, `Makefile`, `package.json`,
`conftest.py`, `noxfile.py`...): they run only when the person runs them, and a model is expected to edit
code; a person reviews code as code. `.env` is data read by programs (and usually behind a read deny rule).
"""

from __future__ import annotations

import fnmatch
import os
import re
import unicodedata
from typing import Iterable

__all__ = ["PROTECTED_PATHS", "PROTECTED_PATTERNS", "REASON", "normalize_name",
           "protected_reason"]

PROTECTED_PATHS = (".git", ".nbagent", ".mcp.json", ".vscode", ".idea", ".devcontainer", ".jupyter", ".ipython",
                   ".envrc", ".pre-commit-config.yaml", ".husky", ".hg", ".claude", ".cursor", ".gemini", ".codex",
                   ".continue", ".windsurf")
"""Names (files or directories, protected whole) that are configuration which runs code. File tools ask for
them at any depth (a nested repository runs its own hooks, a notebook in a sub-folder reads the `.mcp.json`
beside it); the sandbox keeps each one at the workspace root read-only for shell commands."""
PROTECTED_PATTERNS = ("jupyter_*_config.py", "jupyter_*_config.json", "jupyter_config.py", "jupyter_config.json",
                      "ipython_config.py", "ipython_*_config.py", "ipython_kernel_config.py")
"""File names, at any depth, that Jupyter or IPython load from the directory they start in."""
_BARE_REPO_NAMES = frozenset({"head", "config", "commondir", "packed-refs", "gitdir"})
REASON = "configuration that can run programs"
"""What an approval for such a write says, after the path."""

_ROOT_NAMES = frozenset(PROTECTED_PATHS)
_INVISIBLE = re.compile("[\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200f\u202a-\u202e"
                        "\u2060-\u206f\u3164\ufe00-\ufe0f\ufeff\uffa0]")
_SHORT = re.compile(r"^([a-z0-9_-]{1,6})~[0-9]+$")


def normalize_name(name: str) -> str:
    """One path component as a case-insensitive, Unicode-normalising or Windows file system sees it: case
    folded, NFKC, invisible characters dropped, trailing dots and spaces and an NTFS stream (`:$DATA`) cut."""
    text = unicodedata.normalize("NFKC", _INVISIBLE.sub("", name)).casefold()
    text = text.split(":", 1)[0] if ":" in text else text
    return text.rstrip(". ") or text


def _short_name_of_protected(name: str) -> bool:
    """`GIT~1`, `VSCODE~1`: a Windows 8.3 short name that can stand for a protected name."""
    m = _SHORT.match(name)
    if m is None:
        return False
    prefix = m.group(1)
    return any(p.lstrip(".").replace(".", "").startswith(prefix) for p in _ROOT_NAMES)


def _component_reason(parts: list[str]) -> str | None:
    for part in parts:
        if part in _ROOT_NAMES or _short_name_of_protected(part):
            return part
    if parts:
        last = parts[-1]
        if any(fnmatch.fnmatchcase(last, p) for p in PROTECTED_PATTERNS):
            return last
        if last in _BARE_REPO_NAMES:
            return last
    return None


def _parts(path: str) -> list[str]:
    text = path.replace("\\", "/")
    out: list[str] = []
    for raw in text.split("/"):
        if raw in ("", "."):
            continue
        if raw == "..":
            if out:
                out.pop()
            continue
        out.append(normalize_name(raw))
    return out


def protected_reason(rel_paths: Iterable[str], *, extra_roots: Iterable[str] = (), real_path: str | None = None) -> str | None:
    """Why a write to this path asks, or None. `rel_paths`: the path as given and as it really resolves,
    relative to the workspace (every spelling is checked; one protected spelling is enough). `real_path`:
    the absolute path it resolves to, checked against nbagent's own folder (its trust store, when the
    workspace contains it, as a home folder does) and `extra_roots`."""
    for rel in rel_paths:
        if rel is None:
            continue
        hit = _component_reason(_parts(str(rel)))
        if hit is not None:
            return f"{_shown(str(rel))} is {REASON} ({_what(hit)})"
    if real_path is not None:
        from .trust import config_dir

        real = os.path.normcase(os.path.realpath(real_path))
        for root in (*extra_roots, config_dir()):
            top = os.path.normcase(os.path.realpath(root))
            if real == top or real.startswith(top.rstrip(os.sep) + os.sep):
                return f"{real_path} is in nbagent's trust store ({REASON}: it says which configurations may start)"
    return None


def _shown(path: str) -> str:
    """The path with invisible and control characters written as escapes, so the person sees them."""
    return "".join(c if c.isprintable() and not _INVISIBLE.match(c) else f"\\u{ord(c):04x}" for c in path)


def _what(name: str) -> str:
    if name in (".git", ".hg") or name in _BARE_REPO_NAMES or name.startswith("git~"):
        return "a repository's settings and hooks make later git commands run programs"
    if name == ".nbagent":
        return "nbagent's own settings: MCP servers it starts, and its stored sessions"
    if name == ".mcp.json":
        return "MCP servers: programs started and URLs called with your keys"
    if name in (".jupyter", ".ipython") or name.startswith(("jupyter", "ipython")):
        return "Jupyter and IPython load and run it"
    if name == ".envrc":
        return "direnv runs it"
    if name in (".pre-commit-config.yaml", ".husky"):
        return "git commit runs what it names"
    return "an editor's or agent's settings, which can run tasks, hooks and servers"
