"""From `%agent`'s options and the `NBAgent` settings to an `Agent`: the model, the tools, the MCP servers,
the instructions and the compaction settings of one run.

A user mistake (a model that is no model, a tool that is no function, a bad MCP config) becomes a
`UsageError` that says what to do. Nothing here shows or stores a run: `session.py` starts it, with the
agent made here. The workspace's `.mcp.json` (anyone who can write the workspace could have written it) is
read by `nbagent.mcp`, not here: its rules for what such a file may do are there; an untrusted one gets
the consent prompt (`consent.py`) and its servers wait, not started, until the person trusts it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from IPython.core.error import UsageError

from nbagent.calls.hooks import Hooks
from nbagent.calls.permissions import Grants
from nbagent.errors import ConfigurationError
from nbagent.providers import Model, load_model
from nbagent.safety.secrets import redact
from nbagent.tools.definition import Tool, ToolDefinitionError, as_tool, tool

from ..config import KEY_VARIABLES, NBAgent, key_set, workspace_of
from ..notebook.rerun import NotebookCells
from ..notebook.tools import stale_guard
from .instructions import notebook_instructions

if TYPE_CHECKING:  # pragma: no cover
    from IPython.core.interactiveshell import InteractiveShell

    from nbagent.agent.run import Agent, AgentRun

__all__ = ["AgentFactory", "CallResults", "RunOptions", "builtin_tools", "no_model_message"]


@dataclass(slots=True)
class RunOptions:
    """What one `%agent` asked for (None: the session's setting)."""

    model: str | None = None
    mode: str | None = None
    tools: list[str] | None = None
    new: bool = False
    max_turns: int | None = None
    instructions: str | None = None
    compact: bool = False
    """Only compact the conversation (`%agent --compact`)."""
    only_tools: bool = False
    """Offer only the tools named (notebook functions or built-in tools), not the whole toolbox."""
    mcp: list[str] | None = None
    """The MCP servers for this run (None: every configured one)."""
    side: bool = False
    """A side thread (Fix or Explain on a cell's error): a conversation of its own, stored as its own session,
    that the conversation the next %agent continues does not take in."""


def no_model_message() -> str:
    keys = ", ".join(" or ".join(names) for _, names in KEY_VARIABLES)
    return (
        "No model is configured for %agent. Do one of these:\n"
        f"  - set an API key in the kernel's environment: {keys} (then restart the kernel), or store one in the "
        "nbagent panel's Settings;\n"
        "  - name one: %agent --model anthropic:claude-sonnet-4-5 ...   or   %config NBAgent.model = \"openai:gpt-4.1\"\n"
        "  - work offline with a scripted model: model = ScriptedModel([\"Hello!\"]) "
        "(from nbagent import ScriptedModel), then %agent --model model ..."
    )


def builtin_tools(shell: InteractiveShell, workspace: Path) -> list[Any]:
    """The built-in toolbox, wired to this kernel: `python` runs code in the notebook's namespace, `history`
    reads IPython's, the file tools and `shell` stay inside the workspace.

    Empty when the toolbox is not part of this installation: runs then have only the tools named with
    `--tools`. This is the one place that knows how the toolbox meets the kernel.
    """
    try:
        from ..notebook.kernel_tools import kernel_toolbox
    except ImportError:
        return []
    return list(kernel_toolbox(shell, workspace=workspace))


class AgentFactory:
    """Resolves what one `%agent` asks for, against the settings and the notebook's namespace."""

    def __init__(self, shell: InteractiveShell, config: NBAgent, grants: Grants, approver: Any, runs: Any, *,
                 replay_model: Callable[[str | None], Model], replay_mode: Callable[[], str]) -> None:
        self.shell = shell
        self.config = config
        self.grants = grants
        """Approvals remembered this session, shared by every agent made here."""
        self.approver = approver
        self.runs = runs
        """What keeps the kernel's runs (`.runs`): `_agent_results` finds a call's result there."""
        self.replay_model = replay_model
        """`--model replay[:ID]`: the stored conversation's `ReplayModel` (see conversation.py)."""
        self.replay_mode = replay_mode
        self.models: dict[str, Model] = {}
        """Models loaded from a spec, by spec: a conversation keeps talking to the same object."""
        self.cells = NotebookCells(shell)
        """The notebook's cells as this kernel knows them (`run.kernel_only` reads the names they define)."""
        self.consent_prompts: list[Any] = []
        """The MCP trust prompts shown (`consent.TrustPrompt`), oldest first."""
        self._consent_asked: set[tuple[str, str]] = set()

    @property
    def workspace(self) -> Path:
        return workspace_of(self.config)

    def resolve_model(self, value: Any = None) -> Model:
        """The model of a run: `--model`, else `NBAgent.model`, else the first provider whose key is set.

        A mistake is a `UsageError` that never carries a secret: `--model` may name any variable of the
        notebook (a string holding a key, say), and its message reaches the page."""
        try:
            return self._resolve_model(value)
        except UsageError as exc:
            raise UsageError(redact(str(exc))) from None

    def _resolve_model(self, value: Any = None) -> Model:
        if value is None:
            value = self.config.model
        if value is None:
            for provider, names in KEY_VARIABLES:
                if key_set(names):
                    value = self.config.default_models.get(provider)
                    break
            if value is None:
                raise UsageError(no_model_message())
        if isinstance(value, Model):
            return value
        if not isinstance(value, str):
            raise UsageError(f"a model is a spec such as 'openai:gpt-4.1' or a Model object, not {type(value).__name__}")
        value = value.strip()
        if value == "replay" or value.startswith("replay:"):
            return self.replay_model(value.partition(":")[2] or None)
        ns = self.shell.user_ns
        if value.isidentifier() and value in ns:
            obj = ns[value]
            if isinstance(obj, Model):
                return obj
            if not isinstance(obj, str):
                raise UsageError(
                    f"{value!r} in the notebook is {_a(type(obj).__name__)}, not a Model: pass a spec such as "
                    "'anthropic:claude-sonnet-4-5', or the name of a Model object (a ScriptedModel, say)"
                )
            spec = obj.strip()
            if ":" not in spec and spec != "scripted":  # not a spec: say so without quoting what it holds
                raise UsageError(f"{value!r} in the notebook is a string that is not a model spec (a spec has a "
                                 "provider prefix, e.g. 'openai:gpt-4.1'); its text is not shown here")
            value = spec
        elif value.isidentifier() and value != "scripted":
            raise UsageError(
                f"--model {value}: there is no variable named {value!r} in the notebook, and a model spec has a "
                "provider prefix, e.g. 'openai:gpt-4.1' or 'anthropic:claude-sonnet-4-5'. Define the Model first "
                "(model = ScriptedModel([...]), say), or check the spelling."
            )
        if value in self.models:
            return self.models[value]
        prefix, colon, name = value.partition(":")
        if colon and not name.strip() and prefix != "scripted":
            raise UsageError(f"--model {value}: the spec names no model after {prefix + ':'!r}; write "
                             f"{prefix}:MODEL, e.g. {self.config.default_models.get(prefix) or 'openai:gpt-4.1'}")
        try:
            model = load_model(value)
        except ConfigurationError as exc:
            raise UsageError(f"{exc}. A model is a spec like 'openai:gpt-4.1' or the name of a Model in the "
                             "notebook.") from None
        self.models[value] = model
        return model

    def resolve_tools(self, names: list[str] | None, *, only: bool = False) -> list[Any]:
        """Built-in tools (unless `NBAgent.toolbox` is off) and the functions named with `--tools`; with
        `only` (`--only-tools`), just the tools named, built-in ones included."""
        workspace = self.workspace
        if only:
            available = {getattr(t, "name", None): t for t in builtin_tools(self.shell, workspace)}
            picked: list[Any] = []
            for name in names or []:
                obj = self.shell.user_ns.get(name)
                if obj is not None:
                    picked.append(_as_tool(name, obj))
                elif name in available:
                    picked.append(available[name])
                else:
                    self._missing_tool(name, available)
            return picked
        builtins = builtin_tools(self.shell, workspace) if self.config.toolbox else []
        builtin_names = {getattr(t, "name", None): t for t in builtins}
        chosen: list[Any] = []
        ns = self.shell.user_ns
        for name in names or []:
            obj = ns.get(name)
            if obj is None and name in builtin_names:
                continue  # already offered
            if obj is None:
                self._missing_tool(name, builtin_names)
            chosen.append(_as_tool(name, obj))
        mine = {t.name for t in chosen}
        return [t for t in builtins if getattr(t, "name", None) not in mine] + chosen

    def _missing_tool(self, name: str, builtins: dict[Any, Any]) -> list[Any]:
        ns = self.shell.user_ns
        hidden = getattr(self.shell, "user_ns_hidden", {})
        functions = sorted(k for k, v in ns.items()
                           if not k.startswith("_") and k not in hidden and (isinstance(v, Tool) or _is_function(v)))
        known = f" Functions in the notebook: {', '.join(functions[:20])}." if functions else ""
        if builtins:
            known += f" Built-in tools: {', '.join(sorted(n for n in builtins if n))}."
        raise UsageError(
            f"--tools: there is no function named {name!r} in the notebook. Define it first (any "
            f"function works; @tool adds an activity label and permissions), or check the spelling.{known}"
        )

    def _configured_mcp(self, setting: str) -> tuple[list[Any], dict[str, Any]]:
        """The workspace's MCP configuration files (unless `setting` is "off") and every server configured:
        theirs, then `NBAgent.mcp_servers` (these win). Raises ConfigurationError."""
        from nbagent.mcp import parse_servers, workspace_configs

        configs = workspace_configs(self.workspace) if setting != "off" else []
        servers = {name: dataclasses.replace(s, approved=True) if setting == "trust" else s
                   for c in configs for name, s in c.servers.items()}
        servers.update(parse_servers(self.config.mcp_servers, source="NBAgent.mcp_servers"))
        return configs, servers

    def _workspace_mcp(self) -> str:
        return "trust" if os.environ.get("NBAGENT_TRUST_WORKSPACE_MCP") == "1" else self.config.workspace_mcp

    def mcp_names(self) -> set[str]:
        """The names of the MCP servers configured now (workspace files and `NBAgent.mcp_servers`); nothing
        is started or trusted by asking."""
        try:
            return set(self._configured_mcp(self._workspace_mcp())[1])
        except ConfigurationError:
            return set()

    def mcp_servers(self, names: list[str] | None = None) -> Any:
        """The MCP servers of a run: the workspace's `.mcp.json`, then `NBAgent.mcp_servers` (these win),
        narrowed to `names` when given. None when there are none.

        A workspace file's servers start only once the person trusted its exact content
        (`NBAgent.workspace_mcp`): until then its prompt shows what they would run (`consent.py`), and runs
        go on without them."""
        from nbagent.mcp import MCPServers

        setting = self._workspace_mcp()
        try:
            configs, servers = self._configured_mcp(setting)
            if names is not None and not names:
                return None
            toolset = MCPServers(servers)
            if names is not None:
                toolset = toolset.select(names)
        except ConfigurationError as exc:
            raise UsageError(str(exc)) from None
        if setting == "ask":
            self._ask_trust([c for c in configs if c.servers and not c.trusted
                             and any(n in toolset.servers and servers.get(n) is s for n, s in c.servers.items())])
        if not toolset.active and not toolset.waiting:
            return None
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            pass
        else:  # the kernel's loop lives as long as the kernel: its servers live there (no thread hop per call)
            from nbagent.mcp import use_loop

            use_loop(loop)
        return toolset

    def _ask_trust(self, configs: list[Any]) -> None:
        """Show the consent prompt of each untrusted workspace configuration (once per content a session)."""
        if not configs:
            return
        from IPython.display import display

        from .consent import TrustPrompt

        try:
            loop: Any = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        for config in configs:
            key = (config.real, config.digest)
            if key in self._consent_asked:
                continue
            self._consent_asked.add(key)
            prompt = TrustPrompt(config, loop)
            self.consent_prompts.append(prompt)
            keeper = getattr(self.runs, "kept", None)
            if keeper is not None and loop is not None:
                keeper.show(prompt)  # it outlives the kernel like a run's view (notebook/kept.py)
            else:
                display(prompt.widget)

    def mcp_list(self, names: list[str] | None = None) -> Any:
        """`%agent --mcp-list`: the servers, their state and tools (those not started are started)."""
        from .mcp import ServerList

        toolset = self.mcp_servers(names)
        return ServerList(toolset)

    def instructions(self, run: AgentRun) -> str:
        tools = [t for t in run.agent.tools if isinstance(t, Tool)]
        return notebook_instructions(
            workspace=self.workspace,
            tools=tools,
            namespace=self.shell.user_ns,
            hidden=getattr(self.shell, "user_ns_hidden", {}),
            max_variables=self.config.max_variables,
        )

    def agent(self, options: RunOptions) -> Agent:
        """The agent for one `%agent` (a fresh one each time; grants are shared through the session)."""
        from nbagent.agent.run import Agent

        cfg = self.config
        # a notebook re-run offline (`headless --replay`, NBAGENT_REPLAY): every run answers from the record
        model = self.resolve_model("replay" if os.environ.get("NBAGENT_REPLAY") else options.model)
        tools = self.resolve_tools(options.tools, only=options.only_tools)
        if getattr(model, "provider", None) == "replay":
            from nbagent.providers.replay import replay_tools

            tools = replay_tools(tools, model, self.replay_mode())
        instructions: Any = options.instructions or cfg.instructions or self.instructions
        try:
            agent = Agent(
                model=model,
                tools=tools,
                instructions=instructions,
                mode=options.mode or cfg.mode,
                rules=list(cfg.rules),
                approver=self.approver,
                max_turns=options.max_turns or cfg.max_turns,
                workspace=self.workspace,
                sandbox=cfg.sandbox,
                # --only-tools: only what is named, MCP servers included (--mcp NAME names them)
                mcp_servers=None if options.only_tools and options.mcp is None else self.mcp_servers(options.mcp),
                name="notebook",
                max_cost=cfg.max_cost,
                context_window=cfg.context_window or None,
                compaction=self.compaction(),
                hooks=Hooks(before_tool_call=[stale_guard(self.shell)]),
                extensions=[self.cells],  # what run.kernel_only knows of the notebook's cells
            )
        except ConfigurationError as exc:
            raise UsageError(str(exc)) from None
        agent.policy.grants = self.grants
        return agent

    def compaction(self) -> Any:
        """Compaction settings from `NBAgent.compaction_threshold`; stubs point at `_agent_results`."""
        from nbagent.budget.compaction import CompactionSettings

        threshold = self.config.compaction_threshold
        if not 0 <= threshold <= 1:
            raise UsageError(f"NBAgent.compaction_threshold is a share of the window (0 to 1), not {threshold}")
        return CompactionSettings(threshold=threshold or 0.8, target=min(0.5, threshold or 0.8),
                                  auto=threshold > 0, locate=self.locate)

    def locate(self, message: Any) -> str:
        """Where a stubbed result lives: `_agent_results[call id]` in the notebook, readable with inspect_variable."""
        ns = self.shell.user_ns
        if not isinstance(ns.get("_agent_results"), CallResults):
            ns["_agent_results"] = CallResults(self.runs)
            hidden = getattr(self.shell, "user_ns_hidden", None)
            if isinstance(hidden, dict):
                hidden["_agent_results"] = ns["_agent_results"]
        return (f"The whole result is still in the notebook: inspect_variable('_agent_results[\"{message.tool_call_id}\"]') "
                f"shows it (the live object), or call {message.name} again.")


def _a(noun: str) -> str:
    """'an int', 'a str'."""
    return f"an {noun}" if noun[:1].lower() in "aeiou" else f"a {noun}"


class CallResults:
    """`_agent_results["call id"]` in the notebook: the whole result of any call of this kernel's runs (the live
    `details` object, else the text the model was sent), for results compaction took out of the transcript."""

    def __init__(self, keeper: Any) -> None:
        self._session = weakref.ref(keeper)
        """What keeps the kernel's runs (`.runs`), weakly: the notebook's namespace does not keep it alive."""

    def __getitem__(self, call_id: str) -> Any:
        session = self._session()
        for run in reversed(session.runs if session is not None else []):
            for rec in run.calls:
                if rec.id == call_id and rec.result is not None:
                    return rec.result.details if rec.result.details is not None else rec.result.text
        raise KeyError(f"no call {call_id!r} in this kernel's runs")

    def __repr__(self) -> str:
        session = self._session()
        n = sum(len(r.calls) for r in session.runs) if session is not None else 0
        return f"<the results of {n} tool calls of this kernel's agent runs, by call id>"


def _is_function(value: Any) -> bool:
    import inspect

    return inspect.isfunction(value) or inspect.isbuiltin(value) or inspect.ismethod(value)


def _as_tool(name: str, obj: Any) -> Tool:
    """A notebook function (or `@tool`) as a tool whose printed output goes to its call's row."""
    from ..live.capture import capturing

    return capturing(_make_tool(name, obj))


def _make_tool(name: str, obj: Any) -> Tool:
    if isinstance(obj, Tool):
        return obj
    if isinstance(obj, type) or not callable(obj):
        raise UsageError(f"--tools: {name!r} is {_a(type(obj).__name__)}, not a function")
    try:
        return as_tool(obj)
    except ToolDefinitionError:
        pass  # a lambda, say: its own name is no tool name; the notebook's name for it is
    try:
        return tool(obj, name=name)
    except ToolDefinitionError as exc:
        raise UsageError(f"--tools: {name} cannot be a tool: {exc}") from None
