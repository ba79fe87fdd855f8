"""Screenshots of the live view, for the README: the quickstart in JupyterLab (or Notebook 7), in chromium.

    python docs/make_screenshot.py [--app lab|notebook] [--theme "JupyterLab Dark"] [--out docs/live-view.png]

Runs all of notebooks/quickstart.ipynb (offline), shoots the view while the destructive call waits for
approval, clicks Approve, and shoots the finished run: live, and as `await run` renders it.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.jupyter.lab import LabPage, LabServer  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--app", choices=["lab", "notebook"], default="lab")
    parser.add_argument("--theme", default=None, help='e.g. "JupyterLab Dark"')
    parser.add_argument("--out", default=str(ROOT / "docs" / "live-view.png"))
    parser.add_argument("--width", type=int, default=1180)
    parser.add_argument("--height", type=int, default=1250)
    args = parser.parse_args()
    out = Path(args.out)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        shutil.copy(ROOT / "notebooks" / "quickstart.ipynb", root / "quickstart.ipynb")
        server = LabServer(root, app=args.app, theme=args.theme)
        page = None
        try:
            page = LabPage(server, "quickstart.ipynb", width=args.width, height=args.height)
            if args.app == "lab":
                page.hide_sidebar()
            p = page.page
            page.run_all()  # the `await run` cell then waits for the click
            p.wait_for_selector(".nba-view button.nba-approve", state="visible", timeout=30_000)
            time.sleep(0.6)
            p.evaluate("document.querySelector('.nba-view').scrollIntoView({block: 'end'})")
            time.sleep(0.3)
            page.shot(out.stem + "-page")
            p.locator(".nba-view").first.screenshot(path=str(out))
            p.click(".nba-view button.nba-approve")
            p.wait_for_selector(".nba-view .nba-head .nba-s-done", timeout=30_000)
            time.sleep(0.5)
            p.locator(".nba-view").first.screenshot(path=str(out.with_name(out.stem + "-done.png")))
            p.wait_for_selector(".jp-OutputArea-output .nba:not(.nba-view)", timeout=30_000)
            p.locator(".jp-OutputArea-output .nba:not(.nba-view)").first.screenshot(
                path=str(out.with_name(out.stem + "-static.png")))
        finally:
            if page is not None:
                page.close()
            server.stop()
    print(f"saved {out} and {out.with_name(out.stem + '-done.png')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
