"""`Agent` (the configuration, and the session's grants) and `AgentRun` (the handle of one run).

    agent = Agent(model="anthropic:claude-sonnet-4-5", tools=[add], instructions="...")
    run = agent.run_sync("What is 2+3?")        # only where no event loop is running
    run = await agent.run("What is 2+3?")       # a finished run
    run = agent.start("What is 2+3?")           # a running run on the current loop; `await run` finishes it
    run = await agent.compact(run)              # compaction by hand: the next run continues from this one

Agent and AgentRun are one module: an agent makes runs and a run reads its agent's settings; they change together.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

from .. import render
from ..budget.compaction import CompactionSettings, compaction_settings
from ..budget.pricing import Spend, format_cost
from ..budget.window import context_window
from ..calls.execution import CallEnvironment
from ..calls.hooks import Hooks
from ..calls.permissions import MODES, Approver, Grants, PermissionPolicy, Rule
from ..context import SANDBOX_POLICIES, Constraints, RunScope, SandboxState
from ..errors import ConfigurationError
from ..events import Event
from ..messages import AssistantMessage, ContentBlock, Message, Usage, UserMessage
from ..providers import Model, load_model
from ..records import CallRecord
from ..tools.definition import Tool, ToolDefinitionError, as_tool
from ..tools.plan import CAPABILITY_MODES
from ..tools.results import DEFAULT_MAX_RESULT_CHARS
from ..tools.structured import make_submit_tool
from .loop import RunSettings, RunState, drive

__all__ = ["Agent", "AgentRun"]

log = logging.getLogger("nbagent.run")

_ACTIVE_RUNS: set[AgentRun] = set()
"""Runs in flight, held strongly: asyncio keeps only weak references to tasks."""


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
        if mode not in MODES:
            raise ConfigurationError(f"unknown mode {mode!r}; choose one of: {', '.join(MODES)}")
        if capability_mode not in CAPABILITY_MODES:
            raise ConfigurationError(
                f"unknown capability_mode {capability_mode!r}; choose one of: {', '.join(CAPABILITY_MODES)}"
            )
        if getattr(sandbox, "name", sandbox) not in SANDBOX_POLICIES:
            raise ConfigurationError(f"unknown sandbox {sandbox!r}; choose one of: {', '.join(SANDBOX_POLICIES)}")
        if not isinstance(max_turns, int) or max_turns < 1:
            raise ConfigurationError(f"max_turns must be a positive integer, not {max_turns!r}")
        if max_cost is not None and not (isinstance(max_cost, (int, float)) and max_cost >= 0):
            raise ConfigurationError(f"max_cost is US dollars (a number >= 0) or None, not {max_cost!r}")
        if context_window is not None and not (isinstance(context_window, int) and context_window > 0):
            raise ConfigurationError(f"context_window is a number of tokens (a positive integer), not {context_window!r}")
        for label, value in (("timeout", timeout), ("session_timeout", session_timeout),
                             ("approval_notice_after", approval_notice_after)):
            if value is not None and not (isinstance(value, (int, float)) and value > 0):
                raise ConfigurationError(f"{label} is a number of seconds (> 0) or None, not {value!r}")
        self.timeout = timeout
        self.session_timeout = session_timeout
        self.session_elapsed = 0.0
        """Seconds this agent's finished runs took together (what `session_timeout` counts)."""
        self.approval_notice_after = approval_notice_after
        if execution_mode not in ("parallel", "sequential"):
            raise ConfigurationError(f"execution_mode is 'parallel' or 'sequential', not {execution_mode!r}")
        self.execution_mode = execution_mode
        self.max_cost = max_cost
        self.context_window = context_window
        try:
            self.compaction = compaction_settings(compaction)
        except ValueError as exc:
            raise ConfigurationError(str(exc)) from None
        self.name = name
        self.model = load_model(model) if isinstance(model, str) else model
        self.tools: list[Any] = [t if _is_source(t) else as_tool(t) for t in tools]
        _check_unique([t for t in self.tools if isinstance(t, Tool)])
        self.instructions = instructions
        self.max_turns = max_turns
        self.hooks = hooks if hooks is not None else Hooks()
        if output_type is not None:
            try:
                make_submit_tool(output_type)  # a bad type or schema is said now, not at the first run
            except ToolDefinitionError as exc:
                raise ConfigurationError(f"output_type: {exc}") from None
        self.output_type = output_type
        # The workspace is fixed when the agent is made (not re-read from the working directory at each run),
        # so code that changes the working directory cannot move the file tools' boundary.
        self.workspace = Path(workspace if workspace is not None else Path.cwd()).resolve()
        self.cwd = Path(cwd) if cwd is not None else self.workspace
        self.capability_mode = capability_mode
        self.allowed_tools = tuple(allowed_tools) if allowed_tools is not None else None
        self.extensions: dict[type, Any] = {type(e): e for e in extensions}
        self.max_result_chars = max_result_chars
        self.sandbox = sandbox
        self.tool_resolver = tool_resolver
        self.mcp_servers = _mcp_toolset(mcp_servers)
        if self.mcp_servers is not None:
            self.tools.append(self.mcp_servers)
            self.tool_resolver = _chain(tool_resolver, self.mcp_servers.resolve)
        self.model_settings = dict(model_settings or {})
        try:
            self.policy = PermissionPolicy(rules=list(rules or []), mode=mode, approver=approver)
        except ValueError as exc:
            raise ConfigurationError(str(exc)) from None
        self.session_id: str | None = None
        """The stored conversation runs continue and are written to (None: not stored)."""
        self.conversation: list[Message] = []
        """The stored conversation's messages so far (what a run without `history` continues)."""
        self.conversation_spend = Spend()
        """What the stored conversation has spent so far (from its runs' records)."""
        if session:
            self.resume(session if isinstance(session, str) else None, new=session is True)

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


