"""Tool schemas rewritten for providers that accept less than JSON Schema.

    strict_schema(schema)    OpenAI strict mode: every property required (the optional ones nullable),
                             `additionalProperties: false`, recursively
    openapi_schema(schema)   Gemini's older `parameters`: the OpenAPI 3.0 subset (refs inlined, nullable,
                             string enums only, unknown keywords dropped)
"""

from __future__ import annotations

import copy
import json
from typing import Any

__all__ = ["openapi_schema", "strict_schema"]


def strict_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """A copy of `schema` as strict mode demands: in every object schema every property is required
    (the ones that were optional accept null instead) and `additionalProperties` is false; applied
    recursively through properties, items, `anyOf`/`allOf`/`oneOf`, `$defs` and `definitions`."""
    schema = copy.deepcopy(schema)
    _strict(schema)
    return schema


def _strict(node: Any) -> None:
    if isinstance(node, list):
        for item in node:
            _strict(item)
        return
    if not isinstance(node, dict):
        return
    for key in ("$defs", "definitions", "properties", "patternProperties"):
        sub = node.get(key)
        if isinstance(sub, dict):
            for value in sub.values():
                _strict(value)
    for key in ("items", "prefixItems", "anyOf", "allOf", "oneOf", "not", "additionalItems"):
        if key in node:
            _strict(node[key])
    is_object = node.get("type") == "object" or (isinstance(node.get("type"), list) and "object" in node["type"]) \
        or "properties" in node
    if not is_object:
        return
    props = node.setdefault("properties", {})
    required = set(node.get("required") or [])
    for name, prop in props.items():
        if name not in required and isinstance(prop, dict):
            props[name] = _nullable(prop)
    node["required"] = list(props)
    node["additionalProperties"] = False


def _nullable(schema: dict[str, Any]) -> dict[str, Any]:
    """`schema` also accepting null."""
    kind = schema.get("type")
    if isinstance(kind, str):
        if kind != "null":
            schema = {**schema, "type": [kind, "null"]}
            if isinstance(schema.get("enum"), list) and None not in schema["enum"]:
                schema["enum"] = [*schema["enum"], None]
        return schema
    if isinstance(kind, list):
        return schema if "null" in kind else {**schema, "type": [*kind, "null"]}
    if isinstance(schema.get("anyOf"), list):
        if any(isinstance(s, dict) and s.get("type") == "null" for s in schema["anyOf"]):
            return schema
        return {**schema, "anyOf": [*schema["anyOf"], {"type": "null"}]}
    if "$ref" in schema:
        rest = {k: v for k, v in schema.items() if k != "$ref"}
        return {"anyOf": [{"$ref": schema["$ref"]}, {"type": "null"}], **{k: v for k, v in rest.items()
                                                                          if k in ("description", "title")}}
    return schema


_OPENAPI_KEYS = {
    "type", "format", "title", "description", "nullable", "enum", "maxItems", "minItems", "properties", "required",
    "minProperties", "maxProperties", "minLength", "maxLength", "pattern", "example", "anyOf", "propertyOrdering",
    "default", "items", "minimum", "maximum",
}
"""The Schema fields the older `parameters` accepts; everything else is dropped."""


def openapi_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """A JSON Schema as the OpenAPI 3.0 subset Gemini's `parameters` accepts.

    `$ref`s are inlined from `$defs`/`definitions` (a recursive reference becomes a plain object),
    `const` becomes a one-value `enum`, `["T", "null"]` types and `anyOf` with null become
    `nullable`, `oneOf` becomes `anyOf`, `allOf` of one schema is merged, non-string enums are kept in the
    description, and unsupported keywords (`$schema`, `additionalProperties`, `examples`...) are dropped.
    """
    defs = {**(schema.get("definitions") or {}), **(schema.get("$defs") or {})}
    return _openapi(copy.deepcopy(schema), defs, ())


def _openapi(node: Any, defs: dict[str, Any], seen: tuple[str, ...]) -> Any:
    if not isinstance(node, dict):
        return node
    if "$ref" in node:
        ref = str(node["$ref"])
        name = ref.rsplit("/", 1)[-1]
        extra = {k: v for k, v in node.items() if k in ("description", "title")}
        if name in seen or name not in defs:
            return {"type": "object", **extra}  # a recursive (or unknown) reference cannot be inlined
        return _openapi({**copy.deepcopy(defs[name]), **extra}, defs, seen + (name,))
    node = dict(node)
    if "default" in node and node["default"] is None:
        node.pop("default")  # "no default" says nothing the model needs
    if "const" in node:
        node.setdefault("enum", [node.pop("const")])
    if "oneOf" in node and "anyOf" not in node:
        node["anyOf"] = node.pop("oneOf")
    if isinstance(node.get("allOf"), list) and len(node["allOf"]) == 1 and isinstance(node["allOf"][0], dict):
        merged = node.pop("allOf")[0]
        node = {**merged, **node}
        return _openapi(node, defs, seen)
    kind = node.get("type")
    if isinstance(kind, list):
        rest = [t for t in kind if t != "null"]
        if len(rest) < len(kind):
            node["nullable"] = True
        if len(rest) == 1:
            node["type"] = rest[0]
        elif rest:
            node.pop("type")
            node["anyOf"] = [{"type": t} for t in rest]
        else:
            node.pop("type")
    if isinstance(node.get("anyOf"), list):
        options = [o for o in node["anyOf"] if not (isinstance(o, dict) and o.get("type") == "null")]
        if len(options) < len(node["anyOf"]):
            node["nullable"] = True
        if len(options) == 1 and isinstance(options[0], dict):
            node.pop("anyOf")
            inner = _openapi(options[0], defs, seen)
            node = {**inner, **{k: v for k, v in node.items() if k in ("description", "title", "nullable", "default")}}
            return {k: v for k, v in node.items() if k in _OPENAPI_KEYS}
        node["anyOf"] = [_openapi(o, defs, seen) for o in options]
    if "enum" in node:
        values = node["enum"]
        if isinstance(values, list) and all(isinstance(v, str) for v in values if v is not None):
            if None in values:
                node["nullable"] = True
            node["enum"] = [v for v in values if v is not None]
            node.setdefault("type", "string")
            if node["type"] == "string":
                node.setdefault("format", "enum")
        else:  # only string enums are accepted: keep the allowed values where the model can read them
            note = f"one of: {', '.join(json.dumps(v) for v in values)}" if isinstance(values, list) else ""
            node.pop("enum")
            if note:
                node["description"] = f"{node['description']} ({note})" if node.get("description") else note.capitalize()
    if isinstance(node.get("properties"), dict):
        node["properties"] = {k: _openapi(v, defs, seen) for k, v in node["properties"].items()}
        node.setdefault("type", "object")
        if isinstance(node.get("required"), list):
            node["required"] = [r for r in node["required"] if r in node["properties"]]
    if "items" in node:
        items = node["items"]
        node["items"] = _openapi(items, defs, seen) if isinstance(items, dict) else {"type": "string"}
    elif isinstance(node.get("prefixItems"), list) and node["prefixItems"]:
        node["items"] = _openapi(node["prefixItems"][0], defs, seen)
    if node.get("type") == "array" and "items" not in node:
        node["items"] = {"type": "string"}
    if "format" in node and node.get("type") == "string" and node["format"] not in ("enum", "date-time"):
        node.pop("format")  # strings accept only these formats
    return {k: v for k, v in node.items() if k in _OPENAPI_KEYS}
