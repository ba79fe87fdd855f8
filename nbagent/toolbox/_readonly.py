"""Which shell commands only read: the allow-list behind the shell tool's auto-allow.

A command line is auto-allowed as read-only only when every one of these holds:

- it is one plain command (`_shellwords.parse(...).is_simple`): no `;`, `&&`, `||`, pipes, `&`, newlines,
  redirections, `$(...)`, backticks, `$VAR`, globs, `~`, braces, comments, assignments or control
  characters; the program name is written plainly (not quoted, not a path);
- the program is on the allow-list below, and every option is one the classifier knows, read the way
  the program reads it (GNU `getopt_long`: a long option may be any unique prefix of its name,
  `--opt=value` or `--opt value`, bundled short options `-rf`, attached values `-n5`). An option it does
  not know, an ambiguous prefix, or one that writes, runs programs or follows links out
  (`sort -o`/`--out`, `find -exec`/`-delete`, `tail -f`, `wc --files0-from`, `git -c`, `git diff --output`,
  `git branch NAME`...) makes the command not read-only;
- every argument that could be a path (and every option value that is one) stays inside the workspace
  once symbolic links are followed (no absolute paths elsewhere, no `..` out, no `~`), and is not
  protected by a deny rule of `read_file` or `grep`; when such deny rules exist, commands that read file
  contents across whole trees (`grep -r`, `diff -r`, `git diff`, `git log -p`, `git show`) are not
  auto-allowed either;
- options that follow symbolic links while recursing (`ls -LR`, `grep -R`, `du -L`, `find -L`, and
  `diff -r`, which always follows) are only read-only while no symbolic link in the workspace leads out
  of it (checked each time, over at most `MAX_LINK_SCAN` entries);
- for `git`: the workspace is the top of its repository, with a plain `.git/` directory (not a `.git`
  file pointing elsewhere, not a bare repository's `HEAD`/`objects/`/`refs/` at the top), no `GIT_DIR`
  and the like in the environment, a subcommand the classifier knows (an alias never is), and, for the
  commands that compare or show file contents, no diff or filter program configured
  (`_gitsafety.configured_programs`) unless `--no-ext-diff --no-textconv` are given. The shell tool runs
  every git with `_gitsafety.git_safety_env()`, which forces hooks, fsmonitor, pagers and the like off.

Without an OS sandbox (`sandboxed=False`), only `STRICT_READ_ONLY_COMMANDS` are auto-allowed, with the
few options listed there, on plain files of the workspace.

Anything else is not read-only: it goes on through the permission pipeline (rules, grants, the mode,
the approver) like any other command.

`_readdeny.reveals_denied` answers the other question deny rules on reading ask of a shell command:
may it show a protected file?
"""

from __future__ import annotations

import os
import stat as stat_module
from dataclasses import dataclass, field
from typing import Callable, Mapping

from ..secrets import secret_values
from ._gitsafety import configured_programs
from ._secretreads import SLICING, WHOLE_READERS, holder_of_secret
from ._shellwords import parse
from ._workspace import Workspace

__all__ = ["MAX_LINK_SCAN", "READ_ONLY_COMMANDS", "STRICT_READ_ONLY_COMMANDS", "git_layout_problem",
           "read_only_problem"]

DeniedCheck = Callable[[str, str], bool]
"""`f(relative path, real absolute path) -> bool`: whether a deny rule protects that path from reading."""

MAX_LINK_SCAN = 20_000
"""Entries looked at when checking a workspace for symbolic links that lead out (more: assume one does)."""


# --------------------------------------------------------------------------------------------------
# Option tables, read as getopt_long reads them
# --------------------------------------------------------------------------------------------------
class _Options:
    """One program's options.

    `short`: letters, each followed by `:` (takes a value), `@` (takes a path) or `?` (an optional value,
    attached only). `long`: names separated by spaces, each ending with `=` (takes a value), `=@` (a
    path) or `?` (an optional value, after `=` only). `aliases`: short letter -> long name, so checks name
    one option once. `abbreviations`: long options may be shortened to a unique prefix (getopt_long).
    """

    def __init__(self, short: str = "", long: str = "", aliases: Mapping[str, str] | None = None, *,
                 gnu: bool = True, abbreviations: bool = True) -> None:
        self.short: dict[str, str] = {}
        i = 0
        while i < len(short):
            letter = short[i]
            kind = short[i + 1] if i + 1 < len(short) and short[i + 1] in ":@?" else ""
            self.short[letter] = kind
            i += 2 if kind else 1
        self.long: dict[str, str] = {}
        for token in (long + (" help version" if gnu else "")).split():
            if token.endswith("=@"):
                self.long[token[:-2]] = "@"
            elif token.endswith("="):
                self.long[token[:-1]] = ":"
            elif token.endswith("?"):
                self.long[token[:-1]] = "?"
            else:
                self.long[token] = ""
        self.aliases = dict(aliases or {})
        self.abbreviations = abbreviations

    def canonical(self, name: str) -> str:
        return self.aliases.get(name, name)

    def resolve_long(self, given: str) -> str | None:
        """The long option `--given` stands for (exact, else a unique prefix); None if unknown or ambiguous."""
        if given in self.long:
            return given
        if not self.abbreviations or not given:
            return None
        candidates = [name for name in self.long if name.startswith(given)]
        if len({self.canonical(c) for c in candidates}) == 1:
            return candidates[0]
        return None


@dataclass(slots=True)
class _Parsed:
    options: list[tuple[str, str | None, str]] = field(default_factory=list)
    """(canonical name, value, kind) in order; kind is "", ":", "@" or "?"."""
    positional: list[str] = field(default_factory=list)

    def has(self, *names: str) -> bool:
        return any(o[0] in names for o in self.options)

    def values(self, name: str) -> list[str]:
        return [v for n, v, _ in self.options if n == name and v is not None]


