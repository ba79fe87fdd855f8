"""What the panel is told about a run: a JSON summary, small enough to send at every step that matters.

    {"id", "status", "label", "source": "panel" | "cell", "kind", "head": {model, mode, tools, cost, context},
     "widget": the live view's widget model id (live runs) | None, "html": the static rendering (ended runs),
     "reviews": the notebook edits waiting for a decision, "changes": the cells the run changed,
     "kernel_only": the names a finished run made that no cell defines (its cells: op "to_cells"),
     "plan": a plan-first run's plan, "step": the step of the approved plan a run carrying it out says it is on}

A review carries the whole proposal (every byte of `old` and `new`) and a digest of the exact arguments
the approval would allow; a decision sent back with another digest is refused (`digest`). A change carries
what the cell held before and after, so the page can undo it exactly, and only while the cell still holds
what the agent left.

What it reads: runs and their records (the model's arguments and the tools' results: untrusted text). It
only puts them into JSON strings; the page sanitizes HTML and writes everything else as text.
"""

from __future__ import annotations

from typing import Any, Callable

from nbagent import render
from nbagent.render import usage as render_usage
from nbagent.render.steps import run_step

from ..live.approval import digest

__all__ = ["before_edit", "changes", "digest", "head", "reviews", "run_summary", "stored_summary", "EDIT_TOOLS"]

EDIT_TOOLS = ("edit_cell", "insert_cell", "delete_cell")
MAX_STORED = 40
"""Messages of a stored conversation shown in the panel (the latest)."""
MAX_CONTEXT = 20_000
"""Characters of the context sent with a stored message that the panel shows folded under it."""


def head(run: Any) -> dict[str, Any]:
    """The model, mode and tools of the run, its cost and how full the context window is."""
    tools_short, tools_full = render.tools_summary(run)
    cost, cost_title = render_usage.cost_text(run)
    context, context_title, fraction = render_usage.context_text(run)
    return {"model": str(getattr(run.model, "spec", None) or type(run.model).__name__),
            "mode": str(getattr(run.agent, "mode", "")), "tools": tools_short, "tools_title": tools_full,
            "cost": cost, "cost_title": cost_title, "context": context, "context_title": context_title,
            "fraction": fraction}


def reviews(view: Any, seen: Callable[[str], str | None] = lambda _cell: None) -> list[dict[str, Any]]:
    """The calls of a live view that wait for a decision, notebook edits with their whole proposal; an edit or a
    deletion also with what the agent last read of its cell (`seen`), so the page can tell, before anyone
    clicks, that the person changed the cell since."""
    out = []
    for row in list(getattr(view, "pending", None) or []):
        pending, rec = row.pending, row.record
        if pending is None or rec is None:
            continue
        arguments = dict(pending.request.arguments or {})
        item: dict[str, Any] = {"call": rec.id, "tool": pending.request.name, "digest": pending.digest}
        if pending.request.name in EDIT_TOOLS:
            item["arguments"] = {k: v for k, v in arguments.items() if isinstance(v, (str, type(None)))}
            if pending.request.name != "insert_cell" and isinstance(arguments.get("cell_id"), str):
                item["expected"] = seen(arguments["cell_id"])
        out.append(item)
    return out


def before_edit(after: str, old: str, new: str) -> str | None:
    """What a cell held before `edit_cell` replaced the one occurrence of `old` with `new`, given what it holds
    after; None when that cannot be told for sure (then the page says to undo with Ctrl+Z in the cell)."""
    found: list[str] = []
    start = after.find(new) if new else -1
    positions = []
    while start >= 0:
        positions.append(start)
        start = after.find(new, start + 1)
    if not new:  # an insertion of nothing: every position is possible
        positions = list(range(len(after) + 1))
    for at in positions:
        candidate = after[:at] + old + after[at + len(new):]
        if candidate.count(old) == 1 and candidate.find(old) == at and candidate not in found:
            found.append(candidate)
    return found[0] if len(found) == 1 else None


