"""Does the notebook rerun? The cells a kernel's notebook has (for `run.kernel_only`), and
`check_reproducible(path)`: the saved notebook run top to bottom in a fresh kernel, compared with this one.

`NotebookCells(shell)` is the `CellSource` every `%agent` run gets: the names bound by the notebook's cells
as this kernel knows them without waiting for the page (the cells run in this kernel, `In`; the saved
file; the cells the agent read or wrote in the live notebook). A name the agent made that none of those
binds exists only in the kernel.

`check_reproducible` starts a kernel of this Python (nbagent importable as here) in the notebook's folder,
with nbclient, and runs every code cell in order, going on past a cell that raises (each is reported);
then it asks that kernel for the signature (type, shape, content hash; `nbagent.lineage.signature`) of
each name, and compares them with this kernel's. The names: those the agent's runs in this kernel made or
changed (still here), else every variable of the notebook. In the fresh kernel every `%agent` answers from
its stored conversation and runs none of its tools (`NBAGENT_REPLAY=recorded`, `NBAGENT_APPROVAL=deny`):
the check asks whether the cells alone make the state, offline, and without cost.

Reads: the saved notebook (the person's, or anyone's who could write the file) and what the fresh kernel
prints. Running the notebook runs its cells, as Run All would: only when the person asks (this function,
`%agent --check`), with the notebook's own trust. What the fresh kernel reports is parsed as JSON, checked
for shape, and shown escaped; nothing of it runs here.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from nbagent.lineage import CellSource, Reproducibility, compare, defined_names, signature, steps_of
from nbagent.tools.schema_library import import_jsonschema

__all__ = ["CHECKING_VARIABLE", "NotebookCells", "check_reproducible", "names_of_runs"]

CHECKING_VARIABLE = "NBAGENT_CHECKING"
"""Set in the fresh kernel of a check: a `%agent --check` or `--to-cells` saved in the notebook does nothing there."""
_MARK = "NBAGENT-SIGNATURES "
_MAX_CACHED = 4000


class NotebookCells(CellSource):
    """The notebook's cells as this kernel knows them (see the module docstring)."""

    def __init__(self, shell: Any) -> None:
        self.shell = shell
        self._binds: dict[str, frozenset[str]] = {}
        self._saved: tuple[str, float, list[str]] | None = None

    @property
    def namespace(self) -> Any:  # type: ignore[override]
        return self.shell.user_ns

    def sources(self) -> list[str]:
        found: list[str] = []
        history = getattr(getattr(self.shell, "history_manager", None), "input_hist_raw", None)
        found.extend(s for s in (history or []) if isinstance(s, str))
        found.extend(self._saved_sources())
        state = getattr(self.shell, "_nbagent_notebook", None)
        if state is not None:
            found.extend(s for s in list(state.seen.values()) if isinstance(s, str))
        return found

    def _saved_sources(self) -> list[str]:
        state = getattr(self.shell, "_nbagent_notebook", None)
        path = state.saved_path() if state is not None else None
        if path is None:
            return []
        try:
            mtime = path.stat().st_mtime
            if self._saved is not None and self._saved[0] == str(path) and self._saved[1] == mtime:
                return self._saved[2]
            nb = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return []
        sources = [_text(c.get("source")) for c in nb.get("cells") or [] if isinstance(c, dict)
                   and c.get("cell_type") == "code"]
        self._saved = (str(path), mtime, sources)
        return sources

    def defined_names(self) -> set[str]:
        out: set[str] = set()
        for source in set(self.sources()):
            names = self._binds.get(source)
            if names is None:
                names = frozenset(defined_names([source], transform=self.shell.transform_cell))
                if len(self._binds) >= _MAX_CACHED:
                    self._binds.clear()
                self._binds[source] = names
            out |= names
        return out


def _text(value: Any) -> str:
    return "".join(value) if isinstance(value, list) else str(value or "")


def names_of_runs(runs: list[Any], namespace: Any) -> list[str]:
    """The names the runs' code made or changed that are still in the namespace, sorted."""
    names: set[str] = set()
    for run in runs:
        for step in steps_of(run):
            names.update(step.change.written)
    return sorted(n for n in names if n in namespace)