def _getopt(opts: _Options, args: list[str]) -> _Parsed | str:
    """Split `args` as GNU getopt_long would (options anywhere until `--`); a string says what is unknown."""
    out = _Parsed()
    k = 0
    while k < len(args):
        a = args[k]
        k += 1
        if a == "--":
            out.positional.extend(args[k:])
            break
        if a.startswith("--"):
            given, eq, value = a[2:].partition("=")
            name = opts.resolve_long(given)
            if name is None:
                return f"--{given} is not an option it knows (or is ambiguous)"
            kind = opts.long[name]
            if kind == "" and eq:
                return f"--{name} takes no value"
            if kind in (":", "@") and not eq:
                if k >= len(args):
                    return f"--{name} needs a value"
                value, k = args[k], k + 1
                eq = "="
            out.options.append((opts.canonical(name), value if eq else None, kind))
        elif a.startswith("-") and a != "-":
            j = 1
            while j < len(a):
                letter = a[j]
                if letter not in opts.short:
                    return f"-{letter} is not an option it knows"
                kind = opts.short[letter]
                if kind == "":
                    out.options.append((opts.canonical(letter), None, kind))
                    j += 1
                    continue
                rest = a[j + 1 :]
                if kind == "?":
                    out.options.append((opts.canonical(letter), rest or None, kind))
                elif rest:
                    out.options.append((opts.canonical(letter), rest, kind))
                elif k < len(args):
                    out.options.append((opts.canonical(letter), args[k], kind))
                    k += 1
                else:
                    return f"-{letter} needs a value"
                break
        else:
            out.positional.append(a)
    return out


@dataclass(frozen=True, slots=True)
class _Spec:
    """How one program is checked."""

    options: _Options | None
    """Its options (None: it takes none; every argument is text, like `echo`)."""
    bad: Mapping[str, str] = field(default_factory=dict)
    """Canonical option -> what it does that is not reading (it makes the command not read-only)."""
    positional: str = "paths"
    """"paths" (each checked), "text" (never a path), "pattern" (the first is a pattern unless -e/-f)."""
    max_positional: int | None = None
    follows: frozenset[str] = frozenset()
    """Options that make it follow symbolic links while it recurses."""
    recurses: frozenset[str] = frozenset()
    """Options that make it read file contents below directories (the deny-rule check cares)."""
    always_follows_when_recursing: bool = False
    """`diff -r` follows links it meets unless `--no-dereference`."""
    check: Callable[[_Parsed], str | None] | None = None
    """Anything else the program needs checked."""
    only_args: tuple[tuple[str, ...], ...] | None = None
    """When set: the exact argument lists allowed (`python --version`)."""


def _date_check(p: _Parsed) -> str | None:
    if any(not a.startswith("+") for a in p.positional):
        return "date with an argument other than +FORMAT sets the clock"
    return None


_SUM = _Spec(_Options("bctwz", "binary check tag text ignore-missing quiet status strict warn zero",
                      {"b": "binary", "c": "check", "t": "text", "w": "warn", "z": "zero"}),
             bad={"check": "reads the files a checksum list names, wherever they are"})

