"""Git settings forced off for every `git` the shell tool starts, and what git would run that cannot be.

`git_safety_env()` returns environment variables that hand git configuration through
`GIT_CONFIG_COUNT` / `GIT_CONFIG_KEY_n` / `GIT_CONFIG_VALUE_n`, which git reads with the highest
precedence (above the repository's `.git/config`, the user's `~/.gitconfig` and the system's), so a
repository's configuration cannot make git run a program through these settings:

| setting | forced to | what it would run |
|---|---|---|
| `core.fsmonitor` | `false` | a file-system monitor program, on nearly every command (`status`, `diff`) |
| `core.hooksPath` | `/dev/null` | hooks (`pre-commit`, `post-checkout`, ...): none are found there |
| `core.pager`, `pager.*` (through `GIT_PAGER`) | `cat` | a pager (the output is a pipe, so none starts anyway) |
| `core.sshCommand` | `ssh` | the ssh client of a fetch or push (`GIT_SSH_COMMAND` of the user's environment still wins) |
| `core.askPass` | (empty) | a password prompt program (prompts are off: `GIT_TERMINAL_PROMPT=0`) |
| `credential.helper` | (empty: the list is reset) | credential helpers |
| `safe.bareRepository` | `explicit` | nothing itself: a bare repository in the workspace (`HEAD`, `config`, `objects/`) is not used unless named with `--git-dir` |
| `protocol.ext.allow` | `never` | `ext::` remote URLs, which are commands |
| `log.showSignature` | `false` | `gpg` on every `git log` |

What is deliberately not done:

- `GIT_CONFIG_NOSYSTEM=1` / `GIT_CONFIG_GLOBAL=/dev/null`: the user's identity, aliases and settings stay
  (an approved `git commit` must carry their name). The user's own configuration is theirs to trust;
  what matters is that the *workspace* cannot configure a program, and the settings above win over it.
- `diff.external` cannot be switched off by value: git takes an empty value as a program named "" and
  every `git diff` then fails. Nor can `diff.<driver>.command`, `diff.<driver>.textconv` or
  `filter.<driver>.clean/smudge/process`, which are named by the driver. `configured_programs()` lists
  them, and the read-only classifier does not auto-allow a git command that would run one
  (`_readonly`): a repository's `.git/config` can only be written by a command or an edit someone approved.
- `uploadpack.packObjectsHook` is only honoured from protected (system, global, command-line)
  configuration, never from a repository's: forcing it through the command-line scope would make it trusted.

A consequence worth knowing: an approved `git commit` runs no hooks (a `pre-commit` framework included),
and an approved `git push` over HTTPS gets no stored credentials from a helper.
"""

from __future__ import annotations

import os
import re
import subprocess
import time
from typing import Mapping

__all__ = ["GIT_FORCED_SETTINGS", "configured_programs", "git_safety_env", "repository_programs"]

GIT_FORCED_SETTINGS: tuple[tuple[str, str], ...] = (
    ("core.fsmonitor", "false"),
    ("core.hooksPath", "/dev/null"),
    ("core.pager", "cat"),
    ("core.sshCommand", "ssh"),
    ("core.askPass", ""),
    ("credential.helper", ""),
    ("safe.bareRepository", "explicit"),
    ("protocol.ext.allow", "never"),
    ("log.showSignature", "false"),
)
"""(key, value) forced on every git the shell tool starts (see the module docstring)."""


