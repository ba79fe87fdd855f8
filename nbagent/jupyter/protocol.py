"""The comm protocols, written once: one JSON Schema per comm, beside the room that speaks it.

    nbagent/jupyter/notebook/protocol.json   the `nbagent.notebook` comm (the kernel asks the page)
    nbagent/jupyter/panel/protocol.json      the `nbagent.panel` comm (the page asks the kernel)

The page's TypeScript types are generated from the same files (frontend/scripts/protocol.mjs, checked by a
test), and the kernel checks what the page sends against them (`problem`, with protocol_check.py): a message
is taken only in a shape its schema names, and refused with why, in words, otherwise. The tests check every
message the kernel sends against them too.
"""

from __future__ import annotations

import functools
import json
from importlib import resources
from typing import Any

from .protocol_check import Check

__all__ = ["ROOMS", "definition", "problem", "request_ops", "schema"]

ROOMS = ("notebook", "panel")


@functools.cache
def schema(room: str) -> dict[str, Any]:
    """The JSON Schema of a room's comm (its `$defs` name every message and part of one)."""
    if room not in ROOMS:
        raise ValueError(f"no comm protocol for {room!r} (there are: {', '.join(ROOMS)})")
    text = resources.files(f"nbagent.jupyter.{room}").joinpath("protocol.json").read_text(encoding="utf-8")
    return json.loads(text)


@functools.cache
def _validator(room: str, name: str) -> Check:
    """The check of one definition (protocol_check.py: the protocols' keywords with jsonschema's semantics,
    without importing jsonschema, whose import costs a kernel seconds at the panel's first message)."""
    whole = schema(room)
    if name not in whole["$defs"]:
        raise KeyError(f"the {room} protocol defines no {name!r}")
    # the definition, with the whole schema around it so its $refs resolve
    return Check({**whole, "$ref": f"#/$defs/{name}"})


def definition(room: str, name: str) -> dict[str, Any]:
    """One definition of a room's schema (`$defs[name]`)."""
    return schema(room)["$defs"][name]


@functools.cache
def request_ops(room: str, union: str) -> dict[str, str]:
    """The ops of a union of requests (`PageRequest`, `KernelRequest`), each with its definition's name."""
    ops = {}
    for branch in definition(room, union)["oneOf"]:
        name = branch["$ref"].rsplit("/", 1)[1]
        ops[definition(room, name)["properties"]["op"]["const"]] = name
    return ops


def problem(room: str, name: str, message: Any) -> str | None:
    """Why `message` is not a `name` of the room's protocol, in a few words (None: it is one)."""
    errors = list(_validator(room, name).iter_errors(message))
    return _words(_pick(errors), definition(room, name)) if errors else None


def _pick(errors: list[Any]) -> Any:
    """The error to tell: the outermost (a list that is too long, before what is wrong in its first item); in
    an anyOf, what the branch that was meant wanted (not the branch whose very type differs, such as null)."""
    best = min(errors, key=lambda e: len(e.absolute_path))
    if best.context:
        depth = len(best.absolute_path)
        meant = [e for e in best.context if e.validator != "type" or len(e.absolute_path) > depth]
        return _pick(meant or list(best.context))
    return best


def _at(spec: Any, path: list[Any]) -> Any:
    for step in path:
        spec = spec[step]
    return spec


def _where(error: Any) -> str:
    parts = [str(p) if isinstance(p, str) else f"[{p}]" for p in error.absolute_path]
    return ".".join(parts).replace(".[", "[") or "the message"


def _words(error: Any, spec: dict[str, Any]) -> str:
    """A validation error as a reader wants it: what is wrong, and where (`spec`: the definition checked)."""
    where, kind, instance = _where(error), error.validator, error.instance
    if kind == "required":
        missing = [name for name in error.validator_value if isinstance(instance, dict) and name not in instance]
        said = ", ".join(missing) if where == "the message" else f"{where}.{missing[0]}"
        path = list(error.absolute_schema_path)
        if "then" in path:  # required only with some value of another field: say which
            condition = _at(spec, path[:path.index("then")]).get("if", {}).get("properties", {})
            return f"{said} is missing (this {', '.join(condition) or 'request'} needs it)"
        return f"{said} is missing"
    if kind == "additionalProperties" and isinstance(instance, dict):
        known = set(error.schema.get("properties", {}))
        return f"{'unknown fields' if where == 'the message' else where + ' has unknown fields'} {sorted(set(instance) - known)}"
    if kind in ("maxLength", "maxItems"):
        return f"{where} is too long"
    if kind == "enum":
        return f"{where} must be one of {', '.join(map(str, error.validator_value))}"
    if kind == "const":
        return f"{where} must be {error.validator_value!r}"
    return f"{where} has the wrong type"