READ_ONLY_COMMANDS: dict[str, _Spec] = {
    "ls": _Spec(
        _Options("aAbBcCdDfFgGhHiI:klLmnNopqQrRsStT:uUvw:xXZ1",
                 "all almost-all author escape block-size= ignore-backups color? directory dired classify? "
                 "file-type format= full-time group-directories-first no-group human-readable si "
                 "dereference-command-line dereference-command-line-symlink-to-dir hide= hyperlink? "
                 "indicator-style= inode ignore= kibibytes dereference literal numeric-uid-gid "
                 "hide-control-chars show-control-chars quote-name quoting-style= reverse recursive size sort= "
                 "time= time-style= tabsize= width= context zero",
                 {"a": "all", "A": "almost-all", "b": "escape", "B": "ignore-backups", "d": "directory",
                  "D": "dired", "F": "classify", "G": "no-group", "h": "human-readable",
                  "H": "dereference-command-line", "i": "inode", "I": "ignore", "k": "kibibytes",
                  "L": "dereference", "N": "literal", "n": "numeric-uid-gid", "q": "hide-control-chars",
                  "Q": "quote-name", "r": "reverse", "R": "recursive", "s": "size", "T": "tabsize", "w": "width",
                  "Z": "context"}),
        follows=frozenset({"dereference"})),
    "pwd": _Spec(_Options("LP", gnu=False)),
    "cat": _Spec(_Options("AbeEnstTuv", "show-all number-nonblank show-ends number squeeze-blank show-tabs "
                                        "show-nonprinting",
                          {"A": "show-all", "b": "number-nonblank", "E": "show-ends", "n": "number",
                           "s": "squeeze-blank", "T": "show-tabs", "v": "show-nonprinting"})),
    "head": _Spec(_Options("c:n:qvz0123456789", "bytes= lines= quiet silent verbose zero-terminated",
                           {"c": "bytes", "n": "lines", "q": "quiet", "v": "verbose", "z": "zero-terminated"})),
    "tail": _Spec(_Options("c:fFn:qs:vz0123456789",
                           "bytes= follow? lines= pid= quiet silent retry sleep-interval= verbose zero-terminated "
                           "max-unchanged-stats= debug",
                           {"c": "bytes", "f": "follow", "n": "lines", "q": "quiet", "s": "sleep-interval",
                            "v": "verbose", "z": "zero-terminated"}),
                  bad={"follow": "waits for the file to grow, forever", "F": "waits for the file to grow, forever",
                       "retry": "waits for the file to appear"}),
    "wc": _Spec(_Options("clLmw", "bytes chars lines max-line-length words files0-from=@ total= debug",
                         {"c": "bytes", "m": "chars", "l": "lines", "L": "max-line-length", "w": "words"}),
                bad={"files0-from": "reads the files a list names, wherever they are"}),
    "nl": _Spec(_Options("b:d:f:h:i:l:n:ps:v:w:",
                         "body-numbering= section-delimiter= footer-numbering= header-numbering= line-increment= "
                         "join-blank-lines= number-format= no-renumber number-separator= starting-line-number= "
                         "number-width=",
                         {"b": "body-numbering", "d": "section-delimiter", "f": "footer-numbering",
                          "h": "header-numbering", "i": "line-increment", "l": "join-blank-lines",
                          "n": "number-format", "p": "no-renumber", "s": "number-separator",
                          "v": "starting-line-number", "w": "number-width"})),
    "file": _Spec(_Options("bcCdEe:F:f@hiklLm@nNpP:rsSvzZ0",
                           "brief checking-printout compile debug exclude= exclude-quiet= extension separator= "
                           "files-from=@ no-dereference mime apple mime-type mime-encoding keep-going list "
                           "dereference magic-file=@ no-pad no-buffer preserve-date parameter= raw special-files "
                           "no-sandbox uncompress uncompress-noreport print0",
                           {"b": "brief", "c": "checking-printout", "C": "compile", "d": "debug", "e": "exclude",
                            "F": "separator", "f": "files-from", "h": "no-dereference", "i": "mime",
                            "k": "keep-going", "l": "list", "L": "dereference", "m": "magic-file", "N": "no-pad",
                            "n": "no-buffer", "p": "preserve-date", "P": "parameter", "r": "raw",
                            "s": "special-files", "S": "no-sandbox", "z": "uncompress", "Z": "uncompress-noreport",
                            "0": "print0", "v": "version"}),
                  bad={"compile": "writes a compiled magic file", "files-from": "reads the files a list names",
                       "magic-file": "loads another magic database", "preserve-date": "changes file times",
                       "no-sandbox": "turns its own sandbox off", "uncompress": "runs decompressors",
                       "uncompress-noreport": "runs decompressors"}),
    "stat": _Spec(_Options("c:Lft", "dereference file-system format= printf= terse cached=",
                           {"L": "dereference", "f": "file-system", "c": "format", "t": "terse"})),
    "du": _Spec(_Options("0abB:cd:DhHklLmPsSt:xX@",
                         "null all apparent-size block-size= bytes total max-depth= dereference-args files0-from=@ "
                         "human-readable inodes dereference count-links no-dereference separate-dirs si summarize "
                         "threshold= time? time-style= exclude-from=@ exclude= one-file-system",
                         {"0": "null", "a": "all", "B": "block-size", "b": "bytes", "c": "total", "d": "max-depth",
                          "D": "dereference-args", "H": "dereference-args", "h": "human-readable",
                          "L": "dereference", "l": "count-links", "P": "no-dereference", "S": "separate-dirs",
                          "s": "summarize", "t": "threshold", "X": "exclude-from", "x": "one-file-system"}),
                bad={"files0-from": "reads the files a list names, wherever they are"},
                follows=frozenset({"dereference"})),
    "df": _Spec(_Options("aB:hHiklPt:Tvx:", "all block-size= human-readable si inodes local no-sync output? "
                                            "portability sync total type= print-type exclude-type=",
                         {"a": "all", "B": "block-size", "h": "human-readable", "H": "si", "i": "inodes",
                          "l": "local", "P": "portability", "t": "type", "T": "print-type", "x": "exclude-type"})),
    "echo": _Spec(None, positional="text"),
    "basename": _Spec(_Options("as:z", "multiple suffix= zero", {"a": "multiple", "s": "suffix", "z": "zero"}),
                      positional="text"),
    "dirname": _Spec(_Options("z", "zero", {"z": "zero"}), positional="text"),
    "realpath": _Spec(_Options("eLmPqsz", "canonicalize-existing canonicalize-missing logical physical quiet "
                                          "relative-to=@ relative-base=@ no-symlinks strip zero",
                               {"e": "canonicalize-existing", "m": "canonicalize-missing", "L": "logical",
                                "P": "physical", "q": "quiet", "s": "strip", "z": "zero"})),
    "readlink": _Spec(_Options("efmnqsvz", "canonicalize canonicalize-existing canonicalize-missing no-newline "
                                           "quiet silent verbose zero",
                               {"f": "canonicalize", "e": "canonicalize-existing", "m": "canonicalize-missing",
                                "n": "no-newline", "q": "quiet", "s": "silent", "v": "verbose", "z": "zero"})),
    "md5sum": _SUM,
    "sha1sum": _SUM,
    "sha256sum": _SUM,
    "sha512sum": _SUM,
    "cksum": _Spec(_Options("a:cl:z", "algorithm= base64 check length= raw tag untagged zero debug",
                            {"a": "algorithm", "c": "check", "l": "length", "z": "zero"}),
                   bad={"check": "reads the files a checksum list names, wherever they are"}),
    "true": _Spec(None, positional="text"),
    "whoami": _Spec(_Options()),
    "id": _Spec(_Options("agGnrzZ", "context group groups name real zero",
                         {"Z": "context", "g": "group", "G": "groups", "n": "name", "r": "real", "z": "zero"}),
                positional="text"),
    "uname": _Spec(_Options("asnrvmpio", "all kernel-name nodename kernel-release kernel-version machine processor "
                                         "hardware-platform operating-system",
                            {"a": "all", "s": "kernel-name", "n": "nodename", "r": "kernel-release",
                             "v": "kernel-version", "m": "machine", "p": "processor", "i": "hardware-platform",
                             "o": "operating-system"}), positional="text", max_positional=0),
    "date": _Spec(_Options("d:f@I?r@Rs:u", "date= debug file=@ iso-8601? resolution rfc-email rfc-3339= "
                                          "reference=@ set= utc universal",
                           {"d": "date", "f": "file", "I": "iso-8601", "r": "reference", "R": "rfc-email",
                            "s": "set", "u": "utc"}),
                  bad={"set": "sets the clock"}, positional="text", check=_date_check),
    "which": _Spec(_Options("as", gnu=False), positional="text"),
    "cut": _Spec(_Options("b:c:d:f:nsz", "bytes= characters= delimiter= fields= complement only-delimited "
                                         "output-delimiter= zero-terminated",
                          {"b": "bytes", "c": "characters", "d": "delimiter", "f": "fields", "s": "only-delimited",
                           "z": "zero-terminated"})),
    "diff": _Spec(
        _Options("abBcC:dD:eEfF:hHiI:lL:npNqrsS:tTuU:vwW:x:X@yZ",
                 "normal brief report-identical-files context? unified? ed rcs side-by-side left-column "
                 "suppress-common-lines show-c-function show-function-line= label= expand-tabs initial-tab "
                 "tabsize= suppress-blank-empty paginate new-file unidirectional-new-file ignore-case "
                 "ignore-file-name-case no-ignore-file-name-case ignore-tab-expansion ignore-trailing-space "
                 "ignore-space-change ignore-all-space ignore-blank-lines ignore-matching-lines= text "
                 "strip-trailing-cr recursive no-dereference exclude= exclude-from=@ starting-file= from-file=@ "
                 "to-file=@ width= minimal horizon-lines= speed-large-files color? palette= ifdef= line-format= "
                 "old-line-format= new-line-format= unchanged-line-format= old-group-format= new-group-format= "
                 "unchanged-group-format= changed-group-format= forward-ed",
                 {"a": "text", "b": "ignore-space-change", "B": "ignore-blank-lines", "d": "minimal", "D": "ifdef",
                  "e": "ed", "E": "ignore-tab-expansion", "f": "forward-ed", "F": "show-function-line",
                  "i": "ignore-case", "I": "ignore-matching-lines", "l": "paginate", "L": "label", "n": "rcs",
                  "N": "new-file", "p": "show-c-function", "q": "brief", "r": "recursive",
                  "s": "report-identical-files", "S": "starting-file", "t": "expand-tabs", "T": "initial-tab",
                  "v": "version", "w": "ignore-all-space", "W": "width", "x": "exclude", "X": "exclude-from",
                  "y": "side-by-side", "Z": "ignore-trailing-space"}),
        bad={"paginate": "runs pr"}, recurses=frozenset({"recursive"}), always_follows_when_recursing=True),
    "cmp": _Spec(_Options("bi:ln:sv", "print-bytes ignore-initial= verbose bytes= quiet silent",
                          {"b": "print-bytes", "i": "ignore-initial", "l": "verbose", "n": "bytes", "s": "quiet",
                           "v": "version"})),
    "comm": _Spec(_Options("123z", "check-order nocheck-order output-delimiter= total zero-terminated",
                           {"z": "zero-terminated"})),
    "grep": _Spec(
        _Options("EFGPe:f@ivwxyclLoqsbHhnTZzA:B:C:aD:d:IrRUm:V0123456789",
                 "extended-regexp fixed-strings basic-regexp perl-regexp regexp= file=@ ignore-case no-ignore-case "
                 "invert-match word-regexp line-regexp count color? colour? files-without-match files-with-matches "
                 "only-matching quiet silent no-messages byte-offset with-filename no-filename label= line-number "
                 "initial-tab null null-data after-context= before-context= context= text binary-files= devices= "
                 "directories= exclude= exclude-from=@ exclude-dir= include= recursive dereference-recursive "
                 "line-buffered binary max-count=",
                 {"E": "extended-regexp", "F": "fixed-strings", "G": "basic-regexp", "P": "perl-regexp",
                  "e": "regexp", "f": "file", "i": "ignore-case", "y": "ignore-case", "v": "invert-match",
                  "w": "word-regexp", "x": "line-regexp", "c": "count", "L": "files-without-match",
                  "l": "files-with-matches", "o": "only-matching", "q": "quiet", "s": "no-messages",
                  "b": "byte-offset", "H": "with-filename", "h": "no-filename", "n": "line-number",
                  "T": "initial-tab", "Z": "null", "z": "null-data", "A": "after-context", "B": "before-context",
                  "C": "context", "a": "text", "D": "devices", "d": "directories", "r": "recursive",
                  "R": "dereference-recursive", "U": "binary", "m": "max-count", "V": "version",
                  "colour": "color"}),
        positional="pattern", follows=frozenset({"dereference-recursive"}),
        recurses=frozenset({"recursive", "dereference-recursive"})),
    "sort": _Spec(
        _Options("bcCdfghik:mMno@rRsS:t:T@uVz",
                 "ignore-leading-blanks check? dictionary-order ignore-case general-numeric-sort ignore-nonprinting "
                 "month-sort human-numeric-sort numeric-sort random-sort random-source=@ reverse sort= version-sort "
                 "batch-size= compress-program= debug files0-from=@ key= merge output=@ stable buffer-size= "
                 "field-separator= temporary-directory=@ parallel= unique zero-terminated",
                 {"b": "ignore-leading-blanks", "c": "check", "C": "check", "d": "dictionary-order",
                  "f": "ignore-case", "g": "general-numeric-sort", "h": "human-numeric-sort",
                  "i": "ignore-nonprinting", "k": "key", "m": "merge", "M": "month-sort", "n": "numeric-sort",
                  "o": "output", "r": "reverse", "R": "random-sort", "s": "stable", "S": "buffer-size",
                  "t": "field-separator", "T": "temporary-directory", "u": "unique", "V": "version-sort",
                  "z": "zero-terminated"}),
        bad={"output": "writes a file", "compress-program": "runs a program",
             "files0-from": "reads the files a list names, wherever they are",
             "temporary-directory": "writes temporary files there"}),
    "uniq": _Spec(_Options("cdDf:is:uw:z", "count repeated all-repeated? skip-fields= ignore-case skip-chars= unique "
                                           "zero-terminated check-chars= group?",
                           {"c": "count", "d": "repeated", "D": "all-repeated", "f": "skip-fields",
                            "i": "ignore-case", "s": "skip-chars", "u": "unique", "z": "zero-terminated",
                            "w": "check-chars"}),
                  max_positional=1),
    "find": _Spec(None),  # its own expression language: `_find_problem`
    "python": _Spec(None, only_args=(("--version",), ("-V",))),
    "python3": _Spec(None, only_args=(("--version",), ("-V",))),
}
"""The programs whose options are known; `git` is handled on its own (see `_GIT`)."""


