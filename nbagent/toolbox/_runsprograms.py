"""Which programs run other programs from their options, their scripts or their environment: one table.

A shell deny rule (`deny: shell(rm*)`) is kept only if nbagent can see every command a line runs.
`_subcommands.subcommands` follows wrappers and shells; this module answers the rest, for programs that
take a command somewhere a parser cannot follow: an option value (`tar --to-command=...`,
`git -c core.pager=...`, `rsync -e ...`), a script language (`sed 's/x/y/e'`, `awk 'BEGIN{system(...)}'`),
a file of the workspace (`make`, `npm test`, `pytest`'s conftest), or an environment variable set on the
line (`LESSOPEN='|rm x %s' less f`, `PATH=. ls`). `unseen(words)` says why a command's effect cannot be
shown, or None; the caller then treats the line as unreadable, so every deny rule matches it (fail closed).

The knowledge is data: `RUNNERS` has one entry per program. Option names are matched the way getopt
reads them, erring towards a match: a short letter anywhere in a bundle (`-xIzstd`), a long option by
any prefix of two letters or more (`--to-com`), `--opt=value` and `--opt value` alike.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Callable, Mapping

__all__ = ["RUNNERS", "Runner", "SAFE_VARIABLES", "unseen", "unseen_assignment"]

_HARMLESS = frozenset({"--version", "--help", "-version", "-help", "-V", "-h"})


@dataclass(frozen=True, slots=True)
class Runner:
    """How one program may run commands nbagent is not shown."""

    always: str | None = None
    """Why it always may (it runs code from its arguments, stdin or files): None if only through options."""
    options: Mapping[str, str] = field(default_factory=dict)
    """Option as written (`-e`, `--to-command`) -> what it runs."""
    values: tuple[str, ...] = ()
    """Text in any argument that names a program to run (`ext::`, `exec:`), compared ignoring case."""
    script: Callable[[list[str]], str | None] | None = None
    """A check of the program's script arguments (sed), when its language can run commands."""
    subcommands: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    """For git-like programs: subcommand -> its options that run programs ("*": the subcommand always does)."""
    known_subcommands: frozenset[str] = frozenset()
    """Subcommands that exist (anything else may be an alias or an external program: it always may)."""
    global_values: frozenset[str] = frozenset()
    """Global options (before the subcommand) that take a value in the next word."""
    tar_bundle: bool = False
    """The first word may be options without a dash (`tar xIf prog a.tar`)."""
    bundles: bool = True
    """Short options bundle (`-xvf`); False: each option is its own word (`gcc -B dir`, `-Bdir`)."""


def _sed_script(args: list[str]) -> str | None:
    """sed runs commands with its `e` command and the `e` flag of `s`, and reads scripts from files
    (`-f`): only scripts made of the commands below are shown to keep deny rules."""
    scripts: list[str] = []
    positional: list[str] = []
    k = 0
    while k < len(args):
        a = args[k]
        k += 1
        if a in ("-e", "--expression"):
            if k >= len(args):
                return "sed -e without a script"
            scripts.append(args[k])
            k += 1
        elif a.startswith("--expression="):
            scripts.append(a.split("=", 1)[1])
        elif a.startswith("-e") and len(a) > 2:
            scripts.append(a[2:])
        elif a in ("-f", "--file") or a.startswith(("--file=", "-f")) or (a.startswith("-") and not a.startswith("--")
                                                                            and "f" in a[1:] and "i" not in a[1:2]):
            return "sed reads its script from a file, which nbagent cannot show to keep deny rules"
        elif a.startswith("--") and len(a) > 2:
            name = a[2:].split("=", 1)[0]
            if "expression".startswith(name) or "file".startswith(name):
                return "sed reads a script nbagent cannot follow here (an abbreviated --expression or --file)"
            if not any(known.startswith(name) for known in _SED_LONG):
                return f"sed {a.split('=')[0]} is not an option nbagent knows"
        elif a.startswith("-") and a != "-":
            if "l" in a[1:] and a[1:].endswith("l"):
                k += 1  # -l N: its value is not a script
            continue
        else:
            positional.append(a)
    if not scripts and positional:
        scripts.append(positional[0])
    for text in scripts:
        if not _SED_SAFE.fullmatch(text):
            return "sed's script may run commands (its e command or s///e), or nbagent cannot read it"
    return None


