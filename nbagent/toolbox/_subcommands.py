"""Every command a shell line may run, for deny rules, which must match broadly.

`subcommands(line)` gives the parts of a compound line, the contents of substitutions, and the commands
behind wrappers, whatever options the wrapper takes (`sudo`, `env -i`, `time -p`, `nice -n 5`,
`timeout -s KILL 5`, `script -c '...'`, `watch '...'`, `unshare`, `setpriv`, `flock`, `xargs`,
`busybox`...), shells (`bash -c '...'`), `eval`, `trap '...'`, `alias x='...'`, function bodies and
`find -exec`; `git` with its global options dropped. A line that cannot be parsed, a program only known
when the line runs (`$(...) x`, `${IFS}`, globs, braces), a shell or `source` reading its script from a
file or stdin (`bash < x`, `bash <<< '...'`, `sh script.sh`), a program that runs commands nbagent is not
shown (`_runsprograms`), and a program not known to run no others (`_leaves`: only leaves, programs with a
table, and the wrappers read here pass; a program by path or on `PATH` only when it is the system's; git
only while its repository configures no program) make it unreadable: then every deny rule matches.
"""

from __future__ import annotations

import dataclasses
import os
import re

from ._leaves import Where, git_problem, program_problem, wrapped_start
from ._runsprograms import RUNNERS, unseen, unseen_assignment
from ._shellwords import KEYWORDS, is_assignment, parse

__all__ = ["RUNS_OTHER_COMMANDS", "subcommands"]

_WRAPPERS_WITH_OPTIONS = {
    "sudo", "doas", "nohup", "nice", "ionice", "command", "builtin", "exec", "stdbuf", "time", "chrt",
    "taskset", "setsid", "unbuffer", "caffeinate", "xargs", "parallel", "watch", "strace", "ltrace",
    "env", "timeout", "flock", "run-one", "chronic", "firejail", "proot", "fakeroot", "torsocks",
    "chroot", "script", "unshare", "setpriv", "nsenter", "runuser", "su", "sg", "prlimit", "numactl",
    "cpulimit", "trickle", "proxychains", "proxychains4", "tsocks", "eatmydata", "faketime", "nocache",
    "chpst", "setarch", "linux32", "linux64", "uclampset", "choom", "systemd-run", "pkexec", "xvfb-run",
    "dbus-launch", "dbus-run-session", "catchsegv", "valgrind", "bwrap", "nsjail", "ssh-agent", "coproc",
    "toybox", "sem", "tini", "dumb-init", "gosu", "su-exec", "with-contenv", "s6-setuidgid", "daemonize",
    "start-stop-daemon", "entr", "ts", "pv", "nq", "tsp", "at", "batch",
}
"""Programs that run another command given in their arguments (after options of their own)."""
_SHELLS = {"bash", "sh", "zsh", "dash", "ksh", "mksh", "fish", "ash", "hush", "yash", "tcsh", "csh", "rbash",
           "posh", "busybox"}
_SCRIPT_READERS = {"source", ".", "eval", "trap", "alias"}
RUNS_OTHER_COMMANDS = frozenset(_WRAPPERS_WITH_OPTIONS | _SHELLS | _SCRIPT_READERS)
"""Every program or builtin that runs commands named in its arguments (for checks that must look inside)."""
_KNOWN = frozenset(RUNS_OTHER_COMMANDS | {"find", "fd", "git"}
                   | {name for name, runner in RUNNERS.items() if not runner.always})
"""Programs that are not leaves but are known: read through here, or with a table of how they run others."""


def _known(name: str) -> bool:
    """Known: in `_KNOWN`, or of a family `_runsprograms.unseen` has a rule for (`python3.11`, `git-log`)."""
    return name in _KNOWN or name.startswith(("python", "perl", "ruby", "php", "lua", "node", "pypy", "git-"))
_MAX_DEPTH = 8


_CHANGES_DIR = re.compile(r"(?:^|[\s;&|(`'\"])(?:cd|pushd|popd)(?:$|[\s;&|)`'\"])")


