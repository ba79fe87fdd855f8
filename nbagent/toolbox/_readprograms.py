"""The programs a read-only command may run, as data: one entry per program, its options and what each does.

`READ_ONLY_COMMANDS` is the table the classifier (`_readonly.read_only_problem`) reads: each program's
option table (`_getopt.Options`), the options that make it more than a reader (`bad`), which arguments are
paths, and which options recurse or follow links. `git` has a table of its own (`_gitreads`), and `find`
an expression language (`_readonly`). Without an OS sandbox only `STRICT_READ_ONLY_COMMANDS` are
auto-allowed, with the few options listed there, on plain files of the workspace (`strict_problem`).
"""

from __future__ import annotations

import os
import stat as stat_module
from dataclasses import dataclass, field
from typing import Callable, Mapping

from ._getopt import Options, ParsedOptions
from ._workspace import Workspace

__all__ = ["READ_ONLY_COMMANDS", "STRICT_READ_ONLY_COMMANDS", "Spec", "strict_problem"]


@dataclass(frozen=True, slots=True)
class Spec:
    """How one program is checked."""

    options: Options | None
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
    check: Callable[[ParsedOptions], str | None] | None = None
    """Anything else the program needs checked."""
    only_args: tuple[tuple[str, ...], ...] | None = None
    """When set: the exact argument lists allowed (`python --version`)."""


def _date_check(p: ParsedOptions) -> str | None:
    if any(not a.startswith("+") for a in p.positional):
        return "date with an argument other than +FORMAT sets the clock"
    return None


_SUM = Spec(Options("bctwz", "binary check tag text ignore-missing quiet status strict warn zero",
                      {"b": "binary", "c": "check", "t": "text", "w": "warn", "z": "zero"}),
             bad={"check": "reads the files a checksum list names, wherever they are"})

