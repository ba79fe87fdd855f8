"""nbagent in IPython and Jupyter: `%load_ext nbagent` adds `%agent` / `%%agent`.

This is the only package of nbagent that imports IPython or ipywidgets; the widgets are imported only
when a run is first shown. `get_session()` gives the kernel's nbagent state (runs, grants, settings);
`view(run)` the live view of a run, whose rows can also be approved or denied from code; `runs()` the runs
still going, with their views.

Its rooms, in the order a run passes them (each may import the ones after it, never one before):

    magics, headless   the entry points: `%agent` and its options; notebooks executed with no one watching
    panel/             the side panel's comm: Fix, Explain, Ask, reviews in cells
    session/           options -> agent -> run: the kernel's state, the stored conversation, instructions
    notebook/          the live notebook over its comm, the notebook tools, what a run leaves in its cell
    live/              the live view: a run's widget, its call rows and approval buttons, steering
    config             `%config NBAgent`: the settings every room reads
"""

from __future__ import annotations

from typing import Any

__all__ = ["check_reproducible", "get_session", "load_ipython_extension", "runs", "unload_ipython_extension", "view"]


def load_ipython_extension(ipython: Any) -> None:
    """`%load_ext nbagent`: register `%agent`, `%%agent` and `%config NBAgent`."""
    from .magics import register

    register(ipython)


def unload_ipython_extension(ipython: Any) -> None:
    """`%unload_ext nbagent`: remove them (runs already started go on)."""
    from .magics import unregister

    unregister(ipython)


def get_session(ipython: Any = None) -> Any:
    """The `NotebookSession` of this kernel (`%load_ext nbagent` first)."""
    if ipython is None:
        from IPython import get_ipython

        ipython = get_ipython()
    found = getattr(ipython, "_nbagent_session", None)
    if found is None:
        raise RuntimeError("nbagent is not loaded in this shell: run %load_ext nbagent first")
    return found


def view(run: Any) -> Any:
    """The view of a run. Displayed (the last line of a cell), it shows the run's live view while the run goes
    on (Approve, Deny and Stop work there too), its static rendering once it ended. Its `pending` rows can be
    approved or denied from code. A run not started with %agent (`agent.run(...)` in a cell) gets a live view
    made then, which shows what the run did so far; once such a run ended, `view(run)` is the run itself."""
    return get_session().notebook_runs.view_of(run)


def check_reproducible(path: Any, timeout: int = 600, **options: Any) -> Any:
    """In the live kernel: run the saved notebook at `path` top to bottom in a fresh kernel (nbclient) and
    compare it with this kernel's names (those the agent's work made; `names=[...]` to choose). Returns a
    report with `reproducible`, `missing`, `different` and `failed_cells` (indexes), shown as a table.
    `timeout`: seconds one cell may take. Every `%agent` in the rerun answers from its stored conversation
    and runs no tool: the check asks whether the cells alone make the state (`%agent --check` does the same
    for this notebook)."""
    from .notebook.rerun import check_reproducible as check

    return check(path, timeout, **options)


def runs(all: bool = False) -> Any:  # noqa: A002 - the natural name here
    """The kernel's %agent runs that are still going (`all=True`: every run), oldest first, as a list.

    Displayed, it shows one line per run, then the live view of each run still going (as `%agent --runs`).
    """
    from .notebook.runs import RunList

    runs = get_session().notebook_runs
    return RunList(runs, runs.runs if all else runs.live_runs())
