"""`%agent --map VAR [--concurrency N] [--output TYPE] [--resume [ID]] PROMPT`: one agent over many inputs,
shown in one live batch view.

    batch = %agent --map df --concurrency 8 --output Label Label this ticket: {text}

The view: a progress bar, counts (done, running, waiting for you, failed), throughput, tokens per minute
against the limit, cost so far and projected, the latest items with their answers (a structured answer in
columns); calls that need a person wait in one list, each with Approve / Deny (and a reason the model reads) /
"Approve all ..." (what it grants is its label: for a file, everything under the file's folder, where the
other items write theirs; `nbagent.calls.grants.batch_grant`); "Open" shows an item's own run view. When the
batch ends, the cell keeps its static rendering (`nbagent.render.batch`), which the saved notebook holds, like a
run's.

Like a run's view it outlives its kernel (notebook/kept.py): the page keeps its rendering as it would read if
the kernel stopped now, saying how to go on (`--resume` asks only for the items not done), and puts it in place
of the widget on a restart or in a reopened notebook.

Each question names its batch, its call and the digest of the call and its exact arguments (`data-nba-batch`,
`data-nba-call`, `data-nba-digest`): with nbagent's extension the page sends a click on these buttons through
its own `nbagent.panel` comm, bound to that digest (`decide`, from panel/hub.py), so it arrives where another
page closed the widgets (Notebook 7's file-browser tab does). A click, from whichever path, is handed to the
batch's loop and taken once.

Batches are stored as they go (`.nbagent/batches/`): after a kernel restart, the same `%agent --map` with
`--resume` (the workspace's latest batch) or `--resume ID` asks only for the items not done.

Reads: the notebook variable named by --map (the person's data: its strings reach the model, which may be
prompt-injected by them; each item runs under the same permissions as a single %agent) and the --output
name (looked up in the notebook's namespace: the person's own objects). Answers reach the page escaped; the
arguments a question shows are shown whole (never clipped).
"""

from __future__ import annotations

import asyncio
import re
import uuid
from typing import Any

import ipywidgets as W
from IPython.core.error import UsageError
from IPython.display import display

from nbagent import render
from nbagent.render import batch as render_batch
from nbagent.safety.shown import hidden_warnings, shown, shown_html

from .approval import digest
from .widget_kit import html_part, make_button, shared

__all__ = ["BatchView", "start_batch_here"]

UPDATE_SECONDS = 0.5


def start_batch_here(session: Any, shell: Any, args: Any, prompt: str, options: Any) -> Any:
    """Start `%agent --map`: the inputs from the notebook, the session's agent, one view; returns the batch."""
    if not prompt:
        raise UsageError("%agent --map VAR needs a prompt, a template such as: Label this ticket: {text}")
    if args.map not in shell.user_ns:
        raise UsageError(f"--map {args.map}: there is no variable {args.map!r} in the notebook")
    inputs = shell.user_ns[args.map]
    output_type = None
    if args.output:
        output_type = shell.user_ns.get(args.output)
        if output_type is None:
            raise UsageError(f"--output {args.output}: there is no type {args.output!r} in the notebook")
    if args.concurrency is not None and args.concurrency < 1:
        raise UsageError("--concurrency must be at least 1")
    agent = session.agents.agent(options)
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        raise UsageError("%agent --map needs the kernel's event loop (run it in Jupyter, not terminal IPython)") from None
    resume = None
    if args.resume is not None:
        resume = args.resume or True
    try:
        batch = agent.map(inputs, prompt, output_type=output_type, concurrency=args.concurrency or 8,
                          session=True, resume=resume)
    except Exception as exc:  # a bad input or setting: a clear message, nothing started
        raise UsageError(str(exc)) from None
    batch.ask_here()  # a person is here: calls that need one wait in the view, the other items go on
    view = BatchView(batch, variable=args.map)
    keeper = getattr(getattr(session, "notebook_runs", None), "kept", None)
    if keeper is not None:
        keeper.show(view)
    else:
        view.show()
    return batch


