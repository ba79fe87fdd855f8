"""The conversation `%agent` continues, bound to the store: which stored session its runs are written to,
`--resume`, `--model replay`, and `%agent --sessions`.

Reads the workspace's stored sessions (`<workspace>/.nbagent/sessions/`), which the user, another kernel or
anything with write access to the workspace could have written. What stops harm: `nbagent.sessions` finds
ids only inside the store, skips corrupt lines and answers calls left in flight (see its docstring); a
resumed conversation is history sent to the model, never code run here.

Reads the notebook file's metadata (`nbagent.id`, written by the frontend part; anyone who can write the
notebook could have written it) to know which stored conversations are this notebook's: only an id of a
fixed shape is taken, and it only narrows which stored conversations `--resume` picks and the list marks.
"""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from IPython.core.error import UsageError

from nbagent.errors import ModelError
from nbagent.providers import Model

from ..config import NBAgent, workspace_of

if TYPE_CHECKING:  # pragma: no cover
    from nbagent.agent.run import AgentRun
    from nbagent.messages import Message

__all__ = ["SessionList", "StoredConversation", "notebook_id_of"]

_ID = re.compile(r"[A-Za-z0-9_-]{8,64}")


def notebook_id_of(path: str | None) -> str | None:
    """The id the frontend part keeps in a saved notebook's metadata (`metadata.nbagent.id`), if any."""
    if not path or not path.endswith(".ipynb"):
        return None
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError):
        return None
    found = ((data.get("metadata") or {}).get("nbagent") or {}).get("id") if isinstance(data, dict) else None
    return found if isinstance(found, str) and _ID.fullmatch(found) else None


def latest_main(found: list[Any]) -> Any:
    """The latest of stored conversations (oldest first) that is not a side thread (a Fix or an Explain from
    the panel, `settings["side"]`), else the latest."""
    main = [i for i in found if not (i.settings or {}).get("side")]
    return (main or found)[-1]


