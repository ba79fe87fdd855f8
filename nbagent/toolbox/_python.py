"""Tools over the user's namespace: python (run code), list_variables, inspect_variable, history.

`python` runs code through a `PythonRunner` (see `_runner` for where and why it runs on a worker thread).
The model gets a bounded text of what happened (stdout, stderr, displays, the value of the last
expression, or a trimmed traceback) and a PNG of each figure; `details` keeps the live object: the value
of the last expression when there is one (a DataFrame stays a DataFrame), else the single figure the
code made, else the whole `Execution`.
"""

from __future__ import annotations

import ast
import base64
import contextlib
import fnmatch
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field

from ..context import ToolContext
from ..messages import ImageBlock, TextBlock, ToolResult
from ..reprs import shortened
from ..tools.definition import Tool
from ._binding import Binding, read_denied_check
from ._guard import guard_reads
from ._runner import Execution
from ._values import credential_holder, cut, image_of, inspect_text, is_figure, summary, text_form, type_name
from ._workspace import WorkspaceError

__all__ = ["execution_result", "make_namespace_tools"]

MAX_STDOUT = 20_000
MAX_STDERR = 8_000
MAX_IMAGES = 4
"""Images (figures, displayed PNGs) the model gets from one call."""

# parameter types made once: a `Field` made in each call of a tool factory would rebuild its model (tools/schemas.py)
_HISTORY_LIMIT = Annotated[int, Field(ge=1, le=50)]
_HISTORY_OFFSET = Annotated[int, Field(ge=0)]


def _short_code(code: str, n: int = 50) -> str:
    for line in code.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            return shortened(line, n)
    return "code"


def execution_result(ex: Execution) -> ToolResult:
    """The result the model gets for one execution (`details` as the module docstring says)."""
    parts: list[str] = []
    images: list[ImageBlock] = []
    extra_images = 0
    if ex.stdout:
        parts.append(cut(ex.stdout.rstrip("\n"), MAX_STDOUT, what="characters of output"))
    if ex.stderr:
        parts.append("[stderr]\n" + cut(ex.stderr.rstrip("\n"), MAX_STDERR, what="characters of output"))
    for output in ex.outputs:
        data = output.get("data") or {}
        png = data.get("image/png")
        if png is not None:
            if len(images) < MAX_IMAGES:
                try:
                    raw = base64.b64decode(png) if isinstance(png, str) else bytes(png)
                    images.append(ImageBlock(raw, "image/png"))
                except Exception:
                    pass
            else:
                extra_images += 1
        text = data.get("text/plain")
        if text:
            parts.append("[display] " + cut(str(text), 4000))
        elif png is None and data:
            parts.append(f"[display of {', '.join(sorted(data))}]")
    for fig in ex.figures:
        parts.append("[figure] " + text_form(fig))
        if len(images) < MAX_IMAGES:
            png = image_of(fig)
            if png:
                images.append(ImageBlock(png, "image/png"))
        else:
            extra_images += 1
    if ex.error is not None:
        parts.append(ex.traceback.rstrip("\n") or f"{type(ex.error).__name__}: {ex.error}")
    elif ex.has_value:
        parts.append("Out: " + text_form(ex.value))
        if not is_figure(ex.value) or ex.value not in ex.figures:
            png = image_of(ex.value)
            if png and len(images) < MAX_IMAGES:
                images.append(ImageBlock(png, "image/png"))
    if extra_images:
        parts.append(f"[{extra_images} more image(s) not shown]")
    if not parts:
        parts.append("(done: no output and no value)")
    content: list[Any] = [TextBlock("\n".join(parts))]
    content.extend(images)
    if ex.error is not None:
        details: Any = ex
    elif ex.has_value:
        details = ex.value
    elif len(ex.figures) == 1 and not ex.outputs:
        details = ex.figures[0]
    else:
        details = ex
    return ToolResult(content, details=details, is_error=ex.error is not None)


