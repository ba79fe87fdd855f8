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
from typing import Mapping

__all__ = ["GIT_FORCED_SETTINGS", "configured_programs", "git_safety_env"]

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


def configured_programs(cwd: str | os.PathLike[str], timeout: float = 5.0) -> dict[str, str] | None:
    """The git settings in effect in `cwd` that name a program the forced settings cannot switch off
    (`diff.external`, `diff.<driver>.command/textconv`, `filter.<driver>.clean/smudge/process`), as
    {key: value}; Git LFS's own filter (`git-lfs clean -- %f`...) is left out. None when git cannot tell
    (it fails, or is missing): treat that as "some".
    """
    env = dict(os.environ)
    env.update(git_safety_env(env))
    try:
        proc = subprocess.run(["git", "config", "--null", "--get-regexp", _PROGRAM_KEYS], cwd=os.fspath(cwd),
                              env=env, stdin=subprocess.DEVNULL, capture_output=True, timeout=timeout)
    except (OSError, subprocess.SubprocessError):
        return None
    if proc.returncode not in (0, 1):  # 1: nothing matched
        return None
    found: dict[str, str] = {}
    for entry in proc.stdout.decode("utf-8", "replace").split("\0"):
        if entry:
            key, _, value = entry.partition("\n")
            if not _KNOWN_PROGRAM.match(value):
                found[key] = value
    return found


_KNOWN_PROGRAM = re.compile(r"^git-lfs (clean|smudge|filter-process)( -- %f)?$")
"""Driver commands left out of `configured_programs`: Git LFS, as `git lfs install` configures it."""
