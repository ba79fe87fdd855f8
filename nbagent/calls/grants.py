"""How wide an "Always allow" is: one table of scopes, the grant each makes, and the label that says so.

A grant is exactly as wide as its label (SECURITY.md, invariant 4). So the label a person reads on the
button and the grant the click makes come from the same function, `derived_grant`, which reads one table:

| tool                                   | scope     | "Always allow" grants                  | label                                   |
|----------------------------------------|-----------|----------------------------------------|-----------------------------------------|
| write_file, edit_file                  | `path`    | that one path (never what is inside it) | `write_file ./a.txt (this file only)`   |
| shell                                  | `command` | that exact command line                | `` `git status` (this exact command) `` |
| python                                 | `code`    | that exact code                        | `python: exactly this code`             |
| run_cell, process                      | `once`    | nothing: approve once only             | (no Always-allow button)                |
| insert_cell, edit_cell, delete_cell    | `tool`    | every call of the tool                 | `every edit_cell call`                  |
| read-only tools (read_file, grep, ...) | `tool`    | every call of the tool                 | `every read_file call`                  |
| any other tool                         | `pattern` when it suggests one, else `tool` | that pattern / every call | `` name(`pattern`) `` / `every name call` |

A suggested pattern wider than its call grants nothing (`covers_everything`): it is made from the call's
arguments, which the model wrote, so it never becomes the whole tool (approve once). Wider is decided by
behaviour: a wildcard pattern that matches any of a fixed set of unrelated probe subjects, under fnmatch or
the path matcher, so `*`, `?*` and `[!]]*` alike; `derived_grant` and `grant_scope` both apply it.

`run_cell` runs whatever the cell holds when it runs: a grant by cell id would let a later, unasked edit
run other code, so each run is asked. `process` writes to a background command's stdin (to a shell, that
is code) or kills it: each such call is asked (listing and polling are read-only). `python` and `shell` take code; their grants are never the whole
tool. A path grant is matched as that path only (`nbagent.tools.paths`, action "grant"): "Always allow" on a
folder does not cover the files in it; only a pattern that says `DIR/**` ("everything under DIR/")
does, and only an approver that asks for it (`Decision(scope="DIR/**")`) makes one.

An approver's own `Decision(scope=...)` is the approver's choice (code the person wrote) and is kept as
written; a `once` tool is never remembered whatever the decision says.

A batch (`agent.map`) runs the same prompt over many items, so a grant of one item's file covers no other
item's: there "Approve all calls like this" of a path tool is offered for the file's folder, `DIR/**`, labelled
"everything under DIR/" (`batch_grant`), and for anything else it is the same grant as above. A file in the
workspace's root keeps the one-file grant (the root's folder is the whole workspace). What is protected
(`.mcp.json`, `.git`, ...) still asks under any grant: the permission pipeline checks it before grants.

Reads what the model wrote: a call's arguments become the grant's pattern and the label's text. The label
shows that text through `nbagent.safety.sanitize.visible` (controls, bidi and invisible characters as
`⟨U+XXXX NAME⟩`, with a warning in `full`), and the pattern is the tool's own exact form of the call
(escaped globs, an anchored path), so what the model wrote cannot widen the grant beyond what is shown.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import fnmatch
import posixpath

from ..safety.shown import hidden_warnings, shown
from ..tools.paths import literal_glob, literal_path, match_path

__all__ = ["GRANT_SCOPES", "GrantLabel", "batch_grant", "covers_everything", "derived_grant", "grant_label", "grant_scope",
           "label_for", "scope_kind"]

GRANT_SCOPES: dict[str, str] = {
    "write_file": "path",
    "edit_file": "path",
    "shell": "command",
    "python": "code",
    "run_cell": "once",
    "process": "once",
    "insert_cell": "tool",
    "edit_cell": "tool",
    "delete_cell": "tool",
    "read_file": "tool",
    "list_files": "tool",
    "grep": "tool",
    "read_notebook": "tool",
    "list_variables": "tool",
    "inspect_variable": "tool",
    "history": "tool",
}
"""The scope of "Always allow" for each built-in tool (by name); any other tool is `pattern` or `tool`."""

_CODE_KINDS = frozenset({"command", "code"})


@dataclass(frozen=True, slots=True)
class GrantLabel:
    """What the Always-allow button says: `short` on the button, `full` (every character of the pattern,
    control and invisible characters shown) as its tooltip, and `pattern`, the grant's own (None: every
    call of the tool)."""

    short: str
    full: str
    pattern: str | None
    kind: str


def scope_kind(tool: Any) -> str:
    """The table's kind for a tool: `path`, `command`, `code`, `once`, `tool` or `pattern`."""
    name = getattr(tool, "name", "")
    kind = GRANT_SCOPES.get(name)
    if kind is not None and _is_builtin(tool):
        return kind
    return "pattern" if getattr(tool, "_suggest_grant", None) is not None else "tool"


def _is_builtin(tool: Any) -> bool:
    module = getattr(getattr(tool, "fn", None), "__module__", None) or ""
    return module.startswith(("nbagent.toolbox", "nbagent.jupyter"))


def derived_grant(tool: Any, suggested: str | None, scope: str | None = None) -> tuple[bool, str | None]:
    """What remembering an approval of this call grants: `(grants, pattern)`.

    `grants` is False when nothing is remembered (a `once` tool, or a code tool with no exact pattern);
    `pattern` None means every call of the tool. `scope` is an approver's explicit `Decision.scope`.
    """
    kind = scope_kind(tool)
    if kind == "once":
        return False, None
    if scope is not None:  # the approver said how wide
        return True, None if scope in ("*", "") else scope
    if kind == "tool":
        return True, None
    if suggested is None:  # the tool's own code says "the whole tool" (a path or code tool never does)
        return (False, None) if kind in _CODE_KINDS or kind == "path" else (True, None)
    if covers_everything(suggested):  # a suggestion made from the call's arguments never widens to the tool
        return False, None
    return True, suggested


