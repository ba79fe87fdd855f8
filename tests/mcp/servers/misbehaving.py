"""A small MCP server for the failure tests, started as `python misbehaving.py MODE [FLAG_FILE]`.

Modes: `ok` (a working server: `log_then_answer`, `freeze`), `silent` (reads stdin, never answers),
`garbage` (answers anything with a line that is not JSON-RPC), `exit` (writes to stderr and exits 3).
With a FLAG_FILE, a misbehaving mode turns into `ok` once that file exists: the restart test.
"""

import sys
import time

mode = sys.argv[1] if len(sys.argv) > 1 else "ok"
if len(sys.argv) > 2:
    import os

    if os.path.exists(sys.argv[2]):
        mode = "ok"

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
def freeze(seconds: float = 3600) -> str:
    """Block the whole server (its event loop too) for a while: it answers nothing meanwhile, pings included."""
    time.sleep(seconds)
    return "thawed"


server.run("stdio")
