"""nbagent: an LLM agent runtime that lives inside the Jupyter kernel.

The runtime (everything outside `nbagent.jupyter`) needs no IPython: it runs in scripts and tests the same.
In a notebook, `%load_ext nbagent` adds the `%agent` / `%%agent` magics.
"""

from __future__ import annotations

from .context import CancellationToken, Constraints, ProgressUpdate, ToolCancelled, ToolContext
from .errors import (
    AgentError,
    ConfigurationError,
    MaxTurnsExceeded,
    ModelError,
    OutputError,
    ProviderError,
    ScriptedModelExhausted,
)
from .batch import BatchRun, ItemResult
from .events import Event
from .hooks import Block, Hooks, StopAfterBatch
from .messages import (
    AssistantMessage,
    ContentBlock,
    ImageBlock,
    Message,
    Presentation,
    TextBlock,
    ToolCall,
    ToolResult,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from .decisions import Decision
from .permissions import Grant
from .plan import Toolset
from .providers import Model, ScriptedModel, load_model
from .ratelimit import RateLimit
from .records import ApprovalRequest, CallRecord
from .results import error_result, image_result, json_result, text_result
from .run import Agent, AgentRun
from .tools import Arguments, Tool, ToolDefinitionError, tool
from .transcript import check_transcript

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
