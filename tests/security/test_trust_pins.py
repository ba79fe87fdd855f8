"""A trusted workspace MCP server runs exactly what the person trusted, at every start.

Every workspace file a stdio server runs (the program, a script in its arguments, a `-m` module and its
packages, a package's `__main__`, a file its environment points to, a Python's start-up files) is pinned
into the configuration's digest, shown in the Trust prompt with the environment's values, and hashed again
at each start: a file changed after the trust asks again instead of running, restarts included.

`EXAMPLES` holds a configuration for every way of naming code; the table is checked against the code's own
list (`nbagent.mcp._pins.RESOLVERS`): a resolver with no example, or an example whose kind has no resolver,
fails; and each example is shown to be caught by its own resolver only (with it removed, the file goes
unpinned: the defence off).

What the code loads next (an imported `helper.py`, a `json.py` added beside a script, `-c` importing from
its cwd, `require('./lib.js')`, an `.npmrc`) is no name in the configuration: every file in the folders a
server runs from is pinned instead (`LOADED_NEXT`, each shown getting through with the trees off). A name
a shell builds when it runs (`BASH_ENV=$PWD/evil.sh`, `. ./e""vil.sh`) is refused trust (`SHELL_BUILT`,
each shown pinning nothing with the refusal off).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Callable

import pytest

import nbagent.mcp
from nbagent import Agent, AssistantMessage, ScriptedModel, ToolCall
from nbagent.mcp import MCPServers, trust_workspace, workspace_configs, workspace_servers
from nbagent.mcp import _pins, _workspace
from nbagent.mcp._workspace import changed_since_read

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(autouse=True)
def _stop_servers():
    yield
    nbagent.mcp.close()


def _write(path: Path, text: str, mode: int | None = None) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    if mode is not None:
        path.chmod(mode)
    return path


def _config(ws: Path, entry: dict) -> Path:
    return _write(ws / ".mcp.json", json.dumps({"mcpServers": {"srv": entry}}))


# Each example: (kind in RESOLVERS, builder(ws) -> (server entry, the workspace file it runs))
Example = Callable[[Path], tuple[dict, Path]]


def _command_on_path(ws: Path) -> tuple[dict, Path]:
    program = _write(ws / "bin" / "serve-tools", "#!/bin/sh\nexec true\n", 0o755)
    return {"command": "serve-tools", "env": {"PATH": f"{ws / 'bin'}{os.pathsep}/usr/bin"}}, program


def _command_path(ws: Path) -> tuple[dict, Path]:
    program = _write(ws / "tools" / "serve", "#!/bin/sh\nexec true\n", 0o755)
    return {"command": "./tools/serve"}, program


def _script(ws: Path) -> tuple[dict, Path]:
    return {"command": sys.executable, "args": ["server.py"]}, _write(ws / "server.py", "print('ok')\n")


def _flag_value(ws: Path) -> tuple[dict, Path]:
    return ({"command": "node", "args": ["--require=./hooks/pre.js", "-e", "1"]},
            _write(ws / "hooks" / "pre.js", "// ok\n"))


def _shell_words(ws: Path) -> tuple[dict, Path]:
    return {"command": "bash", "args": ["-c", "exec python3 run/serve.py"]}, _write(ws / "run" / "serve.py", "pass\n")


def _folder_main(ws: Path) -> tuple[dict, Path]:
    return {"command": sys.executable, "args": ["app"]}, _write(ws / "app" / "__main__.py", "pass\n")


def _module(ws: Path) -> tuple[dict, Path]:
    _write(ws / "tools" / "__init__.py", "")
    return {"command": sys.executable, "args": ["-m", "tools.server"]}, _write(ws / "tools" / "server.py", "pass\n")


def _module_parent_init(ws: Path) -> tuple[dict, Path]:
    _write(ws / "tools" / "server.py", "pass\n")
    return {"command": sys.executable, "args": ["-m", "tools.server"]}, _write(ws / "tools" / "__init__.py", "")


def _package_main(ws: Path) -> tuple[dict, Path]:
    _write(ws / "lib" / "tools" / "__init__.py", "")
    return ({"command": sys.executable, "args": ["-m", "tools"], "env": {"PYTHONPATH": "lib"}},
            _write(ws / "lib" / "tools" / "__main__.py", "pass\n"))


def _module_joined(ws: Path) -> tuple[dict, Path]:
    return {"command": sys.executable, "args": ["-u", "-mserve_it"]}, _write(ws / "serve_it.py", "pass\n")


def _bash_env(ws: Path) -> tuple[dict, Path]:
    return {"command": "bash", "args": ["-c", "exec true"], "env": {"BASH_ENV": "./shell/env.sh"}}, \
        _write(ws / "shell" / "env.sh", "true\n")


def _sh_env(ws: Path) -> tuple[dict, Path]:
    return {"command": "sh", "args": ["-i"], "env": {"ENV": str(ws / "shell" / "profile")}}, \
        _write(ws / "shell" / "profile", "true\n")


def _python_startup(ws: Path) -> tuple[dict, Path]:
    return {"command": sys.executable, "args": ["-i"], "env": {"PYTHONSTARTUP": "start.py"}}, \
        _write(ws / "start.py", "pass\n")


def _node_options(ws: Path) -> tuple[dict, Path]:
    return {"command": "node", "args": ["-e", "1"], "env": {"NODE_OPTIONS": "--require ./hooks/pre.js"}}, \
        _write(ws / "hooks" / "pre.js", "// ok\n")


def _any_value(ws: Path) -> tuple[dict, Path]:
    return {"command": "some-server", "env": {"SERVER_PLUGINS": "plugins/a.lua,plugins/b.lua"}}, \
        _write(ws / "plugins" / "b.lua", "-- ok\n")


def _sitecustomize(ws: Path) -> tuple[dict, Path]:
    return {"command": sys.executable, "args": ["-c", "pass"], "env": {"PYTHONPATH": "lib"}}, \
        _write(ws / "lib" / "sitecustomize.py", "pass\n")


def _venv_pth(ws: Path) -> tuple[dict, Path]:
    venv = ws / ".venv"
    _write(venv / "pyvenv.cfg", f"home = {Path(sys.executable).parent}\n")
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").symlink_to(sys.executable)  # the interpreter itself is outside the workspace
    site = venv / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}" / "site-packages"
    return {"command": ".venv/bin/python", "args": ["-c", "pass"]}, _write(site / "hook.pth", "import os\n")


def _venv_config(ws: Path) -> tuple[dict, Path]:
    entry, _pth = _venv_pth(ws)
    return entry, ws / ".venv" / "pyvenv.cfg"


EXAMPLES: dict[str, tuple[str, Example]] = {
    "program found on the PATH it is given": ("command", _command_on_path),
    "program named by its path": ("command", _command_path),
    "script argument": ("argument", _script),
    "--flag=FILE argument": ("argument", _flag_value),
    "a file named inside a shell command argument": ("argument", _shell_words),
    "folder argument runs its __main__.py": ("argument", _folder_main),
    "-m module": ("module", _module),
    "-m module's parent package __init__": ("module", _module_parent_init),
    "-m package runs its __main__ (found on PYTHONPATH)": ("module", _package_main),
    "-mMODULE written together": ("module", _module_joined),
    "BASH_ENV": ("environment", _bash_env),
    "ENV (sh)": ("environment", _sh_env),
    "PYTHONSTARTUP": ("environment", _python_startup),
    "NODE_OPTIONS=--require FILE": ("environment", _node_options),
    "any value that is a path to a workspace file": ("environment", _any_value),
    "sitecustomize on PYTHONPATH": ("startup", _sitecustomize),
    "a workspace virtualenv's .pth file": ("startup", _venv_pth),
    "a workspace virtualenv's pyvenv.cfg": ("startup", _venv_config),
}


def test_every_resolver_has_an_example_and_every_example_a_resolver():
    kinds = {kind for kind, _build in EXAMPLES.values()}
    assert set(_pins.RESOLVERS) - kinds == set(), "a way of naming code with no example here: add one"
    assert kinds - set(_pins.RESOLVERS) == set(), "an example whose kind the code has no resolver for"


def _rel(ws: Path, path: Path) -> str:
    return os.path.relpath(os.path.realpath(path), os.path.realpath(ws))


@pytest.mark.parametrize("name", list(EXAMPLES))
def test_a_file_it_runs_is_pinned_and_a_change_asks_again_at_the_next_start(ws, name):
    kind, build = EXAMPLES[name]
    entry, runs = build(ws)
    _config(ws, entry)
    [config] = trust_workspace(ws)
    assert config.error is None and config.trusted
    assert _rel(ws, runs) in config.pinned, config.describe()
    assert _rel(ws, runs) in config.describe()
    server = workspace_servers(ws)["srv"]
    assert changed_since_read(server) is None  # control: unchanged, it starts

    runs.write_text(runs.read_text() + "\n# changed after the trust\n")
    assert not workspace_configs(ws)[0].trusted  # the next read asks again
    why = changed_since_read(server)  # a start (a restart) of the configuration read before the change
    assert why is not None and "changed since" in why


@pytest.mark.parametrize("name", list(EXAMPLES))
def test_each_example_is_caught_by_its_own_resolver(ws, name, monkeypatch):
    """The defence off: without its kind's resolver (and without the folder trees, which cover the
    example's file by where it lies), the example's file is not pinned (so the example tests that resolver,
    and a new kind needs one)."""
    kind, build = EXAMPLES[name]
    entry, runs = build(ws)
    _config(ws, entry)
    monkeypatch.delitem(_pins.RESOLVERS, kind)
    monkeypatch.setattr(_workspace, "_trees", lambda launch, files: [])
    [config] = workspace_configs(ws)
    assert _rel(ws, runs) not in config.pinned


def test_an_environment_value_is_shown_and_a_change_asks_again(ws):
    _config(ws, {"command": "bash", "args": ["-c", "exec true"],
                 "env": {"BASH_ENV": "/etc/bash.bashrc", "API_TOKEN": "tok-" + "q7Zp2Kx9" * 4}})
    [config] = trust_workspace(ws)
    text = config.describe()
    assert "BASH_ENV=/etc/bash.bashrc" in text
    assert "q7Zp2Kx9" not in text  # a credential's value is redacted, as everywhere
    server = workspace_servers(ws)["srv"]
    _config(ws, {"command": "bash", "args": ["-c", "exec true"],
                 "env": {"BASH_ENV": "/tmp/other.sh", "API_TOKEN": "tok-" + "q7Zp2Kx9" * 4}})
    assert not workspace_configs(ws)[0].trusted
    assert "changed since" in (changed_since_read(server) or "")


def test_the_trust_prompt_shows_values_and_files_through_the_consent_renderer(ws):
    pytest.importorskip("ipywidgets")
    from nbagent.jupyter.session.consent import consent_html

    _write(ws / "shell" / "env.sh", "true\n")
    _config(ws, {"command": "bash", "args": ["-c", "exec true"],
                 "env": {"BASH_ENV": "./shell/env.sh", "NOTE": "<img src=x onerror=alert(1)>\u202e"}})
    [config] = workspace_configs(ws)
    page = consent_html(config)
    assert "BASH_ENV=./shell/env.sh" in page and "shell/env.sh</code> (sha256" in page
    assert "<img" not in page and "&lt;img" in page and "U+202E" in page


def test_a_module_put_earlier_on_the_path_later_asks_again(ws):
    """`-m json` runs the standard library's json (nothing pinned) until a json.py appears beside it."""
    _config(ws, {"command": sys.executable, "args": ["-m", "json.tool"]})
    [config] = trust_workspace(ws)
    assert not any(p.startswith("json") for p in config.pinned)  # the library's json is nobody's file here
    server = workspace_servers(ws)["srv"]
    _write(ws / "json" / "__init__.py", "")
    _write(ws / "json" / "tool.py", "pass\n")
    assert "changed since" in (changed_since_read(server) or "")


