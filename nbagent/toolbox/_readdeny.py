"""Whether a shell command line may show a file that a deny rule on reading protects.

`deny: read_file(.env)` protects `.env` from every tool, the shell included: before a command runs, the
shell tool asks `reveals_denied(command, workspace, read_denied)`, and refuses the line when the answer
is not None, whatever mode, grant or approval let it through (see the function for what counts).
"""

from __future__ import annotations

import fnmatch
import os
import re

from ._leaves import Where
from ._readpaths import DeniedCheck
from ._shellwords import parse
from ._subcommands import RUNS_OTHER_COMMANDS, subcommands
from ._workspace import Workspace

__all__ = ["reveals_denied"]

_SPLIT = re.compile(r"[=:,]")
_TOKEN = re.compile(r"[\w.\-/+@%]+")
_GIT_KNOWN = {
    "status", "branch", "tag", "remote", "rev-parse", "ls-files", "ls-tree", "describe", "show-ref", "merge-base",
    "count-objects", "version", "add", "commit", "checkout", "switch", "restore", "fetch", "pull", "push",
    "merge", "rebase", "reset", "rm", "mv", "init", "clone", "config", "cherry-pick", "revert", "clean",
    "worktree", "submodule", "apply", "bisect", "gc", "fsck", "prune", "rev-list", "help",
}
"""git subcommands that show no file contents (anything else, aliases included, may)."""
_GIT_HISTORY_READERS = {"log", "show", "diff", "grep", "cat-file", "reflog", "blame", "annotate", "archive",
                        "bundle", "format-patch", "whatchanged", "stash", "difftool", "range-diff", "fast-export"}


_GIT_LOG_LIKE = {"log", "reflog", "whatchanged", "shortlog"}
_GIT_LOG_SAFE = {"--oneline", "--graph", "--decorate", "--no-decorate", "--all", "--branches", "--tags", "--remotes",
                 "--abbrev-commit", "--no-abbrev-commit", "--no-merges", "--merges", "--first-parent", "--reverse",
                 "--name-only", "--name-status", "--stat", "--shortstat", "--numstat", "--summary", "--no-patch", "-s",
                 "--date-order", "--topo-order", "--author-date-order", "--no-color", "--color=never", "--walk-reflogs",
                 "-g", "--left-right", "--boundary", "--simplify-by-decoration", "--source", "--no-renames", "-q",
                 "--quiet", "--show-signature=false", "-e", "--email", "-n", "--numbered", "--summary", "show", "list"}
_GIT_LOG_SAFE_VALUED = ("--format=", "--pretty=", "-n", "--max-count=", "--skip=", "--since=", "--until=", "--after=",
                        "--before=", "--author=", "--committer=", "--grep=", "--date=", "--abbrev=", "--max-parents=",
                        "--min-parents=", "--decorate=", "--stat=", "--stat-width=", "--encoding=")
"""Options of git log and its kin that show commits, names and counts, never a file's contents."""


def _git_shows_no_contents(words: list[str], sub: str) -> bool:
    """`git log --format=%s`, `git reflog`, `git stash list` and the like with only options that show no
    file contents (no -p, -U, --binary, -W...: an unknown option counts as showing them)."""
    if sub == "stash":
        rest = words[words.index("stash") + 1:]
        if not rest or rest[0] != "list":
            return False
        words, sub = ["git", "log", *rest[1:]], "log"
    elif sub not in _GIT_LOG_LIKE:
        return False
    after = words[words.index(sub) + 1:]
    for k, word in enumerate(after):
        if word == "--":
            return True
        if not word.startswith("-"):
            if k and after[k - 1] in ("-n", "--max-count"):
                continue
            continue  # a revision or a pathspec: names, not contents
        if word in _GIT_LOG_SAFE or word.startswith(_GIT_LOG_SAFE_VALUED) or (word[:2] == "-n" and word[2:].isdigit()):
            continue
        if word[1:].isdigit():  # -5
            continue
        return False
    return True


