"""Configuration, names, environment and result mapping: no server needed."""

from __future__ import annotations

import base64
import json
import subprocess
import sys

import mcp_types as types
import pytest

from nbagent import Agent, ConfigurationError, ImageBlock, ScriptedModel
from nbagent.mcp import MCPServers, MCPTool, ServerConfig, parse_servers, server_environment, to_tool_result
from nbagent.mcp import workspace_configs, workspace_servers
from nbagent.mcp._tools import tool_name


def test_the_mcp_servers_mapping_of_other_clients():
    servers = parse_servers({"mcpServers": {
        "time": {"command": "mcp-server-time", "args": ["--local-timezone", "UTC"], "env": {"TZ": "UTC"}},
        "web": {"type": "http", "url": "http://127.0.0.1:9/mcp", "headers": {"Authorization": "Bearer x"},
                "trusted": True, "timeout": 5},
    }})
    assert servers["time"].transport == "stdio" and servers["time"].args == ["--local-timezone", "UTC"]
    assert servers["web"].transport == "http" and servers["web"].trusted and servers["web"].timeout == 5
    assert not servers["time"].trusted  # a server is not trusted unless the user says so


@pytest.mark.parametrize("entry, message", [
    ({"args": []}, "either \"command\""),
    ({"command": "a", "url": "http://x"}, "either \"command\""),
    ({"url": "ftp://x"}, "http:// or https://"),
    ({"command": "a", "args": "b"}, "list of strings"),
    ({"command": "a", "colour": "blue"}, "unknown key(s) colour"),
    ({"type": "sse", "url": "http://x/sse"}, "SSE transport is deprecated"),
    ({"command": "a", "timeout": 0}, "positive number"),
    ({"command": "a", "env": {"A": None}}, "must be a string"),
])
def test_configuration_mistakes_name_the_server_and_the_key(entry, message):
    with pytest.raises(ConfigurationError, match="server 'srv'") as info:
        parse_servers({"srv": entry})
    assert message in str(info.value)


def test_server_names_become_namespaces():
    with pytest.raises(ConfigurationError, match="no '__'"):
        parse_servers({"my__server": {"command": "a"}})
    with pytest.raises(ConfigurationError):
        parse_servers({"9lives": {"command": "a"}})


def test_workspace_files(tmp_path):
    (tmp_path / ".mcp.json").write_text(json.dumps({"mcpServers": {"a": {"command": "x"}, "b": {"command": "y"}}}))
    (tmp_path / ".nbagent").mkdir()
    (tmp_path / ".nbagent" / "mcp.json").write_text(json.dumps({"mcpServers": {"b": {"command": "z"}}}))
    servers = workspace_servers(tmp_path)
    assert servers["a"].command == "x" and servers["b"].command == "z"
    assert workspace_servers(tmp_path / "nowhere") == {}
    assert all(s.source is not None and s.digest for s in servers.values())  # from the workspace: trust asked
    (tmp_path / ".mcp.json").write_text("{not json")
    broken = workspace_configs(tmp_path)[0]  # a broken file configures nothing, and never stops a run
    assert "not valid JSON" in broken.error and broken.servers == {} and not broken.trusted
    assert list(workspace_servers(tmp_path)) == ["b"]


def test_the_environment_of_a_stdio_server():
    config = ServerConfig("s", command="x", env={"GIVEN": "1", "TOKEN": "${MY_TOKEN}", "OPT": "${UNSET_VAR:-dflt}"})
    environ = {"PATH": "/bin", "HOME": "/h", "LANG": "C.UTF-8", "LC_ALL": "C", "OPENAI_API_KEY": "sk-xxxxxxxxxxxx",
               "GITHUB_TOKEN": "ghp_x", "MY_TOKEN": "secret-on-purpose", "RANDOM_SETTING": "1"}
    env = server_environment(config, environ)
    assert env == {"PATH": "/bin", "HOME": "/h", "LANG": "C.UTF-8", "LC_ALL": "C", "GIVEN": "1",
                   "TOKEN": "secret-on-purpose", "OPT": "dflt"}
    with pytest.raises(ConfigurationError, match="NOT_SET_ANYWHERE is not set"):
        server_environment(ServerConfig("s", command="x", env={"A": "${NOT_SET_ANYWHERE}"}), environ)


def test_tool_names_every_provider_accepts():
    used: set[str] = set()
    assert tool_name("git", "git_status", used) == "git_status"
    assert tool_name("web", "search.web/v2", used) == "search_web_v2"
    long = tool_name("server", "x" * 100, used)
    assert len("server__" + long) <= 64
    assert tool_name("git", "git_status", used) != "git_status"  # unique within the server