def test_more_files_than_a_trust_can_cover_is_an_error_not_a_partial_pin(ws, monkeypatch):
    from nbagent.mcp import _workspace

    monkeypatch.setattr(_workspace, "MAX_PINNED", 3)
    names = [f"s{i}.py" for i in range(5)]
    for n in names:
        _write(ws / n, "pass\n")
    _config(ws, {"command": sys.executable, "args": names})
    [config] = workspace_configs(ws)
    assert config.error and "more than 3" in config.error and not config.trusted


def _marking_module(marker: Path) -> str:
    return (f"open({str(marker)!r}, 'a').close()\nimport runpy, sys\nsys.argv = ['mcp-server-time', "
            "'--local-timezone', 'UTC']\nrunpy.run_module('mcp_server_time', run_name='__main__')\n")


def test_a_restarted_server_whose_module_changed_does_not_run_the_new_content(ws, tmp_path):
    pytest.importorskip("mcp_server_time")
    marker, changed = tmp_path / "started", tmp_path / "changed-content-ran"
    _write(ws / "tools" / "__init__.py", "")
    module = _write(ws / "tools" / "serve.py", _marking_module(marker))
    _config(ws, {"command": sys.executable, "args": ["-m", "tools.serve"]})
    trust_workspace(ws)
    servers = workspace_servers(ws)  # read once, as a kernel's session holds them between starts
    run = Agent(model=ScriptedModel(["done"]), workspace=ws, mcp_servers=servers).run_sync("hello")
    assert marker.exists() and "srv__get_current_time" in run.requests[0].tools  # control: trusted, it runs

    module.write_text(_marking_module(changed))  # an edit after the trust
    nbagent.mcp.close()  # the server stops; the next use starts it again
    ask = ScriptedModel([AssistantMessage(tool_calls=[ToolCall(name="srv__get_current_time",
                                                               arguments={"timezone": "UTC"})]), "done"])
    run = Agent(model=ask, workspace=ws, mcp_servers=servers, rules=["allow: srv__*"]).run_sync("hello")
    assert not changed.exists()
    [record] = run.calls
    said = " ".join(getattr(b, "text", "") for b in record.result.content)
    assert record.result.is_error and "changed since" in said, said
    assert "changed since" in json.dumps(MCPServers(servers).status())


