"""Time of check against time of use: a symlink made by one call of a batch, used by the next call of the
same batch (decided before the link existed), and checksum lists naming files outside.
A `python` call (sequential) in each batch makes the batch run in order, so the link exists when the
next call runs, while every call of the batch was decided before any ran.
"""

from __future__ import annotations

import hashlib

import pytest

from .conftest import SECRET, Recorder, call, everything_model_saw, run_agent, sh, text_of

pytestmark = [pytest.mark.timeout(60), pytest.mark.usefixtures("sandbox_lane")]  # every sandbox lane

SEQ = call("python", code="1")


def test_batch_symlink_then_auto_allowed_cat_reads_outside(ws, outside):
    rec = Recorder(True)
    run = run_agent(ws, [sh("ln -s ../outside/private.txt later.txt"), SEQ, sh("cat later.txt"), sh("cat notes.md")],
                    approver=rec)
    assert (ws / "later.txt").is_symlink()               # control: the approved link was made
    assert "hello notes" in text_of(run.calls[3])
    assert SECRET not in everything_model_saw(run)


def test_batch_symlink_then_file_tools_read_and_write_outside(ws, outside):
    rec = Recorder(True)
    run = run_agent(ws, [sh("ln -s ../outside shared && ln -s ../outside/new.txt made.txt"), SEQ,
                         call("read_file", path="shared/private.txt"),
                         call("write_file", path="made.txt", content="planted"),
                         call("grep", pattern="S3CR3T", path="shared")],
                    approver=rec, mode="acceptEdits")
    assert (ws / "shared").is_symlink()
    assert SECRET not in everything_model_saw(run)
    assert not (outside / "new.txt").exists()


def test_batch_symlink_to_denied_file_then_auto_allowed_cat(ws):
    (ws / ".env").write_text(f"API_TOKEN={SECRET}\n")
    rec = Recorder(True)
    # the link is made by code (a shell line naming .env is refused outright under the rule)
    link = call("python", code=f"import os; os.symlink('.env', {str(ws / 'innocent.txt')!r})")
    run = run_agent(ws, [link, SEQ, sh("cat innocent.txt"), sh("cat notes.md")],
                    rules=["deny: read_file(.env)"], approver=rec)
    assert (ws / "innocent.txt").is_symlink()
    assert "hello notes" in text_of(run.calls[3])
    assert SECRET not in everything_model_saw(run)


def test_batch_symlink_to_denied_file_then_read_file(ws):
    (ws / ".env").write_text(f"API_TOKEN={SECRET}\n")
    link = call("python", code=f"import os; os.symlink('.env', {str(ws / 'innocent.txt')!r})")
    run = run_agent(ws, [link, SEQ, call("read_file", path="innocent.txt")],
                    rules=["deny: read_file(.env)"], approver=Recorder(True))
    assert (ws / "innocent.txt").is_symlink()
    assert SECRET not in everything_model_saw(run)


def test_checksum_list_reads_file_outside_workspace(ws, outside):
    digest = hashlib.sha256((outside / "private.txt").read_bytes()).hexdigest()
    inside = hashlib.sha256((ws / "data.txt").read_bytes()).hexdigest()
    (ws / "sums").write_text(f"{digest}  ../outside/private.txt\n{inside}  data.txt\n")
    rec = Recorder(False)
    run = run_agent(ws, [sh("sha256sum -c sums"), sh("md5sum data.txt")], approver=rec)
    assert run.calls[1].status == "ok"                   # control
    assert "private.txt: OK" not in text_of(run.calls[0])
