"""Which shell commands only read: the allow-list behind the shell tool's auto-allow.

A command line is auto-allowed as read-only only when every one of these holds:

- it is one plain command (`_shellwords.parse(...).is_simple`): no `;`, `&&`, `||`, pipes, `&`, newlines,
  redirections, `$(...)`, backticks, `$VAR`, globs, `~`, braces, comments, assignments or control
  characters; the program name is written plainly (not quoted, not a path);
- the program is on the allow-list below, and its options pass that program's check (`sort -o`,
  `find -exec`/`-delete`, `tail -f`, `git -c`, `git diff --output`, `git branch NAME`... are refused);
- every argument that could be a path stays inside the workspace once symbolic links are followed
  (no absolute paths elsewhere, no `..` out, no `~`), and is not protected by a deny rule of
  `read_file` or `grep`; when such deny rules exist, commands that read whole trees (`grep -r`, `rg`,
  `git diff`) are not auto-allowed either;
- for `git`, the workspace is the top of its repository (otherwise git would read outside it).

Anything else is not read-only: it goes on through the permission pipeline (rules, grants, the mode,
the approver) like any other command.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Callable

from ._shellwords import parse
from ._workspace import Workspace

__all__ = ["READ_ONLY_COMMANDS", "read_only_problem"]

DeniedCheck = Callable[[str, str], bool]
"""`f(relative path, real absolute path) -> bool`: whether a deny rule protects that path from reading."""


@dataclass(frozen=True, slots=True)
class _Spec:
    forbid: frozenset[str] = frozenset()
    """Options refused exactly, or with `=value` (`--output=x`), or as words (`-exec`)."""
    forbid_short: str = ""
    """Letters refused inside any short-option group (`-o`, `-uo`)."""
    max_positional: int | None = None
    only_args: tuple[tuple[str, ...], ...] | None = None
    """When set: the exact argument lists allowed (`python --version`)."""
    reads_tree: Callable[[list[str]], bool] | None = None
    """Whether the command reads file contents under a directory recursively."""


def _always(_: list[str]) -> bool:
    return True


def _grep_recursive(args: list[str]) -> bool:
    for a in args:
        if a in ("--recursive", "-d", "--directories=recurse") or (a.startswith("-") and not a.startswith("--") and "r" in a[1:]):
            return True
    return False


READ_ONLY_COMMANDS: dict[str, _Spec] = {
    "ls": _Spec(),
    "pwd": _Spec(),
    "cat": _Spec(),
    "head": _Spec(),
    "tail": _Spec(forbid=frozenset({"--follow", "--retry", "--pid"}), forbid_short="fF"),
    "wc": _Spec(forbid=frozenset({"--files0-from"})),
    "nl": _Spec(),
    "file": _Spec(forbid=frozenset({"--compile", "--files-from"}), forbid_short="Cmf"),
    "stat": _Spec(),
    "du": _Spec(forbid=frozenset({"--files0-from", "--dereference"}), forbid_short="L"),
    "df": _Spec(),
    "tree": _Spec(forbid=frozenset({"--fromfile"}), forbid_short="ol"),
    "echo": _Spec(),
    "basename": _Spec(),
    "dirname": _Spec(),
    "realpath": _Spec(),
    "readlink": _Spec(),
    "md5sum": _Spec(),
    "sha1sum": _Spec(),
    "sha256sum": _Spec(),
    "sha512sum": _Spec(),
    "cksum": _Spec(),
    "true": _Spec(),
    "whoami": _Spec(),
    "id": _Spec(),
    "uname": _Spec(),
    "date": _Spec(forbid=frozenset({"--set", "--file"}), forbid_short="sf"),
    "which": _Spec(),
    "cut": _Spec(),
    "diff": _Spec(forbid=frozenset({"--from-file", "--to-file"}), reads_tree=lambda a: any(
        x in ("-r", "--recursive") or (x.startswith("-") and not x.startswith("--") and "r" in x[1:]) for x in a)),
    "cmp": _Spec(),
    "comm": _Spec(),
    "grep": _Spec(forbid=frozenset({"--dereference-recursive"}), forbid_short="R", reads_tree=_grep_recursive),
    "rg": _Spec(forbid=frozenset({"--pre", "--pre-glob", "--follow", "--hostname-bin", "--search-zip"}),
                forbid_short="Lz", reads_tree=_always),
    "find": _Spec(forbid=frozenset({"-exec", "-execdir", "-ok", "-okdir", "-delete", "-fprint", "-fprint0",
                                    "-fprintf", "-fls", "-L", "-follow", "-files0-from"})),
    "sort": _Spec(forbid=frozenset({"--output", "--compress-program", "--files0-from"}), forbid_short="o"),
    "uniq": _Spec(max_positional=1),
    "python": _Spec(only_args=(("--version",), ("-V",))),
    "python3": _Spec(only_args=(("--version",), ("-V",))),
}

_GIT_GLOBAL_OK = frozenset({"--no-pager", "-P", "--no-optional-locks", "--literal-pathspecs", "--no-replace-objects"})
_GIT_FORBID = frozenset({"--output", "--ext-diff", "--open-files-in-pager", "-O", "--exec", "--upload-pack",
                         "--receive-pack", "--textconv", "--run"})
_GIT_READ = {
    "status", "log", "diff", "show", "blame", "annotate", "ls-files", "ls-tree", "rev-parse", "describe",
    "shortlog", "rev-list", "cat-file", "show-ref", "merge-base", "count-objects", "grep", "whatchanged",
    "branch", "tag", "remote", "stash", "reflog", "name-rev", "version",
}
_GIT_CONTENT = {"diff", "show", "grep", "blame", "annotate", "cat-file", "whatchanged"}
_PATCH_OPTS = ("-p", "-u", "--patch", "--patch-with-stat", "--patch-with-raw", "-L", "--cc", "-c")


def read_only_problem(command: str, workspace: Workspace, denied: DeniedCheck | None = None) -> str | None:
    """None when `command` only reads (see the module docstring), else why it is not auto-allowed."""
    parsed = parse(command)
    if parsed.error is not None:
        return f"it cannot be read as a command ({parsed.error})"
    if not parsed.is_simple:
        return f"it is not one plain command ({', '.join(parsed.problems) or 'several commands'})"
    words = parsed.words
    head = words[0]
    if head.quoted or head.value != head.raw or "/" in head.value:
        return "the program name is quoted or a path"
    args = [w.value for w in words[1:]]
    if head.value == "git":
        problem = _git_problem(args, workspace, denied)
    else:
        spec = READ_ONLY_COMMANDS.get(head.value)
        if spec is None:
            return f"{head.value!r} is not on the read-only list"
        problem = _spec_problem(head.value, spec, args, denied)
    if problem:
        return problem
    return _paths_problem(args, workspace, denied)


def _spec_problem(name: str, spec: _Spec, args: list[str], denied: DeniedCheck | None) -> str | None:
    if spec.only_args is not None:
        return None if tuple(args) in spec.only_args else f"only {' or '.join(' '.join(a) for a in spec.only_args)} is read-only for {name}"
    problem = _options_problem(name, args, spec.forbid, spec.forbid_short)
    if problem:
        return problem
    if spec.max_positional is not None and len(_positional(args)) > spec.max_positional:
        return f"{name} with more than {spec.max_positional} file argument(s) writes a file"
    if denied is not None and spec.reads_tree is not None and spec.reads_tree(args):
        return f"{name} here reads whole directories, and deny rules protect some files"
    return None


def _options_problem(name: str, args: list[str], forbid: frozenset[str], forbid_short: str) -> str | None:
    for a in args:
        if a == "--":
            break
        if not a.startswith("-") or a == "-":
            continue
        key = a.split("=", 1)[0]
        if key in forbid:
            return f"{name} {key} can write files or run programs"
        if key.startswith("--"):
            # long options may be abbreviated (--out for --output)
            for f in forbid:
                if f.startswith("--") and len(key) > 3 and f.startswith(key):
                    return f"{name} {key} (short for {f}) can write files or run programs"
        elif forbid_short and not a.startswith("--") and any(ch in forbid_short for ch in a[1:]):
            return f"{name} {a} can write files, follow links or run programs"
    return None


def _positional(args: list[str]) -> list[str]:
    out = []
    rest = False
    for a in args:
        if rest or a == "-" or not a.startswith("-"):
            out.append(a)
        elif a == "--":
            rest = True
    return out


def _git_problem(args: list[str], workspace: Workspace, denied: DeniedCheck | None) -> str | None:
    k = 0
    while k < len(args) and args[k].startswith("-"):
        if args[k] not in _GIT_GLOBAL_OK:
            return f"git {args[k].split('=')[0]} changes how git runs"
        k += 1
    if k >= len(args):
        return "git without a subcommand"
    sub, rest = args[k], args[k + 1 :]
    if sub not in _GIT_READ:
        return f"git {sub} is not on the read-only list"
    top = _git_top(workspace.root)
    if top is not None and top != str(workspace.root):
        return "the workspace is inside a larger git repository, so git would read outside it"
    problem = _options_problem(f"git {sub}", rest, _GIT_FORBID, "")
    if problem:
        return problem
    positional = _positional(rest)
    flags = set(rest) - set(positional)
    listing = {"--list", "-l"} & flags
    if sub == "branch":
        if flags & {"-d", "-D", "-m", "-M", "-c", "-C", "-f", "--delete", "--move", "--copy", "--force", "-u",
                    "--set-upstream-to", "--unset-upstream", "--edit-description", "--track", "--no-track"} \
                or any(f.startswith(("--set-upstream-to", "--delete", "--move", "--copy")) for f in flags):
            return "git branch with these options changes branches"
        if positional and not listing and not flags & {"--contains", "--no-contains", "--merged", "--no-merged",
                                                       "--points-at"}:
            return "git branch NAME creates a branch"
    elif sub == "tag":
        if rest and not listing:
            return "only git tag and git tag --list ... are read-only"
        if flags & {"-d", "--delete", "-f", "--force", "-a", "-s", "-u", "-m", "-F", "-e"}:
            return "git tag with these options changes tags"
    elif sub == "remote":
        if positional or flags - {"-v", "--verbose"}:
            return "only git remote and git remote -v are read-only"
    elif sub == "stash":
        if not positional or positional[0] not in ("list", "show"):
            return "only git stash list and git stash show are read-only"
    elif sub == "reflog":
        if positional and positional[0] not in ("show",) and not positional[0].startswith(("HEAD", "refs/")):
            return "only git reflog and git reflog show are read-only"
    if denied is not None and (sub in _GIT_CONTENT or (sub == "log" and any(
            f in _PATCH_OPTS or f.startswith("-L") for f in flags))):
        return f"git {sub} reads file contents across the repository, and deny rules protect some files"
    return None


def _git_top(start: os.PathLike[str] | str) -> str | None:
    """The top of the git repository containing `start` (None when there is none)."""
    path = os.path.realpath(os.fspath(start))
    while True:
        if os.path.exists(os.path.join(path, ".git")):
            return path
        parent = os.path.dirname(path)
        if parent == path:
            return None
        path = parent


def _paths_problem(args: list[str], workspace: Workspace, denied: DeniedCheck | None) -> str | None:
    for a in args:
        if a == "-" or a == "--":
            continue
        if a.startswith("-"):
            if "=" in a:
                value = a.split("=", 1)[1]
            elif ".." in a or "/" in a[2:3] or "~" in a:
                return f"the option {a!r} may name a path outside the workspace"
            else:
                continue
        else:
            value = a
        problem = _path_problem(value, workspace, denied)
        if problem:
            return problem
    return None


def _path_problem(value: str, workspace: Workspace, denied: DeniedCheck | None) -> str | None:
    if not value:
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
    if denied is not None and (denied(rel, real) or (lexical_rel is not None and denied(lexical_rel, real))):
        return f"{value!r} is protected by a deny rule"
    return None
