"""The kernel's end of the nbagent panel: the side panel, the buttons on errors and cells, the reviews in cells.

The page opens a comm with target `nbagent.panel` (registered by `%load_ext nbagent`; a kernel without it
closes the comm at once, and the page says to load nbagent) and asks: `{"id": N, "op": "state" | "start" |
"decide" | "stop" | "undone" | "batch_decide" | "trust" | "steer" | "to_cells" | "conversations" |
"open" | "settings" | "set_key" | "remove_key" | "set_base_url" | "set_option", ...}`; the kernel answers
`{"id": N, "ok": true, "result": {...}}` or
`{"id": N, "ok": false, "error": "why"}`, and pushes `{"event": "run", "run": <summary, see model.py>}`
whenever a run moved on. Every message, its fields and what each answer holds are in protocol.json beside
this file (the page's types are generated from it; `check` takes a request only in a shape it names).

A run the panel starts goes through `NotebookSession.start`, the path `%agent` takes: it is the same
`AgentRun` (`nbagent.jupyter.runs()` lists it, the store keeps it, `--resume` finds it), with the same
live view, which the page draws with the notebook's own widget manager. Runs started with `%agent` are
followed too (after each cell), so the panel shows the whole conversation.

What it reads, who could have written it: the page's messages. The page is the person's (the comm is
only reachable through the Jupyter server, with its token), but what it relays is not: a cell's source
and error, which anyone may have written (see prompts.py). What stops harm: a message is accepted only
in one of the shapes above (anything else is refused, with why); a prompt is the person's, typed or chosen
by a click; cell contents go to the model as data only; a decision applies only to the call waiting for it
and only with the digest of the exact arguments the page showed (one decision, whichever button is first:
the live view's buttons send theirs here too, so they still arrive when another page closed the view's
widgets; see live/widgets.py; so do a batch view's, bound the same way, and the MCP trust prompt's, bound to
the digest of the configuration it showed); a steering message goes only into the run whose view sent it;
a key typed in the Settings goes to the key file only (settings.py) and
comes back as where it is stored and its last four characters, never whole, never in an error;
nothing here runs code itself. What it sends back is JSON: the page sanitizes the HTML and writes the rest
as text.

Threads: JupyterLab may deliver comm messages on a kernel subshell's thread; every message is handed to
the kernel's main loop (`call_soon_threadsafe`), where runs start and their views live.
"""

from __future__ import annotations

import asyncio
import logging
import os
from typing import TYPE_CHECKING, Any

from IPython.core.error import UsageError

from nbagent import render
from nbagent.messages import UserMessage
from nbagent.render.steps import plan_steps
from nbagent.safety import keys, redact

from ..protocol import problem, request_ops
from .choices import model_choices
from .conversations import conversation_list, open_conversation, verified
from .files import file_mentions, file_summary
from .model import EDIT_TOOLS, run_summary, stored_summary
from .prompts import cell_prompt, follow_prompt, mention_prompt, plan_prompt
from . import settings as _settings

if TYPE_CHECKING:  # pragma: no cover
    from ..session.state import NotebookSession

__all__ = ["PanelHub", "attach_panel", "detach_panel", "TARGET"]

log = logging.getLogger("nbagent.jupyter")

TARGET = "nbagent.panel"
PROTOCOL = 1
PUSHED = frozenset({"run_started", "turn_started", "approval_requested", "approval_decided", "tool_call_started",
                    "tool_call_finished", "model_response", "compacted", "run_finished"})
"""The events after which the page is told (never the text deltas: the live view streams those itself)."""
HEAD_CHANGES = frozenset({"run_started", "model_response", "compacted", "run_finished"})
"""The events after which the run's model, cost and context gauge are measured again."""
PUSH_DELAY = 0.1
"""Seconds the page's news waits, so that however many events come meanwhile it is told once."""



def check(data: Any) -> str | None:
    """Why a message from the page is refused (None: it has one of the shapes protocol.json names)."""
    if not isinstance(data, dict):
        return "a request is a JSON object"
    if not isinstance(data.get("id"), int) or isinstance(data.get("id"), bool):
        return "a request has an integer id"
    op = data.get("op")
    name = request_ops("panel", "PageRequest").get(op) if isinstance(op, str) else None
    if name is None:
        return f"unknown request {op!r}"
    why = problem("panel", name, data)
    return None if why is None else f"{op}: {why}"


