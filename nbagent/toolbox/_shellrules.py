"""`shell(pattern)` rules: what a pattern covers, and what an "always allow" remembers.

Allow rules, ask rules and grants match one plain command by its words as written (`parse(...).is_simple`
apart from globs and `~` in its arguments), or exactly the line a wildcard-free pattern spells out; deny
rules match any command the line may run (`_subcommands.subcommands`), or the whole line, and always a
line that cannot be read whole.
"""

from __future__ import annotations

import fnmatch
import os

from ..tools.paths import literal_glob
from ._leaves import Where
from ._shellwords import parse
from ._subcommands import subcommands

__all__ = ["glob_escape", "literal_pattern", "pattern_matches", "suggest_pattern"]


def glob_escape(text: str) -> str:
    """`text` as an fnmatch pattern that matches only itself."""
    return "".join(f"[{c}]" if c in "*?[" else c for c in text)


def _unescape(pattern: str) -> str | None:
    """The literal text a pattern stands for, or None when it has a wildcard."""
    return literal_glob(pattern)


def _norm_pattern(pattern: str) -> str:
    return " ".join(pattern.split())


def pattern_matches(pattern: str, command: str, action: str = "allow", where: Where | None = None) -> bool:
    """Whether a `shell(pattern)` rule covers this command line.

    - allow, ask and grants: the pattern is a glob over the command's words as written, joined by single
      spaces (`git status*`, `pytest tests/*`), matched only when the line is one plain command (globs and
      `~` in its arguments are fine; operators, substitutions, `$` expansions, redirections, assignments
      and control characters are not). `prefix:*` matches the words of `prefix` followed by anything.
      A pattern without wildcards also matches exactly that command line, whatever it contains.
    - deny: matches when the pattern covers any command the line may run (each part of a compound line,
      substitutions, commands behind `sudo`/`env`/`xargs`/`bash -c`/`eval`/`find -exec`), by its words'
      values (quotes removed) or with the program's directory dropped (`/bin/rm` as `rm`), ignoring case;
      or the whole line; and always when the line cannot be read or runs a program not known to run no
      others (`_leaves`). `where` (the workspace and sandbox the line runs in) lets git count as known
      while its repository configures no program.
    """
    if action == "deny":
        return _deny_matches(_norm_pattern(pattern), command, where)
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


def _deny_matches(pattern: str, command: str, where: Where | None = None) -> bool:
    if not isinstance(command, str):
        return True
    pat = pattern[:-2] + " *" if pattern.endswith(":*") else pattern
    pat_l = pat.lower()
    if fnmatch.fnmatchcase(" ".join(command.split()).lower(), pat_l):
        return True
    cmds, ok = subcommands(command, where=where)
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
