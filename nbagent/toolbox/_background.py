"""The shell's background mode: long commands that outlive their call, and the `process` tool over them.

    shell(command="python -m http.server 8000", background=True)   -> started as process p1, returns at once
    shell(command="make all", yield_ms=5000)   -> its result if it ends within 5 s, else it goes on as p2
    process(action="list")                     -> every process of the run: id, status, command, runtime
    process(action="poll", id="p1")            -> the output since the last poll, and whether it exited
    process(action="log", id="p1")             -> all the output kept (offset / limit to page)
    process(action="write", id="p1", input="y\\n")    -> to its stdin (eof=True closes it)
    process(action="kill", id="p1")            -> SIGTERM to everything it started, SIGKILL 2 s later

A background command is started exactly as a foreground one (`_shell.py` prepares it: the same sandbox
policy, hidden files, environment, its own process group), with a pipe as its stdin. Its output is kept
(the last `MAX_KEPT_CHARS` characters) and reaches the run's listeners as `ProcessChanged` events, which the
run's view shows. The processes belong to the run (`run.processes`, kept in its `RunScope`): when the run
ends, however it ends, every one still running is stopped with everything it started (the sandbox's PID
namespace, or its marker sweep, catches what left the process group); when the interpreter exits
(the kernel shutting down), an exit handler kills what is left. When it is killed outright (no exit handler
runs), Linux kills the command itself (PR_SET_PDEATHSIG), and the sandbox what it started (bubblewrap's PID
namespace dies with it; Landlock's supervisor catches its own death signal: `supervise_command`); without a
sandbox (`danger-full-access`), what the command started in a session of its own may outlive it.

What the process tool reads is what the run's own commands printed: it goes to the model like any shell
output, and reaches the view escaped. Its slices (`poll`'s new output, `log`'s offset and limit) are cut
from the screened output (`nbagent.safety.gate`), never from the raw one: a key the output holds is
`[REDACTED:NAME]` before any offset applies, so no run of offsets rebuilds it a few characters at a time.
"""

from __future__ import annotations

import asyncio
import codecs
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

from pydantic import Field

from ..context import ToolContext
from ..messages import TextBlock, ToolResult
from ..safety.gate import screen, screen_part
from ..tools.definition import Tool
from ._signals import kill_family_now, signal_family, stopped_at_exit
from ._values import cut

__all__ = ["BackgroundProcess", "ProcessChanged", "ProcessRegistry", "make_process_tool", "start_background"]

MAX_KEPT_CHARS = 1_000_000
"""Output one background process keeps (the oldest is dropped past this)."""
MAX_MODEL_CHARS = 20_000
KILL_GRACE = 2.0
MAX_WAIT_MS = 30_000
# parameter types made once: a `Field` made in each call of a tool factory would rebuild its model (tools/schemas.py)
_WAIT_MS = Annotated[int, Field(ge=0, le=MAX_WAIT_MS)]
_OFFSET = Annotated[int, Field(ge=0)]
_LOG_LIMIT = Annotated[int, Field(gt=0, le=MAX_MODEL_CHARS)]

@dataclass(slots=True)
class ProcessChanged:
    """A background process started, printed, or exited (for the view; never the history)."""

    process: BackgroundProcess
    what: str
    """started, output, exited or killed."""
    kind: Literal["process_changed"] = "process_changed"


