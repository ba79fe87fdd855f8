"""Built-in tools: the things a notebook user expects an agent to be able to do.

    from nbagent import Agent, toolbox
    agent = Agent(model=..., tools=toolbox.all(workspace="."))

| tool | arguments | what it does | permission | a rule's `(pattern)` matches |
|---|---|---|---|---|
| `python` | `code` | runs code in the user's namespace; value, prints, displays, figures | destructive: asks | allow: exactly the code; deny: a glob over it |
| `list_variables` | | names, types and shapes in the namespace | read-only | (no arguments) |
| `inspect_variable` | `name` | a closer, bounded look at one value | read-only | the name (fnmatch) |
| `history` | `limit`, `offset` | what was run in this session, most recent first | read-only | (nothing) |
| `read_file` | `path`, `offset`, `limit` | a text file's lines (or an image) | read-only | the path, as a workspace glob |
| `list_files` | `pattern` | files matching a glob, with sizes | read-only | the directory listed, as a workspace glob |
| `grep` | `pattern`, `path`, `glob`, `ignore_case`, `max_results` | lines matching a regex (in a worker process: a runaway pattern is stopped, Stop kills it) | read-only | the path searched, as a workspace glob |
| `write_file` | `path`, `content` | writes a whole file | a file edit (acceptEdits allows) | the path, as a workspace glob |
| `edit_file` | `path`, `old`, `new`, `replace_all` | replaces exact text once; returns a diff | a file edit | the path, as a workspace glob |
| `shell` | `command`, `timeout`, `background`, `yield_ms` | a bash command in the workspace (git with hooks, fsmonitor, pagers forced off); in the background, as a process of the run | read-only commands auto-allowed, else asks | the command line, as a prefix |
| `process` | `action`, `id`, `input`, `eof`, `wait_ms`, `offset`, `limit` | the run's background processes: list, poll, log, write to stdin, kill (all stopped when the run ends) | list, poll and log auto-allowed; write and kill ask | (nothing) |

Workspace globs (`nbagent.calls.permissions.path_rule_matcher`): relative to the workspace, `*` within a
segment, `**` across segments, a pattern without `/` matching a name at any depth (`.env`), a directory
covering its contents (`notebooks/**`); a deny rule matches the path as written and as it resolves
(symbolic links followed), ignoring case; an allow rule only the real path inside the workspace.
A deny rule on reading a path (`deny: read_file(.env)`, or of `grep`) holds for every tool: `grep` skips
the file, `edit_file` refuses it, `write_file` replaces it without showing a diff, and `shell` refuses a
line that may show it (named under any quoting, by a glob, after `=` or `:` as in `dd if=.env` and
`git show HEAD:.env`, behind wrappers and scripts; a line it cannot read whole; git commands that show
history, such as `git log -p`). `list_files` hides what deny rules of `list_files` cover. Command
prefixes (`nbagent.toolbox.shell_pattern_matches`): `shell(git status*)` is a glob over the command's
words, `shell(pytest:*)` a word prefix; allow rules and ask rules only match one plain command (never
`git status; rm -rf x`, `$(...)`, pipes, redirections), or exactly the line a wildcard-free pattern
spells; deny rules match any command the line may run (each part, substitutions, the targets of
`sudo`/`time -p`/`nice -n 5`/`timeout -s KILL 5`/`script -c`/`xargs`/`bash -c`/`eval`/`trap`/`find -exec`
and the like; `git` with its global options dropped, `git-commit` read as `git commit`) and any line they
cannot read (a shell reading its script from a file or stdin, an interpreter running code from its
arguments, a file or stdin: `python`, `awk`, `make`, `node`..., a `git -c alias.*`).
"Always allow" remembers exactly the approved command line (`shell_suggest_pattern`), shown on the button.
Read-only commands (`read_only_problem`): every option must be one the classifier knows, read as
getopt_long reads it (`sort --out=x` is `--output`); recursion that follows links only while no link
leads out of the workspace; git only with a plain `.git/` directory and no diff or filter programs
configured. Without an OS sandbox (`sandboxed=False`), only `STRICT_READ_ONLY_COMMANDS` are auto-allowed.
A write of a file of a kind that runs or configures programs (hidden, inside an environment or package
tree, executable, loaded as configuration: `nbagent.safety.protected.write_reason`) is never auto-allowed by
acceptEdits or a grant. With a deny rule in force, only programs known to run no others pass (`_leaves`).

Two ways to get them:

- `toolbox.all(workspace=None, *, namespace=None, runner=None, history=None, python_timeout=None)` makes
  the eleven tools as one fresh set. A `workspace` fixes the directory the file tools and `shell` are
  confined to; without one they use the agent's workspace (`Agent(workspace=...)`, by default the working
  directory when the agent was made). `namespace` (a dict) or `runner` (a `PythonRunner`) is where
  `python` runs code; `history` is a `HistorySource`. Left out, they come from the agent's typed
  extensions (`Agent(extensions=[runner])`), else from a namespace owned by this set of tools.
- Each tool is also importable by name (`from nbagent.toolbox import read_file, shell`): these are one
  shared set, made like `toolbox.all()` with nothing fixed.

In a notebook, `nbagent.jupyter.notebook.kernel_tools.kernel_toolbox(shell, workspace)` makes the same eleven tools
running code in the kernel's namespace, with IPython's history.

The workspace is a hard boundary: no mode, rule or approval lets a file tool reach outside it. Rule
patterns for the file tools are paths relative to the workspace with `**` globs (`write_file(notebooks/**)`,
`deny: read_file(.env)`); for `shell`, command patterns (`shell(git status*)`, `shell(pytest:*)`) that
only ever match one plain command. See `nbagent.calls.permissions` for the pipeline.
"""

