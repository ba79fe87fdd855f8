"""The default instructions of a notebook run: where the model is, what it has, what the user has defined.

They are computed when a run starts (`notebook_instructions(...)`), so the variable summary is current.
Everything here is bounded: a notebook with a thousand variables or a huge DataFrame still gives a short
prompt, and no object's `repr` is called unless the object is small and of a plain type.
"""

from __future__ import annotations

import inspect
import sys
import types
from pathlib import Path
from typing import Any, Iterable, Mapping

from nbagent.render.runs import one_line
from nbagent.safety.gate import piece_problem
from nbagent.safety.secrets import redact

__all__ = ["notebook_instructions", "summarise_value", "summarise_variables"]

MAX_LINE = 160
"""Characters per variable line."""
MAX_SUMMARY = 4000
"""Characters of the whole variable summary."""
_SKIP = frozenset({"In", "Out", "exit", "quit", "get_ipython"})
_PLAIN = (int, float, complex, bool, type(None))


def _first_doc_line(obj: Any) -> str:
    doc = inspect.getdoc(obj) or ""
    return doc.strip().splitlines()[0] if doc.strip() else ""


def _signature(fn: Any) -> str:
    for eval_str in (True, False):  # annotations as written, also under `from __future__ import annotations`
        try:
            return str(inspect.signature(fn, eval_str=eval_str))
        except Exception:
            continue
    return "(...)"


def summarise_value(value: Any) -> str:
    """One short line describing a value, without calling anything expensive on it."""
    from nbagent.tools.definition import Tool

    if isinstance(value, Tool):
        props = ", ".join(value.parameters.get("properties", {}))
        doc = value.description.strip().splitlines()[0] if value.description.strip() else ""
        return f"tool {value.name}({props})" + (f": {doc}" if doc else "")
    if isinstance(value, _PLAIN):
        return redact(f"{type(value).__name__} = {value!r}")
    if isinstance(value, str):
        if len(value) >= 2 and piece_problem(value):  # a slice of a key too short to be recognised: the value is not sent
            return f"str of {len(value):,} characters (not shown: it could be part of a credential)"
        value = redact(value)  # whole, before the cut: a piece of a key is no longer recognised as one
        return f"str of {len(value):,} characters: {value[:60]!r}" + ("…" if len(value) > 60 else "")
    if isinstance(value, (bytes, bytearray)):
        return f"{type(value).__name__} of {len(value):,} bytes"
    if isinstance(value, (list, tuple, set, frozenset, dict)):
        kind = type(value).__name__
        n = len(value)
        if isinstance(value, dict):
            keys = redact(", ".join(repr(k) for k in list(value)[:8] if isinstance(k, (str, int))))
            return f"dict of {n:,} item{'s' if n != 1 else ''}" + (f" (keys: {keys}{', …' if n > 8 else ''})" if keys else "")
        return f"{kind} of {n:,} item{'s' if n != 1 else ''}"
    if inspect.isfunction(value) or inspect.isbuiltin(value) or inspect.ismethod(value):
        sig = _signature(value)
        doc = _first_doc_line(value)
        return f"function{sig}" + (f": {doc}" if doc else "")
    if inspect.isclass(value):
        doc = _first_doc_line(value)
        return f"class {value.__name__}" + (f": {doc}" if doc else "")
    type_name = type(value).__name__
    module = type(value).__module__ or ""
    if module.startswith("pandas") and type_name == "DataFrame":
        try:
            rows, cols = value.shape
            columns = ", ".join(f"{c} ({t})" for c, t in list(value.dtypes.astype(str).items())[:12])
            more = ", …" if cols > 12 else ""
            return f"pandas DataFrame, {rows:,} rows × {cols} columns: {columns}{more}"
        except Exception:
            return "pandas DataFrame"
    if module.startswith("pandas") and type_name == "Series":
        try:
            return f"pandas Series {value.name!r}, {len(value):,} values, dtype {value.dtype}"
        except Exception:
            return "pandas Series"
    if module.startswith("numpy") and type_name == "ndarray":
        try:
            return f"numpy array, shape {value.shape}, dtype {value.dtype}"
        except Exception:
            return "numpy array"
    shape = getattr(value, "shape", None)
    if isinstance(shape, tuple):
        return f"{module}.{type_name}, shape {shape}"
    return f"{module + '.' if module and module != 'builtins' else ''}{type_name}"