class StoredConversation:
    """The current conversation of a kernel: its last run, a resumed history, and its stored session."""

    def __init__(self, config: NBAgent, models: dict[str, Model],
                 frontend: Callable[[], dict[str, Any]] | None = None) -> None:
        self.config = config
        self.frontend = frontend or dict
        """What the notebook page said of itself (its `hello`: path, notebook_id), {} while it has not."""
        self.models = models
        """The kernel's loaded models (shared with `AgentFactory`): a replay model is loaded once per session."""
        self.last: AgentRun | None = None
        """The last run of the current conversation: the next %agent continues from it."""
        self.session_id: str | None = None
        """The stored conversation the runs are written to (`<workspace>/.nbagent/sessions/`)."""
        self.resumed: list[Message] | None = None
        """A stored conversation resumed with `--resume`, until the next %agent continues it."""
        self.origin = f"{os.getpid()}-{int(time.time())}"
        """This kernel's mark on the sessions it writes (replay finds a notebook's last execution by it)."""
        self.count = 0
        """How many conversations this kernel started (replay takes the recorded ones in that order)."""
        self.settings: dict[str, Any] = {}
        """What the conversation's runs are started with unless a %agent says otherwise (model, tools, mode...)."""
        self._identified: str | None = None
        """The session whose notebook id is written (once per session)."""

    @property
    def workspace(self) -> Path:
        return workspace_of(self.config)

    def begin(self) -> None:
        """A new conversation: a new stored session when its first run starts."""
        self.session_id = None
        self.settings = {}
        self.count += 1

    def carried(self, last: AgentRun, cell: str | None, cell_of: Callable[[AgentRun], str | None]) -> list[Message]:
        """The conversation the next run continues: the last run's transcript, without a prompt nobody answered.

        A run that failed or was stopped before the model answered leaves its prompt last; sending it again
        would make two user messages in a row. Running again the cell whose run failed retries it: the
        conversation is then what came before that run.
        """
        from nbagent.sessions.recording import rolled_back

        if last.status in ("failed", "cancelled") and cell is not None and cell_of(last) == cell:
            return last.messages[: len(last.messages) - len(last.new_messages)]
        return rolled_back(last)

    def notebook_path(self) -> str | None:
        """The notebook this kernel serves, as well as it can be known: `NBAgent.notebook_path`, the path
        a headless run gives (`NBAGENT_NOTEBOOK`), or the one the Jupyter server gives (`JPY_SESSION_NAME`,
        relative to the server's root: the kernel starts in the notebook's folder)."""
        given = getattr(self.config, "notebook_path", None) or os.environ.get("NBAGENT_NOTEBOOK")
        if given:
            return str(Path(given).resolve())
        name = self.frontend().get("path") or os.environ.get("JPY_SESSION_NAME")
        if not name:
            return None
        here = Path.cwd() / Path(name).name
        return str(here) if here.exists() else name

    def notebook_id(self) -> str | None:
        """The id that follows this notebook through renames: what the page said, else the saved file's."""
        found = self.frontend().get("notebook_id")
        if isinstance(found, str) and _ID.fullmatch(found):
            return found
        return notebook_id_of(self.notebook_path())

    def record(self, run: AgentRun) -> None:
        """Write the run into this conversation's stored session (a new one for a new conversation), with
        what it was started with (`settings`: what a resumed conversation keeps)."""
        if not self.config.store_sessions or getattr(run.model, "provider", None) == "replay":
            return
        from nbagent.sessions import SessionWriter
        from nbagent.sessions.recording import SessionRecorder

        try:
            if self.session_id is None:
                nid = self.notebook_id()
                writer = SessionWriter(self.workspace, notebook=self.notebook_path(), model=run.model.spec,
                                       origin=self.origin, notebook_id=nid)
                self.session_id = writer.id
                self._identified = writer.id if nid else None
            else:
                writer = SessionWriter(self.workspace, self.session_id, resume=True)
            settings = dict(self.settings)
            spec = getattr(run.model, "spec", None)
            if settings.get("model") is None and isinstance(spec, str) and ":" in spec and not spec.startswith(
                    ("scripted", "replay")):
                settings["model"] = spec  # from a key or the settings: a resumed conversation keeps the provider
            writer.settings(settings)
            writer.commit(fsync=False)
            SessionRecorder(writer, run).attach()
        except OSError as exc:  # a read-only workspace: the run goes on, unrecorded, and says so once
            print(f"nbagent: this conversation is not being stored ({exc})")
            return
        session_id = self.session_id

        def on_event(event: Any) -> None:  # the page's id arrives after the first run started: note it then
            if event.kind == "run_finished" and self._identified != session_id:
                self.identify(session_id)

        run.subscribe(on_event)

    def identify(self, session_id: str | None) -> None:
        """Note in a stored session which notebook it belongs to, once the page said (see `notebook_id`)."""
        from nbagent.sessions import SessionWriter

        nid = self.notebook_id()
        if session_id is None or nid is None or self._identified == session_id:
            return
        try:
            writer = SessionWriter(self.workspace, session_id, resume=True)
            writer.notebook(nid, self.notebook_path())
            writer.commit(fsync=False)
            self._identified = session_id
        except OSError:
            pass

    def mine(self) -> list[Any]:
        """This notebook's stored conversations (by its id, else its path), oldest first, leaving out those
        in which the model never answered (runs that failed before it did)."""
        from nbagent.sessions import list_sessions

        notebook, nid = self.notebook_path(), self.notebook_id()
        if notebook is None and nid is None:
            return []
        return [i for i in list_sessions(self.workspace, notebook=notebook, notebook_id=nid) if not i.empty]

    def resume(self, session_id: str | None = None) -> Any:
        """`%agent --resume [ID]`: the next %agent continues a stored conversation; without an id, this
        notebook's latest (never another notebook's: none of its own is an error that lists them). The
        conversation keeps the model, tools and settings it was stored with. `why` says what was picked."""
        from nbagent.sessions import SessionError, load_session

        if session_id is None and self.notebook_path() is None and self.notebook_id() is None:
            found = [i for i in self._listed() if not i.empty]  # no notebook (a terminal): the workspace's
            if not found:
                raise UsageError(f"--resume: no stored conversation in {self.workspace} to resume")
            session_id = found[-1].id
            why = "the workspace's latest conversation (this kernel serves no notebook it knows of)"
        elif session_id is None:
            found = self.mine()
            if not found:
                others = [i for i in self._listed() if not i.empty]
                n = len(others)
                hint = (f" The workspace has {n} conversation{'s' if n != 1 else ''} of other notebooks: %agent "
                        "--resume ID continues one (%agent --sessions lists them).") if others else ""
                where = Path(self.notebook_path()).name if self.notebook_path() else "this notebook"
                raise UsageError(f"--resume: {where} has no stored conversation yet.{hint}")
            session_id = latest_main(found).id
            why = "the latest conversation of this notebook"
        else:
            why = "the conversation asked for"
        try:
            stored = load_session(self.workspace, session_id)
        except SessionError as exc:
            raise UsageError(f"{exc} (%agent --sessions lists them)") from None
        self.resumed = stored.messages
        self.session_id = stored.info.id
        self._identified = None
        self.last = None
        self.settings = {k: v for k, v in (stored.info.settings or {}).items() if k != "side"}
        info = stored.info
        started = time.strftime("%Y-%m-%d %H:%M", time.localtime(info.created))
        stored.why = (f"{why}, started {started}, {info.runs} run{'s' if info.runs != 1 else ''}, "
                      f"{info.turns} turn{'s' if info.turns != 1 else ''}")
        return stored

    def _listed(self) -> list[Any]:
        from nbagent.sessions import list_sessions

        return list_sessions(self.workspace)

    def sessions(self) -> Any:
        mine = {i.id for i in self.mine()}
        listed = self._listed()
        infos = [i for i in listed if not i.empty]
        return SessionList(infos, self.notebook_path(), self.session_id, mine, getattr(listed, "skipped", []))

    def replay_mode(self) -> str:
        mode = (os.environ.get("NBAGENT_REPLAY") or "").strip().lower()
        return "recorded" if mode == "recorded" else getattr(self.config, "replay_tools", "rerun")

    def replay_model(self, session_id: str | None) -> Model:
        """`--model replay`: the stored session this conversation replays. Continuing a resumed conversation,
        that one; else the recorded conversation of this notebook's last execution that this one matches
        (the first conversation of the kernel replays the first one recorded then, and so on)."""
        from nbagent.providers.replay import ReplayModel
        from nbagent.sessions import SessionError, list_sessions

        if session_id is None and self.session_id is not None and self.last is not None:
            session_id = self.session_id
        if session_id is None:
            notebook = self.notebook_path()
            found = [i for i in list_sessions(self.workspace, notebook=notebook)] if notebook else []
            found = found or list_sessions(self.workspace)
            if not found:
                raise UsageError(f"--model replay: no stored conversation in {self.workspace} to replay")
            origin = found[-1].origin
            same_run = [i for i in found if i.origin == origin] if origin else found[-1:]
            k = max(self.count - 1, 0)  # counted when this run's conversation started
            if k >= len(same_run):
                raise UsageError(f"--model replay: the recorded execution of this notebook had {len(same_run)} "
                                 f"conversation(s); this is conversation {k + 1}")
            session_id = same_run[k].id
        key = f"replay:{session_id}"
        if key not in self.models:
            try:
                self.models[key] = ReplayModel(session_id, workspace=self.workspace)
            except (SessionError, ModelError) as exc:
                raise UsageError(f"--model replay: {exc}") from None
        return self.models[key]


