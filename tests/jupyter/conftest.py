"""Fixtures for the notebook front: an in-process IPython shell, recorded widget messages, real kernels."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path
from typing import Any

import comm
import pytest
from IPython.core.interactiveshell import InteractiveShell

from .fake_frontend import FakeNotebook
from .kernelclient import KernelSession
from .protocols import notebook_problems


class RecordingComm(comm.base_comm.BaseComm):
    """A comm that keeps what a widget would send to the frontend."""

    log: list[tuple[str, dict]] = []

    def publish_msg(self, msg_type: str, data: Any = None, metadata: Any = None, buffers: Any = None, **keys: Any) -> None:
        RecordingComm.log.append((msg_type, data or {}))


@pytest.fixture(autouse=True)
def _notebook_protocol(monkeypatch):
    """Whatever the kernel asks a fake page, and whatever the fake answers, is in the notebook protocol."""
    problems: list[str] = []
    monkeypatch.setattr(FakeNotebook, "problems", problems)
    yield
    assert not problems, "\n".join(problems)


@pytest.fixture
def widget_messages(monkeypatch):
    """Every message widgets send (comm_open and comm_msg), in order."""
    log: list[tuple[str, dict]] = []
    monkeypatch.setattr(RecordingComm, "log", log)
    monkeypatch.setattr(comm, "create_comm", lambda **kw: RecordingComm(**kw))
    return log


@pytest.fixture(scope="session")
def _ipython() -> InteractiveShell:
    return InteractiveShell.instance()


@pytest.fixture
def shell(_ipython, tmp_path, monkeypatch):
    """The IPython shell with nbagent loaded afresh (a new session, live views as widgets), in tmp_path."""
    monkeypatch.chdir(tmp_path)
    _ipython.run_line_magic("load_ext", "nbagent")
    _ipython.run_line_magic("config", "NBAgent.view = 'widget'")
    before = set(_ipython.user_ns)
    yield _ipython
    _ipython.run_line_magic("unload_ext", "nbagent")
    _ipython.config.pop("NBAgent", None)
    for name in set(_ipython.user_ns) - before:
        del _ipython.user_ns[name]
    forget_the_page(_ipython)


def forget_the_page(shell: InteractiveShell) -> None:
    """What nbagent keeps on the shell (`_nbagent_*`: the page's frontend a test connected, the live notebook,
    the runner, the session) let go: the shell is the process's one instance, and the next test, in this
    module or another, starts with a kernel no page has talked to."""
    for name in [n for n in vars(shell) if n.startswith("_nbagent_")]:
        delattr(shell, name)


async def run_cell(shell: InteractiveShell, code: str, cell_id: str | None = None) -> Any:
    """Run a cell as the kernel does (top-level await allowed; `cell_id` as JupyterLab sends it); return
    IPython's ExecutionResult."""
    transformed = shell.transform_cell(code)
    return await shell.run_cell_async(code, store_history=True, transformed_cell=transformed, cell_id=cell_id)


async def settle(predicate, timeout: float = 10.0) -> None:
    """Let the loop run until `predicate()` holds (fails after `timeout` seconds)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not predicate():
        if loop.time() > deadline:
            raise AssertionError(f"condition not met within {timeout} s")
        await asyncio.sleep(0.01)


async def finish(run, timeout: float = 20.0):
    """`await run`, bounded."""
    return await asyncio.wait_for(run.wait(), timeout)


@pytest.fixture(scope="module")
def kernel(tmp_path_factory):
    """One real kernel for a module's tests (each test starts its own conversation)."""
    workdir = tmp_path_factory.mktemp("kernel")
    k = KernelSession(workdir)
    k.execute("%load_ext nbagent")
    yield k
    problems = notebook_problems(k)
    k.shutdown()
    assert not problems, "\n".join(problems)
    shutil.rmtree(workdir, ignore_errors=True)