STRICT_READ_ONLY_COMMANDS: dict[str, frozenset[str] | None] = {
    "ls": frozenset({"all", "almost-all", "l", "1", "human-readable", "directory", "classify", "reverse", "t", "S",
                     "size", "inode", "numeric-uid-gid", "g", "o", "p", "escape", "literal", "quote-name"}),
    "pwd": frozenset(),
    "cat": frozenset({"number", "number-nonblank", "show-ends", "show-tabs", "show-all", "squeeze-blank",
                      "show-nonprinting"}),
    "head": frozenset({"lines"}),
    "wc": frozenset({"lines", "bytes", "words", "chars"}),
    "echo": None,
    "true": None,
    "date": frozenset({"utc"}),
    "whoami": frozenset(),
    "git status": frozenset({"short", "branch", "porcelain", "long", "verbose", "null"}),
}
"""Without an OS sandbox, the only commands auto-allowed, each with the options it may have (canonical
names; None: any argument, since the command reads nothing). Their file arguments must be plain files or
directories of the workspace (no symbolic links)."""

_STRICT_PLAIN_FILES = {"cat", "head", "wc"}


# --------------------------------------------------------------------------------------------------
# The classifier
# --------------------------------------------------------------------------------------------------
def read_only_problem(command: str, workspace: Workspace, read_denied: DeniedCheck | None = None, *,
                      sandboxed: bool = True) -> str | None:
    """None when `command` only reads (see the module docstring), else why it is not auto-allowed.

    `read_denied` is the session's deny rules on reading (`_binding.read_denied_check`); `sandboxed=False`
    (no OS sandbox around the command) narrows auto-allow to `STRICT_READ_ONLY_COMMANDS`.
    """
    parsed = parse(command)
    if parsed.error is not None:
        return f"it cannot be read as a command ({parsed.error})"
    if not parsed.is_simple:
        return f"it is not one plain command ({', '.join(parsed.problems) or 'several commands'})"
    words = parsed.words
    head = words[0]
    if head.quoted or head.value != head.raw or "/" in head.value:
        return "the program name is quoted or a path"
    name = head.value
    args = [w.value for w in words[1:]]
    if name == "git":
        return _git_problem(args, workspace, read_denied, sandboxed)
    spec = READ_ONLY_COMMANDS.get(name)
    if spec is None:
        return f"{name!r} is not on the read-only list"
    if not sandboxed and name not in STRICT_READ_ONLY_COMMANDS:
        return f"without a sandbox, {name!r} is not among the few commands run without asking"
    if spec.only_args is not None:
        return None if tuple(args) in spec.only_args else \
            f"only {' or '.join(' '.join(a) for a in spec.only_args)} is read-only for {name}"
    if name == "find":
        return _find_problem(args, workspace, read_denied)
    if spec.options is None:
        return None  # echo, true: every argument is text
    p = _getopt(spec.options, args)
    if isinstance(p, str):
        return f"{name}: {p}"
    problem = _spec_problem(name, spec, p, workspace, read_denied)
    if problem is None and not sandboxed:
        problem = _strict_problem(name, p, workspace)
    if problem is None:
        problem = _secret_problem(name, spec, p, workspace)
    return problem


