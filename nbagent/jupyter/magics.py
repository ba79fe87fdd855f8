"""`%agent` and `%%agent`.

Options come first; everything after the first word that is not an option is the prompt, verbatim (so
apostrophes and quotes in a prompt need no escaping). `--` ends the options explicitly.
"""

from __future__ import annotations

import ast
import difflib
import os
import re
from typing import TYPE_CHECKING, Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_cell_magic, magics_class
from IPython.core.magic_arguments import argument, magic_arguments

from nbagent.calls.permissions import MODES
from nbagent.render.runs import plural

from .config import KEY_VARIABLES, key_set
from .session.state import NotebookSession, RunOptions

if TYPE_CHECKING:  # pragma: no cover
    from IPython.core.interactiveshell import InteractiveShell

    from nbagent.agent.run import AgentRun

__all__ = ["AgentMagics", "add_await", "quote_prompts", "register", "split_options", "unregister"]

_SESSION_ID = re.compile(r"^\d{8}-\d{6}-[0-9a-f]{6}$")
"""What a stored conversation's id looks like (`%agent --resume ID` takes one; other words start the prompt)."""
_BATCH_ID = re.compile(r"^[0-9a-f]{12}$")
"""What a stored batch's id looks like (`%agent --map VAR --resume ID`)."""
_TOKEN = re.compile(r"""\s*((?:"(?:\\.|[^"\\])*"|'(?:\\.|[^'\\])*'|[^\s"']+|["'])+)""")


def _unquote(text: str) -> str:
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'":
        try:
            return ast.literal_eval(text)
        except (ValueError, SyntaxError):
            return text[1:-1]
    return text


def split_options(line: str, parser: Any) -> tuple[list[str], str]:
    """Split `%agent` arguments into the leading options (as argv for `parser`) and the prompt, verbatim."""
    valued: set[str] = set()
    flags: set[str] = set()
    optional: set[str] = set()  # `--resume [ID]`: a value only when the next word is shaped like one
    for action in parser._actions:
        if action.nargs == "?":
            optional.update(action.option_strings)
        (flags if action.nargs == 0 else valued).update(action.option_strings)
    argv: list[str] = []
    pos = 0
    while True:
        m = _TOKEN.match(line, pos)
        if m is None:
            break
        token = m.group(1)
        if token == "--":
            pos = m.end()
            break
        if not token.startswith("-") or token == "-":
            break
        name, eq, value = token.partition("=")
        if name in flags and not eq:
            argv.append(name)
        elif name in optional and not eq:
            nxt = _TOKEN.match(line, m.end())
            if nxt is not None and (_SESSION_ID.match(nxt.group(1)) or _BATCH_ID.match(nxt.group(1))):
                argv.extend([name, nxt.group(1)])
                m = nxt
            else:
                argv.append(name)
        elif name in valued:
            if not eq:
                nxt = _TOKEN.match(line, m.end())
                if nxt is None:
                    raise UsageError(f"{name} needs a value. See %agent? for the options.")
                value, m = nxt.group(1), nxt
            argv.extend([name, _unquote(value)])
        else:
            names = sorted(o for o in valued | flags | optional if o.startswith("--"))
            close = difflib.get_close_matches(name if name.startswith("--") else "-" + name, names, n=1, cutoff=0.6)
            hint = f" Did you mean {close[0]}?" if close else ""
            raise UsageError(
                f"unknown option {name!r}.{hint} The options are: {', '.join(names)}. To start a prompt with '-', "
                "put -- before it."
            )
        pos = m.end()
    return argv, line[pos:].strip()