# subjects no call's own grant should ever cover: other schemes, absolute paths, the empty string, unicode,
# control characters, a long random-looking one (used as call text and as workspace paths)
_PROBES: tuple[str, ...] = (
    "", " ", "a", "]", "[", "-", ".", "/", "/etc/passwd", "file:///x", "https://probe.invalid/p?q=1",
    "http://169.254.169.254/", "ftp://h/x", "C:\\Windows\\x", "rm -rf /", ".git/config", "probe-dir/sub/f.py",
    "\x00", "\x01z", "\n", "\u00c4\u00d6\u00df", "\u6f22\u5b57", "\U0001f600", "\uffff", "q7Zk0-vW_3x9",
    "z" * 5000 + "/" + "y" * 50,
)


def covers_everything(pattern: str) -> bool:
    """Whether a suggested pattern is wider than a call: decided by what it matches, not how it is spelled.
    A pattern with a wildcard that matches any subject unrelated to the call (`_PROBES`: other schemes,
    `/etc/passwd`, empty, unicode, very long), under either matcher grants use (`fnmatch` over the call's
    text and the path matcher), is made from what the model wrote: it grants nothing (approve once)."""
    if not pattern.strip(" \t\n\r./"):
        return True
    if literal_glob(pattern) is not None:  # names exactly one subject
        return False
    for spelling in {pattern, pattern.strip()}:  # where surrounding whitespace is dropped, count it dropped
        for probe in _PROBES:
            if fnmatch.fnmatchcase(probe, spelling):
                return True
            path = probe.replace("\x00", "")
            if path and match_path(spelling, path, contents=False):
                return True
    return False


def grant_scope(label: GrantLabel) -> str | None:
    """The `Decision.scope` that grants exactly what `label` says (`derived_grant` reads it back): its
    pattern, or `*` for a label that says "every NAME call"; None when its pattern is wider than a call
    (`covers_everything`: approve once). For a view that decides with a label in hand (the batch's
    "Approve all calls like ..."), so the grant is the label's and nothing else."""
    if label.pattern is None:
        return "*"
    return None if label.kind != "tool" and covers_everything(label.pattern) else label.pattern


def label_for(tool: Any, pattern: str | None, kind: str | None = None) -> GrantLabel:
    """The words for a grant of `pattern` on `tool` (what the button says, and the list of grants)."""
    name = shown(getattr(tool, "name", str(tool)))  # an MCP tool's name is the server's choice
    kind = kind or scope_kind(tool)
    if pattern is None:
        text = f"every {name} call"
        return GrantLabel(text, text, None, kind)
    seen, warnings = shown(pattern), hidden_warnings(pattern)
    note = (" " + " ".join(warnings)) if warnings else ""
    if kind == "code":
        code = shown(pattern.strip())
        lines = code.count("\n") + 1
        short = f"{name}: exactly this code" + (f" ({lines} lines)" if lines > 1 else "")
        return GrantLabel(short, f"{short}:\n{code}{note}", pattern, kind)
    if kind == "command":
        literal = literal_glob(pattern)
        if literal is not None:
            text = shown(literal)
            return GrantLabel(f"`{text}` (this exact command)", f"{name}: exactly the command `{text}`{note}",
                              pattern, kind)
        return GrantLabel(f"{name} commands matching `{seen}`", f"{name} commands matching `{seen}`{note}",
                          pattern, kind)
    path, under = literal_path(pattern)
    if path is not None and kind in ("path", "pattern", "tool"):
        path = shown(path)
        if under:
            text = f"{name}: everything under {path.rstrip('/')}/"
        else:
            text = f"{name} {path} (this {'file' if kind == 'path' else 'path'} only)"
        if kind == "path":
            return GrantLabel(text, text + note, pattern, kind)
    if kind == "path":
        text = f"{name} on paths matching `{seen}`"
        return GrantLabel(text, text + note, pattern, kind)
    text = f"{name}(`{seen}`)"
    return GrantLabel(text, f"{name} calls matching `{seen}`{note}", pattern, kind)


def grant_label(request: Any) -> GrantLabel | None:
    """The Always-allow label for an approval request (None: this call cannot be always allowed: the
    view shows no such button). Call it from every view that offers "Always allow"."""
    grants, pattern = derived_grant(request.tool, request.suggested_scope)
    if not grants:
        return None
    protected = getattr(request.tool, "protected_write_reason", None)
    arguments = getattr(request, "arguments", None)
    if protected is not None and isinstance(arguments, dict) and protected(arguments):
        return None  # configuration that runs code always asks: a grant would never be used
    return label_for(request.tool, pattern)


def batch_grant(request: Any) -> GrantLabel | None:
    """What "Approve all calls like this" grants in a batch (see the module's docstring): the folder of a path
    tool's file (`DIR/**`), else what `grant_label` grants. None: nothing can be granted (approve once)."""
    single = grant_label(request)
    if single is None or single.kind != "path" or single.pattern is None:
        return single
    path, under = literal_path(single.pattern)
    if path is None or under:
        return single
    folder = posixpath.dirname(posixpath.normpath(path.rstrip("/")))
    if folder in ("", ".", "/") or folder.startswith(".."):
        return single
    anchored = folder if folder.startswith(("./", "/")) else "./" + folder
    pattern = "".join(f"[{c}]" if c in "*?[" else c for c in anchored) + "/**"
    return label_for(request.tool, pattern)