class PanelHub:
    """One kernel's panel connections, and the runs they are told about."""

    def __init__(self, session: NotebookSession, loop: asyncio.AbstractEventLoop) -> None:
        self.session = session
        self.loop = loop
        self.comms: list[Any] = []
        self.meta: dict[str, dict[str, Any]] = {}
        """Per run id: where it was started (panel or cell), the button, its short label, its cell."""
        self.undone: dict[str, set[str]] = {}
        self._followed: set[str] = set()
        self._dirty: dict[str, set[str]] = {}
        """Per run to tell the page about: which parts of its summary must be made again."""
        self._parts: dict[str, dict[str, Any]] = {}
        """Per run: the parts of its last summary (reused while nothing changed them)."""
        self._scheduled = False
        self._closed = False

    # -- comms --------------------------------------------------------------------------------------------------
    def on_open(self, comm: Any, msg: dict[str, Any]) -> None:
        """The page opened a comm (on whatever thread the kernel delivered it)."""
        self.comms.append(comm)
        comm.on_msg(lambda m, comm=comm: self._received(comm, m))
        comm.on_close(lambda _m=None, comm=comm: self._gone(comm))

    def _gone(self, comm: Any) -> None:
        if comm in self.comms:
            self.comms.remove(comm)

    def _received(self, comm: Any, msg: dict[str, Any]) -> None:
        data = (msg.get("content") or {}).get("data")
        try:
            self.loop.call_soon_threadsafe(self._handle, comm, data)
        except RuntimeError:  # the kernel's loop is gone
            pass

    def _reply(self, comm: Any, message_id: Any, ok: bool, payload: Any) -> None:
        try:
            comm.send({"id": message_id, "ok": True, "result": payload} if ok
                      else {"id": message_id, "ok": False, "error": redact(str(payload))})
        except Exception:  # a comm already closed
            log.debug("panel reply failed", exc_info=True)

    def _handle(self, comm: Any, data: Any) -> None:
        why = check(data)
        message_id = data.get("id") if isinstance(data, dict) else None
        if not isinstance(message_id, int) or isinstance(message_id, bool):
            message_id = None  # the reply says null rather than echo what is not an id
        if why is not None:
            self._reply(comm, message_id, False, f"refused: {why}")
            return
        try:
            result = getattr(self, "_op_" + data["op"])(data)
        except UsageError as exc:
            self._reply(comm, message_id, False, str(exc))
        except Exception as exc:  # a bug must not leave the page waiting
            log.exception("nbagent panel: %s failed", data["op"])
            self._reply(comm, message_id, False, f"{type(exc).__name__}: {exc}")
        else:
            self._reply(comm, message_id, True, result)

    # -- requests ---------------------------------------------------------------------------------------------
    def _op_state(self, data: dict[str, Any]) -> dict[str, Any]:
        self.follow_new()
        session = self.session
        runs = [self.summary(r) for r in session.runs]
        stored = None
        if not session.runs:
            stored = self._stored()
        conversation = session.stored.last
        from nbagent.render.markdown import LIVE_MARK  # the page's Copy / Insert: this kernel's blocks only

        return {"runs": runs, "stored": stored, "session_id": session.stored.session_id, "mark": LIVE_MARK,
                "kernel": session.stored.origin, "conversation": conversation.id if conversation is not None else None,
                "config": {"model": _spec(session.config.model), "mode": str(session.config.mode),
                           "models": model_choices(session.shell.user_ns, os.environ,
                                                   getattr(session.shell, "user_ns_hidden", {}),
                                                   keys.stored_values())}}

    def _stored(self) -> dict[str, Any] | None:
        from nbagent.sessions import SessionError, list_sessions, load_session

        from ..session.conversation import latest_main

        notebook = self.session.stored.notebook_path()
        try:
            found = list_sessions(self.session.workspace, notebook=notebook) if notebook else []
            if not found:
                return None
            return stored_summary(load_session(self.session.workspace, latest_main(found).id))
        except (SessionError, OSError, ValueError) as exc:
            return {"id": None, "error": f"the stored conversation could not be read: {exc}", "messages": []}

    def _op_start(self, data: dict[str, Any]) -> dict[str, Any]:
        from ..session.state import RunOptions

        session = self.session
        kind = data.get("kind", "prompt")
        prompt: Any = data["prompt"]
        label = render.one_line(prompt, 120)
        cell = data.get("cell")
        mode = None
        if kind in ("ask", "fix", "explain"):
            hidden = getattr(session.shell, "user_ns_hidden", {})
            text, said = cell_prompt(kind, cell, prompt, session.shell.user_ns, hidden)
            prompt, label = UserMessage(text, said=said), render.one_line(said, 120)
        elif not prompt.strip():
            raise UsageError("type what nbagent should do first" if kind != "follow" else "the plan is empty")
        elif kind == "plan":  # plan first: a plan, and nothing changed (plan mode runs read-only tools only)
            prompt, label, mode = UserMessage(plan_prompt(prompt), said=prompt), "Plan first: " + label, "plan"
        elif kind == "follow":  # the plan as the person approved it, carried out in the notebook's own mode
            steps = plan_steps(prompt)
            said = "Carry out the plan"
            prompt, label = UserMessage(follow_prompt(prompt), said=said), said
            mode = str(session.config.mode) if str(session.config.mode) != "plan" else "default"
        else:  # @df, @total, @[3]: what those names hold, that cell's source, go with the words, folded in the views
            hidden = getattr(session.shell, "user_ns_hidden", {})
            files = [(path, *file_summary(path, session.workspace, session.config.rules))
                     for path in file_mentions(prompt, session.shell.user_ns)]
            mentioned = mention_prompt(prompt, session.shell.user_ns, hidden, data.get("cells"), files)
            if mentioned is not None:
                prompt = UserMessage(mentioned, said=prompt)
        resume = data.get("resume")
        stored = session.stored
        if resume and not data.get("new") and resume != stored.session_id and kind not in ("fix", "explain"):
            # the stored conversation the panel shows (picked from its list, or the notebook's latest): the run
            # continues it, only when the store's loader verifies it
            verified(stored.workspace, resume)
            stored.resume(resume)
        # Fix and Explain are side threads: the conversation the panel's prompts continue does not grow with them
        options = RunOptions(model=data.get("model") or None, new=bool(data.get("new")), mode=mode,
                             side=kind in ("fix", "explain"))
        displays = session.displays
        before, displays.cell_id = displays.cell_id, None  # not started by a cell: no cell's run to show again
        try:
            run = session.start(prompt, options)
        finally:
            displays.cell_id = before
        self.meta[run.id] = {"source": "panel", "kind": kind, "label": label,
                             "cell": cell.get("id") if isinstance(cell, dict) else None}
        if kind == "follow":  # the step the run says it is on, named by the approved plan (render/steps.py)
            self.meta[run.id]["plan_steps"] = steps
            view = session.view(run)
            if view is not None and hasattr(view, "follow_plan"):
                view.follow_plan(steps)
        self.follow(run)
        return self.summary(run)

    def _op_conversations(self, data: dict[str, Any]) -> dict[str, Any]:
        """This notebook's stored conversations, newest first (conversations.py)."""
        return conversation_list(self.session.stored)

    def _op_open(self, data: dict[str, Any]) -> dict[str, Any]:
        """One of them, to show before the next prompt continues it (a verified one only)."""
        return open_conversation(self.session.stored, data["session"])

    def _run(self, run_id: str) -> Any:
        for run in self.session.runs:
            if run.id == run_id:
                return run
        raise UsageError(f"there is no run {run_id!r} in this kernel (it may have restarted)")

    def _op_decide(self, data: dict[str, Any]) -> dict[str, Any]:
        run = self._run(data["run"])
        view = self.session.view(run)
        rows = [r for r in (getattr(view, "pending", None) or []) if r.record is not None and r.record.id == data["call"]]
        if not rows:
            why = ("the run is over: nothing waits for a decision" if run.done else
                   "this call is not waiting for a decision any more (it was decided)")
            return {"taken": False, "why": why}
        row = rows[0]
        if row.pending.digest != data["digest"]:
            raise UsageError("refused: the call waiting differs from the one shown (its arguments changed); "
                             "nothing was decided")
        choice = data["choice"]
        if choice == "approve":
            taken = row.approve()
        elif choice == "always":
            taken = row.always_allow()
        else:
            taken = row.deny(data.get("reason") or "")  # the Deny button's own words when none was typed
        return {"taken": bool(taken)}

    def _op_batch_decide(self, data: dict[str, Any]) -> dict[str, Any]:
        """A batch view's Approve / Deny / Approve all (live/batch_view.py `BatchView.decide`)."""
        view = self.session.notebook_runs.kept.find("batch", data["batch"])
        if view is None:
            return {"taken": False, "why": "that batch's view is not live in this kernel (it ended, or the kernel "
                                           "restarted: %agent --map ... --resume asks only for the items not done)"}
        return view.decide(data["call"], data["digest"], data["choice"], data.get("reason") or "")

    def _op_trust(self, data: dict[str, Any]) -> dict[str, Any]:
        """An MCP trust prompt's Trust / Not now (session/consent.py `TrustPrompt.answer`)."""
        prompt = self.session.notebook_runs.kept.find("trust", data["digest"])
        if prompt is None:
            return {"taken": False, "why": "that prompt is not waiting in this kernel (it was answered, or the "
                                           "kernel restarted: the next %agent asks again)"}
        return prompt.answer(data["digest"], data["choice"] == "trust")

    def _op_steer(self, data: dict[str, Any]) -> dict[str, Any]:
        """The live view's steering box (live/steering.py `SteerBox.send`): into that view's run, never another."""
        run = self._run(data["run"])
        box = getattr(self.session.view(run), "steer", None)
        if box is not None:
            sent = box.send(data["text"])
            return {"sent": sent, "note": box.note_text}
        sent = bool(run.steer(data["text"].strip()))
        return {"sent": sent, "note": "sent" if sent else "the run is over: start another with %agent"}

    def _op_stop(self, data: dict[str, Any]) -> dict[str, Any]:
        run = self._run(data["run"])
        return {"stopped": bool(run.cancel("stopped from the notebook"))}

    def _op_undone(self, data: dict[str, Any]) -> dict[str, Any]:
        run = self._run(data["run"])
        if not any(c.id == data["call"] for c in run.calls):
            raise UsageError(f"the run has no call {data['call']!r}")
        self.undone.setdefault(run.id, set()).add(data["call"])
        self.mark(run.id, "changes")
        return {"ok": True}

    def _op_to_cells(self, data: dict[str, Any]) -> dict[str, Any]:
        """What `%agent --to-cells` does, for a run the page shows: a run that proposes its cells, each one
        reviewed (None when it needs none); `summary` says what is made and what is left out."""
        from ..session.to_cells import start_to_cells

        run = self._run(data["run"])
        said: list[str] = []
        displays = self.session.displays
        before, displays.cell_id = displays.cell_id, None  # not started by a cell
        try:
            made = start_to_cells(self.session, run, None, say=said.append)
        finally:
            displays.cell_id = before
        if made is None:
            return {"run": None, "summary": "\n".join(said)}
        self.meta[made.id] = {"source": "panel", "kind": "to_cells", "label": f"the cells of run {run.id}",
                              "cell": None}
        self.follow(made)
        return {"run": self.summary(made), "summary": "\n".join(said)}

    # -- settings (settings.py): each answer is the page's new state, never a key -----------------------------
    def _op_settings(self, data: dict[str, Any]) -> dict[str, Any]:
        return _settings.settings_state(self.session.config)

    def _op_set_key(self, data: dict[str, Any]) -> dict[str, Any]:
        _settings.set_key(data["provider"], data["key"])
        return _settings.settings_state(self.session.config)

    def _op_remove_key(self, data: dict[str, Any]) -> dict[str, Any]:
        _settings.remove_key(data["provider"])
        return _settings.settings_state(self.session.config)

    def _op_set_base_url(self, data: dict[str, Any]) -> dict[str, Any]:
        _settings.set_base_url(data["provider"], data.get("base_url"))
        return _settings.settings_state(self.session.config)

    def _op_set_option(self, data: dict[str, Any]) -> dict[str, Any]:
        _settings.set_option(self.session.config, data["name"], data.get("value"))
        return _settings.settings_state(self.session.config)

    # -- following runs ---------------------------------------------------------------------------------------
    def summary(self, run: Any, fresh: set[str] | frozenset[str] = frozenset({"head", "changes"})) -> dict[str, Any]:
        return run_summary(run, self.session.view(run), self.meta.get(run.id, {}), self.undone.get(run.id, set()),
                           cached=self._parts.setdefault(run.id, {}), fresh=fresh, seen=self._seen)

    def _seen(self, cell_id: str) -> str | None:
        """What the agent last read (or wrote) of a cell: an edit of it applies only while the cell holds that."""
        from ..notebook.cells import notebook_state

        return notebook_state(self.session.shell).seen.get(cell_id)

    def follow(self, run: Any) -> None:
        if run.id in self._followed:
            return
        self._followed.add(run.id)
        if run.done:
            return
        run_id = run.id

        def listen(event: Any) -> None:
            kind = event.kind
            if kind in PUSHED:
                if kind in HEAD_CHANGES:
                    self.mark(run_id, "head")
                elif kind == "tool_call_finished" and event.call.name in EDIT_TOOLS:
                    self.mark(run_id, "changes")
                else:
                    self.mark(run_id)

        run.subscribe(listen)

    def follow_new(self) -> None:
        """Follow the runs `%agent` started (called after each cell) and tell the page about them."""
        for run in list(self.session.runs):
            if run.id not in self._followed:
                self.follow(run)
                self.mark(run.id, "head", "changes")

    def mark(self, run_id: str, *fresh: str) -> None:
        """Tell the page about this run soon (once, however many events came meanwhile); `fresh`: the parts
        of its summary to make again."""
        if self._closed or not self.comms:
            return
        self._dirty.setdefault(run_id, set()).update(fresh)
        if not self._scheduled:
            self._scheduled = True
            try:
                self.loop.call_soon_threadsafe(self.loop.call_later, PUSH_DELAY, self._push)
            except RuntimeError:
                self._scheduled = False

    def _push(self) -> None:
        self._scheduled = False
        dirty, self._dirty = self._dirty, {}
        if not self.comms:
            return
        for run in list(self.session.runs):
            if run.id in dirty:
                message = {"event": "run", "run": self.summary(run, dirty[run.id])}
                for comm in list(self.comms):
                    try:
                        comm.send(message)
                    except Exception:
                        log.debug("panel push failed", exc_info=True)

    def close(self) -> None:
        self._closed = True
        for comm in list(self.comms):
            try:
                comm.close()
            except Exception:
                pass
        self.comms.clear()


