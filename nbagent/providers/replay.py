"""`ReplayModel`: answers from a stored session's recorded responses, offline and free.

    model = load_model("replay:20261201-051530-a1b2c3")          # or replay: for the latest session
    agent = Agent(model=model, tools=replay_tools(tools, model, "recorded"))

Each request is answered with the assistant message recorded at the same place in the conversation:
a request whose conversation has N messages gets the recorded message number N. Before answering, the
request is compared with the record: every user message must be the same text, every tool result
must answer the same call. Where they differ, the request fails with `ReplayDivergence`, naming the
message and showing both versions, rather than answering something that no longer fits.

Tools, as the person picks (`replay_tools`):
- `"rerun"`: each tool runs again; when its result differs from the recorded one, the difference is
  shown in the call's output (the conversation goes on with the recorded answers either way);
- `"recorded"`: each tool returns its recorded result without running. Its live object (`details`) is
  a `NotRestored` that says what it was.
Either way every call goes through the permission pipeline as in the live run: replaying a
destructive call still asks.

Reads: a stored session, which anyone who can write the workspace could have forged. What stops harm: the
store refuses a file whose signatures do not verify (`nbagent.sessions`), and a replay approves nothing by
itself: a recorded decision is never reused, every call is decided again by rules, mode and approver.
"""

from __future__ import annotations

import copy
import difflib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, AsyncIterator, Iterable, Sequence

from ..errors import ModelError
from ..events import TextDelta
from ..messages import AssistantMessage, Message, TextBlock, ToolResult, ToolResultMessage, UserMessage
from .base import Model

__all__ = ["NotRestored", "ReplayDivergence", "ReplayModel", "replay_tools"]


class ReplayDivergence(ModelError):
    """A request does not match the recorded conversation it is replayed from."""


@dataclass(slots=True)
class NotRestored:
    """Stands in for a live object that did not survive the kernel: what it was, and why it is gone."""

    type_name: str | None
    call_id: str

    def __str__(self) -> str:
        what = f"a {self.type_name}" if self.type_name else "a Python object"
        return f"{what} (call {self.call_id}): live objects do not survive a kernel restart; run the call again to get it"

    __repr__ = __str__


class ReplayModel(Model):
    """A `Model` that answers from a stored session (see the module docstring)."""

    provider = "replay"

    def __init__(self, session: Any = None, *, workspace: str | os.PathLike[str] | None = None) -> None:
        from ..sessions import StoredSession, list_sessions, load_session

        root = Path(workspace) if workspace is not None else Path.cwd()
        if isinstance(session, StoredSession):
            stored = session
        else:
            if not session:
                found = list_sessions(root)
                if not found:
                    raise ModelError(f"replay: no stored session in {root / '.nbagent' / 'sessions'} to replay")
                session = found[-1].id
            stored = load_session(root, session)
        self.session = stored
        self.name = stored.info.id
        self.transcript: list[Message] = stored.messages
        self.results: dict[str, ToolResultMessage] = {
            m.tool_call_id: m for m in stored.messages if isinstance(m, ToolResultMessage)}
        self.details_types: dict[str, str | None] = {c.get("id"): c.get("details_type") for c in stored.calls}
        self.requests = 0

    @property
    def spec(self) -> str:
        return f"replay:{self.name}"

    # -- the Model protocol ------------------------------------------------------------------------------
    async def stream(self, messages: Sequence[Message], tools: Sequence[Any] = (), *, instructions: str | None = None,
                     on_request: Any = None, **settings: Any) -> AsyncIterator[Any]:
        self.requests += 1
        answer = self.answer(messages)
        if on_request is not None:
            on_request({"replay": self.name, "request": self.requests, "messages": len(messages),
                        "tools": [getattr(t, "name", str(t)) for t in tools]})
        if answer.text:
            yield TextDelta(answer.text)
        yield copy.deepcopy(answer)

    def __repr__(self) -> str:
        return f"<ReplayModel {self.spec}>"

    # -- matching ----------------------------------------------------------------------------------------
    def answer(self, messages: Sequence[Message]) -> AssistantMessage:
        """The recorded response for a request of `messages`, after checking they match the record."""
        n = len(messages)
        record = self.transcript
        for i, (now, then) in enumerate(zip(messages, record)):
            problem = _differs(now, then)
            if problem:
                raise ReplayDivergence(
                    f"replay of {self.name}, request {self.requests}: message {i} differs from the record "
                    f"({problem}).\n  recorded: {_describe(then)}\n  now:      {_describe(now)}")
        if n > len(record):
            raise ReplayDivergence(
                f"replay of {self.name}, request {self.requests}: the conversation has {n} messages but the "
                f"record only {len(record)}; message {len(record)} is new: {_describe(messages[len(record)])}")
        if n == len(record) or not isinstance(record[n], AssistantMessage):
            raise ReplayDivergence(
                f"replay of {self.name}, request {self.requests}: the record has no model response after "
                f"message {n - 1} ({_describe(messages[-1]) if messages else 'nothing'}); it ran out or went another way")
        return record[n]


