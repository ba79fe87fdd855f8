"""Helpers for the red-team attacks: drive nbagent only through its public API.

Each attack scripts a model (`ScriptedModel`) asking for tool calls, runs an `Agent` over a fresh
workspace under `tmp_path`, and checks EFFECTS: files outside the workspace, secrets in what the model
received, processes left alive, whether the user was asked.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from nbagent import Agent, AssistantMessage, Decision, ScriptedModel, ToolCall, toolbox

SECRET = "S3CR3T-c0ntent-9f8e7d6c5b4a"


def call(name: str, /, **arguments: Any) -> ToolCall:
    return ToolCall(name=name, arguments=arguments)


def sh(command: str, **extra: Any) -> ToolCall:
    return ToolCall(name="shell", arguments={"command": command, **extra})


@dataclass
class Recorder:
    """An approver that records what it was asked and answers the same every time."""

    answer: Any = True
    asked: list = field(default_factory=list)

    def __call__(self, request):
        self.asked.append(request)
        return self.answer

    def asked_for(self, name: str) -> list:
        return [r for r in self.asked if r.name == name]


def script(*turns) -> ScriptedModel:
    """Each turn a list of ToolCalls (or one ToolCall); the model ends with a plain answer."""
    messages = []
    for turn in turns:
        if isinstance(turn, ToolCall):
            turn = [turn]
        messages.append(AssistantMessage(tool_calls=list(turn)))
    messages.append(AssistantMessage(text="done"))
    return ScriptedModel(messages)


def run_agent(workspace: Path, *turns, mode: str = "default", rules=None, approver=None, **kw):
    agent = Agent(model=script(*turns), tools=toolbox.all(workspace=workspace), mode=mode,
                  rules=list(rules or []), approver=approver, workspace=workspace, **kw)
    return agent.run_sync("go")


async def run_agent_async(workspace: Path, *turns, mode: str = "default", rules=None, approver=None, **kw):
    agent = Agent(model=script(*turns), tools=toolbox.all(workspace=workspace), mode=mode,
                  rules=list(rules or []), approver=approver, workspace=workspace, **kw)
    return await agent.run("go")


def text_of(record) -> str:
    """The text the model got for one call."""
    result = record.result
    if result is None:
        return ""
    parts = []
    for block in result.content:
        parts.append(getattr(block, "text", "") or "")
    return "\n".join(parts)


def everything_model_saw(run) -> str:
    """All the model and provider could see: transcript, each call's wire, requests, output."""
    parts = [repr(run.messages), repr(run.output)]
    for record in run.calls:
        try:
            parts.append(json.dumps(record.wire, default=repr))
        except Exception:  # pragma: no cover - wire is JSON by promise
            parts.append(repr(record.wire))
        parts.append(text_of(record))
    parts.append(repr(run.requests))
    return "\n".join(parts)


def everything_recorded(run) -> str:
    """What the model saw plus records and events a user or log could keep."""
    parts = [everything_model_saw(run)]
    for record in run.calls:
        parts.append(repr(record.result))
        parts.append(repr(getattr(record.result, "details", None)))
        parts.append(repr(record.decision))
        parts.append(repr(record.error))
        parts.append(repr(record.progress))
    parts.append(repr(run.events))
    return "\n".join(parts)


def ran(record) -> bool:
    return record.status in ("ok", "error", "timeout")


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    w = tmp_path / "ws"
    w.mkdir()
    (w / "notes.md").write_text("hello notes\n")
    (w / "data.txt").write_text("b\na\nc\n")
    return w


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    o = tmp_path / "outside"
    o.mkdir()
    (o / "private.txt").write_text(f"outside {SECRET}\n")
    return o


needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


def git_env_clean(monkeypatch):
    for k in list(os.environ):
        if k.startswith("GIT_"):
            monkeypatch.delenv(k, raising=False)
