"""Structured task results: `Agent(output_type=SomeModel)` makes a run finish through `submit_result`.

The tool's parameters are the requested type's schema (a pydantic model's own fields, or, for any other
type, `{"result": <schema>}`). A submission that does not validate is an error result and the turn stays
open, so the model can correct it; an accepted one ends the run with `run.output` set to the validated
value. A text-only answer gets one reminder (see `nbagent.loop`), then the run fails clearly.
"""

from __future__ import annotations

from typing import Any

from .messages import TextBlock, ToolResult
from .schemas import strip_titles
from .tools import Tool

__all__ = ["SUBMIT_TOOL_NAME", "make_submit_tool"]

SUBMIT_TOOL_NAME = "submit_result"


def make_submit_tool(output_type: Any) -> Tool:
    """The `submit_result` tool for an output type."""
    import pydantic  # only runs with an output type pay for it

    is_model = isinstance(output_type, type) and issubclass(output_type, pydantic.BaseModel)
    adapter = pydantic.TypeAdapter(output_type)
    schema = strip_titles(adapter.json_schema())
    wrapped = not (is_model and schema.get("type") == "object")
    if wrapped:
        defs = schema.pop("$defs", None)
        parameters: dict[str, Any] = {"type": "object", "properties": {"result": schema}, "required": ["result"],
                                      "additionalProperties": False}
        if defs:
            parameters["$defs"] = defs
    else:
        parameters = schema

    def submit_result(**arguments: Any) -> ToolResult:
        payload = arguments["result"] if wrapped else arguments
        try:
            value = adapter.validate_python(payload)
        except pydantic.ValidationError as exc:
            lines = [f"- {'.'.join(map(str, e['loc'])) or '(root)'}: {e['msg']}" for e in exc.errors(include_url=False)]
            return ToolResult([TextBlock("The result was rejected; fix it and call submit_result again:\n" + "\n".join(lines))],
                              is_error=True)
        return ToolResult([TextBlock("Result accepted.")], details=value, terminate=True)

    name = getattr(output_type, "__name__", None) or str(output_type)
    return Tool(
        submit_result,
        name=SUBMIT_TOOL_NAME,
        description=f"Submit the final result of the task (a {name}). Call this exactly once, when done.",
        json_schema=parameters,
        read_only=True,
        describe_activity=lambda args: "Submitting the result",
    )