def test_the_start_check_is_what_stops_the_restart(ws, tmp_path, monkeypatch):
    """The defence off (no hash at start): the restarted server runs the changed module."""
    pytest.importorskip("mcp_server_time")
    from nbagent.mcp import _workspace

    marker, changed = tmp_path / "started", tmp_path / "changed-content-ran"
    _write(ws / "tools" / "__init__.py", "")
    module = _write(ws / "tools" / "serve.py", _marking_module(marker))
    _config(ws, {"command": sys.executable, "args": ["-m", "tools.serve"]})
    trust_workspace(ws)
    servers = workspace_servers(ws)
    monkeypatch.setattr(_workspace, "changed_since_read", lambda config: None)
    Agent(model=ScriptedModel(["done"]), workspace=ws, mcp_servers=servers).run_sync("hello")
    module.write_text(_marking_module(changed))
    nbagent.mcp.close()
    Agent(model=ScriptedModel(["done"]), workspace=ws, mcp_servers=servers).run_sync("hello")
    assert changed.exists()  # the attack gets through


def test_a_workspace_link_to_a_file_elsewhere_is_pinned_by_what_it_leads_to(ws, tmp_path):
    """`server.py` is a link to a file outside the workspace (a temporary folder the model may write): editing
    the target, or pointing the link elsewhere, asks again."""
    outside = _write(tmp_path / "elsewhere" / "real_server.py", "print('ok')\n")
    (ws / "server.py").symlink_to(outside)
    _config(ws, {"command": sys.executable, "args": ["server.py"]})
    [config] = trust_workspace(ws)
    assert "server.py" in config.pinned
    server = workspace_servers(ws)["srv"]
    outside.write_text("print('changed')\n")
    assert "changed since" in (changed_since_read(server) or "")
    outside.write_text("print('ok')\n")
    assert changed_since_read(server) is None
    other = _write(tmp_path / "elsewhere" / "other.py", "print('other')\n")
    (ws / "server.py").unlink()
    (ws / "server.py").symlink_to(other)
    assert "changed since" in (changed_since_read(server) or "")


