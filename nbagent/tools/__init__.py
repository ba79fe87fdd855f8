"""What a tool is, from its definition to its normalised result.

    definition     `@tool`, `Tool`: the schema from type hints and docstring (`docstrings`, `schemas`)
    arguments      the model's arguments parsed, with a bounded repair ladder (`partial_json` while they stream)
    plan           the tools a turn offers (`Toolset`, namespaces, capability modes)
    results        what a tool returned, as a `ToolResult` (`images` measured and shrunk before it is sent)
    structured     `Agent(output_type=...)`: a run that finishes through `submit_result`
    paths          the glob engine behind path rules and `list_files`
    schema_library `import_jsonschema()`: jsonschema without the seconds a format checker's import costs

The rule: this wing imports only the vocabulary at the top of nbagent and `safety`.
"""

from __future__ import annotations

from .arguments import parse_arguments
from .definition import Arguments, ArgumentsError, Tool, ToolDefinitionError, as_tool, parse_docstring, tool
from .plan import ToolPlan, Toolset, build_plan
from .results import error_result, image_result, json_result, normalise, text_result, to_tool_result

__all__ = [
    "Arguments",
    "ArgumentsError",
    "Tool",
    "ToolDefinitionError",
    "ToolPlan",
    "Toolset",
    "as_tool",
    "build_plan",
    "error_result",
    "image_result",
    "json_result",
    "normalise",
    "parse_arguments",
    "parse_docstring",
    "text_result",
    "to_tool_result",
    "tool",
]
