"""From what a run's code did to cells that do it again: `kernel_only(run)`, `plan_cells(run)`, `to_cells(run)`.

Every call that ran code in the namespace (the `python` tool, `run_cell`) leaves a `StateChange` on its
record. From them, in call order:

- the run's final state: each name it changed, with the call that changed it last;
- `kernel_only`: those names (still there at the end) that no cell of the notebook binds, as far as a
  `CellSource` knows the notebook's cells (without one, every such name);
- `plan_cells`: the calls the final state needs, found backwards: the last call that changed each name,
  then for each call kept, the last call before it that changed a name it read (or changed in place), and
  so on. A call whose effects were all replaced later, that changed nothing (it only looked), or that
  failed, is left out, each with the reason; a name whose last change was a call that failed cannot be
  recreated, and a name read from before the run that no cell binds is needed from elsewhere: both are said.
  A `run_cell` call ran a cell of the notebook, which the notebook keeps: it is not copied.
- `to_cells`: one code cell per call kept, in order: the code exactly as it ran, under a one-line comment
  (which step of which run, the call, what it makes), with its provenance in `metadata["nbagent"]`.

Reads the run's records: the code is the model's (it ran, with approval), names are checked to be
identifiers before they go into a comment, and ids are cut to safe characters.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ._names import code_names
from ._watch import StateChange

__all__ = ["CellPlan", "CellSource", "Step", "defined_names", "kernel_only", "plan_cells", "provenance", "steps_of",
           "to_cells"]

_ID = re.compile(r"[^A-Za-z0-9_.:-]")


class CellSource:
    """What a run knows of the notebook's cells (registered as an extension of the agent: the notebook front
    gives one; a plain script has none). `defined_names()`: the names its cells bind; `namespace`: the
    namespace the run's code ran in (names no longer there are not reported), or None."""

    namespace: Any = None

    def defined_names(self) -> set[str]:
        return set()


def defined_names(sources: Iterable[str], transform: Any = None) -> set[str]:
    """The top-level names a set of cells binds (each cell's source turned into plain Python first)."""
    out: set[str] = set()
    for source in sources:
        if transform is not None:
            try:
                source = transform(source)
            except Exception:
                continue
        out.update(code_names(source).binds)
    return out


@dataclass
class Step:
    """One call that ran code, with what it did."""

    index: int
    """Its place among the run's calls (0-based)."""
    record: Any
    change: StateChange

    @property
    def ok(self) -> bool:
        return self.change.ok and getattr(self.record, "status", "ok") == "ok"

    @property
    def call_id(self) -> str:
        return str(getattr(self.record, "id", ""))

    @property
    def code(self) -> str:
        return self.change.code


def steps_of(run: Any) -> list[Step]:
    """The run's calls that ran code and say what they did, in order."""
    out = []
    for i, rec in enumerate(getattr(run, "calls", ()) or ()):
        change = getattr(rec, "state_change", None)
        if isinstance(change, StateChange):
            out.append(Step(i, rec, change))
    return out


def _source(run: Any) -> CellSource | None:
    for value in (getattr(run, "extensions", None) or {}).values():
        if isinstance(value, CellSource):
            return value
    return None


def _final(steps: list[Step]) -> dict[str, Step]:
    """Each name the run changed, with the step that changed it last."""
    last: dict[str, Step] = {}
    for step in steps:
        for name in step.change.written:
            last[name] = step
    return last


def _existed_before(name: str, steps: list[Step]) -> bool:
    for step in steps:
        ch = step.change
        if name in ch.assigned:
            return False
        if name in ch.rebound or name in ch.mutated or name in ch.deleted or name in ch.read:
            return True
    return False


def kernel_only(run: Any, source: CellSource | None = None) -> list[str]:
    """The names the run's code made or changed (and did not delete) that no cell of the notebook binds."""
    source = source if source is not None else _source(run)
    steps = steps_of(run)
    final = _final(steps)
    names = {n for n, step in final.items() if n not in step.change.deleted}
    if source is not None:
        names -= source.defined_names()
        namespace = source.namespace
        if namespace is not None:
            names = {n for n in names if n in namespace}
    return sorted(names)


