"""The parameters of a tool: the schema the model is sent, and the validation of what comes back.

From a function's signature: a pydantic model of its parameters (type hints, defaults, `Field`s, the
docstring's parameter descriptions), whose JSON Schema is sent without pydantic's titles. From a raw JSON
Schema: sent unchanged, checked with `jsonschema` when the tool is defined, and used to validate each
call. pydantic and jsonschema are imported when the first tool needs them, not with nbagent. Validation errors are written for the model, so it can correct its call.

Reads: a raw schema may come from an MCP server (anyone's). What could happen: a `$ref` to a URL makes
`jsonschema` fetch it while validating a call (a request from the kernel to wherever the server chose, at
every call). What stops it: a raw schema is validated against a `referencing.Registry` that retrieves
nothing (`_no_retrieval_registry`): references inside the schema (`#/$defs/...`, a sub-schema's `$id`) and the
JSON Schema meta-schemas resolve, any other is an `ArgumentsError` that names it, and the call does not run.
"""

from __future__ import annotations

import inspect
import re
import types
import typing
import warnings
from typing import TYPE_CHECKING, Any, Callable, Union

from ..context import ToolContext
from .schema_library import import_jsonschema

if TYPE_CHECKING:  # pragma: no cover
    import pydantic

__all__ = ["Arguments", "ArgumentsError", "ToolDefinitionError", "strip_titles"]


class ToolDefinitionError(ValueError):
    """A tool was declared wrongly (raised when it is defined, never during a run)."""


class ArgumentsError(ValueError):
    """Arguments did not validate; the message is written for the model, so it can correct them."""


class Arguments(dict):
    """Validated arguments: a dict that also allows attribute access (`args.path`)."""

    __slots__ = ()

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(f"no argument {name!r} (have: {', '.join(self) or 'none'})") from None


def strip_titles(schema: Any) -> Any:
    """Remove pydantic's generated `title`s from a schema (they cost tokens and say nothing)."""
    if isinstance(schema, dict):
        out = {}
        for key, value in schema.items():
            if key == "title" and isinstance(value, str):
                continue
            if key in ("properties", "$defs", "definitions", "patternProperties") and isinstance(value, dict):
                out[key] = {k: strip_titles(v) for k, v in value.items()}
            elif isinstance(value, (dict, list)):
                out[key] = strip_titles(value)
            else:
                out[key] = value
        return out
    if isinstance(schema, list):
        return [strip_titles(v) for v in schema]
    return schema


def _is_context_annotation(annotation: Any) -> bool:
    if annotation is ToolContext:
        return True
    if isinstance(annotation, str):
        return annotation.replace("nbagent.", "").split("|")[0].strip() in ("ToolContext", "Optional[ToolContext]")
    origin = typing.get_origin(annotation)
    if origin in (Union, types.UnionType):
        return any(a is ToolContext for a in typing.get_args(annotation))
    if origin is typing.Annotated:
        return _is_context_annotation(typing.get_args(annotation)[0])
    return False


_SIMPLE_DEFAULTS = (type(None), bool, int, float, complex, str, bytes)

_MODELS: dict[tuple[Any, ...], tuple[Any, dict[str, Any]]] = {}
_MODELS_KEPT = 512
"""Models (and their schemas) made from signatures, by what they are made of (`signature_schema`): building one
with pydantic is ~1-2 ms, and the toolbox builds the same eleven for every set it makes (21 ms a set, measured),
a notebook's tools again at every run. Bounded: the oldest entry goes first when it is full."""


def _cache_key(model_name: str, spec: list[tuple[Any, ...]] | None) -> tuple[Any, ...] | None:
    """The key of a signature's model in `_MODELS`, or None when it must be built anew: type hints that did not
    resolve (`spec` None), a default that is not a plain immutable value (a `Field`, a list, an object), or an
    annotation that cannot be hashed or shown. Values that compare equal may differ (`0 == False == -0.0`,
    `Annotated[int, 0] == Annotated[int, False]`): defaults are keyed by their type and `repr`, annotations by
    themselves (classes by identity) and their `repr`."""
    if spec is None:
        return None
    parts: list[Any] = [model_name]
    try:
        for pname, kind, annotation, default, description in spec:
            if default is not inspect.Parameter.empty:
                plain = type(default) in _SIMPLE_DEFAULTS or (
                    type(default) is tuple and all(type(v) in _SIMPLE_DEFAULTS for v in default))
                if not plain:
                    return None
                default = (type(default), repr(default))
            parts.append((pname, kind, annotation, repr(annotation), default, description))
        key = tuple(parts)
        hash(key)
    except Exception:  # an annotation that cannot be hashed, or whose repr fails: built anew
        return None
    return key


