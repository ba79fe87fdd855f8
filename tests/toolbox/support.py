"""Helpers for the toolbox tests: running tool calls through a real Agent with a ScriptedModel."""

from __future__ import annotations

from typing import Any

from nbagent import Agent, AssistantMessage, ScriptedModel, ToolCall


class Runner:
    """Runs tool calls through a real Agent (one scripted model turn per call)."""

    def __init__(self, tools: list[Any], **agent_kwargs: Any) -> None:
        self.tools = tools
        self.agent_kwargs = agent_kwargs

    def run(self, *calls: ToolCall, **overrides: Any):
        model = ScriptedModel([AssistantMessage(tool_calls=[c]) for c in calls] + ["done"])
        kwargs = {**self.agent_kwargs, **overrides}
        agent = kwargs.pop("agent", None) or Agent(model=model, tools=self.tools, **kwargs)
        if agent.model is None or agent.model is not model:
            agent.model = model
        return agent.run_sync("go")

    def call(self, tool_name: str, /, **arguments: Any):
        """One call; returns its CallRecord."""
        return self.run(ToolCall(name=tool_name, arguments=arguments)).calls[0]


def tool_named(tools: list[Any], name: str):
    return next(t for t in tools if t.name == name)