def make_namespace_tools(binding: Binding, *, python_timeout: float | None = None) -> dict[str, Tool]:
    """python, list_variables, inspect_variable and history, working in the binding's namespace."""

    # -- python ---------------------------------------------------------------------------------------------
    def python(code: str, ctx: ToolContext = None) -> ToolResult:  # type: ignore[assignment]
        """Run Python code in the user's namespace (the notebook's variables are there, and what the code
        defines stays there). Prints, displays and the value of the last expression are returned;
        matplotlib figures come back as images. Use it to look at data, compute, and plot.

        Args:
            code: the Python code to run; a final expression's value is shown, as in a notebook cell.
        """
        runner = binding.runner_for(ctx)
        denied = read_denied_check(ctx)
        root = None
        if denied is not None:
            try:
                root = binding.workspace_for(ctx).root
            except WorkspaceError:
                root = Path.cwd()
        with guard_reads(root, denied) if root is not None else contextlib.nullcontext():
            execution = runner.run(code, ctx)
        if ctx is not None:
            ctx.state_change = execution.state_change  # the call's record keeps what the code did to the names
        return execution_result(execution)

    python_tool = Tool(
        python,
        rule_matcher=_code_matcher,
        suggest_grant=lambda args: args.get("code") if isinstance(args.get("code"), str) else None,  # exactly it
        destructive=True,
        capability="execute",
        execution_mode="sequential",
        timeout=python_timeout,
        describe_activity=lambda a: f"Running Python: {_short_code(a.code)}",
        describe_completed_activity=_python_done,
    )
    python_tool.badge = "runs code"  # the view's word for it: not every call of it is destructive

    # -- list_variables ----------------------------------------------------------------------------------------
    def list_variables(ctx: ToolContext = None) -> ToolResult:  # type: ignore[assignment]
        """List the variables in the user's namespace: name, type and shape or length (no contents).
        Use inspect_variable for a closer look at one."""
        runner = binding.runner_for(ctx)
        variables = runner.variables()
        modules = sorted(k for k, v in variables.items() if type(v).__name__ == "module")
        rows = []
        for name, value in sorted(variables.items()):
            if name in modules:
                continue
            rows.append(f"{name}: {type_name(value)} — {summary(value)}")
        shown = rows[:200]
        text = "\n".join(shown) if shown else "(no variables)"
        if len(rows) > 200:
            text += f"\n[... and {len(rows) - 200} more]"
        if modules:
            text += "\nmodules: " + ", ".join(modules[:60])
        return ToolResult([TextBlock(cut(text, 20_000))], details=sorted(variables))

    list_tool = Tool(
        list_variables, read_only=True,
        describe_activity=lambda a: "Listing variables",
        describe_completed_activity=lambda a, r: f"Listed {len(r)} variables" if isinstance(r, list) else "Listed variables",
    )

    # -- inspect_variable -------------------------------------------------------------------------------------
    def inspect_variable(name: str, ctx: ToolContext = None) -> ToolResult:  # type: ignore[assignment]
        """Look closer at one variable of the user's namespace: type, shape, dtypes, length, the first
        rows or items, and a bounded repr. Attributes and items can be named too: `df.columns`,
        `config["model"]`, `results[0]`.

        Args:
            name: a variable name, optionally followed by `.attribute` and `[literal key]` parts.
        """
        runner = binding.runner_for(ctx)
        try:
            chain = _lookup_chain(runner.namespace, name)
        except LookupError as exc:
            return ToolResult([TextBlock(str(exc))], is_error=True)
        value = chain[-1][1]
        problem = next(filter(None, (credential_holder(v, n) for n, v in chain)), None)
        if problem and ctx is not None:  # checked again now: the value may have changed since it was allowed
            ctx.derived_from(f"{name.strip()[:80]}: {problem}")
        return ToolResult([TextBlock(inspect_text(name.strip(), value))], details=value)

    def inspect_reads_no_credential(args: Any, ctx: Any = None) -> bool:
        """Auto-allowed only when no value on the path is or holds a credential (`credential_holder`):
        `os.environ`, a client holding its key, a config with a token ask first."""
        name = args.get("name")
        if not isinstance(name, str):
            return False
        try:
            chain = _lookup_chain(binding.runner_for(ctx).namespace, name)
        except LookupError:
            return True  # it will only say that there is no such value
        return not any(credential_holder(v, n) for n, v in chain)

    inspect_tool = Tool(
        inspect_variable, capability="read", read_only_call=inspect_reads_no_credential,
        describe_activity=lambda a: f"Inspecting {a.name[:40]}",
        describe_completed_activity=lambda a, r: f"Inspected {a.name[:40]}",
    )

    # -- history ---------------------------------------------------------------------------------------------
    def history(
        limit: _HISTORY_LIMIT = 10,
        offset: _HISTORY_OFFSET = 0,
        ctx: ToolContext = None,  # type: ignore[assignment]
    ) -> ToolResult:
        """Show what was run in this session so far, most recent first: the notebook's cells with their
        outputs (or, outside a notebook, the code run with the python tool).

        Args:
            limit: how many entries to show.
            offset: skip this many of the most recent entries (to page back further).
        """
        source = binding.history_for(ctx)
        entries, total = source.page(limit, offset)
        if not entries:
            text = "(nothing in the history yet)" if total == 0 else f"(no entries past {offset}; there are {total})"
            return ToolResult([TextBlock(text)], details=[])
        blocks = []
        for entry in entries:
            label = "In" if entry.kind == "user" else "Agent"
            block = f"{label} [{entry.number}]:\n{cut(entry.source.rstrip(), 2000)}"
            if entry.output:
                block += f"\nOut [{entry.number}]: {cut(entry.output, 600)}"
            blocks.append(block)
        text = "\n\n".join(blocks)
        shown_to = offset + len(entries)
        if shown_to < total:
            text += (f"\n\n[entries {offset + 1}-{shown_to} of {total}, most recent first; "
                     f"call history(limit={limit}, offset={shown_to}) for older ones]")
        return ToolResult([TextBlock(cut(text, 30_000))], details=entries)

    history_tool = Tool(
        history, read_only=True,
        describe_activity=lambda a: "Reading the history",
        describe_completed_activity=lambda a, r: f"Read {len(r)} history entries" if isinstance(r, list) else "Read the history",
    )
    return {t.name: t for t in (python_tool, list_tool, inspect_tool, history_tool)}


