"""`NBAgent`: the extension's settings, the IPython way.

    %config NBAgent                                   # list them, with their help
    %config NBAgent.model = "anthropic:claude-sonnet-4-5"
    %config NBAgent.model = "model"                   # the name of a Model object in the notebook
    %config NBAgent.approver = "deny"                 # decide approvals without buttons

or `c.NBAgent.model = ...` in an `ipython_config.py`. A `%agent` option beats the setting for one run.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from traitlets import Any as AnyTrait
from traitlets import Bool, Dict, Enum, Float, Int, List, TraitError, Unicode, validate
from traitlets.config import Configurable

from nbagent.calls.permissions import MODES, parse_rule

__all__ = ["KEY_VARIABLES", "NBAgent", "key_set", "workspace_of"]

KEY_VARIABLES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("anthropic", ("ANTHROPIC_API_KEY",)),
    ("openai", ("OPENAI_API_KEY",)),
    ("google", ("GEMINI_API_KEY", "GOOGLE_API_KEY")),
    ("mistral", ("MISTRAL_API_KEY",)),
)
"""Providers tried, in order, when no model is given: the first whose key is set is used."""


def key_set(names: tuple[str, ...]) -> str | None:
    """Where one of these key variables is set: "environment", "stored" (the panel's Settings,
    `nbagent.safety.keys`), or None."""
    from nbagent.safety import keys

    if any(os.environ.get(n, "").strip() for n in names):
        return "environment"
    stored = keys.stored_values()
    return "stored" if any(n in stored for n in names) else None


class NBAgent(Configurable):
    """Settings of the `%agent` magics (change them with `%config NBAgent.<name> = ...`)."""

    model = AnyTrait(
        None,
        allow_none=True,
        help="The model when %agent gets no --model: a spec such as 'openai:gpt-4.1', or the name of a Model "
        "object in the notebook (%config copies objects, so name it). None: the first provider whose API key is set.",
    ).tag(config=True)

    default_models = Dict(
        {
            "anthropic": "anthropic:claude-sonnet-4-5",
            "openai": "openai:gpt-4.1",
            "google": "google:gemini-2.5-flash",
            "mistral": "mistral:mistral-large-latest",
        },
        help="The model used for each provider when only its API key is set.",
    ).tag(config=True)

    mode = Enum(list(MODES), "default", help="The permission mode of runs: " + ", ".join(MODES) + ".").tag(config=True)

    rules = List(
        Unicode(),
        [],
        help="Permission rules such as 'allow: read_file', 'deny: shell(rm *)', 'ask: write_file'.",
    ).tag(config=True)

    approver = AnyTrait(
        None,
        allow_none=True,
        help="Who decides calls that need consent. None: NBAGENT_APPROVAL when it is set, else the buttons. "
        "'buttons', 'allow', 'deny', a callable f(request) -> bool | Decision (sync or async), or "
        "'module:function' naming one.",
    ).tag(config=True)

    instructions = Unicode(
        None,
        allow_none=True,
        help="Instructions (system prompt) replacing the default ones, which describe the kernel, the workspace, "
        "the tools and the notebook's variables.",
    ).tag(config=True)

    max_turns = Int(20, help="The most model requests one run makes.").tag(config=True)

    max_cost = Float(
        None,
        allow_none=True,
        help="US dollars one run may spend: it stops cleanly before a request that would go over (None: no "
        "budget). Needs a model whose price is known.",
    ).tag(config=True)

    context_window = Int(
        None,
        allow_none=True,
        help="The model's context window in tokens, overriding what nbagent knows of the model (None: known "
        "models' windows; needed for a ScriptedModel to compact).",
    ).tag(config=True)

    compaction_threshold = Float(
        0.8,
        help="Compact the conversation before a request would fill this share of the context window (0: never "
        "automatically; %agent --compact still does it by hand).",
    ).tag(config=True)

    store_sessions = Bool(
        True,
        help="Write every conversation to the workspace's session store (.nbagent/sessions/), so that "
        "%agent --resume continues it after a restart and --model replay answers from it offline.",
    ).tag(config=True)

    replay_tools = Enum(
        ["rerun", "recorded"],
        "rerun",
        help="Under --model replay: 'rerun' runs each tool again (differences from the record shown in its row), "
        "'recorded' returns the recorded results without running anything (NBAGENT_REPLAY=recorded does too).",
    ).tag(config=True)

    sandbox = Enum(
        ["read-only", "workspace-write", "danger-full-access"],
        "workspace-write",
        help="The OS sandbox shell commands you approve run in: 'workspace-write' (writes only inside the "
        "workspace, no network), 'read-only', or 'danger-full-access' (no sandbox). Commands auto-allowed as "
        "read-only always run read-only. Needs bubblewrap on Linux; the view's header says what is in force.",
    ).tag(config=True)

    mcp_servers = Dict(
        {},
        help="MCP servers whose tools %agent runs get (named SERVER__TOOL), in the mcpServers format other MCP "
        "clients use: {'time': {'command': 'mcp-server-time', 'args': [], 'env': {}}, 'web': {'url': '...', "
        "'headers': {}}}; add 'trusted': True to believe a server's read-only hints. Servers in the workspace's "
        ".mcp.json (or .nbagent/mcp.json) are added once you trusted that file; these win. %agent --mcp NAME,... "
        "picks some for one run; %agent --mcp-list shows them.",
    ).tag(config=True)

    workspace_mcp = Enum(
        ["ask", "trust", "off"],
        "ask",
        help="The workspace's .mcp.json and .nbagent/mcp.json: 'ask' shows what their servers would run, with "
        "Trust / Not now buttons, and starts them only once you trusted that exact content (recorded outside the "
        "workspace; asked again when it changes); 'trust' starts them without asking, unrecorded (a CI job "
        "running its own repository; NBAGENT_TRUST_WORKSPACE_MCP=1 does too); 'off' never reads them.",
    ).tag(config=True)

    workspace = Unicode(
        None, allow_none=True, help="The directory file tools are confined to (default: the working directory)."
    ).tag(config=True)

    toolbox = Bool(
        True,
        help="Offer the built-in tools (python in this kernel, variables, history, files, shell) to every run, "
        "besides the --tools given.",
    ).tag(config=True)

    python_in_cells = Bool(
        False,
        help="The python tool inserts the code it runs as a cell of the notebook and runs it there (through "
        "nbagent's frontend part), so the analysis stays in the notebook; without a live notebook it runs as usual.",
    ).tag(config=True)

    notebook_path = Unicode(
        None, allow_none=True,
        help="The notebook file read_notebook reads when no live notebook answers (default: NBAGENT_NOTEBOOK, "
        "else the path the Jupyter server gives the kernel).",
    ).tag(config=True)

    view = Enum(
        ["auto", "widget", "text"],
        "auto",
        help="How a run is shown: 'widget' (the live view), 'text' (printed lines), or 'auto' (the live view in a "
        "Jupyter kernel, text elsewhere).",
    ).tag(config=True)

    update_rate = Float(
        30.0,
        help="The most widget messages per second one live view sends (updates are coalesced to stay under it).",
    ).tag(config=True)

    max_variables = Int(40, help="How many of the notebook's variables the default instructions summarise.").tag(
        config=True
    )

    @validate("model")
    def _check_model(self, proposal: dict[str, Any]) -> Any:
        from nbagent.providers import Model

        value = proposal["value"]
        if value is None or isinstance(value, (str, Model)):
            return value
        raise TraitError(f"NBAgent.model must be a spec string, a name, or a Model, not {type(value).__name__}")

    @validate("approver")
    def _check_approver(self, proposal: dict[str, Any]) -> Any:
        value = proposal["value"]
        if value is None or callable(value):
            return value
        if isinstance(value, str) and (value in ("buttons", "allow", "deny") or ":" in value):
            return value
        raise TraitError(
            f"NBAgent.approver must be 'buttons', 'allow', 'deny', 'module:function' or a callable, not {value!r}"
        )

    @validate("rules")
    def _check_rules(self, proposal: dict[str, Any]) -> Any:
        for rule in proposal["value"]:
            try:
                parse_rule(rule)
            except ValueError as exc:
                raise TraitError(str(exc)) from None
        return proposal["value"]

    @validate("mcp_servers")
    def _check_mcp_servers(self, proposal: dict[str, Any]) -> Any:
        from nbagent.errors import ConfigurationError
        from nbagent.mcp import parse_servers

        try:
            parse_servers(proposal["value"], source="NBAgent.mcp_servers")
        except ConfigurationError as exc:
            raise TraitError(str(exc)) from None
        return proposal["value"]

    @validate("max_turns")
    def _check_max_turns(self, proposal: dict[str, Any]) -> Any:
        if proposal["value"] < 1:
            raise TraitError("NBAgent.max_turns must be at least 1")
        return proposal["value"]

    @validate("update_rate")
    def _check_rate(self, proposal: dict[str, Any]) -> Any:
        if proposal["value"] <= 0:
            raise TraitError("NBAgent.update_rate must be a positive number of messages per second")
        return proposal["value"]


def workspace_of(config: Any) -> Path:
    """The workspace of the kernel's runs: `NBAgent.workspace`, else the kernel's working directory."""
    return Path(config.workspace or os.getcwd()).resolve()