def subcommands(command: str, depth: int = 0, where: Where | None = None) -> tuple[list[list[str]], bool]:
    """Every command (as its list of word values) the line may run, including inside substitutions and
    behind wrappers. The flag is False when some part could not be read, or runs a program not known to
    run no others (deny rules then match). `where`: the workspace and sandbox the line runs in (without it,
    git is only known for the few commands that never run a program its configuration names)."""
    parsed = parse(command)
    if parsed.error is not None or depth > _MAX_DEPTH:
        return [], False
    if depth == 0:
        where = dataclasses.replace(where or Where(), single=len(parsed.commands) <= 1 and not parsed.substitutions,
                                    changes_dir=bool(_CHANGES_DIR.search(command)))
    out: list[list[str]] = []
    ok = True
    for words in parsed.commands:
        values = [w.value for w in words]
        opened_by = values[0] if values else ""
        # leading assignments (FOO=1 cmd) are not the command; one that may make a program run another
        # (PATH=., LD_PRELOAD=, LESSOPEN=, GIT_SSH_COMMAND=...) makes the line unreadable
        assignments = []
        while values and is_assignment(values[0]) and (not words[len(words) - len(values)].quoted or is_assignment(
                words[len(words) - len(values)].raw.split("=", 1)[0] + "=")):  # NAME='value' assigns too
            assignments.append(values[0])
            values = values[1:]
        if any(unseen_assignment(a, values[0] if values else None) for a in assignments):
            ok = False
        if values and values[0] in ("export", "declare", "typeset", "readonly", "local") and any(
                is_assignment(v) and unseen_assignment(v) for v in values[1:]):
            ok = False
        if values and values[0] == "function":
            values = values[2:]  # function NAME { ...; }: the body's first command follows
        while values and values[0] in KEYWORDS and values[0] != "time":
            opened_by = values[0]
            values = values[1:]
        if not values:
            continue
        first = words[len(words) - len(values)]
        if opened_by in ("for", "select"):  # for NAME in WORDS: a loop variable, then words, not a command
            if not _plain_name(values[0]) or any(w.dynamic for w in words):
                ok = False  # a variable bash or a program reads (PS4, PATH), or words only known when it runs
            continue
        if opened_by == "[[":  # a test: arithmetic operators and -v evaluate what they are given
            if any(v in _ARITHMETIC_TESTS for v in values):
                ok = False
            continue
        if first.dynamic or first.expands:
            ok = False  # the program is only known when the line runs
        if any("$[" in w.raw or ("${" in w.raw and re.search(r"\$\{[^}]*[\[:]", w.raw)) for w in words):
            ok = False  # an array subscript or offset: arithmetic on a value, which may run its `$(...)`
        for cmd in _unwrap(values, depth, where):
            if cmd is None:
                ok = False
            else:
                out.append(cmd)
    for inner in parsed.substitutions:
        cmds, inner_ok = subcommands(inner, depth + 1, where)
        out.extend(cmds)
        ok = ok and inner_ok
    return out, ok


_ARITHMETIC_TESTS = frozenset({"-eq", "-ne", "-lt", "-le", "-gt", "-ge", "-v", "-R"})


def _plain_name(name: str) -> bool:
    """A loop variable that nothing reads by itself (lower case: not PS4, PATH, IFS...)."""
    return bool(re.fullmatch(r"[a-z_][a-z0-9_]*", name))


