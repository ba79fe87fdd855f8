"""The per-turn tool plan: which tools the model is offered this turn, in a stable order.

Every turn builds its tool set afresh from its sources (the agent's tools, dynamic toolsets, built-ins),
filtered by the capability mode and the allow-list, ordered by `sort_key` or name so that the bytes sent
are identical turn after turn (prompt caches depend on it). There is no global registry.

Deferred tools (`defer_loading=True`) stay out of the request until selected: the plan then offers a
`search_tools` tool that finds and loads them, and a call to a deferred tool that was never loaded is
resolved on the spot.
"""

from __future__ import annotations

import fnmatch
import logging
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

from .definition import Tool, as_tool

__all__ = ["CAPABILITY_MODES", "Toolset", "ToolPlan", "build_plan", "namespace_notes", "prepare_sources",
           "with_namespaces"]

log = logging.getLogger("nbagent.plan")

CAPABILITY_MODES: dict[str, frozenset[str]] = {
    "read-only": frozenset({"read"}),
    "read-write": frozenset({"read", "write"}),
    "execute": frozenset({"read", "write", "execute"}),
    "all": frozenset({"read", "write", "execute", "other"}),
}
SEARCH_TOOL_NAME = "search_tools"


class Toolset:
    """A source of tools decided each turn: subclass and implement `tools(run)`, or wrap a function.

    `Toolset(lambda run: [...])` is called at the start of every turn with the running `AgentRun`.
    """

    def __init__(self, fn: Callable[[Any], Iterable[Any]] | None = None, name: str = "") -> None:
        self._fn = fn
        self.name = name or getattr(fn, "__name__", "toolset")

    async def prepare(self, run: Any) -> None:
        """Awaited before each turn is planned, on the run's loop: do async set-up here (start servers,
        list their tools) so that `tools(run)` can stay quick and synchronous. A failure is logged, not raised."""

    def tools(self, run: Any) -> Iterable[Any]:
        if self._fn is None:
            raise NotImplementedError("subclass Toolset and implement tools(run), or pass a function")
        return self._fn(run)

    def __repr__(self) -> str:
        return f"<Toolset {self.name}>"


@dataclass(slots=True)
class ToolPlan:
    """The tools of one turn."""

    tools: tuple[Tool, ...]
    """What the model is offered, in the order sent."""
    by_name: dict[str, Tool]
    """The offered tools by name."""
    catalog: dict[str, Tool] = field(default_factory=dict)
    """Every tool that passed the filters, deferred ones included."""
    loaded: set[str] = field(default_factory=set)
    """Names of deferred tools loaded in this run (shared with the run: loading persists across turns)."""
    resolver: Callable[[str], Tool | None] | None = None
    """The agent's own fallback for names that are nowhere else."""
    resolved: dict[str, Tool] = field(default_factory=dict)
    """Tools the resolver found in this run (shared with the run: they are offered in its later requests)."""
    capabilities: frozenset[str] = CAPABILITY_MODES["all"]
    """What the capability mode keeps (a resolved tool passes the same filters as every other)."""
    allowed_tools: tuple[str, ...] | None = None
    refused: dict[str, str] = field(default_factory=dict)
    """Names the resolver found a tool for that the session does not allow, and why."""

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(t.name for t in self.tools)

    def resolve(self, name: str) -> Tool | None:
        """Find the tool a call names: offered, else a deferred tool (loaded now), else the resolver."""
        tool = self.by_name.get(name)
        if tool is not None:
            return tool
        tool = self.catalog.get(name)
        if tool is not None:
            self.loaded.add(name)
            return tool
        if self.resolver is not None:
            try:
                found = self.resolver(name)
            except Exception:
                log.exception("tool_resolver failed for %r (treated as not found)", name)
                found = None
            if found is not None:
                found = as_tool(found)
                why = _refusal(found, self.capabilities, self.allowed_tools)
                if why is not None:
                    self.refused[name] = why
                    return None
                self.resolved[found.name] = found
                return found
        return None

    def available(self) -> list[str]:
        names = list(self.by_name)
        names.extend(n for n in self.catalog if n not in self.by_name)
        return names


async def prepare_sources(sources: Iterable[Any], run: Any = None) -> None:
    """Await `prepare(run)` of every `Toolset` among the sources (a failing one is logged and skipped)."""
    for source in sources:
        if isinstance(source, Toolset) and type(source).prepare is not Toolset.prepare:
            try:
                await source.prepare(run)
            except Exception:
                log.exception("preparing the toolset %r failed (its tools may be missing this turn)", source)


def _refusal(t: Tool, capabilities: frozenset[str], allowed_tools: tuple[str, ...] | None) -> str | None:
    """Why the session's filters leave a tool out (None: they keep it)."""
    if t.capability not in capabilities:
        return f"this session's capability mode leaves out {t.capability} tools"
    if not _allowed(t.name, allowed_tools):
        return "it is not among this session's allowed_tools"
    return None


def _allowed(name: str, patterns: tuple[str, ...] | None) -> bool:
    if patterns is None:
        return True
    return any(name == p or fnmatch.fnmatchcase(name, p) for p in patterns)


