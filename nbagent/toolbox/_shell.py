"""The `shell` tool: one bash command line, run in the workspace.

The command runs with `bash -c` in a new session (its own process group), with the workspace as its
working directory, stdin closed, pagers off (`PAGER=cat`, `GIT_PAGER=cat`) and no terminal prompts.
Its stdout and stderr stream as progress while it runs. When it runs past its timeout, or the call is
cancelled (Stop, `run.cancel()`), the whole process group gets SIGTERM, then SIGKILL two seconds later,
so children it started stop too. The model gets the output cut to its head and tail; `details` (a
`ShellResult`) keeps all of it (up to `MAX_KEPT_BYTES` per stream).

Permissions (see `_shellrules` and `_readonly`): a command that only reads (`git status`, `ls -la`,
`cat notes.md`) is auto-allowed when the command line really is just that; rules match with
`shell(prefix*)` patterns that compound lines never satisfy; "always allow" remembers exactly the
command line that was approved.

The sandbox (see `nbagent.safety.sandbox`) is the second wall, for when the classifier is wrong: an auto-allowed
command runs under the `read-only` policy, an approved one under the agent's (`workspace-write` by
default), each in its own PID and network namespace, so nothing it starts outlives the call. Files that
read deny rules protect look empty inside it, and credential variables are left out of its
environment unless it was approved and the policy allows the network (an auto-allowed command never
gets them, with or without a sandbox). Without a sandbox (none on this OS, or
`danger-full-access`), auto-allow shrinks to a short list of commands whose options are fully known.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import time
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import Field

from ..context import ToolContext
from ..messages import TextBlock, ToolResult
from ..reprs import short_line
from ..safety.sandbox import SandboxPolicy, hidden_paths, prepare, sandbox_backend, sandbox_policy
from ..safety.secrets import SECRET_VARIABLE_PATTERN, secret_values
from ..tools.definition import Tool
from ._background import read_text
from ._binding import Binding, read_denied_check
from ._gitsafety import git_safety_env
from ._leaves import Where
from ._readdeny import reveals_denied
from ._readonly import read_only_problem
from ._refusals import sandbox_refusal
from ._shellrules import pattern_matches, suggest_pattern
from ._signals import signal_family, stopped_at_exit
from ._values import cut
from ._workspace import WorkspaceError

__all__ = ["DEFAULT_TIMEOUT", "MAX_TIMEOUT", "ShellResult", "make_shell_tool"]

DEFAULT_TIMEOUT = 120.0
MAX_TIMEOUT = 3600.0

# parameter types made once: a `Field` made in each call of a tool factory would rebuild its model (tools/schemas.py)
_TIMEOUT = Annotated[float, Field(gt=0, le=MAX_TIMEOUT)]
_YIELD_MS = Annotated[int, Field(gt=0, le=int(MAX_TIMEOUT * 1000))]

MAX_MODEL_CHARS = 30_000
"""How much output the model gets (head and tail)."""
MAX_KEPT_BYTES = 16 * 1024 * 1024
"""How much of each stream `details` keeps."""
KILL_GRACE = 2.0
"""Seconds between SIGTERM and SIGKILL."""
PIPE_GRACE = 1.0
"""Seconds to wait, once the command exited, for programs it left running to close its output."""


@dataclass(slots=True)
class ShellResult:
    """What a command did (`details` of the shell tool's result)."""

    command: str
    exit_code: int | None
    """The exit status (negative: killed by that signal; None: it did not finish)."""
    stdout: str
    stderr: str
    output: str
    """stdout and stderr interleaved as they arrived."""
    timed_out: bool = False
    duration: float = 0.0
    dropped_bytes: int = 0
    """Output not kept because it was over `MAX_KEPT_BYTES`."""
    sandbox: str = "none"
    """The sandbox policy it ran under ("read-only", "workspace-write", or "none")."""
    refused: str = ""
    """What the sandbox refused it, in words, worked out from its errors as it ended ("" when nothing, or
    when it was made without the workspace at hand: `sandbox_stopped` then says what the walls are)."""
    put_back: str = ""
    """What the sandbox put back of protected paths after it, in words (Landlock without a mount namespace;
    "" when nothing)."""

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out

    def __str__(self) -> str:
        return self.output

    @property
    def sandbox_stopped(self) -> str | None:
        """What the sandbox stopped, in words, when the command's errors say it hit the sandbox's walls (a
        write where the policy allows none, the network): a view shows it apart from ordinary failures."""
        if self.sandbox == "none":
            return None
        text = self.stderr or self.output
        if any(sign in text for sign in _NETWORK_SIGNS):
            return f"stopped by the sandbox ({self.sandbox}): the network is off there"
        return self.refused or self.put_back or sandbox_refusal(text, sandbox=self.sandbox, workspace=None)


_NETWORK_SIGNS = ("Network is unreachable", "Could not resolve host", "Temporary failure in name resolution",
                  "Name or service not known", "Address family not supported")


def _agent_policy(ctx: Any) -> SandboxPolicy:
    return sandbox_policy(getattr(getattr(ctx, "constraints", None), "sandbox", None))


def _sandboxed(policy: SandboxPolicy) -> bool:
    """Whether commands under `policy` run inside an OS sandbox on this machine."""
    return policy.name != "danger-full-access" and sandbox_backend().available


def call_policy(ctx: Any) -> SandboxPolicy:
    """The sandbox a call runs in: `read-only` when it was auto-allowed as a read-only command (whatever
    the agent's policy, unless that is danger-full-access), else the agent's policy."""
    policy = _agent_policy(ctx)
    decision = getattr(ctx, "decision", None)
    if getattr(decision, "source", None) == "read_only" and policy.name != "danger-full-access":
        return SandboxPolicy("read-only")
    return policy


def _environment(keep_secrets: bool = True) -> dict[str, str]:
    env = dict(os.environ)
    if not keep_secrets:  # a sandboxed command without network has no use for credentials, named so or not
        known = secret_values()
        env = {k: v for k, v in env.items() if not SECRET_VARIABLE_PATTERN.search(k)
               and not any(s in v for s in known if len(s) >= 8)}
    env.update({"PAGER": "cat", "GIT_PAGER": "cat", "GIT_TERMINAL_PROMPT": "0", "TERM": "dumb",
                "PYTHONUNBUFFERED": "1", "NO_COLOR": "1"})
    env.update(git_safety_env(env))  # every git it starts: no hooks, fsmonitor, pager, bare repository...
    if env.get("MPLBACKEND", "").startswith("module://"):
        env["MPLBACKEND"] = "Agg"  # the kernel's inline backend means nothing in a subprocess
    return env


def _bash() -> str:
    return shutil.which("bash") or "/bin/sh"


def _close_pipes(proc: asyncio.subprocess.Process) -> None:
    """Close our ends of the pipes (a program left in the background may still hold theirs)."""
    transport = getattr(proc, "_transport", None)
    if transport is not None:
        try:
            transport.close()
        except Exception:  # pragma: no cover
            pass


async def _exited(proc: asyncio.subprocess.Process) -> int:
    """Wait for the process itself to exit (`proc.wait()` also waits for every holder of its pipes to
    close them, which a program left in the background may never do)."""
    if proc.returncode is None and hasattr(os, "pidfd_open"):
        try:  # Linux: told the moment it exits, rather than at the next poll
            fd = os.pidfd_open(proc.pid)
        except OSError:
            fd = -1
        if fd >= 0:
            loop = asyncio.get_running_loop()
            exited = loop.create_future()
            loop.add_reader(fd, lambda: exited.done() or exited.set_result(None))
            try:
                await exited
            finally:
                loop.remove_reader(fd)
                os.close(fd)
    delay = 0.001
    while proc.returncode is None:  # the child watcher records the status a moment later
        await asyncio.sleep(delay)
        delay = min(delay * 2, 0.05)
    return proc.returncode


async def _terminate(proc: asyncio.subprocess.Process) -> None:
    """SIGTERM to the whole group and every process descended from it (the sandbox's own session), SIGKILL
    after a grace period."""
    family = signal_family(proc, signal.SIGTERM)
    try:
        await asyncio.wait_for(_exited(proc), KILL_GRACE)
    except (asyncio.TimeoutError, TimeoutError):
        pass
    signal_family(proc, signal.SIGKILL, family)


class _Collector:
    def __init__(self, ctx: Any) -> None:
        self.ctx = ctx
        self.parts: dict[str, list[str]] = {"stdout": [], "stderr": []}
        self.kept = {"stdout": 0, "stderr": 0}
        self.combined: list[str] = []
        self.dropped = 0

    async def read(self, stream: asyncio.StreamReader, name: str) -> None:
        await read_text(stream, lambda text: self._add(name, text))

    def _add(self, name: str, text: str) -> None:
        if not text:
            return
        if self.kept[name] < MAX_KEPT_BYTES:
            self.parts[name].append(text)
            self.combined.append(text)
            self.kept[name] += len(text)
        else:
            self.dropped += len(text)
        if self.ctx is not None:
            self.ctx.progress(output=text, stream=name)


def make_shell_tool(binding: Binding) -> Tool:
    """The `shell` tool, working in the binding's workspace."""

    async def shell(
        command: str,
        timeout: _TIMEOUT = DEFAULT_TIMEOUT,
        background: bool = False,
        yield_ms: _YIELD_MS | None = None,
        ctx: ToolContext = None,  # type: ignore[assignment]
    ) -> ToolResult:
        """Run a bash command line in the workspace directory and return its output and exit code.
        Use it for git, package managers, test runners and other programs; stdin is closed, so
        interactive programs will not work (run them with background=True and write to them).

        Args:
            command: the command line, e.g. `git status` or `pytest -q tests/`.
            timeout: seconds before the command (and everything it started) is stopped (a background
                command runs until it ends, is killed, or the run ends).
            background: start it and return at once (servers, builds, training loops); the `process`
                tool then polls its output, writes to its stdin and kills it. Stopped when the run ends.
            yield_ms: wait this long for it; if it is still running then, it goes on in the background.
        """
        try:
            ws = binding.workspace_for(ctx)
        except WorkspaceError as exc:
            return ToolResult([TextBlock(str(exc))], is_error=True)
        if not command.strip():
            return ToolResult([TextBlock("the command is empty")], is_error=True)
        if "\x00" in command:
            return ToolResult([TextBlock("the command contains a NUL byte")], is_error=True)
        denied = read_denied_check(ctx)
        policy = call_policy(ctx)
        sandboxed = _sandboxed(policy)
        revealing = reveals_denied(command, ws, denied, hidden_by_sandbox=sandboxed)
        if revealing:  # a deny rule on reading holds here too, whatever was approved
            return ToolResult([TextBlock(f"not run: {revealing}")], is_error=True)
        rule = _denied_now(binding, command, ctx)
        if rule:  # looked at again as it starts: an earlier call may have changed what the line runs
            return ToolResult([TextBlock(f"not run: denied by rule '{rule}' (checked again as it started)")],
                              is_error=True)
        try:
            hidden = hidden_paths(ws.root, denied) if sandboxed and denied is not None else ()
            prepared = prepare([_bash(), "-c", command], workspace=ws.root, policy=policy, hidden=hidden,
                               long_lived=bool(background or yield_ms))
        except OSError as exc:
            return ToolResult([TextBlock(f"the sandbox could not be set up ({exc}); the command did not run")],
                              is_error=True)
        # credentials only for a command the person approved that may use the network (or runs unsandboxed);
        # never for one that was auto-allowed, sandbox or not
        auto = getattr(getattr(ctx, "decision", None), "source", None) == "read_only"
        env = _environment(keep_secrets=not auto and (not sandboxed or policy.network))
        env.update(prepared.env)
        if background or yield_ms:  # the background mode: nbagent.toolbox._background
            return await _start_background(ctx, command, prepared, env, ws, policy, sandboxed, timeout, yield_ms,
                                           hidden)
        started = time.monotonic()
        argv, how = prepared.how_to_start()  # dies with the kernel; the sandbox's steps (Landlock)
        starting = asyncio.ensure_future(asyncio.create_subprocess_exec(
            *argv, cwd=str(ws.root), stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, start_new_session=True, env=env, **how,
        ))
        try:
            proc = await asyncio.shield(starting)
            stopped_at_exit(proc)
            prepared.started()
        except asyncio.CancelledError:
            # cancelled while the process was being started: it may be running already, so stop it too
            try:
                started_proc = await starting
            except BaseException:
                prepared.cleanup()
                raise
            await asyncio.shield(_terminate(started_proc))
            _close_pipes(started_proc)
            prepared.cleanup()
            raise
        except BaseException:
            prepared.cleanup()
            raise
        collector = _Collector(ctx)
        readers = [asyncio.ensure_future(collector.read(proc.stdout, "stdout")),  # type: ignore[arg-type]
                   asyncio.ensure_future(collector.read(proc.stderr, "stderr"))]  # type: ignore[arg-type]
        timed_out = False
        left_running = False
        try:
            try:
                await asyncio.wait_for(_exited(proc), timeout)
            except (asyncio.TimeoutError, TimeoutError):
                timed_out = True
                await _terminate(proc)
            prepared.stop_leftovers(proc.pid)
            # the output is complete once both pipes close; programs left in the background may hold
            # them open, so wait only a little for that
            done, pending = await asyncio.wait(readers, timeout=PIPE_GRACE if not timed_out else KILL_GRACE)
            if pending:
                left_running = True
                for task in pending:
                    task.cancel()
                await asyncio.gather(*pending, return_exceptions=True)
        except asyncio.CancelledError:
            await asyncio.shield(_terminate(proc))
            for task in readers:
                task.cancel()
            _close_pipes(proc)
            prepared.cleanup()
            raise
        _close_pipes(proc)
        prepared.cleanup()
        exit_code = proc.returncode
        details = ShellResult(
            command=command, exit_code=exit_code, stdout="".join(collector.parts["stdout"]),
            stderr="".join(collector.parts["stderr"]), output="".join(collector.combined), timed_out=timed_out,
            duration=time.monotonic() - started, dropped_bytes=collector.dropped,
            sandbox=str(policy) if sandboxed else "none",
        )
        details.refused = _refused(details, ws.root, prepared, hidden)
        details.put_back = _put_back(prepared)
        return _result(details, timeout, left_running, prepared)

    tool_ = Tool(
        shell,
        destructive=True,
        capability="execute",
        rule_matcher=_rule_matcher(binding),
        read_only_call=_read_only_call(binding),
        suggest_grant=lambda args: suggest_pattern(args.get("command", "")),
        describe_activity=lambda a: f"Running `{short_line(a.command)}`",
        describe_completed_activity=_completed,
    )
    tool_.badge = "runs code"  # the view's word for it; a read-only command is shown as read-only
    return tool_


async def _start_background(ctx: Any, command: str, prepared: Any, env: dict[str, str], ws: Any, policy: Any,
                            sandboxed: bool, timeout: float, yield_ms: int | None, hidden: Any = ()) -> ToolResult:
    from ._background import start_background

    sandbox = str(policy) if sandboxed else "none"

    def finished(output: str, exit_code: int | None, duration: float) -> ToolResult:
        details = ShellResult(command=command, exit_code=exit_code, stdout=output, stderr="", output=output,
                              duration=duration, sandbox=sandbox)
        details.refused = _refused(details, ws.root, prepared, hidden)
        details.put_back = _put_back(prepared)
        return _result(details, timeout, False, prepared)

    try:
        return await start_background(ctx, command=command, cwd=str(ws.root), env=env,
                                      prepared=prepared, sandbox=sandbox, yield_ms=yield_ms, exited=_exited,
                                      foreground_result=finished)
    except OSError as exc:
        prepared.cleanup()
        return ToolResult([TextBlock(f"the command could not be started ({exc})")], is_error=True)


def _rule_matcher(binding: Binding):
    def matcher(pattern: str, args: Any, ctx: Any = None, action: str = "allow") -> bool:
        command = args.get("command")
        if not isinstance(command, str):
            return action == "deny"
        return pattern_matches(pattern, command, action, _where(binding, ctx) if action == "deny" else None)

    return matcher


def _where(binding: Binding, ctx: Any) -> Where | None:
    """Where a command runs, for deny rules: the workspace, and whether the OS sandbox keeps `.git` read-only."""
    try:
        root = str(binding.workspace_for(ctx).root)
    except WorkspaceError:
        return None
    return Where(root, sandboxed=_sandboxed(call_policy(ctx)))


def _denied_now(binding: Binding, command: str, ctx: Any) -> str | None:
    """The shell deny rule a command is under when it starts, or None: deny rules were decided before the
    batch ran, and what they depend on (git's configuration, the programs on PATH) may have changed since."""
    for rule in getattr(ctx, "rules", None) or ():
        if rule.action == "deny" and rule.names("shell") and (
                rule.pattern is None or pattern_matches(rule.pattern, command, "deny", _where(binding, ctx))):
            return str(rule)
    return None


def _read_only_call(binding: Binding):
    def read_only(args: Any, ctx: Any = None) -> bool:
        command = args.get("command")
        if not isinstance(command, str):
            return False
        try:
            ws = binding.workspace_for(ctx)
        except WorkspaceError:
            return False
        denied = read_denied_check(ctx)
        # without a sandbox to catch its mistakes, the classifier trusts only commands it knows fully
        sandboxed = _sandboxed(_agent_policy(ctx))
        return (read_only_problem(command, ws, denied, sandboxed=sandboxed) is None
                and reveals_denied(command, ws, denied, hidden_by_sandbox=sandboxed) is None)

    return read_only


def _completed(args: Any, result: Any) -> str:
    if isinstance(result, ShellResult):
        if result.timed_out:
            return f"`{short_line(args.command)}` timed out"
        walls = "; the sandbox stopped part of it" if result.sandbox_stopped else ""
        return f"Ran `{short_line(args.command)}` (exit {result.exit_code}{walls})"
    return f"Ran `{short_line(args.command)}`"


def _refused(details: ShellResult, root: Any, prepared: Any, hidden: Any) -> str:
    """What the sandbox refused the command, in words ("" when nothing, or no sandbox)."""
    if details.sandbox == "none":
        return ""
    return sandbox_refusal(details.stderr or details.output, sandbox=details.sandbox, workspace=str(root),
                           top_level=getattr(prepared, "top_level", ""),
                           hidden=[os.path.realpath(h) for h in hidden]) or ""


def _put_back(prepared: Any) -> str:
    """What the sandbox put back of protected paths after the command, in words ("" when nothing)."""
    put_back = getattr(prepared, "put_back", ())
    if not put_back:
        return ""
    who = " (by it or by a command run beside it)" if getattr(prepared, "beside", False) else ""
    return (f"protected paths were changed while it ran{who} and were put back after it (this sandbox, Landlock "
            "without a mount namespace, lets a command write them and puts them back): " + ", ".join(put_back)
            + " (they configure programs or hold nbagent's records: change them with an approved edit)")


def _result(details: ShellResult, timeout: float, left_running: bool, prepared: Any = None) -> ToolResult:
    output = details.output
    body = cut(output, MAX_MODEL_CHARS, what="characters of output") if output else "(no output)"
    notes = []
    if details.timed_out:
        notes.append(f"timed out after {timeout:g} s: the command and everything it started were stopped")
    elif details.exit_code is not None and details.exit_code < 0:
        notes.append(f"killed by signal {-details.exit_code}")
    else:
        notes.append(f"exit code {details.exit_code}")
    if left_running:
        notes.append("programs it started in the background kept its output open; their later output is not shown")
    if details.sandbox_stopped:
        notes.append(details.sandbox_stopped)
    removed, restored = getattr(prepared, "removed", ()), getattr(prepared, "restored", ())
    if removed:
        notes.append("it created protected paths, removed after it: " + ", ".join(removed)
                     + " (they configure programs or hold nbagent's records: write them with an approved edit)")
    if restored:
        notes.append("it replaced protected links, put back after it: " + ", ".join(restored))
    if details.put_back and details.put_back != details.sandbox_stopped:
        notes.append(details.put_back)
    if details.dropped_bytes:
        notes.append(f"{details.dropped_bytes:,} characters of output were not kept")
    text = body.rstrip("\n") + "\n[" + "; ".join(notes) + "]"
    return ToolResult([TextBlock(text)], details=details, is_error=not details.ok)
