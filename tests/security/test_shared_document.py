"""Attacks on how a kernel finds the Jupyter server and notebook whose shared document it edits
(nbagent/jupyter/notebook/server.py): forged server information files that would send the kernel (and the
token it presents) to someone else's server, each beside a control that shows a genuine file is used."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from nbagent.jupyter.notebook.server import NoServer, kernel_id, server_candidates

PARENT = 4242
"""The pid the tests present as the kernel's parent (the server that started it)."""


def server_file(folder: Path, pid: int = PARENT, *, url: str = "http://127.0.0.1:8888/", mode: int = 0o600,
                **fields) -> Path:
    path = folder / f"jpserver-{pid}.json"
    path.write_text(json.dumps({"pid": pid, "url": url, "token": "t0ken", "root_dir": "/nb", **fields}))
    path.chmod(mode)
    return path


@pytest.fixture
def runtime(tmp_path):
    folder = tmp_path / "runtime"
    folder.mkdir(mode=0o700)
    folder.chmod(0o700)
    return folder


def test_control_a_private_file_of_the_parent_is_used(runtime):
    server_file(runtime)
    [found] = server_candidates(runtime, [PARENT, 1000])
    assert (found.url, found.token, found.pid) == ("http://127.0.0.1:8888/", "t0ken", PARENT)
    assert found.websocket("api/x") == "ws://127.0.0.1:8888/api/x"


def test_a_file_of_a_process_that_did_not_start_the_kernel_is_ignored(runtime):
    server_file(runtime, pid=9999, url="http://evil.example:80/")  # some other server, or a forgery
    with pytest.raises(NoServer):
        server_candidates(runtime, [PARENT])


def test_a_file_others_can_write_is_ignored(runtime):
    server_file(runtime, mode=0o622)
    with pytest.raises(NoServer):
        server_candidates(runtime, [PARENT])


def test_a_runtime_folder_others_can_write_is_refused(runtime):
    server_file(runtime)
    runtime.chmod(0o777)
    with pytest.raises(NoServer, match="writable by others"):
        server_candidates(runtime, [PARENT])


def test_a_symlinked_file_is_ignored(runtime, tmp_path):
    elsewhere = server_file(tmp_path, pid=PARENT, url="http://evil.example:80/")
    os.replace(elsewhere, tmp_path / "forged.json")
    (runtime / f"jpserver-{PARENT}.json").symlink_to(tmp_path / "forged.json")
    with pytest.raises(NoServer):
        server_candidates(runtime, [PARENT])


def test_a_file_naming_another_pid_inside_is_ignored(runtime):
    path = server_file(runtime)
    path.write_text(json.dumps({"pid": 1, "url": "http://evil.example:80/", "token": "x"}))
    with pytest.raises(NoServer):
        server_candidates(runtime, [PARENT])


def test_a_file_with_a_non_http_address_is_ignored(runtime):
    server_file(runtime, url="file:///etc/passwd")
    with pytest.raises(NoServer):
        server_candidates(runtime, [PARENT])


def test_a_server_on_every_interface_is_reached_on_loopback(runtime):
    server_file(runtime, url="http://0.0.0.0:8888/lab/")
    [found] = server_candidates(runtime, [PARENT])
    assert found.url == "http://127.0.0.1:8888/lab/"


def test_the_nearest_ancestor_comes_first(runtime):
    server_file(runtime, pid=PARENT, url="http://127.0.0.1:1111/")
    server_file(runtime, pid=PARENT + 1, url="http://127.0.0.1:2222/")
    assert [s.url for s in server_candidates(runtime, [PARENT + 1, PARENT])] == [
        "http://127.0.0.1:2222/", "http://127.0.0.1:1111/"]


def test_the_kernel_id_comes_only_from_a_server_named_connection_file():
    assert kernel_id("/run/kernel-0123abcd-4567-89ef-0123-456789abcdef.json") == "0123abcd-4567-89ef-0123-456789abcdef"
    for name in ("/run/kernel-../../x.json", "/run/mykernel.json", "/run/kernel-a/b.json"):
        with pytest.raises(NoServer):
            kernel_id(name)