def changes(run: Any, undone: set[str]) -> list[dict[str, Any]]:
    """The cells the run inserted, edited or deleted, in order, each with what it held before and after."""
    out = []
    for rec in list(run.calls):
        details = getattr(getattr(rec, "result", None), "details", None)
        action = getattr(details, "action", None)
        if action not in ("inserted", "edited", "deleted") or rec.status != "ok":
            continue
        after = str(details.source)
        before: str | None
        if action == "inserted":
            before = ""
        elif action == "deleted":
            before, after = after, ""
        else:
            args = rec.arguments or {}
            before = before_edit(after, str(args.get("old", "")), str(args.get("new", "")))
        out.append({"call": rec.id, "action": action, "cell_id": str(details.cell_id),
                    "name": str(getattr(details, "name", "") or f"cell {details.number}"), "index": int(details.number) - 1,
                    "cell_type": str(getattr(details, "cell_type", "") or "code"), "before": before, "after": after,
                    "undone": rec.id in undone})
    return out


def run_summary(run: Any, view: Any, meta: dict[str, Any], undone: set[str], *, cached: dict[str, Any] | None = None,
                fresh: frozenset[str] | set[str] = frozenset({"head", "changes"}),
                seen: Callable[[str], str | None] = lambda _cell: None) -> dict[str, Any]:
    """The run's summary. `cached` (the previous summary's parts) is reused for what `fresh` does not name:
    "head" (model, cost, context: it changes with a model response) and "changes" (with an edit's end)."""
    live = not run.done
    cached = cached if cached is not None else {}
    if live and "head" not in fresh and "head" in cached:
        head_part = cached["head"]
    else:
        head_part = cached["head"] = head(run)
    if live and "changes" not in fresh and "changes" in cached:
        change_list = cached["changes"]
    else:
        change_list = cached["changes"] = changes(run, undone)
    widget = getattr(view, "widget", None)
    widget_id = None
    if live and widget is not None and not getattr(view, "ended", False) and getattr(view, "stopped", None) is None:
        widget_id = getattr(widget, "model_id", None)
    html = None
    if not live or getattr(view, "stopped", None) is not None:
        if view is not None and hasattr(view, "static_bundle"):
            html = view.static_bundle()["text/html"]
        else:
            html = render.run_html(run)
    return {"id": run.id, "status": run.status, "label": meta.get("label") or render.one_line(render.prompt_words(run.prompt)[0], 120),
            "source": meta.get("source", "cell"), "kind": meta.get("kind", "ask"), "cell": meta.get("cell"),
            "head": head_part, "widget": widget_id, "html": html,
            "reviews": reviews(view, seen) if live and view is not None else [], "changes": change_list,
            "plan": _plan(run) if meta.get("kind") == "plan" and run.status == "done" else None,
            "step": run_step(run, meta.get("plan_steps")) if meta.get("kind") == "follow" else None,
            "kernel_only": [] if live else _kernel_only(run)}


def _kernel_only(run: Any) -> list[str]:
    try:
        names = run.kernel_only
    except Exception:  # the notebook's cells could not be read: nothing to offer, rather than no summary
        return []
    return [str(n) for n in names] if isinstance(names, list) else []


def _plan(run: Any) -> str | None:
    """The plan a plan-first run proposed: its last text."""
    for message in reversed(list(getattr(run, "new_messages", ()) or ())):
        if getattr(message, "kind", "") == "assistant" and str(getattr(message, "text", "") or "").strip():
            return str(message.text).strip()
    return None


def stored_summary(stored: Any) -> dict[str, Any]:
    """A stored conversation as the panel lists it (text only): who said what, the latest messages."""
    items = []
    for message in stored.messages[-MAX_STORED:]:
        role = getattr(message, "kind", "")
        text = str(getattr(message, "text", "") or "")
        calls = [c.name for c in getattr(message, "tool_calls", None) or []]
        if role == "user" and text:
            said = getattr(message, "said", None)
            item = {"role": "you", "text": render.one_line(said if said is not None else text, 160)}
            if said is not None:  # the context a button or a mention sent with the person's words, folded
                item["context"] = text[:MAX_CONTEXT]
            items.append(item)
        elif role == "assistant" and (text or calls):
            line = text.strip()
            if calls:
                line = (line + "\n" if line else "") + "called " + ", ".join(calls)
            items.append({"role": "nbagent", "text": line[:2000]})
    info = stored.info
    return {"id": info.id, "runs": info.runs, "turns": info.turns, "model": info.model, "messages": items,
            "updated": info.updated}
