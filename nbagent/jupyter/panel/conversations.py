"""The panel's list of this notebook's conversations (op "conversations"), opening one (op "open"), and the
check a click to continue one passes (`verified`).

A conversation is a stored session of this notebook (`StoredConversation.mine`: by the notebook's id, else its
path; those in which the model never answered left out), listed newest first with the words the person started
it with, when it was last written, and how many runs and calls it holds.

What it reads, who could have written it: the workspace's session files, which the model, a cloned repository
or anyone who can write the workspace could have forged. What stops harm: only a session the store's loader
verifies (`load_session(..., unsigned=False)`: every line signed with the key kept outside the workspace) is
offered to continue; one that does not verify is listed with why, and neither opening it nor a start that
names it continues it. What is listed is text (the first words, shortened to one line): the page writes it as
text.
"""

from __future__ import annotations

import warnings
from typing import Any

from IPython.core.error import UsageError

from nbagent import render

from .model import stored_summary

__all__ = ["MAX_LISTED", "conversation_list", "open_conversation", "verified"]

MAX_LISTED = 30
"""Conversations listed (the newest); `more` says how many older ones `%agent --sessions` lists."""


def verified(workspace: Any, session_id: str) -> Any:
    """The stored session, read by the store's loader only when every line verifies (never an unsigned one,
    whatever NBAGENT_UNSIGNED_SESSIONS says: a click is not the person vouching for a file); UsageError saying
    why otherwise."""
    from nbagent.sessions import SessionError, load_session

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # skipped lines are in `.warnings`; the page is told nothing twice
            return load_session(workspace, session_id, unsigned=False)
    except (SessionError, OSError, ValueError) as exc:
        raise UsageError(f"this conversation cannot be continued from the panel: {exc}") from None


def _why_not(workspace: Any, session_id: str) -> str | None:
    try:
        verified(workspace, session_id)
    except UsageError as exc:
        return str(exc).removeprefix("this conversation cannot be continued from the panel: ")
    return None


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def conversation_list(stored: Any) -> dict[str, Any]:
    """This notebook's conversations, newest first: {"conversations": [...], "current": the one the box
    continues (None: the next prompt starts one), "more": how many older ones are left out}."""
    try:
        found = stored.mine()
    except (OSError, ValueError) as exc:
        raise UsageError(f"the stored conversations could not be read: {exc}") from None
    newest = sorted(found, key=lambda i: (i.updated, i.created, i.id), reverse=True)
    items = []
    for info in newest[:MAX_LISTED]:
        why = _why_not(stored.workspace, info.id)
        first = _text(info.first_prompt) or _text(info.last_prompt)
        item: dict[str, Any] = {
            "id": info.id, "first": render.one_line(first, 160) if first else "(no words)",
            "updated": float(info.updated or info.created or 0), "runs": int(info.runs), "calls": int(info.calls),
            "model": info.model if isinstance(info.model, str) else None,
            "side": bool((info.settings or {}).get("side")) if isinstance(info.settings, dict) else False,
            "resumable": why is None}
        if why is not None:
            item["why"] = why
        items.append(item)
    for skipped in _unverified(stored)[:max(0, MAX_LISTED - len(items))]:
        items.append(skipped)
    return {"conversations": items, "current": stored.session_id, "more": max(0, len(found) - MAX_LISTED)}


def _unverified(stored: Any) -> list[dict[str, Any]]:
    """The session files the store's listing left out because they do not verify, as rows that say why and
    cannot be continued. Nothing inside them is shown (not even which notebook they claim to belong to: that
    claim is unverified too); they are listed so that a conversation the person remembers does not vanish
    without a word."""
    from nbagent.sessions import list_sessions, sessions_dir

    try:
        skipped = list_sessions(stored.workspace).skipped
    except (OSError, ValueError):
        return []
    folder = sessions_dir(stored.workspace)
    rows = []
    for entry in skipped:
        sid = entry.name.removesuffix(".jsonl")
        try:
            updated = float((folder / entry.name).stat().st_mtime)
        except (OSError, ValueError):
            updated = 0.0
        rows.append({"id": sid, "first": "(a stored file that does not verify: its words are not shown)",
                     "updated": updated, "runs": 0, "calls": 0, "model": None, "side": False,
                     "resumable": False, "why": entry.why})
    return sorted(rows, key=lambda r: r["updated"], reverse=True)


def open_conversation(stored: Any, session_id: str) -> dict[str, Any]:
    """A conversation of this notebook, to show before the next prompt continues it (only a verified one)."""
    if session_id not in {i.id for i in stored.mine()}:
        for row in _unverified(stored):
            if row["id"] == session_id:
                raise UsageError(f"this conversation cannot be continued from the panel: {row['why']}")
        raise UsageError(f"{session_id!r} is not a stored conversation of this notebook")
    return stored_summary(verified(stored.workspace, session_id))