@magics_class
class AgentMagics(Magics):
    """The `%agent` / `%%agent` magics."""

    def __init__(self, shell: InteractiveShell, session: NotebookSession) -> None:
        super().__init__(shell)
        self.session = session

    @magic_arguments()
    @argument("--model", "-m", metavar="SPEC_OR_NAME",
              help="the model: a spec such as anthropic:claude-sonnet-4-5 or openai:gpt-4.1, or the name of a "
                   "Model object in the notebook (a ScriptedModel, say). Default: NBAgent.model, else the first "
                   "provider whose API key is set.")
    @argument("--mode", choices=MODES,
              help="the permission mode: default (ask before anything that is not read-only), acceptEdits, plan "
                   "(run nothing but reads), dontAsk (deny what would ask), bypassPermissions.")
    @argument("--tools", "-t", metavar="NAME,...",
              help="functions from the notebook to offer as tools, comma-separated (decorated with @tool or "
                   "not), besides the built-in ones (the view's header lists what a run was offered).")
    @argument("--only-tools", metavar="NAME,...",
              help="offer only these tools: functions from the notebook and built-in tools by name "
                   "(python, read_file, shell...), nothing else.")
    @argument("--runs", action="store_true",
              help="list the runs of this kernel that are still going and show their live views here "
                   "(no prompt needed).")
    @argument("--new", action="store_true",
              help="start a new conversation instead of continuing the last one.")
    @argument("--resume", nargs="?", const="", default=None, metavar="ID",
              help="continue a stored conversation (after a restart, say): its id, or none for this notebook's "
                   "latest. With a prompt, the run continues it at once; without, the next %%agent does.")
    @argument("--sessions", action="store_true",
              help="list the stored conversations of the workspace (id, notebook, started, runs, turns, calls, "
                   "last prompt).")
    @argument("--delete-session", metavar="ID", help="remove a stored conversation.")
    @argument("--wait", "-w", action="store_true",
              help="wait for the run to finish before the cell ends (the same as `await run`; the interrupt "
                   "button stops it).")
    @argument("--compact", action="store_true",
              help="compact the conversation now, without a prompt: older tool results become short stubs and "
                   "older turns one summary by the model; the next %%agent continues from it.")
    @argument("--max-turns", type=int, metavar="N", help="the most model requests this run makes.")
    @argument("--mcp", metavar="NAME,...",
              help="the MCP servers whose tools this run gets, comma-separated (default: every configured one, "
                   "from NBAgent.mcp_servers and the workspace's .mcp.json); --mcp none: no MCP tools.")
    @argument("--mcp-list", action="store_true",
              help="show the MCP servers: their state and their tools (starting those not started); no prompt.")
    @argument("--steer", action="store_true",
              help="send the text into the latest run that is still going, instead of starting a run: it joins "
                   "at the run's next turn (the live view has a box for the same).")
    @argument("--map", metavar="VAR",
              help="run the prompt once per item of the notebook variable VAR (a list, any iterable, or a DataFrame: "
                   "one item per row), the prompt a template such as 'Label: {text}' ({item} is the whole item); "
                   "one live batch view; with --resume [ID], only the items not done in that stored batch.")
    @argument("--concurrency", type=int, metavar="N", help="with --map: how many items run at once (default 8).")
    @argument("--output", metavar="TYPE", help="with --map: the name of a type each item's answer must be.")
    @argument("--to-cells", action="store_true",
              help="insert, below a finished run's cell, the cells that make again what its code left in the "
                   "kernel: the code as it ran, cut to what the final state needs (calls replaced later, failed or "
                   "only looking are left out), each a change you review; nothing runs. The run: the latest that "
                   "ran code, or give its variable name or id after the option.")
    @argument("--check", action="store_true",
              help="run the saved notebook top to bottom in a fresh kernel and compare it with this one: the names "
                   "the agent's work made that are missing or different after the rerun, and the cells that "
                   "failed, in one table. Every %%agent in the rerun answers from its stored conversation and runs "
                   "no tool. The notebook: this one, or give its path after the option.")
    @argument("--instructions", metavar="TEXT_OR_NAME",
              help="instructions replacing the default ones: quoted text, or the name of a string variable.")
    @line_cell_magic
    def agent(self, line: str, cell: str | None = None) -> Any:
        """Ask an LLM agent to do something in this kernel; returns the run (an `AgentRun`) at once.

        %agent [options] PROMPT
        %%agent [options]
        PROMPT, over several lines

        The run goes on in the background, shown live below the cell: the model's text as it streams, one
        row per tool call with what it is doing, and Approve / Deny / Always-allow buttons on calls that need
        your consent (the kernel stays free meanwhile, unless another cell blocks it). When the run ends, the
        cell keeps its static rendering, which the saved notebook holds. `await run` waits for it; `--wait`
        does that for you. Consecutive %agent calls continue one conversation; --new starts another. Running
        a cell again while its run is going shows that run's view again; `%agent --runs` lists the runs still
        going, with their views.

        Examples::

            %agent What columns does df have?
            run = %agent --model openai:gpt-4.1 --mode acceptEdits Clean the data in df
            %%agent --tools load_data,plot
            Load the March data and plot revenue by region.

        Settings: `%config NBAgent` lists them (model, mode, rules, approver, instructions, max_cost,
        context_window, compaction_threshold, ...). `%agent --compact` compacts the conversation by hand.
        Headless runs (nbclient, papermill, CI), where nobody clicks: set NBAGENT_APPROVAL=allow or deny (or
        `%config NBAgent.approver`), and end the notebook with a cell that does `await run`.
        """
        parser = self.agent.parser
        argv, prompt = split_options(line, parser)
        args = parser.parse_args(argv)
        if cell is not None and cell.strip():
            prompt = f"{prompt}\n{cell.strip()}" if prompt else cell.strip()
        if args.to_cells or args.check:
            return self._reproduce(args, prompt)
        if args.map is not None:  # one agent over many inputs: nbagent/jupyter/batch_view.py
            from .live.batch_view import start_batch_here

            tools = None if args.tools is None else [t.strip() for t in args.tools.split(",") if t.strip()]
            options = RunOptions(model=args.model, mode=args.mode, tools=tools, new=True, max_turns=args.max_turns)
            return start_batch_here(self.session, self.shell, args, prompt, options)
        if args.runs:
            from .notebook.runs import RunList

            kept = self.session.notebook_runs
            return RunList(kept, kept.live_runs())
        if args.steer:
            from .live.steering import steer_latest

            return steer_latest(self.session.notebook_runs, prompt)
        mcp = None if args.mcp is None else [n.strip() for n in args.mcp.split(",") if n.strip() not in ("", "none")]
        if args.mcp_list:
            return self.session.agents.mcp_list(mcp)
        if args.sessions:
            return self.session.stored.sessions()
        if args.delete_session:
            from nbagent.sessions import SessionError, delete_session

            try:
                delete_session(self.session.workspace, args.delete_session)
            except SessionError as exc:
                raise UsageError(str(exc)) from None
            if self.session.stored.session_id == args.delete_session:
                self.session.stored.session_id = None
            print(f"Removed the stored conversation {args.delete_session}.")
            return None
        if args.resume is not None:
            stored = self.session.stored.resume(args.resume or None)
            info = stored.info
            n = len(stored.interrupted)
            extra = (f"; {plural(n, 'call')} that {'was' if n == 1 else 'were'} in flight got an 'interrupted' "
                     "result") if n else ""
            model = self.session.stored.settings.get("model")
            missing = self._model_missing(args.model if args.model is not None else model)
            if missing and prompt:  # said before anything is printed as done: this prompt does not start
                raise UsageError(f"not started: {missing} (the conversation {info.id} is resumed: once there is a "
                                 "model, %agent PROMPT continues it)")
            model = f", with --model {model}" if isinstance(model, str) else ""
            then = "This %agent continues it" if prompt else "The next %agent continues it"
            print(f"Resumed {info.id}: {stored.why or 'the conversation asked for'}, {plural(info.calls, 'call')}{extra}"
                  f"{model}. {then}. Live objects of its calls did not survive the restart.")
            if missing:
                print(f"It needs a model first: {missing}")
            if not prompt:
                return None
        if args.compact:
            if prompt:
                raise UsageError("%agent --compact takes no prompt: compact first, then ask in the next %agent")
            return self.session.start("", RunOptions(model=args.model, compact=True))
        if not prompt:
            raise UsageError("%agent needs a prompt: %agent What columns does df have?  (see %agent? for options)")
        if args.max_turns is not None and args.max_turns < 1:
            raise UsageError("--max-turns must be at least 1")
        tools = None
        if args.tools is not None and args.only_tools is not None:
            raise UsageError("--tools adds to the built-in tools, --only-tools replaces them: use one of the two")
        names = args.only_tools if args.only_tools is not None else args.tools
        if names is not None:
            tools = [t.strip() for t in names.split(",") if t.strip()]
        instructions = args.instructions
        if instructions is not None and instructions.isidentifier():
            value = self.shell.user_ns.get(instructions)
            if isinstance(value, str):
                instructions = value
        options = RunOptions(model=args.model, mode=args.mode, tools=tools, new=args.new,
                             max_turns=args.max_turns, instructions=instructions,
                             only_tools=args.only_tools is not None, mcp=mcp)
        return self.session.start(prompt, options)

    def _reproduce(self, args: Any, which: str) -> Any:
        """`--to-cells [RUN]` and `--check [PATH]` (see nbagent/jupyter/notebook/rerun.py)."""
        from .notebook.rerun import CHECKING_VARIABLE

        if args.to_cells and args.check:
            raise UsageError("--to-cells and --check are two steps: insert the cells first, save, then --check")
        if os.environ.get(CHECKING_VARIABLE):
            print(f"%agent {'--check' if args.check else '--to-cells'}: skipped (this kernel is a reproducibility "
                  "check's rerun)")
            return None
        if args.to_cells:
            from .session.to_cells import find_run, start_to_cells

            return start_to_cells(self.session, find_run(self.session, which), args.mode)
        from .notebook.cells import notebook_state
        from .notebook.rerun import check_reproducible

        path = which or notebook_state(self.shell).saved_path()
        if not path:
            raise UsageError("--check: this notebook's file is not known here; give its path (%agent --check "
                             "analysis.ipynb), or set %config NBAgent.notebook_path")
        print(f"Rerunning {path} (as saved) in a fresh kernel, and comparing…", flush=True)
        try:
            return check_reproducible(path)
        except (FileNotFoundError, RuntimeError) as exc:
            raise UsageError(f"--check: {exc}") from None


    def _model_missing(self, value: Any) -> str | None:
        """Why the model a resumed conversation would go on with cannot be had here (None: it can)."""
        if os.environ.get("NBAGENT_REPLAY"):
            return None
        try:
            self.session.resolve_model(value)
        except UsageError as exc:
            return str(exc)
        return None