_SED_LONG = ("quiet", "silent", "regexp-extended", "in-place", "separate", "null-data", "zero-terminated",
             "unbuffered", "posix", "debug", "sandbox", "follow-symlinks", "line-length", "binary", "help", "version")
_SED_ADDRESS = r"(?:\d+(?:~\d+)?|\$|/(?:[^/\\\n]|\\.)*/[IM]*)"
_SED_COMMAND = (
    r"(?:s(?P<d>[^\s\\\n])(?:(?!(?P=d))[^\\\n]|\\.)*(?P=d)(?:(?!(?P=d))[^\\\n]|\\.)*(?P=d)[gpiIm0-9]*"
    r"|y(?P<e>[^\s\\\n])(?:(?!(?P=e))[^\\\n]|\\.)*(?P=e)(?:(?!(?P=e))[^\\\n]|\\.)*(?P=e)"
    r"|[pdqQ=nNgGhHxlzDP{}])"
)
_SED_SAFE = re.compile(
    rf"[\s;]*(?:(?:{_SED_ADDRESS}(?:,{_SED_ADDRESS})?)?\s*!?\s*{_SED_COMMAND}[\s;]*)*"
)
"""A sed script of substitutions (flags g p i I m and a number), transliterations, and commands that only
print, delete, quit or move text (no e, w, W, r, R, s///e, s///w, labels or branches)."""


_GIT_SUBCOMMANDS = frozenset(
    "add am annotate apply archive bisect blame branch bundle cat-file check-attr check-ignore check-mailmap "
    "checkout checkout-index cherry cherry-pick citool clean clone column commit commit-graph commit-tree config "
    "count-objects credential describe diff diff-files diff-index diff-tree difftool fast-export fast-import fetch "
    "fetch-pack filter-branch fmt-merge-msg for-each-ref format-patch fsck gc get-tar-commit-id grep gui "
    "hash-object help index-pack init instaweb interpret-trailers log ls-files ls-remote ls-tree mailinfo mailsplit "
    "maintenance merge merge-base merge-file merge-index merge-tree mergetool mktag mktree mv name-rev notes "
    "pack-objects pack-refs prune prune-packed pull push range-diff read-tree rebase reflog remote repack replace "
    "request-pull rerere reset restore rev-list rev-parse revert rm send-email shortlog show show-branch show-ref "
    "sparse-checkout stash status stripspace submodule switch symbolic-ref tag unpack-objects update-index "
    "update-ref update-server-info var verify-commit verify-pack verify-tag version whatchanged worktree "
    "write-tree".split())

_GIT_SAFE_CONFIG = re.compile(
    r"^(user\.(name|email)|color\..*|core\.(quotepath|autocrlf|safecrlf|abbrev|ignorecase)|init\.defaultbranch"
    r"|advice\..*|log\.(date|decorate|abbrevcommit)|status\.(short|branch)|diff\.(renames|algorithm|context"
    r"|nopref|mnemonicprefix|noprefix)|column\.ui|commit\.gpgsign|tag\.gpgsign|gc\.auto|pull\.(rebase|ff)"
    r"|push\.default|merge\.ff|fetch\.prune|safe\.directory)=",
    re.IGNORECASE)
"""`git -c key=value` settings that name no program (every other `-c` may: core.pager, alias.*, core.sshCommand...)."""


def _git_config(value: str) -> str | None:
    if _GIT_SAFE_CONFIG.match(value):
        return None
    return f"git -c {value.split('=')[0]} may name a program for git to run"


