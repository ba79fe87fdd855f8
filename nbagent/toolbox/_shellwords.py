"""Reading a shell command line the way bash would, to decide what it is before it runs.

`parse(command)` tokenizes a command line with bash's quoting rules (single quotes, double quotes,
backslashes, `$'...'`) and records everything that makes it more than one plain command: operators
(`;`, `&&`, `||`, `|`, `&`, newlines), redirections, command and process substitution (`$(...)`,
backticks, `<(...)`), parameter expansion (`$X`), globs, `~`, brace expansion, comments, subshells,
assignments and control characters. It never guesses: whatever it cannot read makes the line "not simple".

Three questions are answered from that, and only from it:

- `is_simple`: one plain command with literal words. Allow rules, ask rules and grants only ever match
  such a command (or the exact command line the pattern spells out), so `git status; rm -rf x` never
  matches `shell(git status*)`.
- `subcommands`: every command that may run, for deny rules, which must match broadly: the parts of a
  compound line, the contents of substitutions, and the commands behind wrappers, whatever options the
  wrapper takes (`sudo`, `env -i`, `time -p`, `nice -n 5`, `timeout -s KILL 5`, `script -c '...'`,
  `watch '...'`, `unshare`, `setpriv`, `flock`, `xargs`, `busybox`...), shells (`bash -c '...'`), `eval`,
  `trap '...'`, `alias x='...'`, function bodies and `find -exec`. A line that cannot be parsed, a program
  only known when the line runs (`$(...) x`, `${IFS}`, globs, braces), and a shell or `source` reading its
  script from a file or stdin (`bash < x`, `bash <<< '...'`, `sh script.sh`) make it unreadable: then
  every deny rule matches.
- `read_only_reason`: whether a command only reads (see `nbagent.toolbox._readonly`).
"""

from __future__ import annotations

import fnmatch
import os
from dataclasses import dataclass, field

from ..paths import literal_glob
from ._runsprograms import unseen, unseen_assignment

__all__ = ["Parsed", "Word", "glob_escape", "literal_pattern", "parse", "pattern_matches", "suggest_pattern"]

_OPERATOR_CHARS = ";&|"
_SPECIAL_PROBLEMS = {
    "(": "a subshell or group",
    ")": "a subshell or group",
}
_GLOB_CHARS = "*?["
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


@dataclass(slots=True)
class Word:
    """One word of a command, as bash would see it before expansion."""

    raw: str
    """The word as written (quotes included)."""
    value: str
    """The word after quote removal (what the program receives, when nothing expands)."""
    quoted: bool = False
    """Some part of it was quoted or escaped."""
    expands: bool = False
    """It contains an unquoted glob, `~` or brace expansion: bash may turn it into other words."""
    dynamic: bool = False
    """It contains a `$` expansion or a command substitution: its value is only known when it runs."""


@dataclass(slots=True)
class Parsed:
    """A command line, read."""

    source: str
    commands: list[list[Word]] = field(default_factory=list)
    """The plain commands of the line, split at operators (redirection targets left out)."""
    operators: list[str] = field(default_factory=list)
    substitutions: list[str] = field(default_factory=list)
    """The text inside `$(...)`, backticks, `<(...)` and `>(...)`."""
    redirects: list[Word] = field(default_factory=list)
    """The targets of redirections (`< in`, `> out`, `2>> log`; a here-document's delimiter)."""
    problems: list[str] = field(default_factory=list)
    """Why the line is more than one plain command with literal words."""
    error: str | None = None
    """Set when the line cannot be read (an unterminated quote, say)."""

    @property
    def is_simple(self) -> bool:
        """Exactly one plain command: no operator, substitution, expansion, redirection, or anything else."""
        return self.error is None and len(self.commands) == 1 and not self.problems

    @property
    def words(self) -> list[Word]:
        return self.commands[0] if len(self.commands) == 1 else []

    def only_problems(self, *allowed: str) -> bool:
        """Whether every problem is one of `allowed` (e.g. globs, for a user's allow rule)."""
        return all(p in allowed for p in self.problems)


