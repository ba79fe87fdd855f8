"""A trusted workspace MCP server runs exactly what the person trusted, at every start.

Every workspace file a stdio server runs (the program, a script in its arguments, a `-m` module and its
packages, a package's `__main__`, a file its environment points to, a Python's start-up files) is pinned
into the configuration's digest, shown in the Trust prompt with the environment's values, and hashed again
at each start: a file changed after the trust asks again instead of running, restarts included.

`EXAMPLES` holds a configuration for every way of naming code; the table is checked against the code's own
list (`nbagent.mcp._pins.RESOLVERS`): a resolver with no example, or an example whose kind has no resolver,
fails; and each example is shown to be caught by its own resolver only (with it removed, the file goes
unpinned: the defence off).
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
from nbagent.mcp import _pins
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
    """The defence off: without its kind's resolver, the example's file is not pinned (so the example
    tests that resolver, and a new kind needs one)."""
    kind, build = EXAMPLES[name]
    entry, runs = build(ws)
    _config(ws, entry)
    monkeypatch.delitem(_pins.RESOLVERS, kind)
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
    assert config.pinned == {}
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
