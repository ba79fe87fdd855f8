"""What one run of code did to the namespace it ran in: `StateChange`, and `NamespaceWatch`, which tells it.

    watch = NamespaceWatch(namespace, code, hidden=runner.hidden_names())   # before the code runs
    ... the code runs ...
    change = watch.finish(error)                                           # after it ran (or raised)

Before: a reference to every visible value (so identity is compared with `is`, never with a reused `id`),
and a fingerprint (`_fingerprint.fingerprint`, bounded) of the values the code could change in place: the
names it reads or changes (`_names.code_names`), and the globals of the notebook's functions it calls, as
far as they call each other. Code that reaches names in ways its syntax does not show (`globals()`,
`exec`, magics) has every container watched. After: new names are `assigned`, names holding another object
`rebound`, names gone `deleted`, and names holding the same object whose fingerprint moved `mutated` (or,
for a value only sampled, that the code's own statements change in place).

The watch reads the namespace (values the person's cells and the agent's approved code put there): builtin
containers and plain values through their builtin types' own methods (a subclass's overrides are not
called), frames and arrays through pandas and NumPy, other objects' attributes without their `__getattr__`;
a value that fails while being looked at is compared by identity only. Nothing of it is run.
"""

from __future__ import annotations

import types
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ._fingerprint import Print, fingerprint
from ._names import CodeNames, code_names

__all__ = ["NamespaceWatch", "StateChange"]

MAX_FOLLOWED = 400
"""Globals of called functions followed at most (beyond that, the code counts as opaque)."""


@dataclass
class StateChange:
    """What one call that ran code did to the namespace's top-level names (the record keeps it, as
    `CallRecord.state_change`, and the stored session its names)."""

    code: str = ""
    """The code that ran, exactly as given (what the cells made from it hold)."""
    assigned: tuple[str, ...] = ()
    """Names that did not exist before."""
    rebound: tuple[str, ...] = ()
    """Names that hold another object now."""
    mutated: tuple[str, ...] = ()
    """Names that hold the same object, changed in place."""
    deleted: tuple[str, ...] = ()
    """Names that are gone."""
    read: tuple[str, ...] = ()
    """Names that existed before and that the code read, in the order first read."""
    ok: bool = True
    """The code ran to its end (False: it raised; what it changed until then is still listed)."""
    exact: bool = True
    """Every in-place change was checked on whole values (False: some were sampled, and changes that the
    code's own statements make count as changes)."""
    tool: str = "python"
    """The tool that ran it (`python`, `run_cell`)."""
    cell_id: str | None = None
    """The notebook cell it ran as (run_cell, python_in_cells), else None."""
    bound: tuple[str, ...] = field(default=())
    """Names the code binds by its syntax (a cell that holds it defines them)."""

    @property
    def written(self) -> tuple[str, ...]:
        """Every name it changed: assigned, rebound, mutated or deleted, sorted."""
        return tuple(sorted({*self.assigned, *self.rebound, *self.mutated, *self.deleted}))

    @property
    def changed_anything(self) -> bool:
        return bool(self.assigned or self.rebound or self.mutated or self.deleted)

    def to_json(self) -> dict[str, Any]:
        """The names, for the stored session (the code is in the call's arguments already)."""
        return {"assigned": list(self.assigned), "rebound": list(self.rebound), "mutated": list(self.mutated),
                "deleted": list(self.deleted), "read": list(self.read), "ok": self.ok, "exact": self.exact,
                "tool": self.tool, "cell_id": self.cell_id}

    @classmethod
    def from_json(cls, data: Mapping[str, Any], code: str = "") -> StateChange:
        """Read back what `to_json` wrote (stored state: every field checked, unknown ones ignored)."""
        def names(key: str) -> tuple[str, ...]:
            value = data.get(key)
            return tuple(n for n in value if isinstance(n, str) and n.isidentifier()) if isinstance(value, list) else ()

        cell = data.get("cell_id")
        return cls(code=code, assigned=names("assigned"), rebound=names("rebound"), mutated=names("mutated"),
                   deleted=names("deleted"), read=names("read"), ok=data.get("ok") is not False,
                   exact=data.get("exact") is not False, tool=str(data.get("tool") or "python"),
                   cell_id=cell if isinstance(cell, str) else None)

    def __str__(self) -> str:
        parts = [f"{word}: {', '.join(names)}" for word, names in (
            ("made", self.assigned), ("replaced", self.rebound), ("changed", self.mutated), ("deleted", self.deleted),
            ("read", self.read)) if names]
        return "; ".join(parts) or "changed nothing"


