"""nbagent: an LLM agent runtime that lives inside the Jupyter kernel.

The runtime (everything outside `nbagent.jupyter`) needs no IPython: it runs in scripts and tests the same.
In a notebook, `%load_ext nbagent` adds the `%agent` / `%%agent` magics.

The package reads in the order a tool call travels. At the top, the vocabulary every wing speaks (messages,
errors, events, records, decisions, context, reprs, transcript); then the wings, each a folder whose
`__init__.py` says what it holds and what it may import:

    safety/      secrets, the sanitizer, the sandbox, protected paths, trust, signing     (imports nothing)
    tools/       what a tool is, from its definition to its normalised result
    budget/      pricing, the context window and compaction, rate limits
    sessions/    conversations stored on disk, and recording runs into them
    calls/       the stages of one call: hooks, permissions, grants, interruption, execution
    providers/   the Model protocol and the five wire formats
    render/      how runs, calls and results look (HTML and text)
    toolbox/     the built-in tools; mcp/ MCP servers as tool sources
    batch/       one agent over many inputs, on one machine or a Dask cluster
    agent/       Agent and AgentRun, and the turn loop
    jupyter/     the notebook front (the only package that imports IPython or ipywidgets)

An arrow never points up: the contracts in `pyproject.toml` (`[tool.importlinter]`) say which wing may
import which, and the test suite checks them.
"""

from __future__ import annotations

from . import _moved
from .agent.run import Agent, AgentRun
from .batch.run import BatchRun, ItemResult
from .budget.ratelimit import RateLimit
from .calls.hooks import Block, Hooks, StopAfterBatch
from .calls.permissions import Grant
from .context import CancellationToken, Constraints, ProgressUpdate, ToolCancelled, ToolContext
from .decisions import Decision
from .errors import (
    AgentError, ConfigurationError, MaxTurnsExceeded, ModelError, OutputError, ProviderError, ScriptedModelExhausted,
)
from .events import Event
from .messages import (
    AssistantMessage, ContentBlock, ImageBlock, Message, Presentation, TextBlock, ToolCall, ToolResult,
    ToolResultMessage, Usage, UserMessage,
)
from .providers import Model, ScriptedModel, load_model
from .records import ApprovalRequest, CallRecord
from .tools.definition import Arguments, Tool, ToolDefinitionError, tool
from .tools.plan import Toolset
from .tools.results import error_result, image_result, json_result, text_result
from .transcript import check_transcript

_moved.install()  # old module paths (`nbagent.sandbox`...) import from their new places, with a warning

__version__ = "0.1.0"

__all__ = [
    "Agent",
    "AgentError",
    "AgentRun",
    "ApprovalRequest",
    "Arguments",
    "AssistantMessage",
    "BatchRun",
    "Block",
    "CallRecord",
    "CancellationToken",
    "ConfigurationError",
    "Constraints",
    "ContentBlock",
    "Decision",
    "Event",
    "Grant",
    "Hooks",
    "ImageBlock",
    "ItemResult",
    "MaxTurnsExceeded",
    "Message",
    "Model",
    "ModelError",
    "OutputError",
    "Presentation",
    "ProgressUpdate",
    "ProviderError",
    "RateLimit",
    "ScriptedModel",
    "ScriptedModelExhausted",
    "StopAfterBatch",
    "TextBlock",
    "Tool",
    "ToolCall",
    "ToolCancelled",
    "ToolContext",
    "ToolDefinitionError",
    "ToolResult",
    "ToolResultMessage",
    "Toolset",
    "Usage",
    "UserMessage",
    "check_transcript",
    "error_result",
    "image_result",
    "json_result",
    "load_model",
    "text_result",
    "tool",
]


def load_ipython_extension(ipython):  # pragma: no cover - exercised through real kernels
    """`%load_ext nbagent`: register the `%agent` magics (IPython is imported only here)."""
    from .jupyter import load_ipython_extension as _load

    _load(ipython)


def unload_ipython_extension(ipython):  # pragma: no cover
    from .jupyter import unload_ipython_extension as _unload

    _unload(ipython)
