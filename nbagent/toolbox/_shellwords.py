"""Reading a shell command line the way bash would, to decide what it is before it runs.

`parse(command)` tokenizes a command line with bash's quoting rules (single quotes, double quotes,
backslashes, `$'...'`) and records everything that makes it more than one plain command: operators
(`;`, `&&`, `||`, `|`, `&`, newlines), redirections, command and process substitution (`$(...)`,
backticks, `<(...)`), parameter expansion (`$X`), globs, `~`, brace expansion, comments, subshells,
assignments and control characters. It never guesses: whatever it cannot read makes the line "not simple".

Three questions are answered from that, and only from it:

- `Parsed.is_simple`: one plain command with literal words. Allow rules, ask rules and grants only ever
  match such a command (or the exact command line the pattern spells out), so `git status; rm -rf x`
  never matches `shell(git status*)` (`_shellrules.pattern_matches`).
- `_subcommands.subcommands`: every command that may run, for deny rules, which must match broadly:
  the parts of a compound line, the contents of substitutions, and the commands behind wrappers and
  shells. A line it cannot read whole makes every deny rule match.
- whether a command only reads (`_readonly.read_only_problem`).

It is one module because `parse` is one pass over the line holding one state (the word being read, the
command it belongs to, whether a redirection's target comes next); the helpers below it read the quoted
and nested forms (`"..."`, `$'...'`, backticks, `$(...)`) that pass meets.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ..safety.hidden import ANY_HIDDEN

__all__ = ["KEYWORDS", "Parsed", "Word", "is_assignment", "parse"]

_OPERATOR_CHARS = ";&|"
_SPECIAL_PROBLEMS = {
    "(": "a subshell or group",
    ")": "a subshell or group",
}
_GLOB_CHARS = "*?["
_ODD = re.compile(f"{ANY_HIDDEN.pattern}|[^\\S \t\n]")
"""A hidden character (the one list, `nbagent.safety.hidden`) or whitespace other than a space, a tab or a
line break (no-break and other Unicode spaces, a carriage return, a form feed): what makes a command read
differently from how bash splits it."""


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
    odd = _ODD.search(command) is not None
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
                if not current and "=" in word.value and not word.quoted and is_assignment(word.value):
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
        if odd and _ODD.match(c):
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
    if keyword in KEYWORDS:
        _add(parsed, f"the shell keyword {keyword!r}")
    return parsed


KEYWORDS = {
    "if", "then", "else", "elif", "fi", "for", "while", "until", "do", "done", "case", "esac", "select",
    "function", "coproc", "[[", "]]", "{", "}", "!", "time",
}


def is_assignment(text: str) -> bool:
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
        if _ODD.match(c):
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