@dataclass(eq=False)
class BackgroundProcess:
    """One command running in the background (what `run.processes` lists)."""

    id: str
    command: str
    sandbox: str
    call_id: str | None
    proc: Any = field(repr=False)
    prepared: Any = field(repr=False)
    started_at: float = field(default_factory=time.time)
    t0: float = field(default_factory=time.monotonic, repr=False)
    exit_code: int | None = None
    """The exit status once it ended (negative: killed by that signal)."""
    ended_at: float | None = None
    killed: bool = False
    """Stopped by `kill` or by the end of the run."""
    chunks: list[str] = field(default_factory=list, repr=False)
    total: int = 0
    """Characters of output so far (kept or not)."""
    dropped: int = 0
    """The oldest characters no longer kept."""
    polled: int = 0
    """Where the last poll stopped (an offset into all the output)."""
    _screened: tuple[int, str] = field(default=(-1, ""), repr=False)
    _changed: asyncio.Event = field(default_factory=asyncio.Event, repr=False)
    _emit: Any = field(default=None, repr=False)
    _progress: Any = field(default=None, repr=False)
    _watch: Any = field(default=None, repr=False)

    @property
    def status(self) -> str:
        """running, exited or killed."""
        if self.exit_code is None and self.ended_at is None:
            return "running"
        return "killed" if self.killed else "exited"

    @property
    def running(self) -> bool:
        return self.status == "running"

    @property
    def runtime(self) -> float:
        end = self.ended_at if self.ended_at is not None else time.time()
        return max(0.0, end - self.started_at)

    @property
    def output(self) -> str:
        """The output kept (stdout and stderr interleaved as they arrived)."""
        return "".join(self.chunks)

    def since(self, offset: int) -> str:
        text = self.output
        start = max(0, offset - self.dropped)
        return text[start:]

    def screened(self) -> str:
        """The output kept, screened (`nbagent.safety.gate.screen`): what the model's slices are cut from."""
        at, text = self._screened
        if at != self.total:
            text = screen(self.output)
            self._screened = (self.total, text)
        return text

    def screened_since(self, offset: int) -> str:
        """The output after `offset`, screened as it reads after what came before it."""
        start = max(0, offset - self.dropped)
        text = self.output
        return screen_part(text[start:], text[max(0, start - 4096):start])

    def _add(self, text: str) -> None:
        self.chunks.append(text)
        self.total += len(text)
        kept = self.total - self.dropped
        if kept > MAX_KEPT_CHARS:
            joined = "".join(self.chunks)
            cut_at = kept - MAX_KEPT_CHARS
            self.chunks = [joined[cut_at:]]
            self.dropped += cut_at
        if self._progress is not None:
            self._progress(output=text, process=self.id)
        self._notify("output")

    def _notify(self, what: str) -> None:
        self._changed.set()
        if self._emit is not None:
            try:
                self._emit(ProcessChanged(self, what))
            except Exception:  # pragma: no cover - a listener must not break the process
                pass

    async def changed(self, timeout: float) -> None:
        """Wait up to `timeout` seconds for new output or the end."""
        self._changed.clear()
        try:
            await asyncio.wait_for(self._changed.wait(), timeout)
        except (asyncio.TimeoutError, TimeoutError):
            pass

    def summary(self) -> str:
        state = self.status if self.running else f"{self.status}, exit code {self.exit_code}{self.put_back()}"
        return f"{self.id} · {state} · {self.runtime:.0f} s · {self.command}"

    def put_back(self) -> str:
        """What the sandbox put back of protected paths the command changed, once it ended ("" if nothing)."""
        done = getattr(self.prepared, "put_back", ())
        return f"; it changed protected paths, put back after it: {', '.join(done)}" if done else ""

    async def write(self, data: str, eof: bool = False) -> None:
        stdin = self.proc.stdin
        if stdin is None or stdin.is_closing():
            raise ValueError(f"the stdin of {self.id} is closed")
        if data:
            stdin.write(data.encode())
            await stdin.drain()
        if eof:
            stdin.close()

    async def kill(self) -> None:
        """SIGTERM to its process group and every process descended from it (a sandbox's PID namespace
        runs in a session of its own), SIGKILL after a grace period; then what it left is stopped."""
        if self.running:
            self.killed = True
            family = signal_family(self.proc, signal.SIGTERM)
            try:
                await asyncio.wait_for(asyncio.shield(self._watch), KILL_GRACE)
            except (asyncio.TimeoutError, TimeoutError):
                pass
            signal_family(self.proc, signal.SIGKILL, family)
        if self._watch is not None:
            await asyncio.shield(self._watch)

    def kill_now(self) -> None:
        """From an exit handler: SIGKILL to the group and whatever the sandbox marked, at once."""
        if kill_family_now(self.proc):
            self.killed = True
        try:
            self.prepared.cleanup()
        except Exception:  # pragma: no cover
            pass


