"""Which shell commands only read: the allow-list behind the shell tool's auto-allow.

A command line is auto-allowed as read-only only when every one of these holds:

- it is one plain command (`_shellwords.parse(...).is_simple`): no `;`, `&&`, `||`, pipes, `&`, newlines,
  redirections, `$(...)`, backticks, `$VAR`, globs, `~`, braces, comments, assignments or control
  characters; the program name is written plainly (not quoted, not a path);
- the program is on the allow-list (`_readprograms.READ_ONLY_COMMANDS`), and every option is one the
  classifier knows, read the way the program reads it (`_getopt`, as GNU `getopt_long`: a long option may be any unique prefix of its name,
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
  of it (`_readpaths`: checked each time, over at most `MAX_LINK_SCAN` entries);
- for `git` (`_gitreads`): the workspace is the top of its repository, with a plain `.git/` directory (not a `.git`
  file pointing elsewhere, not a bare repository's `HEAD`/`objects/`/`refs/` at the top), no `GIT_DIR`
  and the like in the environment, a subcommand the classifier knows (an alias never is), and, for the
  commands that compare or show file contents, no diff or filter program configured
  (`_gitsafety.configured_programs`) unless `--no-ext-diff --no-textconv` are given. The shell tool runs
  every git with `_gitsafety.git_safety_env()`, which forces hooks, fsmonitor, pagers and the like off.

Without an OS sandbox (`sandboxed=False`), only `STRICT_READ_ONLY_COMMANDS` are auto-allowed, with the
few options listed there, on plain files of the workspace.

Anything else is not read-only: it goes on through the permission pipeline (rules, grants, the mode,
the approver) like any other command.

This module is the classifier (and `find`'s expression language); what it reads from lives beside it:
`_getopt` (options as getopt_long reads them), `_readprograms` (the table of programs and their options),
`_gitreads` (git's table and the repository checks), `_readpaths` (where paths and links lead).

`_readdeny.reveals_denied` answers the other question deny rules on reading ask of a shell command:
may it show a protected file?
"""

from __future__ import annotations

from ._getopt import ParsedOptions, getopt
from ._gitreads import git_problem
from ._readpaths import DeniedCheck, has_outward_link, path_problem
from ._readprograms import READ_ONLY_COMMANDS, STRICT_READ_ONLY_COMMANDS, Spec, strict_problem
from ._secretreads import SLICING, WHOLE_READERS, holder_of_secret
from ._shellwords import parse
from ._workspace import Workspace

__all__ = ["read_only_problem"]


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
        return git_problem(args, workspace, read_denied, sandboxed)
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
    p = getopt(spec.options, args)
    if isinstance(p, str):
        return f"{name}: {p}"
    problem = _spec_problem(name, spec, p, workspace, read_denied)
    if problem is None and not sandboxed:
        problem = strict_problem(name, p, workspace)
    if problem is None:
        problem = _secret_problem(name, spec, p, workspace)
    return problem


def _secret_problem(name: str, spec: Spec, p: ParsedOptions, workspace: Workspace) -> str | None:
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


def _spec_problem(name: str, spec: Spec, p: ParsedOptions, workspace: Workspace,
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
    if following and has_outward_link(workspace):
        return f"{name} here follows symbolic links, and one in the workspace leads out of it"
    for _opt, value, kind in p.options:
        if kind == "@" and value is not None:
            problem = path_problem(value, workspace, read_denied)
            if problem:
                return problem
    paths = p.positional
    if spec.positional == "text":
        paths = []
    elif spec.positional == "pattern" and not p.has("regexp", "file"):
        paths = paths[1:]
    for value in paths:
        problem = path_problem(value, workspace, read_denied)
        if problem:
            return problem
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
                problem = path_problem(value, workspace, read_denied)
                if problem:
                    return problem
            continue
        return f"find {a} is not a test or action it knows"
    if following and has_outward_link(workspace):
        return "find -L follows symbolic links, and one in the workspace leads out of it"
    for value in starts:
        problem = path_problem(value, workspace, read_denied)
        if problem:
            return problem
    return None

