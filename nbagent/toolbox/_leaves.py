"""Programs known to run no other program: what a line may run while a deny rule is in force.

A deny rule (`deny: shell(rm *)`, or one on reading a file) is a wall the person built: nbagent lets a line
pass it only when it can show every command the line may run. That is decided the safe way round: a
program passes only when it is known, here or in a table that says exactly how it runs others, never
because it is missing from a list of programs that run others. `program_problem(words, where)` says why
one command's program is not known to keep the rule, or None. A program is known when it is

- a leaf: `LEAF_PROGRAMS` (coreutils and their kin: they take files and text, never a command) or one of
  `LEAF_BUILTINS` (bash builtins that run nothing and rename nothing), with the options that would make
  them run or rename something left out (`BUILTIN_LIMITS`: `hash -p` renames a program, `printf -v`,
  `read` and `mapfile` assign variables such as `PS4` and `PATH` that make bash run code, `test -v`
  evaluates an array subscript, which may hold `$(...)`);
- a program whose table says how it runs others (`_runsprograms.RUNNERS`, options only), or a wrapper,
  shell or script reader that `_subcommands` reads through (`sudo`, `bash -c`, `eval`, `find -exec`);
- git, while the repository configures no program (`git_problem`: filters, diff and merge drivers,
  editors, gpg, upload-pack, includes; a repository that cannot be read, another repository on the line).

and it is the program its name promises: a path must lead into the system's program folders (`/usr/bin`,
`/bin`...) or the running Python's, so `./ls`, a copy of `rm` under another name, `/proc/self/exe` (the
program running, whatever its name) and the dynamic loader (`/lib64/ld-linux-x86-64.so.2 /bin/rm`, which
runs the program it is given) are not known; a name found on `PATH` must not be a program of the workspace
(the person's own folders on `PATH` are theirs). Everything else is not known either: an unknown name, a
function defined on the line, `let` and `(( ))` (arithmetic on a variable's value runs the `$(...)` it may
hold), `[[` with arithmetic operators, a `for` loop over a variable bash reads.

Without a deny rule none of this applies: the permission pipeline asks before anything that is not
read-only runs, and the OS sandbox is the wall.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import sys
from dataclasses import dataclass
from typing import Any

__all__ = ["BUILTIN_LIMITS", "LEAF_BUILTINS", "LEAF_PROGRAMS", "WRAPPER_VALUES", "Where", "git_problem",
           "program_problem", "wrapped_start"]


@dataclass(frozen=True, slots=True)
class Where:
    """Where a line runs, for what depends on it (git's repository; programs found on `PATH`)."""

    workspace: str | None = None
    """The workspace's real root (None: not known, so git's configuration is not either)."""
    sandboxed: bool = False
    """The line runs in the OS sandbox, where `.git` and home's settings are read-only."""
    single: bool = True
    """The line is one command: nothing on it runs before git that could change its configuration."""
    changes_dir: bool = False
    """A `cd`, `pushd` or `popd` is on the line: git may run in another repository."""


LEAF_PROGRAMS = frozenset("""
    ls dir vdir cat tac head tail wc uniq cut tr paste join comm fold fmt nl od hexdump xxd base64 base32 basenc
    md5sum sha1sum sha224sum sha256sum sha384sum sha512sum b2sum cksum sum stat file du df touch mkdir rmdir rm cp
    mv ln link unlink chmod chown chgrp truncate mktemp basename dirname realpath readlink pwd date cal sleep seq
    yes echo printf true false test [ expr tee uname hostname whoami id groups nproc printenv tty arch logname
    users who w uptime free rev shuf expand unexpand numfmt factor tsort csplit shred sync dd pr
    cmp diff grep egrep fgrep zgrep zcat gzip gunzip bzip2 bunzip2 bzcat xz unxz xzcat zstd unzstd zstdcat lz4
    unzip zipinfo jq column iconv locale which whereis tree ps pgrep pkill kill killall pidof lsof ss netstat ping
    host dig nslookup strings clear tput reset stty
""".split())
"""External programs that take files and text, never a command or a program to run."""

LEAF_BUILTINS = frozenset("""
    : true false echo printf pwd cd pushd popd dirs test [ set shopt umask ulimit times type help wait kill shift
    exit return break continue unalias unset hash jobs disown suspend logout caller read mapfile readarray
    declare typeset local export readonly
""".split())
"""bash builtins that run no command and rename no program (within `BUILTIN_LIMITS`)."""

_NAME = re.compile(r"^[a-z_][a-z0-9_]*$")
"""A variable bash and programs do not read by themselves (they read upper-case ones: PATH, PS4, IFS...)."""
_DEFAULT_NAMES = {"read": "REPLY", "mapfile": "MAPFILE", "readarray": "MAPFILE"}


def _option_letters(args: list[str]) -> set[str]:
    letters: set[str] = set()
    for arg in args:
        if arg == "--":
            break
        if arg.startswith("-") and len(arg) > 1 and not arg.startswith("--"):
            letters.update(arg[1:])
    return letters


def _assigned_names(name: str, args: list[str]) -> list[str] | None:
    """The variables `read`, `mapfile`/`readarray` or `printf -v` assign (None: cannot tell)."""
    valued = {"read": "adinNptu", "mapfile": "dnOsuCc", "readarray": "dnOsuCc", "printf": "v"}[name]
    names: list[str] = []
    positional: list[str] = []
    k = 0
    while k < len(args):
        arg = args[k]
        k += 1
        if arg == "--":
            positional += args[k:]
            break
        if arg.startswith("-") and len(arg) > 1:
            for i, letter in enumerate(arg[1:]):
                if letter in valued:
                    value = arg[i + 2:] or (args[k] if k < len(args) else None)
                    if not arg[i + 2:]:
                        k += 1
                    if value is None:
                        return None
                    if letter in "av":  # read -a NAME, printf -v NAME
                        names.append(value)
                    break
            continue
        positional.append(arg)
    if name == "printf":
        return names
    if name == "read":
        return names + (positional or [_DEFAULT_NAMES[name]])
    return names + (positional[-1:] or [_DEFAULT_NAMES[name]])


def _builtin_problem(name: str, args: list[str]) -> str | None:
    letters = _option_letters(args)
    if name == "hash" and "p" in letters:
        return "hash -p gives a program another name"
    if name == "jobs" and "x" in letters:
        return "jobs -x runs a command"
    if name in ("test", "[") and ({"-v", "-R"} & set(args)):
        return f"{name} -v evaluates an array subscript, which may run a command"
    if name in ("read", "mapfile", "readarray") or (name == "printf" and args and args[0].startswith("-v")):
        names = _assigned_names(name, args)
        if names is None or any(not (_NAME.match(n) or n == _DEFAULT_NAMES.get(name)) for n in names):
            return (f"{name} assigns a variable that bash or a program reads ({', '.join(names or ['?'])}); only "
                    "lower-case names keep a deny rule")
    if name in ("unset", "declare", "typeset", "local", "export", "readonly") and any("[" in a for a in args):
        return f"{name} with an array subscript evaluates it, which may run a command"
    return None


BUILTIN_LIMITS = ("hash -p", "jobs -x", "test -v / [ -v", "read, mapfile, readarray, printf -v into a name that is "
                  "not lower-case", "unset, declare, typeset, local, export, readonly with an array subscript")
"""What makes a builtin of `LEAF_BUILTINS` run or rename something (it then does not keep a deny rule)."""


WRAPPER_VALUES = {
    "nice": ("n", ("adjustment",), 0),
    "ionice": ("cnpPut", ("class", "classdata", "pid", "pgid", "uid"), 0),
    "timeout": ("sk", ("signal", "kill-after"), 1),
    "sudo": ("ugCDhpRrtTU", ("user", "group", "close-from", "chdir", "host", "prompt", "chroot", "role", "type",
                             "command-timeout", "other-user"), 0),
    "doas": ("uC", (), 0),
    "env": ("uCS", ("unset", "chdir", "split-string"), 0),
    "nohup": ("", (), 0), "setsid": ("", (), 0), "command": ("", (), 0), "builtin": ("", (), 0),
    "unbuffer": ("", (), 0), "catchsegv": ("", (), 0), "chronic": ("", (), 0),
    "exec": ("a", (), 0),
    "time": ("fo", ("format", "output"), 0),
    "stdbuf": ("ioe", ("input", "output", "error"), 0),
    "chrt": ("T", ("sched-runtime", "sched-period", "sched-deadline"), 1),
    "xargs": ("adEeIiLlnPs", ("arg-file", "delimiter", "eof", "replace", "max-lines", "max-args", "max-procs",
                              "max-chars", "process-slot-var"), 0),
    "watch": ("dnq", ("interval", "differences", "equexit"), 0),
    "flock": ("wEc", ("timeout", "conflict-exit-code", "command"), 1),
    "taskset": ("", (), 1),
}
"""Wrappers whose options are known: (short options taking a value, long ones, positional words before the
command). `wrapped_start` finds where their command begins; another wrapper's is not known for sure."""


def wrapped_start(head: str, rest: list[str]) -> int | None:
    """Where the command a wrapper runs starts in `rest` (its words after the wrapper's name), or None when
    that is not known (a wrapper not in `WRAPPER_VALUES`, an option it does not list)."""
    spec = WRAPPER_VALUES.get(head)
    if spec is None:
        return None
    short, long, positional = spec
    k = 0
    while k < len(rest):
        arg = rest[k]
        if arg == "--":
            k += 1
            break
        if head == "env" and "=" in arg and not arg.startswith("-"):
            k += 1
            continue
        if arg.startswith("--") and len(arg) > 2:
            name, eq, _ = arg[2:].partition("=")
            k += 1
            if name in long and not eq:
                k += 1
            elif not any(name == o for o in long) and "=" not in arg and name not in _FLAG_LONGS.get(head, ()):
                return None
            continue
        if arg.startswith("-") and len(arg) > 1:
            k += 1
            for i, letter in enumerate(arg[1:]):
                if letter in short:
                    if i == len(arg) - 2:
                        k += 1  # its value is the next word
                    break
            continue
        break
    k += positional
    if k >= len(rest) or rest[k].startswith("-"):
        return None  # no command where one should start: every later word is judged instead
    return k


_FLAG_LONGS = {"xargs": ("null", "no-run-if-empty", "verbose", "interactive", "open-tty", "exit", "show-limits"),
               "taskset": ("cpu-list", "all-tasks", "pid"),
               "sudo": ("preserve-env", "login", "non-interactive", "shell", "set-home", "background", "edit",
                        "reset-timestamp", "stdin", "list"), "env": ("ignore-environment", "null", "debug"),
               "timeout": ("foreground", "preserve-status", "verbose"), "nice": (), "time": ("verbose", "portability",
                                                                                         "append")}


# -- where a program is found -----------------------------------------------------------------------------------
_SYSTEM_DIRS = ("/usr/bin", "/bin", "/usr/sbin", "/sbin", "/usr/local/bin", "/usr/local/sbin", "/usr/lib/git-core",
                "/usr/libexec/git-core")


@functools.lru_cache(maxsize=4)
def _program_dirs(*_key: str) -> tuple[str, ...]:
    found = [os.path.realpath(d) for d in _SYSTEM_DIRS if os.path.isdir(d)]
    for d in (os.path.dirname(sys.executable), os.path.join(sys.prefix, "bin"), os.path.join(sys.base_prefix, "bin")):
        if os.path.isdir(d):
            found.append(os.path.realpath(d))
    return tuple(dict.fromkeys(found))


def _found_where(head: str, where: Where | None) -> str | None:
    """Why the program a command names is not the one its name promises (None: it is, or the name is not
    found and bash reports it, or a builtin answers to it). A path must lead into the system's program
    folders or the running Python's; a name found on `PATH` must not be a program of the workspace (the
    person's own folders on `PATH` are theirs)."""
    if "/" in head:
        if head.startswith("/proc/") or "/fd/" in head:
            return f"{head} is whatever program is running, under another name"
        base = where.workspace if where is not None and where.workspace else os.getcwd()
        real = os.path.realpath(head if os.path.isabs(head) else os.path.join(base, head))
        if os.path.dirname(real) not in _program_dirs(sys.executable):
            return f"{head} leads to {real}, not among the system's programs"
    else:
        if head in LEAF_BUILTINS:
            return None  # bash answers before it looks on PATH
        found = shutil.which(head)
        if found is None:
            return None
        real = os.path.realpath(found)
    if where is not None and where.workspace and (real == where.workspace or real.startswith(where.workspace + "/")):
        return f"{head} is a program of the workspace"
    return None


def program_problem(words: list[str], where: Where | None, known: Any = frozenset()) -> str | None:
    """Why the program of one command (its words, program first) is not known to keep a deny rule, or None.
    `known`: the programs (a set, or a test of a name) that `_subcommands` and `_runsprograms` read through
    or have a table for."""
    if not words:
        return None
    head = words[0]
    name = os.path.basename(head)
    if "/" in head and (name.startswith("ld-") or name.startswith("ld.so") or ".so" in name):
        return f"{head} is the dynamic loader: it runs the program it is given"
    problem = _found_where(head, where)
    if problem:
        return problem
    if "/" not in head and name in LEAF_BUILTINS:
        return _builtin_problem(name, words[1:])
    if name in LEAF_PROGRAMS:
        return None
    if name in known if not callable(known) else known(name):
        return None
    return f"{name} is not a program nbagent knows runs no other program"


# -- git ------------------------------------------------------------------------------------------------------
_GIT_NEVER = frozenset({"version", "rev-parse", "var", "check-ref-format", "stripspace", "mktag", "hash-object"})
"""git subcommands that run no program a configuration names, whatever the repository holds."""
_GIT_LOG_LIKE = frozenset({"log", "shortlog", "reflog", "whatchanged"})
_GIT_GLOBAL_VALUED = frozenset({"-C", "-c", "--git-dir", "--work-tree", "--namespace", "--super-prefix",
                                "--config-env", "--attr-source", "--list-cmds", "--exec-path"})
_LOG_SAFE = re.compile(
    r"^(--oneline|--graph|--decorate(=\w+)?|--no-decorate|--all|--branches|--tags|--remotes|--abbrev-commit|"
    r"--no-abbrev-commit|--no-merges|--merges|--first-parent|--reverse|--name-only|--name-status|--no-patch|-s|"
    r"--date-order|--topo-order|--author-date-order|--no-color|--color=never|--walk-reflogs|-g|--left-right|"
    r"--boundary|--simplify-by-decoration|--source|--no-renames|-q|--quiet|-n\d*|-\d+|--max-count=\d+|--skip=\d+|"
    r"--(since|until|after|before|author|committer|grep|date|encoding)=.*|--(format|pretty)=[^%]*(%[^G][^%]*)*)$")
"""Options of git log and its kin that show commits and names and run nothing (`%G` formats run gpg)."""


def _git_never_runs(words: list[str]) -> bool:
    args = words[1:]
    k = 0
    while k < len(args) and args[k].startswith("-"):
        if args[k] in _GIT_GLOBAL_VALUED:
            k += 1  # its value is the next word
        k += 1  # global options: what they may run is `_runsprograms`'s question
    if k >= len(args):
        return True
    sub, rest = args[k], args[k + 1:]
    if sub in _GIT_NEVER:
        return True
    if sub in _GIT_LOG_LIKE:
        return all(not a.startswith("-") or _LOG_SAFE.match(a) for a in rest if a != "--")
    return False


def git_problem(words: list[str], where: Where | None) -> str | None:
    """Why nbagent cannot show that this git command runs no program the repository's configuration names
    (a filter, a diff or merge driver, an editor, gpg, upload-pack...), or None."""
    if _git_never_runs(words):
        return None
    if any(a in ("-C", "--git-dir", "--work-tree") or a.startswith(("--git-dir=", "--work-tree="))
           for a in words[1:]):
        return "git here works in another repository, whose configuration nbagent has not read"
    if where is None or not where.workspace:
        return "git may run programs its repository's configuration names, and that is not known here"
    if where.changes_dir:
        return "git runs after a change of directory, in a repository whose configuration nbagent has not read"
    if not where.sandboxed and not where.single:
        return ("without the sandbox, an earlier command of the line could change git's configuration before git "
                "reads it")
    from ._gitsafety import repository_programs

    found = repository_programs(where.workspace)
    if found is None:
        return "git's configuration here cannot be read (no repository yet, or another one around it)"
    if found:
        key = sorted(found)[0]
        return f"the repository's configuration names a program for git to run ({key})"
    return None
