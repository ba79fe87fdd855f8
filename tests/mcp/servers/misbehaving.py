"""A small MCP server for the failure tests, started as `python misbehaving.py MODE [FLAG_FILE]`.

Modes: `ok` (a working server built with the SDK: `log_then_answer`, `freeze`), `plain` (the same
`log_then_answer` in a few lines of JSON-RPC, without the SDK, so it starts at once), `silent` (reads stdin,
never answers), `garbage` (answers anything with a line that is not JSON-RPC), `exit` (writes to stderr and
exits 3). With a FLAG_FILE, a misbehaving mode turns into `plain` once that file exists: the restart tests.
"""

import json
import os
import sys
import time

mode = sys.argv[1] if len(sys.argv) > 1 else "ok"
if len(sys.argv) > 2 and os.path.exists(sys.argv[2]):
    mode = "plain"

if mode == "plain":
    TOOL = {"name": "log_then_answer", "description": "Log, then answer with the text.",
            "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}}

    def send(message):
        sys.stdout.write(json.dumps(message) + "\n")
        sys.stdout.flush()

    for line in sys.stdin:
        request = json.loads(line)
        method, rid = request.get("method"), request.get("id")
        if rid is None:
            continue  # a notification
        if method == "initialize":
            result = {"protocolVersion": request["params"]["protocolVersion"], "serverInfo": {"name": "plain", "version": "1"},
                      "capabilities": {"tools": {}, "logging": {}}}
        elif method == "tools/list":
            result = {"tools": [TOOL]}
        elif method == "tools/call":
            text = request["params"]["arguments"]["text"]
            send({"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": f"working on {text}"}})
            result = {"content": [{"type": "text", "text": f"answer: {text}"}]}
        elif method in ("ping", "logging/setLevel"):
            result = {}
        else:
            send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": f"no method {method}"}})
            continue
        send({"jsonrpc": "2.0", "id": rid, "result": result})
    sys.exit(0)

if mode == "silent":
    sys.stderr.write("silent server: listening and saying nothing\n")
    sys.stderr.flush()
    for _ in sys.stdin:
        pass
    sys.exit(0)
if mode == "garbage":
    sys.stderr.write("garbage server: about to answer nonsense\n")
    sys.stderr.flush()
    for _ in sys.stdin:
        sys.stdout.write("hello, this is not JSON-RPC\n")
        sys.stdout.flush()
    sys.exit(0)
if mode == "exit":
    sys.stderr.write("exit server: missing configuration, giving up\n")
    sys.exit(3)

from mcp.server.mcpserver import Context, MCPServer  # noqa: E402

server = MCPServer("misbehaving")


@server.tool()
async def log_then_answer(text: str, ctx: Context) -> str:
    """Log two messages, then answer with the text."""
    await ctx.info(f"working on {text}")
    await ctx.warning("almost done")
    return f"answer: {text}"


@server.tool()
async def freeze(seconds: float = 3600) -> str:
    """Block the whole server (its event loop too) for a while: it answers nothing meanwhile, pings included."""
    time.sleep(seconds)
    return "thawed"


server.run("stdio")