# --------------------------------------------------------------------------------------------------
# The check
# --------------------------------------------------------------------------------------------------
def check_reproducible(path: str | os.PathLike[str], timeout: int = 600, *, names: list[str] | None = None,
                       shell: Any = None) -> Reproducibility:
    """Run the saved notebook at `path` top to bottom in a fresh kernel and compare it with this kernel.

    Args:
        path: the notebook file (saved: unsaved edits in the page are not in it).
        timeout: seconds one cell of the rerun may take (then the rerun stops, and says so).
        names: the names to compare (default: those the agent's runs in this kernel made or changed, else
            every variable of the notebook).
        shell: the IPython shell (default: the running one).

    Returns a `Reproducibility`: `reproducible`, `missing`, `different`, `failed_cells` (0-based indexes
    among the notebook's cells); shown as one table.
    """
    if os.environ.get(CHECKING_VARIABLE):
        raise RuntimeError("this kernel is itself running a reproducibility check: a check inside it is skipped")
    if shell is None:
        from IPython import get_ipython

        shell = get_ipython()
    if shell is None:
        raise RuntimeError("check_reproducible runs in the kernel whose state it compares (no IPython shell here)")
    path = Path(path).expanduser().resolve()
    if not path.is_file():
        raise FileNotFoundError(f"there is no notebook at {path}")
    ns = shell.user_ns
    if names is None:
        session = getattr(shell, "_nbagent_session", None)
        names = names_of_runs(list(getattr(session, "runs", []) or []), ns)
        if not names:  # no agent work here: every variable of the notebook
            from .kernel_tools import kernel_runner

            names = sorted(kernel_runner(shell).variables())
    bad = [n for n in names if not isinstance(n, str) or not n.isidentifier()]
    if bad:
        raise ValueError(f"names must be identifiers: {bad!r}")
    started = time.monotonic()
    outcome = _in_thread(_rerun(path, list(names), timeout))
    report = Reproducibility(str(path), failed_cells=outcome["failed"], cell_errors=outcome["errors"],
                             cells=outcome["cells"], stopped=outcome["stopped"])
    if not outcome["stopped"]:
        live = {n: signature(ns[n]) for n in names if n in ns}
        report.checks = compare(live, outcome["signatures"])
    report.seconds = time.monotonic() - started
    return report


def _in_thread(coro: Any) -> dict[str, Any]:
    """Run the rerun on a loop of its own thread (the kernel's loop is busy with this cell); the interrupt
    button stops it, and the fresh kernel is shut down either way."""
    box: dict[str, Any] = {}
    ready = threading.Event()

    def work() -> None:
        loop = asyncio.new_event_loop()
        box["loop"] = loop
        try:
            box["task"] = task = loop.create_task(coro)
            ready.set()
            box["value"] = loop.run_until_complete(task)
        except BaseException as exc:
            box["error"] = exc
        finally:
            ready.set()
            loop.close()

    thread = threading.Thread(target=work, name="nbagent-rerun", daemon=True)
    thread.start()
    try:
        while thread.is_alive():
            thread.join(0.2)
    except KeyboardInterrupt:
        ready.wait(5)
        loop, task = box.get("loop"), box.get("task")
        if loop is not None and task is not None:
            loop.call_soon_threadsafe(task.cancel)
        thread.join(30)
        raise
    if "error" in box:
        raise box["error"]
    return box["value"]


