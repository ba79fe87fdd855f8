"""The question a person is asked before a workspace's MCP servers start: what they would run, Trust / Not now.

    ┌ MCP servers configured in this workspace: not started (not trusted yet) ───────────────────────┐
    │ /work/repo/.mcp.json · sha256 3f2a…                                                           │
    │ web   sends requests to https://mcp.example.com/mcp   headers: Authorization                   │
    │       ! sends the value of GITHUB_TOKEN from the kernel's environment to https://mcp.example.com │
    │ [Trust these servers]  [Not now]                                                              │
    └───────────────────────────────────────────────────────────────────────────────────────────────┘

Reads: a workspace configuration (`nbagent.mcp.WorkspaceConfig`): someone else may have written every
character of it, so everything shown is escaped, nothing is expanded (`${VAR}` is shown as written), and
the trust recorded is for the digest of exactly the bytes shown (a file changed since asks again). A click
(which may run on a kernel subshell's thread) hands the decision to the loop the prompt was made on with
`call_soon_threadsafe`; the trust is recorded there, and the run's next turn starts the servers. The page's
own comm may carry the answer instead (`TrustPrompt.answer`): taken only with the digest the prompt showed.
"""

from __future__ import annotations

import asyncio
import html
import re
import uuid
from typing import Any

import ipywidgets as W
from IPython.core.error import UsageError

from nbagent.safety.shown import shown, shown_html

__all__ = ["TrustPrompt", "consent_html"]


def consent_html(config: Any) -> str:
    """The prompt's text: every server with its command and args (or URL), cwd, the variables it sets with
    their values (credentials redacted), the names of its headers, the kernel's variables it reads, warnings,
    and every workspace file its servers run. All of it through `shown_html` (escaped, hidden characters shown)."""
    from nbagent.mcp import server_summary
    from nbagent.mcp._workspace import SHOWN_PINS

    e = shown_html
    rows = []
    for server in config.servers.values():
        s = server_summary(server)
        if s["transport"] == "stdio":
            what = f"runs <code>{e(s['command'] or '')}</code>"
            if s["args"]:
                what += " with arguments " + " ".join(f"<code>{e(a)}</code>" for a in s["args"])
            if s["cwd"]:
                what += f" in <code>{e(s['cwd'])}</code>"
            if s["env"]:
                what += "<br>environment it sets: " + ", ".join(
                    f"<code>{e(n)}={e(v)}</code>" for n, v in s["env_values"].items())
        else:
            what = f"sends requests to <code>{e(s['url'] or '')}</code>"
            if s["headers"]:
                what += "<br>headers: " + ", ".join(f"<code>{e(n)}</code>" for n in s["headers"])
        warnings = "".join(f"<br><b>! {e(w)}</b>" for w in s["warnings"])
        rows.append(f"<tr><td><b>{e(s['name'])}</b></td><td>{what}{warnings}</td></tr>")
    if config.pinned:
        rows.append(f"<tr><td></td><td>runs code from {len(config.pinned)} workspace file(s) (every file in the "
                    "folders its servers run from): adding, removing or changing one asks again</td></tr>")
    for path, digest in list(config.pinned.items())[:SHOWN_PINS]:
        rows.append(f"<tr><td></td><td>runs the workspace file <code>{e(path)}</code> (sha256 {e(digest[:16])}): "
                    "a change to it asks again</td></tr>")
    if len(config.pinned) > SHOWN_PINS:
        rows.append(f"<tr><td></td><td>... and {len(config.pinned) - SHOWN_PINS} more</td></tr>")
    return (f"<div class='nbagent-consent'><b>MCP servers configured in this workspace: not started (not trusted "
            f"yet)</b><br><code>{e(str(config.path))}</code> · sha256 {e(config.digest[:16])}<br>Anything that "
            "can write the workspace could have written this file (the model, a cloned repository, a download). "
            "Trusting it starts what it names, outside the sandbox, and sends what it says.<table>"
            + "".join(rows) + "</table></div>")