def _code_matcher(pattern: str, args: Any, action: str = "allow") -> bool:
    """`python(pattern)` rules: a deny rule is a glob over the code (`python(*os.system*)`); an allow rule,
    ask rule or grant covers exactly the code it spells, never code that merely starts like it (so
    `allow: python(print*)` does not allow `print(1); import shutil; shutil.rmtree(...)`)."""
    code = args.get("code")
    if not isinstance(code, str):
        return action == "deny"
    if action == "deny":
        return fnmatch.fnmatchcase(code, pattern) or fnmatch.fnmatchcase(code.strip(), pattern)
    return code.strip() == pattern.strip()


def _python_done(args: Any, result: Any) -> str:
    if isinstance(result, Execution) and result.error is not None:
        return f"Python raised {type(result.error).__name__}"
    if isinstance(result, ToolResult):
        return "Ran Python"
    return f"Ran Python: {_short_code(args.code)}"


def _lookup(namespace: dict[str, Any], expression: str) -> Any:
    """`name`, `name.attr`, `name["key"]`, `name[0]`: evaluated without running any code but attribute
    and item access (no calls, no operators)."""
    return _lookup_chain(namespace, expression)[-1][1]


def _lookup_chain(namespace: dict[str, Any], expression: str) -> list[tuple[str, Any]]:
    """Each value on the way to `expression`, with the name or key it was reached by."""
    text = expression.strip()
    try:
        node = ast.parse(text, mode="eval").body
    except SyntaxError:
        raise LookupError(f"{expression!r} is not a variable name (use a name like df, df.columns or d['key'])") from None
    chain: list[tuple[str, Any]] = []
    _resolve(namespace, node, text, chain)
    return chain


def _resolve(namespace: dict[str, Any], node: ast.AST, text: str, chain: list | None = None) -> Any:
    chain = [] if chain is None else chain
    value = _resolve_one(namespace, node, text, chain)
    label = node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else ""
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
        label = str(node.slice.value)
    chain.append((label, value))
    return value


def _resolve_one(namespace: dict[str, Any], node: ast.AST, text: str, chain: list) -> Any:
    if isinstance(node, ast.Name):
        if node.id not in namespace:
            raise LookupError(f"there is no variable {node.id!r} in the namespace (list_variables shows what there is)")
        return namespace[node.id]
    if isinstance(node, ast.Attribute):
        if node.attr.startswith("__"):
            raise LookupError(f"{text!r}: special attributes (__...__) cannot be inspected")
        base = _resolve(namespace, node.value, text, chain)
        try:
            return getattr(base, node.attr)
        except Exception as exc:
            raise LookupError(f"{text!r}: {type(exc).__name__}: {exc}") from None
    if isinstance(node, ast.Subscript):
        base = _resolve(namespace, node.value, text, chain)
        try:
            key = ast.literal_eval(node.slice)
        except ValueError:
            raise LookupError(f"{text!r}: only literal keys (strings, numbers) can be used in [...]") from None
        if isinstance(base, (str, bytes, bytearray, memoryview)):  # pieces of a string: inspect it whole
            raise LookupError(f"{text!r}: a string is inspected whole, not by index")
        try:
            return base[key]
        except Exception as exc:
            raise LookupError(f"{text!r}: {type(exc).__name__}: {exc}") from None
    raise LookupError(f"{text!r} is not a variable name (use a name like df, df.columns or d['key'])")