class ProcessRegistry:
    """A run's background processes, by id (`p1`, `p2`...); stopped together when the run ends."""

    def __init__(self, emit: Any = None) -> None:
        self.processes: dict[str, BackgroundProcess] = {}
        self.emit = emit
        self._next = 1

    def new_id(self) -> str:
        pid = f"p{self._next}"
        self._next += 1
        return pid

    def get(self, pid: str | None) -> BackgroundProcess:
        if not pid:
            raise KeyError("say which process: id (see action='list')")
        if pid not in self.processes:
            known = ", ".join(self.processes) or "none"
            raise KeyError(f"there is no process {pid!r} in this run (there are: {known})")
        return self.processes[pid]

    async def aclose(self) -> None:
        """Stop every process still running (the end of the run)."""
        await asyncio.gather(*(p.kill() for p in self.processes.values()), return_exceptions=True)


async def read_text(stream: asyncio.StreamReader, add: Callable[[str], None]) -> None:
    """Read `stream` to its end, giving `add` its text as it comes (UTF-8, a character split between two reads
    kept for the next one, bytes that are not UTF-8 replaced); `add` never gets an empty string."""
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    while True:
        chunk = await stream.read(65536)
        text = decoder.decode(chunk, final=not chunk)
        if text:
            add(text)
        if not chunk:
            return


async def _read(proc_info: BackgroundProcess, stream: asyncio.StreamReader) -> None:
    await read_text(stream, proc_info._add)


async def _watch(p: BackgroundProcess, exited: Any) -> None:
    """Until the process ends: read its output; then record how it ended and free what the sandbox made."""
    readers = [asyncio.ensure_future(_read(p, p.proc.stdout)), asyncio.ensure_future(_read(p, p.proc.stderr))]
    try:
        code = await exited(p.proc)
        p.prepared.stop_leftovers(p.proc.pid)
        done, pending = await asyncio.wait(readers, timeout=1.0)
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
    finally:
        for task in readers:
            task.cancel()
        transport = getattr(p.proc, "_transport", None)
        if transport is not None:
            transport.close()
        p.prepared.cleanup()
    p.exit_code = code
    p.ended_at = time.time()
    p._notify("killed" if p.killed else "exited")


async def start_background(ctx: ToolContext, *, command: str, cwd: str, env: dict[str, str],
                           prepared: Any, sandbox: str, yield_ms: int | None, exited: Any,
                           foreground_result: Any) -> ToolResult:
    """Start a prepared command as a background process of the run. With `yield_ms`, wait that long
    first: a command that ends meanwhile gets its ordinary result (`foreground_result(...)`)."""
    if getattr(prepared, "copy", None) is not None:  # Landlock alone: only a command closed to the top level
        prepared.cleanup()  # (`prepare(long_lived=True)`) may go on; a put-back after it comes too late
        return ToolResult([TextBlock("not run: it was prepared to be put back after it ends, which cannot protect "
                                     "what runs meanwhile in the background")], is_error=True)
    registry = ctx.scope.get(ProcessRegistry, lambda: ProcessRegistry(ctx.scope.emit))
    argv, how = prepared.how_to_start()  # dies with the kernel; the sandbox's steps (Landlock)
    proc = await asyncio.create_subprocess_exec(
        *argv, cwd=cwd, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE, start_new_session=True, env=env, **how,
    )
    if hasattr(prepared, "started"):
        prepared.started()  # what the sandbox program read at its start (bubblewrap's seccomp filter)
    if hasattr(prepared, "in_background"):
        prepared.in_background()  # Landlock alone: protected paths checked before every later call
    p = BackgroundProcess(registry.new_id(), command, sandbox, ctx.call_id, proc, prepared, _emit=registry.emit)
    p._progress = ctx.progress if yield_ms else None
    registry.processes[p.id] = p
    stopped_at_exit(proc, p.kill_now)
    p._watch = asyncio.ensure_future(_watch(p, exited))
    p._notify("started")
    if yield_ms:
        try:
            await asyncio.wait_for(asyncio.shield(p._watch), yield_ms / 1000)
        except (asyncio.TimeoutError, TimeoutError):
            pass
        except asyncio.CancelledError:
            await p.kill()
            raise
        finally:
            p._progress = None
        if not p.running:
            del registry.processes[p.id]
            return foreground_result(p.output, p.exit_code, time.monotonic() - p.t0)
        so_far = cut(p.output, MAX_MODEL_CHARS, what="characters of output") if p.output else "(no output yet)"
        p.polled = p.total
        return ToolResult([TextBlock(
            f"{so_far.rstrip()}\n[still running after {yield_ms} ms: it goes on in the background as process {p.id}; "
            f"use the process tool to poll its output, write to its stdin or kill it]")], details=p)
    return ToolResult([TextBlock(
        f"Started in the background as process {p.id} ({sandbox} sandbox). Use the process tool: "
        f"action='poll' for its output, 'write' for its stdin, 'kill' to stop it. It is stopped when this run "
        "ends.")], details=p)