def git_safety_env(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment variables that force `GIT_FORCED_SETTINGS` (to merge into a command's environment).

    Entries already given through `GIT_CONFIG_COUNT` in `base` (default: `os.environ`) are kept; the
    forced ones come after them, so they win.
    """
    env = os.environ if base is None else base
    try:
        start = int(env.get("GIT_CONFIG_COUNT", "0") or "0")
    except ValueError:
        start = 0
    start = max(start, 0)
    out: dict[str, str] = {"GIT_PAGER": "cat", "GIT_TERMINAL_PROMPT": "0"}
    for n, (key, value) in enumerate(GIT_FORCED_SETTINGS, start):
        out[f"GIT_CONFIG_KEY_{n}"] = key
        out[f"GIT_CONFIG_VALUE_{n}"] = value
    out["GIT_CONFIG_COUNT"] = str(start + len(GIT_FORCED_SETTINGS))
    return out


_PROGRAM_KEYS = r"^(diff\.external|diff\..+\.(command|textconv)|filter\..+\.(clean|smudge|process))$"


def configured_programs(cwd: str | os.PathLike[str], timeout: float = 5.0, *, keys: str | None = None,
                        files: tuple[str, ...] = ()) -> dict[str, str] | None:
    """The git settings in effect in `cwd` that name a program the forced settings cannot switch off
    (`diff.external`, `diff.<driver>.command/textconv`, `filter.<driver>.clean/smudge/process`), as
    {key: value}; Git LFS's own filter (`git-lfs clean -- %f`...) is left out. None when git cannot tell
    (it fails, or is missing): treat that as "some".
    """
    env = dict(os.environ)
    env.update(git_safety_env(env))
    found: dict[str, str] = {}
    for scope in ([["--file", f] for f in files] if files else [[]]):
        try:
            proc = subprocess.run(["git", "config", *scope, "--null", "--get-regexp", keys or _PROGRAM_KEYS],
                                  cwd=os.fspath(cwd), env=env, stdin=subprocess.DEVNULL, capture_output=True,
                                  timeout=timeout)
        except (OSError, subprocess.SubprocessError):
            return None
        if proc.returncode not in (0, 1):  # 1: nothing matched
            return None
        for entry in proc.stdout.decode("utf-8", "replace").split("\0"):
            if entry:
                key, _, value = entry.partition("\n")
                if not _KNOWN_PROGRAM.match(value):
                    found[key] = value
    return found


_KNOWN_PROGRAM = re.compile(r"^git-lfs (clean|smudge|filter-process)( -- %f)?$")
"""Driver commands left out of `configured_programs`: Git LFS, as `git lfs install` configures it."""


_DENY_KEYS = (r"^(diff\.external|diff\..+\.(command|textconv)|filter\..+\.(clean|smudge|process)|merge\..+\.driver"
              r"|core\.(editor|gitproxy|alternaterefscommand)|sequence\.editor|gpg\.program|gpg\..+\.program"
              r"|remote\..+\.(uploadpack|receivepack|vcs)|submodule\..+\.update|include\.path|includeif\..+\.path"
              r"|credential\..+\.helper|alias\..+|sendemail\..+|web\.browser|browser\..+|help\.format"
              r"|mergetool\..+|difftool\..+|man\..+)$")
"""Every setting that names a program git may run, or a file that may name one (`include.path`), which the
forced settings (`GIT_FORCED_SETTINGS`) do not switch off: what deny rules look for (`repository_programs`)."""
_cache: dict[tuple, dict[str, str] | None] = {}


def repository_programs(workspace: str | os.PathLike[str]) -> dict[str, str] | None:
    """The programs the repository's own configuration (`.git/config`, `.git/config.worktree`; an include
    is counted, not followed) names in this workspace, {key: value}, for deny rules (`_leaves.git_problem`);
    the person's own and the system's configuration are theirs to trust (and read-only in the sandbox).
    None when nbagent cannot tell: no plain `.git/` directory at the top, a
    repository around the workspace or inside it (submodules and nested repositories have configurations
    of their own), `GIT_DIR` and the like set, or git failing. Remembered for a moment while the
    configuration files and the index are unchanged."""
    root = os.path.realpath(os.fspath(workspace))
    dot_git = os.path.join(root, ".git")
    if not os.path.isdir(dot_git) or os.path.islink(dot_git) or any(os.environ.get(k) for k in _GIT_ENV):
        return None
    key = (root, int(time.monotonic() / 2), *(_stamp(p) for p in (
        os.path.join(dot_git, "config"), os.path.join(dot_git, "config.worktree"), os.path.join(dot_git, "index"),
        os.path.join(dot_git, "commondir"), os.path.join(root, ".gitmodules"))))
    if key in _cache:
        return _cache[key]
    files = tuple(f for f in (os.path.join(dot_git, "config"), os.path.join(dot_git, "config.worktree"))
                  if os.path.isfile(f))
    found = None if _other_repositories(root) or os.path.lexists(os.path.join(dot_git, "commondir")) else \
        configured_programs(root, keys=_DENY_KEYS, files=files) if files else {}
    if len(_cache) > 64:
        _cache.clear()
    _cache[key] = found
    return found


_GIT_ENV = ("GIT_DIR", "GIT_WORK_TREE", "GIT_COMMON_DIR", "GIT_CONFIG", "GIT_CONFIG_GLOBAL", "GIT_CONFIG_SYSTEM",
            "GIT_EXEC_PATH", "GIT_CONFIG_PARAMETERS", "GIT_EDITOR", "GIT_SEQUENCE_EDITOR", "GIT_EXTERNAL_DIFF",
            "GIT_SSH", "GIT_SSH_COMMAND", "GIT_PROXY_COMMAND", "GIT_ASKPASS")


def _stamp(path: str) -> tuple:
    try:
        st = os.stat(path)
    except OSError:
        return ()
    return (st.st_mtime_ns, st.st_size, st.st_ino)


def _other_repositories(root: str, limit: int = 20_000) -> bool:
    """Whether a repository lies around `root` or below it (or the tree is too big to tell)."""
    parent = os.path.dirname(root)
    while parent != os.path.dirname(parent):
        if os.path.lexists(os.path.join(parent, ".git")):
            return True
        parent = os.path.dirname(parent)
    if os.path.lexists(os.path.join(root, ".gitmodules")):
        return True
    seen = 0
    for dirpath, dirnames, filenames in os.walk(root):
        if dirpath == root:
            dirnames[:] = [d for d in dirnames if d != ".git"]
        elif ".git" in dirnames or ".git" in filenames:
            return True
        seen += len(dirnames) + len(filenames)
        if seen > limit:
            return True
    return False
