"""Screenshots of reproducible agent work, for docs/notebook/reproducible.md, taken in JupyterLab in chromium.

    python docs/make_repro_screenshot.py [--out-dir docs]

A scripted model loads a CSV and cleans it in python calls (one replaced later, one failing, one only
printing) and defines a helper. Pictures: the finished run's header naming what exists only in the
kernel (`reproducible-kernel-only.png`); `%agent --to-cells` proposing the first cell on the run's cell,
with Accept / Reject (`reproducible-to-cells.png`); and `%agent --check` after the cells were accepted
and the notebook saved (`reproducible-check.png`).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.jupyter.browser.lab import LabPage, LabServer, write_notebook  # noqa: E402

CSV = "item,price,qty\napple,1.5,4\npear,,2\nfig,3.25,1\nplum,0.75,\nkiwi,2.0,3\n"
CODES = [
    "df = pd.read_csv('sales.csv')",
    "df_clean = df.dropna()",
    "df_clean['ratio'] = df_clean.price / df_clean.weight",
    "print(df.describe())",
    "df_clean = df.dropna().reset_index(drop=True)\ndf_clean['total'] = df_clean.price * df_clean.qty",
    "def total_of(frame):\n    return round(float(frame.total.sum()), 2)",
]
SETUP = f'''import pandas as pd
from nbagent import AssistantMessage, ScriptedModel, ToolCall
codes = {CODES!r}
model = ScriptedModel([AssistantMessage(text=f"Step {{i + 1}}.", tool_calls=[ToolCall(id=f"call{{i}}", name="python",
                       arguments={{"code": c}})]) for i, c in enumerate(codes)]
                      + ["`df_clean` holds the 3 complete rows with a `total`; `total_of(df_clean)` sums it."],
                      delay=0.01)
%config NBAgent.rules = ["allow: python"]'''
PROMPT = "run = %agent --model model --wait Load sales.csv into df and clean it into df_clean"
USE = "total_of(df_clean)"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out-dir", default=str(ROOT / "docs"))
    args = parser.parse_args()
    out = Path(args.out_dir)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "sales.csv").write_text(CSV)
        write_notebook(root / "sales.ipynb", ["%load_ext nbagent", (SETUP, {"jupyter": {"source_hidden": True}}),
                                              PROMPT, USE, "%agent --to-cells", "%agent --check"])
        server = LabServer(root)
        page = None
        try:
            page = LabPage(server, "sales.ipynb", width=1150, height=1100)
            page.hide_sidebar()
            p = page.page
            for i in range(3):
                page.run_cell(i, timeout=90)
            run_view = page.code_cells.nth(2).locator(".jp-OutputArea .nba:not(.nba-view)")
            page.wait_text(run_view, "exist only in the kernel", timeout=60)
            time.sleep(0.5)
            box = run_view.first.bounding_box()
            p.screenshot(path=str(out / "reproducible-kernel-only.png"),
                         clip={"x": box["x"], "y": box["y"], "width": box["width"], "height": min(box["height"], 330)})

            page.run_cell(4, wait=False)  # %agent --to-cells: a review on the run's cell
            review = page.code_cells.nth(2).locator(".nba-review")
            review.wait_for(state="visible", timeout=60_000)
            review.scroll_into_view_if_needed()
            time.sleep(0.5)
            box = review.bounding_box()
            top = max(0, box["y"] - 150)  # the end of the run's view above the proposal
            p.screenshot(path=str(out / "reproducible-to-cells.png"),
                         clip={"x": box["x"] - 10, "y": top, "width": box["width"] + 20, "height": box["y"] + box["height"] - top + 10})
            for k in range(3):  # Accept each proposal where it is shown (below the run's cell, then each new one)
                button = p.locator(".nba-review button.nba-accept:visible").first
                button.wait_for(state="visible", timeout=60_000)
                button.click()
                page.wait_cells(lambda cells, k=k: sum("# nbagent: step" in c["source"] for c in cells) == k + 1,
                                f"the cell of step {k + 1} was not inserted", timeout=60)
            p.keyboard.press("Control+s")
            time.sleep(2)
            check = page.code_cells.nth(8)  # setup, load_ext, run, 3 cells, use, --to-cells, --check
            page.run_cell(8, timeout=300)
            page.wait_text(check.locator(".jp-OutputArea"), "reproducible", timeout=300)
            check.scroll_into_view_if_needed()
            time.sleep(0.5)
            check.locator(".jp-OutputArea").screenshot(path=str(out / "reproducible-check.png"))
        finally:
            if page is not None:
                page.close()
            server.stop()
    print(f"saved the three pictures in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
