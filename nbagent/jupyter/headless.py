"""Run notebooks with no one at the screen (nbclient), as CI does and as `./dev quickstart` does.

    python -m nbagent.jupyter.headless [NOTEBOOK] [--out EXECUTED.ipynb] [--replay [rerun|recorded]]
                                       [--trust-workspace-mcp]

Nobody can click Approve, so a policy decides: `NBAGENT_APPROVAL` (allow or deny; with none set, every call
that would ask is denied), or `%config NBAgent.approver` inside the notebook. A replay is no policy: a
replayed call that would ask is decided the same way. Nobody can click Trust either: the workspace's MCP
servers start only if their configuration was trusted before, or with `--trust-workspace-mcp`. A background run must be awaited by a later
cell (`await run`), since the kernel stops after the last cell. After the last cell, the runner asks the
same kernel what its runs did and prints it.

`--replay` re-runs the notebook offline from its stored conversations (`.nbagent/sessions/`, written when
it last ran): every `%agent` answers with the recorded responses, with no network and no cost, and tools
run again (`rerun`, the default; differences from the record are shown) or return their recorded
results (`recorded`). That is how an agent notebook runs in CI without keys.

Reads: a notebook and the workspace's stored sessions and MCP configuration, any of which someone else
could have written. What stops harm: no policy means deny (nobody is asked, nothing is approved by
itself, a replay included); stored sessions are verified by the store; workspace MCP servers start only if
trusted before (or `--trust-workspace-mcp`). Running a notebook runs its cells: that is the person's choice.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from pathlib import Path
from typing import Any

from nbagent.safety.sanitize import terminal_safe
from nbagent.tools.schema_library import import_jsonschema

__all__ = ["execute_notebook", "main", "runs_summary"]

_SUMMARY_CODE = "from nbagent.jupyter.headless import runs_summary as _nbagent_summary\nprint(_nbagent_summary())"


def runs_summary() -> str:
    """In a kernel: every %agent run of the session, as plain text, with the transcript check."""
    from nbagent.render import run_text
    from nbagent.transcript import check_transcript

    from . import get_session

    session = get_session()
    if not session.runs:
        return "(no %agent run in this notebook)"
    parts = []
    for i, run in enumerate(session.runs, 1):
        problems = check_transcript(run.messages)
        valid = "transcript valid" if not problems else "TRANSCRIPT INVALID: " + "; ".join(problems)
        parts.append(f"[{i}] {run_text(run)}\n    {valid}")
    return "\n".join(parts)


def execute_notebook(
    path: str | Path,
    *,
    output: str | Path | None = None,
    env: dict[str, str] | None = None,
    timeout: int = 300,
    summary: bool = True,
    kernel_log: str | Path | None = None,
) -> tuple[Any, str]:
    """Execute a notebook in a fresh kernel (cwd: its folder); save the executed copy to `output`.

    Returns the executed notebook and the runs' summary. A cell that fails raises nbclient's
    `CellExecutionError` (after the partial notebook was saved). `kernel_log` takes the kernel's own
    stderr (its start-up warnings) instead of this terminal.
    """
    import_jsonschema()  # (nbformat imports it: see nbagent.tools.schema_library)
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    path = Path(path)
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(nb, timeout=timeout, kernel_name="python3",
                            resources={"metadata": {"path": str(path.parent.resolve())}})
    text = ""
    options: dict[str, Any] = {"env": dict(env if env is not None else os.environ)}
    options["env"].setdefault("NBAGENT_NOTEBOOK", str(path.resolve()))  # what read_notebook reads headless
    log = None
    if kernel_log is not None:
        Path(kernel_log).parent.mkdir(parents=True, exist_ok=True)
        log = options["stderr"] = open(kernel_log, "w")  # noqa: SIM115 - closed below
    try:
        with client.setup_kernel(**options):
            for index, cell in enumerate(list(nb.cells)):
                client.execute_cell(cell, index)
            if summary:
                extra = nbformat.v4.new_code_cell(_SUMMARY_CODE)
                nb.cells.append(extra)
                try:
                    client.execute_cell(extra, len(nb.cells) - 1, store_history=False)
                finally:
                    nb.cells.pop()
                text = "".join(o.get("text", "") for o in extra.outputs if o.get("output_type") == "stream")
            client.set_widgets_metadata()
    except CellExecutionError:
        if output is not None:
            _save(nb, output)
        raise
    finally:
        if log is not None:
            log.close()
    if output is not None:
        _save(nb, output)
    return nb, text.rstrip()


_WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
_WIDGET_STATE = "application/vnd.jupyter.widget-state+json"


def prune_widget_state(nb: Any) -> int:
    """Drop the saved state of widgets no output shows any more, and return how many were dropped.

    nbclient keeps the state of every widget a kernel ever made, closed ones too; a run that ended has
    put its static rendering in place of its live view, so those widgets' state (tens of KB a run) is
    dead weight in the saved notebook. What an output still shows is kept, with the widgets it names."""
    widgets = nb.metadata.get("widgets", {}).get(_WIDGET_STATE)
    if not widgets or not isinstance(widgets.get("state"), dict):
        return 0
    state = widgets["state"]
    wanted = [o["data"][_WIDGET_VIEW].get("model_id") for c in nb.cells for o in c.get("outputs", ())
              if isinstance(o.get("data"), dict) and isinstance(o["data"].get(_WIDGET_VIEW), dict)]
    keep: set[str] = set()
    while wanted:
        model = wanted.pop()
        if model in keep or model not in state:
            continue
        keep.add(model)
        wanted.extend(re.findall(r"IPY_MODEL_([0-9a-f]+)", json.dumps(state[model])))
    dropped = len(state) - len(keep)
    widgets["state"] = {k: v for k, v in state.items() if k in keep}
    if not keep:
        del nb.metadata["widgets"]
    return dropped


def _save(nb: Any, output: str | Path) -> None:
    import_jsonschema()  # (nbformat imports it: see nbagent.tools.schema_library)
    import nbformat

    prune_widget_state(nb)
    output = Path(output)
    output.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, output)


def _model_note(env: dict[str, str]) -> str:
    from nbagent.safety import keys

    from .config import KEY_VARIABLES

    stored = keys.stored_values()
    for provider, names in KEY_VARIABLES:
        for name in names:
            if env.get(name):
                return f"a real model ({provider}: {name} is set)"
            if name in stored:
                return f"a real model ({provider}: {name} is stored in {keys.keys_path()})"
    return "offline, with a ScriptedModel (no API key is set)"


def main(argv: list[str] | None = None) -> int:
    here = Path(__file__).resolve().parents[2]
    parser = argparse.ArgumentParser(prog="python -m nbagent.jupyter.headless", description=__doc__.split("\n\n")[0])
    parser.add_argument("notebook", nargs="?", default=str(here / "notebooks" / "quickstart.ipynb"))
    parser.add_argument("--out", help="where to save the executed copy (default: build/<name>.ipynb)")
    parser.add_argument("--timeout", type=int, default=300, help="seconds one cell may take")
    parser.add_argument("--trust-workspace-mcp", action="store_true",
                        help="start the MCP servers of the workspace's .mcp.json / .nbagent/mcp.json without asking "
                             "(unrecorded; only for a repository you trust)")
    parser.add_argument("--replay", nargs="?", const="rerun", choices=["rerun", "recorded"],
                        help="answer every %%agent from the notebook's stored conversations, offline; tools run "
                             "again (rerun) or return their recorded results (recorded)")
    args = parser.parse_args(argv)
    notebook = Path(args.notebook)
    out = Path(args.out) if args.out else Path("build") / notebook.name
    env = dict(os.environ)
    if env.get("PYTHONPATH"):  # the kernel starts in the notebook's folder: relative entries would move
        env["PYTHONPATH"] = os.pathsep.join(str(Path(p).resolve()) for p in env["PYTHONPATH"].split(os.pathsep) if p)
    env.setdefault("NBAGENT_NOTEBOOK", str(notebook.resolve()))  # the stored conversations name it
    if args.replay:
        env["NBAGENT_REPLAY"] = args.replay
    if args.trust_workspace_mcp:
        env["NBAGENT_TRUST_WORKSPACE_MCP"] = "1"
    policy = env.get("NBAGENT_APPROVAL", "").strip().lower()
    if policy not in ("allow", "deny"):  # nobody is there to ask, and a replay approves nothing by itself
        env["NBAGENT_APPROVAL"] = policy = "deny"
    model_note = (f"replaying its stored conversations ({args.replay}), offline" if args.replay
                  else _model_note(env))
    how = "" if os.environ.get("NBAGENT_APPROVAL", "").strip().lower() == policy else " (none was set)"
    print(f"== executing {notebook} headless: {model_note}; approvals decided by NBAGENT_APPROVAL={policy}{how}",
          flush=True)
    t0 = time.monotonic()
    from nbclient.exceptions import CellExecutionError

    try:
        _, summary = execute_notebook(notebook, output=out, env=env, timeout=args.timeout,
                                      kernel_log=out.with_suffix(".kernel.log"))
    except CellExecutionError as exc:
        print(f"!! a cell failed (the partial notebook is in {out}):\n{terminal_safe(exc)}", file=sys.stderr)
        return 1
    print(f"== done in {time.monotonic() - t0:.1f} s; the executed notebook is {out}\n")
    print(terminal_safe(summary))
    print(f"\nOpen it with: ./dev lab {out}")
    return 0 if "TRANSCRIPT INVALID" not in summary else 1


if __name__ == "__main__":
    sys.exit(main())
