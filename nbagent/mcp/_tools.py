"""MCP tools as nbagent tools: `MCPServers`, a toolset decided each turn, and `MCPTool`, one server tool.

A server's tool `get_current_time` is offered as `time__get_current_time`. Its annotations become the
tool's metadata (`readOnlyHint` -> read_only, `destructiveHint` -> destructive), so the permission pipeline
treats it like a built-in tool; but an annotation is the server's claim, so only a server marked
`"trusted": true` gets read-only auto-allow from it. Results keep the SDK's `CallToolResult` in `details`.

This module imports the `mcp` SDK only when a server is used (through `_connection` and `_server`).
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import hashlib
import json
import logging
import re
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from ..context import ToolContext
from ..errors import ConfigurationError
from ..messages import ImageBlock, TextBlock, ToolResult
from ..safety.gate import Withheld
from ..tools.definition import ArgumentsError, Tool, ToolDefinitionError
from ..tools.plan import Toolset
from ..tools.results import error_result
from ._config import ServerConfig, parse_servers, untrusted

__all__ = ["DEFER_THRESHOLD", "MCPResult", "MCPServers", "MCPTool", "to_tool_result"]

log = logging.getLogger("nbagent.mcp")

DEFER_THRESHOLD = 20
"""With more MCP tools than this in a run, they wait behind `search_tools` (unless a server says `defer`)."""
MAX_NAME = 64
"""The longest tool name every provider accepts."""
_IMAGE_TYPES = ("image/png", "image/jpeg", "image/gif", "image/webp")
_ANY_OBJECT = {"type": "object", "properties": {}, "additionalProperties": True}


# --------------------------------------------------------------------------------------------------
# Results
# --------------------------------------------------------------------------------------------------
@dataclass(slots=True)
class MCPResult:
    """What an MCP tool call returned, for the user (`run.calls[i].details`)."""

    server: str
    """The server's name."""
    tool: str
    """The tool's name on the server."""
    raw: Any
    """The SDK's `CallToolResult`, as received."""
    structured: Any = None
    """Its `structuredContent` (a dict), when the server gave one."""
    resource_links: list[dict[str, Any]] = field(default_factory=list)
    """Resource links and embedded resources: uri, name, mime type, and text when there is some."""
    hidden: Withheld = field(default_factory=Withheld)
    """Content the server addressed to the user only (`audience: ["user"]`): kept here, never sent, and out
    of reach of read-only tools (`nbagent.safety.gate.Withheld`: `inspect_variable` asks before it shows it,
    after a compaction's stub points at this result too)."""

    @property
    def text(self) -> str:
        """The text content, joined."""
        return "\n".join(c.text for c in self.raw.content if getattr(c, "type", None) == "text")

    @property
    def images(self) -> list[ImageBlock]:
        return [ImageBlock(base64.b64decode(c.data), c.mime_type) for c in self.raw.content
                if getattr(c, "type", None) == "image"]

    def __repr__(self) -> str:
        shown = self.structured if self.structured is not None else self.text
        text = repr(shown)
        if len(text) > 200:
            text = text[:197] + "..."
        error = " is_error" if self.raw.is_error else ""
        return f"<MCPResult {self.server}__{self.tool}{error} {text}>"


def to_tool_result(result: Any, server: str, tool: str) -> ToolResult:
    """Map a `CallToolResult`: text, images, resources and links to content for the model; everything, and
    the raw result, to `details` for the user; `isError` to `is_error`."""
    details = MCPResult(server, tool, result, getattr(result, "structured_content", None))
    blocks: list[TextBlock | ImageBlock] = []
    for item in result.content or ():
        annotations = getattr(item, "annotations", None)
        audience = getattr(annotations, "audience", None) if annotations is not None else None
        if audience and "assistant" not in audience:
            details.hidden.append(item)
            continue
        kind = getattr(item, "type", None)
        if kind == "text":
            blocks.append(TextBlock(item.text))
        elif kind == "image":
            blocks.append(_image(item.data, item.mime_type, "an image"))
        elif kind == "audio":
            size = len(item.data) * 3 // 4
            blocks.append(TextBlock(f"[audio ({item.mime_type}, about {size:,} bytes) kept for the user]"))
        elif kind == "resource_link":
            link = {"uri": str(item.uri), "name": item.name, "mime_type": item.mime_type,
                    "description": item.description}
            details.resource_links.append(link)
            about = f" ({item.mime_type})" if item.mime_type else ""
            desc = f": {item.description}" if item.description else ""
            blocks.append(TextBlock(f"Resource link: {item.name} <{item.uri}>{about}{desc}"))
        elif kind == "resource":
            res = item.resource
            uri, mime = str(res.uri), getattr(res, "mime_type", None)
            text = getattr(res, "text", None)
            details.resource_links.append({"uri": uri, "mime_type": mime, "text": text})
            if text is not None:
                blocks.append(TextBlock(f"Resource <{uri}>:\n{text}"))
            elif mime in _IMAGE_TYPES:
                blocks.append(_image(res.blob, mime, f"the resource <{uri}>"))
            else:
                size = len(getattr(res, "blob", "") or "") * 3 // 4
                blocks.append(TextBlock(f"[resource <{uri}> ({mime or 'binary'}, about {size:,} bytes) kept for the user]"))
        else:
            blocks.append(TextBlock(f"[content of type {kind!r}]"))
    structured = details.structured
    if structured is not None and not any(isinstance(b, TextBlock) for b in blocks):
        blocks.append(TextBlock(json.dumps(structured, ensure_ascii=False)))
    if not blocks:
        blocks.append(TextBlock("(the tool failed without saying why)" if result.is_error else
                                "(the result is addressed to the user only)" if details.hidden else "(no content)"))
    return ToolResult(blocks, details=details, is_error=bool(result.is_error))