def _secret_problem(name: str, spec: _Spec, p: _Parsed, workspace: Workspace) -> str | None:
    """A command that could take a credential apart (`_secretreads`) over a file holding one."""
    slicing = SLICING.get(name, ())
    if name in WHOLE_READERS or (name in ("head", "tail") and not p.has(*slicing)):
        return None
    paths = [] if spec.positional == "text" else list(p.positional)
    if spec.positional == "pattern" and not p.has("regexp", "file"):
        paths = paths[1:]
    paths += [v for _o, v, kind in p.options if kind == "@" and v is not None]
    recursive = p.has(*spec.recurses) or (name == "grep" and any(v.startswith("r") for v in p.values("directories")))
    if not paths and recursive:
        paths = ["."]
    found = holder_of_secret(paths, str(workspace.root), recursive=recursive)
    if found:
        return (f"{name} would read {found!r}, which holds a credential, in a form redaction cannot follow "
                "(pieces of it, or answers to questions about it)")
    return None


def _spec_problem(name: str, spec: _Spec, p: _Parsed, workspace: Workspace,
                  read_denied: DeniedCheck | None) -> str | None:
    for opt, _value, _kind in p.options:
        if opt in spec.bad:
            return f"{name} --{opt} {spec.bad[opt]}" if len(opt) > 1 else f"{name} -{opt} {spec.bad[opt]}"
    if spec.max_positional is not None and len(p.positional) > spec.max_positional:
        return f"{name} with more than {spec.max_positional} file argument(s) writes a file"
    if spec.check is not None:
        problem = spec.check(p)
        if problem:
            return problem
    recursing = p.has(*spec.recurses) or (name == "grep" and any(
        v.startswith("r") for v in p.values("directories")))
    if read_denied is not None and recursing:
        return f"{name} here reads whole directories, and deny rules protect some files"
    following = p.has(*spec.follows) or (spec.always_follows_when_recursing and recursing
                                         and not p.has("no-dereference"))
    if following and _has_outward_link(workspace):
        return f"{name} here follows symbolic links, and one in the workspace leads out of it"
    for _opt, value, kind in p.options:
        if kind == "@" and value is not None:
            problem = _path_problem(value, workspace, read_denied)
            if problem:
                return problem
    paths = p.positional
    if spec.positional == "text":
        paths = []
    elif spec.positional == "pattern" and not p.has("regexp", "file"):
        paths = paths[1:]
    for value in paths:
        problem = _path_problem(value, workspace, read_denied)
        if problem:
            return problem
    return None


def _strict_problem(name: str, p: _Parsed, workspace: Workspace) -> str | None:
    allowed = STRICT_READ_ONLY_COMMANDS.get(name)
    if allowed is None:
        return None
    for opt, _value, _kind in p.options:
        if opt not in allowed:
            return f"without a sandbox, {name} runs without asking only with the options {sorted(allowed)}"
    for value in p.positional:
        if name == "date":
            continue
        try:
            st = os.lstat(os.path.join(str(workspace.root), value))
        except OSError:
            return f"without a sandbox, {value!r} must be an existing file of the workspace"
        kinds = (stat_module.S_ISREG,) if name in _STRICT_PLAIN_FILES else (stat_module.S_ISREG, stat_module.S_ISDIR)
        if not any(k(st.st_mode) for k in kinds):
            return f"without a sandbox, {value!r} must be a plain file (not a link, device or pipe)"
    return None


