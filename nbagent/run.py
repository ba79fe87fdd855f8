"""`Agent` (the configuration, and the session's grants) and `AgentRun` (the handle of one run).

    agent = Agent(model="anthropic:claude-sonnet-4-5", tools=[add], instructions="...")
    run = agent.run_sync("What is 2+3?")        # only where no event loop is running
    run = await agent.run("What is 2+3?")       # a finished run
    run = agent.start("What is 2+3?")           # a running run on the current loop; `await run` finishes it
"""

from __future__ import annotations

import asyncio
import logging
import time
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

from .context import SANDBOX_POLICIES, CancellationToken, Constraints
from .errors import ConfigurationError
from .events import Event, ReasoningDelta, TextDelta, ToolCallDelta, ToolCallProgress
from .hooks import Hooks
from .messages import AssistantMessage, Block, Message, Usage, UserMessage
from .output import make_submit_tool
from .permissions import MODES, Approver, Grants, PermissionPolicy, Rule
from .plan import CAPABILITY_MODES
from .providers import Model, load_model
from .records import CallRecord
from .results import DEFAULT_MAX_RESULT_CHARS
from .tools import Tool, as_tool

__all__ = ["Agent", "AgentRun"]

log = logging.getLogger("nbagent.run")

_NOT_STORED = (TextDelta, ReasoningDelta, ToolCallDelta, ToolCallProgress)
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
        output_type: a type the run must produce by calling `submit_result` (`run.output` is the value).
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
        mcp_servers: MCP servers whose tools the runs get (`SERVER__TOOL`): the `mcpServers` mapping other MCP
            clients use (`{"time": {"command": "mcp-server-time"}, "web": {"url": "..."}}`), a path to such
            a JSON file, or an `nbagent.mcp.MCPServers`. See `nbagent.mcp`.
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
        mcp_servers: Any = None,
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
        self.name = name
        self.model = load_model(model) if isinstance(model, str) else model
        self.tools: list[Any] = [t if _is_source(t) else as_tool(t) for t in tools]
        _check_unique([t for t in self.tools if isinstance(t, Tool)])
        self.instructions = instructions
        self.max_turns = max_turns
        self.hooks = hooks if hooks is not None else Hooks()
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
        if session:
            self.resume(session if isinstance(session, str) else None, new=session is True)

    # -- stored conversations ----------------------------------------------------------------------------
    def resume(self, session_id: str | None = None, *, new: bool = False) -> Agent:
        """Continue a stored conversation (None: the workspace's latest): the next runs start from its
        messages and are written to it. Calls that were in flight when it was last written get an
        "interrupted" result, so the transcript is valid. `new=True` starts a new stored conversation."""
        from .sessions import SessionError, SessionWriter, list_sessions, load_session

        if new:
            writer = SessionWriter(self.workspace, model=getattr(self.model, "spec", None))
            self.session_id, self.conversation = writer.id, []
            return self
        if session_id is None:
            found = list_sessions(self.workspace)
            if not found:
                raise ConfigurationError(f"no stored conversation in {self.workspace} to resume")
            session_id = found[-1].id
        try:
            stored = load_session(self.workspace, session_id)
        except SessionError as exc:
            raise ConfigurationError(str(exc)) from None
        self.session_id, self.conversation = stored.info.id, stored.messages
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
        prompt: str | Sequence[Block] | UserMessage | None,
        *,
        history: Sequence[Message] | AgentRun | None = None,
        on_event: Callable[[Event], Any] | None = None,
    ) -> AgentRun:
        """Start a run as a task on the running event loop and return it at once (`await run` finishes it)."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            raise ConfigurationError(
                "agent.start() needs a running event loop (in a notebook there is one); in a script use "
                "agent.run_sync(...) or asyncio.run(agent.run(...))"
            ) from None
        stored = self.session_id is not None and history is None
        run = AgentRun(self, prompt, history=self.conversation if stored else history, loop=loop)
        if stored:
            self._record(run)
        if on_event is not None:
            run.subscribe(on_event)
        run._start()
        return run

    def _record(self, run: AgentRun) -> None:
        from .sessions import SessionRecorder, SessionWriter, rolled_back

        writer = SessionWriter(self.workspace, self.session_id, resume=True)
        SessionRecorder(writer, run).attach()

        def keep(event: Any) -> None:
            if getattr(event, "kind", "") == "run_finished":
                self.conversation = rolled_back(run)

        run.subscribe(keep)

    async def run(
        self,
        prompt: str | Sequence[Block] | UserMessage | None,
        *,
        history: Sequence[Message] | AgentRun | None = None,
        on_event: Callable[[Event], Any] | None = None,
    ) -> AgentRun:
        """Run to the end and return the finished run (raises the run's error if it failed)."""
        run = self.start(prompt, history=history, on_event=on_event)
        return await run

    def run_sync(
        self,
        prompt: str | Sequence[Block] | UserMessage | None,
        *,
        history: Sequence[Message] | AgentRun | None = None,
        on_event: Callable[[Event], Any] | None = None,
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
        return asyncio.run(self.run(prompt, history=history, on_event=on_event))

    def __repr__(self) -> str:
        model = self.model.spec if isinstance(self.model, Model) else None
        names = [t.name if isinstance(t, Tool) else repr(t) for t in self.tools]
        return f"<Agent model={model} mode={self.mode} tools=[{', '.join(names)}]>"


def _is_source(obj: Any) -> bool:
    from .plan import Toolset

    return isinstance(obj, (Tool, Toolset))


def _mcp_toolset(value: Any) -> Any:
    """`mcp_servers=` as a toolset (None when there are none); `nbagent.mcp` is imported only if asked for."""
    if value is None or (isinstance(value, dict) and not value):
        return None
    from .mcp import MCPServers, load_config_file

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
    """

    def __init__(
        self,
        agent: Agent,
        prompt: str | Sequence[Block] | UserMessage | None,
        *,
        history: Sequence[Message] | AgentRun | None = None,
        loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        if agent.model is None:
            raise ConfigurationError("this agent has no model: pass Agent(model=...), e.g. 'openai:gpt-4.1' or a ScriptedModel")
        self.agent = agent
        self.model: Model = agent.model
        if isinstance(history, AgentRun):
            history = history.messages
        self.messages: list[Message] = list(history or [])
        self._history_length = len(self.messages)
        if prompt is not None:
            self.messages.append(prompt if isinstance(prompt, UserMessage) else UserMessage(
                prompt if isinstance(prompt, str) else list(prompt)))
        self.prompt = prompt
        self.calls: list[CallRecord] = []
        self.requests: list[Any] = []
        self.events: list[Event] = []
        self.status = "running"
        self.output: Any = None
        self.error: BaseException | None = None
        self.stop_reason: str | None = None
        self.usage = Usage()
        self.turns = 0
        self.started_at = time.time()
        self._t0 = time.monotonic()
        self.finished_at: float | None = None
        self._elapsed: float | None = None
        self.loop = loop
        self.cancellation = CancellationToken()
        self.loaded_tools: set[str] = set()
        self.output_tool = make_submit_tool(agent.output_type) if agent.output_type is not None else None
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
        self._listeners: list[Callable[[Event], Any]] = []
        self._task: asyncio.Task | None = None
        self._waiting = 0
        self._in_flight: tuple[AssistantMessage, list[CallRecord]] | None = None
        self._partial_text: list[str] = []
        self._call_ids: set[str] = {
            c.id for m in self.messages if isinstance(m, AssistantMessage) for c in m.tool_calls
        }
        self._done = asyncio.Event() if loop is not None else None

    def _instructions(self) -> str | None:
        instructions = self.agent.instructions
        if callable(instructions):
            instructions = instructions(self)
        return instructions

    # -- lifecycle ---------------------------------------------------------------------------------------
    def _start(self) -> None:
        from .loop import drive

        assert self.loop is not None
        self._task = self.loop.create_task(drive(self), name=f"nbagent-run-{id(self):x}")
        _ACTIVE_RUNS.add(self)
        self._task.add_done_callback(lambda _: _ACTIVE_RUNS.discard(self))

    def _finish(self, status: str, error: BaseException | None) -> None:
        self.status = status
        self.error = error
        self.finished_at = time.time()
        self._elapsed = time.monotonic() - self._t0
        if self._done is not None:
            self._done.set()

    def _refresh_status(self) -> None:
        if self.status in ("running", "waiting_for_approval"):
            self.status = "waiting_for_approval" if self._waiting > 0 else "running"

    @property
    def done(self) -> bool:
        return self.status in ("done", "failed", "cancelled")

    @property
    def elapsed(self) -> float:
        """Seconds since the run started (its whole duration once it is over)."""
        return self._elapsed if self._elapsed is not None else time.monotonic() - self._t0

    @property
    def new_messages(self) -> list[Message]:
        """The messages this run added (the prompt onwards)."""
        return self.messages[self._history_length :]

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
        self._listeners.append(listener)

        def unsubscribe() -> None:
            if listener in self._listeners:
                self._listeners.remove(listener)

        return unsubscribe

    def _emit(self, event: Event) -> None:
        if not isinstance(event, _NOT_STORED):
            self.events.append(event)
        for listener in self._listeners:
            try:
                listener(event)
            except Exception:
                log.exception("an event listener failed (ignored)")

    # -- display -------------------------------------------------------------------------------------------
    def __repr__(self) -> str:
        out = self.output if not isinstance(self.output, str) else (self.output[:60] + "..." if len(self.output) > 60 else self.output)
        err = f" error={type(self.error).__name__}: {self.error}" if self.error else ""
        return (f"<AgentRun {self.status} turns={self.turns} calls={len(self.calls)} "
                f"output={out!r}{err}>")

    def __str__(self) -> str:
        """The run as plain text: header, prompt, one line per call, the answer (what `print(run)` shows)."""
        from .render import run_text

        return run_text(self)

    def _repr_pretty_(self, printer, cycle: bool) -> None:  # IPython's text form: the same as str()
        printer.text(repr(self) if cycle else str(self))

    def _repr_html_(self) -> str:
        from .render import run_html

        return run_html(self)

    def to_wire(self, model: Model | str | None = None) -> Any:
        """The transcript in a provider's message format (this run's model's, by default)."""
        target = load_model(model) if isinstance(model, str) else (model or self.model)
        return target.to_wire(self.messages)


def _on_loop(loop: asyncio.AbstractEventLoop) -> bool:
    try:
        return asyncio.get_running_loop() is loop
    except RuntimeError:
        return False