# ---------------------------------------------------------------------------------------------------
# What the code loads next (the folder trees) and names a shell builds (refused): by kind, not by resolver
# ---------------------------------------------------------------------------------------------------
def _change_helper(ws: Path) -> None:
    _write(ws / "helper.py", "import os\nos.system('touch /tmp/owned')\n")


def _add_json(ws: Path) -> None:
    _write(ws / "json.py", "raise SystemExit('shadowed')\n")


def _script_importing_helper(ws: Path) -> dict:
    _write(ws / "srv" / "server.py", "import json, helper\n")
    _write(ws / "srv" / "helper.py", "VALUE = 1\n")
    return {"command": "python3", "args": ["srv/server.py"]}


LOADED_NEXT: dict[str, tuple[Callable[[Path], dict], Callable[[Path], None]]] = {
    "a changed imported helper": (
        _script_importing_helper, lambda ws: _write(ws / "srv" / "helper.py", "import os\nos.system('id')\n")),
    "an added json.py beside the script": (
        _script_importing_helper, lambda ws: _write(ws / "srv" / "json.py", "raise SystemExit\n")),
    "-c importing from its cwd": (
        lambda ws: (_write(ws / "helper.py", "VALUE = 1\n"),
                    {"command": "python3", "args": ["-c", "import helper"]})[1], _change_helper),
    "-c with a json.py added in its cwd": (
        lambda ws: {"command": "python3", "args": ["-c", "import json"]}, _add_json),
    "node requiring a sibling": (
        lambda ws: (_write(ws / "js" / "srv.js", "require('./lib.js')\n"), _write(ws / "js" / "lib.js", "1\n"),
                    {"command": "node", "args": ["js/srv.js"]})[2],
        lambda ws: _write(ws / "js" / "lib.js", "require('child_process').execSync('id')\n")),
    ".npmrc added in the cwd of npx": (
        lambda ws: {"command": "npx", "args": ["-y", "some-mcp-server"]},
        lambda ws: _write(ws / ".npmrc", "node-options=--require ./evil.js\n")),
    "a removed file": (
        _script_importing_helper, lambda ws: (ws / "srv" / "helper.py").unlink()),
}