RUNNERS: dict[str, Runner] = {
    # -- options whose value is a program or command ---------------------------------------------------
    "tar": Runner(options={"--checkpoint-action": "runs a command at checkpoints", "--to-command": "pipes files to a command",
                           "--use-compress-program": "runs a compressor program", "-I": "runs a compressor program",
                           "--rsh-command": "runs a remote shell", "--rmt-command": "runs a remote tape program",
                           "--info-script": "runs a script between volumes", "--new-volume-script": "runs a script",
                           "-F": "runs a script between volumes"},
                  tar_bundle=True),
    "bsdtar": Runner(options={"--use-compress-program": "runs a compressor program", "-I": "runs a program"}),
    "sort": Runner(options={"--compress-program": "runs a compressor program"}),
    "split": Runner(options={"--filter": "pipes each piece to a shell command"}),
    "ssh-keygen": Runner(options={"-O": "may name a program (sk-provider)", "-w": "loads a provider library"}),
    "dpkg": Runner(options={"--status-logger": "runs a program", "--pre-invoke": "runs a command",
                            "--post-invoke": "runs a command", "-i": "runs the package's scripts",
                            "--install": "runs the package's scripts", "--unpack": "runs the package's scripts",
                            "--configure": "runs the package's scripts", "-r": "runs the package's scripts",
                            "--remove": "runs the package's scripts", "-P": "runs the package's scripts",
                            "--purge": "runs the package's scripts"}),
    "flock": Runner(options={"-c": "runs a shell command", "--command": "runs a shell command"}),
    "sqlite3": Runner(always="runs commands from its input (.shell, .system)"),
    "find": Runner(options={"-fprint": "writes a file", "-fprint0": "writes a file", "-fprintf": "writes a file",
                            "-fls": "writes a file"}),
    "zip": Runner(options={"-TT": "runs an unzip command", "--unzip-command": "runs an unzip command"}),
    "rsync": Runner(options={"-e": "runs a remote shell", "--rsh": "runs a remote shell",
                             "--rsync-path": "runs a program on the other side", "-M": "passes options to the other side",
                             "--remote-option": "passes options to the other side"}),
    "scp": Runner(options={"-S": "runs a program instead of ssh", "-o": "ssh options (ProxyCommand...)",
                           "-F": "reads an ssh configuration"}),
    "sftp": Runner(options={"-S": "runs a program instead of ssh", "-D": "runs a program instead of sftp-server",
                            "-o": "ssh options (ProxyCommand...)", "-F": "reads an ssh configuration"}),
    "man": Runner(options={"-P": "runs a pager program", "--pager": "runs a pager program", "-H": "runs a browser",
                           "--html": "runs a browser", "-p": "runs preprocessors", "--preprocessor": "runs preprocessors"}),
    "less": Runner(options={"+": "runs its initial command (`+!cmd`)", "-k": "reads a key file",
                            "--lesskey-file": "reads a key file", "--lesskey-src": "reads a key file",
                            "--lesskey-content": "reads key bindings"}),
    "more": Runner(options={"+": "runs its initial command"}),
    "wget": Runner(options={"--use-askpass": "runs a password program", "--execute": "runs wgetrc commands",
                            "-e": "runs wgetrc commands", "--config": "reads a wgetrc"}),
    "mapfile": Runner(options={"-C": "runs a callback command"}),
    "readarray": Runner(options={"-C": "runs a callback command"}),
    "enable": Runner(options={"-f": "loads a builtin from a shared library"}),
    "nc": Runner(options={"-e": "runs a program on the connection", "-c": "runs a shell command on the connection"}),
    "ncat": Runner(options={"-e": "runs a program", "--exec": "runs a program", "-c": "runs a shell command",
                            "--sh-exec": "runs a shell command", "--lua-exec": "runs a Lua script"}),
    "socat": Runner(values=("exec:", "system:")),
    "curl": Runner(options={"--engine": "loads a crypto engine (a library)", "-K": "reads options from a file",
                            "--config": "reads options from a file"}),
    "rg": Runner(options={"--pre": "runs a preprocessor on every file"}),
    "install": Runner(options={"--strip-program": "runs the program it names"}),
    "gcc": Runner(options={"-wrapper": "runs its tools through a program", "-B": "runs tools from a directory",
                           "-fplugin": "loads a plugin", "-specs": "reads a specs file"}, bundles=False),
    "git": Runner(
        options={"--exec-path": "runs git programs from a directory", "--config-env": "sets configuration from a variable"},
        values=("ext::", "fd::"),
        global_values=frozenset({"-C", "-c", "--git-dir", "--work-tree", "--namespace", "--super-prefix",
                                 "--config-env", "--attr-source", "--list-cmds", "--exec-path"}),
        known_subcommands=_GIT_SUBCOMMANDS,
        subcommands={
            "clone": {"--upload-pack": "runs a program", "-u": "runs a program", "--config": "sets configuration",
                      "-c": "sets configuration", "--template": "copies hooks"},
            "fetch": {"--upload-pack": "runs a program"}, "pull": {"--upload-pack": "runs a program"},
            "ls-remote": {"--upload-pack": "runs a program"},
            "push": {"--receive-pack": "runs a program", "--exec": "runs a program"},
            "archive": {"--exec": "runs a program", "--remote": "runs git-upload-archive remotely"},
            "rebase": {"-x": "runs a command", "--exec": "runs a command"},
            "bisect": {"run": "runs a command"},
            "submodule": {"foreach": "runs a command"},
            "difftool": {"-x": "runs a command", "--extcmd": "runs a command", "-t": "runs a tool", "--tool": "runs a tool"},
            "grep": {"-O": "runs a pager", "--open-files-in-pager": "runs a pager"},
            "config": {"*": "writes settings that may name programs"},
            "filter-branch": {"*": "runs filter commands"}, "mergetool": {"*": "runs a merge tool"},
            "send-email": {"*": "runs programs"}, "instaweb": {"*": "runs a web server and browser"},
            "credential": {"*": "runs credential helpers"}, "help": {"-w": "runs a browser", "--web": "runs a browser"},
            "init": {"--template": "copies hooks"}, "daemon": {"*": "runs a server"},
            "fast-import": {"*": "reads commands"}, "web--browse": {"*": "runs a browser"},
        }),
}
"""One entry per program that runs commands given somewhere else than as its own arguments."""