def signature_schema(fn: Callable, name: str, param_docs: dict[str, str], localns: dict[str, Any] | None = None):
    """A function's parameters as (pydantic model, ctx parameter, positional-only names, JSON Schema sent to the
    model, without pydantic's titles). The model and schema are made once for each set of parameters
    (`_MODELS`); each caller gets its own copy of the schema."""
    import copy

    fields, ctx_param, positional_only, spec = _signature_fields(fn, name, param_docs, localns)
    model_name = re.sub(r"\W", "_", name) or "Args"
    key = _cache_key(model_name, spec)
    made = _MODELS.get(key) if key is not None else None
    if made is None:
        model = _create_model(name, model_name, fields)
        made = (model, strip_titles(model.model_json_schema()))
        if key is not None:
            if len(_MODELS) >= _MODELS_KEPT:
                _MODELS.pop(next(iter(_MODELS), None), None)  # (another thread may have taken it)
            _MODELS[key] = made
    model, schema = made
    return model, ctx_param, positional_only, copy.deepcopy(schema)


def _signature_fields(fn: Callable, name: str, param_docs: dict[str, str], localns: dict[str, Any] | None):
    """The pydantic fields of a function's parameters, its ctx parameter, its positional-only names, and the
    parameters as (name, kind, annotation, default, description) for `_cache_key`."""
    import pydantic  # here, not at the top: `import nbagent` does not pay for pydantic until a tool is made
    from pydantic.fields import FieldInfo

    sig = inspect.signature(fn)
    spec: list[tuple[Any, ...]] | None = []
    try:
        hints = typing.get_type_hints(fn, localns=localns, include_extras=True)
    except Exception:  # annotations left as written (strings may mean different things in different modules)
        hints = {k: v.annotation for k, v in sig.parameters.items() if v.annotation is not inspect.Parameter.empty}
        spec = None
    fields: dict[str, Any] = {}
    ctx_param: str | None = None
    positional_only: list[str] = []
    for pname, param in sig.parameters.items():
        annotation = hints.get(pname, param.annotation)
        if _is_context_annotation(annotation) or (annotation is inspect.Parameter.empty and pname == "ctx"):
            ctx_param = pname
            if spec is not None:
                spec.append((pname, "ctx", None, inspect.Parameter.empty, None))
            continue
        if param.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
            continue
        if pname.startswith("_"):
            raise ToolDefinitionError(f"tool {name!r}: parameter {pname!r} starts with '_' and cannot be sent by a model")
        if param.kind is inspect.Parameter.POSITIONAL_ONLY:
            positional_only.append(pname)
        if annotation is inspect.Parameter.empty:
            annotation = Any
        default = param.default
        field_kwargs: dict[str, Any] = {}
        if pname in param_docs and param_docs[pname]:
            field_kwargs["description"] = param_docs[pname]
        if spec is not None:
            spec.append((pname, param.kind, annotation, default, field_kwargs.get("description")))
        if isinstance(default, FieldInfo):
            if "description" in field_kwargs and not default.description:
                default.description = field_kwargs["description"]
            fields[pname] = (annotation, default)
        elif default is inspect.Parameter.empty:
            fields[pname] = (annotation, pydantic.Field(..., **field_kwargs))
        else:
            fields[pname] = (annotation, pydantic.Field(default, **field_kwargs))
    return fields, ctx_param, positional_only, spec


def _create_model(name: str, model_name: str, fields: dict[str, Any]):
    import pydantic
    from pydantic import ConfigDict

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # parameter names that shadow BaseModel attributes are fine here
        try:
            return pydantic.create_model(
                model_name,
                __config__=ConfigDict(extra="forbid", arbitrary_types_allowed=True, protected_namespaces=()),
                **fields,
            )
        except Exception as exc:
            raise ToolDefinitionError(f"tool {name!r}: cannot build a schema from its signature: {exc}") from exc


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return type(value).__name__