def _add(parsed: Parsed, problem: str) -> None:
    if problem not in parsed.problems:
        parsed.problems.append(problem)


def parse(command: str) -> Parsed:
    """Tokenize a bash command line; never raises (see `Parsed.error`)."""
    parsed = Parsed(command)
    if not isinstance(command, str):
        parsed.error = "not a string"
        return parsed
    n = len(command)
    i = 0
    current: list[Word] = []
    raw: list[str] = []
    value: list[str] = []
    quoted = False
    expands = False
    dynamic = False
    in_word = False
    redirect_target = False  # the next word is a redirection's target, not part of the command
    at_command_start = True

    def end_word() -> None:
        nonlocal raw, value, quoted, expands, dynamic, in_word, redirect_target, at_command_start, current
        if in_word:
            word = Word("".join(raw), "".join(value), quoted, expands, dynamic)
            if redirect_target:
                redirect_target = False
                parsed.redirects.append(word)
            elif word.raw in ("{", "}") and not current or word.raw == "}":
                # a command group's braces separate the commands around them
                if current:
                    parsed.commands.append(current)
                current = []
                _add(parsed, "a command group")
                at_command_start = True
            else:
                if not current and "=" in word.value and not word.quoted and _is_assignment(word.value):
                    _add(parsed, "a variable assignment")
                current.append(word)
                at_command_start = False
        raw, value, quoted, expands, dynamic, in_word = [], [], False, False, False, False

    def end_command(op: str) -> None:
        nonlocal current, at_command_start
        end_word()
        if current:
            parsed.commands.append(current)
        current = []
        parsed.operators.append(op)
        at_command_start = True

    while i < n:
        c = command[i]
        # -- control characters and unusual whitespace --------------------------------------------
        if c in "\r\x0b\x0c\x00" or (ord(c) < 32 and c not in "\t\n") or c in "\x7f\u00a0\u1680\u2028\u2029\ufeff" \
                or "\u2000" <= c <= "\u200f" or "\u202a" <= c <= "\u202f" or "\u2060" <= c <= "\u2064":
            _add(parsed, "a control or invisible character")
            raw.append(c)
            value.append(c)
            in_word = True
            i += 1
            continue
        if c in " \t":
            end_word()
            i += 1
            continue
        if c == "\n":
            end_command("\n")
            _add(parsed, "several lines")
            i += 1
            continue
        # -- operators -----------------------------------------------------------------------------
        if c in _OPERATOR_CHARS:
            two = command[i : i + 2]
            if c == "&" and command[i + 1 : i + 2] == ">":  # &> file, &>> file
                end_word()
                _add(parsed, "a redirection")
                i += 3 if command[i + 2 : i + 3] == ">" else 2
                redirect_target = True
                continue
            op = two if two in ("&&", "||", ";;", "|&") else c
            end_command(op)
            _add(parsed, {"|": "a pipe", "|&": "a pipe", "&": "a background job"}.get(op, "several commands"))
            i += len(op)
            continue
        if c in "<>":
            if command[i + 1 : i + 2] == "(":  # process substitution
                end_word()
                inner, j = _balanced(command, i + 2)
                if inner is None:
                    parsed.error = "an unterminated process substitution"
                    return parsed
                parsed.substitutions.append(inner)
                _add(parsed, "a process substitution")
                i = j
                continue
            # fd number directly before (2>file): it belongs to the redirection, not the command
            if in_word and not quoted and "".join(raw).isdigit():
                raw, value, in_word = [], [], False
            else:
                end_word()
            _add(parsed, "a redirection")
            if command[i : i + 3] == "<<<":
                i += 3
            elif command[i : i + 2] == "<<":
                _add(parsed, "a here-document")
                i += 2
            else:
                i += 1
                if command[i : i + 1] in (">", "|", "&"):
                    i += 1
            redirect_target = True
            continue
        if c in "()":
            end_word()
            _add(parsed, _SPECIAL_PROBLEMS[c])
            if c == "(":
                inner, j = _balanced(command, i + 1)
                if inner is None:
                    parsed.error = "an unbalanced parenthesis"
                    return parsed
                parsed.substitutions.append(inner)
                i = j
            else:
                parsed.error = "an unbalanced parenthesis"
                return parsed
            continue
        # -- comments --------------------------------------------------------------------------------
        if c == "#" and not in_word:
            _add(parsed, "a comment")
            j = command.find("\n", i)
            i = n if j == -1 else j
            continue
        # -- quoting --------------------------------------------------------------------------------------
        if c == "\\":
            if i + 1 >= n:
                raw.append(c)
                value.append(c)
                in_word = True
                i += 1
                continue
            nxt = command[i + 1]
            if nxt == "\n":  # line continuation
                i += 2
                continue
            raw.append(c + nxt)
            value.append(nxt)
            quoted = in_word = True
            i += 2
            continue
        if c == "'":
            j = command.find("'", i + 1)
            if j == -1:
                parsed.error = "an unterminated single quote"
                return parsed
            raw.append(command[i : j + 1])
            value.append(command[i + 1 : j])
            quoted = in_word = True
            i = j + 1
            continue
        if c == '"':
            j, text = _double_quoted(command, i + 1, parsed)
            if j is None:
                parsed.error = parsed.error or "an unterminated double quote"
                return parsed
            raw.append(command[i : j + 1])
            value.append(text)
            quoted = in_word = True
            if "$" in text or "`" in text:
                dynamic = True
            i = j + 1
            continue
        if c == "`":
            j = _backtick_end(command, i + 1)
            if j is None:
                parsed.error = "an unterminated backtick"
                return parsed
            parsed.substitutions.append(command[i + 1 : j].replace("\\`", "`"))
            _add(parsed, "a command substitution")
            raw.append(command[i : j + 1])
            value.append(command[i : j + 1])
            in_word = dynamic = True
            i = j + 1
            continue
        if c == "$":
            nxt = command[i + 1 : i + 2]
            if nxt == "(":
                if command[i + 2 : i + 3] == "(":
                    _add(parsed, "an arithmetic expansion")
                inner, j = _balanced(command, i + 2)
                if inner is None:
                    parsed.error = "an unterminated command substitution"
                    return parsed
                parsed.substitutions.append(inner)
                _add(parsed, "a command substitution")
                raw.append(command[i:j])
                value.append(command[i:j])
                in_word = dynamic = True
                i = j
                continue
            if nxt == "'":  # ANSI-C quoting: $'...'
                j = _ansi_c_end(command, i + 2)
                if j is None:
                    parsed.error = "an unterminated $'...' quote"
                    return parsed
                _add(parsed, "ANSI-C quoting")
                raw.append(command[i : j + 1])
                value.append(_ansi_c_decode(command[i + 2 : j]))
                quoted = in_word = True
                i = j + 1
                continue
            if nxt == "{":
                j = command.find("}", i + 2)
                if j == -1:
                    parsed.error = "an unterminated ${...}"
                    return parsed
                if "$(" in command[i:j] or "`" in command[i:j]:
                    parsed.substitutions.append(command[i + 2 : j])
                _add(parsed, "a variable expansion")
                raw.append(command[i : j + 1])
                value.append(command[i : j + 1])
                in_word = dynamic = True
                i = j + 1
                continue
            if nxt and (nxt.isalnum() or nxt in "_@*#?-$!"):
                _add(parsed, "a variable expansion")
                dynamic = True
            elif nxt == '"':
                _add(parsed, "a locale string")
            raw.append(c)
            value.append(c)
            in_word = True
            i += 1
            continue
        # -- expansions in plain words ------------------------------------------------------------------
        if c in _GLOB_CHARS:
            _add(parsed, "a glob pattern")
            expands = True
        elif c == "~" and not in_word:
            _add(parsed, "a home directory (~)")
            expands = True
        elif c in "{}":
            if c == "{" and not in_word and command[i + 1 : i + 2] in (" ", "\t", "\n", ""):
                _add(parsed, "a command group")
            else:
                _add(parsed, "a brace expansion")
            expands = True
        elif c == "!" and not in_word:
            _add(parsed, "history expansion or negation (!)")
        raw.append(c)
        value.append(c)
        in_word = True
        i += 1
    end_word()
    if current:
        parsed.commands.append(current)
    if redirect_target:
        parsed.error = parsed.error or "a redirection without a target"
    if not parsed.commands and parsed.error is None and not parsed.substitutions:
        parsed.error = "an empty command"
    keyword = parsed.commands[0][0].value if parsed.commands and parsed.commands[0] else ""
    if keyword in _KEYWORDS:
        _add(parsed, f"the shell keyword {keyword!r}")
    return parsed