from __future__ import annotations

import os
from typing import Any

from ..tools.definition import Tool
from ._background import BackgroundProcess, make_process_tool
from ._binding import Binding
from ._capture import RoutedStream, StreamSink, ThreadRoutes, route_thread
from ._edits import FileChange
from ._files import FileContent, make_file_tools
from ._gitsafety import git_safety_env
from ._grep import GrepMatch, GrepResult
from ._python import _code_matcher as python_pattern_matches
from ._python import execution_result, make_namespace_tools
from ._readonly import read_only_problem
from ._readprograms import READ_ONLY_COMMANDS, STRICT_READ_ONLY_COMMANDS
from ._runner import Execution, HistoryEntry, HistorySource, PythonRunner, RunnerHistory
from ._shell import ShellResult, make_shell_tool
from ._shellrules import pattern_matches as shell_pattern_matches
from ._shellrules import suggest_pattern as shell_suggest_pattern
from ._values import cut, text_form
from ._workspace import Workspace, WorkspaceError

__all__ = [
    "BackgroundProcess",
    "Binding",
    "Execution",
    "FileChange",
    "FileContent",
    "GrepMatch",
    "GrepResult",
    "HistoryEntry",
    "HistorySource",
    "PythonRunner",
    "READ_ONLY_COMMANDS",
    "RoutedStream",
    "RunnerHistory",
    "STRICT_READ_ONLY_COMMANDS",
    "ShellResult",
    "StreamSink",
    "TOOL_NAMES",
    "ThreadRoutes",
    "Workspace",
    "WorkspaceError",
    "all",
    "cut",
    "edit_file",
    "execution_result",
    "git_safety_env",
    "grep",
    "history",
    "inspect_variable",
    "list_files",
    "list_variables",
    "process",
    "python",
    "python_pattern_matches",
    "read_file",
    "read_only_problem",
    "route_thread",
    "shell",
    "shell_pattern_matches",
    "shell_suggest_pattern",
    "text_form",
    "write_file",
]

TOOL_NAMES = ("python", "list_variables", "inspect_variable", "history", "read_file", "list_files", "grep",
              "write_file", "edit_file", "shell", "process")
"""The names of the built-in tools, in the order `all()` returns them."""


def _make(binding: Binding, python_timeout: float | None = None) -> dict[str, Tool]:
    tools: dict[str, Tool] = {}
    tools.update(make_namespace_tools(binding, python_timeout=python_timeout))
    tools.update(make_file_tools(binding))
    tools["shell"] = make_shell_tool(binding)
    tools["process"] = make_process_tool()
    return tools


def all(  # noqa: A001 - the public name is toolbox.all
    workspace: str | os.PathLike[str] | None = None,
    *,
    namespace: dict[str, Any] | None = None,
    runner: PythonRunner | None = None,
    history: HistorySource | None = None,
    python_timeout: float | None = None,
) -> list[Tool]:
    """The eleven built-in tools as one fresh set (see the module docstring).

    Args:
        workspace: the directory file tools and `shell` are confined to (default: the agent's workspace).
        namespace: the dict `python` runs code in (default: the agent's runner, else one of its own).
        runner: a `PythonRunner` to run code with (instead of `namespace`).
        history: where `history` looks (default: the runner's own history).
        python_timeout: seconds after which a `python` call is stopped (default: no limit; Stop works).
    """
    if namespace is not None and runner is not None:
        raise ValueError("give namespace or runner, not both")
    if runner is None and namespace is not None:
        runner = PythonRunner(namespace)
    try:
        binding = Binding(workspace, runner, history)
    except WorkspaceError as exc:
        raise ValueError(str(exc)) from None
    tools = _make(binding, python_timeout)
    return [tools[name] for name in TOOL_NAMES]


_shared = _make(Binding())
python: Tool = _shared["python"]
list_variables: Tool = _shared["list_variables"]
inspect_variable: Tool = _shared["inspect_variable"]
history: Tool = _shared["history"]
read_file: Tool = _shared["read_file"]
list_files: Tool = _shared["list_files"]
grep: Tool = _shared["grep"]
write_file: Tool = _shared["write_file"]
edit_file: Tool = _shared["edit_file"]
shell: Tool = _shared["shell"]
process: Tool = _shared["process"]
