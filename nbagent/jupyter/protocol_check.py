"""The JSON Schema keywords the comm protocols use, checked in the kernel without importing `jsonschema`.

`jsonschema` builds the grammars of its optional format checkers when it is imported (rfc3987-syntax: about two
seconds of CPU), which a kernel would pay at the panel's first message. The protocols are our own two files
and use a small part of JSON Schema (2020-12): `type`, `properties`, `required`, `additionalProperties`,
`items`, `const`, `enum`, `anyOf`, `oneOf`, `if`/`then`/`else`, `minimum`, `minLength`, `maxLength`,
`maxItems`, `pattern` and local `$ref`s. `Check` walks those with jsonschema's semantics and gives errors with
the fields `protocol._words` reads (`validator`, `validator_value`, `instance`, `absolute_path`,
`absolute_schema_path`, `schema`, `context`), in jsonschema's order. A keyword outside the list is refused
when the check is made (so a schema that grows one fails loudly, never checks less); tests/jupyter/
test_protocol.py checks both protocols with both engines, message by message and word by word.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any, Iterator

__all__ = ["Check", "SchemaError"]

ANNOTATIONS = frozenset({"$schema", "$id", "$defs", "title", "description", "note"})
KEYWORDS = frozenset({"$ref", "type", "properties", "required", "additionalProperties", "items", "const", "enum",
                      "anyOf", "oneOf", "if", "then", "else", "minimum", "minLength", "maxLength", "maxItems",
                      "pattern"})


class SchemaError(ValueError):
    """The schema uses a keyword this check does not know."""


@dataclasses.dataclass
class Error:
    validator: str
    validator_value: Any
    instance: Any
    absolute_path: tuple[Any, ...]
    absolute_schema_path: tuple[Any, ...]
    schema: dict[str, Any]
    context: list[Error] = dataclasses.field(default_factory=list)


def _is(kind: str, value: Any) -> bool:
    if kind == "integer":
        return (isinstance(value, int) and not isinstance(value, bool)) or (
            isinstance(value, float) and value.is_integer())
    if kind == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    types = {"string": str, "object": dict, "array": list, "boolean": bool, "null": type(None)}
    if kind not in types:
        raise SchemaError(f"unknown type {kind!r}")
    return isinstance(value, types[kind])


def _equal(a: Any, b: Any) -> bool:
    """JSON equality, as jsonschema's: true is not 1, 1 is 1.0, containers compared item by item."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_equal(a[k], b[k]) for k in a)
    if isinstance(a, (list, dict)) or isinstance(b, (list, dict)):
        return False
    return bool(a == b)


