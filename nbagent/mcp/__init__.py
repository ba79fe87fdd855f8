"""MCP servers as tool sources: their tools planned each turn, permission-checked, with progress and results
like any other tool.

    agent = Agent(model=..., mcp_servers={
        "time": {"command": "mcp-server-time"},                                  # stdio
        "web": {"url": "http://127.0.0.1:8000/mcp", "headers": {"Authorization": "Bearer ${WEB_TOKEN}"}},
        "git": {"command": "mcp-server-git", "args": ["--repository", "."], "trusted": True},
    }, rules=["allow: time__*"])

The mapping is the `mcpServers` one other MCP clients use (also read from `.mcp.json` or
`.nbagent/mcp.json` in a workspace: `workspace_servers(path)`; those start only once the person trusted
the file's exact content, see `_workspace`). Tools are named `SERVER__TOOL`; when there
are many they wait behind `search_tools`. Servers start when a run first needs them, are shared by every run
of the process (a kernel), and stop at exit or with `close()`. A server that fails to start, crashes, hangs
or answers garbage gives error results that say why (with its stderr), and is started again on next use.

Importing this package does not import the `mcp` SDK (it is an optional extra: `pip install nbagent[mcp]`);
the first server started does.
"""

from __future__ import annotations

from typing import Any

from ._config import CONFIG_FILES, ServerConfig, load_config_file, parse_servers, server_environment, untrusted
from ._workspace import WorkspaceConfig, server_summary, trust_workspace, workspace_configs, workspace_servers
from ._tools import DEFER_THRESHOLD, MCPResult, MCPServers, MCPTool, to_tool_result

__all__ = [
    "CONFIG_FILES",
    "DEFER_THRESHOLD",
    "MCPResult",
    "MCPServers",
    "MCPTool",
    "ServerConfig",
    "WorkspaceConfig",
    "close",
    "load_config_file",
    "parse_servers",
    "server_environment",
    "server_summary",
    "status",
    "to_tool_result",
    "trust_workspace",
    "untrusted",
    "use_loop",
    "workspace_configs",
    "workspace_servers",
]


def close() -> None:
    """Stop every MCP server this process started (they start again when a run needs them)."""
    import sys

    module = sys.modules.get(f"{__name__}._connection")
    if module is not None:
        module.close_all()


def use_loop(loop: Any) -> None:
    """Start servers on this event loop from now on (a kernel's: calls from it need no thread hop), instead
    of nbagent's background thread (None). Servers already started stay where they are."""
    from . import _connection

    _connection.set_loop(loop)


def status() -> list[dict[str, Any]]:
    """Every server this process has connected to: state, tools, error, stderr tail."""
    import sys

    module = sys.modules.get(f"{__name__}._connection")
    return [c.status() for c in module.connections()] if module is not None else []
