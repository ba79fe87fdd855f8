"""The nbagent panel in a page of the browser tests (./lab.py): opened from the notebook's toolbar, a prompt
sent, its words waited for (the panel draws asynchronously: a test waits for what it reads)."""

from __future__ import annotations

from typing import Any

from .lab import LabPage

PANEL = "#nbagent-panel"
CONNECTED = (f"() => !!document.querySelector('{PANEL} .nba-panel-m') && "
             f"!document.querySelector('{PANEL} .nba-panel-absent')")
"""The panel shows the kernel's conversation (its model chip), and does not say nbagent is absent."""


class Panel:
    """The nbagent panel of a `LabPage`: `find(css)` locates inside it; `open()` opens it from the notebook's
    toolbar; `send()` and `ask()` type a prompt; `wait_text()` and `wait_runs()` wait for its words."""

    def __init__(self, page: LabPage) -> None:
        self.page = page

    def find(self, css: str = "") -> Any:
        """The panel (or what `css` matches inside it)."""
        return self.page.page.locator(f"{PANEL} {css}" if css else PANEL)

    def open(self, timeout: float = 30) -> Panel:
        """The toolbar's "Ask nbagent" opens the panel about the selected cell; the chip's ✕ makes the prompt
        about the notebook; then wait until the panel shows the kernel's conversation."""
        self.page.page.locator(".nba-toolbar-ask").first.click()
        self.find(".nba-panel-prompt").wait_for(state="visible", timeout=15_000)
        chip = self.find(".nba-panel-chip-x")
        if chip.count():
            chip.click()
        self.page.wait_for("the panel did not connect to the kernel", CONNECTED, timeout=timeout)
        return self

    def text(self, css: str = "") -> str:
        """What the panel (or the first match of `css` in it) says now: for what a test waited for already."""
        return self.find(css).first.inner_text()

    def wait_text(self, css: str, *texts: str, timeout: float = 30) -> str:
        """The text of the first match of `css` in the panel once it holds every one of `texts`."""
        return self.page.wait_text(self.find(css), *texts, timeout=timeout)

    def wait_runs(self, what: str, *texts: str, timeout: float = 30) -> None:
        """Wait until the runs shown hold every one of `texts` (`what` says what did not happen)."""
        self.page.wait_for(what, f"ts => {{ const r = document.querySelector('{PANEL} .nba-panel-runs'); "
                           "return !!r && ts.every(t => r.innerText.includes(t)); }",
                           arg=list(texts), timeout=timeout)

    def send(self, words: str, *, plan_first: bool = False) -> None:
        """Type `words` in the prompt box (with "plan first" ticked) and click Send."""
        self.find(".nba-panel-prompt").fill(words)
        if plan_first:
            self.find(".nba-panel-planfirst").check()
        self.find(".nba-panel-send").click()

    def ask(self, words: str, answer: str, timeout: float = 30) -> None:
        """Send `words`; wait until the run answered `answer` and ended (its static rendering shows)."""
        self.send(words)
        self.page.wait_for(f"the panel's run did not answer {answer!r}",
                           f"a => document.querySelector('{PANEL} .nba-panel-runs').innerText.includes(a) && "
                           f"!!document.querySelector('{PANEL} .nba-panel-static')", arg=answer, timeout=timeout)

    def approve(self) -> None:
        """Click Approve on the first call waiting in the panel's live view (once it shows)."""
        approve = self.find(".nba-panel-live button.nba-approve:visible").first
        approve.wait_for(state="visible", timeout=30_000)
        self.page.click_until_gone(approve)
