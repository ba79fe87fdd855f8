"""Where the kernel's values came from, shown: the line a finished run's header adds when names it made exist
only in the kernel, and the table of a reproducibility check (`nbagent.lineage.Reproducibility`).

Names are the namespace's (identifiers, but written by the model's code); a rerun's type names and values
come from a kernel that ran the notebook's cells. All of it goes through `_esc` (escaped, hidden characters
shown) or, as text, `terminal_safe`.
"""

from __future__ import annotations

from typing import Any

from .. import reprs
from ..safety import sanitize
from .base import _esc, _style, plural

__all__ = ["kernel_only_html", "kernel_only_text", "reproducibility_html", "reproducibility_text"]

MAX_NAMES = 12
"""Names listed in the header line (the rest are counted)."""


def _kernel_only(run: Any) -> list[str]:
    """The run's kernel-only names once it ended ([] while it runs, or when they cannot be told)."""
    if not getattr(run, "done", False):
        return []
    try:
        names = getattr(run, "kernel_only", None)
    except Exception:  # the notebook's cells could not be read: say nothing rather than break the view
        return []
    return list(names) if isinstance(names, list) else []


def _listed(names: list[str]) -> str:
    shown = ", ".join(names[:MAX_NAMES])
    return shown + (f" and {len(names) - MAX_NAMES} more" if len(names) > MAX_NAMES else "")


def kernel_only_html(run: Any) -> str:
    """"3 names exist only in the kernel: df_clean, model, helper", with how to make cells of them ('' when none)."""
    names = _kernel_only(run)
    if not names:
        return ""
    many = len(names) != 1
    title = ("Made or changed by this run's code, and defined by no cell of the notebook: a rerun of the notebook "
             "would not have them. %agent --to-cells inserts the cells that make them (you review each); "
             "%agent --check reruns the saved notebook in a fresh kernel and compares.")
    run_id = _esc(getattr(run, "id", ""))  # the frontend part puts a "Make cells" button here, for this run
    return (f'<div class="nba-kernel-only" data-run="{run_id}" title="{_esc(title)}">{plural(len(names), "name")} exist'
            f'{"" if many else "s"} only in the kernel: <span class="nba-code">{_esc(_listed(names))}</span> · '
            f'<span class="nba-code">%agent --to-cells</span> makes cells of them</div>')


def kernel_only_text(run: Any) -> list[str]:
    names = _kernel_only(run)
    if not names:
        return []
    many = len(names) != 1
    return [sanitize.terminal_safe(f"  {plural(len(names), 'name')} exist{'' if many else 's'} only in the kernel: "
                                   f"{_listed(names)} (%agent --to-cells makes cells of them)")]


# --------------------------------------------------------------------------------------------------
# A reproducibility check
# --------------------------------------------------------------------------------------------------
def _value_text(sig: dict[str, Any] | None) -> str:
    if sig is None:
        return "—"
    kind = str(sig.get("type") or "?").rsplit(".", 1)[-1]
    shape = sig.get("shape")
    if isinstance(shape, list) and shape:
        kind += " " + " x ".join(str(n) for n in shape)
    value = sig.get("value")
    if isinstance(value, str) and sig.get("how") == "value" and not kind.startswith("module"):
        kind += " = " + reprs.shortened(value, 40)
    return kind


def _verdict(report: Any) -> str:
    if report.reproducible:
        them = "them" if len(report.checks) != 1 else "it"
        return (f"reproducible: the saved notebook, run top to bottom in a fresh kernel, makes "
                f"{plural(len(report.checks), 'name')} as the live kernel has {them}")
    parts = []
    if report.stopped:
        parts.append(f"the rerun stopped ({report.stopped})")
    if report.missing:
        parts.append(f"{plural(len(report.missing), 'name')} missing after the rerun: {', '.join(report.missing)}")
    if report.different:
        parts.append(f"{plural(len(report.different), 'name')} different: {', '.join(report.different)}")
    if report.failed_cells:
        parts.append(f"{plural(len(report.failed_cells), 'cell')} failed: "
                     + ", ".join(f"cell {i + 1}" for i in report.failed_cells))
    return "not reproducible: " + "; ".join(parts)


def reproducibility_html(report: Any) -> str:
    """One table: each name with its status, what the live kernel has and what the rerun made; failed cells."""
    status_class = {"match": "nba-s-ok", "missing": "nba-s-failed", "different": "nba-s-denied"}
    rows = []
    for c in report.checks:
        rows.append(f'<tr class="{status_class.get(c.status, "")}"><td class="nba-code">{_esc(c.name)}</td>'
                    f"<td>{_esc(c.status)}</td><td>{_esc(_value_text(c.live))}</td>"
                    f"<td>{_esc(_value_text(c.rerun))}</td><td>{_esc(c.why)}</td></tr>")
    for i in report.failed_cells:
        rows.append(f'<tr class="nba-s-failed"><td>cell {i + 1}</td><td>failed</td><td colspan="3" '
                    f'class="nba-code">{_esc(report.cell_errors.get(i, ""))}</td></tr>')
    table = ""
    if rows:
        table = ('<table class="nba-repro"><thead><tr><th>name</th><th>status</th><th>live kernel</th>'
                 f'<th>after the rerun</th><th>why</th></tr></thead><tbody>{"".join(rows)}</tbody></table>')
    head = (f'<div class="nba-headinfo"><span class="nba-brand">nbagent</span> check of '
            f'<span class="nba-code">{_esc(report.path)}</span> · {plural(report.cells, "code cell")} rerun in '
            f"{report.seconds:.1f} s</div>")
    verdict = "nba-s-ok" if report.reproducible else "nba-s-failed"
    return (f'{_style()}<div class="nba nba-repro-report">{head}<div class="nba-repro-verdict {verdict}">'
            f"{_esc(_verdict(report))}</div>{table}</div>")


def reproducibility_text(report: Any) -> str:
    lines = [f"nbagent check of {report.path} · {plural(report.cells, 'code cell')} rerun in {report.seconds:.1f} s",
             _verdict(report)]
    if report.checks:
        width = max(len(c.name) for c in report.checks)
        for c in report.checks:
            lines.append(f"  {c.name:<{width}}  {c.status:<9}  {_value_text(c.live)}  ->  {_value_text(c.rerun)}"
                         f"  ({c.why})")
    for i in report.failed_cells:
        lines.append(f"  cell {i + 1} failed: {report.cell_errors.get(i, '')}")
    return sanitize.terminal_safe("\n".join(lines))


reprs.register(reproducibility_html=reproducibility_html, reproducibility_text=reproducibility_text)
