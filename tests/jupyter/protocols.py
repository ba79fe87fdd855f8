"""Checks of the comm messages against their protocols (nbagent/jupyter/{notebook,panel}/protocol.json).

`reply_problem` says why a reply to an op is not what the protocol says it is; `panel_problems` looks at every
message the kernel sent on a panel comm, `notebook_problems` at every message it sent on its notebook comms.
The fake page (fake_frontend.FakeNotebook) checks each request it gets and each answer it gives the same way.
"""

from __future__ import annotations

from typing import Any

from nbagent.jupyter.protocol import definition, problem

REPLY = {"notebook": "PageReply", "panel": "Reply"}


def result_problem(room: str, op: str, result: Any) -> str | None:
    """Why `result` is not what the reply to `op` holds (`Results` names it, by op)."""
    spec = definition(room, "Results")["properties"].get(op)
    if spec is None:
        return f"the {room} protocol has no op {op!r}"
    return problem(room, spec["$ref"].rsplit("/", 1)[1], result)


def reply_problem(room: str, op: str | None, reply: Any) -> str | None:
    why = problem(room, REPLY[room], reply)
    if why is None and op is not None and reply.get("ok"):
        why = result_problem(room, op, reply["result"])
    return why


def _sent(kernel: Any, comm_id: str) -> list[dict[str, Any]]:
    return [m["content"]["data"] for m in list(kernel.iopub)
            if m["msg_type"] == "comm_msg" and m["content"].get("comm_id") == comm_id]


def panel_problems(kernel: Any, comm_id: str, asked: dict[int, str]) -> list[str]:
    """Every message the kernel sent on the panel comm `comm_id` that is not in the protocol (`asked`: the op of
    each request id the page sent)."""
    found = []
    for data in _sent(kernel, comm_id):
        if isinstance(data, dict) and "event" in data:
            why = problem("panel", "RunEvent", data)
        else:
            rid = data.get("id") if isinstance(data, dict) else None
            why = reply_problem("panel", asked.get(rid) if isinstance(rid, int) else None, data)
        if why is not None:
            found.append(f"{why}: {str(data)[:300]}")
    return found


def notebook_problems(kernel: Any) -> list[str]:
    """Every request the kernel sent on its `nbagent.notebook` comms that is not in the protocol."""
    comms = {m["content"]["comm_id"] for m in list(kernel.iopub)
             if m["msg_type"] == "comm_open" and m["content"].get("target_name") == "nbagent.notebook"}
    found = []
    for comm_id in comms:
        for data in _sent(kernel, comm_id):
            why = problem("notebook", "KernelRequest", data)
            if why is not None:
                found.append(f"{why}: {str(data)[:300]}")
    return found
