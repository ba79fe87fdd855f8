"""One kernel's nbagent state: settings, the conversation, the runs, their views and the grants.

`%agent` asks the session to start a run: it resolves the model and the tools (a user mistake becomes a
`UsageError` that says what to do), continues the conversation unless told not to, starts the run as a task
on the kernel's loop, shows its view and returns the run at once.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import time
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from IPython.core.error import UsageError
from IPython.display import display

from ..errors import ConfigurationError, ModelError
from ..permissions import Grants
from ..providers import Model, load_model
from ..tools import Tool, ToolDefinitionError, as_tool, tool
from .approval import NotebookApprover
from .config import KEY_VARIABLES, NBAgent
from .document import Displays
from .instructions import notebook_instructions

if TYPE_CHECKING:  # pragma: no cover
    from IPython.core.interactiveshell import InteractiveShell

    from ..messages import Message
    from ..records import CallRecord
    from ..run import Agent, AgentRun

__all__ = ["NotebookSession", "RunList", "RunOptions", "builtin_tools", "no_model_message"]


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
        self.session_id: str | None = None
        """The stored conversation the runs are written to (`<workspace>/.nbagent/sessions/`)."""
        self.resumed: list[Message] | None = None
        """A stored conversation resumed with `--resume`, until the next %agent continues it."""
        self.consent_prompts: list[Any] = []
        """The MCP trust prompts shown (`nbagent.jupyter.consent.TrustPrompt`), oldest first."""
        self._consent_asked: set[tuple[str, str]] = set()
        self.origin = f"{os.getpid()}-{int(time.time())}"
        """This kernel's mark on the sessions it writes (replay finds a notebook's last execution by it)."""
        self._conversations = 0
        """How many conversations this kernel started (replay takes the recorded ones in that order)."""
        self._views: weakref.WeakKeyDictionary[AgentRun, Any] = weakref.WeakKeyDictionary()
        self._models: dict[str, Model] = {}
        self.approver = NotebookApprover(self)
        self.displays = Displays(shell)
        """Which cell is executing; display updates that reach the reader of that cell (see document.py)."""
        _watch_shutdown(self)

    def close(self) -> None:
        """`%unload_ext`: stop following cells (runs already started go on)."""
        self.displays.close()

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
            value = obj.strip()
        elif value.isidentifier() and value != "scripted":
            raise UsageError(
                f"--model {value}: there is no variable named {value!r} in the notebook, and a model spec has a "
                "provider prefix, e.g. 'openai:gpt-4.1' or 'anthropic:claude-sonnet-4-5'. Define the Model first "
                "(model = ScriptedModel([...]), say), or check the spelling."
            )
        if value in self._models:
            return self._models[value]
        prefix, colon, name = value.partition(":")
        if colon and not name.strip() and prefix != "scripted":
            raise UsageError(f"--model {value}: the spec names no model after {prefix + ':'!r}; write "
                             f"{prefix}:MODEL, e.g. {self.config.default_models.get(prefix) or 'openai:gpt-4.1'}")
        try:
            model = load_model(value)
        except ConfigurationError as exc:
            raise UsageError(f"{exc}. A model is a spec like 'openai:gpt-4.1' or the name of a Model in the "
                             "notebook.") from None
        self._models[value] = model
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

    def mcp_servers(self, names: list[str] | None = None) -> Any:
        """The MCP servers of a run: the workspace's `.mcp.json`, then `NBAgent.mcp_servers` (these win),
        narrowed to `names` when given. None when there are none.

        A workspace file's servers start only once the person trusted its exact content
        (`NBAgent.workspace_mcp`): until then the prompt shows what they would run, and runs go on
        without them."""
        from ..mcp import MCPServers, parse_servers, workspace_configs

        setting = "trust" if os.environ.get("NBAGENT_TRUST_WORKSPACE_MCP") == "1" else self.config.workspace_mcp
        try:
            configs = workspace_configs(self.workspace) if setting != "off" else []
            servers = {name: dataclasses.replace(s, approved=True) if setting == "trust" else s
                       for c in configs for name, s in c.servers.items()}
            servers.update(parse_servers(self.config.mcp_servers, source="NBAgent.mcp_servers"))
            if names is not None and not names:
                return None
            toolset = MCPServers(servers)
            if names is not None:
                toolset = toolset.select(names)
        except ConfigurationError as exc:
            raise UsageError(str(exc)) from None
        if setting == "ask":
            self._ask_trust([c for c in configs if c.servers and not c.trusted
                             and any(toolset.servers.get(n) is s for n, s in c.servers.items())])
        if not toolset.active and not toolset.waiting:
            return None
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            pass
        else:  # the kernel's loop lives as long as the kernel: its servers live there (no thread hop per call)
            from ..mcp import use_loop

            use_loop(loop)
        return toolset

    def _ask_trust(self, configs: list[Any]) -> None:
        """Show the consent prompt of each untrusted workspace configuration (once per content a session)."""
        if not configs:
            return
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
            display(prompt.widget)

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
        # a notebook re-run offline (`headless --replay`, NBAGENT_REPLAY): every run answers from the record
        model = self.resolve_model("replay" if os.environ.get("NBAGENT_REPLAY") else options.model)
        tools = self.resolve_tools(options.tools, only=options.only_tools)
        if getattr(model, "provider", None) == "replay":
            from ..providers.replay import replay_tools

            tools = replay_tools(tools, model, self.replay_mode())
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
                # --only-tools: only what is named, MCP servers included (--mcp NAME names them)
                mcp_servers=None if options.only_tools and options.mcp is None else self.mcp_servers(options.mcp),
                name="notebook",
                max_cost=cfg.max_cost,
                context_window=cfg.context_window or None,
                compaction=self._compaction(),
            )
        except ConfigurationError as exc:
            raise UsageError(str(exc)) from None
        agent.policy.grants = self.grants
        return agent

    def _compaction(self) -> Any:
        """Compaction settings from `NBAgent.compaction_threshold`; stubs point at `_agent_results`."""
        from ..compaction import CompactionSettings

        threshold = self.config.compaction_threshold
        if not 0 <= threshold <= 1:
            raise UsageError(f"NBAgent.compaction_threshold is a share of the window (0 to 1), not {threshold}")
        return CompactionSettings(threshold=threshold or 0.8, target=min(0.5, threshold or 0.8),
                                  auto=threshold > 0, locate=self._locate)

    def _locate(self, message: Any) -> str:
        """Where a stubbed result lives: `_agent_results[call id]` in the notebook, readable with inspect_variable."""
        ns = self.shell.user_ns
        if not isinstance(ns.get("_agent_results"), CallResults):
            ns["_agent_results"] = CallResults(self)
            hidden = getattr(self.shell, "user_ns_hidden", None)
            if isinstance(hidden, dict):
                hidden["_agent_results"] = ns["_agent_results"]
        return (f"The whole result is still in the notebook: inspect_variable('_agent_results[\"{message.tool_call_id}\"]') "
                f"shows it (the live object), or call {message.name} again.")

    def start(self, prompt: str, options: RunOptions) -> AgentRun:
        """Start a run on the kernel's loop, show it, and return it (the run goes on in the background).

        A cell run again while the run it started before is still going (waiting for approval, say) shows
        that run's live view again, first, so it stays reachable; and says so.
        """
        cell = self.displays.cell_id
        again = [r for r in self.live_runs() if cell is not None and self._cell_of(r) == cell]
        for run in again:
            display(self._views[run])
        history = None
        previous = None
        if not options.new and self.conversation is not None:
            last = self.conversation
            if not last.done:
                if last not in again:
                    where = self._where(last)
                    raise UsageError(
                        f"not started: the previous %agent run ({where}) is still going ({_status(last)}). "
                        "Decide or Stop it there (nbagent.jupyter.view(run) shows its view here; %agent --runs "
                        "lists the live runs), wait for it (await run), or pass --new to start a separate "
                        "conversation alongside it."
                    )
                raise UsageError(
                    f"not started: the run this cell started before is still going ({_status(last)}); its live "
                    "view is shown again above. Decide or Stop it there, then run this cell again; or pass --new "
                    "to start a separate conversation alongside it."
                )
            history = self._carried(last, cell)
            previous = last
        elif not options.new and self.resumed is not None:
            history = self.resumed
        if options.new or (self.conversation is None and self.resumed is None):
            self.session_id = None  # a new conversation: a new stored session when the run starts
            self._conversations += 1
        self.resumed = None
        if again:
            print(f"The run this cell started before is still going ({_status(again[0])}): its live view is shown "
                  "again above. The new run follows.")
        agent = self.agent(options)
        if options.compact and history is None:
            raise UsageError("there is no conversation to compact yet: %agent --compact works on the one that "
                             "consecutive %agent calls continue")
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            run = self._run_here(agent, prompt, history, compact=options.compact, previous=previous)
        else:
            run = (agent.start_compaction(history, previous=previous) if options.compact
                   else agent.start(prompt, history=history, previous=previous))

            def on_event(event: Any, run: AgentRun = run) -> None:
                if event.kind == "run_finished" and run.error is not None:
                    _one_line(run.error)  # before `await run` raises it

            run.subscribe(on_event)
            self._store(run)
            try:
                view = self._make_view(run)
                self._views[run] = view
                view.cell_id = cell
                view.displayed_in = self.shell.execution_count
                if hasattr(view, "widget"):
                    view.on_end = self._ended
                    display(view)
            except BaseException:
                run.cancel("the live view could not be shown")
                raise
        self.runs.append(run)
        self.conversation = run
        return run

    # -- stored conversations --------------------------------------------------------------------------------
    def notebook_path(self) -> str | None:
        """The notebook this kernel serves, as well as it can be known: `NBAgent.notebook_path`, the path
        a headless run gives (`NBAGENT_NOTEBOOK`), or the one the Jupyter server gives (`JPY_SESSION_NAME`,
        relative to the server's root: the kernel starts in the notebook's folder)."""
        given = getattr(self.config, "notebook_path", None) or os.environ.get("NBAGENT_NOTEBOOK")
        if given:
            return str(Path(given).resolve())
        name = os.environ.get("JPY_SESSION_NAME")
        if not name:
            return None
        here = Path.cwd() / Path(name).name
        return str(here) if here.exists() else name

    def _store(self, run: AgentRun) -> None:
        """Write the run into this conversation's stored session (a new one for a new conversation)."""
        if not self.config.store_sessions or getattr(run.model, "provider", None) == "replay":
            return
        from ..recording import SessionRecorder
        from ..sessions import SessionWriter

        try:
            if self.session_id is None:
                writer = SessionWriter(self.workspace, notebook=self.notebook_path(), model=run.model.spec,
                                       origin=self.origin)
                self.session_id = writer.id
            else:
                writer = SessionWriter(self.workspace, self.session_id, resume=True)
            SessionRecorder(writer, run).attach()
        except OSError as exc:  # a read-only workspace: the run goes on, unrecorded, and says so once
            print(f"nbagent: this conversation is not being stored ({exc})")

    def resume(self, session_id: str | None = None) -> Any:
        """`%agent --resume [ID]`: the next %agent continues a stored conversation (default: this notebook's
        latest, else the workspace's latest)."""
        from ..sessions import SessionError, find_session

        try:
            stored = find_session(self.workspace, session_id, notebook=self.notebook_path())
        except SessionError as exc:
            raise UsageError(f"{exc} (%agent --sessions lists them)") from None
        self.resumed = stored.messages
        self.session_id = stored.info.id
        self.conversation = None
        return stored

    def sessions(self) -> Any:
        from ..sessions import list_sessions

        return SessionList(list_sessions(self.workspace), self.notebook_path(), self.session_id)

    def replay_mode(self) -> str:
        mode = (os.environ.get("NBAGENT_REPLAY") or "").strip().lower()
        return "recorded" if mode == "recorded" else getattr(self.config, "replay_tools", "rerun")

    def replay_model(self, session_id: str | None) -> Model:
        """`--model replay`: the stored session this conversation replays. Continuing a resumed conversation,
        that one; else the recorded conversation of this notebook's last execution that this one matches
        (the first conversation of the kernel replays the first one recorded then, and so on)."""
        from ..providers.replay import ReplayModel
        from ..sessions import SessionError, list_sessions

        if session_id is None and self.session_id is not None and self.conversation is not None:
            session_id = self.session_id
        if session_id is None:
            notebook = self.notebook_path()
            found = [i for i in list_sessions(self.workspace, notebook=notebook)] if notebook else []
            found = found or list_sessions(self.workspace)
            if not found:
                raise UsageError(f"--model replay: no stored conversation in {self.workspace} to replay")
            origin = found[-1].origin
            same_run = [i for i in found if i.origin == origin] if origin else found[-1:]
            k = max(self._conversations - 1, 0)  # counted when this run's conversation started
            if k >= len(same_run):
                raise UsageError(f"--model replay: the recorded execution of this notebook had {len(same_run)} "
                                 f"conversation(s); this is conversation {k + 1}")
            session_id = same_run[k].id
        key = f"replay:{session_id}"
        if key not in self._models:
            try:
                self._models[key] = ReplayModel(session_id, workspace=self.workspace)
            except (SessionError, ModelError) as exc:
                raise UsageError(f"--model replay: {exc}") from None
        return self._models[key]

    async def wait(self, run: AgentRun) -> AgentRun:
        """`%agent --wait`: wait for the run. If it fails, or the interrupt button stops it, the cell ends with
        one line (the error, or that it was stopped): the view above already shows what happened, and the
        run's error keeps its whole traceback (`run.error`)."""
        try:
            return await run
        except asyncio.CancelledError as exc:
            exc._render_traceback_ = lambda: [  # type: ignore[attr-defined]
                "Interrupted: the run was stopped (calls in flight were cancelled; the transcript stays valid)."]
            raise
        except Exception as exc:
            if exc is run.error:
                _one_line(exc)
            raise

    def _carried(self, last: AgentRun, cell: str | None) -> list[Message]:
        """The conversation the next run continues: the last run's transcript, without a prompt nobody answered.

        A run that failed or was stopped before the model answered leaves its prompt last; sending it again
        would make two user messages in a row. Running again the cell whose run failed retries it: the
        conversation is then what came before that run.
        """
        from ..recording import rolled_back

        if last.status in ("failed", "cancelled") and cell is not None and self._cell_of(last) == cell:
            return last.messages[: len(last.messages) - len(last.new_messages)]
        return rolled_back(last)

    def _ended(self, view: Any) -> None:
        """A run ended: every display of its view becomes the static rendering, and the widgets go."""
        if view.shown:
            self.displays.update(view.display_id, view.static_bundle())
        view.close()

    def _cell_of(self, run: AgentRun) -> str | None:
        view = self._views.get(run)
        return getattr(view, "cell_id", None)

    def _where(self, run: AgentRun) -> str:
        view = self._views.get(run)
        return f"started in {_cell_label(view)}"

    def live_runs(self) -> list[AgentRun]:
        """The runs started with %agent that are still going, oldest first."""
        return [r for r in self.runs if not r.done]

    def stop_showing(self, reason: str = "the kernel stopped while the run was going on") -> None:
        """The kernel is going away: draw every live run's view as stopped, and replace its displays with that
        static rendering (what still reaches a frontend, see document.py)."""
        for run in self.live_runs():
            view = self._views.get(run)
            if view is None or not hasattr(view, "stop_showing") or view.stopped is not None:
                continue
            try:
                view.stop_showing(reason)
                if view.shown:
                    self.displays.update(view.display_id, view.static_bundle())
            except Exception:  # the kernel is going away: do what can be done
                pass

    def _run_here(self, agent: Agent, prompt: str, history: Any, *, compact: bool = False,
                  previous: AgentRun | None = None) -> AgentRun:
        """No event loop (terminal IPython): run to the end now, printing as it goes."""
        from .text import TextView

        async def go() -> AgentRun:
            run = (agent.start_compaction(history, previous=previous) if compact
                   else agent.start(prompt, history=history, previous=previous))
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
        """How a run shows as a cell's result (`await run`) or with display(run).

        - in the cell that started it: nothing more (the view is there);
        - while it runs: its live view again (that display too ends up holding the static rendering);
        - once it ended, if its view was shown (the starting cell holds the whole run): one line, its status
          and answer, saying where the whole run is; `view(run)` shows it whole again;
        - else (a run nbagent did not show): the whole run, HTML and plain text.
        """
        from .. import render

        view = self._views.get(run)
        if view is not None and view.displayed_in == self.shell.execution_count:
            return
        if view is not None and hasattr(view, "widget") and view.shown:
            if not run.done:
                display(view)
                return
            where = _cell_label(view)
            display({"text/html": render.run_line_html(run, where), "text/plain": render.run_line_text(run, where)},
                    raw=True)
            return
        display({"text/html": run._repr_html_(), "text/plain": render.run_text(run)}, raw=True)


