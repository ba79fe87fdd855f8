"""Places no tool reaches, whatever the workspace: one list for the sandbox and the file tools.

Reads: paths the model gives, after they were resolved (symbolic links followed), and the environment
(`HOME`, Jupyter's and nbagent's folders). What could happen: with the workspace at the home folder (the
kernel's default working directory) or above it, a file tool reads `~/.ssh`, a kernel's connection file
(its HMAC key) or nbagent's own session key, which the sandbox hides from shell commands; or writes
`~/.bashrc`. What stops it: `out_of_reach(path, workspace)` is asked by the workspace's resolver (every
path a file tool touches, and every entry `list_files` and `grep` walk past), and says no for

- `sandbox.secret_places()`: credential stores under home (`~/.ssh`, `~/.aws`, `~/.netrc`...), Jupyter's
  runtime folders, and nbagent's trust store and session key (`trust.config_dir()`). The sandbox hides the
  same list from shell commands: it is one list, kept in `nbagent.safety.sandbox`.
- with the workspace at or above home: every hidden entry of home (`~/.bashrc`, `~/.config`, `~/.local`,
  `~/.ipython`...), and everything below one. These hold settings that programs run and the person's
  history and tokens; the file tools have no need of them. (The sandbox cannot hide them all: a runtime
  it must show can live there, as `~/.pyenv` or `~/.local/bin` do; it shows only those and hides the rest
  of home.)

Not covered: the `python` tool runs in the kernel with the person's rights; `open("~/.ssh/id_rsa")` there is
code the person approved.
"""

from __future__ import annotations

import functools
import os

__all__ = ["home_dir", "out_of_reach", "reach_check", "unreachable_places"]


def home_dir() -> str:
    """The real path of the home folder."""
    return os.path.realpath(os.path.expanduser("~"))


def unreachable_places() -> tuple[str, ...]:
    """The real paths no tool reaches (`sandbox.secret_places()`, the one list)."""
    from .sandbox import secret_places

    return secret_places()


def _inside(path: str, top: str) -> bool:
    return path == top or path.startswith(top.rstrip("/") + "/")


def reach_check(workspace: str):
    """`f(path) -> str | None`: `out_of_reach` for paths inside one workspace, with the places worked out
    once (for a walk that asks for every entry); None when no such place lies in the workspace."""
    return _reach_check(workspace, *(os.environ.get(v, "") for v in _ENVIRONMENT))


_ENVIRONMENT = ("HOME", "JUPYTER_RUNTIME_DIR", "JUPYTER_DATA_DIR", "XDG_DATA_HOME", "XDG_CONFIG_HOME",
                "NBAGENT_CONFIG_DIR")
"""What the places depend on (`sandbox.secret_places` and the home folder)."""


@functools.lru_cache(maxsize=16)
def _reach_check(workspace: str, *_environment: str):
    home = home_dir()
    root = os.path.normpath(workspace)
    covers_home = home != "/" and _inside(home, root)
    places = [p for p in unreachable_places() if _inside(p, root) or _inside(root, p)]
    if not places and not covers_home:
        return None

    def check(path: str) -> str | None:
        path = os.path.normpath(path)
        for place in places:
            if _inside(path, place):
                return (f"it is in {place}, a credential store, Jupyter's runtime folder or nbagent's own keys, "
                        "which no tool reaches")
        if covers_home and path != home and _inside(path, home):
            first = os.path.relpath(path, home).split(os.sep, 1)[0]
            if first.startswith("."):
                return (f"it is in the home folder's hidden {first!r}: with the workspace at or above the home "
                        "folder, its hidden files and folders (settings, keys, history) are out of every tool's "
                        "reach")
        return None

    return check


def out_of_reach(path: str, workspace: str) -> str | None:
    """Why no tool may read, list or write `path` (absolute; ask for it as written and as it resolves), or
    None. `workspace`: the real root of the workspace the tool works in."""
    path = os.path.normpath(path)
    check = reach_check(workspace)
    if _inside(path, os.path.normpath(workspace)):
        return check(path) if check is not None else None
    for place in unreachable_places():  # a path outside the workspace: every place counts
        if _inside(path, place):
            return (f"it is in {place}, a credential store, Jupyter's runtime folder or nbagent's own keys, "
                    "which no tool reaches")
    return check(path) if check is not None else None
