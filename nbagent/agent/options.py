"""An agent's settings, resolved: `AgentOptions` holds every part as the object the runs use (a `Model`, tools,
a `PermissionPolicy`, `CompactionSettings`, an `MCPServers` toolset...), checked once when it is made.

    options = AgentOptions.resolve(model="openai:gpt-4.1", tools=[add], mode="acceptEdits")  # the conveniences
    agent = Agent.from_options(options)                                                      # nothing resolved again

`Agent(...)` is `Agent.from_options(AgentOptions.resolve(...))`: the string conveniences (a model spec, plain
functions, rule strings, a compaction threshold, an MCP config path) are turned into parts in one place,
here. A caller that already holds the parts (the notebook's `%agent` resolves its model, tools and MCP servers
against the kernel) builds `AgentOptions(...)` itself: its scalar settings are still checked, nothing is
looked up twice.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..budget.compaction import CompactionSettings, compaction_settings
from ..calls.hooks import Hooks
from ..calls.permissions import MODES, Approver, PermissionPolicy, Rule
from ..context import SANDBOX_POLICIES
from ..errors import ConfigurationError
from ..providers import Model, load_model
from ..tools.definition import Tool, ToolDefinitionError, as_tool
from ..tools.plan import CAPABILITY_MODES
from ..tools.results import DEFAULT_MAX_RESULT_CHARS
from ..tools.structured import make_submit_tool

__all__ = ["AgentOptions", "as_sources", "check_unique", "mcp_toolset"]


@dataclass(slots=True)
class AgentOptions:
    """Everything an `Agent` is made of, each part resolved (see `Agent` for what each one means).

    Made with parts, its scalar settings are checked (`ConfigurationError` says what is wrong); made with
    `resolve(...)`, the conveniences `Agent(...)` takes are turned into parts first."""

    model: Model | None = None
    tools: list[Any] = field(default_factory=list)
    """`Tool`s and `Toolset`s (the MCP servers are not among them: `mcp_servers`)."""
    instructions: Any = None
    policy: PermissionPolicy = field(default_factory=PermissionPolicy)
    max_turns: int = 20
    hooks: Hooks = field(default_factory=Hooks)
    output_type: Any = None
    workspace: Path = field(default_factory=lambda: Path.cwd().resolve())
    cwd: Path | None = None
    """None: the workspace."""
    capability_mode: str = "all"
    allowed_tools: tuple[str, ...] | None = None
    extensions: dict[type, Any] = field(default_factory=dict)
    max_result_chars: int | None = DEFAULT_MAX_RESULT_CHARS
    tool_resolver: Callable[[str], Tool | None] | None = None
    model_settings: dict[str, Any] = field(default_factory=dict)
    name: str = "agent"
    sandbox: Any = "workspace-write"
    session: bool | str | None = None
    max_cost: float | None = None
    context_window: int | None = None
    compaction: CompactionSettings | None = field(default_factory=CompactionSettings)
    mcp_servers: Any = None
    """An `nbagent.mcp.MCPServers`, or None."""
    execution_mode: str = "parallel"
    timeout: float | None = None
    session_timeout: float | None = None
    approval_notice_after: float | None = 5.0

    def __post_init__(self) -> None:
        if self.capability_mode not in CAPABILITY_MODES:
            raise ConfigurationError(
                f"unknown capability_mode {self.capability_mode!r}; choose one of: {', '.join(CAPABILITY_MODES)}"
            )
        if getattr(self.sandbox, "name", self.sandbox) not in SANDBOX_POLICIES:
            raise ConfigurationError(f"unknown sandbox {self.sandbox!r}; choose one of: {', '.join(SANDBOX_POLICIES)}")
        if not isinstance(self.max_turns, int) or self.max_turns < 1:
            raise ConfigurationError(f"max_turns must be a positive integer, not {self.max_turns!r}")
        cost, window = self.max_cost, self.context_window
        if cost is not None and not (isinstance(cost, (int, float)) and cost >= 0):
            raise ConfigurationError(f"max_cost is US dollars (a number >= 0) or None, not {cost!r}")
        if window is not None and not (isinstance(window, int) and window > 0):
            raise ConfigurationError(f"context_window is a number of tokens (a positive integer), not {window!r}")
        for label in ("timeout", "session_timeout", "approval_notice_after"):
            value = getattr(self, label)
            if value is not None and not (isinstance(value, (int, float)) and value > 0):
                raise ConfigurationError(f"{label} is a number of seconds (> 0) or None, not {value!r}")
        if self.execution_mode not in ("parallel", "sequential"):
            raise ConfigurationError(f"execution_mode is 'parallel' or 'sequential', not {self.execution_mode!r}")
        check_unique(self.tools)
        if self.output_type is not None:
            try:
                make_submit_tool(self.output_type)  # a bad type or schema is said now, not at the first run
            except ToolDefinitionError as exc:
                raise ConfigurationError(f"output_type: {exc}") from None

    @classmethod
    def resolve(
        cls,
        model: Model | str | None = None,
        tools: Iterable[Any] = (),
        instructions: Any = None,
        *,
        mode: str = "default",
        rules: Sequence[str | Rule] | None = None,
        approver: Approver | str | None = None,
        workspace: str | Path | None = None,
        cwd: str | Path | None = None,
        allowed_tools: Sequence[str] | None = None,
        extensions: Iterable[Any] = (),
        model_settings: dict[str, Any] | None = None,
        compaction: bool | float | CompactionSettings = True,
        mcp_servers: Any = None,
        hooks: Hooks | None = None,
        **settings: Any,
    ) -> AgentOptions:
        """The options `Agent(...)` takes (the same names), their conveniences turned into parts: a model
        spec loaded, plain functions made tools, rule strings parsed, the compaction setting and the MCP
        configuration read. The other settings pass as they are (and are checked)."""
        if mode not in MODES:
            raise ConfigurationError(f"unknown mode {mode!r}; choose one of: {', '.join(MODES)}")
        try:
            policy = PermissionPolicy(rules=list(rules or []), mode=mode, approver=approver)
            compacting = compaction_settings(compaction)
        except ValueError as exc:
            raise ConfigurationError(str(exc)) from None
        # The workspace is fixed when the agent is made (not re-read from the working directory at each run),
        # so code that changes the working directory cannot move the file tools' boundary.
        root = Path(workspace if workspace is not None else Path.cwd()).resolve()
        return cls(
            model=load_model(model) if isinstance(model, str) else model,
            tools=as_sources(tools), instructions=instructions, policy=policy,
            hooks=hooks if hooks is not None else Hooks(), workspace=root,
            cwd=Path(cwd) if cwd is not None else None,
            allowed_tools=tuple(allowed_tools) if allowed_tools is not None else None,
            extensions={type(e): e for e in extensions}, model_settings=dict(model_settings or {}),
            compaction=compacting, mcp_servers=mcp_toolset(mcp_servers), **settings,
        )


def as_sources(tools: Iterable[Any]) -> list[Any]:
    """Tools and toolsets as given, plain functions made tools."""
    return [t if _is_source(t) else as_tool(t) for t in tools]


def mcp_toolset(value: Any) -> Any:
    """`mcp_servers=` as a toolset (None when there are none); `nbagent.mcp` is imported only if asked for."""
    if value is None or (isinstance(value, dict) and not value):
        return None
    from ..mcp import MCPServers, load_config_file

    if isinstance(value, MCPServers):
        return value
    if isinstance(value, (str, Path)):
        return MCPServers(load_config_file(value))
    return MCPServers(value)


def _is_source(obj: Any) -> bool:
    from ..tools.plan import Toolset

    return isinstance(obj, (Tool, Toolset))


def check_unique(sources: list[Any]) -> None:
    """Refuse two different tools of one name."""
    seen: dict[str, Tool] = {}
    for t in (s for s in sources if isinstance(s, Tool)):
        if t.name in seen and seen[t.name] is not t:
            raise ConfigurationError(f"two tools are named {t.name!r}; give one of them another name")
        seen[t.name] = t
