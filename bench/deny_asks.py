"""What a deny rule costs the commands it does not name, and how often the notebooks ask a person.

    python bench/deny_asks.py [--checkout PATH] [--notebooks] [--show]

A deny rule fails closed: a command that may run a program nbagent does not know to run no others is
denied under it. This counts, over the commands of the docs' pages on the built-in tools and of the tests
(the corpus of `bench/asks.py`), how many `deny: shell(rm *)` (the docs' own example rule) denies, and how many of
those do not name `rm` at all: the price of failing closed. Each command is judged where it would run: a
scratch workspace holding a plain git repository, inside the OS sandbox. `--checkout` measures another
checkout's nbagent on the same corpus (the main branch, say: before and after a change). `--notebooks`
also runs every notebook of `notebooks/` headless (approvals answered by `NBAGENT_APPROVAL=allow`) and
counts the calls that asked, that is, the approvals a person would have been asked for.
"""

from __future__ import annotations

import argparse
import inspect
import os
import re
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _load(checkout: Path):
    sys.path.insert(0, str(checkout))
    import nbagent  # noqa: F401 - from the checkout measured

    sys.path.insert(1, str(ROOT / "bench"))
    import asks  # the corpus (asks.py puts this checkout on the path, after the one measured)

    from nbagent.toolbox._shellrules import pattern_matches

    return asks, pattern_matches


def deny_counts(asks, pattern_matches, show: bool) -> None:
    takes_where = "where" in inspect.signature(pattern_matches).parameters
    where = None
    ws = asks.scratch()
    try:
        if takes_where:
            from nbagent.toolbox._leaves import Where

            where = Where(str(ws.resolve()), sandboxed=True)
        docs = getattr(asks, "docs_commands", None) or asks.readme_commands  # the README's tools moved to docs/
        for corpus, commands in (("docs", docs()), ("tests", asks.test_commands())):
            commands = [c for c in commands if "\x00" not in c]
            denied = []
            for command in commands:
                args = (where,) if takes_where else ()
                if pattern_matches("rm *", command, "deny", *args):
                    denied.append(command)
            names_rm = [c for c in denied if re.search(r"(^|[\s;&|(`'\"/])rm(\s|$)", c)]
            print(f"{corpus}: {len(commands)} commands; `deny: shell(rm *)` denies {len(denied)}, "
                  f"of which {len(denied) - len(names_rm)} do not name rm")
            if show:
                for c in denied:
                    if c not in names_rm:
                        print(f"   denied: {c!r}")
    finally:
        shutil.rmtree(ws, ignore_errors=True)


_COUNT = ("from nbagent.jupyter import get_session as _g\n"
          "print('ASKED', sum(1 for r in _g().runs for c in r.calls if getattr(c.decision, 'source', '') in "
          "('policy', 'user')))")


def notebook_asks(checkout: Path) -> None:
    import tempfile

    import nbformat
    from nbclient import NotebookClient

    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        with tempfile.TemporaryDirectory() as tmp:
            copy = Path(shutil.copy(path, tmp))
            nb = nbformat.read(copy, as_version=4)
            nb.cells.append(nbformat.v4.new_code_cell(_COUNT))
            env = {**os.environ, "NBAGENT_APPROVAL": "allow", "PYTHONPATH": str(checkout),
                   "NBAGENT_NOTEBOOK": str(copy), "HOME": os.environ.get("HOME", tmp)}
            client = NotebookClient(nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": tmp}})
            with client.setup_kernel(env=env):
                for index, cell in enumerate(nb.cells):
                    client.execute_cell(cell, index)
            out = "".join(o.get("text", "") for o in nb.cells[-1].outputs if o.get("output_type") == "stream")
            print(f"{path.name}: {out.strip() or '(no count)'} (calls that asked for approval)")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--checkout", type=Path, default=ROOT, help="the nbagent checkout to measure")
    parser.add_argument("--notebooks", action="store_true", help="also count the notebooks' approvals")
    parser.add_argument("--show", action="store_true", help="list the denied commands that do not name rm")
    opts = parser.parse_args()
    asks, pattern_matches = _load(opts.checkout.resolve())
    import nbagent

    print(f"nbagent from {Path(nbagent.__file__).parent.parent}")
    deny_counts(asks, pattern_matches, opts.show)
    if opts.notebooks:
        notebook_asks(opts.checkout.resolve())


if __name__ == "__main__":
    main()