class Check:
    """A check of instances against one schema (`root`), whose `$ref`s point into it (`#/$defs/...`)."""

    def __init__(self, root: dict[str, Any]) -> None:
        self.root = root
        self._known(root)

    def _known(self, schema: Any) -> None:
        if isinstance(schema, bool):
            return
        unknown = set(schema) - KEYWORDS - ANNOTATIONS
        if unknown:
            raise SchemaError(f"the protocol check does not know the keywords {sorted(unknown)}")
        for key, value in schema.items():
            if key in ("properties", "$defs"):
                for sub in value.values():
                    self._known(sub)
            elif key in ("anyOf", "oneOf"):
                for sub in value:
                    self._known(sub)
            elif key in ("items", "if", "then", "else", "additionalProperties"):
                self._known(value)
            elif key == "$ref" and not value.startswith("#/"):
                raise SchemaError(f"only local references are checked here, not {value!r}")

    def _resolve(self, ref: str) -> Any:
        node: Any = self.root
        for step in ref[2:].split("/"):
            node = node[step.replace("~1", "/").replace("~0", "~")]
        return node

    def is_valid(self, instance: Any) -> bool:
        return next(self.iter_errors(instance), None) is None

    def iter_errors(self, instance: Any, schema: Any = None, path: tuple[Any, ...] = (),
                    spath: tuple[Any, ...] = ()) -> Iterator[Error]:
        schema = self.root if schema is None else schema
        if schema is True:
            return
        if schema is False:
            yield Error("false", False, instance, path, spath, {})
            return
        for key, value in schema.items():
            if key not in KEYWORDS:
                continue
            yield from getattr(self, "_" + key.lstrip("$"))(value, instance, schema, path, spath + (key,))

    def _error(self, key: str, value: Any, instance: Any, schema: Any, path: tuple, spath: tuple,
               context: list[Error] | None = None) -> Error:
        return Error(key, value, instance, path, spath, schema, context or [])

    def _ref(self, value, instance, schema, path, spath):
        yield from self.iter_errors(instance, self._resolve(value), path, spath[:-1])  # as jsonschema: no step

    def _type(self, value, instance, schema, path, spath):
        if not any(_is(kind, instance) for kind in ([value] if isinstance(value, str) else value)):
            yield self._error("type", value, instance, schema, path, spath)

    def _properties(self, value, instance, schema, path, spath):
        if isinstance(instance, dict):
            for name, sub in value.items():
                if name in instance:
                    yield from self.iter_errors(instance[name], sub, path + (name,), spath + (name,))

    def _required(self, value, instance, schema, path, spath):
        if isinstance(instance, dict):
            for name in value:
                if name not in instance:
                    yield self._error("required", value, instance, schema, path, spath)

    def _additionalProperties(self, value, instance, schema, path, spath):
        if not isinstance(instance, dict):
            return
        extras = [name for name in instance if name not in schema.get("properties", {})]
        if value is False:
            if extras:
                yield self._error("additionalProperties", value, instance, schema, path, spath)
        else:
            for name in extras:
                yield from self.iter_errors(instance[name], value, path + (name,), spath)

    def _items(self, value, instance, schema, path, spath):
        if isinstance(instance, list):
            for i, item in enumerate(instance):
                yield from self.iter_errors(item, value, path + (i,), spath)

    def _const(self, value, instance, schema, path, spath):
        if not _equal(instance, value):
            yield self._error("const", value, instance, schema, path, spath)

    def _enum(self, value, instance, schema, path, spath):
        if not any(_equal(instance, choice) for choice in value):
            yield self._error("enum", value, instance, schema, path, spath)

    def _branches(self, value, instance, path, spath) -> tuple[list[Error], int]:
        context, valid = [], 0
        for i, sub in enumerate(value):
            errors = list(self.iter_errors(instance, sub, path, spath + (i,)))
            context += errors
            valid += not errors
        return context, valid

    def _anyOf(self, value, instance, schema, path, spath):
        context, valid = self._branches(value, instance, path, spath)
        if not valid:
            yield self._error("anyOf", value, instance, schema, path, spath, context)

    def _oneOf(self, value, instance, schema, path, spath):
        context, valid = self._branches(value, instance, path, spath)
        if valid != 1:
            yield self._error("oneOf", value, instance, schema, path, spath, context if not valid else [])

    def _if(self, value, instance, schema, path, spath):
        branch = "then" if next(self.iter_errors(instance, value, path, spath), None) is None else "else"
        if branch in schema:
            yield from self.iter_errors(instance, schema[branch], path, spath[:-1] + (branch,))

    def _then(self, value, instance, schema, path, spath):
        return iter(())  # applied by `if`

    _else = _then

    def _minimum(self, value, instance, schema, path, spath):
        if _is("number", instance) and instance < value:
            yield self._error("minimum", value, instance, schema, path, spath)

    def _minLength(self, value, instance, schema, path, spath):
        if isinstance(instance, str) and len(instance) < value:
            yield self._error("minLength", value, instance, schema, path, spath)

    def _maxLength(self, value, instance, schema, path, spath):
        if isinstance(instance, str) and len(instance) > value:
            yield self._error("maxLength", value, instance, schema, path, spath)

    def _maxItems(self, value, instance, schema, path, spath):
        if isinstance(instance, list) and len(instance) > value:
            yield self._error("maxItems", value, instance, schema, path, spath)

    def _pattern(self, value, instance, schema, path, spath):
        if isinstance(instance, str) and re.search(value, instance) is None:
            yield self._error("pattern", value, instance, schema, path, spath)