def reveals_denied(command: str, workspace: Workspace, read_denied: DeniedCheck | None, *,
                   hidden_by_sandbox: bool = False) -> str | None:
    """Why `command` may show a file that a deny rule on reading protects, or None when it can be shown
    that it does not name one.

    It may, when: the line cannot be read whole (a substitution, `$VAR`, an unterminated quote: what it
    names is only known when it runs); any word of any command the line may run (behind wrappers,
    `bash -c`, `eval`, substitutions), or a part of it after `=`, `:` or `,` (`if=.env`, `HEAD:.env`),
    names a protected path that exists, however it is quoted or escaped (a redirection's target too: `cat <
    .env`); a glob or brace in it may match one; a program that reads whole trees (`grep -r`, `rg`, `tar`,
    `cp -r`, `diff -r`) is given a directory holding one, or no path at all; `xargs`, `parallel` or
    `find -exec` run commands on names only known when they run; or it is a git command that may show file
    contents from history (`git log -p`, `git show`, `git grep`, an alias...), which can hold the
    protected file under any name. A program that computes a path while it runs (`python script.py`)
    cannot be seen through: that is what the OS sandbox is for.

    `hidden_by_sandbox`: the command runs in a sandbox that hides the protected files (`sandbox.
    hidden_paths`). Then only a line that names one is refused, unless the workspace holds a git
    repository, whose history the sandbox does not hide (anything that may run git is refused as above).
    """
    if read_denied is None:
        return None
    if hidden_by_sandbox and not _holds_git(str(workspace.root)):
        return _names_denied(command, workspace, read_denied)
    parsed = parse(command)
    if parsed.error is not None:
        return f"it cannot be read whole ({parsed.error}), and deny rules protect some files"
    cmds, ok = subcommands(command, where=Where(str(workspace.root), sandboxed=hidden_by_sandbox))
    if not ok:
        return ("part of it is only known when it runs, or it runs a program not known to run no others, and "
                "deny rules protect some files")
    dynamic = [w for words in parsed.commands for w in words if w.dynamic]
    if dynamic:
        return f"{dynamic[0].raw!r} is only known when it runs, and deny rules protect some files"
    root = str(workspace.root)
    cmds = [*cmds, ["<", *(w.value for w in parsed.redirects)]] if parsed.redirects else cmds
    for words in cmds:
        if not words:
            continue
        program = os.path.basename(words[0])
        if program in RUNS_OTHER_COMMANDS and any("$" in w or "`" in w for w in words[1:]):
            return f"{program} runs a script whose words are only known when it runs, and deny rules protect some files"
        if program == "git":
            sub = next((w for w in words[1:] if not w.startswith("-")), "")
            if (sub in _GIT_HISTORY_READERS or sub not in _GIT_KNOWN) and not _git_shows_no_contents(
                    words, sub) and not _git_limited(words, sub, root, workspace, read_denied):
                return (f"git {sub} can show any file of the repository's history, and deny rules protect some "
                        "files (limit it to other paths after --)")
        if program in ("xargs", "parallel") or (program in ("find", "fd") and any(
                w in ("-exec", "-execdir", "-ok", "-okdir", "-x", "-X", "--exec", "--exec-batch") for w in words)):
            return f"{program} runs commands on names only known when it runs, and deny rules protect some files"
        if program in _TREE_READERS:
            dirs = [w for w in words[1:] if not w.startswith("-") and os.path.isdir(os.path.join(root, w))]
            named = [w for w in words[1:] if not w.startswith("-") and os.path.lexists(os.path.join(root, w))]
            if not named or any(_dir_holds_denied(os.path.join(root, d), workspace, read_denied) for d in dirs):
                return f"{program} here may read whole directories holding files deny rules protect"
        for word in words[1:]:
            candidates = {word, *_SPLIT.split(word), *_TOKEN.findall(word)}
            if word.startswith("-") and len(word) > 2 and not word.startswith("--"):
                candidates.add(word[2:])  # -f.env
            for cand in candidates:
                if not cand:
                    continue
                if any(c in cand for c in "*?[{"):
                    if _glob_hits_denied(cand, workspace, read_denied):
                        return f"{cand!r} may match a file protected by a deny rule"
                    continue
                problem = _denied_path(cand, root, workspace, read_denied)
                if problem:
                    return problem
    return None


