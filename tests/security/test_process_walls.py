"""What a sandboxed command may do to other processes, in every sandbox lane (tests/conftest.py `sandbox_lane`) and
every policy: nothing that would take apart what stops the processes it leaves running.

Found by an outside try: under Landlock a command lowered its supervisor's open-file limit (`prlimit --pid $PPID
--nofile=0:0`), so the supervisor could not read what it had adopted and exited without stopping it; under
bubblewrap a command traced the namespace's first process and cleared its death signal, so the namespace outlived
the kernel; and a process that forks every millisecond outlived a stop, because the kill went to a list read once
and to the supervisor first. One filter refuses tracing and changing another process's limits on both backends
(`CommandFilter`), and a stop kills what is left again and again until a look finds nothing, the supervisor
last (`kill_family`).
"""

from __future__ import annotations

import base64
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from nbagent.safety import sandbox as _sandbox
from nbagent.safety import sandbox_landlock
from nbagent.safety.sandbox import SandboxPolicy

from .conftest import Recorder, run_agent, sh, text_of

pytestmark = [pytest.mark.timeout(180), pytest.mark.skipif(not _sandbox.sandbox_backend().available,
                                                           reason="no sandbox on this machine")]

POLICIES = {"read-only": SandboxPolicy("read-only"), "workspace-write": SandboxPolicy("workspace-write"),
            "workspace-write + network": SandboxPolicy("workspace-write", network=True)}

TRACE = ("python3 -c \"import ctypes, os; libc = ctypes.CDLL(None, use_errno=True); r = libc.ptrace(16, {pid}, 0, 0); "
         "print('traced' if r == 0 else 'refused', os.strerror(ctypes.get_errno()))\"")
"""PTRACE_ATTACH to `pid`."""


@pytest.fixture(autouse=True)
def backend(sandbox_lane):
    return sandbox_lane


def _commands(ws: Path, policy: str, *commands: str) -> list[str]:
    run = run_agent(ws, *[sh(c, timeout=30) for c in commands], approver=Recorder(True), sandbox=POLICIES[policy])
    return [text_of(c) for c in run.calls]


@pytest.mark.parametrize("policy", sorted(POLICIES))
def test_a_command_cannot_change_another_process_limits_nor_trace_it(ws: Path, backend, policy: str) -> None:
    if backend.name == "bubblewrap":  # no other process to act on: `test_every_process_a_command_can_see_...`
        pytest.skip("bubblewrap: the command is its namespace's first process, with no other process in it")
    limits, own, parent, first = _commands(
        ws, policy, "prlimit --pid $PPID --nofile=0:0 && echo changed", "ulimit -n 100 && ulimit -n",
        TRACE.format(pid="$PPID"), TRACE.format(pid=1))
    assert "Operation not permitted" in limits and "changed" not in limits, limits
    assert own.startswith("100"), own  # control: its own limits are its own
    for traced in (parent, first):  # its parent (under Landlock, its supervisor); the first process it can see
        assert "refused Operation not permitted" in traced, traced


WALKER = base64.b64encode(textwrap.dedent("""
    import os, signal, sys, time
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    for _ in range(40000):  # a child a millisecond; one whose parent died meanwhile becomes `sleep MARK`
        pid = os.fork()
        if pid == 0:
            parent = os.getppid()
            time.sleep(0.1)
            if os.getppid() != parent:
                os.execv("/bin/sleep", ["sleep", sys.argv[2]])
            os._exit(0)
        time.sleep(0.001)
        try:
            while os.waitpid(-1, os.WNOHANG)[0]:
                pass
        except ChildProcessError:
            pass
""").encode()).decode()


def _left(marker: str) -> list[str]:
    time.sleep(1.0)  # what escaped has had time to become `sleep marker`
    found = subprocess.run(["pgrep", "-f", f"^sleep {marker}"], capture_output=True, text=True,
                           check=False).stdout.split()
    subprocess.run(["pkill", "-9", "-f", f"^sleep {marker}"], check=False)
    return found


@pytest.mark.parametrize("policy", ["read-only", "workspace-write"])
def test_a_process_forking_every_millisecond_is_stopped_with_the_call_that_timed_out(ws: Path, backend,
                                                                                      policy: str) -> None:
    marker = f"9{time.time_ns() % 10**7}.{len(policy)}"
    walker = (f"(env -i setsid {sys.executable} -c 'import base64, sys; exec(base64.b64decode(sys.argv[1]))' "
              f"{WALKER} {marker} >/dev/null 2>&1 &)")
    run = run_agent(ws, sh(f"trap '' TERM; {walker}; sleep 60", timeout=3), approver=Recorder(True),
                    sandbox=POLICIES[policy])
    assert "timed out" in text_of(run.calls[0]), text_of(run.calls[0])
    assert _left(marker) == []


