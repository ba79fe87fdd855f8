"""What a rerun of a notebook showed: `Reproducibility`, one row per name compared (`NameCheck`).

Made by `nbagent.jupyter.check_reproducible` from two sets of signatures (`_fingerprint.signature`): the
live kernel's and the fresh kernel's after it ran the saved notebook top to bottom. Shown as one table
(HTML in a notebook, text in a terminal) through `nbagent.reprs`.

The rerun's signatures come from a kernel that ran the notebook's cells: anything in them (type names,
values' text) is text someone else could have written; the renderers escape it and show hidden characters.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .. import reprs
from ._fingerprint import same

__all__ = ["NameCheck", "Reproducibility", "compare"]


@dataclass
class NameCheck:
    """One name, in the live kernel and after the rerun."""

    name: str
    status: str
    """`match`, `missing` (the rerun does not have it) or `different`."""
    live: dict[str, Any] | None
    rerun: dict[str, Any] | None
    why: str = ""
    """What matched or what differs, in words."""


@dataclass
class Reproducibility:
    """The report of `check_reproducible`: does the saved notebook, run top to bottom in a fresh kernel, make
    the names the live kernel has (those the agent's work made, unless others were asked for)."""

    path: str
    checks: list[NameCheck] = field(default_factory=list)
    failed_cells: list[int] = field(default_factory=list)
    """Indexes (0-based, among all the notebook's cells) of the cells that raised in the rerun."""
    cell_errors: dict[int, str] = field(default_factory=dict)
    """Cell index -> the error it raised (`NameError: name 'df_clean' is not defined`)."""
    cells: int = 0
    """Code cells the rerun ran."""
    seconds: float = 0.0
    stopped: str = ""
    """Why the rerun stopped before the end (a cell timed out), or ''."""

    @property
    def reproducible(self) -> bool:
        """Every name matched, no cell failed, and the rerun reached the end."""
        return not self.stopped and not self.failed_cells and all(c.status == "match" for c in self.checks)

    @property
    def missing(self) -> list[str]:
        """Names the live kernel has that the rerun does not make."""
        return [c.name for c in self.checks if c.status == "missing"]

    @property
    def different(self) -> list[str]:
        """Names the rerun makes with another value (type, shape or content)."""
        return [c.name for c in self.checks if c.status == "different"]

    @property
    def matches(self) -> list[str]:
        return [c.name for c in self.checks if c.status == "match"]

    def __str__(self) -> str:
        return reprs.render("reproducibility_text", self)

    def __repr__(self) -> str:
        return (f"<Reproducibility {self.path!r} reproducible={self.reproducible} missing={self.missing} "
                f"different={self.different} failed_cells={self.failed_cells}>")

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(str(self))

    def _repr_html_(self) -> str:
        return reprs.render("reproducibility_html", self)


def compare(live: Mapping[str, dict[str, Any]], rerun: Mapping[str, dict[str, Any] | None]) -> list[NameCheck]:
    """One `NameCheck` per name of `live`, sorted by name."""
    out = []
    for name in sorted(live):
        theirs = rerun.get(name)
        if theirs is None:
            out.append(NameCheck(name, "missing", live[name], None, "not defined after the rerun"))
            continue
        ok, why = same(live[name], theirs)
        out.append(NameCheck(name, "match" if ok else "different", live[name], theirs, why))
    return out