def _git_limited(words: list[str], sub: str, root: str, workspace: Workspace, read_denied: DeniedCheck) -> bool:
    """Whether a git command that shows contents is limited to paths no deny rule protects: pathspecs
    after `--` (`git diff -- src/`, `git log -p -- notes.txt`), plain (no `:(magic)`, `:!exclude` or glob),
    none protected nor a directory holding a protected file; or `git blame FILE` without -C/-M."""
    if sub == "blame":
        args = words[words.index("blame") + 1 :]
        if any(a.startswith(("-C", "-M", "--contents", "--ignore-revs-file")) for a in args):
            return False
        files = [a for a in args if not a.startswith("-")]
        return bool(files) and all(os.path.isfile(os.path.join(root, f)) for f in files[-1:])
    if sub not in ("diff", "log", "show", "grep", "whatchanged") or "--" not in words:
        return False
    specs = words[words.index("--") + 1 :]
    if not specs:
        return False
    for spec in specs:
        if spec.startswith(":") or any(c in spec for c in "*?[\\"):
            return False
        full = os.path.normpath(os.path.join(root, spec))
        rel = workspace.relative(full)
        if rel is None or rel == "." or read_denied(rel, os.path.realpath(full)):
            return False
        if os.path.isdir(full) and _dir_holds_denied(full, workspace, read_denied):
            return False
    return True


_TREE_READERS = {"grep", "egrep", "fgrep", "rgrep", "rg", "ag", "ack", "ugrep", "tar", "zip", "7z", "rsync", "cp",
                 "diff", "scp", "cpio", "pax", "bsdtar"}
"""Programs that may read every file below a directory (or the working directory when given none)."""


def _dir_holds_denied(directory: str, workspace: Workspace, read_denied: DeniedCheck, limit: int = 5000) -> bool:
    seen = 0
    for dirpath, dirnames, filenames in os.walk(directory):
        for name in dirnames + filenames:
            seen += 1
            if seen > limit:
                return True
            full = os.path.join(dirpath, name)
            rel = workspace.relative(os.path.normpath(full))
            if rel is not None and read_denied(rel, os.path.realpath(full)):
                return True
    return False


def _denied_path(value: str, root: str, workspace: Workspace, read_denied: DeniedCheck) -> str | None:
    if value.startswith("~"):
        return None
    joined = value if os.path.isabs(value) else os.path.join(root, value)
    if not os.path.lexists(joined):
        return None  # nothing there to reveal
    real = os.path.realpath(joined)
    rel = workspace.relative(real)
    lexical_rel = workspace.relative(os.path.normpath(joined))
    for form in (rel, lexical_rel):
        if form is not None and read_denied(form, real):
            return f"{value!r} is protected by a deny rule"
    if rel is None and read_denied(value.lstrip("/"), real):
        return f"{value!r} is protected by a deny rule"
    return None


def _glob_hits_denied(pattern: str, workspace: Workspace, read_denied: DeniedCheck, limit: int = 5000) -> bool:
    """Whether a glob (with `*`, `?`, `[...]` or braces) could name a protected file of the workspace."""
    pat = pattern
    if "{" in pat:
        return True  # brace expansion: too many shapes to follow; assume the worst
    if pat.startswith("/"):
        pat = os.path.relpath(pat, str(workspace.root)) if workspace.relative(pat) is not None else None
        if pat is None:
            return False
    regex = re.compile(fnmatch.translate(pat.replace("**", "*")))
    seen = 0
    for dirpath, dirnames, filenames in os.walk(str(workspace.root)):
        for name in dirnames + filenames:
            seen += 1
            if seen > limit:
                return True
            full = os.path.join(dirpath, name)
            rel = workspace.relative(full)
            if rel is not None and regex.match(rel) and read_denied(rel, os.path.realpath(full)):
                return True
    return False


def _holds_git(root: str, limit: int = 5000) -> bool:
    """Whether a git repository lies in `root` (True too past `limit` entries: it may)."""
    seen = 0
    for _dirpath, dirnames, filenames in os.walk(root):
        if ".git" in dirnames or ".git" in filenames:
            return True
        seen += len(dirnames) + len(filenames)
        if seen > limit:
            return True
    return False


def _names_denied(command: str, workspace: Workspace, read_denied: DeniedCheck) -> str | None:
    """Whether a word of the line names a protected path that exists (however it is quoted)."""
    parsed = parse(command)
    root = str(workspace.root)
    words = [w.value for cmd in parsed.commands for w in cmd] + [w.value for w in parsed.redirects]
    for word in words:
        for cand in {word, *_SPLIT.split(word), *_TOKEN.findall(word)}:
            if cand and not any(c in cand for c in "*?[{"):
                problem = _denied_path(cand, root, workspace, read_denied)
                if problem:
                    return problem
    return None