@pytest.mark.parametrize("policy", ["read-only", "workspace-write"])
def test_what_a_command_starts_stays_in_its_process_group(ws: Path, backend, policy: str) -> None:
    # the mechanism that makes one SIGKILL end them all: `setsid` and `setpgid` do nothing (and say they did, so
    # programs that start theirs in a session of their own go on working)
    group = "cut -d' ' -f5 /proc/self/stat"
    out, = _commands(ws, policy, f"{group}; setsid sh -c \"{group}\"; (setsid sh -c \"{group}\" &); sleep 0.2; "
                                 "python3 -c \"import os, subprocess; os.setpgid(0, 0); os.setsid(); "
                                 "subprocess.run(['true'], start_new_session=True, check=True); print(os.getpgrp())\"")
    groups = out.split("[exit code")[0].split()
    assert len(groups) == 4 and len(set(groups)) == 1, out


HOPPER = base64.b64encode(textwrap.dedent("""
    import os, signal, sys, time
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    end = time.monotonic() + 8
    while time.monotonic() < end:  # a new pid (and a new session) each time: the parent exits at once
        if os.fork():
            os._exit(0)
        try:
            os.setsid()
        except OSError:
            pass
    os.execv("/bin/sleep", ["sleep", sys.argv[2]])
""").encode()).decode()


@pytest.mark.parametrize("ending", ["timeout", "run end"])
def test_a_process_hopping_from_pid_to_pid_is_stopped(ws: Path, backend, ending: str) -> None:
    marker = f"9{time.time_ns() % 10**7}.{len(ending)}"
    hopper = (f"(env -i {sys.executable} -c 'import base64, sys; exec(base64.b64decode(sys.argv[1]))' "
              f"{HOPPER} {marker} >/dev/null 2>&1 &)")
    if ending == "timeout":
        run = run_agent(ws, sh(f"trap '' TERM; {hopper}; sleep 60", timeout=2), approver=Recorder(True))
    else:
        run = run_agent(ws, sh(f"{hopper}; sleep 60", background=True), sh("sleep 1", timeout=10),
                        approver=Recorder(True))
    assert run.calls[0].status in ("ok", "error"), text_of(run.calls[0])
    time.sleep(8)  # past the hopping: what escaped is `sleep marker` now
    assert _left(marker) == []


# -- found by the third outside try ----------------------------------------------------------------------------

CHAIN = ("env -i bash -c 'link() {{ if [ $1 -gt 0 ]; then link $(($1 - 1)) & wait; else exec sleep 60; fi; }}; "
         "link {depth} # {marker}' > /dev/null 2>&1 & sleep 1; echo started")
"""A chain of processes, each the child of the last, with its environment cleared (no marker to find it by)."""


def test_a_chain_deeper_than_the_supervisor_s_rounds_goes_with_its_command(ws: Path, sandbox_lane, monkeypatch) -> None:
    """The supervisor stops what the command left one generation a round, for `ROUNDS` rounds: a chain deeper
    than that outlived it (an outside try, 10,400 deep). Everything a command starts stays in its process group,
    which is killed when the command has ended. Here the rounds are cut to 2 (forked, so the supervisor has them)."""
    from nbagent.safety import supervisor

    monkeypatch.setenv("NBAGENT_SPAWN", "fork")
    monkeypatch.setattr(supervisor, "ROUNDS", 2)
    marker = f"nbagent-chain-{time.monotonic_ns()}"
    try:
        run = run_agent(ws, sh(CHAIN.format(depth=12, marker=marker), timeout=30), approver=Recorder(True),
                        sandbox=POLICIES["workspace-write"])
        assert "started" in text_of(run.calls[0])
        assert _gone(marker, 5), f"{_count(marker)} links of the chain outlived their command"
    finally:
        subprocess.run(["pkill", "-9", "-f", marker], check=False)


def test_defence_off_without_the_group_kill_the_chain_outlives_its_command(ws: Path, monkeypatch) -> None:
    from nbagent.safety import supervisor

    if _sandbox.sandbox_backend().name != "landlock":
        monkeypatch.setenv("NBAGENT_SANDBOX", "landlock-nomount")
        _sandbox.sandbox_backend.cache_clear()
    monkeypatch.setenv("NBAGENT_SPAWN", "fork")
    monkeypatch.setattr(supervisor, "ROUNDS", 2)
    monkeypatch.setattr(sandbox_landlock.os, "killpg", lambda *a: None)
    marker = f"nbagent-chain-{time.monotonic_ns()}"
    try:
        run_agent(ws, sh(CHAIN.format(depth=12, marker=marker), timeout=30), approver=Recorder(True),
                  sandbox=POLICIES["workspace-write"])
        time.sleep(1)
        assert _count(marker) > 0
    finally:
        subprocess.run(["pkill", "-9", "-f", marker], check=False)
        _sandbox.sandbox_backend.cache_clear()


