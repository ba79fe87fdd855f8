"""Importing `jsonschema` without the seconds one of its optional format checkers costs at import.

jsonschema's format checks import `rfc3987_syntax` when it is installed, and it is wherever Jupyter is
(`nbformat` and `jupyter_events` ask for `jsonschema[format-nongpl]`). That module builds about thirty
Earley parsers as it is imported: 2.7 s of CPU on a 2-core machine, measured, paid by the first `import
jsonschema` (or `import nbformat`) of a process: a kernel's first tool with a JSON Schema of its own (an MCP
server's), every test worker (python-jsonschema/jsonschema#1428 tells the same).

`import_jsonschema()` imports jsonschema with a stand-in for that module in `sys.modules` whose one name
jsonschema takes from it (`is_valid_syntax`) imports the real module when it is first called: the `iri` and
`iri-reference` formats are checked as before, by the same code, the first time a schema asks for them. The
stand-in is taken out of `sys.modules` as soon as jsonschema is imported, so any later `import rfc3987_syntax`
gets the real module (a thread of the process importing that module itself in the moment jsonschema is
imported would get the stand-in). Where the module is not installed, already imported, or jsonschema is, this
is a plain import. Code that imports `nbformat` calls it first (nbformat imports jsonschema).
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import threading
import types
from typing import Any

__all__ = ["import_jsonschema"]

_SLOW = "rfc3987_syntax"
_lock = threading.Lock()


def import_jsonschema() -> Any:
    """The `jsonschema` module, imported without building `rfc3987_syntax`'s parsers (see the module docstring)."""
    module = sys.modules.get("jsonschema")
    if module is not None:
        return module
    with _lock:
        if _SLOW in sys.modules or "jsonschema" in sys.modules or importlib.util.find_spec(_SLOW) is None:
            import jsonschema

            return jsonschema
        stand_in = types.ModuleType(_SLOW, "nbagent's stand-in while jsonschema is imported (the real module is "
                                           "imported at the first check of an IRI)")
        stand_in.is_valid_syntax = _is_valid_syntax  # type: ignore[attr-defined]
        sys.modules[_SLOW] = stand_in
        try:
            import jsonschema
        finally:
            if sys.modules.get(_SLOW) is stand_in:
                del sys.modules[_SLOW]
        return jsonschema


def _is_valid_syntax(term: str, value: str) -> bool:
    """`rfc3987_syntax.is_valid_syntax`, the real one, imported at its first call."""
    return importlib.import_module(_SLOW).is_valid_syntax(term, value)