def _remote(name="t", read_only=None, destructive=None, schema=None):
    annotations = types.ToolAnnotations(readOnlyHint=read_only, destructiveHint=destructive)
    return types.Tool(name=name, description="d", inputSchema=schema or {"type": "object", "properties": {}},
                      annotations=annotations)


def test_annotations_become_metadata_and_trust_decides_auto_allow():
    untrusted, trusted = ServerConfig("s", command="x"), ServerConfig("s", command="x", trusted=True)
    ro = MCPTool(untrusted, _remote(read_only=True), "t", defer=False)
    assert ro.read_only and not ro.destructive and ro.capability == "read"
    assert not ro.is_read_only_call({})
    assert MCPTool(trusted, _remote(read_only=True), "t", defer=False).is_read_only_call({})
    assert MCPTool(trusted, _remote(), "t", defer=False).destructive  # the protocol's default
    assert not MCPTool(trusted, _remote(destructive=False), "t", defer=False).destructive
    assert MCPTool(trusted, _remote(), "t", defer=True).defer_loading


def test_an_unusable_schema_leaves_validation_to_the_server():
    tool = MCPTool(ServerConfig("s", command="x"), _remote(schema={"type": "object", "properties": 3}), "t",
                   defer=False)
    assert tool.validate({"anything": 1}) == {"anything": 1}


def test_results_for_the_model_and_for_the_user():
    png = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\0" * 20).decode()
    result = types.CallToolResult(content=[
        types.TextContent(type="text", text="hello"),
        types.ImageContent(type="image", data=png, mimeType="image/png"),
        types.TextContent(type="text", text="for you", annotations=types.Annotations(audience=["user"])),
        types.ResourceLink(type="resource_link", uri="file:///a.txt", name="a.txt", mimeType="text/plain"),
        types.EmbeddedResource(type="resource", resource=types.TextResourceContents(uri="mem://n", text="note")),
    ], structuredContent={"x": 1}, isError=False)
    out = to_tool_result(result, "s", "t")
    texts = [b.text for b in out.content if not isinstance(b, ImageBlock)]
    assert texts == ["hello", "Resource link: a.txt <file:///a.txt> (text/plain)", "Resource <mem://n>:\nnote"]
    assert [b.mime_type for b in out.content if isinstance(b, ImageBlock)] == ["image/png"]
    assert out.details.raw is result and out.details.structured == {"x": 1}
    assert [c.text for c in out.details.hidden] == ["for you"]
    assert [link["uri"] for link in out.details.resource_links] == ["file:///a.txt", "mem://n"]
    structured_only = to_tool_result(types.CallToolResult(content=[], structuredContent={"y": 2}), "s", "t")
    assert structured_only.content[0].text == '{"y": 2}'
    failed = to_tool_result(types.CallToolResult(content=[types.TextContent(type="text", text="no")], isError=True),
                            "s", "t")
    assert failed.is_error


def test_select_picks_servers_and_names_unknown_ones():
    toolset = MCPServers({"a": {"command": "x"}, "b": {"command": "y", "disabled": True}})
    assert [c.name for c in toolset.active] == ["a"]
    assert [c.name for c in toolset.select(["b"]).active] == ["b"]  # picking a disabled server enables it
    with pytest.raises(ConfigurationError, match="no MCP server named 'c'"):
        toolset.select(["c"])


def test_agent_takes_mcp_servers_as_a_mapping_a_file_or_a_toolset(tmp_path):
    model = ScriptedModel(["hi"])
    assert isinstance(Agent(model=model, mcp_servers={"a": {"command": "x"}}).tools[-1], MCPServers)
    path = tmp_path / "servers.json"
    path.write_text(json.dumps({"mcpServers": {"a": {"command": "x"}}}))
    assert Agent(model=model, mcp_servers=path).mcp_servers.servers["a"].command == "x"
    assert Agent(model=model).mcp_servers is None
    with pytest.raises(ConfigurationError):
        Agent(model=model, mcp_servers={"a": {}})


def test_import_nbagent_does_not_import_the_sdk():
    code = ("import sys, nbagent, nbagent.mcp; from nbagent import Agent; "
            "Agent(model='scripted', mcp_servers={'a': {'command': 'x'}}); "
            "print(sorted(m for m in sys.modules if m == 'mcp' or m.startswith(('mcp.', 'mcp_types'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