@pytest.mark.parametrize("name", list(LOADED_NEXT))
def test_what_the_code_loads_next_is_pinned_by_its_folder(ws, name):
    build, change = LOADED_NEXT[name]
    _config(ws, build(ws))
    [config] = trust_workspace(ws)
    assert config.error is None and config.trusted
    server = workspace_servers(ws)["srv"]
    assert changed_since_read(server) is None
    change(ws)
    assert "changed since" in (changed_since_read(server) or "")
    assert not workspace_configs(ws)[0].trusted


@pytest.mark.parametrize("name", list(LOADED_NEXT))
def test_without_the_folder_trees_what_the_code_loads_next_gets_through(ws, name, monkeypatch):
    """The mechanism off: only the files the configuration names are pinned, and each change starts unasked."""
    monkeypatch.setattr(_workspace, "_trees", lambda launch, files: [])
    build, change = LOADED_NEXT[name]
    _config(ws, build(ws))
    trust_workspace(ws)
    server = workspace_servers(ws)["srv"]
    change(ws)
    assert changed_since_read(server) is None


def test_the_folder_trees_skip_git_and_caches_and_a_large_tree_is_refused_not_partly_pinned(ws, monkeypatch):
    entry = _script_importing_helper(ws)
    _write(ws / ".git" / "index", "x")
    _write(ws / "srv" / "__pycache__" / "helper.cpython-311.pyc", "x")
    _write(ws / ".nbagent" / "sessions" / "a.jsonl", "{}\n")
    _config(ws, entry)
    [config] = workspace_configs(ws)
    assert {"srv/server.py", "srv/helper.py", ".mcp.json"} <= set(config.pinned)
    assert not any(p.startswith((".git/", ".nbagent/")) or "__pycache__" in p for p in config.pinned)
    monkeypatch.setattr(_workspace, "MAX_PINNED_BYTES", 10)
    [config] = workspace_configs(ws)
    assert config.error and "bytes together" in config.error and not config.pinned and not config.trusted
    with pytest.raises(nbagent.ConfigurationError):
        config.trust()