# --------------------------------------------------------------------------------------------------
# find: its own expression language
# --------------------------------------------------------------------------------------------------
_FIND_TESTS_WITH_VALUE = {
    "-name", "-iname", "-path", "-ipath", "-wholename", "-iwholename", "-regex", "-iregex", "-type", "-xtype",
    "-size", "-mtime", "-mmin", "-atime", "-amin", "-ctime", "-cmin", "-perm", "-user", "-group", "-uid", "-gid",
    "-links", "-inum", "-maxdepth", "-mindepth", "-printf", "-regextype", "-lname", "-ilname", "-used",
}
_FIND_PATH_VALUE = {"-newer", "-anewer", "-cnewer", "-samefile"}
_FIND_FLAGS = {
    "-empty", "-nouser", "-nogroup", "-readable", "-writable", "-executable", "-depth", "-prune", "-print",
    "-print0", "-ls", "-true", "-false", "-not", "-a", "-and", "-o", "-or", "-mount", "-xdev", "-noleaf",
    "-daystart", "-quit", "-ignore_readdir_race", "-noignore_readdir_race", "(", ")", "!", ",", "-help",
    "--help", "-version", "--version",
}
_FIND_BAD = {
    "-exec": "runs a program", "-execdir": "runs a program", "-ok": "runs a program", "-okdir": "runs a program",
    "-delete": "deletes files", "-fprint": "writes a file", "-fprint0": "writes a file", "-fprintf": "writes a file",
    "-fls": "writes a file", "-follow": "follows symbolic links", "-files0-from": "reads the paths a list names",
}


def _find_problem(args: list[str], workspace: Workspace, read_denied: DeniedCheck | None) -> str | None:
    k = 0
    following = False
    while k < len(args) and args[k] in ("-H", "-L", "-P") or (k < len(args) and args[k].startswith(("-D", "-O"))):
        if args[k] == "-L":
            following = True
        elif args[k].startswith(("-D", "-O")):
            return f"find {args[k]} is not an option it knows here"
        k += 1
    starts: list[str] = []
    while k < len(args) and not args[k].startswith("-") and args[k] not in ("(", ")", "!", ","):
        starts.append(args[k])
        k += 1
    while k < len(args):
        a = args[k]
        k += 1
        if a in _FIND_BAD:
            return f"find {a} {_FIND_BAD[a]}"
        if a in _FIND_FLAGS:
            continue
        is_newer_xy = a.startswith("-newer") and len(a) == 8
        if a in _FIND_TESTS_WITH_VALUE or a in _FIND_PATH_VALUE or is_newer_xy:
            if k >= len(args):
                return f"find {a} needs a value"
            value = args[k]
            k += 1
            if a in _FIND_PATH_VALUE or (is_newer_xy and a[-1] != "t"):
                problem = _path_problem(value, workspace, read_denied)
                if problem:
                    return problem
            continue
        return f"find {a} is not a test or action it knows"
    if following and _has_outward_link(workspace):
        return "find -L follows symbolic links, and one in the workspace leads out of it"
    for value in starts:
        problem = _path_problem(value, workspace, read_denied)
        if problem:
            return problem
    return None


# --------------------------------------------------------------------------------------------------
# git
# --------------------------------------------------------------------------------------------------
_LOG_LONG = (
    "oneline graph decorate? no-decorate all branches? tags? remotes? stat? shortstat numstat name-only "
    "name-status summary max-count= skip= since= after= until= before= author= committer= grep= all-match "
    "invert-grep regexp-ignore-case extended-regexp fixed-strings perl-regexp format= pretty? abbrev-commit "
    "no-abbrev-commit abbrev? date= reverse first-parent merges no-merges follow patch no-patch unified= "
    "full-history simplify-by-decoration topo-order date-order author-date-order relative-date color? no-color "
    "no-ext-diff no-textconv left-right cherry-pick cherry-mark boundary diff-filter= pickaxe-regex pickaxe-all "
    "word-diff? ignore-all-space ignore-space-change find-renames? find-copies? no-renames raw patch-with-stat "
    "patch-with-raw full-diff log-size parents children source use-mailmap no-mailmap no-notes encoding= "
    "expand-tabs? no-expand-tabs ancestry-path min-parents= max-parents= no-min-parents no-max-parents "
    "walk-reflogs show-pulls dense sparse remove-empty no-walk? do-walk minimal histogram patience "
    "diff-algorithm= text cc dirstat? name-rev?"
)
_LOG_ALIASES = {"p": "patch", "u": "patch", "s": "no-patch", "n": "max-count", "U": "unified",
                "i": "regexp-ignore-case", "E": "extended-regexp", "F": "fixed-strings", "M": "find-renames", "C": "find-copies",
                "w": "ignore-all-space", "b": "ignore-space-change", "a": "text", "g": "walk-reflogs"}
_LOG = _Options("pusn:U?M?C?iEFL:S:G:wbzcmtRWag0123456789", _LOG_LONG, _LOG_ALIASES, gnu=False)
_DIFF = _Options(
    "pusU?M?C?RwbzaW",
    "cached staged patch no-patch unified= stat? shortstat numstat name-only name-status summary raw dirstat? "
    "diff-filter= ignore-all-space ignore-space-change ignore-space-at-eol ignore-blank-lines ignore-cr-at-eol "
    "word-diff? word-diff-regex= color? no-color color-words? minimal patience histogram diff-algorithm= "
    "find-renames? find-copies? no-renames text exit-code quiet check relative? no-relative src-prefix= "
    "dst-prefix= no-prefix full-index binary abbrev? function-context no-ext-diff no-textconv merge-base no-index",
    {"p": "patch", "u": "patch", "s": "no-patch", "U": "unified", "M": "find-renames", "C": "find-copies",
     "w": "ignore-all-space", "b": "ignore-space-change", "a": "text", "W": "function-context"}, gnu=False)
_GIT_BAD = {"output": "writes a file", "ext-diff": "runs an external diff program",
            "textconv": "runs text conversion programs", "show-signature": "runs gpg",
            "open-files-in-pager": "runs a pager", "recurse-submodules": "runs git in submodules",
            "contents": "reads another file"}