class NamespaceWatch:
    """Watches one run of `code` in `namespace` (see the module docstring).

    Args:
        namespace: the dict the code runs in.
        code: the code as given (what the record keeps).
        hidden: names that are not the user's (IPython's `In`, `Out`...): never reported.
        transform: turns the code into plain Python before it is analysed (IPython's `transform_cell`).
        tool: the tool that runs it; cell_id: the cell it runs as.
    """

    def __init__(self, namespace: Mapping[str, Any], code: str, *, hidden: Iterable[str] = (),
                 transform: Callable[[str], str] | None = None, tool: str = "python",
                 cell_id: str | None = None) -> None:
        self.namespace = namespace
        self.code = code
        self.tool = tool
        self.cell_id = cell_id
        self.hidden = frozenset(hidden)
        source = code
        if transform is not None:
            try:
                source = transform(code)
            except Exception:
                source = code
        self.names: CodeNames = code_names(source)
        self.before = self._visible()
        watched = self._watched()
        self.prints: dict[str, Print | None] = {n: fingerprint(self.before[n]) for n in watched}

    def _visible(self) -> dict[str, Any]:
        hidden = self.hidden
        return {k: v for k, v in list(self.namespace.items())
                if isinstance(k, str) and not k.startswith("_") and k not in hidden}

    def _watched(self) -> list[str]:
        """The names whose values the code could change in place."""
        before = self.before
        names = self.names
        if names.opaque:
            return [n for n, v in before.items() if not isinstance(v, (types.ModuleType, type))]
        wanted = [*names.reads, *names.mutates]
        seen: set[str] = set()
        out: list[str] = []
        while wanted:
            name = wanted.pop(0)
            if name in seen or name not in before:
                continue
            seen.add(name)
            out.append(name)
            if len(seen) > MAX_FOLLOWED:  # a web of functions too large to follow: watch everything
                return [n for n, v in before.items() if not isinstance(v, (types.ModuleType, type))]
            wanted.extend(_globals_used(before[name], self.namespace))
        return out

    def followed(self) -> list[str]:
        """Names the code reads through the notebook's functions it calls (their globals, transitively)."""
        out: list[str] = []
        for name in self.prints:
            if name not in self.names.reads and name not in self.names.mutates and name not in out:
                out.append(name)
        return out

    def finish(self, error: BaseException | None = None) -> StateChange:
        """What the code changed, now that it ran (or raised `error`)."""
        after = self._visible()
        before = self.before
        assigned = sorted(n for n in after if n not in before)
        deleted = sorted(n for n in before if n not in after)
        rebound = sorted(n for n in after if n in before and after[n] is not before[n])
        mutated = []
        exact = True
        static = set(self.names.mutates)
        for name, old in self.prints.items():
            if old is None or name not in after or after[name] is not before[name]:
                continue
            new = fingerprint(after[name])
            exact = exact and old.exact and (new is None or new.exact)
            if new is None or new.digest != old.digest:
                mutated.append(name)
            elif not (old.exact and new.exact) and name in static:
                mutated.append(name)  # sampled alike, but the code's own statements change it in place
        read = [n for n in [*self.names.reads, *self.followed()] if n in before]
        return StateChange(code=self.code, assigned=tuple(assigned), rebound=tuple(rebound),
                           mutated=tuple(sorted(mutated)), deleted=tuple(deleted), read=tuple(read),
                           ok=error is None, exact=exact, tool=self.tool, cell_id=self.cell_id,
                           bound=self.names.binds)


def _globals_used(value: Any, namespace: Mapping[str, Any]) -> list[str]:
    """The global names a function of this namespace (or a class's methods) uses, in order."""
    functions: list[Any] = []
    if isinstance(value, types.FunctionType):
        functions.append(value)
    elif isinstance(value, type) and getattr(value, "__module__", None) == namespace.get("__name__", "__main__"):
        functions.extend(m for m in vars(value).values() if isinstance(m, types.FunctionType))
    out: list[str] = []
    for f in functions:
        if f.__globals__ is not namespace:
            continue
        stack = [f.__code__]
        while stack:
            code = stack.pop()
            out.extend(n for n in code.co_names if n not in out)
            stack.extend(c for c in code.co_consts if isinstance(c, types.CodeType))
    return out