def _environment(path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("JPY_SESSION_NAME", "JPY_PARENT_PID")}
    here = str(Path(__file__).resolve().parents[3])  # the folder nbagent is imported from
    parts = [str(Path(p).resolve()) for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    env["PYTHONPATH"] = os.pathsep.join([here, *[p for p in parts if p != here]])
    env.update({CHECKING_VARIABLE: "1", "NBAGENT_REPLAY": "recorded", "NBAGENT_APPROVAL": "deny",
                "NBAGENT_NOTEBOOK": str(path)})
    return env


def _probe(names: list[str]) -> str:
    return ("import json as _nbagent_json\n"
            "from nbagent.lineage import signature as _nbagent_signature\n"
            "_nbagent_ns = get_ipython().user_ns\n"
            f"print({_MARK!r} + _nbagent_json.dumps({{_n: (_nbagent_signature(_nbagent_ns[_n]) if _n in _nbagent_ns "
            f"else None) for _n in {names!r}}}))\n")


async def _rerun(path: Path, names: list[str], timeout: int) -> dict[str, Any]:
    import_jsonschema()  # (nbformat imports it: see nbagent.tools.schema_library)
    import nbformat
    from jupyter_client.kernelspec import KernelSpec, KernelSpecManager
    from jupyter_client.manager import AsyncKernelManager
    from nbclient import NotebookClient
    from nbclient.exceptions import DeadKernelError

    class ThisPython(KernelSpecManager):
        """The kernel this one is: the same Python, nbagent imported from the same place."""

        def get_kernel_spec(self, kernel_name: str) -> KernelSpec:
            return KernelSpec(argv=[sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
                              display_name="Python (nbagent check)", language="python")

    nb = nbformat.read(path, as_version=4)
    km = AsyncKernelManager(kernel_name="nbagent-check", kernel_spec_manager=ThisPython())
    client = NotebookClient(nb, km=km, timeout=timeout, allow_errors=True, kernel_name="nbagent-check",
                            resources={"metadata": {"path": str(path.parent)}})
    out: dict[str, Any] = {"failed": [], "errors": {}, "cells": 0, "stopped": "", "signatures": {}}
    with tempfile.TemporaryFile("w+") as log:  # the fresh kernel's own stderr: not this cell's, said if it dies
        try:
            await _run_cells(client, nb, path, names, timeout, out, log)
        except DeadKernelError:
            out["stopped"] = f"the fresh kernel died: {_tail(log)}"
        except RuntimeError as exc:  # it did not start
            out["stopped"] = f"the fresh kernel did not start ({exc}): {_tail(log)}"
    return out


def _tail(log: Any, limit: int = 600) -> str:
    log.seek(0)
    text = log.read().strip()
    return ("…" + text[-limit:]) if len(text) > limit else (text or "it said nothing")


async def _run_cells(client: Any, nb: Any, path: Path, names: list[str], timeout: int, out: dict[str, Any],
                     log: Any) -> None:
    """Every code cell in order (going on past one that raises), then the probe of the names' signatures."""
    import_jsonschema()  # (nbformat imports it: see nbagent.tools.schema_library)
    import nbformat
    from nbclient.exceptions import CellTimeoutError, DeadKernelError

    async with client.async_setup_kernel(env=_environment(path), stderr=log, cleanup_kc=True):  # shut down after
        for index, cell in enumerate(nb.cells):
            if cell.get("cell_type") != "code":
                continue
            out["cells"] += 1
            try:
                await client.async_execute_cell(cell, index)
            except CellTimeoutError:
                out["stopped"] = f"cell {index + 1} did not finish within {timeout} s"
                return
            except DeadKernelError:
                out["stopped"] = f"the kernel died in cell {index + 1}: {_tail(log)}"
                return
            error = next((o for o in cell.get("outputs", []) if o.get("output_type") == "error"), None)
            if error is not None:
                out["failed"].append(index)
                out["errors"][index] = f"{error.get('ename', 'Error')}: {error.get('evalue', '')}"[:500]
        probe = nbformat.v4.new_code_cell(_probe(names))
        nb.cells.append(probe)
        try:
            await client.async_execute_cell(probe, len(nb.cells) - 1, store_history=False)
        finally:
            nb.cells.pop()
    signatures = _signatures(probe, names)
    if signatures is None:
        error = next((o for o in probe.get("outputs", []) if o.get("output_type") == "error"), None)
        why = f"{error.get('ename')}: {error.get('evalue')}" if error else "it printed nothing"
        out["stopped"] = f"the fresh kernel could not describe its names ({why})"
        signatures = {}
    out["signatures"] = signatures


def _signatures(probe: Any, names: list[str]) -> dict[str, dict[str, Any] | None] | None:
    """The signatures the probe printed, each checked for shape (None: it printed none)."""
    text = "".join(o.get("text", "") for o in probe.get("outputs", []) if o.get("output_type") == "stream")
    line = next((x for x in reversed(text.splitlines()) if x.startswith(_MARK)), None)
    if line is None:
        return None
    try:
        data = json.loads(line[len(_MARK):])
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    out: dict[str, dict[str, Any] | None] = {}
    for name in names:
        sig = data.get(name)
        if isinstance(sig, dict):
            out[name] = {k: sig.get(k) for k in ("type", "shape", "hash", "value", "how")
                         if isinstance(sig.get(k), (str, list, type(None)))}
        else:
            out[name] = None
    return out
