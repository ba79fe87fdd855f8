"""Which `git` commands only read, and whether this workspace's repository lets them.

git is its own case: a subcommand the table (`_GIT`) knows (an alias never is), with its options, and a
repository that is the workspace's own. Reads: the workspace's `.git` and its configuration, which a
cloned repository, the model or a download could have written, and the environment (`GIT_DIR` and the
like). What could happen: git reading another repository (a `.git` file pointing elsewhere, `commondir`, a
bare layout at the top, a larger repository around the workspace), or running programs its configuration
names (diff and textconv drivers, filters, gpg for `%G` formats). What stops it: `git_layout_problem`
requires a plain `.git/` directory at the top of the workspace and none of `_GIT_ENV` set; commands that
compare or show file contents are refused while a diff or filter program is configured
(`_gitsafety.configured_programs`) unless `--no-ext-diff --no-textconv` are given; and the shell tool runs
every git with `_gitsafety.git_safety_env()`, which forces hooks, fsmonitor, pagers and the like off.
"""

from __future__ import annotations

import os
import stat as stat_module
from dataclasses import dataclass
from typing import Callable

from ..safety.secrets import secret_values
from ._getopt import Options, ParsedOptions, getopt
from ._gitsafety import configured_programs
from ._readpaths import DeniedCheck, path_problem
from ._readprograms import strict_problem
from ._workspace import Workspace