# --------------------------------------------------------------------------------------------------
# A prompt that ends with "?" is a question, not IPython's `obj?` help
# --------------------------------------------------------------------------------------------------
_TARGET = r"(?P<indent>\s*)(?P<target>(?:[A-Za-z_][\w.]*(?:\[[^\]]*\])?\s*=\s*)?)"  # `run = ` or nothing
_LINE = re.compile(rf"^{_TARGET}%agent\s+(?P<rest>\S.*?)\s*$")


def quote_prompts(lines: list[str]) -> list[str]:
    """Input transformer (cleanup stage): turn `%agent ...` lines into the magic call before IPython reads a
    final `?` as a request for help (`%agent What columns does df have?` would otherwise show `have?`)."""
    if lines and lines[0].lstrip().startswith("%%"):
        return lines  # a cell magic's body is its prompt, untouched
    out = []
    for line in lines:
        m = _LINE.match(line.rstrip("\n"))
        if m is not None:
            line = f"{m.group('indent')}{m.group('target')}get_ipython().run_line_magic('agent', {m.group('rest')!r})\n"
        out.append(line)
    return out


# --------------------------------------------------------------------------------------------------
# --wait: the cell awaits the run (IPython runs a cell with a top-level await on the kernel's loop)
# --------------------------------------------------------------------------------------------------
_CALL = re.compile(
    rf"^{_TARGET}(?P<call>get_ipython\(\)\.run_(?:line|cell)_magic\((?P<args>(['\"])agent\5\s*,.*)\))\s*$"
)