SHELL_BUILT = {
    "BASH_ENV=$PWD/evil.sh": {"command": "bash", "args": ["-c", "exec true"], "env": {"BASH_ENV": "$PWD/evil.sh"}},
    ". ./e\"\"vil.sh": {"command": "bash", "args": ["-c", '. ./e""vil.sh; exec true']},
    "source $PWD/evil.sh": {"command": "sh", "args": ["-c", "source $PWD/evil.sh"]},
    ". ./evi?.sh": {"command": "bash", "args": ["-ec", ". ./evi?.sh"]},
    "ENV=`pwd`/evil.sh": {"command": "dash", "args": ["-c", "true"], "env": {"ENV": "`pwd`/evil.sh"}},
}


@pytest.mark.parametrize("name", list(SHELL_BUILT))
def test_a_name_a_shell_builds_is_refused_trust_not_pinned_as_nothing(ws, name, monkeypatch):
    monkeypatch.setattr(_workspace, "_trees", lambda launch, files: [])  # the refusal alone stops it
    _write(ws / "sub" / "evil.sh", "true\n")
    entry = dict(SHELL_BUILT[name], cwd="sub")
    _config(ws, entry)
    [config] = workspace_configs(ws)
    assert config.error and "builds" in config.error and "cannot be pinned" in config.error, config.error
    assert not config.trusted and "srv" not in workspace_servers(ws)
    with pytest.raises(nbagent.ConfigurationError):
        config.trust()


@pytest.mark.parametrize("name", list(SHELL_BUILT))
def test_without_the_refusal_a_shell_built_name_pins_nothing_it_runs(ws, name, monkeypatch):
    """The mechanism off (the refusal, and the trees, which would cover a file in the server's cwd): the
    configuration is trusted, and the file the shell runs changes unasked: the resolvers pin nothing."""
    monkeypatch.setattr(_workspace, "unresolvable", lambda launch: None)
    monkeypatch.setattr(_workspace, "_trees", lambda launch, files: [])
    evil = _write(ws / "sub" / "evil.sh", "true\n")
    _config(ws, dict(SHELL_BUILT[name], cwd="sub"))
    trust_workspace(ws)
    server = workspace_servers(ws)["srv"]
    evil.write_text("touch /tmp/owned\n")
    assert changed_since_read(server) is None


def test_literal_text_in_a_shell_string_and_a_config_variable_still_pin(ws):
    _write(ws / "run" / "serve.py", "pass\n")
    _config(ws, {"command": "bash", "args": ["-c", "exec python3 run/serve.py"],
                 "env": {"TOKEN": "${API_TOKEN}", "MODE": "fast"}})
    [config] = workspace_configs(ws)
    assert config.error is None and "run/serve.py" in config.pinned


def test_saving_a_notebook_beside_a_trusted_server_does_not_ask_again(tmp_path):
    """Notebooks (and their checkpoints) are documents: the tree walk leaves them out, so a person saving one
    does not make the trust ask again; a notebook the server's command names is still pinned."""
    (tmp_path / "server.py").write_text("print('hi')\n")
    (tmp_path / "notes.ipynb").write_text("{}\n")
    (tmp_path / ".mcp.json").write_text(json.dumps({"mcpServers": {
        "s": {"command": "python3", "args": ["server.py"]},
        "p": {"command": "papermill", "args": ["notes.ipynb", "out.ipynb"]}}}))
    [config] = trust_workspace(tmp_path)
    assert config.error is None and config.trusted
    assert "server.py" in config.pinned and "notes.ipynb" in config.pinned  # named by p's arguments
    server = workspace_servers(tmp_path)["s"]
    (tmp_path / "other.ipynb").write_text("{}\n")
    (tmp_path / ".ipynb_checkpoints").mkdir()
    (tmp_path / ".ipynb_checkpoints" / "other-checkpoint.ipynb").write_text("{}\n")
    assert changed_since_read(server) is None and workspace_configs(tmp_path)[0].trusted
    (tmp_path / "notes.ipynb").write_text('{"cells": []}\n')
    assert "changed since" in (changed_since_read(server) or "")