READ_ONLY_COMMANDS: dict[str, Spec] = {
    "ls": Spec(
        Options("aAbBcCdDfFgGhHiI:klLmnNopqQrRsStT:uUvw:xXZ1",
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
    "pwd": Spec(Options("LP", gnu=False)),
    "cat": Spec(Options("AbeEnstTuv", "show-all number-nonblank show-ends number squeeze-blank show-tabs "
                                        "show-nonprinting",
                          {"A": "show-all", "b": "number-nonblank", "E": "show-ends", "n": "number",
                           "s": "squeeze-blank", "T": "show-tabs", "v": "show-nonprinting"})),
    "head": Spec(Options("c:n:qvz0123456789", "bytes= lines= quiet silent verbose zero-terminated",
                           {"c": "bytes", "n": "lines", "q": "quiet", "v": "verbose", "z": "zero-terminated"})),
    "tail": Spec(Options("c:fFn:qs:vz0123456789",
                           "bytes= follow? lines= pid= quiet silent retry sleep-interval= verbose zero-terminated "
                           "max-unchanged-stats= debug",
                           {"c": "bytes", "f": "follow", "n": "lines", "q": "quiet", "s": "sleep-interval",
                            "v": "verbose", "z": "zero-terminated"}),
                  bad={"follow": "waits for the file to grow, forever", "F": "waits for the file to grow, forever",
                       "retry": "waits for the file to appear"}),
    "wc": Spec(Options("clLmw", "bytes chars lines max-line-length words files0-from=@ total= debug",
                         {"c": "bytes", "m": "chars", "l": "lines", "L": "max-line-length", "w": "words"}),
                bad={"files0-from": "reads the files a list names, wherever they are"}),
    "nl": Spec(Options("b:d:f:h:i:l:n:ps:v:w:",
                         "body-numbering= section-delimiter= footer-numbering= header-numbering= line-increment= "
                         "join-blank-lines= number-format= no-renumber number-separator= starting-line-number= "
                         "number-width=",
                         {"b": "body-numbering", "d": "section-delimiter", "f": "footer-numbering",
                          "h": "header-numbering", "i": "line-increment", "l": "join-blank-lines",
                          "n": "number-format", "p": "no-renumber", "s": "number-separator",
                          "v": "starting-line-number", "w": "number-width"})),
    "file": Spec(Options("bcCdEe:F:f@hiklLm@nNpP:rsSvzZ0",
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
    "stat": Spec(Options("c:Lft", "dereference file-system format= printf= terse cached=",
                           {"L": "dereference", "f": "file-system", "c": "format", "t": "terse"})),
    "du": Spec(Options("0abB:cd:DhHklLmPsSt:xX@",
                         "null all apparent-size block-size= bytes total max-depth= dereference-args files0-from=@ "
                         "human-readable inodes dereference count-links no-dereference separate-dirs si summarize "
                         "threshold= time? time-style= exclude-from=@ exclude= one-file-system",
                         {"0": "null", "a": "all", "B": "block-size", "b": "bytes", "c": "total", "d": "max-depth",
                          "D": "dereference-args", "H": "dereference-args", "h": "human-readable",
                          "L": "dereference", "l": "count-links", "P": "no-dereference", "S": "separate-dirs",
                          "s": "summarize", "t": "threshold", "X": "exclude-from", "x": "one-file-system"}),
                bad={"files0-from": "reads the files a list names, wherever they are"},
                follows=frozenset({"dereference"})),
    "df": Spec(Options("aB:hHiklPt:Tvx:", "all block-size= human-readable si inodes local no-sync output? "
                                            "portability sync total type= print-type exclude-type=",
                         {"a": "all", "B": "block-size", "h": "human-readable", "H": "si", "i": "inodes",
                          "l": "local", "P": "portability", "t": "type", "T": "print-type", "x": "exclude-type"})),
    "echo": Spec(None, positional="text"),
    "basename": Spec(Options("as:z", "multiple suffix= zero", {"a": "multiple", "s": "suffix", "z": "zero"}),
                      positional="text"),
    "dirname": Spec(Options("z", "zero", {"z": "zero"}), positional="text"),
    "realpath": Spec(Options("eLmPqsz", "canonicalize-existing canonicalize-missing logical physical quiet "
                                          "relative-to=@ relative-base=@ no-symlinks strip zero",
                               {"e": "canonicalize-existing", "m": "canonicalize-missing", "L": "logical",
                                "P": "physical", "q": "quiet", "s": "strip", "z": "zero"})),
    "readlink": Spec(Options("efmnqsvz", "canonicalize canonicalize-existing canonicalize-missing no-newline "
                                           "quiet silent verbose zero",
                               {"f": "canonicalize", "e": "canonicalize-existing", "m": "canonicalize-missing",
                                "n": "no-newline", "q": "quiet", "s": "silent", "v": "verbose", "z": "zero"})),
    "md5sum": _SUM,
    "sha1sum": _SUM,
    "sha256sum": _SUM,
    "sha512sum": _SUM,
    "cksum": Spec(Options("a:cl:z", "algorithm= base64 check length= raw tag untagged zero debug",
                            {"a": "algorithm", "c": "check", "l": "length", "z": "zero"}),
                   bad={"check": "reads the files a checksum list names, wherever they are"}),
    "true": Spec(None, positional="text"),
    "whoami": Spec(Options()),
    "id": Spec(Options("agGnrzZ", "context group groups name real zero",
                         {"Z": "context", "g": "group", "G": "groups", "n": "name", "r": "real", "z": "zero"}),
                positional="text"),
    "uname": Spec(Options("asnrvmpio", "all kernel-name nodename kernel-release kernel-version machine processor "
                                         "hardware-platform operating-system",
                            {"a": "all", "s": "kernel-name", "n": "nodename", "r": "kernel-release",
                             "v": "kernel-version", "m": "machine", "p": "processor", "i": "hardware-platform",
                             "o": "operating-system"}), positional="text", max_positional=0),
    "date": Spec(Options("d:f@I?r@Rs:u", "date= debug file=@ iso-8601? resolution rfc-email rfc-3339= "
                                          "reference=@ set= utc universal",
                           {"d": "date", "f": "file", "I": "iso-8601", "r": "reference", "R": "rfc-email",
                            "s": "set", "u": "utc"}),
                  bad={"set": "sets the clock"}, positional="text", check=_date_check),
    "which": Spec(Options("as", gnu=False), positional="text"),
    "cut": Spec(Options("b:c:d:f:nsz", "bytes= characters= delimiter= fields= complement only-delimited "
                                         "output-delimiter= zero-terminated",
                          {"b": "bytes", "c": "characters", "d": "delimiter", "f": "fields", "s": "only-delimited",
                           "z": "zero-terminated"})),
    "diff": Spec(
        Options("abBcC:dD:eEfF:hHiI:lL:npNqrsS:tTuU:vwW:x:X@yZ",
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
    "cmp": Spec(Options("bi:ln:sv", "print-bytes ignore-initial= verbose bytes= quiet silent",
                          {"b": "print-bytes", "i": "ignore-initial", "l": "verbose", "n": "bytes", "s": "quiet",
                           "v": "version"})),
    "comm": Spec(Options("123z", "check-order nocheck-order output-delimiter= total zero-terminated",
                           {"z": "zero-terminated"})),
    "grep": Spec(
        Options("EFGPe:f@ivwxyclLoqsbHhnTZzA:B:C:aD:d:IrRUm:V0123456789",
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
    "sort": Spec(
        Options("bcCdfghik:mMno@rRsS:t:T@uVz",
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
    "uniq": Spec(Options("cdDf:is:uw:z", "count repeated all-repeated? skip-fields= ignore-case skip-chars= unique "
                                           "zero-terminated check-chars= group?",
                           {"c": "count", "d": "repeated", "D": "all-repeated", "f": "skip-fields",
                            "i": "ignore-case", "s": "skip-chars", "u": "unique", "z": "zero-terminated",
                            "w": "check-chars"}),
                  max_positional=1),
    "find": Spec(None),  # its own expression language: `_find_problem`
    "python": Spec(None, only_args=(("--version",), ("-V",))),
    "python3": Spec(None, only_args=(("--version",), ("-V",))),
}
"""The programs whose options are known; `git` is handled on its own (`_gitreads`)."""


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


def strict_problem(name: str, p: ParsedOptions, workspace: Workspace) -> str | None:
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

