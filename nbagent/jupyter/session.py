"""One kernel's nbagent state: settings, the conversation, the runs, their views and the grants.

`%agent` asks the session to start a run: it resolves the model and the tools (a user mistake becomes a
`UsageError` that says what to do), continues the conversation unless told not to, starts the run as a task
on the kernel's loop, shows its view and returns the run at once.
"""

from __future__ import annotations

import asyncio
import os
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from IPython.core.error import UsageError
from IPython.display import display

from ..errors import ConfigurationError
from ..permissions import Grants
from ..providers import Model, load_model
from ..tools import Tool, ToolDefinitionError, as_tool, tool
from .approval import NotebookApprover
from .config import KEY_VARIABLES, NBAgent
from .instructions import notebook_instructions

if TYPE_CHECKING:  # pragma: no cover
    from IPython.core.interactiveshell import InteractiveShell

    from ..records import CallRecord
    from ..run import Agent, AgentRun

__all__ = ["NotebookSession", "RunOptions", "builtin_tools", "no_model_message"]


@dataclass(slots=True)
class RunOptions:
    """What one `%agent` asked for (None: the session's setting)."""

    model: str | None = None
    mode: str | None = None
    tools: list[str] | None = None
    new: bool = False
    max_turns: int | None = None
    instructions: str | None = None
    mcp: list[str] | None = None
    """The MCP servers for this run (None: every configured one)."""