class RunList(list):
    """Runs of the kernel (a plain list). Displayed: one line per run, then the live view of each run going."""

    def __init__(self, session: NotebookSession, runs: list[AgentRun]) -> None:
        super().__init__(runs)
        self._session = session

    def _line(self, i: int, run: AgentRun) -> str:
        from ..render import one_line

        prompt = run.prompt if isinstance(run.prompt, str) else getattr(run.prompt, "text", "")
        pending = ""
        view = self._session.view(run)
        if view is not None and getattr(view, "pending", None):
            pending = f", {len(view.pending)} waiting for you"
        return (f"[{i}] {_status(run)}{pending} · {self._session._where(run)} · "
                f"{len(run.calls)} calls · {one_line(prompt or '', 80)}")

    def __repr__(self) -> str:
        if not self:
            return "(no %agent run is going)"
        return "\n".join(self._line(i, r) for i, r in enumerate(self))

    def _ipython_display_(self) -> None:
        print(repr(self))
        for run in self:
            view = self._session.view(run)
            if view is not None and hasattr(view, "widget") and not run.done:
                display(view)


class SessionList:
    """`%agent --sessions`: the stored conversations of the workspace, this notebook's marked."""

    def __init__(self, infos: list[Any], notebook: str | None, current: str | None) -> None:
        self.infos = infos
        self.notebook = notebook
        self.current = current

    def __len__(self) -> int:
        return len(self.infos)

    def __getitem__(self, i: int) -> Any:
        return self.infos[i]

    def __repr__(self) -> str:
        if not self.infos:
            return "No stored conversations in this workspace yet."
        lines = [f"{len(self.infos)} stored conversation{'s' if len(self.infos) != 1 else ''} "
                 "(%agent --resume ID continues one; %agent --delete-session ID removes one):"]
        for info in self.infos:
            mark = "*" if info.id == self.current else " "
            lines.append(f" {mark} {info}")
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        from html import escape

        if not self.infos:
            return "<p>No stored conversations in this workspace yet.</p>"
        rows = "".join(
            f"<tr><td><code>{escape(i.id)}</code>{' (current)' if i.id == self.current else ''}</td>"
            f"<td>{escape(Path(i.notebook).name if i.notebook else '-')}</td>"
            f"<td>{escape(time.strftime('%Y-%m-%d %H:%M', time.localtime(i.created)))}</td>"
            f"<td>{i.runs}</td><td>{i.turns}</td><td>{i.calls}</td><td>{escape(i.last_prompt[:80])}</td></tr>"
            for i in self.infos)
        return ("<table><thead><tr><th>id</th><th>notebook</th><th>started</th><th>runs</th><th>turns</th>"
                f"<th>calls</th><th>last prompt</th></tr></thead><tbody>{rows}</tbody></table>"
                "<p>%agent --resume ID continues one; %agent --delete-session ID removes one.</p>")