_KEYWORDS = {
    "if", "then", "else", "elif", "fi", "for", "while", "until", "do", "done", "case", "esac", "select",
    "function", "coproc", "[[", "]]", "{", "}", "!", "time",
}


def _is_assignment(text: str) -> bool:
    if "=" not in text:
        return False
    name = text.split("=", 1)[0].rstrip("+")
    return bool(name) and (name[0].isalpha() or name[0] == "_") and all(ch.isalnum() or ch == "_" for ch in name)


def _double_quoted(command: str, i: int, parsed: Parsed) -> tuple[int | None, str]:
    """Read a double-quoted string from `i` (after the quote); return (index of the closing quote, value)."""
    out: list[str] = []
    n = len(command)
    while i < n:
        c = command[i]
        if c == '"':
            return i, "".join(out)
        if c == "\\" and i + 1 < n and command[i + 1] in '$`"\\\n':
            if command[i + 1] != "\n":
                out.append(command[i + 1])
            i += 2
            continue
        if c == "$":
            nxt = command[i + 1 : i + 2]
            if nxt == "(":
                inner, j = _balanced(command, i + 2)
                if inner is None:
                    parsed.error = "an unterminated command substitution"
                    return None, ""
                parsed.substitutions.append(inner)
                _add(parsed, "a command substitution")
                out.append(command[i:j])
                i = j
                continue
            if nxt and (nxt.isalnum() or nxt in "_@*#?-$!{"):
                _add(parsed, "a variable expansion")
                if nxt == "{":
                    j = command.find("}", i + 2)
                    if j != -1 and ("$(" in command[i:j] or "`" in command[i:j]):
                        parsed.substitutions.append(command[i + 2 : j])
        if c == "`":
            j = _backtick_end(command, i + 1)
            if j is None:
                parsed.error = "an unterminated backtick"
                return None, ""
            parsed.substitutions.append(command[i + 1 : j].replace("\\`", "`"))
            _add(parsed, "a command substitution")
            out.append(command[i : j + 1])
            i = j + 1
            continue
        if c in "\r\x00" or "\u2000" <= c <= "\u200f" or c in "\u2028\u2029\ufeff":
            _add(parsed, "a control or invisible character")
        out.append(c)
        i += 1
    return None, ""