def _differs(now: Message, then: Message) -> str:
    if type(now) is not type(then):
        return f"a {type(now).__name__} where the record has a {type(then).__name__}"
    if isinstance(now, UserMessage) and _text(now) != _text(then):
        return "the prompt is different"
    if isinstance(now, ToolResultMessage) and now.tool_call_id != then.tool_call_id:  # type: ignore[union-attr]
        return "a result for another call"
    if isinstance(now, AssistantMessage):
        ids = [c.id for c in now.tool_calls]
        if ids != [c.id for c in then.tool_calls]:  # type: ignore[union-attr]
            return "other tool calls"
    return ""


def _text(message: Any) -> str:
    content = message.content
    if isinstance(content, str):
        return content
    return "".join(b.text if isinstance(b, TextBlock) else "[image]" for b in content)


def _describe(message: Any) -> str:
    text = _text(message) if hasattr(message, "content") else getattr(message, "text", "")
    if isinstance(message, AssistantMessage):
        calls = ", ".join(c.name for c in message.tool_calls)
        text = (text + (f" [calls: {calls}]" if calls else "")).strip()
    text = " ".join(text.split())
    return f"{type(message).__name__} {text[:120]!r}"


# -- tools -----------------------------------------------------------------------------------------------

def replay_tools(tools: Iterable[Any], model: ReplayModel, mode: str = "rerun") -> list[Any]:
    """`tools` set up to replay `model`'s session: `"rerun"` (run again, differences shown) or `"recorded"`
    (the recorded results, nothing runs). Permission checks apply either way."""
    if mode not in ("rerun", "recorded"):
        raise ValueError(f"replay mode must be 'rerun' or 'recorded', not {mode!r}")
    out = []
    for t in tools:
        if not hasattr(t, "invoke"):
            out.append(t)
            continue
        out.append(_replayed(t, model, mode))
    return out


def _replayed(tool: Any, model: ReplayModel, mode: str) -> Any:
    proxy = copy.copy(tool)
    original = tool.invoke

    async def invoke(args: Any, ctx: Any) -> Any:
        recorded = model.results.get(getattr(ctx, "call_id", ""))
        if mode == "recorded":
            if recorded is None:
                return ToolResult([TextBlock("replay: this call has no recorded result, and replay does not run tools")],
                                  is_error=True)
            return ToolResult(list(recorded.content), details=NotRestored(model.details_types.get(ctx.call_id), ctx.call_id),
                              is_error=recorded.is_error)
        value = original(args, ctx)
        if hasattr(value, "__await__"):
            value = await value
        if recorded is not None and ctx is not None:
            _report_difference(value, recorded, ctx)
        return value

    proxy.invoke = invoke
    proxy.is_async = True
    return proxy


def _report_difference(value: Any, recorded: ToolResultMessage, ctx: Any) -> None:
    from ..tools.results import to_tool_result

    try:
        now = _text(to_tool_result(value))
    except Exception:  # the runtime reports a result it cannot show on its own
        return
    then = _text(recorded)
    if now == then:
        return
    diff = "".join(difflib.unified_diff(then.splitlines(True), now.splitlines(True), "recorded", "now", n=1))
    if len(diff) > 4000:
        diff = diff[:4000] + "\n[... diff cut ...]\n"
    ctx.progress(message="differs from the record", output="[replay] the result differs from the recorded one:\n" + diff,
                 keep_open="differs from the recorded result")  # a view shows this output open, under that label