_ALWAYS = {
    "runs code from its arguments, stdin or a script file": (
        "awk gawk mawk nawk perl ruby php lua luajit node nodejs deno bun tclsh wish expect Rscript R julia "
        "osascript pwsh powershell groovy scala java dotnet jshell ghci runghc irb psql mysql gdb lldb vim "
        "vi nvim view vimdiff rvim ex ed emacs dc bc"),
    "runs the commands of a file in the workspace (Makefile, package.json, setup.py, conftest.py...)": (
        "make gmake bmake cmake ninja meson scons rake just task invoke npm npx yarn pnpm pip pip3 pipx poetry uv uvx "
        "hatch pdm tox nox pytest py.test pre-commit cargo go gradle gradlew mvn ant bundle bundler composer mix "
        "jupyter ipython jupytext papermill sbt lein stack cabal swift"),
    "runs commands it reads from its input or another host": (
        "xargs parallel ssh tmux screen docker podman kubectl nerdctl lxc crontab xdg-open"),
}
for _why, _names in _ALWAYS.items():
    for _name in _names.split():
        RUNNERS.setdefault(_name, Runner(always=_why))


SAFE_VARIABLES = frozenset({"LANG", "LANGUAGE", "TZ", "NO_COLOR", "FORCE_COLOR", "CLICOLOR", "COLUMNS", "LINES",
                            "TERM", "CI", "PYTHONUNBUFFERED", "PYTHONDONTWRITEBYTECODE", "PYTHONHASHSEED",
                            "PYTHONIOENCODING", "PYTHONWARNINGS", "SOURCE_DATE_EPOCH", "GIT_AUTHOR_NAME",
                            "GIT_AUTHOR_EMAIL", "GIT_COMMITTER_NAME", "GIT_COMMITTER_EMAIL", "GIT_AUTHOR_DATE",
                            "GIT_COMMITTER_DATE", "DEBUG", "VERBOSE", "NODE_ENV", "RUST_BACKTRACE", "RUST_LOG",
                            "OMP_NUM_THREADS", "MPLBACKEND"})
"""Variables that name no program. Set before a program of `RUNNERS` (which read variables such as
`GIT_SSH_COMMAND`, `LESSOPEN`, `TAR_OPTIONS`, `PAGER`), or on their own / exported (they reach every later
command), any other variable makes the line unreadable to deny rules."""

_EVERY_PROGRAM = re.compile(r"^(PATH|LD_\w*|BASH_ENV|ENV|BASH_FUNC_.*|GCONV_PATH|IFS|PS4|SHELLOPTS|BASHOPTS|"
                            r"PROMPT_COMMAND|LOCPATH|NLSPATH|HOSTALIASES|RESOLV_HOST_CONF|MALLOC_\w*|GLIBC_TUNABLES|"
                            r"CDPATH|GLOBIGNORE|EXECIGNORE)$")
"""Variables that change what any program (or the shell) runs: the loader, `PATH`, bash's startup files."""