_ANSI_SIMPLE = {"a": "\a", "b": "\b", "e": "\x1b", "E": "\x1b", "f": "\f", "n": "\n", "r": "\r", "t": "\t",
                "v": "\v", "\\": "\\", "'": "'", '"': '"', "?": "?"}


def _ansi_c_decode(text: str) -> str:
    """The value of a bash `$'...'` string (escapes decoded as bash does)."""
    out: list[str] = []
    i = 0
    n = len(text)
    while i < n:
        c = text[i]
        if c != "\\" or i + 1 >= n:
            out.append(c)
            i += 1
            continue
        e = text[i + 1]
        if e in _ANSI_SIMPLE:
            out.append(_ANSI_SIMPLE[e])
            i += 2
        elif e in "01234567":
            j = i + 1
            while j < n and j < i + 4 and text[j] in "01234567":
                j += 1
            out.append(chr(int(text[i + 1 : j], 8) & 0xFF))
            i = j
        elif e in "xuU":
            width = {"x": 2, "u": 4, "U": 8}[e]
            j = i + 2
            while j < n and j < i + 2 + width and text[j] in "0123456789abcdefABCDEF":
                j += 1
            if j == i + 2:
                out.append("\\" + e)
            else:
                try:
                    out.append(chr(int(text[i + 2 : j], 16)))
                except (ValueError, OverflowError):
                    out.append("\ufffd")
            i = j
        elif e == "c" and i + 2 < n:
            out.append(chr(ord(text[i + 2]) & 0x1F))
            i += 3
        else:
            out.append("\\" + e)
            i += 2
    return "".join(out)


