"""Screenshots of the live view, for the README, taken in JupyterLab (or Notebook 7) in Debian's chromium.

    python docs/make_screenshot.py [--app lab|notebook] [--theme "JupyterLab Dark"] [--out docs/live-view.png]

A scripted model answers with three calls in one batch: a quick read-only one (its DataFrame result), a slow
one reporting progress and output, and a destructive one waiting for approval. The first picture is taken
while all three are on screen; then Approve is clicked and the second picture shows the finished run.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.jupyter.lab import LabPage, LabServer, write_notebook  # noqa: E402

SETUP = '''import asyncio
from pathlib import Path

import pandas as pd
from nbagent import AssistantMessage, ScriptedModel, ToolCall, ToolContext, tool

sales = pd.DataFrame({"region": ["North", "South", "East", "West"] * 3,
                      "month": ["Jan"] * 4 + ["Feb"] * 4 + ["Mar"] * 4,
                      "revenue": [120, 80, 95, 60, 130, 82, 99, 58, 151, 85, 97, 61]})


@tool(read_only=True, describe_activity=lambda a: f"Totalling revenue by {a.column}",
      describe_completed_activity=lambda a, r: f"Totalled revenue for {len(r)} values of {a.column}")
def revenue_by(column: str) -> pd.DataFrame:
    """Total revenue of `sales`, grouped by a column."""
    return sales.groupby(column, sort=False)[["revenue"]].sum()


@tool(read_only=True, describe_activity=lambda a: f"Fitting a monthly trend to {a.column}",
      describe_completed_activity=lambda a, r: f"Fitted a trend: {r['slope']:+.1f} a month")
async def fit_trend(column: str, ctx: ToolContext) -> dict:
    """Fit a linear trend to a column, month by month (slow)."""
    for i in range(80):
        ctx.progress(f"iteration {i + 1} of 80", fraction=(i + 1) / 80,
                     output=f"iter {i + 1:3d}   loss {1 / (i + 1):.5f}   slope {7.9 * (1 - 0.9 ** (i + 1)):+.3f}\\n")
        await asyncio.sleep(0.1)
    return {"slope": 7.9, "r2": 0.93}


@tool(destructive=True, describe_activity=lambda a: f"Writing {a.path}",
      describe_completed_activity=lambda a, r: f"Wrote {a.path}")
def save_report(path: str, text: str) -> str:
    """Write a Markdown report to a file."""
    Path(path).write_text(text)
    return f"saved {path}"


model = ScriptedModel([
    AssistantMessage(text="I'll total revenue by region, fit a trend, and save a **short report** meanwhile.",
                     tool_calls=[
        ToolCall(name="revenue_by", arguments={"column": "region"}),
        ToolCall(name="fit_trend", arguments={"column": "revenue"}),
        ToolCall(name="save_report", arguments={"path": "report.md", "text": "# Revenue\\n\\nNorth leads: 401 of 1,118 (36%).\\nRevenue grows about 8 a month.\\n"}),
    ]),
    "**North** drives revenue (401 of 1,118), and revenue grows by about **7.9 a month** (R² 0.93). "
    "The report is in `report.md`.",
], delay=0.02)'''

PROMPT = "run = %agent --model model --tools revenue_by,fit_trend,save_report Which region drives revenue in `sales`?"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--app", choices=["lab", "notebook"], default="lab")
    parser.add_argument("--theme", default=None, help='e.g. "JupyterLab Dark"')
    parser.add_argument("--out", default=str(ROOT / "docs" / "live-view.png"))
    parser.add_argument("--width", type=int, default=1100)
    parser.add_argument("--height", type=int, default=1300)
    args = parser.parse_args()
    out = Path(args.out)
    done = out.with_name(out.stem + "-done.png")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        write_notebook(root / "demo.ipynb", ["%load_ext nbagent", (SETUP, {"jupyter": {"source_hidden": True}}),
                                             PROMPT])
        server = LabServer(root, app=args.app, theme=args.theme)
        page = None
        try:
            page = LabPage(server, "demo.ipynb", width=args.width, height=args.height)
            if args.app == "lab":
                page.hide_sidebar()
            p = page.page
            page.run_all()
            p.wait_for_selector(".nba-view button.nba-approve", state="visible", timeout=30_000)
            time.sleep(3.5)  # the slow call is about half-way
            p.locator(".nba-view").first.screenshot(path=str(out))
            p.click(".nba-view button.nba-approve")
            # the run ended: its cell holds the static rendering in place of the live view
            final = ".jp-OutputArea .nba:not(.nba-view)"
            p.wait_for_selector(f"{final} .nba-head .nba-s-done", timeout=60_000)
            time.sleep(0.5)
            p.locator(final).first.screenshot(path=str(done))
        finally:
            if page is not None:
                page.close()
            server.stop()
    print(f"saved {out} and {done}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