def _image(data: str, mime: str | None, what: str) -> TextBlock | ImageBlock:
    try:
        raw = base64.b64decode(data, validate=False)
    except Exception:
        return TextBlock(f"[{what} that is not valid base64 was left out]")
    if mime not in _IMAGE_TYPES:
        return TextBlock(f"[{what} of type {mime} was left out: models read PNG, JPEG, GIF and WebP]")
    return ImageBlock(raw, mime)


# --------------------------------------------------------------------------------------------------
# One tool
# --------------------------------------------------------------------------------------------------
class MCPTool(Tool):
    """One tool of an MCP server, called through the process's connection to it."""

    def __init__(self, config: ServerConfig, remote: Any, base_name: str, *, defer: bool,
                 namespace_description: str | None = None) -> None:
        annotations = getattr(remote, "annotations", None)
        read_only = bool(getattr(annotations, "read_only_hint", None))
        hint = getattr(annotations, "destructive_hint", None)
        destructive = not read_only and (hint if hint is not None else True)  # the spec's default
        self.config = config
        self.remote = remote
        self.remote_name: str = remote.name
        """The tool's name on its server."""
        self.trusted = config.trusted
        title = getattr(remote, "title", None) or getattr(annotations, "title", None) or remote.name
        description = remote.description or title
        options = dict(
            name=base_name, namespace=config.name, description=description, read_only=read_only,
            destructive=destructive, defer_loading=defer, namespace_description=namespace_description,
            describe_activity=lambda args: f"{config.name}: {title}",
        )
        schema = remote.input_schema if isinstance(remote.input_schema, dict) else None
        try:
            super().__init__(self._call, json_schema=schema or dict(_ANY_OBJECT), **options)
        except ToolDefinitionError as exc:  # the server's schema is unusable: let the server validate
            log.warning("MCP tool %s__%s: %s; its arguments are not checked before the call", config.name,
                        remote.name, exc)
            super().__init__(self._call, json_schema=dict(_ANY_OBJECT), **options)

    def is_read_only_call(self, args: Any, ctx: ToolContext | None = None) -> bool:
        """A server's `readOnlyHint` is believed only when the server is trusted."""
        return self.trusted and super().is_read_only_call(args, ctx)

    async def unavailable(self) -> str | None:
        return await _server_down(self.config)

    async def _call(self, _ctx: ToolContext, **arguments: Any) -> ToolResult:
        return await call_tool(self.config, self.remote_name, arguments, _ctx)

    def __repr__(self) -> str:
        return f"<MCPTool {self.name} ({self.config.name}: {self.remote_name})>"


