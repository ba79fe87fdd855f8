"""`AgentRun`: the handle of one run, made by `Agent.start` (`nbagent.agent.run`). It starts the turn loop
(`nbagent.agent.loop`) as a task with the run's settings, holds its time limits, and takes a person's
steering, cancelling and waiting; what the run did is read through its base, `RunReadout`.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from ..budget.pricing import Spend
from ..budget.window import context_window
from ..calls.execution import CallEnvironment
from ..context import Constraints, RunScope, SandboxState
from ..errors import ConfigurationError
from ..events import Event
from ..messages import ContentBlock, Message, UserMessage
from ..providers import Model
from ..tools.definition import Tool, ToolDefinitionError
from ..tools.structured import make_submit_tool
from .loop import RunSettings, RunState, drive
from .options import as_sources, check_unique
from .readout import RunReadout

Agent = Any
"""The agent that made the run (`nbagent.agent.run.Agent`): the run reads its settings, and never imports it
(the agent imports the run to make one)."""

__all__ = ["AgentRun"]

_ACTIVE_RUNS: set[AgentRun] = set()
"""Runs in flight, held strongly: asyncio keeps only weak references to tasks."""


class AgentRun(RunReadout):
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
        self.tools: list[Any] = agent.tools if tools is None else as_sources(tools)
        """The tools and toolsets this run's plan is built from (the agent's, unless the run has its own)."""
        if tools is not None:
            check_unique(self.tools)
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


def _on_loop(loop: asyncio.AbstractEventLoop) -> bool:
    try:
        return asyncio.get_running_loop() is loop
    except RuntimeError:
        return False

