"""`python -m nbagent.demo`: a short offline run with `ScriptedModel`, printed as it happens."""

from __future__ import annotations

import asyncio
import sys

from .agent import Agent
from .context import ToolContext
from .events import ApprovalDecided, ApprovalRequested, TextDelta, ToolCallFinished, ToolCallStarted, TurnStarted
from .messages import AssistantMessage, ToolCall
from .providers import ScriptedModel
from .tools import tool
from .transcript import check_transcript


@tool(read_only=True, describe_activity=lambda a: f"Adding {a.a} and {a.b}")
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool(describe_activity=lambda a: f"Saving note {a.title!r}", destructive=True)
async def save_note(title: str, text: str, ctx: ToolContext) -> str:
    """Save a note."""
    ctx.progress("writing", fraction=0.5)
    await asyncio.sleep(0.05)
    return f"saved {title!r} ({len(text)} characters)"


def script() -> ScriptedModel:
    return ScriptedModel([
        AssistantMessage(text="Let me add those.", tool_calls=[
            ToolCall(name="add", arguments={"a": 2, "b": 3}),
            ToolCall(name="add", raw_arguments="```json\n{'a': 40, 'b': 2,}\n```"),
        ]),
        AssistantMessage(text="Saving a note.", tool_calls=[
            ToolCall(name="save_note", arguments={"title": "sums", "text": "2+3=5, 40+2=42"}),
        ]),
        "2 + 3 = 5 and 40 + 2 = 42; the note is saved.",
    ], delay=0.01)


def main() -> int:
    def approver(request) -> bool:
        print(f"   ? approve {request.name}({request.arguments})? yes ({request.reason})")
        return True

    def show(event) -> None:
        if isinstance(event, TurnStarted):
            print(f"\n-- turn {event.turn} (tools: {', '.join(event.tools)})")
        elif isinstance(event, TextDelta):
            print(event.text, end="", flush=True)
        elif isinstance(event, ToolCallStarted):
            print(f"\n   > {event.call.name} {event.call.raw_arguments}")
        elif isinstance(event, ApprovalRequested):
            pass
        elif isinstance(event, ApprovalDecided):
            print(f"   {event.decision}")
        elif isinstance(event, ToolCallFinished):
            c = event.call
            repaired = f"  (repaired: {'; '.join(c.repairs)})" if c.repairs else ""
            print(f"   < {c.label}: {c.status} -> {c.result.text!r}{repaired}")

    agent = Agent(model=script(), tools=[add, save_note], approver=approver)
    run = agent.run_sync("Add 2 and 3, and 40 and 2, then save a note.", on_event=show)
    print(f"\n\n{run!r}")
    print("transcript valid:", not check_transcript(run.messages))
    return 0 if run.status == "done" else 1


if __name__ == "__main__":
    sys.exit(main())
