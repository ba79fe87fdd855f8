"""A screenshot of the header's context gauge and cost, for the README, taken in JupyterLab in Debian's chromium.

    python docs/make_context_screenshot.py [--out docs/context-gauge.png]

A scripted model stands in for claude-sonnet-4-5 (its responses say so, report their input tokens, with
the part read from the prompt cache, and are priced from the price table). The first %agent reads fifteen
large log files; the second continues the conversation, which fills the window past 80%, so it is compacted
before its second request: the picture shows the second run's view (gauge, run and conversation cost, the
compaction).
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

SETUP = '''from nbagent import AssistantMessage, ScriptedModel, ToolCall, Usage, tool
from nbagent.budget.compaction import SUMMARY_REQUEST
from nbagent.messages import UserMessage
from nbagent.budget.window import estimate_tokens

LOGS = {f"logs/day{i}.txt": "\\n".join(f"2025-03-{i:02d} 10:{m % 60:02d} GET /api/orders 200 {m * 7 % 900} ms"
                                        for m in range(2600)) for i in range(1, 18)}


@tool(read_only=True, describe_activity=lambda a: f"Reading {a.path}",
      describe_completed_activity=lambda a, r: f"Read {len(r.splitlines()):,} lines of {a.path}")
def read_log(path: str) -> str:
    """Read a log file."""
    return LOGS[path]


cached = {"tokens": 0}


def answer(messages, **kw):
    tokens = estimate_tokens(messages) + 900
    # the prefix sent last time is read from the cache (none of it after a compaction changed the prefix)
    usage = Usage(tokens, kw.pop("out", 60), cache_read_tokens=cached["tokens"] if tokens >= cached["tokens"] else 0)
    cached["tokens"] = tokens
    return AssistantMessage(usage=usage, model="claude-sonnet-4-5", provider="anthropic", **kw)


def reader(paths, final):
    def respond(messages):
        last = messages[-1]
        if isinstance(last, UserMessage) and last.text.startswith(SUMMARY_REQUEST):
            return answer(messages, text="The user asked about slow requests; the agent read day1-day3.", out=300)
        read = {c.arguments["path"] for m in messages if m.kind == "assistant" for c in m.tool_calls}
        todo = [p for p in paths if p not in read]
        if todo:
            return answer(messages, text="", tool_calls=[ToolCall(name="read_log", arguments={"path": todo[0]})])
        return answer(messages, text=final, out=120)
    return respond


model = ScriptedModel([reader([f"logs/day{i}.txt" for i in range(1, 16)],
                              "The slowest requests are at **10:51** and **10:25** on every day (over 800 ms).")] * 16
                      + [reader([f"logs/day{i}.txt" for i in range(1, 18)],
                                "Days 16 and 17 look the same: the **10:51** spike repeats daily.")] * 6,
                      name="claude-sonnet-4-5", delay=0.01)'''


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=str(ROOT / "docs" / "context-gauge.png"))
    args = parser.parse_args()
    out = Path(args.out)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        write_notebook(root / "demo.ipynb", [
            "%load_ext nbagent\n%config NBAgent.approver = 'allow'",
            (SETUP, {"jupyter": {"source_hidden": True}}),
            "first = %agent --wait --model model --tools read_log Which requests are slow in the logs of March 1-15?",
            "run = %agent --wait --model model --tools read_log And on the 16th and 17th?",
        ])
        server = LabServer(root, app="lab")
        page = None
        try:
            page = LabPage(server, "demo.ipynb", width=1100, height=1300)
            page.hide_sidebar()
            p = page.page
            page.run_all()
            # a finished run's live view gives way to its static rendering: count either
            p.wait_for_function("document.querySelectorAll('.nba-head .nba-s-done').length >= 2", timeout=90_000)
            time.sleep(1.0)
            view = p.locator(".nba-head").nth(1).locator("xpath=ancestor::div[contains(@class, 'nba')][last()]")
            view.scroll_into_view_if_needed()
            view.screenshot(path=str(out))
        finally:
            if page is not None:
                page.close()
            server.stop()
    print(f"saved {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