class BatchView:
    """The live view of one batch (ipywidgets), replaced by its static rendering when the batch ends."""

    def __init__(self, batch: Any, *, variable: str = "VAR") -> None:
        self.batch = batch
        self.variable = variable
        """The notebook variable the batch runs over (what the stopped rendering's `--resume` line names)."""
        self.loop: asyncio.AbstractEventLoop = getattr(batch, "loop", None) or asyncio.get_event_loop()
        self.display_id = uuid.uuid4().hex
        self.key = ("batch", str(batch.id))
        """How the page's comm finds this view (panel/hub.py `decide` for a batch)."""
        self.keeper: Any = None
        """What keeps the view's displays (notebook/kept.py), once shown there."""
        s = shared()
        self.summary = html_part()
        self.approvals = W.VBox([], layout=s.plain, _dom_classes=("nba-batch-asks",))
        self.picker = W.Dropdown(options=[], description="item")
        self.open_button = make_button("Open", "folder-open", "Show this item's own run below", "nba-open")
        self.item = W.Output()
        self.open_button.on_click(lambda _: self.open(self.picker.value))
        style = html_part(f"<style>{render.css()}</style>")
        style.layout = s.hidden
        classes = ["nba-batch-view"]
        if re.fullmatch(r"[A-Za-z0-9_-]{1,64}", str(batch.id)):
            classes.append(f"nba-batch-id-{batch.id}")
        self.widget = W.VBox([style, self.summary, self.approvals, W.HBox([self.picker, self.open_button]),
                              self.item], layout=s.plain, _dom_classes=tuple(classes))
        self.handle: Any = None
        self._rows: list[tuple[Any, W.VBox]] = []
        """Each call waiting (its `PendingApproval`) with its question box, in order."""
        self._scheduled = False
        self._ended = False
        batch.subscribe(self._on_event)
        self.refresh()

    def show(self) -> None:
        """Display the view without a keeper (outside a notebook session): it ends as its static rendering."""
        self.handle = display(self.widget, display_id=self.display_id)

    # -- renderings ------------------------------------------------------------------------------------
    def live_text(self) -> str:
        return render_batch.batch_text(self.batch)

    def final_bundle(self) -> dict[str, str]:
        """What the cell keeps once the batch ended."""
        return {"text/html": render_batch.batch_html(self.batch), "text/plain": render_batch.batch_text(self.batch)}

    def stopped_bundle(self) -> dict[str, str]:
        """What the cell says if the kernel stops now: the batch as far as it went, and how to go on."""
        counts = self.batch.counts()
        left = len(self.batch.results) - counts["done"]
        why = (f"the kernel stopped while the batch was going on; the {counts['done']} items done are stored. "
               f"Run the cell again with %agent --map {self.variable} --resume {self.batch.id} ... to ask only "
               f"for the {left} not done.")
        return {"text/html": render_batch.batch_html(self.batch, stopped=why),
                "text/plain": render_batch.batch_text(self.batch, stopped=why)}

    # -- updates ---------------------------------------------------------------------------------------
    def _on_event(self, kind: str, data: Any) -> None:
        if kind == "finished":
            self.finish()
            return
        if kind in ("approval", "approval_decided"):
            self.refresh(urgent=kind == "approval")
            return
        if not self._scheduled:  # at most one refresh each UPDATE_SECONDS, however fast items end
            self._scheduled = True
            asyncio.get_running_loop().call_later(UPDATE_SECONDS, self._tick)

    def _tick(self) -> None:
        self._scheduled = False
        if not self.batch.done:
            self.refresh()

    def refresh(self, *, urgent: bool = False) -> None:
        self.summary.value = render_batch.batch_html(self.batch)
        ended = [r for r in self.batch.results if r.run is not None and r.status != "pending"]
        self.picker.options = [(f"#{r.label} {r.status}", r.index) for r in ended[-50:]]
        waiting = list(self.batch.pending_approvals)
        shown = [pending for pending, _row in self._rows]
        if len(shown) != len(waiting) or any(a is not b for a, b in zip(shown, waiting)):
            # (a pending approval is a dataclass, equal to another with the same fields: compared by identity)
            rows = [(pending, next((row for p, row in self._rows if p is pending), None)) for pending in waiting]
            self._rows = [(pending, row or self._approval_row(pending)) for pending, row in rows]
            self.approvals.children = tuple(row for _pending, row in self._rows)
        if self.keeper is not None:
            self.keeper.changed(self, urgent=urgent)

    def _approval_row(self, pending: Any) -> W.VBox:
        s = shared()
        request = pending.request
        label = self.batch.results[pending.index].label if pending.index >= 0 else "?"
        binding = " ".join(f'data-nba-{name}="{shown_html(str(value))}"' for name, value in
                           (("batch", self.batch.id), ("call", request.call.id), ("digest", self.digest(pending))))
        question = (f'<div class="nba-ask-q" {binding}><b>Needs your approval</b> · item #{shown_html(str(label))} '
                    f'calls <code>{shown_html(request.name)}</code> · {shown_html(request.reason)}. '
                    f'These arguments are exactly what will run:</div>'
                    f'{render.args_html(request.arguments, limit=None)}')
        warnings = hidden_warnings(request.name, request.arguments)
        if warnings:  # as on a run's call row: what the person cannot see as-is is said beside it
            question += ('<div class="nba-sub nba-note nba-hidden-warn"><b>⚠ Look closely</b>: '
                         + " ".join(shown_html(w) for w in warnings) + "</div>")
        approve = make_button("Approve", "check", "Run this call once", "nba-approve")
        deny = make_button("Deny", "times", "Do not run it; the item's model is told, with your reason if you give one",
                           "nba-deny")
        reason = W.Text(placeholder="Reason for denying (optional; the model reads it)", layout=s.plain, style=s.text)
        grant = pending.grant
        parts: list[Any] = [approve, deny]
        if grant is not None:
            like = make_button(f"Approve all: {shown(grant.short)}", "check-circle",
                               f"Run it, and every call of this batch's items that {shown(grant.full)} covers, without "
                               "asking for the rest of this session", "nba-always")
            like.on_click(lambda _: self._hand(pending, "always"))
            parts.append(like)
        parts.append(reason)
        approve.on_click(lambda _: self._hand(pending, "approve"))
        deny.on_click(lambda _: self._hand(pending, "deny", reason.value))
        buttons = W.HBox(parts, layout=s.plain, _dom_classes=("nba-buttons",))
        return W.VBox([html_part(question), buttons], layout=s.plain, _dom_classes=("nba-ask",))

    # -- decisions ----------------------------------------------------------------------------------------
    @staticmethod
    def digest(pending: Any) -> str:
        """What a decision on `pending` is bound to: its call, with exactly the arguments shown."""
        return digest(pending.request.call.id, dict(pending.request.arguments or {}))

    def _hand(self, pending: Any, choice: str, reason: str = "") -> None:
        """A click (on whatever thread the kernel delivered it): the decision goes to the batch's loop."""
        try:
            self.loop.call_soon_threadsafe(self._take, pending, choice, reason)
        except RuntimeError:  # the loop is gone: the batch is long over
            pass

    def _take(self, pending: Any, choice: str, reason: str = "") -> bool:
        """On the batch's loop: decide `pending` (once; False if it was decided already)."""
        if pending.future.done() or pending not in self.batch.pending_approvals:
            return False
        if choice == "approve":
            pending.approve()
        elif choice == "always":
            pending.approve(all_like_this=True)
        else:
            pending.deny(reason.strip() or "denied by the user")
        return True

    def decide(self, call: str, shown: str, choice: str, reason: str = "") -> dict[str, Any]:
        """The page's decision (through its comm, on the kernel's loop) on the call `call` it showed with the digest
        `shown`: taken only while that call waits and only with that digest, once."""
        found = [p for p in self.batch.pending_approvals if p.request.call.id == call]
        if not found:
            why = ("the batch is over: nothing waits for a decision" if self.batch.done else
                   "this call is not waiting for a decision any more (it was decided)")
            return {"taken": False, "why": why}
        if self.digest(found[0]) != shown:
            raise UsageError("refused: the call waiting differs from the one shown (its arguments changed); "
                             "nothing was decided")
        return {"taken": self._take(found[0], choice, reason)}

    def open(self, index: Any) -> None:
        """Show an item's own run view (its static rendering) below the batch."""
        if index is None:
            return
        result = self.batch.results[index]
        self.item.clear_output()
        with self.item:
            if result.run is not None:
                display({"text/html": result.run._repr_html_(), "text/plain": str(result.run)}, raw=True)
            else:
                print(render_batch.item_line(result))

    def finish(self) -> None:
        """The batch ended: the cell keeps the static rendering (what the saved notebook holds)."""
        if self._ended:
            return
        self._ended = True
        if self.keeper is not None:
            self.keeper.end(self)
            return
        if self.handle is not None:
            self.handle.update(self.final_bundle(), raw=True)
        self.widget.close()