@pytest.mark.parametrize("policy", sorted(POLICIES))
def test_a_command_is_the_out_of_memory_killer_s_first_choice_and_cannot_change_that(ws: Path, sandbox_lane,
                                                                                      policy: str) -> None:
    """Under a memory limit the kernel went first, then the supervisor (a copy of its memory), before it stopped
    anything (an outside try, Landlock): a Landlock command's `oom_score_adj` is the highest, set before its
    ruleset, which refuses writing it again. (Bubblewrap: the PID namespace dies with the kernel whatever is
    killed first.)"""
    if sandbox_lane.name != "landlock":
        pytest.skip("bubblewrap: the PID namespace dies with the kernel, whichever process is killed first")
    probe = ("cat /proc/self/oom_score_adj; cat /proc/$PPID/oom_score_adj; "
             "(echo 0 > /proc/self/oom_score_adj) 2>/dev/null && echo lowered || echo refused")
    run = run_agent(ws, sh(probe, timeout=30), approver=Recorder(True), sandbox=POLICIES[policy])
    ours = Path("/proc/self/oom_score_adj").read_text().strip()
    assert text_of(run.calls[0]).split()[:3] == ["1000", ours, "refused"], text_of(run.calls[0])  # (its supervisor:
    # this process's)


def _count(marker: str) -> int:
    out = subprocess.run(["pgrep", "-f", marker], capture_output=True, text=True).stdout
    return len(out.split())


def _gone(marker: str, within: float) -> bool:
    end = time.monotonic() + within
    while _count(marker):
        if time.monotonic() >= end:
            return False
        time.sleep(0.1)
    return True


REACH = base64.b64encode(textwrap.dedent("""
    import ctypes, os, sys
    libc = ctypes.CDLL(None, use_errno=True)
    mine = {os.getpid()}
    def parent(pid):
        try:
            return int(open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            return -1
    pids = [int(p) for p in os.listdir("/proc") if p.isdigit()]
    changed = True
    while changed:  # this process's own descendants (the shell's other children are the command's too)
        changed = False
        for pid in pids:
            if pid not in mine and parent(pid) in mine:
                mine.add(pid); changed = True
    others = [p for p in pids if p not in mine]  # its parent included (bubblewrap's first process; a supervisor)
    reached = []
    for pid in others:
        try:
            os.close(os.open(f"/proc/{pid}/mem", os.O_RDWR)); reached.append((pid, "mem"))
        except OSError:
            pass
        fd = libc.syscall(434, pid, 0)  # pidfd_open
        if fd >= 0:
            stolen = libc.syscall(438, fd, 0, 0)  # pidfd_getfd: its standard input
            if stolen >= 0:
                reached.append((pid, "pidfd_getfd"))
            os.close(fd)
        try:
            os.kill(pid, 0); reached.append((pid, "signal"))
        except OSError:
            pass
    print("others", len(others), "parent", parent(os.getpid()), "reached", reached[:5])
"""
).encode()).decode()
"""Run inside a command: for every process it can see that is not its own (its parent included), try to open its
memory for writing, take one of its descriptors and signal it; print how many it saw and what it reached."""


@pytest.mark.parametrize("policy", sorted(POLICIES))
def test_every_process_a_command_can_see_is_out_of_its_reach(ws: Path, backend, policy: str) -> None:
    """An outside try took over bubblewrap's first process (same user, no capabilities) through `/proc/1/mem` and
    `pidfd_getfd`, cleared its death signal and outlived the kernel. The mechanism, for every process a command
    can see: under bubblewrap there is none (the command is the namespace's first process, `--as-pid-1`, and
    sees only what it started); under Landlock every other process is outside its domain, which Landlock keeps it
    from tracing, reading or writing the memory of, taking descriptors from, or signalling (scoping, ABI 6)."""
    out, = _commands(ws, policy, f"python3 -c \"import base64; exec(base64.b64decode('{REACH}'))\"")
    seen = out.split()
    assert seen[0] == "others" and "reached []" in out, out
    if backend.name == "bubblewrap":
        assert seen[1] == "0" and seen[3] == "0", out  # nothing else in its namespace, no parent in view
    else:
        assert int(seen[1]) > 10, out  # control: the whole machine's processes are in view


@pytest.mark.parametrize("policy", sorted(POLICIES))
def test_a_command_cannot_change_its_death_signal(ws: Path, backend, policy: str) -> None:
    """The death signal is what takes a command (bubblewrap: its whole namespace) down with the kernel: clearing it
    reports success and changes nothing."""
    probe = ("exec python3 -c \"import ctypes; libc = ctypes.CDLL(None, use_errno=True); v = ctypes.c_int(); "
             "libc.prctl(2, ctypes.byref(v)); before = v.value; r = libc.prctl(1, 0, 0, 0, 0); "
             "libc.prctl(2, ctypes.byref(v)); print('death signal', before, r, v.value)\"")
    out, = _commands(ws, policy, probe)
    assert "death signal 9 0 9" in out, out
