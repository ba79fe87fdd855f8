"""A tool's JSON Schema (an MCP server's, anyone's) makes the kernel fetch nothing while validating a call.

A `$ref` to a URL, or a relative one against a URL `$id`, would have `jsonschema` retrieve it at every call:
a request from the kernel to wherever the schema chose. Raw schemas are validated against a registry that
retrieves nothing (`nbagent.tools.schemas`); references inside the schema keep working.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from nbagent import Agent, AssistantMessage, ScriptedModel, Tool, ToolCall
from nbagent.mcp._config import ServerConfig
from nbagent.mcp._tools import MCPTool
from nbagent.tools.schemas import ArgumentsError

from .recorders import HTTPRecorder


def _schemas(url: str) -> dict[str, dict]:
    return {
        "absolute $ref to a URL": {"type": "object", "properties": {"x": {"$ref": f"{url}/x.json"}}},
        "relative $ref against a URL $id": {"$id": f"{url}/root.json", "type": "object",
                                            "properties": {"x": {"$ref": "other.json#/defs/x"}}},
        "$ref in $defs reached through a local ref": {
            "type": "object", "properties": {"x": {"$ref": "#/$defs/x"}},
            "$defs": {"x": {"$ref": f"{url}/deep.json"}}},
        "$dynamicRef to a URL": {"type": "object", "properties": {"x": {"$dynamicRef": f"{url}/dyn.json#meta"}}},
    }


def _mcp_tool(schema: dict) -> MCPTool:
    config = ServerConfig(name="far", command="far-server")
    remote = SimpleNamespace(name="lookup", description="Looks up.", annotations=None, title=None, input_schema=schema)
    return MCPTool(config, remote, "lookup", defer=False)


def _raw_tool(schema: dict) -> Tool:
    def lookup(**kwargs):
        return "ran"

    return Tool(lookup, name="lookup", json_schema=schema)


@pytest.mark.parametrize("kind", list(_schemas("http://x")))
@pytest.mark.parametrize("make", [_mcp_tool, _raw_tool], ids=["mcp-tool", "raw-schema-tool"])
def test_a_remote_reference_is_never_fetched_and_the_call_gets_a_clear_error(kind, make):
    with HTTPRecorder() as server:
        tool = make(_schemas(server.url)[kind])
        with pytest.raises(ArgumentsError) as raised:
            tool.validate({"x": 1})
        assert server.requests == []
    text = str(raised.value)
    named = {"absolute": "/x.json", "relative": "other.json", "$ref": "/deep.json", "$dynamicRef": "/dyn.json"}
    assert named[kind.split()[0]] in text and "never fetches" in text, text


def test_the_recorder_sees_what_jsonschema_fetches_by_default():
    """The control: without nbagent's registry, jsonschema does contact the server (so the test above can fail)."""
    import warnings

    import jsonschema

    with HTTPRecorder() as server:
        validator = jsonschema.Draft202012Validator(_schemas(server.url)["absolute $ref to a URL"])
        with warnings.catch_warnings(), pytest.raises(Exception):
            warnings.simplefilter("ignore")
            list(validator.iter_errors({"x": 1}))
        assert [path for _method, path, _headers in server.requests] == ["/x.json"]


def test_references_inside_the_schema_still_resolve():
    schema = {"$id": "https://schemas.example/root.json", "type": "object",
              "properties": {"when": {"$ref": "#/$defs/day"}, "n": {"$ref": "count.json"}},
              "$defs": {"day": {"type": "string", "pattern": "^[0-9]{4}-[0-9]{2}-[0-9]{2}$"},
                        "count": {"$id": "count.json", "type": "integer", "minimum": 0}}}
    for make in (_mcp_tool, _raw_tool):
        tool = make(schema)
        assert tool.validate({"when": "2026-12-03", "n": 3}) == {"when": "2026-12-03", "n": 3}
        with pytest.raises(ArgumentsError, match="when"):
            tool.validate({"when": "tomorrow"})
        with pytest.raises(ArgumentsError, match="n"):
            tool.validate({"n": -1})


def test_a_run_gets_an_error_result_and_nothing_is_fetched_or_run():
    ran = []

    def lookup(**kwargs):
        ran.append(kwargs)
        return "ran"

    with HTTPRecorder() as server:
        tool = Tool(lookup, name="lookup", json_schema=_schemas(server.url)["absolute $ref to a URL"])
        model = ScriptedModel([AssistantMessage(tool_calls=[ToolCall(name="lookup", arguments={"x": 1})]),
                               AssistantMessage(text="done")])
        run = Agent(model=model, tools=[tool], rules=["allow: lookup"]).run_sync("look it up")
        assert server.requests == []
    assert ran == []
    [record] = run.calls
    text = " ".join(getattr(b, "text", "") for b in record.result.content)
    assert record.status != "ok" and "never fetches" in text, (record.status, text)
