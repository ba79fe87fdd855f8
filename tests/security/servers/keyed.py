"""A small MCP server (plain JSON-RPC over stdio, no SDK) that holds a credential from its configuration's
`env` (`SERVICE_TOKEN`) and echoes it in its answers, with a part addressed to the user only.

Tool `whoami` (read-only): `connected with token <SERVICE_TOKEN>` for the model, and `private note: <NOTE>`
with `audience: ["user"]`.
"""

import json
import os
import sys

TOOL = {"name": "whoami", "description": "Say which account the server is connected as.",
        "inputSchema": {"type": "object", "properties": {}},
        "annotations": {"readOnlyHint": True}}


def send(message):
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


for line in sys.stdin:
    request = json.loads(line)
    method, rid = request.get("method"), request.get("id")
    if rid is None:
        continue
    if method == "initialize":
        result = {"protocolVersion": request["params"]["protocolVersion"], "serverInfo": {"name": "keyed", "version": "1"},
                  "capabilities": {"tools": {}}}
    elif method == "tools/list":
        result = {"tools": [TOOL]}
    elif method == "tools/call":
        token = os.environ.get("SERVICE_TOKEN", "")
        result = {"content": [
            {"type": "text", "text": f"connected with token {token}"},
            {"type": "text", "text": f"private note: {os.environ.get('NOTE', '')}", "annotations": {"audience": ["user"]}},
        ]}
    elif method == "ping":
        result = {}
    else:
        send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": f"no method {method}"}})
        continue
    send({"jsonrpc": "2.0", "id": rid, "result": result})