def _backtick_end(command: str, i: int) -> int | None:
    n = len(command)
    while i < n:
        if command[i] == "\\":
            i += 2
            continue
        if command[i] == "`":
            return i
        i += 1
    return None


def _ansi_c_end(command: str, i: int) -> int | None:
    n = len(command)
    while i < n:
        if command[i] == "\\":
            i += 2
            continue
        if command[i] == "'":
            return i
        i += 1
    return None


def _balanced(command: str, i: int) -> tuple[str | None, int]:
    """From just after an opening `(`, find its closing `)` (quotes and nesting respected).

    Returns (the text inside, the index after the closing parenthesis), or (None, i) when unbalanced.
    """
    start = i
    depth = 1
    n = len(command)
    while i < n:
        c = command[i]
        if c == "\\":
            i += 2
            continue
        if c == "'":
            j = command.find("'", i + 1)
            if j == -1:
                return None, i
            i = j + 1
            continue
        if c == '"':
            j = i + 1
            while j < n and command[j] != '"':
                j += 2 if command[j] == "\\" else 1
            if j >= n:
                return None, i
            i = j + 1
            continue
        if c == "`":
            j = _backtick_end(command, i + 1)
            if j is None:
                return None, i
            i = j + 1
            continue
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if depth == 0:
                return command[start:i], i + 1
        i += 1
    return None, i


# --------------------------------------------------------------------------------------------------
# Every command a line may run (for deny rules)
# --------------------------------------------------------------------------------------------------
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
        while values and _is_assignment(values[0]) and (not words[len(words) - len(values)].quoted or _is_assignment(
                words[len(words) - len(values)].raw.split("=", 1)[0] + "=")):  # NAME='value' assigns too
            assignments.append(values[0])
            values = values[1:]
        if any(unseen_assignment(a, values[0] if values else None) for a in assignments):
            ok = False
        if values and values[0] in ("export", "declare", "typeset", "readonly", "local") and any(
                _is_assignment(v) and unseen_assignment(v) for v in values[1:]):
            ok = False
        if values and values[0] == "function":
            values = values[2:]  # function NAME { ...; }: the body's first command follows
        while values and values[0] in _KEYWORDS and values[0] != "time":
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
            if not arg.startswith("-") and not (head == "env" and _is_assignment(arg)):
                found.extend(_unwrap(rest[k:], depth + 1))
            value = arg.split("=", 1)[1] if arg.startswith("-") and "=" in arg else arg
            if any(c in value for c in " \t\n;|&`$()<>"):
                script(value)
    if unseen(values) is not None:
        found.append(None)  # it runs commands nbagent is not shown (`_runsprograms`): deny rules then match
    if head == "env":
        program = next((a for a in rest if not a.startswith("-") and not _is_assignment(a)), None)
        if any(_is_assignment(a) and unseen_assignment(a, program or "env") for a in rest):
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


# --------------------------------------------------------------------------------------------------
# Rule patterns
# --------------------------------------------------------------------------------------------------
def glob_escape(text: str) -> str:
    """`text` as an fnmatch pattern that matches only itself."""
    return "".join(f"[{c}]" if c in "*?[" else c for c in text)