class SessionList:
    """`%agent --sessions`: the stored conversations of the workspace, this notebook's marked."""

    def __init__(self, infos: list[Any], notebook: str | None, current: str | None,
                 mine: set[str] | None = None, skipped: list[Any] | None = None) -> None:
        self.infos = infos
        self.skipped = skipped or []
        """Files of the sessions folder left out because they do not verify (`nbagent.sessions.Skipped`)."""
        self.notebook = notebook
        self.current = current
        self.mine = mine or set()
        """The ids of this notebook's conversations (they follow it through renames)."""

    def __len__(self) -> int:
        return len(self.infos)

    def __getitem__(self, i: int) -> Any:
        return self.infos[i]

    def __repr__(self) -> str:
        if not self.infos:
            lines = ["No stored conversations in this workspace yet."]
        else:
            lines = [f"{len(self.infos)} stored conversation{'s' if len(self.infos) != 1 else ''} "
                     "(%agent --resume ID continues one; %agent --delete-session ID removes one):"]
        for info in self.infos:
            mark = "*" if info.id == self.current else " "
            lines.append(f" {mark} {info}{'  (this notebook)' if info.id in self.mine else ''}")
        if self.skipped:
            n = len(self.skipped)
            lines.append(f"Left out: {n} file{'s' if n != 1 else ''} that do{'es' if n == 1 else ''} not verify "
                         "(unsigned, forged, edited or signed with another key; never picked as the latest):")
            from nbagent.safety.hidden import terminal_safe

            lines += [f"   {terminal_safe(str(s))}" for s in self.skipped]
        return "\n".join(lines)

    def _where(self, info: Any) -> str:
        """The notebook a conversation was held in; this notebook's as it is called now (and then, if renamed)."""
        then = Path(info.notebook).name if info.notebook else "-"
        if info.id not in self.mine:
            return then
        now = Path(self.notebook).name if self.notebook else then
        return f"{now} (this notebook)" if now == then else f"{now} (this notebook; then {then})"

    def _repr_html_(self) -> str:
        from nbagent.safety.shown import shown_html as escape

        left = ""
        if self.skipped:
            n = len(self.skipped)
            left = (f"<p>Left out: {n} file{'s' if n != 1 else ''} that do{'es' if n == 1 else ''} not verify (unsigned, "
                    "forged, edited or signed with another key; never picked as the latest):</p><ul>"
                    + "".join(f"<li><code>{escape(s.name)}</code>: {escape(s.why)}</li>" for s in self.skipped) + "</ul>")
        if not self.infos:
            return "<p>No stored conversations in this workspace yet.</p>" + left
        rows = "".join(
            f'<tr><td style="white-space: nowrap"><code>{escape(i.id)}</code>{" (current)" if i.id == self.current else ""}'
            f'<br><code class="nba-resume" title="Run this to continue the conversation">%agent --resume {escape(i.id)}'
            "</code></td>"
            f"<td>{escape(self._where(i))}</td>"
            f"<td>{escape(time.strftime('%Y-%m-%d %H:%M', time.localtime(i.created)))}</td>"
            f"<td>{i.runs}</td><td>{i.turns}</td><td>{i.calls}</td><td>{escape(i.last_prompt[:80])}</td></tr>"
            for i in self.infos)
        return ("<table><thead><tr><th>id</th><th>notebook</th><th>started</th><th>runs</th><th>turns</th>"
                f"<th>calls</th><th>last prompt</th></tr></thead><tbody>{rows}</tbody></table>"
                "<p>%agent --resume ID continues one; %agent --delete-session ID removes one.</p>" + left)