class TrustPrompt:
    """One workspace configuration waiting for the person: its widget, and the decision once made.

    Shown through the session's kept displays (notebook/kept.py), it outlives its kernel like a run's view:
    the page keeps what it would say if the kernel stopped now (not answered; asked again next time) and puts
    it in place of the widget on a restart or in a reopened notebook; once decided, every display of it holds
    the decision and the widgets go. Its question names the digest of the configuration shown
    (`data-nba-consent`): with nbagent's extension the page sends Trust / Not now through its own
    `nbagent.panel` comm bound to that digest (`answer`), so they arrive where another page closed the widgets.
    """

    def __init__(self, config: Any, loop: asyncio.AbstractEventLoop | None = None) -> None:
        self.config = config
        self.loop = loop
        self.decision: bool | None = None
        self.display_id = uuid.uuid4().hex
        self.key = ("trust", str(config.digest))
        """How the page's comm finds this prompt: by the digest of the configuration it shows."""
        self.keeper: Any = None
        """What keeps the prompt's displays (notebook/kept.py), once shown there."""
        self.note = ""
        """What came of the decision (HTML), once made."""
        self.text = W.HTML(self._question())
        self.trust_button = W.Button(description="Trust these servers", icon="check", button_style="warning",
                                     tooltip="Record that you trust exactly this content; its servers start",
                                     layout=W.Layout(width="auto"), _dom_classes=("nba-trust",))
        self.later_button = W.Button(description="Not now", icon="times",
                                     tooltip="Runs go on without these servers; you are asked again next time",
                                     layout=W.Layout(width="auto"), _dom_classes=("nba-later",))
        self.trust_button.on_click(lambda _: self.hand(True))
        self.later_button.on_click(lambda _: self.hand(False))
        self.buttons = W.HBox([self.trust_button, self.later_button], _dom_classes=("nba-buttons",))
        self.widget = W.VBox([self.text, self.buttons], _dom_classes=("nba-consent-view",))

    def _question(self) -> str:
        digest = shown_html(str(self.config.digest))
        return f'<div class="nba-consent-q" data-nba-consent="{digest}">{consent_html(self.config)}</div>'

    # -- renderings (notebook/kept.py) ---------------------------------------------------------------------
    def live_text(self) -> str:
        names = ", ".join(shown(name) for name in self.config.servers)
        return (f"MCP servers configured in this workspace, not trusted yet: {names} ({shown(self.config.path)}, sha256 "
                f"{str(self.config.digest)[:16]}). Trust these servers, or Not now, in the notebook.")

    def stopped_bundle(self) -> dict[str, str]:
        """What the cell says if the kernel stops before an answer: nothing was trusted; asked again next time."""
        note = ("Not answered: the kernel stopped before you chose. Nothing was trusted and nothing started; "
                "%agent asks again in the next session.")
        return {"text/html": f"{consent_html(self.config)}<p><b>{shown_html(note)}</b></p>",
                "text/plain": f"{self.live_text()}\n{note}"}

    def final_bundle(self) -> dict[str, str]:
        """What the cell keeps once the person decided."""
        return {"text/html": f"{consent_html(self.config)}<p>{self.note}</p>",
                "text/plain": f"{self.live_text()}\n{html.unescape(re.sub('<[^>]+>', '', self.note))}"}

    # -- decisions -------------------------------------------------------------------------------------------
    def hand(self, trusted: bool) -> None:
        """A click: the decision goes to the prompt's loop (safe from any thread)."""
        loop = self.loop
        if loop is None or loop.is_closed():
            self.decide(trusted)
            return
        loop.call_soon_threadsafe(self.decide, trusted)

    def answer(self, shown: str, trusted: bool) -> dict[str, Any]:
        """The page's answer (through its comm, on the kernel's loop) to the prompt it showed for the configuration
        whose digest is `shown`: taken only for that digest, once."""
        if shown != self.config.digest:
            raise UsageError("refused: the configuration asking now differs from the one shown; nothing was trusted")
        if self.decision is not None:
            return {"taken": False, "why": "this prompt was answered already"}
        self.decide(trusted)
        return {"taken": self.decision is not None}

    def decide(self, trusted: bool) -> None:
        """On the prompt's loop: record the trust (for the digest shown) and say what happens now."""
        if self.decision is not None:
            return
        self.decision = trusted
        names = list(self.config.servers)
        shown = shown_html(", ".join(names))
        if trusted:
            try:
                self.config.trust()
            except Exception as exc:  # a trust store that cannot be written: say so, start nothing
                self.decision = None
                self.text.value += f"<p><b>Could not record the trust: {shown_html(str(exc))}</b></p>"
                return
            verb = "starts" if len(names) == 1 else "start"
            self.note = f"Trusted: {shown} {verb} with the next turn (asked again if the file changes)."
        else:
            self.note = f"Not now: runs go on without {shown}; %agent asks again in the next session."
        self.buttons.layout.display = "none"
        self.text.value += f"<p>{self.note}</p>"
        if self.keeper is not None:
            self.keeper.end(self)

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        return self.widget._repr_mimebundle_(**kwargs)