def _unescape(pattern: str) -> str | None:
    """The literal text a pattern stands for, or None when it has a wildcard."""
    return literal_glob(pattern)


def _norm_pattern(pattern: str) -> str:
    return " ".join(pattern.split())


def pattern_matches(pattern: str, command: str, action: str = "allow") -> bool:
    """Whether a `shell(pattern)` rule covers this command line.

    - allow, ask and grants: the pattern is a glob over the command's words as written, joined by single
      spaces (`git status*`, `pytest tests/*`), matched only when the line is one plain command (globs and
      `~` in its arguments are fine; operators, substitutions, `$` expansions, redirections, assignments
      and control characters are not). `prefix:*` matches the words of `prefix` followed by anything.
      A pattern without wildcards also matches exactly that command line, whatever it contains.
    - deny: matches when the pattern covers any command the line may run (each part of a compound line,
      substitutions, commands behind `sudo`/`env`/`xargs`/`bash -c`/`eval`/`find -exec`), by its words'
      values (quotes removed) or with the program's directory dropped (`/bin/rm` as `rm`), ignoring case;
      or the whole line; and always when the line cannot be read.
    """
    if action == "deny":
        return _deny_matches(_norm_pattern(pattern), command)
    literal = _unescape(pattern.strip())
    if literal is not None:
        # exactly that line, or the same words with other spacing between them (never inside quotes)
        if command.strip() == literal:
            return True
        mine, theirs = parse(literal), parse(command)
        return (mine.error is None and theirs.error is None and len(mine.commands) == len(theirs.commands) == 1
                and mine.only_problems("a glob pattern", "a home directory (~)", "a brace expansion")
                and theirs.only_problems("a glob pattern", "a home directory (~)", "a brace expansion")
                and [w.raw for w in mine.words] == [w.raw for w in theirs.words])
    pattern = _norm_pattern(pattern)
    parsed = parse(command)
    if parsed.error is not None or len(parsed.commands) != 1:
        return False
    if not parsed.only_problems("a glob pattern", "a home directory (~)", "a brace expansion"):
        return False
    words = parsed.words
    if pattern.endswith(":*"):
        prefix = pattern[:-2].split()
        return [w.raw for w in words[: len(prefix)]] == prefix
    canonical = " ".join(w.raw for w in words)
    if fnmatch.fnmatchcase(canonical, pattern):
        return True
    return pattern.endswith(" *") and canonical == pattern[:-2]


def _deny_matches(pattern: str, command: str) -> bool:
    if not isinstance(command, str):
        return True
    pat = pattern[:-2] + " *" if pattern.endswith(":*") else pattern
    pat_l = pat.lower()
    if fnmatch.fnmatchcase(" ".join(command.split()).lower(), pat_l):
        return True
    cmds, ok = subcommands(command)
    if not ok:
        return True
    for values in cmds:
        forms = {" ".join(values)}
        if values:
            forms.add(" ".join([os.path.basename(values[0]), *values[1:]]))
        for form in forms:
            low = form.lower()
            if fnmatch.fnmatchcase(low, pat_l) or (pat_l.endswith(" *") and low == pat_l[:-2]):
                return True
    return False


# --------------------------------------------------------------------------------------------------
# What "always allow" should cover
# --------------------------------------------------------------------------------------------------
def suggest_pattern(command: str) -> str:
    """The `shell(...)` pattern an "always allow" of this command remembers: exactly this command line
    (globs escaped), never a family of commands: approving `git config --get x` must not allow
    `git config core.fsmonitor ...`. The same command with other spacing between its words still matches;
    an approver that wants a wider grant says so with `Decision(scope=...)`.
    """
    exact = glob_escape(command.strip())
    if not exact:
        return "\x00"  # a blank line: a pattern that covers nothing else (never the whole tool)
    return exact


def literal_pattern(pattern: str) -> str | None:
    """The exact text a pattern without wildcards stands for (`ls [*].py` -> `ls *.py`), else None."""
    return _unescape(pattern)
