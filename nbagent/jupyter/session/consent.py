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
`call_soon_threadsafe`; the trust is recorded there, and the run's next turn starts the servers.
"""

from __future__ import annotations

import asyncio
import html
from typing import Any

import ipywidgets as W

__all__ = ["TrustPrompt", "consent_html"]


def consent_html(config: Any) -> str:
    """The prompt's text: every server with its command and args (or URL), cwd, the names of the variables
    it sets and of its headers, the kernel's variables it reads, and warnings. All of it escaped."""
    from nbagent.mcp import server_summary

    e = html.escape
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
                what += "<br>environment it sets: " + ", ".join(f"<code>{e(n)}</code>" for n in s["env"])
        else:
            what = f"sends requests to <code>{e(s['url'] or '')}</code>"
            if s["headers"]:
                what += "<br>headers: " + ", ".join(f"<code>{e(n)}</code>" for n in s["headers"])
        warnings = "".join(f"<br><b>! {e(w)}</b>" for w in s["warnings"])
        rows.append(f"<tr><td><b>{e(s['name'])}</b></td><td>{what}{warnings}</td></tr>")
    for path, digest in config.pinned.items():
        rows.append(f"<tr><td></td><td>runs the workspace file <code>{e(path)}</code> (sha256 {e(digest[:16])}): "
                    "a change to it asks again</td></tr>")
    return (f"<div class='nbagent-consent'><b>MCP servers configured in this workspace: not started (not trusted "
            f"yet)</b><br><code>{e(str(config.path))}</code> · sha256 {e(config.digest[:16])}<br>Anything that "
            "can write the workspace could have written this file (the model, a cloned repository, a download). "
            "Trusting it starts what it names, outside the sandbox, and sends what it says.<table>"
            + "".join(rows) + "</table></div>")


class TrustPrompt:
    """One workspace configuration waiting for the person: its widget, and the decision once made."""

    def __init__(self, config: Any, loop: asyncio.AbstractEventLoop | None = None) -> None:
        self.config = config
        self.loop = loop
        self.decision: bool | None = None
        self.text = W.HTML(consent_html(config))
        self.trust_button = W.Button(description="Trust these servers", icon="check", button_style="warning",
                                     tooltip="Record that you trust exactly this content; its servers start")
        self.later_button = W.Button(description="Not now", icon="times",
                                     tooltip="Runs go on without these servers; you are asked again next time")
        self.trust_button.on_click(lambda _: self.hand(True))
        self.later_button.on_click(lambda _: self.hand(False))
        self.buttons = W.HBox([self.trust_button, self.later_button])
        self.widget = W.VBox([self.text, self.buttons])

    def hand(self, trusted: bool) -> None:
        """A click: the decision goes to the prompt's loop (safe from any thread)."""
        loop = self.loop
        if loop is None or loop.is_closed():
            self.decide(trusted)
            return
        loop.call_soon_threadsafe(self.decide, trusted)

    def decide(self, trusted: bool) -> None:
        """On the prompt's loop: record the trust (for the digest shown) and say what happens now."""
        if self.decision is not None:
            return
        self.decision = trusted
        names = ", ".join(self.config.servers)
        if trusted:
            try:
                self.config.trust()
            except Exception as exc:  # a trust store that cannot be written: say so, start nothing
                self.decision = None
                self.text.value += f"<p><b>Could not record the trust: {html.escape(str(exc))}</b></p>"
                return
            note = f"Trusted: {html.escape(names)} start with the next turn (asked again if the file changes)."
        else:
            note = f"Not now: runs go on without {html.escape(names)}; %agent asks again in the next session."
        self.buttons.layout.display = "none"
        self.text.value += f"<p>{note}</p>"

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        return self.widget._repr_mimebundle_(**kwargs)