def _spec(model: Any) -> str | None:
    if model is None:
        return None
    return str(getattr(model, "spec", None) or model)


def attach_panel(shell: Any, session: NotebookSession) -> PanelHub | None:
    """`%load_ext nbagent` in a kernel: answer the panel's comm (None where there is no kernel or loop)."""
    if getattr(shell, "kernel", None) is None:
        return None
    found = getattr(session, "_panel_hub", None)
    if isinstance(found, PanelHub):
        return found
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:  # loaded at the kernel's start-up (an IPython config): attach when the first cell runs
        def first_cell(_info: Any = None) -> None:
            shell.events.unregister("pre_run_cell", first_cell)
            attach_panel(shell, session)

        shell.events.register("pre_run_cell", first_cell)
        return None
    from comm import get_comm_manager

    hub = PanelHub(session, loop)
    get_comm_manager().register_target(TARGET, hub.on_open)
    shell.events.register("post_run_cell", _after_cell_of(hub))
    session._panel_hub = hub
    return hub


def _after_cell_of(hub: PanelHub):
    def after_cell(_result: Any = None) -> None:
        hub.follow_new()

    after_cell.hub = hub  # type: ignore[attr-defined]
    return after_cell


def detach_panel(shell: Any, session: NotebookSession) -> None:
    """`%unload_ext nbagent`: stop answering the panel (runs already started go on)."""
    hub = getattr(session, "_panel_hub", None)
    if not isinstance(hub, PanelHub):
        return
    hub.close()
    try:
        from comm import get_comm_manager

        get_comm_manager().unregister_target(TARGET, hub.on_open)
    except Exception:
        pass
    for callback in list(shell.events.callbacks.get("post_run_cell", [])):
        if getattr(callback, "hub", None) is hub:
            shell.events.unregister("post_run_cell", callback)
    session._panel_hub = None