@dataclass
class CellPlan:
    """Which calls of a run make its final state again, and why the others are left out."""

    run: Any
    steps: list[Step] = field(default_factory=list)
    """The calls kept, in order."""
    left_out: dict[str, str] = field(default_factory=dict)
    """Call id -> why it is not among the cells."""
    not_recreated: dict[str, str] = field(default_factory=dict)
    """Name -> why the cells cannot make it (its last change failed)."""
    needs: list[str] = field(default_factory=list)
    """Names the kept calls read from before the run, which no cell of the notebook binds."""
    targets: list[str] = field(default_factory=list)
    """The names of the final state the cells make, sorted."""

    def cells(self) -> list[dict[str, Any]]:
        return [_cell(self.run, step, k, len(self.steps)) for k, step in enumerate(self.steps, 1)]

    def summary(self) -> str:
        """In words: how many cells make what, and what was left out and why."""
        from_run = f"run {_safe(getattr(self.run, 'id', '?'))}"
        if not self.steps:
            head = f"{from_run}: no call of it is needed to make its final state again"
        else:
            made = ", ".join(self.targets) or "nothing new"
            head = (f"{from_run}: {len(self.steps)} cell{'s' if len(self.steps) != 1 else ''} "
                    f"make{'s' if len(self.steps) == 1 else ''} {made}")
        lines = [head]
        for call, why in self.left_out.items():
            lines.append(f"  left out: call {_safe(call)} ({why})")
        for name, why in self.not_recreated.items():
            lines.append(f"  not made again: {name} ({why})")
        if self.needs:
            lines.append(f"  needs from before the run (no cell defines them): {', '.join(self.needs)}")
        return "\n".join(lines)


def plan_cells(run: Any, source: CellSource | None = None) -> CellPlan:
    """The calls of `run` its final state needs (see the module docstring)."""
    source = source if source is not None else _source(run)
    defined = source.defined_names() if source is not None else set()
    steps = steps_of(run)
    plan = CellPlan(run)
    final = _final(steps)
    needed: set[int] = set()
    queue: list[Step] = []
    for name, step in sorted(final.items()):
        if name in step.change.deleted and not _existed_before(name, steps):
            continue  # made and deleted within the run: nothing to make
        if not step.ok:
            plan.not_recreated[name] = f"its last change was call {_safe(step.call_id)}, which failed"
            continue
        if name not in step.change.deleted:
            plan.targets.append(name)
        if step.index not in needed:
            needed.add(step.index)
            queue.append(step)
    needs: set[str] = set()
    while queue:
        step = queue.pop()
        ch = step.change
        for name in {*ch.read, *ch.mutated, *ch.deleted, *ch.rebound}:
            if name in ch.rebound and name not in ch.read:
                continue  # replaced without being read: what it held before does not matter
            writer = _last_writer(steps, name, step.index)
            if writer is None:
                if name not in defined:
                    needs.add(name)
                continue
            if not writer.ok:
                why = f"call {_safe(step.call_id)} read it after call {_safe(writer.call_id)} changed it and failed"
                plan.not_recreated.setdefault(name, why)
                continue
            if writer.index not in needed:
                needed.add(writer.index)
                queue.append(writer)
    plan.needs = sorted(needs)
    kept = [s for s in steps if s.index in needed]
    for step in steps:
        if step.index in needed:
            continue
        if not step.ok:
            plan.left_out[step.call_id] = "it failed"
        elif not step.change.changed_anything:
            plan.left_out[step.call_id] = "it changed nothing: it only looked"
        else:
            later = sorted({final[n].call_id for n in step.change.written if n in final and final[n] is not step})
            plan.left_out[step.call_id] = ("what it changed was replaced later" + (
                f" (by call {', '.join(_safe(c) for c in later)})" if later else ""))
    plan.steps = []
    for step in kept:
        if step.change.tool == "run_cell" or step.change.cell_id:
            plan.left_out[step.call_id] = "it ran a cell of the notebook, which the notebook keeps"
        else:
            plan.steps.append(step)
    return plan


def _last_writer(steps: list[Step], name: str, before: int) -> Step | None:
    found = None
    for step in steps:
        if step.index >= before:
            break
        if name in step.change.written:
            found = step
    return found


def to_cells(run: Any, source: CellSource | None = None) -> list[dict[str, Any]]:
    """The code cells (nbformat 4 dicts) that make `run`'s final state again after the notebook's cells."""
    return plan_cells(run, source).cells()


def _safe(text: Any, limit: int = 64) -> str:
    return _ID.sub("_", str(text))[:limit]


def provenance(run: Any, step: Step, k: int, n: int) -> dict[str, Any]:
    """What a recreated cell's metadata says of where it came from."""
    model = getattr(getattr(run, "model", None), "spec", None)
    return {"action": "recreated", "run": _safe(getattr(run, "id", "")), "model": str(model) if model else None,
            "call": _safe(step.call_id), "calls": [_safe(step.call_id)], "tool": _safe(step.change.tool),
            "step": k, "steps": n, "makes": [x for x in step.change.written if x.isidentifier()]}


def _cell(run: Any, step: Step, k: int, n: int) -> dict[str, Any]:
    meta = provenance(run, step, k, n)
    model = _ID.sub("_", meta["model"] or "?")[:60]
    makes = ", ".join(meta["makes"][:8]) + (f" and {len(meta['makes']) - 8} more" if len(meta["makes"]) > 8 else "")
    comment = f"# nbagent: step {k} of {n} of run {meta['run']} ({model}), call {meta['call']}"
    if makes:
        comment += f"; makes {makes}"
    code = step.code
    return {"cell_type": "code", "execution_count": None, "id": uuid.uuid4().hex[:8],
            "metadata": {"nbagent": meta}, "outputs": [], "source": f"{comment}\n{code}"}