__all__ = ["git_layout_problem", "git_problem"]

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
_LOG = Options("pusn:U?M?C?iEFL:S:G:wbzcmtRWag0123456789", _LOG_LONG, _LOG_ALIASES, gnu=False)
_DIFF = Options(
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
    options: Options
    content: Callable[[ParsedOptions], bool] = lambda p: False
    """Whether this call compares or shows file contents (diff/textconv programs may run; deny rules care)."""
    worktree: bool = False
    """Whether it reads files of the work tree through git (filter programs may run)."""
    check: Callable[[ParsedOptions], str | None] | None = None


def _log_content(p: ParsedOptions) -> bool:
    return p.has("patch", "unified", "L", "c", "cc", "m", "t", "full-diff", "word-diff", "stat", "shortstat",
                 "numstat", "dirstat", "patch-with-stat", "patch-with-raw", "S", "G", "W")


def _branch_check(p: ParsedOptions) -> str | None:
    if p.positional and not p.has("list"):
        return "git branch NAME creates a branch"
    return None


def _tag_check(p: ParsedOptions) -> str | None:
    if p.positional and not p.has("list"):
        return "git tag NAME creates a tag"
    return None


def _remote_check(p: ParsedOptions) -> str | None:
    return "only git remote and git remote -v are read-only" if p.positional else None


def _stash_check(p: ParsedOptions) -> str | None:
    return None if p.positional == ["list"] and not p.options else "only git stash list is read-only"


def _reflog_check(p: ParsedOptions) -> str | None:
    if p.positional and p.positional[0] in ("expire", "delete", "exists", "drop"):
        return f"git reflog {p.positional[0]} changes the reflog"
    return None


_GIT: dict[str, _Git] = {
    "status": _Git(Options("sbvu?z", "short branch show-stash porcelain? long verbose untracked-files? ignored? "
                                      "ignore-submodules? column? no-column ahead-behind no-ahead-behind renames "
                                      "no-renames find-renames? null",
                            {"s": "short", "b": "branch", "v": "verbose", "u": "untracked-files", "z": "null"},
                            gnu=False), worktree=True),
    "log": _Git(_LOG, content=_log_content),
    "show": _Git(_LOG, content=lambda p: not p.has("no-patch") or _log_content(p)),
    "reflog": _Git(_LOG, content=_log_content, check=_reflog_check),
    "diff": _Git(_DIFF, content=lambda p: True, worktree=True),
    "blame": _Git(Options("bcelfnpstwL:M?C?", "root show-stats show-name show-number porcelain line-porcelain "
                                               "incremental abbrev? show-email date= no-textconv reverse= first-parent "
                                               "minimal encoding= ignore-rev= ignore-revs-file=@ color-lines "
                                               "color-by-age no-progress",
                                  {"f": "show-name", "n": "show-number", "p": "porcelain", "e": "show-email"},
                                  gnu=False), content=lambda p: True, worktree=True),
    "branch": _Git(Options("arvli", "all remotes verbose list contains= no-contains= merged= no-merged= points-at= "
                                    "sort= format= show-current color? no-color column? no-column ignore-case "
                                    "abbrev= no-abbrev omit-empty",
                            {"a": "all", "r": "remotes", "v": "verbose", "l": "list", "i": "ignore-case"},
                            gnu=False), check=_branch_check),
    "tag": _Git(Options("ln?i", "list sort= contains= no-contains= merged= no-merged= points-at= format= column? "
                                 "no-column ignore-case color? omit-empty",
                         {"l": "list", "i": "ignore-case"}, gnu=False), check=_tag_check),
    "remote": _Git(Options("v", "verbose", {"v": "verbose"}, gnu=False), check=_remote_check),
    "stash": _Git(Options("", gnu=False), check=_stash_check),
    "rev-parse": _Git(Options("q", "verify quiet short? abbrev-ref? symbolic symbolic-full-name show-toplevel "
                                    "show-prefix show-cdup git-dir git-common-dir absolute-git-dir is-inside-git-dir "
                                    "is-inside-work-tree is-bare-repository is-shallow-repository all branches? "
                                    "tags? remotes? not revs-only no-revs flags no-flags default= "
                                    "show-object-format?", {"q": "quiet"}, gnu=False, abbreviations=False)),
    "ls-files": _Git(Options("cdmoiskutvfzx:X@", "cached deleted modified others ignored stage killed unmerged "
                                                 "directory no-empty-directory exclude-standard exclude= "
                                                 "exclude-from=@ full-name error-unmatch abbrev? debug eol deduplicate "
                                                 "format= zero",
                                      {"c": "cached", "d": "deleted", "m": "modified", "o": "others", "i": "ignored",
                                       "s": "stage", "k": "killed", "u": "unmerged", "x": "exclude",
                                       "X": "exclude-from"}, gnu=False), worktree=True),
    "ls-tree": _Git(Options("drtlz", "long name-only name-status object-only full-name full-tree abbrev? format=",
                             {"l": "long"}, gnu=False)),
    "describe": _Git(Options("", "all tags contains abbrev= candidates= exact-match debug long match= exclude= always "
                                  "first-parent", gnu=False)),
    "show-ref": _Git(Options("dsq", "head tags heads branches verify hash? dereference abbrev? quiet",
                              {"d": "dereference", "s": "hash", "q": "quiet"}, gnu=False)),
    "merge-base": _Git(Options("a", "all octopus independent is-ancestor fork-point", {"a": "all"}, gnu=False)),
    "count-objects": _Git(Options("vH", "verbose human-readable", {"v": "verbose", "H": "human-readable"}, gnu=False)),
    "version": _Git(Options("", "build-options", gnu=False)),
}
_GIT_GLOBAL_OK = frozenset({"--no-pager", "-P", "--no-optional-locks", "--literal-pathspecs", "--no-replace-objects"})
_GIT_ENV = ("GIT_DIR", "GIT_WORK_TREE", "GIT_COMMON_DIR", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY",
            "GIT_ALTERNATE_OBJECT_DIRECTORIES", "GIT_NAMESPACE", "GIT_EXTERNAL_DIFF", "GIT_CONFIG_PARAMETERS")
_BARE_LAYOUT = ("HEAD", "objects", "refs", "config", "commondir", "packed-refs")


def git_problem(args: list[str], workspace: Workspace, read_denied: DeniedCheck | None,
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
    p = getopt(git.options, rest)
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
        problem = strict_problem("git status", p, workspace)
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
            problem = path_problem(value, workspace, read_denied)
            if problem:
                return problem
    for value in p.positional + [v for _o, v, _k in p.options if v is not None and _o == "L"]:
        for part in _path_parts(value):
            problem = path_problem(part, workspace, read_denied)
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