class _Unlisted(Tool):
    """A call to `SERVER__NAME` that no listing has: start the server, and call the tool if it is there now,
    else say clearly why it is not (the server failed to start, or has no such tool)."""

    def __init__(self, toolset: MCPServers, config: ServerConfig, base_name: str) -> None:
        self.toolset, self.config = toolset, config
        super().__init__(self._call, name=base_name, namespace=config.name, json_schema=dict(_ANY_OBJECT),
                         description=f"A tool of the MCP server {config.name} (not listed yet).",
                         describe_activity=lambda args: f"{config.name}: {base_name}")

    async def unavailable(self) -> str | None:
        """The server does not start, or has no such tool: said before anyone is asked to approve the call."""
        from . import _connection

        down = await _server_down(self.config)
        if down is not None:
            return down
        tools = self.toolset._server_tools(self.config, _connection.connection(self.config))
        if not any(t.name == self.name for t in tools):
            names = ", ".join(t.name for t in tools) or "none"
            return f"The MCP server {self.config.name!r} has no tool {self.base_name!r}. Its tools: {names}."
        return None

    async def _call(self, _ctx: ToolContext, **arguments: Any) -> ToolResult:
        from . import _connection

        conn = _connection.connection(self.config)
        try:
            await _connection.on_home(conn, conn.ensure)
        except _connection.ServerError as exc:
            return error_result(str(exc), details=exc)
        for tool in self.toolset._server_tools(self.config, conn):
            if tool.name == self.name:  # there now: its own schema checks the arguments, then it runs
                try:
                    args = tool.validate(arguments)
                except ArgumentsError as exc:
                    return error_result(f"Invalid arguments for {self.name}:\n{exc}\nThe parameters schema is: "
                                        f"{json.dumps(tool.parameters)[:2000]}")
                return await call_tool(self.config, tool.remote_name, args, _ctx)
        names = ", ".join(t.name for t in self.toolset._server_tools(self.config, conn)) or "none"
        return error_result(f"The MCP server {self.config.name!r} has no tool {self.base_name!r}. Its tools: {names}.")


async def _server_down(config: ServerConfig) -> str | None:
    """Why a server cannot take a call (it does not start: the message says why), None when it is up."""
    from . import _connection

    conn = _connection.connection(config)
    if conn.state == "ready":
        return None
    try:
        await _connection.on_home(conn, conn.ensure)
    except _connection.ServerError as exc:
        return str(exc)
    return None


async def call_tool(config: ServerConfig, remote_name: str, arguments: Mapping[str, Any],
                    ctx: ToolContext | None) -> ToolResult:
    """Call one tool of a server on the background loop; progress and log messages go to `ctx`."""
    from . import _connection, _server

    def on_progress(value: float, total: float | None, message: str | None) -> None:
        if ctx is None:
            return
        fraction = value / total if total else None
        label = message or (f"{value:g} of {total:g}" if total else f"{value:g}")
        ctx.progress(label, fraction=fraction)

    def on_log(level: str, text: str) -> None:
        if ctx is not None:
            ctx.progress(output=text + "\n", level=level)

    conn = _connection.connection(config)
    call = _server._Call(on_progress, on_log)
    try:
        result = await _connection.on_home(conn, lambda: conn.call(remote_name, dict(arguments), call, config.timeout))
    except _connection.ServerError as exc:
        return error_result(str(exc), details=exc)
    return to_tool_result(result, config.name, remote_name)


