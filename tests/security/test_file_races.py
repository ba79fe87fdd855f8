"""A folder of the workspace swapped for a link to the outside between a file tool's check and its open.

Written from the outside: the README says the file tools are confined to the workspace whatever happens.
A process of the run (a background command, say) swaps `sub/` for a symbolic link to a folder outside
while the tools run. Deterministic attacks make the swap at the worst moment (right after the path was
checked, right after a folder was listed); a stress attack swaps in a loop while every tool runs again and
again. The defence is one step from the root's descriptor to the file (`_beneath.open_beneath`: `openat2`
with RESOLVE_BENEATH and RESOLVE_NO_SYMLINKS, or `openat` with O_NOFOLLOW on each component), used for
every read, write, stat and folder listing; turned off (a plain open of the checked path), the attacks read
and write outside.
"""

from __future__ import annotations

import os
import sys
import threading
from pathlib import Path

import pytest

from nbagent.toolbox import _beneath, _workspace
from nbagent.toolbox._workspace import Workspace

from .conftest import SECRET, call, everything_model_saw, run_agent, text_of

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(params=["openat2", "openat"])
def way(request, monkeypatch):
    """Both ways of opening in one step: the kernel's openat2, and openat with O_NOFOLLOW per component."""
    if request.param == "openat2" and not _beneath.has_openat2():
        pytest.skip("this kernel has no openat2")
    monkeypatch.setattr(_beneath, "has_openat2", lambda: request.param == "openat2")
    return request.param


@pytest.fixture
def places(tmp_path):
    ws = tmp_path / "ws"
    outside = tmp_path / "outside"
    (ws / "sub").mkdir(parents=True)
    (ws / "sub" / "a.txt").write_text("inside a\n")
    (ws / "notes.md").write_text("hello notes\n")
    outside.mkdir()
    (outside / "a.txt").write_text(f"OUTSIDE {SECRET}\n")
    (outside / "secret-name-9c2e.txt").write_text(f"{SECRET}\n")
    return ws, outside


def _swap(ws: Path, outside: Path) -> None:
    """sub/ becomes a link to the outside folder (what the racing process does)."""
    os.rename(ws / "sub", ws / "sub.moved")
    os.symlink(outside, ws / "sub")


_TOOL_BODIES = {"read_file", "write_file", "edit_file", "grep", "list_files"}


def _swap_after_resolving(monkeypatch, ws: Path, outside: Path) -> None:
    real = Workspace.resolve
    done = []

    def resolve(self, given, **kw):
        resolved = real(self, given, **kw)
        if str(given).startswith("sub") and not done and sys._getframe(1).f_code.co_name in _TOOL_BODIES:
            done.append(1)
            _swap(ws, outside)  # the tool checked it: inside. Now, before it opens it, it leads out.
        return resolved

    monkeypatch.setattr(Workspace, "resolve", resolve)


def _swap_after_listing_the_top(monkeypatch, ws: Path, outside: Path) -> None:
    real = _workspace.open_beneath
    done = []

    def swap_then_open(root_fd, parts, flags, **kw):
        if parts[:1] == ("sub",) and not done:
            done.append(1)
            _swap(ws, outside)  # the top was listed with sub/ a folder; now, as it is opened, it leads out
        return real(root_fd, parts, flags, **kw)

    monkeypatch.setattr(_workspace, "open_beneath", swap_then_open)


TOOLS = {
    "read_file": call("read_file", path="sub/a.txt"),
    "edit_file": call("edit_file", path="sub/a.txt", old="a", new="b"),
    "write_file": call("write_file", path="sub/a.txt", content="written\n"),
    "grep_file": call("grep", pattern=".", path="sub/a.txt"),
    "grep_folder": call("grep", pattern=".", path="sub"),
    "list_folder": call("list_files", pattern="sub/*"),
}