def _wants_wait(args_source: str) -> bool:
    try:
        args = ast.literal_eval(f"({args_source},)")
    except (ValueError, SyntaxError):
        return False
    if len(args) < 2 or not isinstance(args[1], str):
        return False
    try:
        argv, _ = split_options(args[1], AgentMagics.agent.parser)
    except UsageError:
        return False  # the magic will report it
    return "--wait" in argv or "-w" in argv


def add_await(lines: list[str]) -> list[str]:
    """Input transformer: `%agent --wait ...` becomes `await <the session>.wait(%agent ...)`, so the cell waits
    for the run (and a failure or an interrupt ends it with one line, see `NotebookSession.wait`)."""
    out = []
    for line in lines:
        m = _CALL.match(line.rstrip("\n"))
        if m is not None and _wants_wait(m.group("args")):
            line = f"{m.group('indent')}{m.group('target')}await get_ipython()._nbagent_session.wait({m.group('call')})\n"
        out.append(line)
    return out


# --------------------------------------------------------------------------------------------------
# Loading
# --------------------------------------------------------------------------------------------------
def loaded_message(config: Any) -> str:
    """What `%load_ext nbagent` says: that it worked, which model a bare %agent would use, where to look."""
    model = config.model
    if isinstance(model, str) and model:
        which = f"model {model} (NBAgent.model)"
    elif model:
        which = f"model {type(model).__name__} (NBAgent.model)"
    else:
        found = next((f"{provider} (${names[0] if len(names) == 1 else ' or $'.join(names)} is "
                       f"{'set' if where == 'environment' else 'stored'})"
                      for provider, names in KEY_VARIABLES if (where := key_set(names))), None)
        which = f"model: {found}" if found else "no model yet: set an API key, or give --model (a ScriptedModel works offline)"
    return f"nbagent loaded · %agent <task> starts a run · {which} · %agent? for the options"