# --------------------------------------------------------------------------------------------------
# The toolset
# --------------------------------------------------------------------------------------------------
class MCPServers(Toolset):
    """MCP servers as a source of tools, planned each turn.

    `MCPServers({"time": {"command": "mcp-server-time"}})` takes the `mcpServers` mapping other MCP clients
    use (or `{"mcpServers": {...}}`, or `ServerConfig`s). Servers start when a run first needs them (the
    run's `prepare` step, before its turn is planned), are shared by every run of the process, and stop
    with it (or with `nbagent.mcp.close()`).
    """

    def __init__(self, servers: Any, *, defer_threshold: int = DEFER_THRESHOLD) -> None:
        super().__init__(name="mcp")
        self.servers: dict[str, ServerConfig] = parse_servers(servers)
        self.defer_threshold = defer_threshold

    # -- which servers ---------------------------------------------------------------------------------
    @property
    def active(self) -> list[ServerConfig]:
        """The servers a run gets: enabled, and trusted (one from a workspace file waits for the person)."""
        return [c for c in self.servers.values() if not c.disabled and untrusted(c) is None]

    @property
    def failed(self) -> list[ServerConfig]:
        """The servers a run gets that failed when last started (left out of its turns until one starts):
        what a run's header must not name among its tools. Looks, starts nothing."""
        from . import _connection

        down = {conn.config.key for conn in _connection.connections() if conn.state == "failed"}
        return [c for c in self.active if c.key in down] if down else []

    @property
    def waiting(self) -> list[ServerConfig]:
        """Servers from workspace files the person has not trusted yet (they start nothing)."""
        return [c for c in self.servers.values() if not c.disabled and untrusted(c) is not None]

    def select(self, names: Iterable[str]) -> MCPServers:
        """The same toolset with only these servers (what `%agent --mcp NAME,...` picks)."""
        names = list(names)
        unknown = [n for n in names if n not in self.servers]
        if unknown:
            known = ", ".join(self.servers) or "none"
            raise ConfigurationError(f"no MCP server named {', '.join(map(repr, unknown))}; configured: {known}")
        chosen = {n: dataclasses.replace(self.servers[n], disabled=False) for n in names}
        return MCPServers(chosen, defer_threshold=self.defer_threshold)

    # -- the run's steps -----------------------------------------------------------------------------
    async def prepare(self, run: Any = None) -> None:
        """Start the servers not started yet (and restart failed ones), all at once, before a turn is
        planned. A server that fails is left out of the turn; its error stays in `status()`."""
        if not self.active:
            return
        from . import _connection

        conns = [_connection.connection(c) for c in self.active]
        if all(c.state == "ready" and not c._stale for c in conns):
            return
        await asyncio.gather(*(self._start(c) for c in conns))

    @staticmethod
    async def _start(conn: Any) -> None:
        from . import _connection

        try:
            await _connection.on_home(conn, lambda: conn.ensure(retry=False))
        except Exception as exc:
            log.warning("%s", exc)

    def tools(self, run: Any = None) -> list[Tool]:
        """This turn's MCP tools (from each server's last good listing)."""
        if not self.active:
            return []
        from . import _connection

        conns = [(c, _connection.connection(c)) for c in self.active]
        for config, conn in conns:
            if conn.state == "idle":
                # Nobody ran `prepare` (a caller that plans by hand): start it now where that can be waited for.
                try:
                    _connection.run_blocking(conn, lambda conn=conn: self._start(conn), config.startup_timeout + 5)
                except Exception as exc:  # pragma: no cover - _start logs server errors
                    log.warning("starting MCP server %s failed: %s", config.name, exc)
        total = sum(len(conn.tools or ()) for _, conn in conns)
        out: list[Tool] = []
        for config, conn in conns:
            defer = config.defer if config.defer is not None else total > self.defer_threshold
            out.extend(self._server_tools(config, conn, defer))
        return out

    def _server_tools(self, config: ServerConfig, conn: Any, defer: bool = False) -> list[MCPTool]:
        key = (id(conn), conn.listing, defer, conn.instructions, config.settings)
        cached = _TOOLS.get(key)
        if cached is not None:
            return cached
        about = config.description or (conn.instructions or "").strip().split("\n")[0][:300] or (
            f"Tools of the MCP server {config.name}")
        tools: list[MCPTool] = []
        used: set[str] = set()
        for remote in conn.tools or ():
            base = tool_name(config.name, remote.name, used)
            try:
                tools.append(MCPTool(config, remote, base, defer=defer, namespace_description=about))
            except ToolDefinitionError as exc:
                log.warning("MCP tool %s of %s left out: %s", remote.name, config.name, exc)
        if len(_TOOLS) > 256:
            _TOOLS.clear()
        _TOOLS[key] = tools
        return tools

    def resolve(self, name: str) -> Tool | None:
        """A tool for a call to `SERVER__NAME` that is in no plan: the server is one of these, but down or
        not started (or the tool appeared since). The call then says clearly what is wrong."""
        server, sep, base = name.partition("__")
        config = self.servers.get(server)
        if not sep or config is None or not base or untrusted(config) is not None:
            return None
        from . import _connection

        conn = _connection.connection(config)
        for tool in self._server_tools(config, conn):
            if tool.name == name:
                return tool
        try:
            return _Unlisted(self, config, base)
        except ToolDefinitionError:
            return None

    # -- the user's view -------------------------------------------------------------------------------
    def status(self) -> list[dict[str, Any]]:
        """Each configured server: state, tools, error and stderr tail (nothing is started for this)."""
        out = []
        from . import _connection

        for config in self.servers.values():
            entry = _connection.connection(config).status()
            entry["disabled"] = config.disabled
            entry["trusted"] = config.trusted
            why = untrusted(config)
            if why is not None:
                entry["state"], entry["error"] = "not trusted yet", why
            out.append(entry)
        return out

    def __repr__(self) -> str:
        return f"<MCPServers {', '.join(self.servers) or 'none'}>"


_TOOLS: dict[tuple, list[MCPTool]] = {}
"""The tools made from each listing, shared by every toolset and run of the process (a schema is checked
once, not at every `%agent`)."""


def tool_name(server: str, remote: str, used: set[str]) -> str:
    """The base name of a server's tool: characters every provider accepts, the whole `SERVER__NAME` at most
    64 long, and unique within the server."""
    base = re.sub(r"[^A-Za-z0-9_-]", "_", remote) or "tool"
    if not re.match(r"[A-Za-z_]", base):
        base = "_" + base
    room = MAX_NAME - len(server) - 2
    if len(base) > room or base in used:
        digest = hashlib.sha1(remote.encode()).hexdigest()[:6]
        base = base[: max(1, room - 7)] + "_" + digest
    used.add(base)
    return base