def _is_source(obj: Any) -> bool:
    from ..tools.plan import Toolset

    return isinstance(obj, (Tool, Toolset))


def _mcp_toolset(value: Any) -> Any:
    """`mcp_servers=` as a toolset (None when there are none); `nbagent.mcp` is imported only if asked for."""
    if value is None or (isinstance(value, dict) and not value):
        return None
    from ..mcp import MCPServers, load_config_file

    if isinstance(value, MCPServers):
        return value
    if isinstance(value, (str, Path)):
        return MCPServers(load_config_file(value))
    return MCPServers(value)


def _chain(first: Callable[[str], Any] | None, second: Callable[[str], Any]) -> Callable[[str], Any]:
    if first is None:
        return second
    return lambda name: first(name) or second(name)


def _check_unique(tools: list[Tool]) -> None:
    seen: dict[str, Tool] = {}
    for t in tools:
        if t.name in seen and seen[t.name] is not t:
            raise ConfigurationError(f"two tools are named {t.name!r}; give one of them another name")
        seen[t.name] = t


class AgentRun:
    """One run of an agent: its transcript, tool calls, requests and events, live while it runs.

    `status` is running, waiting_for_approval, done, failed or cancelled; `output` the final text (or the
    structured result); `messages` the transcript (valid at every moment); `calls` one `CallRecord` per
    tool call; `requests` the exact bodies sent to the provider; `events` what happened (deltas and
    progress go to subscribers only). `await run` waits for the end; `run.cancel()` stops it.

    The run is a handle: what the run changes lives in a `RunState` that the loop owns (`nbagent.agent.loop`);
    the handle reads it, subscribes listeners to it, and cancels it.
    """

    def __init__(
        self,
        agent: Agent,
        prompt: str | Sequence[ContentBlock] | UserMessage | None,
        *,
        history: Sequence[Message] | AgentRun | None = None,
        loop: asyncio.AbstractEventLoop | None = None,
        compact_only: bool = False,
        before: Spend | None = None,
        previous: AgentRun | None = None,
        output_type: Any = None,
        tools: Iterable[Any] | None = None,
    ) -> None:
        if agent.model is None:
            raise ConfigurationError("this agent has no model: pass Agent(model=...), e.g. 'openai:gpt-4.1' or a ScriptedModel")
        self.agent = agent
        self.model: Model = agent.model
        anchor = None
        if before is not None:
            before = before.copy()
        if isinstance(history, AgentRun):
            previous = history
            history = history.messages
        if previous is not None:
            before = previous.conversation_spend.copy()
            anchor = previous._state.context_anchor
        self.compact_only = compact_only
        message = None
        if prompt is not None:
            message = prompt if isinstance(prompt, UserMessage) else UserMessage(
                prompt if isinstance(prompt, str) else list(prompt))
        self.id = uuid.uuid4().hex[:12]
        """A short id naming this run (in records other tools keep, such as the notebook cells it wrote)."""
        self.prompt = prompt
        self.loop = loop
        self._state = RunState(history or (), message, before=before,
                               context_anchor=anchor)
        self.context_window: int | None = context_window(self.model, agent.context_window)
        """The model's context window in tokens (None: unknown)."""
        self.cancellation = self._state.cancellation
        self.tools: list[Any] = agent.tools if tools is None else [t if _is_source(t) else as_tool(t) for t in tools]
        """The tools and toolsets this run's plan is built from (the agent's, unless the run has its own)."""
        if tools is not None:
            _check_unique([t for t in self.tools if isinstance(t, Tool)])
        self.output_type = output_type if output_type is not None else agent.output_type
        """What the run must submit (None: a text answer)."""
        try:
            self.output_tool = make_submit_tool(self.output_type) if self.output_type is not None else None
        except ToolDefinitionError as exc:
            raise ConfigurationError(f"output_type: {exc}") from None
        self.builtin_tools: tuple[Tool, ...] = (self.output_tool,) if self.output_tool is not None else ()
        workspace = agent.workspace or Path.cwd()
        self.cwd = agent.cwd or workspace
        self.constraints = Constraints(agent.mode, agent.capability_mode, agent.allowed_tools, workspace,
                                       getattr(agent, "sandbox", "workspace-write"))
        self.policy = agent.policy
        self.hooks = agent.hooks
        self.extensions = agent.extensions
        self.max_result_chars = agent.max_result_chars
        self.instructions = self._instructions()
        self.scope = RunScope(self._state.emit)
        """What lives as long as the run (its background processes): closed when the run ends."""
        self._sandbox: SandboxState | None = None
        self._task: asyncio.Task | None = None
        self._deadline: asyncio.TimerHandle | None = None

    def _instructions(self) -> str | None:
        instructions = self.agent.instructions
        if callable(instructions):
            instructions = instructions(self)
        return instructions

    def _settings(self) -> RunSettings:
        agent, state = self.agent, self._state
        env = CallEnvironment(
            policy=self.policy, hooks=self.hooks, emit=state.emit, cancellation=state.cancellation,
            constraints=self.constraints, cwd=self.cwd, extensions=self.extensions,
            max_result_chars=self.max_result_chars, loop=self.loop, run_id=self.id,
            agent_name=agent.name, session_id=agent.session_id, scope=self.scope,
            approval_notice_after=agent.approval_notice_after,
            sequential=agent.execution_mode == "sequential",
        )
        return RunSettings(
            model=self.model, env=env, sources=self.tools, builtins=self.builtin_tools,
            instructions=self.instructions, max_turns=agent.max_turns, capability_mode=agent.capability_mode,
            allowed_tools=agent.allowed_tools, resolver=agent.tool_resolver, model_settings=agent.model_settings,
            structured=self.output_tool is not None, handle=self, window=self.context_window,
            compaction=agent.compaction, max_cost=agent.max_cost, compact_only=self.compact_only,
        )

    @property
    def sandbox(self) -> SandboxState:
        """What this run's shell commands run in: its policy and the machine's sandbox, as data for views
        (the machine is probed once per process, when a run is first asked)."""
        if self._sandbox is None:
            from ..safety.sandbox import sandbox_backend, sandbox_policy

            policy, backend = sandbox_policy(self.constraints.sandbox), sandbox_backend()
            self._sandbox = SandboxState(str(policy), backend.name, backend.available and policy.name != "danger-full-access",
                                         backend.describe(policy))
        return self._sandbox

    # -- what the run changed (read from its state) ---------------------------------------------------
    @property
    def messages(self) -> list[Message]:
        """The transcript: valid for every provider at every moment."""
        return self._state.messages

    @property
    def calls(self) -> list[CallRecord]:
        """One record per tool call, in order."""
        return self._state.calls

    @property
    def requests(self) -> list[Any]:
        """The exact bodies sent to the provider, in order."""
        return self._state.requests

    @property
    def events(self) -> list[Event]:
        """What happened (text deltas, tool-call deltas and progress go to subscribers only)."""
        return self._state.events

    @property
    def status(self) -> str:
        """running, waiting_for_approval, done, failed or cancelled."""
        return self._state.status

    @property
    def output(self) -> Any:
        """The final text, or the structured result of a run with `output_type`."""
        return self._state.output

    @property
    def error(self) -> BaseException | None:
        """What made the run fail."""
        return self._state.error

    @property
    def stop_reason(self) -> str | None:
        """Why the run stopped early (a hook asked, every result asked to terminate)."""
        return self._state.stop_reason

    @property
    def usage(self) -> Usage:
        """Tokens used, summed over the run's responses (input, output, cached read/write, reasoning)."""
        return self._state.usage

    @property
    def cost(self) -> float | None:
        """What the run's requests cost in US dollars (None: the model's price is unknown)."""
        return self._state.spend.cost

    @property
    def spend(self) -> Spend:
        """The run's tokens and cost together."""
        return self._state.spend

    @property
    def conversation_spend(self) -> Spend:
        """Tokens and cost of the whole conversation: the runs it continues, and this one."""
        return self._state.conversation

    @property
    def conversation_usage(self) -> Usage:
        return self._state.conversation.usage

    @property
    def conversation_cost(self) -> float | None:
        return self._state.conversation.cost

    @property
    def context_tokens(self) -> int:
        """How many tokens the conversation takes: the provider's count of the last request plus an estimate
        of what was added since (before the first response: an estimate)."""
        state = self._state
        if state.context_tokens == 0 and state.messages:
            from ..budget.window import measure

            return measure(state.messages, state.context_anchor)[0]
        return state.context_tokens

    @property
    def context_measured(self) -> bool:
        """Whether `context_tokens` rests on the provider's count (else: an estimate)."""
        return self._state.context_measured

    @property
    def context_fraction(self) -> float | None:
        """How full the context window is (0..1; None when the window is unknown)."""
        return self.context_tokens / self.context_window if self.context_window else None

    @property
    def compactions(self) -> list[Any]:
        """The `Compaction`s made in this run (what each replaced, whole, and by what)."""
        return self._state.compactions

    @property
    def turns(self) -> int:
        """Model requests made so far."""
        return self._state.turns

    @property
    def loaded_tools(self) -> set[str]:
        """Deferred tools loaded in this run."""
        return self._state.loaded_tools

    @property
    def processes(self) -> list[Any]:
        """The background processes the run's shell started (`BackgroundProcess`: command, status, output),
        in order; every one still running is stopped when the run ends."""
        from ..toolbox._background import ProcessRegistry

        registry = self.scope.find(ProcessRegistry)
        return list(registry.processes.values()) if registry is not None else []

    @property
    def started_at(self) -> float:
        return self._state.started_at

    @property
    def finished_at(self) -> float | None:
        return self._state.finished_at

    # -- lifecycle ---------------------------------------------------------------------------------------
    def _start(self) -> None:
        assert self.loop is not None
        self._task = self.loop.create_task(drive(self._settings(), self._state), name=f"nbagent-run-{id(self):x}")
        _ACTIVE_RUNS.add(self)
        self._task.add_done_callback(self._ended)
        limit, why = self._time_limit()
        if limit is not None:
            self._deadline = self.loop.call_later(limit, self._time_out, why)

    def _time_limit(self) -> tuple[float | None, str]:
        """The seconds this run may take, and what sets them (the run's timeout or what is left of the
        session's)."""
        agent = self.agent
        limit, why = agent.timeout, f"the run took longer than timeout={agent.timeout:g} s" if agent.timeout else ""
        if agent.session_timeout is not None:
            left = max(0.0, agent.session_timeout - agent.session_elapsed)
            if limit is None or left < limit:
                limit, why = left, f"the agent's runs reached session_timeout={agent.session_timeout:g} s"
        return limit, why

    def _time_out(self, why: str) -> None:
        if self.done:
            return
        self._state.stop_reason = f"timeout: {why}"
        self.cancel(f"timeout: {why}")

    def _ended(self, _task: Any) -> None:
        _ACTIVE_RUNS.discard(self)
        if self._deadline is not None:
            self._deadline.cancel()
        self.agent.session_elapsed += self.elapsed

    def steer(self, text: str | Sequence[ContentBlock] | UserMessage) -> bool:
        """Send a message into the running run: it joins the transcript at the next turn boundary (once the
        calls in flight have their results; or right after the model's answer, which then does not end the
        run), as a user message, and the model reads it in its next request. Safe from any thread. Returns
        False when the run is over (start another run instead)."""
        if self.done or self._task is None:
            return False
        if isinstance(text, str) and not text.strip():
            raise ValueError("a steering message needs some text")
        message = text if isinstance(text, UserMessage) else UserMessage(text if isinstance(text, str) else list(text))
        self._state.steering.append(message)
        return True

    @property
    def steering(self) -> list[UserMessage]:
        """Messages sent with `steer()` that have not joined the transcript yet."""
        return list(self._state.steering)

    @property
    def done(self) -> bool:
        return self._state.outcome is not None

    @property
    def elapsed(self) -> float:
        """Seconds since the run started (its whole duration once it is over)."""
        state = self._state
        return state.elapsed if state.elapsed is not None else time.monotonic() - state.t0

    @property
    def new_messages(self) -> list[Message]:
        """The messages this run added (the prompt onwards)."""
        return self.messages[self._state.history_length :]

    @property
    def timeline(self) -> list[Any]:
        """What this run showed, in order (its responses, messages it added, compactions), unchanged by
        later compactions of the transcript: views and the static rendering are drawn from it."""
        return list(self._state.timeline)

    @property
    def text(self) -> str:
        """The final text of the model (also for runs with a structured output)."""
        for m in reversed(self.messages):
            if isinstance(m, AssistantMessage) and m.text:
                return m.text
        return ""

    def cancel(self, reason: str = "cancelled by the user") -> bool:
        """Stop the run: every call in flight gets a "cancelled" result. Returns False if it was over."""
        if self.done or self._task is None:
            return False
        self.cancellation.cancel(reason)
        if self.loop is not None and not _on_loop(self.loop):
            self.loop.call_soon_threadsafe(self._task.cancel)
        else:
            self._task.cancel()
        return True

    async def wait(self) -> AgentRun:
        """Wait for the end (cancelling the waiting cell cancels the run); raise its error if it failed."""
        if self._task is None:
            raise ConfigurationError("this run was never started")
        await self._task
        current = asyncio.current_task()
        if current is not None and current.cancelling():
            # This waiter was cancelled (the interrupt button on a cell awaiting the run): the run was
            # cancelled with it, and the waiter must end cancelled too.
            raise asyncio.CancelledError()
        if self.status == "failed" and self.error is not None:
            raise self.error
        return self

    def __await__(self):
        return self.wait().__await__()

    # -- events ------------------------------------------------------------------------------------------
    def subscribe(self, listener: Callable[[Event], Any]) -> Callable[[], None]:
        """Call `listener(event)` for every event from now on; returns a function that unsubscribes."""
        listeners = self._state.listeners
        listeners.append(listener)

        def unsubscribe() -> None:
            if listener in listeners:
                listeners.remove(listener)

        return unsubscribe

    # -- display -------------------------------------------------------------------------------------------
    def __repr__(self) -> str:
        out = self.output if not isinstance(self.output, str) else (self.output[:60] + "..." if len(self.output) > 60 else self.output)
        err = f" error={type(self.error).__name__}: {self.error}" if self.error else ""
        return (f"<AgentRun {self.status} turns={self.turns} calls={len(self.calls)} "
                f"output={out!r}{err}>")

    def __str__(self) -> str:
        """The run as plain text: header, prompt, one line per call, the answer (what `print(run)` shows)."""
        return render.run_text(self)

    def _repr_pretty_(self, printer, cycle: bool) -> None:  # IPython's text form: the same as str()
        printer.text(repr(self) if cycle else str(self))

    def _repr_html_(self) -> str:
        return render.run_html(self)

    def to_wire(self, model: Model | str | None = None) -> Any:
        """The transcript in a provider's message format (this run's model's, by default)."""
        target = load_model(model) if isinstance(model, str) else (model or self.model)
        return target.to_wire(self.messages)


def _on_loop(loop: asyncio.AbstractEventLoop) -> bool:
    try:
        return asyncio.get_running_loop() is loop
    except RuntimeError:
        return False

