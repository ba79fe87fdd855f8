"""The path of one `%agent` from its options to a shown run, and the kernel's nbagent state.

    state          `NotebookSession`: one kernel's runs, grants and settings; `start(prompt, options)`
    resolve        options and `%config NBAgent` -> an `Agent` (model, tools, MCP servers, instructions)
    conversation   the stored conversation a run continues: `--resume`, `--model replay`, `--sessions`
    instructions   the default instructions of a notebook run (where the model is, what the user defined)
    consent        the question asked before a workspace's MCP servers start
    mcp            `%agent --mcp-list`

The rule: this room imports the core, the front's settings (`nbagent.jupyter.config`) and the rooms a run
passes before it: `live` and `notebook`. Nothing below imports it.
"""

from __future__ import annotations

from .resolve import AgentFactory, CallResults, RunOptions, builtin_tools, no_model_message
from .state import NotebookSession, RunList, SessionList

__all__ = ["AgentFactory", "CallResults", "NotebookSession", "RunList", "RunOptions", "SessionList", "builtin_tools",
           "no_model_message"]
