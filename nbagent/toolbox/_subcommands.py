"""Every command a shell line may run, for deny rules, which must match broadly.

`subcommands(line)` gives the parts of a compound line, the contents of substitutions, and the commands
behind wrappers, whatever options the wrapper takes (`sudo`, `env -i`, `time -p`, `nice -n 5`,
`timeout -s KILL 5`, `script -c '...'`, `watch '...'`, `unshare`, `setpriv`, `flock`, `xargs`,
`busybox`...), shells (`bash -c '...'`), `eval`, `trap '...'`, `alias x='...'`, function bodies and
`find -exec`; `git` with its global options dropped. A line that cannot be parsed, a program only known
when the line runs (`$(...) x`, `${IFS}`, globs, braces), a shell or `source` reading its script from a
file or stdin (`bash < x`, `bash <<< '...'`, `sh script.sh`), and a program that runs commands nbagent
is not shown (`_runsprograms`) make it unreadable: then every deny rule matches.
"""

from __future__ import annotations

import os

from ._runsprograms import unseen, unseen_assignment
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
_MAX_DEPTH = 8


def subcommands(command: str, depth: int = 0) -> tuple[list[list[str]], bool]:
    """Every command (as its list of word values) the line may run, including inside substitutions and
    behind wrappers. The flag is False when some part could not be read (deny rules then match)."""
    parsed = parse(command)
    if parsed.error is not None or depth > _MAX_DEPTH:
        return [], False
    out: list[list[str]] = []
    ok = True
    for words in parsed.commands:
        values = [w.value for w in words]
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
            values = values[1:]
        if not values:
            continue
        first = words[len(words) - len(values)]
        if first.dynamic or first.expands:
            ok = False  # the program is only known when the line runs
        for cmd in _unwrap(values, depth):
            if cmd is None:
                ok = False
            else:
                out.append(cmd)
    for inner in parsed.substitutions:
        cmds, inner_ok = subcommands(inner, depth + 1)
        out.extend(cmds)
        ok = ok and inner_ok
    return out, ok


def _unwrap(values: list[str], depth: int) -> list[list[str] | None]:
    """The command itself, plus the commands it runs through a wrapper (sudo, bash -c, find -exec...).

    None in the list: it runs commands that cannot be read here (a shell reading a script file or stdin,
    `source`); deny rules then match.
    """
    found: list[list[str] | None] = [values]
    if depth > _MAX_DEPTH:
        return [None]
    head = os.path.basename(values[0])
    rest = values[1:]

    def script(text: str) -> None:
        cmds, ok = subcommands(text, depth + 1)
        found.extend(cmds if ok else [None])

    if head == "busybox" or head == "toybox":
        if rest and os.path.basename(rest[0]) in _SHELLS:
            found.extend(_unwrap(rest, depth + 1))
        elif rest:
            found.extend(_unwrap(rest, depth + 1))
        return found
    if head in _SHELLS:
        found.extend(_shell_scripts(rest, depth))
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
        # A word that is itself a script (`script -c 'rm x'`, `watch 'rm x'`, `env -S 'rm x'`) is read too.
        for k, arg in enumerate(rest):
            if not arg.startswith("-") and not (head == "env" and is_assignment(arg)):
                found.extend(_unwrap(rest[k:], depth + 1))
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
        found.extend(_git_forms(head, rest))
    if head == "find" or head == "fd":
        for k, arg in enumerate(rest):
            if arg in ("-exec", "-execdir", "-ok", "-okdir", "-x", "--exec", "-X", "--exec-batch"):
                inner = []
                for a in rest[k + 1 :]:
                    if a in (";", "+", "\\;"):
                        break
                    inner.append(a)
                if inner:
                    found.extend(_unwrap(inner, depth + 1))
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


def _shell_scripts(args: list[str], depth: int) -> list[list[str] | None]:
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
            cmds, ok = subcommands(rest[0], depth + 1)
            return cmds if ok else [None]
        if arg.startswith("--") and arg not in _SHELL_HARMLESS and arg not in ("--norc", "--noprofile",
                                                                               "--login", "--posix"):
            return [None]
    if args and all(a in _SHELL_HARMLESS for a in args):
        return []
    return [None]  # a script file, or commands from stdin