def _imported_from(value: Any) -> str | None:
    """The module a function or class was imported from ('nbagent.tools'), None if the notebook defined it."""
    if not (inspect.isfunction(value) or inspect.isbuiltin(value) or inspect.isclass(value)):
        return None
    module = getattr(value, "__module__", None)
    if not module or module == "__main__" or module.startswith("__"):
        return None
    top = module.split(".")[0]
    return top if top != "builtins" else "builtins"


def summarise_variables(
    namespace: Mapping[str, Any], *, hidden: Iterable[str] = (), limit: int = 40, max_chars: int = MAX_SUMMARY
) -> str:
    """The user's variables, newest last, one line each: at most `limit` lines and `max_chars` characters."""
    hidden = set(hidden)
    modules: list[str] = []
    imported: list[str] = []
    lines: list[str] = []
    for name, value in list(namespace.items()):
        if name.startswith("_") or name in _SKIP or name in hidden:
            continue
        if isinstance(value, types.ModuleType):
            modules.append(name if value.__name__ == name else f"{name} ({value.__name__})")
            continue
        origin = _imported_from(value)
        if origin is not None:  # `from nbagent import tool`: a name the user imported, not one they made
            imported.append(name if origin == name else f"{name} ({origin})")
            continue
        try:
            text = summarise_value(value)
        except Exception:
            text = type(value).__name__
        lines.append(one_line(f"- {name}: {text}", MAX_LINE))
    dropped = max(0, len(lines) - limit)
    lines = lines[-limit:] if limit > 0 else []
    while lines and sum(len(line) + 1 for line in lines) > max_chars:
        lines.pop(0)
        dropped += 1
    out = []
    if dropped:
        out.append(f"({dropped} older variables not listed)")
    out.extend(lines)
    if modules:
        out.append(one_line("Imported modules: " + ", ".join(modules[-30:]), max_chars // 4))
    if imported:
        out.append(one_line("Imported names: " + ", ".join(imported[-30:]), max_chars // 4))
    return "\n".join(out) if out else "(none yet)"


def notebook_instructions(
    *,
    workspace: Path,
    tools: Iterable[Any],
    namespace: Mapping[str, Any],
    hidden: Iterable[str] = (),
    max_variables: int = 40,
) -> str:
    """The system prompt of a notebook run."""
    from nbagent.tools.definition import Tool

    tool_lines = []
    for t in tools:
        if isinstance(t, Tool):
            doc = t.description.strip().splitlines()[0] if t.description.strip() else ""
            tool_lines.append(one_line(f"- {t.name}" + (f": {doc}" if doc else ""), MAX_LINE))
    tools_text = "\n".join(tool_lines) if tool_lines else "(none: answer from what you know and what is said here)"
    version = ".".join(map(str, sys.version_info[:3]))
    variables = summarise_variables(namespace, hidden=hidden, limit=max_variables)
    return f"""\
You are an assistant working inside a live Jupyter notebook: an IPython kernel (Python {version}) that the \
user is using at the same time. The user reads your answer in the notebook, rendered as Markdown.

Workspace (the working directory; file tools cannot leave it): {workspace}

Your tools:
{tools_text}

The user's variables in the kernel right now:
{variables}

Work with what is already in the kernel rather than guessing: inspect a variable before you describe it. Code \
run through your tools runs in the user's kernel, so its variables persist and the user sees them; do not \
overwrite the user's variables unless asked. Some calls wait for the user's approval; if one is denied, take \
the reason into account and do not retry the same call. Keep answers short and concrete."""