@dataclass(frozen=True, slots=True)
class _Git:
    options: _Options
    content: Callable[[_Parsed], bool] = lambda p: False
    """Whether this call compares or shows file contents (diff/textconv programs may run; deny rules care)."""
    worktree: bool = False
    """Whether it reads files of the work tree through git (filter programs may run)."""
    check: Callable[[_Parsed], str | None] | None = None


def _log_content(p: _Parsed) -> bool:
    return p.has("patch", "unified", "L", "c", "cc", "m", "t", "full-diff", "word-diff", "stat", "shortstat",
                 "numstat", "dirstat", "patch-with-stat", "patch-with-raw", "S", "G", "W")


def _branch_check(p: _Parsed) -> str | None:
    if p.positional and not p.has("list"):
        return "git branch NAME creates a branch"
    return None


def _tag_check(p: _Parsed) -> str | None:
    if p.positional and not p.has("list"):
        return "git tag NAME creates a tag"
    return None


def _remote_check(p: _Parsed) -> str | None:
    return "only git remote and git remote -v are read-only" if p.positional else None


def _stash_check(p: _Parsed) -> str | None:
    return None if p.positional == ["list"] and not p.options else "only git stash list is read-only"


def _reflog_check(p: _Parsed) -> str | None:
    if p.positional and p.positional[0] in ("expire", "delete", "exists", "drop"):
        return f"git reflog {p.positional[0]} changes the reflog"
    return None


_GIT: dict[str, _Git] = {
    "status": _Git(_Options("sbvu?z", "short branch show-stash porcelain? long verbose untracked-files? ignored? "
                                      "ignore-submodules? column? no-column ahead-behind no-ahead-behind renames "
                                      "no-renames find-renames? null",
                            {"s": "short", "b": "branch", "v": "verbose", "u": "untracked-files", "z": "null"},
                            gnu=False), worktree=True),
    "log": _Git(_LOG, content=_log_content),
    "show": _Git(_LOG, content=lambda p: not p.has("no-patch") or _log_content(p)),
    "reflog": _Git(_LOG, content=_log_content, check=_reflog_check),
    "diff": _Git(_DIFF, content=lambda p: True, worktree=True),
    "blame": _Git(_Options("bcelfnpstwL:M?C?", "root show-stats show-name show-number porcelain line-porcelain "
                                               "incremental abbrev? show-email date= no-textconv reverse= first-parent "
                                               "minimal encoding= ignore-rev= ignore-revs-file=@ color-lines "
                                               "color-by-age no-progress",
                                  {"f": "show-name", "n": "show-number", "p": "porcelain", "e": "show-email"},
                                  gnu=False), content=lambda p: True, worktree=True),
    "branch": _Git(_Options("arvli", "all remotes verbose list contains= no-contains= merged= no-merged= points-at= "
                                    "sort= format= show-current color? no-color column? no-column ignore-case "
                                    "abbrev= no-abbrev omit-empty",
                            {"a": "all", "r": "remotes", "v": "verbose", "l": "list", "i": "ignore-case"},
                            gnu=False), check=_branch_check),
    "tag": _Git(_Options("ln?i", "list sort= contains= no-contains= merged= no-merged= points-at= format= column? "
                                 "no-column ignore-case color? omit-empty",
                         {"l": "list", "i": "ignore-case"}, gnu=False), check=_tag_check),
    "remote": _Git(_Options("v", "verbose", {"v": "verbose"}, gnu=False), check=_remote_check),
    "stash": _Git(_Options("", gnu=False), check=_stash_check),
    "rev-parse": _Git(_Options("q", "verify quiet short? abbrev-ref? symbolic symbolic-full-name show-toplevel "
                                    "show-prefix show-cdup git-dir git-common-dir absolute-git-dir is-inside-git-dir "
                                    "is-inside-work-tree is-bare-repository is-shallow-repository all branches? "
                                    "tags? remotes? not revs-only no-revs flags no-flags default= "
                                    "show-object-format?", {"q": "quiet"}, gnu=False, abbreviations=False)),
    "ls-files": _Git(_Options("cdmoiskutvfzx:X@", "cached deleted modified others ignored stage killed unmerged "
                                                 "directory no-empty-directory exclude-standard exclude= "
                                                 "exclude-from=@ full-name error-unmatch abbrev? debug eol deduplicate "
                                                 "format= zero",
                                      {"c": "cached", "d": "deleted", "m": "modified", "o": "others", "i": "ignored",
                                       "s": "stage", "k": "killed", "u": "unmerged", "x": "exclude",
                                       "X": "exclude-from"}, gnu=False), worktree=True),
    "ls-tree": _Git(_Options("drtlz", "long name-only name-status object-only full-name full-tree abbrev? format=",
                             {"l": "long"}, gnu=False)),
    "describe": _Git(_Options("", "all tags contains abbrev= candidates= exact-match debug long match= exclude= always "
                                  "first-parent", gnu=False)),
    "show-ref": _Git(_Options("dsq", "head tags heads branches verify hash? dereference abbrev? quiet",
                              {"d": "dereference", "s": "hash", "q": "quiet"}, gnu=False)),
    "merge-base": _Git(_Options("a", "all octopus independent is-ancestor fork-point", {"a": "all"}, gnu=False)),
    "count-objects": _Git(_Options("vH", "verbose human-readable", {"v": "verbose", "H": "human-readable"}, gnu=False)),
    "version": _Git(_Options("", "build-options", gnu=False)),
}
_GIT_GLOBAL_OK = frozenset({"--no-pager", "-P", "--no-optional-locks", "--literal-pathspecs", "--no-replace-objects"})
_GIT_ENV = ("GIT_DIR", "GIT_WORK_TREE", "GIT_COMMON_DIR", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY",
            "GIT_ALTERNATE_OBJECT_DIRECTORIES", "GIT_NAMESPACE", "GIT_EXTERNAL_DIFF", "GIT_CONFIG_PARAMETERS")
_BARE_LAYOUT = ("HEAD", "objects", "refs", "config", "commondir", "packed-refs")


