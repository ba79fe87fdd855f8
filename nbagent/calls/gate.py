"""The secret gate's choke point for tool results: `admit` is the last step of every call's result.

`nbagent.calls.execution` calls it in the one place every call gets its result (`_settle`): before the
result is normalised, and again after the `tool_result_persist` hooks when a hook changed it, for the
results the runtime writes itself too (unknown tool, invalid arguments, denied, cancelled, timed out).
Nothing after it changes what the model gets. The rules (`nbagent.safety.gate`):

1. A result derived from a secret-bearing source in a form redaction cannot follow (the tool said so with
   `ctx.derived_from(reason)`) reaches the model only when a person consented to the call (an approval,
   a grant or rule they made, a policy or mode they chose to allow everything); auto-allowed (a read-only
   call, acceptEdits) it is withheld, with a result that says why.
2. Its text is screened: every secret whole, in pieces, reversed, encoded or wrapped becomes
   `[REDACTED:NAME]` (text blocks, `details` when it is a string, the view-only presentation). `details`,
   the live object, is never sent and is left as it is. Where the text only repeats a string of the call's
   own arguments (`No matches for 'token=sk-pro'`), it is left alone: the model wrote it, and redacting an
   echoed guess would tell it the guess was right.
"""

from __future__ import annotations

from typing import Any, Sequence

from ..decisions import Decision
from ..messages import ToolResult
from ..safety.secrets import redact
from ..tools.results import error_result, redact_result

__all__ = ["admit", "automatic"]


def automatic(decision: Decision | None) -> bool:
    """Whether a call was allowed without a person's consent to it: by the built-in auto-allow of read-only
    calls, or by acceptEdits (which allows edits wholesale, not this one)."""
    if decision is None or not decision.allow:
        return False
    return decision.source == "read_only" or (decision.source == "mode" and decision.reason.startswith("acceptEdits"))


def admit(result: ToolResult, *, derived: Sequence[str] = (), decision: Decision | None = None,
          tool: str = "the tool", arguments: Any = None) -> ToolResult:
    """`result` as the model may get it (see the module docstring). `arguments`: the call's arguments as
    the model sent them; where the result only repeats one of their strings, it is not redacted (the
    model wrote it; redacting an echoed guess would say the guess was right)."""
    if derived and automatic(decision):
        reasons = "; ".join(dict.fromkeys(derived))
        return error_result(
            f"The result was withheld: {tool} derived it from a value that holds a credential ({reasons}), and "
            "the call was allowed without asking. Ask the person, or use a tool that asks first.",
            details=result.details)
    screened = redact_result(result, _strings(arguments))
    presentation = [_screened(p) for p in result.presentation]
    if presentation or result.presentation:
        if any(a is not b for a, b in zip(presentation, result.presentation)) or screened is not result:
            screened = ToolResult(list(screened.content), details=screened.details, is_error=screened.is_error,
                                  terminate=screened.terminate, presentation=presentation)
    return screened


def _strings(value: Any, out: list[str] | None = None) -> tuple[str, ...]:
    """The strings inside a call's arguments (a JSON-like value, or its raw JSON text)."""
    out = [] if out is None else out
    if isinstance(value, str):
        out.append(value)
    elif isinstance(value, dict):
        for v in value.values():
            _strings(v, out)
    elif isinstance(value, (list, tuple)):
        for v in value:
            _strings(v, out)
    return tuple(out)


def _screened(item: Any) -> Any:
    if isinstance(getattr(item, "data", None), str):
        text = redact(item.data)
        if text != item.data:
            return type(item)(item.kind, text, item.title)
    return item