def _unwrap(values: list[str], depth: int, where: Where | None = None, judge: bool = True) -> list[list[str] | None]:
    """The command itself, plus the commands it runs through a wrapper (sudo, bash -c, find -exec...).

    None in the list: it runs commands that cannot be read here (a shell reading a script file or stdin,
    `source`), or a program not known to run no others (`_leaves`); deny rules then match. `judge`: whether
    `values` surely is a command (False for the words after a wrapper that only might start its command:
    they are matched against deny rules, and the one that does start it is judged).
    """
    found: list[list[str] | None] = [values]
    if depth > _MAX_DEPTH:
        return [None]
    head = os.path.basename(values[0])
    rest = values[1:]
    if judge and program_problem(values, where, _known) is not None:
        found.append(None)

    def script(text: str) -> None:
        cmds, ok = subcommands(text, depth + 1, where)
        found.extend(cmds if ok else [None])

    if head == "busybox" or head == "toybox":
        if rest:
            found.extend(_unwrap(rest, depth + 1, where, judge))
        return found
    if head in _SHELLS:
        found.extend(_shell_scripts(rest, depth, where))
    elif head == "eval":
        script(" ".join(rest))
    elif head in (".", "source"):
        found.append(None)  # runs a script file
    elif head == "trap":
        args = [a for a in rest if not a.startswith("-")]
        if args:
            script(args[0])
    elif head == "alias":
        for arg in rest:
            if "=" in arg:
                script(arg.split("=", 1)[1])
    elif head in _WRAPPERS_WITH_OPTIONS:
        # Which word starts the wrapped command depends on the wrapper's options (`nice -n 5 rm x`): every
        # later word that is not an option might, so each is tried (a deny rule may over-match, never under).
        # The one that does is judged (`_leaves.wrapped_start`); for a wrapper whose options are not known,
        # each is. A word that is itself a script (`script -c 'rm x'`, `watch 'rm x'`, `env -S 'rm x'`) is
        # read too.
        start = wrapped_start(head, rest)
        for k, arg in enumerate(rest):
            if not arg.startswith("-") and not (head == "env" and is_assignment(arg)):
                found.extend(_unwrap(rest[k:], depth + 1, where, judge and (start is None or k == start)))
            value = arg.split("=", 1)[1] if arg.startswith("-") and "=" in arg else arg
            if any(c in value for c in " \t\n;|&`$()<>"):
                script(value)
    if unseen(values) is not None:
        found.append(None)  # it runs commands nbagent is not shown (`_runsprograms`): deny rules then match
    if head == "env":
        program = next((a for a in rest if not a.startswith("-") and not is_assignment(a)), None)
        if any(is_assignment(a) and unseen_assignment(a, program or "env") for a in rest):
            found.append(None)  # `env LD_PRELOAD=... cmd`, `env PATH=. ls`
    if head == "git" or head.startswith("git-"):
        forms = _git_forms(head, rest)
        found.extend(forms)
        if judge and git_problem(values if head == "git" else ["git", head[4:], *rest], where) is not None:
            found.append(None)  # it may run a program the repository's configuration names
    if head == "find" or head == "fd":
        for k, arg in enumerate(rest):
            if arg in ("-exec", "-execdir", "-ok", "-okdir", "-x", "--exec", "-X", "--exec-batch"):
                inner = []
                for a in rest[k + 1 :]:
                    if a in (";", "+", "\\;"):
                        break
                    inner.append(a)
                if inner:
                    found.extend(_unwrap(inner, depth + 1, where, judge))
    return found


_SHELL_HARMLESS = {"--version", "--help", "-version", "-help"}
_GIT_GLOBAL_WITH_VALUE = {"-C", "-c", "--git-dir", "--work-tree", "--namespace", "--exec-path", "--super-prefix",
                          "--config-env", "--attr-source", "--list-cmds"}


def _git_forms(head: str, rest: list[str]) -> list[list[str] | None]:
    """`git` as a deny rule must see it: global options dropped (`git -C . --no-pager commit` is
    `git commit`), `git-commit` and `/usr/lib/git-core/git-commit` read as `git commit`; an alias set on
    the line (`-c alias.x=...`) or any `-c` running a program cannot be read."""
    if head.startswith("git-"):
        return [["git", head[4:], *rest]]
    k = 0
    while k < len(rest) and rest[k].startswith("-"):
        option = rest[k]
        name, _, value = option.partition("=")
        if name in _GIT_GLOBAL_WITH_VALUE and not value:
            value = rest[k + 1] if k + 1 < len(rest) else ""
            k += 1
        if name in ("-c", "--config-env") and value.lower().startswith("alias."):
            return [None]
        k += 1
    if k >= len(rest):
        return []
    return [["git", *rest[k:]]]


def _shell_scripts(args: list[str], depth: int, where: Where | None = None) -> list[list[str] | None]:
    """The commands a shell started with `args` runs: its `-c` script, read; a script file, stdin
    (`bash < x`, `bash <<< ...`, `sh -s`) or anything unclear: None."""
    for k, arg in enumerate(args):
        if arg == "--":
            break
        if not arg.startswith(("-", "+")) and not (k and args[k - 1] in ("-o", "+o", "-O", "+O")):
            return [None]  # a script file (the shell runs it, whatever options follow)
        if arg.startswith("-") and not arg.startswith("--") and "c" in arg[1:]:
            rest = [a for a in args[k + 1 :] if a != "--"]
            if not rest:
                return [None]
            cmds, ok = subcommands(rest[0], depth + 1, where)
            return cmds if ok else [None]
        if arg.startswith("--") and arg not in _SHELL_HARMLESS and arg not in ("--norc", "--noprofile",
                                                                               "--login", "--posix"):
            return [None]
    if args and all(a in _SHELL_HARMLESS for a in args):
        return []
    return [None]  # a script file, or commands from stdin