def build_plan(
    sources: Iterable[Any],
    *,
    run: Any = None,
    capability_mode: str = "all",
    allowed_tools: tuple[str, ...] | None = None,
    loaded: set[str] | None = None,
    builtins: Iterable[Tool] = (),
    resolver: Callable[[str], Tool | None] | None = None,
    resolved: dict[str, Tool] | None = None,
) -> ToolPlan:
    """Build this turn's plan from the sources (tools, functions, `Toolset`s) and the built-ins."""
    capabilities = CAPABILITY_MODES[capability_mode]
    loaded = loaded if loaded is not None else set()
    catalog: dict[str, Tool] = {}

    def add(t: Tool) -> None:
        if t.capability not in capabilities or not _allowed(t.name, allowed_tools):
            return
        other = catalog.get(t.name)
        if other is not None and other is not t:
            raise ValueError(f"two tools are named {t.name!r}: {other!r} and {t!r}; give one another name")
        catalog[t.name] = t

    for source in sources:
        if isinstance(source, Tool):
            add(source)
        elif isinstance(source, Toolset):
            for item in source.tools(run) or ():
                add(as_tool(item))
        else:
            add(as_tool(source))
    resolved = resolved if resolved is not None else {}
    for t in list(resolved.values()):  # found by the resolver earlier in the run: offered from then on
        if t.name not in catalog:
            add(t)
    for t in builtins:
        catalog[t.name] = t  # built-ins are never filtered out (submit_result must stay callable)

    offered = [t for t in catalog.values() if not t.defer_loading or t.name in loaded or t.name in resolved]
    hidden = [t for t in catalog.values() if t.defer_loading and t.name not in loaded and t.name not in resolved]
    if hidden and SEARCH_TOOL_NAME not in catalog:
        search = make_search_tool(catalog, loaded)
        catalog[search.name] = search
        offered.append(search)
    offered.sort(key=lambda t: t.sort_key or t.name)
    return ToolPlan(tuple(offered), {t.name: t for t in offered}, catalog, loaded, resolver, resolved,
                    capabilities, allowed_tools)


def namespace_notes(tools: Iterable[Tool]) -> str | None:
    """What the model reads about the tool groups it is offered: one line per namespace that has a
    description, in name order (the same bytes turn after turn while the offered tools stay the same)."""
    about: dict[str, str] = {}
    for t in tools:
        if t.namespace and t.namespace_description and t.namespace not in about:
            about[t.namespace] = " ".join(t.namespace_description.split())
    if not about:
        return None
    lines = [f"- `{ns}__*`: {about[ns]}" for ns in sorted(about)]
    return "Tool groups (tools are named `group__tool`):\n" + "\n".join(lines)


def with_namespaces(instructions: str | None, tools: Iterable[Tool]) -> str | None:
    """The instructions a request carries: the agent's, then the notes on the offered tools' namespaces."""
    notes = namespace_notes(tools)
    if notes is None:
        return instructions
    return f"{instructions}\n\n{notes}" if instructions else notes


_WORD_RE = re.compile(r"[a-z0-9]+")


def _words(text: str) -> set[str]:
    return set(_WORD_RE.findall(text.lower().replace("__", " ").replace("_", " ")))


def make_search_tool(catalog: dict[str, Tool], loaded: set[str]) -> Tool:
    """The built-in `search_tools`: finds deferred tools by keyword and loads them for the next turns."""

    def search_tools(query: str, limit: int = 5) -> str:
        """Find more tools by what they do, and make them available. Use `select:name1,name2` to load
        tools by exact name. Loaded tools can be called from the next step on.

        Args:
            query: keywords describing what you need, or `select:` followed by tool names.
            limit: how many tools to load at most.
        """
        deferred = {n: t for n, t in catalog.items() if t.defer_loading}
        if query.strip().startswith("select:"):
            wanted = [w.strip() for w in query.split(":", 1)[1].split(",") if w.strip()]
            found = [deferred[w] for w in wanted if w in deferred]
            missing = [w for w in wanted if w not in deferred]
        else:
            q = _words(query)
            scored = []
            for t in deferred.values():
                haystack = _words(f"{t.name} {t.description} {t.namespace or ''} {t.namespace_description or ''}")
                name_words = _words(t.name)
                score = 3 * len(q & name_words) + len(q & haystack)
                if score:
                    scored.append((-score, t.name, t))
            scored.sort()
            found = [t for _, _, t in scored[: max(1, min(limit, 20))]]
            missing = []
        if not found:
            names = ", ".join(sorted(deferred)) or "none"
            return f"No tools matched {query!r}. Tools that can be loaded: {names}."
        lines = []
        for t in found:
            loaded.add(t.name)
            params = ", ".join(t.parameters.get("properties", {}))
            lines.append(f"- {t.name}({params}): {t.description}")
        text = f"Loaded {len(found)} tool(s); they can be called now:\n" + "\n".join(lines)
        if missing:
            text += f"\nNot found: {', '.join(missing)}."
        return text

    return Tool(search_tools, name=SEARCH_TOOL_NAME, read_only=True, sort_key="~search_tools",
                describe_activity=lambda a: f"Searching tools for “{a.query}”")