def _one_line(exc: BaseException) -> None:
    """Make IPython show a run's error in one line (`await run`, `--wait`): the view already shows what the
    run did, and the exception keeps its traceback (`run.error`)."""
    line = f"{type(exc).__name__}: {exc}"
    try:
        exc._render_traceback_ = lambda: [  # type: ignore[attr-defined]
            f"{line}  (the run failed: its view shows what it did; the exception, with its traceback, is run.error)"]
    except Exception:  # an exception type that refuses attributes keeps IPython's traceback
        pass


def _cell_label(view: Any) -> str:
    """'In [3]': `displayed_in` is the shell's execution count while the cell ran, one ahead of its number."""
    count = getattr(view, "displayed_in", None)
    return f"In [{count - 1}]" if isinstance(count, int) and count > 1 else "an earlier cell"


def _status(run: AgentRun) -> str:
    return "waiting for your approval" if run.status == "waiting_for_approval" else run.status


def _watch_shutdown(session: NotebookSession) -> None:
    """Draw the live runs as stopped when the kernel shuts down: as soon as the shutdown request arrives (on
    the kernel's loop, which then still sends messages), and at the latest when the process exits."""
    import atexit
    import threading
    import weakref

    ref = weakref.ref(session)

    def at_exit() -> None:
        found = ref()
        if found is not None:
            found.stop_showing()

    atexit.register(at_exit)
    shell = session.shell
    try:
        loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
    except RuntimeError:  # terminal IPython: runs happen inside the cell, nothing outlives it
        loop = None

    def on_exit_now(change: Any) -> None:  # set by ipykernel's do_shutdown, on the control thread
        found = ref()
        if found is None or not change.get("new") or loop is None or loop.is_closed():
            return
        if threading.current_thread() is threading.main_thread():  # no control thread: this is the loop's
            found.stop_showing()
            return
        done = threading.Event()

        def stop() -> None:
            try:
                found.stop_showing()
            finally:
                done.set()

        try:
            loop.call_soon_threadsafe(stop)
        except RuntimeError:
            return
        # The shutdown goes on when this returns (the reply, then the loops stop): give the kernel's loop a
        # moment to draw the views as stopped first. A cell that blocks the loop leaves it to atexit.
        done.wait(2.0)

    if hasattr(shell, "observe") and shell.has_trait("exit_now"):
        shell.observe(on_exit_now, names="exit_now")


def _a(noun: str) -> str:
    """'an int', 'a str'."""
    return f"an {noun}" if noun[:1].lower() in "aeiou" else f"a {noun}"


class CallResults:
    """`_agent_results["call id"]` in the notebook: the whole result of any call of this kernel's runs (the live
    `details` object, else the text the model was sent), for results compaction took out of the transcript."""

    def __init__(self, session: NotebookSession) -> None:
        self._session = weakref.ref(session)

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
    from .capture import capturing

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