def register(shell: InteractiveShell) -> NotebookSession:
    """Register the magics, the `NBAgent` settings, the display of runs and the `--wait` transformer."""
    from nbagent.agent.run import AgentRun

    session = getattr(shell, "_nbagent_session", None)
    if session is None:
        session = NotebookSession(shell)
        shell._nbagent_session = session
        shell.configurables.append(session.config)
        print(loaded_message(session.config))
        if os.environ.get("JPY_SESSION_NAME"):  # a notebook's kernel: the page names the notebook (its id)
            session._greet()
    shell.register_magics(AgentMagics(shell, session))
    formatter = shell.display_formatter.ipython_display_formatter
    formatter.for_type(AgentRun, session.display_run)
    if add_await not in shell.input_transformers_post:
        shell.input_transformers_post.append(add_await)
    if quote_prompts not in shell.input_transformers_cleanup:
        shell.input_transformers_cleanup.append(quote_prompts)
    from .panel.hub import attach_panel

    attach_panel(shell, session)  # the side panel and the buttons on cells talk to this session
    from nbagent.safety import keys

    keys.stored_values()  # the keys stored with the panel's Settings are secrets from now on, used or not
    return session


def unregister(shell: InteractiveShell) -> None:
    """Undo `register` (runs already started go on)."""
    from nbagent.agent.run import AgentRun

    magics = shell.magics_manager.magics
    for kind in ("line", "cell"):
        magics[kind].pop("agent", None)
    formatter = shell.display_formatter.ipython_display_formatter
    formatter.type_printers.pop(AgentRun, None)
    if add_await in shell.input_transformers_post:
        shell.input_transformers_post.remove(add_await)
    if quote_prompts in shell.input_transformers_cleanup:
        shell.input_transformers_cleanup.remove(quote_prompts)
    session = getattr(shell, "_nbagent_session", None)
    if session is not None:
        from .panel.hub import detach_panel

        detach_panel(shell, session)
        session.close()
    if session is not None and session.config in shell.configurables:
        shell.configurables.remove(session.config)
        del shell._nbagent_session
