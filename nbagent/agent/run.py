"""`Agent` (the configuration, and the session's grants) and `AgentRun` (the handle of one run).

    agent = Agent(model="anthropic:claude-sonnet-4-5", tools=[add], instructions="...")
    run = agent.run_sync("What is 2+3?")        # only where no event loop is running
    run = await agent.run("What is 2+3?")       # a finished run
    run = agent.start("What is 2+3?")           # a running run on the current loop; `await run` finishes it
    run = await agent.compact(run)              # compaction by hand: the next run continues from this one

Here is the agent: its settings (made once, in `options`: `AgentOptions`), its stored conversation and the
runs it makes. A run is `AgentRun` (`handle`: starting, steering, cancelling, waiting on one run), whose base
`RunReadout` (`readout`) reads what the run did; both names import from here too.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from ..budget.compaction import CompactionSettings
from ..budget.pricing import Spend
from ..calls.hooks import Hooks
from ..calls.permissions import MODES, Approver, Grants, Rule
from ..errors import ConfigurationError
from ..events import Event
from ..messages import ContentBlock, Message, Usage, UserMessage
from ..providers import Model
from ..tools.definition import Tool
from ..tools.results import DEFAULT_MAX_RESULT_CHARS
from .handle import AgentRun
from .options import AgentOptions

__all__ = ["Agent", "AgentRun"]

log = logging.getLogger("nbagent.run")

class Agent:
    """A model, its tools and the rules they run under. One agent can make many runs.

    Args:
        model: a `Model`, or a spec such as `"openai:gpt-4.1"` (see `load_model`).
        tools: tools, plain functions (made into tools), and `Toolset`s decided each turn.
        instructions: the system prompt, or `f(run) -> str` computed at the start of each run.
        mode: permission mode: default, acceptEdits, plan, dontAsk, bypassPermissions.
        rules: permission rules such as `"allow: add"`, `"deny: shell(rm *)"`, `"ask: write_file"`.
        approver: decides calls that need consent: `f(request) -> bool | Decision` (sync or async),
            or `"allow"` / `"deny"`. Without one, `NBAGENT_APPROVAL` decides, else such calls are denied.
        max_turns: the most model requests one run makes.
        hooks: `Hooks(before_tool_call=..., after_tool_call=..., tool_result_persist=...)`.
        output_type: a type the run must produce by calling `submit_result` (`run.output` is the value), or a
            JSON Schema dict (`run.output` is then the submitted JSON value). The submit tool is sent strict
            where the provider supports strict tool schemas.
        workspace: the directory file tools are confined to (default: the working directory when the agent
            is made).
        cwd: the working directory tools get in their context (default: the workspace).
        capability_mode: read-only, read-write, execute or all: which tools the plan keeps.
        allowed_tools: name patterns of the only tools the model may be offered.
        extensions: objects a tool fetches by type with `ctx.get(SomeType)`.
        max_result_chars: text of one result the model gets before it is cut (None: no limit).
        tool_resolver: `f(name) -> Tool | None` for calls to tools found nowhere else.
        model_settings: extra settings passed to every model request (temperature, max_tokens...).
        session: keep the conversation in the workspace's session store (`<workspace>/.nbagent/sessions/`):
            True starts a new stored conversation, a session id continues that one. Runs started without
            `history` then continue the stored conversation, and each run is written as it goes.
        sandbox: the OS sandbox for shell commands a person or a rule allowed: "workspace-write" (writes only
            inside the workspace, no network), "read-only", or "danger-full-access" (no sandbox). Commands
            auto-allowed as read-only always run read-only.
        max_cost: US dollars one run may spend: it stops cleanly (`run.stop_reason` says so) before a request
            that would go over. Needs a model with a known price.
        context_window: the model's context window in tokens, overriding what nbagent knows of the model
            (needed for a `ScriptedModel` to compact).
        compaction: when and how the transcript is compacted: True (the defaults: before 80% of the window),
            a threshold such as 0.9, a `CompactionSettings`, or False (never).
        mcp_servers: MCP servers whose tools the runs get (`SERVER__TOOL`): the `mcpServers` mapping other MCP
            clients use (`{"time": {"command": "mcp-server-time"}, "web": {"url": "..."}}`), a path to such
            a JSON file, or an `nbagent.mcp.MCPServers`. See `nbagent.mcp`.
        execution_mode: "sequential" runs every batch of calls in order, one call after the other, whatever
            its tools say (default "parallel": a batch runs concurrently unless one of its tools is sequential).
        timeout: seconds one run may take: then it is cancelled (its calls get "cancelled" results, the
            transcript stays valid) and `run.stop_reason` says it timed out.
        session_timeout: seconds all the runs of this agent may take together: a run is cancelled the same way
            when the total would pass it, and a run started after that ends at once.
        approval_notice_after: seconds a call may wait for a person's decision before the run says it is still
            waiting (an `ApprovalStillWaiting` event the view shows; said again each time the wait doubles;
            None: never).
    """

    def __init__(
        self,
        model: Model | str | None = None,
        tools: Iterable[Any] = (),
        instructions: str | Callable[[AgentRun], str] | None = None,
        *,
        mode: str = "default",
        rules: Sequence[str | Rule] | None = None,
        approver: Approver | str | None = None,
        max_turns: int = 20,
        hooks: Hooks | None = None,
        output_type: Any = None,
        workspace: str | Path | None = None,
        cwd: str | Path | None = None,
        capability_mode: str = "all",
        allowed_tools: Sequence[str] | None = None,
        extensions: Iterable[Any] = (),
        max_result_chars: int | None = DEFAULT_MAX_RESULT_CHARS,
        tool_resolver: Callable[[str], Tool | None] | None = None,
        model_settings: dict[str, Any] | None = None,
        name: str = "agent",
        sandbox: Any = "workspace-write",
        session: bool | str | None = None,
        max_cost: float | None = None,
        context_window: int | None = None,
        compaction: bool | float | CompactionSettings = True,
        mcp_servers: Any = None,
        execution_mode: str = "parallel",
        timeout: float | None = None,
        session_timeout: float | None = None,
        approval_notice_after: float | None = 5.0,
    ) -> None:
        options = dict(locals())  # the signature above is the face; AgentOptions.resolve makes its parts
        del options["self"]
        self._adopt(AgentOptions.resolve(**options))

    @classmethod
    def from_options(cls, options: AgentOptions) -> Agent:
        """An agent made of parts already resolved (`AgentOptions`): nothing is looked up or parsed again."""
        agent = cls.__new__(cls)
        agent._adopt(options)
        return agent

    def _adopt(self, options: AgentOptions) -> None:
        # The agent keeps the parts, not the options object: what is changed later (`agent.model = ...`, a
        # copy shipped to a cluster worker without its key) has one place to live.
        self.name, self.model, self.instructions = options.name, options.model, options.instructions
        self.tools: list[Any] = list(options.tools)
        self.tool_resolver = options.tool_resolver
        self.mcp_servers = options.mcp_servers
        if self.mcp_servers is not None:
            self.tools.append(self.mcp_servers)
            self.tool_resolver = _chain(options.tool_resolver, self.mcp_servers.resolve)
        self.policy = options.policy
        self.max_turns, self.hooks, self.output_type = options.max_turns, options.hooks, options.output_type
        self.workspace = options.workspace
        self.cwd = options.cwd if options.cwd is not None else options.workspace
        self.capability_mode, self.allowed_tools = options.capability_mode, options.allowed_tools
        self.extensions, self.max_result_chars = options.extensions, options.max_result_chars
        self.model_settings, self.sandbox = options.model_settings, options.sandbox
        self.max_cost, self.context_window, self.compaction = options.max_cost, options.context_window, options.compaction
        self.execution_mode = options.execution_mode
        self.timeout, self.session_timeout = options.timeout, options.session_timeout
        self.approval_notice_after = options.approval_notice_after
        self.session_elapsed = 0.0
        """Seconds this agent's finished runs took together (what `session_timeout` counts)."""
        self.session_id: str | None = None
        """The stored conversation runs continue and are written to (None: not stored)."""
        self.conversation: list[Message] = []
        """The stored conversation's messages so far (what a run without `history` continues)."""
        self.conversation_spend = Spend()
        """What the stored conversation has spent so far (from its runs' records)."""
        if options.session:
            self.resume(options.session if isinstance(options.session, str) else None, new=options.session is True)

    # -- stored conversations ----------------------------------------------------------------------------
    def resume(self, session_id: str | None = None, *, new: bool = False) -> Agent:
        """Continue a stored conversation (None: the workspace's latest): the next runs start from its
        messages and are written to it. Calls that were in flight when it was last written get an
        "interrupted" result, so the transcript is valid. `new=True` starts a new stored conversation."""
        from ..sessions import SessionError, SessionWriter, find_session

        if new:
            writer = SessionWriter(self.workspace, model=getattr(self.model, "spec", None))
            self.session_id, self.conversation = writer.id, []
            self.conversation_spend = Spend()
            return self
        try:
            stored = find_session(self.workspace, session_id)
        except SessionError as exc:
            raise ConfigurationError(str(exc)) from None
        self.session_id, self.conversation = stored.info.id, stored.messages
        self.conversation_spend = _stored_spend(stored.runs)
        return self

    # -- permissions -------------------------------------------------------------------------------------
    @property
    def mode(self) -> str:
        return self.policy.mode

    @mode.setter
    def mode(self, value: str) -> None:
        if value not in MODES:
            raise ConfigurationError(f"unknown mode {value!r}; choose one of: {', '.join(MODES)}")
        self.policy.mode = value

    @property
    def rules(self) -> list[Rule]:
        return self.policy.rules

    @property
    def approver(self) -> Approver | str | None:
        return self.policy.approver

    @approver.setter
    def approver(self, value: Approver | str | None) -> None:
        self.policy.approver = value

    @property
    def grants(self) -> Grants:
        """Approvals remembered this session ("Always allow"): list them, `revoke(...)` or `clear()`."""
        return self.policy.grants

    # -- runs ------------------------------------------------------------------------------------------------
    def start(
        self,
        prompt: str | Sequence[ContentBlock] | UserMessage | None,
        *,
        history: Sequence[Message] | AgentRun | None = None,
        on_event: Callable[[Event], Any] | None = None,
        previous: AgentRun | None = None,
        output_type: Any = None,
        tools: Iterable[Any] | None = None,
    ) -> AgentRun:
        """Start a run as a task on the running event loop and return it at once (`await run` finishes it).

        `previous`: the run this one follows when `history` is given as messages (its conversation's usage
        and cost, and its measure of the context after a compaction, carry over). `output_type`: this run
        must finish through `submit_result` with a value of that type (a Python type, or a JSON Schema dict),
        instead of the agent's. `tools`: this run's own tool catalogue, instead of the agent's (tools,
        functions, `Toolset`s; `[*agent.tools, extra]` adds to them)."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            raise ConfigurationError(
                "agent.start() needs a running event loop (in a notebook there is one); in a script use "
                "agent.run_sync(...) or asyncio.run(agent.run(...))"
            ) from None
        stored = self.session_id is not None and history is None
        run = AgentRun(self, prompt, history=self.conversation if stored else history, loop=loop,
                       before=self.conversation_spend if stored else None, previous=previous,
                       output_type=output_type, tools=tools)
        if stored:
            self._record(run)
        if on_event is not None:
            run.subscribe(on_event)
        run._start()
        return run

    def _record(self, run: AgentRun) -> None:
        from ..sessions import SessionWriter
        from ..sessions.recording import SessionRecorder, rolled_back

        writer = SessionWriter(self.workspace, self.session_id, resume=True)
        SessionRecorder(writer, run).attach()

        def keep(event: Any) -> None:
            if getattr(event, "kind", "") == "run_finished":
                self.conversation = rolled_back(run)
                self.conversation_spend = run.conversation_spend.copy()

        run.subscribe(keep)

    async def run(
        self,
        prompt: str | Sequence[ContentBlock] | UserMessage | None,
        *,
        history: Sequence[Message] | AgentRun | None = None,
        on_event: Callable[[Event], Any] | None = None,
        output_type: Any = None,
        tools: Iterable[Any] | None = None,
    ) -> AgentRun:
        """Run to the end and return the finished run (raises the run's error if it failed). `output_type`
        and `tools` as for `start`."""
        run = self.start(prompt, history=history, on_event=on_event, output_type=output_type, tools=tools)
        return await run

    def run_sync(
        self,
        prompt: str | Sequence[ContentBlock] | UserMessage | None,
        *,
        history: Sequence[Message] | AgentRun | None = None,
        on_event: Callable[[Event], Any] | None = None,
        output_type: Any = None,
        tools: Iterable[Any] | None = None,
    ) -> AgentRun:
        """Run to the end from synchronous code (where no event loop is running)."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            pass
        else:
            raise ConfigurationError(
                "run_sync() cannot be used while an event loop is running (as in a notebook): "
                "use `await agent.run(...)` or `agent.start(...)`"
            )
        return asyncio.run(self.run(prompt, history=history, on_event=on_event, output_type=output_type, tools=tools))

    def map(self, inputs: Any, prompt: Any, **options: Any) -> Any:
        """One run per input, bounded and rate-limited, returned at once as a `BatchRun` (`await` it).

        `map(inputs, prompt, *, output_type=None, concurrency=8, rate_limit=None, max_retries=3,
        max_cost=None, engine=None, session=None, resume=None)`: see `nbagent.batch`."""
        from ..batch.run import BatchRun

        return BatchRun(self, inputs, prompt, **options)

    def start_compaction(self, history: Sequence[Message] | AgentRun | None = None, *,
                         previous: AgentRun | None = None) -> AgentRun:
        """Start a run that only compacts the conversation (`history`, else the stored one) by hand: older
        tool results become stubs and older turns one summary. Continue the conversation from that run."""
        stored = self.session_id is not None and history is None
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            raise ConfigurationError("start_compaction() needs a running event loop; use agent.compact_sync()") from None
        run = AgentRun(self, None, history=self.conversation if stored else history, loop=loop, compact_only=True,
                       before=self.conversation_spend if stored else None, previous=previous)
        if stored:
            self._record(run)
        run._start()
        return run

    async def compact(self, history: Sequence[Message] | AgentRun | None = None) -> AgentRun:
        """Compact the conversation by hand and return the finished run (its `messages` are the compacted
        transcript, `compactions[0]` what was replaced); the next run continues from it."""
        return await self.start_compaction(history)

    def compact_sync(self, history: Sequence[Message] | AgentRun | None = None) -> AgentRun:
        """`compact()` from synchronous code."""
        return asyncio.run(self.compact(history))

    def __repr__(self) -> str:
        model = self.model.spec if isinstance(self.model, Model) else None
        names = [t.name if isinstance(t, Tool) else repr(t) for t in self.tools]
        return f"<Agent model={model} mode={self.mode} tools=[{', '.join(names)}]>"


def _stored_spend(runs: list[dict[str, Any]]) -> Spend:
    """What a stored conversation spent, from its runs' `end` lines (a cost left out is unknown)."""
    spend = Spend()
    for fact in runs:
        if fact.get("kind") != "end" or not isinstance(fact.get("usage"), dict):
            continue
        spend.usage = spend.usage + Usage(**{k: int(v or 0) for k, v in fact["usage"].items()
                                             if k in Usage.__dataclass_fields__})
        spend.responses += 1
        if isinstance(fact.get("cost"), (int, float)):
            spend.priced += fact["cost"]
        else:
            spend.unpriced += 1
    return spend


def _chain(first: Callable[[str], Any] | None, second: Callable[[str], Any]) -> Callable[[str], Any]:
    if first is None:
        return second
    return lambda name: first(name) or second(name)
