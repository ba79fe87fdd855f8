"""`%agent --map VAR [--concurrency N] [--output TYPE] [--resume [ID]] PROMPT`: one agent over many inputs,
shown in one live batch view.

    batch = %agent --map df --concurrency 8 --output Label Label this ticket: {text}

The view: a progress bar, counts (done, running, waiting for you, failed), throughput, tokens per minute
against the limit, cost so far and projected, the latest items with their answers; calls that need a
person wait in one list with Approve / Deny / "Approve all calls like <label>" (a grant exactly as wide as
its label); "Open" shows an item's own run view. When the batch ends, the cell keeps its static rendering
(`nbagent.render.batch`), which the saved notebook holds, like a run's.

Batches are stored as they go (`.nbagent/batches/`): after a kernel restart, the same `%agent --map` with
`--resume` (the workspace's latest batch) or `--resume ID` asks only for the items not done.

Reads: the notebook variable named by --map (the person's data: its strings reach the model, which may be
prompt-injected by them; each item runs under the same permissions as a single %agent) and the --output
name (looked up in the notebook's namespace: the person's own objects). Answers reach the page escaped.
"""

from __future__ import annotations

import asyncio
from typing import Any

from IPython.core.error import UsageError
from IPython.display import display

from nbagent.render import batch as render_batch

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
    view = BatchView(batch)
    view.show()
    return batch


class BatchView:
    """The live view of one batch (ipywidgets), replaced by its static rendering when the batch ends."""

    def __init__(self, batch: Any) -> None:
        import ipywidgets as w

        self.batch = batch
        self.summary = w.HTML()
        self.approvals = w.VBox()
        self.picker = w.Dropdown(options=[], description="item")
        self.open_button = w.Button(description="Open")
        self.item = w.Output()
        self.open_button.on_click(lambda _: self.open(self.picker.value))
        self.widget = w.VBox([self.summary, self.approvals, w.HBox([self.picker, self.open_button]), self.item])
        self.handle: Any = None
        self._shown_approvals: list[Any] = []
        self._scheduled = False
        batch.subscribe(self._on_event)
        self.refresh()

    def show(self) -> None:
        self.handle = display(self.widget, display_id=True)

    # -- updates ---------------------------------------------------------------------------------------
    def _on_event(self, kind: str, data: Any) -> None:
        if kind == "finished":
            self.finish()
            return
        if kind in ("approval", "approval_decided"):
            self.refresh()
            return
        if not self._scheduled:  # at most one refresh each UPDATE_SECONDS, however fast items end
            self._scheduled = True
            asyncio.get_running_loop().call_later(UPDATE_SECONDS, self._tick)

    def _tick(self) -> None:
        self._scheduled = False
        if not self.batch.done:
            self.refresh()

    def refresh(self) -> None:
        self.summary.value = render_batch.batch_html(self.batch)
        ended = [r for r in self.batch.results if r.run is not None and r.status != "pending"]
        self.picker.options = [(f"#{r.label} {r.status}", r.index) for r in ended[-50:]]
        if self._shown_approvals != list(self.batch.pending_approvals):
            self._shown_approvals = list(self.batch.pending_approvals)
            self.approvals.children = [self._approval_row(p) for p in self._shown_approvals]

    def _approval_row(self, pending: Any) -> Any:
        import ipywidgets as w

        from nbagent import render

        request = pending.request
        shown = w.HTML(f"<b>item #{self.batch.results[pending.index].label if pending.index >= 0 else '?'}</b> "
                       f"wants {render.args_html(request.arguments)} "
                       f"<i>{render._esc(request.reason)}</i>")
        yes, no = w.Button(description="Approve"), w.Button(description="Deny")
        like = w.Button(description=f"Approve all calls like {pending.label}", layout=w.Layout(width="auto"))
        yes.on_click(lambda _: pending.approve())
        no.on_click(lambda _: pending.deny())
        like.on_click(lambda _: pending.approve(all_like_this=True))
        return w.VBox([shown, w.HBox([yes, no, like])])

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
        static = {"text/html": render_batch.batch_html(self.batch), "text/plain": render_batch.batch_text(self.batch)}
        if self.handle is not None:
            self.handle.update(static, raw=True)
        self.widget.close()