def no_model_message() -> str:
    keys = ", ".join(" or ".join(names) for _, names in KEY_VARIABLES)
    return (
        "No model is configured for %agent. Do one of these:\n"
        f"  - set an API key in the kernel's environment: {keys} (then restart the kernel);\n"
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
        from .kernel_tools import kernel_toolbox
    except ImportError:
        return []
    return list(kernel_toolbox(shell, workspace=workspace))


class NotebookSession:
    """nbagent's state in one IPython shell (one per kernel)."""

    def __init__(self, shell: InteractiveShell) -> None:
        self.shell = shell
        self.config = NBAgent(parent=shell)
        self.grants = Grants()
        """Approvals remembered this session ("Always allow"), shared by every run of the kernel."""
        self.runs: list[AgentRun] = []
        """Every run started with %agent, oldest first."""
        self.conversation: AgentRun | None = None
        """The last run of the current conversation: the next %agent continues from it."""
        self._views: weakref.WeakKeyDictionary[AgentRun, Any] = weakref.WeakKeyDictionary()
        self._models: dict[str, Model] = {}
        self.approver = NotebookApprover(self)

    # -- resolution ---------------------------------------------------------------------------------------
    def resolve_model(self, value: Any = None) -> Model:
        """The model of a run: `--model`, else `NBAgent.model`, else the first provider whose key is set."""
        if value is None:
            value = self.config.model
        if value is None:
            for provider, names in KEY_VARIABLES:
                if any(os.environ.get(n) for n in names):
                    value = self.config.default_models.get(provider)
                    break
            if value is None:
                raise UsageError(no_model_message())
        if isinstance(value, Model):
            return value
        if not isinstance(value, str):
            raise UsageError(f"a model is a spec such as 'openai:gpt-4.1' or a Model object, not {type(value).__name__}")
        value = value.strip()
        ns = self.shell.user_ns
        if value.isidentifier() and value in ns:
            obj = ns[value]
            if isinstance(obj, Model):
                return obj
            if not isinstance(obj, str):
                raise UsageError(
                    f"{value!r} in the notebook is a {type(obj).__name__}, not a Model: pass a spec such as "
                    "'anthropic:claude-sonnet-4-5', or the name of a Model object (a ScriptedModel, say)"
                )
            value = obj.strip()
        if value in self._models:
            return self._models[value]
        try:
            model = load_model(value)
        except ConfigurationError as exc:
            raise UsageError(f"{exc}. A model is a spec like 'openai:gpt-4.1' or the name of a Model in the "
                             "notebook.") from None
        self._models[value] = model
        return model

    def resolve_tools(self, names: list[str] | None) -> list[Any]:
        """Built-in tools (unless `NBAgent.toolbox` is off) and the functions named with `--tools`."""
        workspace = self.workspace
        builtins = builtin_tools(self.shell, workspace) if self.config.toolbox else []
        builtin_names = {getattr(t, "name", None): t for t in builtins}
        chosen: list[Any] = []
        ns = self.shell.user_ns
        for name in names or []:
            obj = ns.get(name)
            if obj is None and name in builtin_names:
                continue  # already offered
            if obj is None:
                hidden = getattr(self.shell, "user_ns_hidden", {})
                functions = sorted(k for k, v in ns.items()
                                   if not k.startswith("_") and k not in hidden
                                   and (isinstance(v, Tool) or _is_function(v)))
                known = f" Functions in the notebook: {', '.join(functions[:20])}." if functions else ""
                raise UsageError(
                    f"--tools: there is no function named {name!r} in the notebook. Define it first (any "
                    f"function works; @tool adds an activity label and permissions), or check the spelling.{known}"
                )
            chosen.append(_as_tool(name, obj))
        mine = {t.name for t in chosen}
        return [t for t in builtins if getattr(t, "name", None) not in mine] + chosen

    def mcp_servers(self, names: list[str] | None = None) -> Any:
        """The MCP servers of a run: the workspace's `.mcp.json`, then `NBAgent.mcp_servers` (these win),
        narrowed to `names` when given. None when there are none."""
        from ..mcp import MCPServers, parse_servers, workspace_servers

        try:
            servers = {**workspace_servers(self.workspace),
                       **parse_servers(self.config.mcp_servers, source="NBAgent.mcp_servers")}
            if names is not None and not names:
                return None
            toolset = MCPServers(servers)
            if names is not None:
                toolset = toolset.select(names)
        except ConfigurationError as exc:
            raise UsageError(str(exc)) from None
        if not toolset.active:
            return None
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            pass
        else:  # the kernel's loop lives as long as the kernel: its servers live there (no thread hop per call)
            from ..mcp import use_loop

            use_loop(loop)
        return toolset

    def mcp_list(self, names: list[str] | None = None) -> Any:
        """`%agent --mcp-list`: the servers, their state and tools (those not started are started)."""
        from .mcp import ServerList

        toolset = self.mcp_servers(names)
        return ServerList(toolset)

    @property
    def workspace(self) -> Path:
        return Path(self.config.workspace or os.getcwd()).resolve()

    def _instructions(self, run: AgentRun) -> str:
        tools = [t for t in run.agent.tools if isinstance(t, Tool)]
        return notebook_instructions(
            workspace=self.workspace,
            tools=tools,
            namespace=self.shell.user_ns,
            hidden=getattr(self.shell, "user_ns_hidden", {}),
            max_variables=self.config.max_variables,
        )

    # -- runs ------------------------------------------------------------------------------------------------
    def agent(self, options: RunOptions) -> Agent:
        """The agent for one `%agent` (a fresh one each time; grants are shared through the session)."""
        from ..run import Agent

        cfg = self.config
        model = self.resolve_model(options.model)
        tools = self.resolve_tools(options.tools)
        instructions: Any = options.instructions or cfg.instructions or self._instructions
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
                mcp_servers=self.mcp_servers(options.mcp),
                name="notebook",
            )
        except ConfigurationError as exc:
            raise UsageError(str(exc)) from None
        agent.policy.grants = self.grants
        return agent

    def start(self, prompt: str, options: RunOptions) -> AgentRun:
        """Start a run on the kernel's loop, show it, and return it (the run goes on in the background)."""
        history = None
        if not options.new and self.conversation is not None:
            last = self.conversation
            if not last.done:
                raise UsageError(
                    "the previous %agent run is still going. Wait for it (await run), stop it (its Stop button, "
                    "or run.cancel()), or pass --new to start a separate conversation."
                )
            history = last
        agent = self.agent(options)
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            run = self._run_here(agent, prompt, history)
        else:
            run = agent.start(prompt, history=history)
            try:
                view = self._make_view(run)
                self._views[run] = view
                if hasattr(view, "widget"):
                    display(view)
            except BaseException:
                run.cancel("the live view could not be shown")
                raise
            view.displayed_in = self.shell.execution_count
        self.runs.append(run)
        self.conversation = run
        return run

    def _run_here(self, agent: Agent, prompt: str, history: AgentRun | None) -> AgentRun:
        """No event loop (terminal IPython): run to the end now, printing as it goes."""
        from .text import TextView

        async def go() -> AgentRun:
            run = agent.start(prompt, history=history)
            view = TextView(run)
            view.displayed_in = self.shell.execution_count
            self._views[run] = view
            try:
                await run
            except Exception:
                pass  # the run keeps its error; the view printed it
            return run

        return asyncio.run(go())

    def _make_view(self, run: AgentRun) -> Any:
        kind = self.config.view
        if kind == "auto":
            kind = "widget" if getattr(self.shell, "kernel", None) is not None else "text"
        if kind == "widget":
            try:
                from .widgets import RunView
            except ImportError:  # a kernel without ipywidgets: printed lines instead
                pass
            else:
                return RunView(run, rate=self.config.update_rate)
        from .text import TextView

        return TextView(run)

    def view_for(self, call: CallRecord) -> Any:
        """The view showing the run a call belongs to (None if there is none)."""
        for run, view in list(self._views.items()):
            if any(c is call for c in run.calls):
                return view
        return None

    def view(self, run: AgentRun) -> Any:
        """The live view of a run started with %agent (None for other runs)."""
        return self._views.get(run)

    # -- display ---------------------------------------------------------------------------------------------
    def display_run(self, run: AgentRun) -> None:
        """How a run shows as a cell's result or with display(run): its live view while it runs (once per
        cell), else the rendered run, which stays in the saved notebook."""
        view = self._views.get(run)
        if view is not None and view.displayed_in == self.shell.execution_count:
            return
        if not run.done and view is not None and hasattr(view, "widget"):
            display(view)
            return
        from ..render import run_text

        display({"text/html": run._repr_html_(), "text/plain": run_text(run)}, raw=True)


def _is_function(value: Any) -> bool:
    import inspect

    return inspect.isfunction(value) or inspect.isbuiltin(value) or inspect.ismethod(value)


def _as_tool(name: str, obj: Any) -> Tool:
    if isinstance(obj, Tool):
        return obj
    if isinstance(obj, type) or not callable(obj):
        raise UsageError(f"--tools: {name!r} is a {type(obj).__name__}, not a function")
    try:
        return as_tool(obj)
    except ToolDefinitionError:
        pass  # a lambda, say: its own name is no tool name; the notebook's name for it is
    try:
        return tool(obj, name=name)
    except ToolDefinitionError as exc:
        raise UsageError(f"--tools: {name} cannot be a tool: {exc}") from None