def _format_pydantic_errors(exc: pydantic.ValidationError) -> str:
    lines = []
    for err in exc.errors(include_url=False)[:20]:
        loc = ".".join(str(p) for p in err["loc"]) or "(root)"
        msg = err["msg"]
        if err["type"] == "extra_forbidden":
            msg = "unexpected argument"
        elif err["type"] == "missing":
            msg = "missing required argument"
        given = err.get("input")
        if err["type"] not in ("missing", "extra_forbidden") and given is not None:
            shown = repr(given)
            if len(shown) > 60:
                shown = shown[:57] + "..."
            msg += f" (got {shown})"
        lines.append(f"- {loc}: {msg}")
    more = len(exc.errors()) - 20
    if more > 0:
        lines.append(f"- ... and {more} more")
    return "\n".join(lines)


def _format_jsonschema_errors(errors: list) -> str:
    lines = []
    for err in errors[:20]:
        loc = ".".join(str(p) for p in err.absolute_path) or "(root)"
        lines.append(f"- {loc}: {err.message}")
    if len(errors) > 20:
        lines.append(f"- ... and {len(errors) - 20} more")
    return "\n".join(lines)


def _check_raw_schema(name: str, schema: Any) -> dict[str, Any]:
    if not isinstance(schema, dict):
        raise ToolDefinitionError(f"tool {name!r}: json_schema must be a dict, not {type(schema).__name__}")
    if schema.get("type") != "object":
        raise ToolDefinitionError(
            f"tool {name!r}: function tool parameters must use a root object schema "
            f"(\"type\": \"object\"), got type {schema.get('type')!r}"
        )
    jsonschema = import_jsonschema()

    try:
        jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator).check_schema(schema)
    except jsonschema.SchemaError as exc:
        raise ToolDefinitionError(f"tool {name!r}: json_schema is not a valid JSON Schema: {exc.message}") from None
    return schema


def _refuse_retrieval(uri: str) -> Any:
    """A `referencing` retriever that fetches nothing: every reference outside the schema is unresolvable."""
    from referencing.exceptions import NoSuchResource

    raise NoSuchResource(ref=uri)


def _no_retrieval_registry() -> Any:
    from referencing import Registry

    return Registry(retrieve=_refuse_retrieval)  # jsonschema adds the meta-schemas it ships


def _raw_validator(name: str, schema: dict[str, Any]):
    jsonschema = import_jsonschema()

    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    return cls(schema, format_checker=cls.FORMAT_CHECKER, registry=_no_retrieval_registry())


def _raw_errors(validator: Any, data: Any) -> list:
    """The validation errors of `data` (sorted by where they are); a reference the schema cannot resolve
    without fetching is an `ArgumentsError` that names it (nothing is fetched)."""
    from referencing.exceptions import Unresolvable

    try:
        return sorted(validator.iter_errors(data), key=lambda e: list(e.absolute_path))
    except Unresolvable as exc:
        ref = getattr(exc, "ref", None) or str(exc)
        raise ArgumentsError(
            f"the tool's parameter schema refers to {ref!r} ($ref), which is not part of the schema; nbagent "
            "resolves only references inside the schema (#/...) and never fetches one, so the call was not run "
            "(the tool's schema needs fixing, not the arguments)") from None


def _raw_call_shape(fn: Callable) -> tuple[str | None, list[str], set[str] | bool]:
    """For raw-schema tools: which parameter takes the context, and which keywords the function accepts."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return None, [], True
    try:
        hints = typing.get_type_hints(fn)
    except Exception:
        hints = {}
    ctx_param = None
    accepts: set[str] | bool = set()
    positional_only: list[str] = []
    for pname, param in sig.parameters.items():
        annotation = hints.get(pname, param.annotation)
        if _is_context_annotation(annotation) or (annotation is inspect.Parameter.empty and pname == "ctx"):
            ctx_param = pname
        elif param.kind is inspect.Parameter.VAR_KEYWORD:
            accepts = True
        elif param.kind is not inspect.Parameter.VAR_POSITIONAL and accepts is not True:
            accepts.add(pname)  # type: ignore[union-attr]
            if param.kind is inspect.Parameter.POSITIONAL_ONLY:
                positional_only.append(pname)
    return ctx_param, positional_only, accepts
