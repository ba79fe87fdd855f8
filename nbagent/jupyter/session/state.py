"""One kernel's nbagent state, and the path of one `%agent` from its options to a shown run.

    %agent options  ->  AgentFactory (resolve.py)          the model, tools, MCP, instructions, compaction
                    ->  StoredConversation (conversation.py) what the run continues, and where it is stored
                    ->  Agent.start, on the kernel's loop
                    ->  NotebookRuns (notebook_runs.py)     the run's view in the cell, re-runs, shutdown

`start` returns the run at once; the run goes on in the background. The approver (approval.py) is handed
what finds a run's view, `NotebookRuns.view_for`, so it needs nothing else of the session.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING, Any

from IPython.core.error import UsageError

from nbagent.calls.permissions import Grants

from ..config import NBAgent, workspace_of
from ..live.approval import NotebookApprover
from ..notebook.runs import NotebookRuns, RunList, status_of
from .conversation import SessionList, StoredConversation
from .resolve import AgentFactory, CallResults, RunOptions, builtin_tools, no_model_message

if TYPE_CHECKING:  # pragma: no cover
    from IPython.core.interactiveshell import InteractiveShell

    from nbagent.agent.run import AgentRun
    from nbagent.providers import Model

__all__ = ["CallResults", "NotebookSession", "RunList", "RunOptions", "SessionList", "builtin_tools",
           "no_model_message"]


class NotebookSession:
    """nbagent's state in one IPython shell (one per kernel): the settings, the grants, and the three parts
    a run passes through (`agents`, `stored`, `notebook_runs`)."""

    def __init__(self, shell: InteractiveShell) -> None:
        self.shell = shell
        self.config = NBAgent(parent=shell)
        self.grants = Grants()
        """Approvals remembered this session ("Always allow"), shared by every run of the kernel."""
        self.notebook_runs = NotebookRuns(shell, self.config)
        """The runs started with %agent, their views and cells."""
        self.displays = self.notebook_runs.displays
        self.approver = NotebookApprover(lambda: self.config.approver, self.notebook_runs.view_for)
        self.agents = AgentFactory(shell, self.config, self.grants, self.approver, self.notebook_runs,
                                   replay_model=lambda session_id: self.stored.replay_model(session_id),
                                   replay_mode=lambda: self.stored.replay_mode())
        """Turns a `%agent`'s options and the settings into an `Agent`."""
        self.stored = StoredConversation(self.config, self.agents.models, frontend=self._page)
        """The conversation the next %agent continues, and the stored session it is written to."""
        self._greeting: asyncio.Task | None = None
        """The hello to the notebook page under way (see `_greet`)."""

    def _page(self) -> dict[str, Any]:
        """What the notebook page said of itself (path, notebook_id), {} until it has: see `_greet`."""
        frontend = getattr(self.shell, "_nbagent_frontend", None)
        return dict(getattr(frontend, "info", None) or {})

    def _greet(self) -> None:
        """Say hello to the notebook page in the background (its answer names the notebook: its id follows it
        through renames). Only in a kernel; a page that does not answer is not remembered as absent."""
        if getattr(self.shell, "kernel", None) is None:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        from ..notebook.comm import NoFrontend, frontend_for

        frontend = frontend_for(self.shell)
        if frontend.connected or self._greeting is not None:
            return

        async def hello() -> None:
            try:
                await frontend.connect()
            except NoFrontend:
                frontend._absent_until = 0.0  # the tools ask again when they need the page
            except Exception:  # pragma: no cover - nothing of a run depends on it
                pass
            finally:
                self._greeting = None

        self._greeting = loop.create_task(hello())

    def close(self) -> None:
        """`%unload_ext`: stop following cells (runs already started go on)."""
        self.notebook_runs.close()

    @property
    def workspace(self) -> Path:
        return workspace_of(self.config)

    @property
    def runs(self) -> list[AgentRun]:
        """Every run started with %agent, oldest first."""
        return self.notebook_runs.runs

    def resolve_model(self, value: Any = None) -> Model:
        """The model of a run: `--model`, else `NBAgent.model`, else the first provider whose key is set."""
        return self.agents.resolve_model(value)

    def view(self, run: AgentRun) -> Any:
        """The live view of a run started with %agent (None for other runs)."""
        return self.notebook_runs.view(run)

    def display_run(self, run: AgentRun) -> None:
        """How a run shows as a cell's result (`await run`, display(run)): see `NotebookRuns.display_run`."""
        self.notebook_runs.display_run(run)

    async def wait(self, run: AgentRun) -> AgentRun:
        """`%agent --wait` (the cell awaits this): see `NotebookRuns.wait`."""
        return await self.notebook_runs.wait(run)

    def start(self, prompt: str, options: RunOptions) -> AgentRun:
        """Start a run on the kernel's loop, show it, and return it (the run goes on in the background).

        A cell run again while the run it started before is still going (waiting for approval, say) shows
        that run's live view again, first, so it stays reachable; and says so.
        """
        runs, stored = self.notebook_runs, self.stored
        self._greet()
        if options.side:
            return self._side_thread(prompt, options)
        cell = runs.displays.cell_id
        again = runs.again_in(cell)
        history = None
        previous = None
        if not options.new and stored.last is not None:
            last = stored.last
            if not last.done:
                if last not in again:
                    where = runs.where(last)
                    raise UsageError(
                        f"not started: the previous %agent run ({where}) is still going ({status_of(last)}). "
                        "Decide or Stop it there (nbagent.jupyter.view(run) shows its view here; %agent --runs "
                        "lists the live runs), wait for it (await run), or pass --new to start a separate "
                        "conversation alongside it."
                    )
                raise UsageError(
                    f"not started: the run this cell started before is still going ({status_of(last)}); its live "
                    "view is shown again above. Decide or Stop it there, then run this cell again; or pass --new "
                    "to start a separate conversation alongside it."
                )
            history = stored.carried(last, cell, runs.cell_of)
            previous = last
        elif not options.new and stored.resumed is not None:
            history = stored.resumed
        if options.new or (stored.last is None and stored.resumed is None):
            stored.begin()
        stored.resumed = None
        options = self.carry(options, previous)
        if again:
            print(f"The run this cell started before is still going ({status_of(again[0])}): its live view is "
                  "shown again above. The new run follows.")
        agent = self.agents.agent(options)
        if options.compact and history is None:
            raise UsageError("there is no conversation to compact yet: %agent --compact works on the one that "
                             "consecutive %agent calls continue")
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            run = runs.run_here(agent, prompt, history, compact=options.compact, previous=previous)
        else:
            run = (agent.start_compaction(history, previous=previous) if options.compact
                   else agent.start(prompt, history=history, previous=previous))
            runs.shorten_error(run)
            stored.record(run)
            runs.show(run, cell)
        runs.add(run)
        stored.last = run
        return run

    def _side_thread(self, prompt: Any, options: RunOptions) -> AgentRun:
        """Start a side thread (`options.side`): with the conversation's model, mode and tools, but none of its
        messages, alongside whatever runs, stored as a session of its own. The conversation the next %agent or
        panel prompt continues (its last run, its stored session, its settings) stays as it was."""
        runs, stored = self.notebook_runs, self.stored
        kept = (stored.last, stored.session_id, stored.settings, stored.resumed, stored._identified)
        try:
            options = self.carry(options, stored.last)
            settings = stored.settings
            stored.begin()
            stored.settings = {**settings, "side": True}  # stored so: resuming and the panel skip it
            agent = self.agents.agent(options)
            run = agent.start(prompt)
            runs.shorten_error(run)
            stored.record(run)
            runs.show(run, runs.displays.cell_id)
            runs.add(run)
        finally:
            stored.last, stored.session_id, stored.settings, stored.resumed, stored._identified = kept
        return run

    def _still_defined(self, names: list[str]) -> list[str]:
        """The conversation's tools that this kernel has (a resumed conversation's functions may not be
        defined again yet): the others are left out, and the cell says so."""
        builtin = {getattr(t, "name", None) for t in builtin_tools(self.shell, self.workspace)}
        return _left_out(names, set(self.shell.user_ns) | builtin, "tool", "defined",
                         "define them, then --tools offers them again")

    def _still_configured(self, names: list[str]) -> list[str]:
        """The conversation's MCP servers that are configured in this kernel now (after a restart, say)."""
        return _left_out(names, self.agents.mcp_names(), "MCP server", "configured",
                         "configure them with %config NBAgent.mcp_servers, then --mcp offers them again")

    def carry(self, options: RunOptions, previous: AgentRun | None) -> RunOptions:
        """A conversation keeps what its first run was started with: a later %agent without --model,
        --tools, --mode... continues with those of the run it follows (also after --resume: they are
        stored with the session). What a %agent gives replaces them for it and the runs after it."""
        from dataclasses import replace

        kept = self.stored.settings
        changes: dict[str, Any] = {}
        for name in ("model", "mode", "max_turns", "instructions", "mcp"):
            if getattr(options, name) is None and kept.get(name) is not None:
                changes[name] = kept[name]
        if "mcp" in changes and changes["mcp"]:
            changes["mcp"] = self._still_configured(list(changes["mcp"]))
        if options.tools is None and kept.get("tools") is not None:
            changes["tools"] = self._still_defined(list(kept["tools"]))
            changes["only_tools"] = bool(kept.get("only_tools"))
        if options.model is None and kept.get("model") is None and previous is not None:
            changes["model"] = previous.model  # the same object: the same provider, the same script
        options = replace(options, **changes) if changes else options
        live = options.model
        self.stored.settings = {
            "model": live if isinstance(live, str) else kept.get("model"),
            "mode": options.mode, "max_turns": options.max_turns, "mcp": options.mcp,
            "tools": options.tools, "only_tools": options.only_tools,
            "instructions": options.instructions if isinstance(options.instructions, str) else None,
        }
        return options


def _left_out(names: list[str], known: set[Any], what: str, state: str, how: str) -> list[str]:
    """`names` that are in `known`; the cell says which of a conversation's others are left out and why."""
    gone = [n for n in names if n not in known]
    if gone:
        many = len(gone) != 1
        print(f"The conversation's {what}{'s' if many else ''} {', '.join(gone)} {'are' if many else 'is'} not "
              f"{state} in this kernel: left out of this run ({how}).")
    return [n for n in names if n in known]