def unseen_assignment(text: str, program: str | None = None) -> str | None:
    """Why `NAME=value` set on a line may make a program run something unseen, or None. `program`: the
    command it is set for (None: a standalone assignment or `export`, which reaches every later command)."""
    name = text.split("=", 1)[0].rstrip("+")
    if _EVERY_PROGRAM.match(name):
        return f"{name} set on the line changes what programs run"
    if name in SAFE_VARIABLES or name.startswith("LC_"):
        return None
    if program is None or os.path.basename(program) in RUNNERS or os.path.basename(program).startswith(
            ("git", "python", "perl", "ruby", "node")):
        return f"{name} set on the line may make a program run another"
    return None


def _matches(arg: str, option: str, bundles: bool = True) -> bool:
    if option == "+":
        return arg.startswith("+")
    if option.startswith("--"):
        if not arg.startswith("--") or arg == "--":
            return False
        given = arg[2:].split("=", 1)[0]
        return len(given) >= 2 and option[2:].startswith(given)
    if len(option) > 2:  # single-dash words (`-fprint`, `-TT`, `-wrapper`): exact, or with a value attached
        return arg == option or arg.startswith(option + "=") or (option == "-fplugin" and arg.startswith(option))
    if arg.startswith("--") or not arg.startswith("-"):
        return False
    if not bundles:
        return arg.startswith(option)
    return option[1] in arg[1:]  # a short letter anywhere in a bundle (over-matching is the safe side)


def _option_hit(args: list[str], options: Mapping[str, str], bundles: bool = True) -> tuple[str, str] | None:
    for arg in args:
        if arg == "--":
            return None
        for option, why in options.items():
            if _matches(arg, option, bundles):
                return option, why
    return None


def unseen(words: list[str]) -> str | None:
    """Why nbagent cannot show what `words` (one command, program first) runs, or None when it can: then
    every command it runs is its own words, or is shown to `_subcommands` through a wrapper it follows."""
    if not words:
        return None
    program = os.path.basename(words[0])
    rest = words[1:]
    runner = RUNNERS.get(program)
    if runner is None and program.startswith(("python", "perl", "ruby", "php", "lua", "node", "pypy")):
        runner = Runner(always=_ALWAYS_PY)
    if runner is None and program.startswith("git-"):
        return unseen(["git", program[4:], *rest])
    if runner is None:
        return None
    if runner.always:
        if rest and all(a in _HARMLESS for a in rest):
            return None
        return f"{program} {runner.always}"
    lowered = [a.lower() for a in rest]
    for text in runner.values:
        if any(text in a for a in lowered):
            return f"{program}: {text!r} names a program to run"
    args = rest
    if runner.tar_bundle and rest and not rest[0].startswith("-"):
        args = ["-" + rest[0], *rest[1:]]
    if runner.known_subcommands:
        return _subcommand_unseen(program, runner, args)
    hit = _option_hit(args, runner.options, runner.bundles)
    if hit:
        return f"{program} {hit[0]} {hit[1]}"
    if runner.script is not None:
        return runner.script(rest)
    return None


_ALWAYS_PY = "runs code from its arguments, stdin or a script file"
RUNNERS["sed"] = Runner(script=_sed_script)
RUNNERS["gsed"] = RUNNERS["sed"]


def _subcommand_unseen(program: str, runner: Runner, args: list[str]) -> str | None:
    k = 0
    while k < len(args) and args[k].startswith("-"):
        option = args[k]
        name, eq, value = option.partition("=")
        if name in runner.global_values and not eq:
            value = args[k + 1] if k + 1 < len(args) else ""
            k += 1
        if name == "-c" or name == "--config-env":
            problem = _git_config(value) if name == "-c" else f"{program} --config-env sets configuration from a variable"
            if problem:
                return problem
        hit = _option_hit([name], runner.options)
        if hit:
            return f"{program} {hit[0]} {hit[1]}"
        k += 1
    if k >= len(args):
        return None
    sub, sub_args = args[k], args[k + 1 :]
    if sub not in runner.known_subcommands:
        return f"{program} {sub} is not a {program} command nbagent knows (an alias or another program may run)"
    options = runner.subcommands.get(sub, {})
    if "*" in options:
        return f"{program} {sub} {options['*']}"
    words_like = {o: w for o, w in options.items() if not o.startswith("-")}
    for word, why in words_like.items():
        if word in sub_args:
            return f"{program} {sub} {word} {why}"
    hit = _option_hit(sub_args, {o: w for o, w in options.items() if o.startswith("-")})
    if hit:
        return f"{program} {sub} {hit[0]} {hit[1]}"
    return None
