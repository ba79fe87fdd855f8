"""`%agent --mcp-list`: the MCP servers of the notebook, their state and their tools.

Reads: server configurations (a workspace file's among them) and what servers said (names, errors): all
escaped in the HTML. A workspace server that is not trusted yet is listed as such, and not started here.
"""

from __future__ import annotations

from typing import Any

from nbagent.safety.shown import shown_html

__all__ = ["ServerList"]


class ServerList:
    """What `%agent --mcp-list` returns: shown as a table, `.servers` as data (one dict per server)."""

    def __init__(self, toolset: Any) -> None:
        self.servers: list[dict[str, Any]] = []
        if toolset is None:
            return
        from nbagent.mcp import _connection

        names = {c.name: c for c in toolset.active}
        for config in toolset.active:  # started now (also from a cell, which the kernel's loop is running)
            _connection.start_now(_connection.connection(config), config.startup_timeout + 5)
        for entry in toolset.status():
            config = names.get(entry["name"])
            if config is not None:
                entry["tools"] = [t.name for t in toolset._server_tools(config, _connection.connection(config))]
            self.servers.append(entry)

    def __str__(self) -> str:
        if not self.servers:
            return ("No MCP servers are configured: %config NBAgent.mcp_servers = {'time': {'command': "
                    "'mcp-server-time'}}, or an .mcp.json in the workspace.")
        lines = []
        for s in self.servers:
            trust = ", trusted" if s["trusted"] else ""
            state = state_of(s)
            if s["state"] == "not trusted yet":
                trust = ""
            lines.append(f"{s['name']}: {state}{trust} ({s['transport']}: {s['target']})")
            if s["tools"]:
                lines.append("  tools: " + ", ".join(s["tools"]))
            if s["error"]:
                lines.extend("  " + line for line in s["error"].splitlines())
        return "\n".join(lines)

    def __repr__(self) -> str:
        return str(self)

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(str(self))

    def _repr_html_(self) -> str:
        if not self.servers:
            return f"<p>{shown_html(str(self))}</p>"
        rows = []
        for s in self.servers:
            error = f"<pre>{shown_html(s['error'])}</pre>" if s["error"] else ""
            rows.append(
                f"<tr><td><b>{shown_html(s['name'])}</b></td><td>{shown_html(state_of(s))}"
                f"{' (trusted)' if s['trusted'] else ''}</td><td><code>{shown_html(s['target'])}</code></td>"
                f"<td>{shown_html(', '.join(s['tools']))}{error}</td></tr>")
        return ("<table><tr><th>server</th><th>state</th><th>transport</th><th>tools</th></tr>"
                + "".join(rows) + "</table>")



def state_of(server: dict[str, Any]) -> str:
    """A server's state, said with why: ready (N tools), failed (why below), disabled, not started."""
    state = server["state"]
    if state == "not trusted yet":
        return "not trusted yet, not started"
    if server.get("disabled"):
        return "disabled (its configuration says so; %agent --mcp NAME uses it anyway)"
    if state == "ready":
        n = len(server.get("tools") or ())
        return f"ready, {n} tool{'s' if n != 1 else ''}"
    if state == "failed":
        return "failed to start (why below)" if server.get("error") else "failed"
    if state == "idle":
        return "not started (it did not answer in time; the first run that uses it tries again)"
    return state
