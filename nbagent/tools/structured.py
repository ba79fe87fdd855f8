"""Structured task results: `Agent(output_type=...)` makes a run finish through `submit_result`.

The output type is a Python type (a pydantic model, a dataclass, `list[int]`...) or a raw JSON Schema dict.
The tool's parameters are its schema (an object schema as it is; anything else wrapped as
`{"result": <schema>}`), and the tool is sent strict, so providers that support strict tool schemas
(OpenAI Chat and Responses, Anthropic) constrain the submission to it; the provider adapters normalise the
schema the way strict mode demands (optional properties become nullable), and the nulls that adds are
dropped again before validation. A submission that does not validate is an error result and the turn stays
open, so the model can correct it; an accepted one ends the run with `run.output` set to the validated value
(for a JSON Schema: the submitted JSON value). A text-only answer gets one reminder (see `nbagent.agent.loop`),
then the run fails clearly.
"""

from __future__ import annotations

from typing import Any

from ..messages import TextBlock, ToolResult
from .definition import Tool
from .schema_library import import_jsonschema
from .schemas import ToolDefinitionError, strip_titles

__all__ = ["SUBMIT_TOOL_NAME", "drop_added_nulls", "make_submit_tool"]

SUBMIT_TOOL_NAME = "submit_result"


def make_submit_tool(output_type: Any) -> Tool:
    """The `submit_result` tool for an output type (a Python type or a JSON Schema dict)."""
    if isinstance(output_type, dict):
        return _schema_submit_tool(output_type)
    import pydantic  # only runs with an output type pay for it

    is_model = isinstance(output_type, type) and issubclass(output_type, pydantic.BaseModel)
    try:
        adapter = pydantic.TypeAdapter(output_type)
        schema = strip_titles(adapter.json_schema())
    except (pydantic.PydanticSchemaGenerationError, pydantic.PydanticUserError, TypeError) as exc:
        raise ToolDefinitionError(
            f"{output_type!r} is neither a type pydantic can validate nor a JSON Schema dict ({exc})") from None
    wrapped = not (is_model and schema.get("type") == "object")
    parameters = _wrap(schema) if wrapped else schema

    def submit_result(**arguments: Any) -> ToolResult:
        payload = arguments["result"] if wrapped else arguments
        try:
            value = adapter.validate_python(payload)
        except pydantic.ValidationError as exc:
            lines = [f"- {'.'.join(map(str, e['loc'])) or '(root)'}: {e['msg']}" for e in exc.errors(include_url=False)]
            return _rejected(lines)
        return ToolResult([TextBlock("Result accepted.")], details=value, terminate=True)

    name = getattr(output_type, "__name__", None) or str(output_type)
    return _tool(submit_result, parameters, f"a {name}")


def _schema_submit_tool(schema: dict[str, Any]) -> Tool:
    jsonschema = import_jsonschema()

    try:
        jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator).check_schema(schema)
    except jsonschema.SchemaError as exc:
        raise ToolDefinitionError(f"the output JSON Schema is not valid: {exc.message}") from None
    wrapped = schema.get("type") != "object"
    parameters = _wrap(dict(schema)) if wrapped else schema
    # The tool validates its arguments against `parameters` before this runs: a value that does not
    # conform is an invalid-arguments result (the schema shown), and the model tries again.

    def submit_result(**arguments: Any) -> ToolResult:
        value = arguments["result"] if wrapped else dict(arguments)
        return ToolResult([TextBlock("Result accepted.")], details=value, terminate=True)

    about = schema.get("title") or schema.get("description") or "value matching the schema"
    return _tool(submit_result, parameters, str(about).split("\n")[0][:80])


def _wrap(schema: dict[str, Any]) -> dict[str, Any]:
    defs = schema.pop("$defs", None)
    parameters: dict[str, Any] = {"type": "object", "properties": {"result": schema}, "required": ["result"],
                                  "additionalProperties": False}
    if defs:
        parameters["$defs"] = defs
    return parameters


def _rejected(lines: list[str]) -> ToolResult:
    return ToolResult([TextBlock("The result was rejected; fix it and call submit_result again:\n" + "\n".join(lines))],
                      is_error=True)


def _tool(fn: Any, parameters: dict[str, Any], what: str) -> Tool:
    return Tool(
        fn,
        name=SUBMIT_TOOL_NAME,
        description=f"Submit the final result of the task ({what}). Call this exactly once, when done.",
        json_schema=parameters,
        strict=True,
        prepare_arguments=lambda raw: drop_added_nulls(raw, parameters),
        read_only=True,
        describe_activity=lambda args: "Submitting the result",
    )


def drop_added_nulls(value: Any, schema: dict[str, Any], root: dict[str, Any] | None = None) -> Any:
    """`value` without the nulls strict mode made the model send: a null for a property that was optional in
    `schema` and does not accept null there is left out, so the property's default applies."""
    root = root if root is not None else schema
    schema = _deref(schema, root)
    if isinstance(value, list):
        items = schema.get("items")
        return [drop_added_nulls(v, items, root) for v in value] if isinstance(items, dict) else value
    if not isinstance(value, dict):
        return value
    props = schema.get("properties")
    if not isinstance(props, dict):
        return value
    required = set(schema.get("required") or ())
    out: dict[str, Any] = {}
    for key, item in value.items():
        sub = props.get(key)
        if not isinstance(sub, dict):
            out[key] = item
        elif item is None and key not in required and not _accepts_null(_deref(sub, root), root):
            continue
        else:
            out[key] = drop_added_nulls(item, sub, root)
    return out


def _deref(schema: Any, root: dict[str, Any]) -> dict[str, Any]:
    if not isinstance(schema, dict):
        return {}
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/"):
        node: Any = root
        for part in ref[2:].split("/"):
            node = node.get(part) if isinstance(node, dict) else None
        return node if isinstance(node, dict) else schema
    return schema


def _accepts_null(schema: dict[str, Any], root: dict[str, Any]) -> bool:
    kind = schema.get("type")
    if kind == "null" or (isinstance(kind, list) and "null" in kind):
        return True
    if "const" in schema and schema["const"] is None:
        return True
    return any(_accepts_null(_deref(s, root), root) for key in ("anyOf", "oneOf") for s in schema.get(key) or ())