def make_process_tool() -> Tool:
    """The `process` tool over the run's background processes."""

    async def process(
        action: Literal["list", "poll", "log", "write", "kill"],
        id: str | None = None,  # noqa: A002 - the name the model sees
        input: str | None = None,  # noqa: A002
        eof: bool = False,
        wait_ms: _WAIT_MS = 0,
        offset: _OFFSET = 0,
        limit: _LOG_LIMIT = MAX_MODEL_CHARS,
        ctx: ToolContext = None,  # type: ignore[assignment]
    ) -> ToolResult:
        """Work with the processes `shell` started in the background (background=True, or yield_ms).

        Args:
            action: list (every process: id, status, command), poll (the output since the last poll, and
                whether it exited), log (all the output kept, from `offset`), write (send `input` to its
                stdin), kill (stop it and everything it started).
            id: the process (`p1`...), for every action but list.
            input: the text to write (add "\\n" to end a line).
            eof: with write, close its stdin afterwards.
            wait_ms: with poll, wait up to this long for new output or its end (at most 30000).
            offset: with log, where to start (in characters of all its output, secrets shown redacted).
            limit: with log, how many characters at most.
        """
        registry = ctx.scope.find(ProcessRegistry)
        if action == "list":
            if registry is None or not registry.processes:
                return ToolResult([TextBlock("No background processes in this run.")], details=[])
            return ToolResult([TextBlock("\n".join(p.summary() for p in registry.processes.values()))],
                              details=list(registry.processes.values()))
        try:
            if registry is None:
                raise KeyError("no background processes were started in this run")
            p = registry.get(id)
        except KeyError as exc:
            return ToolResult([TextBlock(str(exc.args[0]))], is_error=True)
        if action == "poll":
            if wait_ms and p.running and p.total == p.polled:
                await p.changed(wait_ms / 1000)
            new = p.screened_since(p.polled)
            p.polled = p.total
            state = "still running" if p.running else f"{p.status}, exit code {p.exit_code}{p.put_back()}"
            body = cut(new, MAX_MODEL_CHARS, what="characters of output") if new else "(no new output)"
            return ToolResult([TextBlock(f"{body.rstrip()}\n[{p.id}: {state}]")], details=p)
        if action == "log":
            kept = p.screened()  # offsets count characters of the screened output
            start = max(offset, p.dropped)
            text = kept[start - p.dropped:][:limit]
            note = f"characters {start:,}-{start + len(text):,} of {p.dropped + len(kept):,}"
            if p.dropped and offset < p.dropped:
                note += f" (the first {p.dropped:,} are no longer kept)"
            return ToolResult([TextBlock(f"{text}\n[{p.id}: {note}]")], details=p)
        if action == "write":
            if input is None and not eof:
                return ToolResult([TextBlock("write needs `input` (or eof=True)")], is_error=True)
            if not p.running:
                return ToolResult([TextBlock(f"{p.id} is not running ({p.status}, exit code {p.exit_code})")],
                                  is_error=True)
            try:
                await p.write(input or "", eof)
            except (ValueError, OSError, ConnectionError) as exc:
                return ToolResult([TextBlock(f"could not write to {p.id}: {exc}")], is_error=True)
            return ToolResult([TextBlock(f"wrote {len(input or '')} characters to {p.id}"
                                         + (" and closed its stdin" if eof else ""))], details=p)
        was_running = p.running
        await p.kill()
        said = "stopped" if was_running else f"had already ended ({p.status})"
        return ToolResult([TextBlock(f"{p.id} {said}, exit code {p.exit_code}{p.put_back()}")], details=p)

    return Tool(
        process,
        capability="execute",
        read_only_call=lambda args, ctx=None: args.get("action") in ("list", "poll", "log"),
        describe_activity=lambda a: f"{a.action.capitalize()} {'background processes' if a.action == 'list' else a.id}",
    )