def _git_problem(args: list[str], workspace: Workspace, read_denied: DeniedCheck | None,
                 sandboxed: bool) -> str | None:
    k = 0
    while k < len(args) and args[k].startswith("-"):
        if args[k] not in _GIT_GLOBAL_OK:
            return f"git {args[k].split('=')[0]} changes how git runs"
        k += 1
    if k >= len(args):
        return "git without a subcommand"
    sub, rest = args[k], args[k + 1 :]
    git = _GIT.get(sub)
    if git is None:
        return f"git {sub} is not on the read-only list (an alias or a command that changes things)"
    if not sandboxed and sub not in ("status",):
        return "without a sandbox, git status is the only git command run without asking"
    problem = git_layout_problem(workspace)
    if problem:
        return problem
    p = _getopt(git.options, rest)
    if isinstance(p, str):
        name = p.split()[0].lstrip("-")
        if name in _GIT_BAD:
            return f"git {sub} --{name} {_GIT_BAD[name]}"
        return f"git {sub}: {p}"
    for opt, value, _kind in p.options:
        if opt in _GIT_BAD:
            return f"git {sub} --{opt} {_GIT_BAD[opt]}"
        if opt in ("format", "pretty") and value and "%G" in value:
            return f"git {sub} --{opt} with %G... verifies signatures: it runs gpg (gpg.program may be configured)"
    if git.check is not None:
        problem = git.check(p)
        if problem:
            return problem
    if not sandboxed:
        problem = _strict_problem("git status", p, workspace)
        if problem:
            return problem
    content = git.content(p)
    if p.has("S", "G") and secret_values():
        return f"git {sub} -S/-G searches history for text: an oracle on credentials it may hold"
    if read_denied is not None and content:
        return f"git {sub} shows file contents across the repository, and deny rules protect some files"
    if content or git.worktree:
        programs = configured_programs(workspace.root)
        if programs is None:
            return "git's configuration could not be read, so it may name programs to run"
        filters = sorted(key for key in programs if key.startswith("filter."))
        differs = sorted(key for key in programs if not key.startswith("filter."))
        if filters and git.worktree:
            return f"git {sub} may run the filter programs configured ({', '.join(filters)})"
        if differs and content and not (p.has("no-ext-diff") and p.has("no-textconv")):
            return (f"git {sub} may run the diff programs configured ({', '.join(differs)}); "
                    "with --no-ext-diff --no-textconv it would not")
    for _opt, value, kind in p.options:
        if kind == "@" and value is not None:
            problem = _path_problem(value, workspace, read_denied)
            if problem:
                return problem
    for value in p.positional + [v for _o, v, _k in p.options if v is not None and _o == "L"]:
        for part in _path_parts(value):
            problem = _path_problem(part, workspace, read_denied)
            if problem:
                return problem
    return None


def git_layout_problem(workspace: Workspace) -> str | None:
    """Why git in this workspace might use a repository (and so a configuration) other than its plain
    `.git/` directory, or None."""
    for key in _GIT_ENV:
        if os.environ.get(key):
            return f"{key} is set in the environment, so git may use another repository or program"
    root = str(workspace.root)
    dot_git = os.path.join(root, ".git")
    try:
        st = os.lstat(dot_git)
    except FileNotFoundError:
        st = None
    except OSError:
        return "the workspace's .git cannot be examined"
    if st is not None:
        if not stat_module.S_ISDIR(st.st_mode):
            return ".git is not a plain directory (a file or link pointing elsewhere), so git may read another repository"
        if os.path.lexists(os.path.join(dot_git, "commondir")):
            return ".git points to another repository's directory (commondir)"
    elif _git_top(root) is not None:
        return "the workspace is inside a larger git repository, so git would read outside it"
    present = [n for n in _BARE_LAYOUT if os.path.lexists(os.path.join(root, n))]
    if "HEAD" in present and len(present) > 1:
        return "the workspace holds a bare repository layout (HEAD, objects/, refs/, config at its top)"
    return None


def _git_top(start: str) -> str | None:
    """The top of the git repository containing `start` (None when there is none)."""
    path = os.path.realpath(start)
    while True:
        if os.path.lexists(os.path.join(path, ".git")):
            return path
        parent = os.path.dirname(path)
        if parent == path:
            return None
        path = parent


def _path_parts(value: str) -> list[str]:
    """A git argument as the paths it may name: `HEAD:.env` and `1,5:notes.txt` name `.env` and `notes.txt`."""
    parts = [value]
    if ":" in value:
        parts.append(value.split(":", 1)[1])
    return parts


# --------------------------------------------------------------------------------------------------
# Paths and links
# --------------------------------------------------------------------------------------------------
def _path_problem(value: str, workspace: Workspace, read_denied: DeniedCheck | None) -> str | None:
    if not value or value == "-":
        return None
    if value.startswith("~"):
        return f"{value!r} is in a home directory, outside the workspace"
    root = str(workspace.root)
    joined = value if os.path.isabs(value) else os.path.join(root, value)
    real = os.path.realpath(joined)
    rel = workspace.relative(real)
    if rel is None:
        return f"{value!r} is outside the workspace"
    lexical_rel = workspace.relative(os.path.normpath(joined))
    if read_denied is not None and (read_denied(rel, real) or (lexical_rel is not None and read_denied(lexical_rel, real))):
        return f"{value!r} is protected by a deny rule"
    return None


def _has_outward_link(workspace: Workspace, limit: int = MAX_LINK_SCAN) -> bool:
    """Whether some symbolic link in the workspace leads out of it (True too when there are too many
    entries to look at them all)."""
    seen = 0
    stack = [str(workspace.root)]
    while stack:
        directory = stack.pop()
        try:
            with os.scandir(directory) as it:
                for entry in it:
                    seen += 1
                    if seen > limit:
                        return True
                    try:
                        if entry.is_symlink():
                            if workspace.relative(os.path.realpath(entry.path)) is None:
                                return True
                        elif entry.is_dir(follow_symlinks=False):
                            stack.append(entry.path)
                    except OSError:
                        return True
        except OSError:
            continue
    return False
