"""@tool: schemas from hints and docstrings, raw schemas, validation, calling conventions."""

from __future__ import annotations

import asyncio
from typing import Annotated, Literal

import pydantic
import pytest

from nbagent import Arguments, Tool, ToolContext, ToolDefinitionError, tool
from nbagent.tools import ArgumentsError, parse_docstring


def test_schema_from_hints_and_google_docstring():
    @tool
    def search(query: str, limit: int = 10, mode: Literal["fast", "exact"] = "fast") -> list[str]:
        """Search the corpus.

        Longer explanation that is part of the description.

        Args:
            query: what to look for.
            limit: how many results
                at most (continued line).
            mode: the search mode.

        Returns:
            matching lines.
        """
        return []

    assert search.name == "search"
    assert search.description == "Search the corpus.\n\nLonger explanation that is part of the description."
    props = search.parameters["properties"]
    assert props["query"] == {"type": "string", "description": "what to look for."}
    assert props["limit"]["default"] == 10 and props["limit"]["type"] == "integer"
    assert props["limit"]["description"] == "how many results at most (continued line)."
    assert props["mode"]["enum"] == ["fast", "exact"]
    assert search.parameters["required"] == ["query"]
    assert search.parameters["additionalProperties"] is False
    assert "title" not in search.parameters and "title" not in props["query"]


def test_numpy_and_sphinx_docstrings():
    desc, params = parse_docstring(
        """Scale a value.

        Parameters
        ----------
        x : float
            The value.
        factor : float
            How much.
        """
    )
    assert desc == "Scale a value."
    assert params == {"x": "The value.", "factor": "How much."}
    desc, params = parse_docstring("Do it.\n\n:param path: where to write\n:param text: what\n:returns: nothing")
    assert desc == "Do it."
    assert params == {"path": "where to write", "text": "what"}


def test_annotated_field_descriptions_and_nested_models():
    class Point(pydantic.BaseModel):
        x: float
        y: float

    @tool
    def move(p: Point, by: Annotated[float, pydantic.Field(ge=0, description="distance")] = 1.0) -> Point:
        """Move a point."""
        return Point(x=p.x + by, y=p.y)

    assert move.parameters["properties"]["by"]["minimum"] == 0
    assert move.parameters["properties"]["by"]["description"] == "distance"
    args = move.validate({"p": {"x": 1, "y": 2}})
    assert isinstance(args["p"], Point) and args.by == 1.0
    with pytest.raises(ArgumentsError) as err:
        move.validate({"p": {"x": 1, "y": 2}, "by": -1})
    assert "by" in str(err.value) and "greater than or equal to 0" in str(err.value)


def test_raw_json_schema_is_sent_unchanged_and_validated():
    schema = {
        "type": "object",
        "properties": {"city": {"type": "string", "minLength": 2}, "days": {"type": "integer", "minimum": 1, "maximum": 7}},
        "required": ["city"],
        "additionalProperties": False,
    }
    seen = {}

    def fn(city, days=3):
        seen.update(city=city, days=days)
        return f"{city}:{days}"

    weather = tool(name="get_weather", description="Weather for a city.", json_schema=schema)(fn)
    assert weather.parameters is schema
    assert weather.spec() == {"name": "get_weather", "description": "Weather for a city.", "parameters": schema}
    args = weather.validate({"city": "Paris", "days": 2})
    assert weather.invoke(args, None) == "Paris:2"
    for bad, fragment in [({"days": 2}, "'city' is a required property"), ({"city": "P"}, "too short"),
                          ({"city": "Paris", "days": 9}, "maximum"), ({"city": "Paris", "x": 1}, "Additional properties")]:
        with pytest.raises(ArgumentsError) as err:
            weather.validate(bad)
        assert fragment in str(err.value)


def test_root_schema_must_be_an_object():
    with pytest.raises(ToolDefinitionError, match="root object schema"):
        tool(name="bad", json_schema={"type": "array", "items": {"type": "string"}})(lambda: None)
    with pytest.raises(ToolDefinitionError, match="not a valid JSON Schema"):
        tool(name="bad", json_schema={"type": "object", "properties": {"a": {"type": "nope"}}})(lambda a: None)
    with pytest.raises(ToolDefinitionError, match="must be a dict"):
        tool(name="bad", json_schema="{}")(lambda: None)


def test_bad_definitions_are_refused_clearly():
    with pytest.raises(ToolDefinitionError, match="name"):
        tool(name="has space")(lambda: None)
    with pytest.raises(ToolDefinitionError, match="execution_mode"):
        tool(name="f", execution_mode="sometimes")(lambda: None)
    with pytest.raises(ToolDefinitionError, match="timeout"):
        tool(name="f", timeout=-1)(lambda: None)
    with pytest.raises(ToolDefinitionError, match="'_secret'"):
        @tool
        def f(_secret: int):
            pass
    with pytest.raises(ToolDefinitionError, match="permission_subject"):
        tool(name="f", permission_subject="nope")(lambda path: None)


def test_context_parameter_is_detected_and_hidden():
    @tool
    async def total(xs: list[float], ctx: ToolContext) -> float:
        """Sum numbers."""
        ctx.progress("halfway", fraction=0.5)
        return sum(xs)

    assert total.is_async and total.ctx_param == "ctx"
    assert list(total.parameters["properties"]) == ["xs"]
    updates = []
    ctx = ToolContext("c1", "total", on_progress=updates.append)
    assert asyncio.run(total.invoke(total.validate({"xs": [1, 2.5]}), ctx)) == 3.5
    assert updates[0].message == "halfway" and updates[0].fraction == 0.5


def test_decorated_function_stays_callable_and_args_allow_attribute_access():
    @tool(describe_activity=lambda args: f"Summing {len(args.xs)} numbers", read_only=True,
          execution_mode="sequential", timeout=30)
    def total(xs: list[float]) -> float:
        """Sum."""
        return sum(xs)

    assert total([1, 2]) == 3
    args = total.validate({"xs": [1, 2, 3]})
    assert isinstance(args, Arguments) and args.xs == [1.0, 2.0, 3.0]
    assert total.activity(args) == "Summing 3 numbers"
    assert total.execution_mode == "sequential" and total.timeout == 30.0 and total.read_only
    with pytest.raises(AttributeError, match="no argument 'nope'"):
        _ = args.nope


def test_positional_only_and_namespace():
    def f(a: int, /, b: int = 2) -> int:
        return a * b

    t = tool(namespace="math", namespace_description="Arithmetic")(f)
    assert t.name == "math__f" and t.base_name == "f"
    assert t.invoke(t.validate({"a": 3, "b": 4}), None) == 12


def test_validation_messages_speak_to_the_model():
    @tool
    def add(a: int, b: int) -> int:
        return a + b

    with pytest.raises(ArgumentsError) as err:
        add.validate({"a": "x", "c": 1})
    text = str(err.value)
    assert "- a: Input should be a valid integer" in text and "(got 'x')" in text
    assert "- b: missing required argument" in text
    assert "- c: unexpected argument" in text
    with pytest.raises(ArgumentsError, match="must be a JSON object, got an array"):
        add.validate([1, 2])


def test_tool_repr_and_plain_functions():
    from nbagent.tools import as_tool

    def greet(name: str) -> str:
        """Say hello."""
        return f"hi {name}"

    t = as_tool(greet)
    assert isinstance(t, Tool) and t.description == "Say hello."
    assert repr(t) == "<Tool greet(name)>"
    assert as_tool(t) is t