@pytest.mark.parametrize("name", sorted(TOOLS))
def test_a_swap_after_the_check_is_not_followed(places, way, name, monkeypatch):
    ws, outside = places
    _swap_after_resolving(monkeypatch, ws, outside)
    run = run_agent(ws, TOOLS[name], mode="bypassPermissions")
    assert SECRET not in everything_model_saw(run) and "secret-name-9c2e" not in everything_model_saw(run)
    assert (outside / "a.txt").read_text() == f"OUTSIDE {SECRET}\n", f"{name} wrote outside"


@pytest.mark.parametrize("tool_call", [call("grep", pattern=".", path="."), call("list_files", pattern="**")],
                         ids=["grep", "list_files"])
def test_a_swap_during_a_walk_is_not_followed(places, way, tool_call, monkeypatch):
    ws, outside = places
    _swap_after_listing_the_top(monkeypatch, ws, outside)
    run = run_agent(ws, tool_call, mode="bypassPermissions")
    seen = everything_model_saw(run)
    assert SECRET not in seen and "secret-name-9c2e" not in seen
    assert "hello notes" in seen or "notes.md" in seen  # control: the rest of the walk went on


def test_control_without_a_swap_the_tools_work(places, way):
    ws, _ = places
    run = run_agent(ws, [TOOLS["read_file"], TOOLS["grep_folder"], TOOLS["list_folder"]], mode="bypassPermissions")
    assert "inside a" in text_of(run.calls[0]) and "inside a" in text_of(run.calls[1])
    assert "sub/a.txt" in text_of(run.calls[2])


def _naive_open(root_fd, parts, flags, **kw):
    """The defence off: open the checked path by name, following whatever it is now."""
    return os.open("/".join(parts) or ".", flags & ~_beneath.O_NOFOLLOW | _beneath.O_CLOEXEC, dir_fd=root_fd)


@pytest.mark.parametrize("name", ["read_file", "write_file"])
def test_the_mechanism_off_reads_and_writes_outside(places, name, monkeypatch):
    ws, outside = places
    monkeypatch.setattr(_workspace, "open_beneath", _naive_open)
    _swap_after_resolving(monkeypatch, ws, outside)
    run = run_agent(ws, TOOLS[name], mode="bypassPermissions")
    if name == "read_file":
        assert SECRET in everything_model_saw(run)
    else:
        assert (outside / "a.txt").read_text() == "written\n"


def test_the_mechanism_off_lists_outside(places, monkeypatch):
    ws, outside = places
    monkeypatch.setattr(_workspace, "open_beneath", _naive_open)
    _swap_after_listing_the_top(monkeypatch, ws, outside)
    run = run_agent(ws, call("list_files", pattern="**"), mode="bypassPermissions")
    assert "secret-name-9c2e" in everything_model_saw(run)


def test_a_process_swapping_in_a_loop_never_gets_a_tool_outside(places, way):
    """The stress attack: a thread swaps sub/ for the link and back as fast as it can while every file tool
    runs 60 times; nothing outside is ever read, listed or written."""
    ws, outside = places
    stop = threading.Event()
    swaps = [0]

    def swapper():
        while not stop.is_set():
            try:
                os.rename(ws / "sub", ws / "sub.real")
                os.symlink(outside, ws / "sub")
                os.unlink(ws / "sub")
                os.rename(ws / "sub.real", ws / "sub")
                swaps[0] += 1
            except OSError:
                pass

    thread = threading.Thread(target=swapper, daemon=True)
    thread.start()
    try:
        calls = [TOOLS["read_file"], TOOLS["grep_folder"], TOOLS["list_folder"],
                 call("write_file", path="sub/new.txt", content="new\n")] * 15
        run = run_agent(ws, calls, mode="bypassPermissions")
    finally:
        stop.set()
        thread.join()
    assert swaps[0] > 0
    seen = everything_model_saw(run)
    assert SECRET not in seen and "secret-name-9c2e" not in seen
    assert sorted(p.name for p in outside.iterdir()) == ["a.txt", "secret-name-9c2e.txt"]
    assert (outside / "a.txt").read_text() == f"OUTSIDE {SECRET}\n"
