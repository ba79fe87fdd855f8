"""Server configurations: the `mcpServers` mapping other MCP clients use, read from code or a file.

    {"time": {"command": "mcp-server-time", "args": [], "env": {}},
     "web":  {"url": "http://127.0.0.1:8000/mcp", "headers": {"Authorization": "Bearer ${WEB_TOKEN}"}}}

Besides the usual keys, an entry may say `"trusted": true` (its read-only hints are believed), `"timeout"`
(seconds a call may go without an answer or a progress report; default 120), `"startup_timeout"` (default
30), `"defer"` (true/false: keep its tools behind `search_tools`, or never), `"cwd"`, `"log_level"` and
`"disabled": true`. `${VAR}` and `${VAR:-default}` in a command, args, env values, url and headers are
read from the environment when the server starts: that is how a key is passed on purpose.

Reads: configurations the person wrote (code, `%config`), and files in a workspace (`.mcp.json`,
`.nbagent/mcp.json`), which the model, a cloned repository or a download could have written. What could
happen: a workspace file names programs to start outside the sandbox and URLs to send the kernel's keys
to (`${OPENAI_API_KEY}` in a header). What stops it: a configuration read from a workspace file carries
its `source` and `digest`, and `untrusted()` says why it may not start until the person trusted that
exact content (`nbagent.safety.trust`; `nbagent.mcp._workspace` reads the files); `expand` is never applied to
an untrusted configuration (`expand_trusted`), and a stdio server gets only the variables it needs to
start plus those its configuration names (`server_environment`).

This module imports neither the `mcp` SDK nor anything above the data layer.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from ..errors import ConfigurationError
from ..safety.protected import note_loaded_configuration
from ..safety.secrets import SECRET_VARIABLE_PATTERN, add_secret
from ..safety.shapes import credential_parts
from ..safety.trust import is_trusted

__all__ = ["CONFIG_FILES", "ServerConfig", "expand_trusted", "load_config_file", "parse_servers",
           "register_secrets", "server_environment", "untrusted"]

CONFIG_FILES = (".mcp.json", ".nbagent/mcp.json")
"""Files in a workspace that configure servers, in the order they are read (a later one wins per name)."""

PASSED_VARIABLES = ("PATH", "HOME", "USER", "LOGNAME", "SHELL", "TERM", "LANG", "LANGUAGE", "TZ", "TMPDIR",
                    "TEMP", "TMP", "SYSTEMROOT", "COMSPEC", "PATHEXT", "APPDATA", "LOCALAPPDATA", "USERPROFILE")
"""Variables of the kernel's environment a stdio server gets without being configured (plus `LC_*`): what
programs need to start, find themselves and read text. Never credentials."""

_NAME_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_\-]{0,47}$")
_VAR_RE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
_KNOWN_KEYS = {"command", "args", "env", "cwd", "url", "headers", "type", "transport", "trusted", "timeout",
               "startup_timeout", "defer", "log_level", "disabled", "enabled", "description"}
_LOG_LEVELS = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")


@dataclass(slots=True)
class ServerConfig:
    """One MCP server: how to reach it, and how far to trust it."""

    name: str
    """The server's name: its tools are called `NAME__TOOL`, and rules name them `NAME__*`."""
    command: str | None = None
    """stdio: the program to start."""
    args: list[str] = field(default_factory=list)
    """stdio: its arguments."""
    env: dict[str, str] = field(default_factory=dict)
    """stdio: variables given to it, besides those it needs to start (PATH, HOME, LANG...)."""
    cwd: str | None = None
    """stdio: its working directory (default: the kernel's)."""
    url: str | None = None
    """Streamable HTTP: the endpoint."""
    headers: dict[str, str] = field(default_factory=dict)
    """Streamable HTTP: headers sent with every request."""
    trusted: bool = False
    """Believe the server's `readOnlyHint`s: its read-only tools are then allowed without asking."""
    timeout: float = 120.0
    """Seconds a call may go without an answer or a progress report before it is cancelled."""
    startup_timeout: float = 30.0
    """Seconds the server has to start and list its tools."""
    defer: bool | None = None
    """True: its tools wait behind `search_tools`; False: always offered; None: deferred when there are many."""
    log_level: str = "info"
    """The lowest level of the server's log messages shown in a call's output."""
    disabled: bool = False
    """Configured but not started."""
    description: str = ""
    """What the server is for (shown by tool search)."""
    source: str | None = None
    """The workspace file it was read from (its real path); None: the person wrote it (code, `%config`, a
    file they named), and it is trusted as written."""
    digest: str | None = None
    """The sha256 that file (and the workspace files it runs) had when it was read: what a trust is for."""
    workspace: str | None = None
    """The workspace folder that file was read from (what its files' paths are relative to)."""
    approved: bool = False
    """Trusted for this process by an explicit setting (`workspace_servers(..., trust=True)`), not recorded."""
    _memo: dict[str, str] = field(default_factory=dict, init=False, repr=False, compare=False)

    @property
    def transport(self) -> str:
        return "http" if self.url else "stdio"

    @property
    def key(self) -> str:
        """What makes two configurations the same server (shared by every run of the process).

        A configuration is not changed once made (`dataclasses.replace` makes another), so this is kept."""
        key = self._memo.get("key")
        if key is None:
            data = {k: getattr(self, k) for k in ("name", "command", "args", "env", "cwd", "url", "headers",
                                                  "startup_timeout", "log_level", "source", "digest", "approved")}
            key = self._memo["key"] = json.dumps(data, sort_keys=True)
        return key

    @property
    def settings(self) -> str:
        """All of it as text (what the tools made from it depend on)."""
        text = self._memo.get("settings")
        if text is None:
            data = {k: getattr(self, k) for k in self.__dataclass_fields__ if not k.startswith("_")}
            text = self._memo["settings"] = json.dumps(data, sort_keys=True, default=str)
        return text

    def describe(self) -> str:
        if self.url:
            return self.url
        return " ".join([self.command or "", *self.args]).strip()


def parse_servers(value: Any, *, source: str = "mcp_servers") -> dict[str, ServerConfig]:
    """Read an `mcpServers` mapping (or a whole `{"mcpServers": {...}}` document, or `ServerConfig`s).

    Raises `ConfigurationError` naming the server and the key when something is wrong.
    """
    if value is None:
        return {}
    if isinstance(value, (list, tuple)) and all(isinstance(v, ServerConfig) for v in value):
        return {v.name: v for v in value}
    if not isinstance(value, Mapping):
        raise ConfigurationError(f"{source}: expected a mapping of server names to settings, not {type(value).__name__}")
    if "mcpServers" in value and isinstance(value["mcpServers"], Mapping):
        value = value["mcpServers"]
    servers: dict[str, ServerConfig] = {}
    for name, entry in value.items():
        if isinstance(entry, ServerConfig):
            servers[entry.name] = entry
            continue
        servers[str(name)] = _parse_entry(str(name), entry, source)
    return servers


def _parse_entry(name: str, entry: Any, source: str) -> ServerConfig:
    where = f"{source}: server {name!r}"
    if not _NAME_RE.match(name) or "__" in name:
        raise ConfigurationError(f"{where}: a server name uses letters, digits, '_' or '-' (no '__'), starting "
                                 "with a letter, at most 48 characters: its tools are named NAME__TOOL")
    if not isinstance(entry, Mapping):
        raise ConfigurationError(f"{where}: expected a mapping such as {{\"command\": ..., \"args\": [...]}}, "
                                 f"not {type(entry).__name__}")
    unknown = sorted(set(entry) - _KNOWN_KEYS)
    if unknown:
        raise ConfigurationError(f"{where}: unknown key(s) {', '.join(unknown)}; known: {', '.join(sorted(_KNOWN_KEYS))}")
    kind = entry.get("type", entry.get("transport"))
    command, url = entry.get("command"), entry.get("url")
    if kind in ("sse",):
        raise ConfigurationError(f"{where}: the SSE transport is deprecated and not supported; use the server's "
                                 "streamable HTTP endpoint (\"url\")")
    if kind not in (None, "stdio", "http", "streamable-http", "streamableHttp", "streamable_http"):
        raise ConfigurationError(f"{where}: unknown type {kind!r}; use 'stdio' (command) or 'http' (url)")
    if bool(command) == bool(url):
        raise ConfigurationError(f"{where}: give either \"command\" (a program started over stdio) or \"url\" "
                                 "(a streamable HTTP endpoint)")
    if command is not None and not isinstance(command, str):
        raise ConfigurationError(f"{where}: \"command\" must be a string")
    if url is not None and (not isinstance(url, str) or not url.startswith(("http://", "https://", "${"))):
        raise ConfigurationError(f"{where}: \"url\" must be an http:// or https:// address")
    args = entry.get("args", [])
    if not isinstance(args, (list, tuple)) or not all(isinstance(a, (str, int, float)) for a in args):
        raise ConfigurationError(f"{where}: \"args\" must be a list of strings")
    env = _string_map(entry.get("env", {}), f"{where}: \"env\"")
    headers = _string_map(entry.get("headers", {}), f"{where}: \"headers\"")
    if url and env:
        raise ConfigurationError(f"{where}: \"env\" is for stdio servers; an HTTP server gets \"headers\"")
    level = entry.get("log_level", "info")
    if level not in _LOG_LEVELS:
        raise ConfigurationError(f"{where}: log_level must be one of {', '.join(_LOG_LEVELS)}")
    defer = entry.get("defer")
    if defer is not None and not isinstance(defer, bool):
        raise ConfigurationError(f"{where}: \"defer\" must be true or false")
    disabled = bool(entry.get("disabled", False)) or entry.get("enabled", True) is False
    register_secrets(headers, env)  # literal credentials in the configuration are secrets from now on
    return ServerConfig(
        name=name, command=command, args=[str(a) for a in args], env=env, cwd=entry.get("cwd"), url=url,
        headers=headers, trusted=entry.get("trusted", False) is True,
        timeout=_seconds(entry.get("timeout", 120.0), f"{where}: \"timeout\""),
        startup_timeout=_seconds(entry.get("startup_timeout", 30.0), f"{where}: \"startup_timeout\""),
        defer=defer, log_level=level, disabled=disabled, description=str(entry.get("description", "")),
    )


_CREDENTIAL_NAME = re.compile(r"auth|key|token|secret|cookie|password|passwd|credential|signature", re.I)


def register_secrets(headers: Mapping[str, str], env: Mapping[str, str] = {}) -> None:  # noqa: B006 - read only
    """Register the credentials among a server's header and environment values (`add_secret`), literal or
    expanded: a value under a credential's name (`Authorization`, `X-Api-Key`, `*_TOKEN`...), and whatever
    has a credential's shape under any name (`nbagent.safety.shapes.credential_parts`). Redaction and the
    secret gate then find them wherever they appear, in pieces too."""
    for name, value in [*headers.items(), *env.items()]:
        if not isinstance(value, str) or "${" in value:
            continue  # expanded when the server starts, and registered then
        words = value.split()
        if _CREDENTIAL_NAME.search(name) or SECRET_VARIABLE_PATTERN.search(name):
            if len(words) == 2 and words[0].lower() in ("bearer", "basic", "token", "bot"):
                add_secret(words[1], name)
            add_secret(value.strip(), name)
        for part in credential_parts(value):
            add_secret(part, name)


def _string_map(value: Any, where: str) -> dict[str, str]:
    if not isinstance(value, Mapping):
        raise ConfigurationError(f"{where} must be a mapping of names to strings")
    out = {}
    for k, v in value.items():
        if not isinstance(v, (str, int, float)) or isinstance(v, bool):
            raise ConfigurationError(f"{where}: the value of {k!r} must be a string")
        out[str(k)] = str(v)
    return out


def _seconds(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        raise ConfigurationError(f"{where} must be a positive number of seconds")
    return float(value)


def load_config_file(path: str | os.PathLike) -> dict[str, ServerConfig]:
    """The servers a JSON file configures (`{"mcpServers": {...}}`), trusted as written: for a file the
    person named. Workspace files go through `nbagent.mcp.workspace_servers`, which asks for trust. The
    file is noted as configuration (`nbagent.safety.protected.note_loaded_configuration`): a write to it by
    any tool asks first, whatever its name."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ConfigurationError(f"{path}: cannot be read ({exc})") from None
    note_loaded_configuration(path)  # from now on a write to it asks first, whatever its name
    return parse_document(data, str(path))


def parse_document(data: bytes, source: str) -> dict[str, ServerConfig]:
    """The servers of a configuration file's bytes."""
    try:
        document = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ConfigurationError(f"{source}: not valid JSON ({exc})") from None
    if not isinstance(document, Mapping) or not isinstance(document.get("mcpServers", {}), Mapping):
        raise ConfigurationError(f"{source}: expected {{\"mcpServers\": {{NAME: {{...}}}}}}")
    return parse_servers(document.get("mcpServers", {}), source=source)


def untrusted(config: ServerConfig) -> str | None:
    """Why this configuration may not start (None: it may): one read from a workspace file starts only when
    the person trusted that exact content, or an explicit setting said so."""
    if config.source is None or config.approved:
        return None
    if config.digest and is_trusted(config.source, config.digest):
        return None
    return (f"not trusted yet: the MCP server {config.name!r} is configured in {config.source}, a file in the "
            "workspace that the model, a cloned repository or a download could have written; nothing it names "
            "starts until you trust this exact content (the Trust button %agent shows, or "
            "nbagent.mcp.trust_workspace(folder))")


def expand_trusted(config: ServerConfig, text: str, environ: Mapping[str, str] | None = None) -> str:
    """`expand(text)` for a configuration that may start; an untrusted one is never expanded."""
    why = untrusted(config)
    if why is not None:
        raise ConfigurationError(f"${{VAR}} is not expanded for {config.name!r}: {why}")
    return expand(text, environ)


def expand(text: str, environ: Mapping[str, str] | None = None) -> str:
    """Replace `${VAR}` and `${VAR:-default}` from the environment; a missing variable without a default is
    an error that names it."""
    environ = os.environ if environ is None else environ

    def one(m: re.Match[str]) -> str:
        value = environ.get(m.group(1))
        if value is None or (value == "" and m.group(2) is not None):
            if m.group(2) is not None:
                return m.group(2)
            raise ConfigurationError(f"the environment variable {m.group(1)} is not set (the configuration uses "
                                     f"${{{m.group(1)}}}; set it, or write ${{{m.group(1)}:-default}})")
        return value

    return _VAR_RE.sub(one, text)


def server_environment(config: ServerConfig, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """Exactly what a stdio server gets: what it needs to start (PATH, HOME, LANG, LC_*...), then its
    configured `env` (expanded). The kernel's credentials (`*_API_KEY`, `*_TOKEN`...) are never passed unless
    the configuration names them."""
    environ = os.environ if environ is None else environ
    why = untrusted(config)
    if why is not None:
        raise ConfigurationError(why)
    env = {}
    for name, value in environ.items():
        if (name in PASSED_VARIABLES or name.startswith("LC_")) and not SECRET_VARIABLE_PATTERN.search(name):
            if not value.startswith("()"):  # exported shell functions
                env[name] = value
    if config.source is not None and "PYTHONPYCACHEPREFIX" not in config.env:
        # a workspace server's Python compiles into a folder of the kernel's, never reading the workspace's
        # `__pycache__`: a .pyc written there after the trust (its header copied from the pinned source's)
        # would run instead of the pinned source
        env["PYTHONPYCACHEPREFIX"] = _private_bytecode_folder()
    for name, value in config.env.items():
        env[name] = expand(value, environ)
    register_secrets({}, {k: env[k] for k in config.env})
    return env


_BYTECODE: list[str] = []


def _private_bytecode_folder() -> str:
    """A folder (0700, made once per process) where workspace servers' Pythons keep their compiled modules."""
    import tempfile

    if not _BYTECODE or not os.path.isdir(_BYTECODE[0]):
        _BYTECODE[:] = [tempfile.mkdtemp(prefix="nbagent-mcp-bytecode-")]
    return _BYTECODE[0]



def command_places(path: str) -> list[str]:
    """Where a stdio server's bare command is looked for: this Python's own scripts (a virtualenv's `bin`,
    which a kernel started by Jupyter often lacks on its PATH), then `path` (the PATH the server gets)."""
    import sys
    import sysconfig

    out: list[str] = []
    for place in [os.path.dirname(sys.executable), sysconfig.get_path("scripts"), *path.split(os.pathsep)]:
        if place and place not in out:
            out.append(place)
    return out


def find_command(command: str, path: str) -> str | None:
    """The executable a stdio server's command names (None: not found in `command_places`). A command with
    a directory in it is taken as it is (relative to the server's `cwd`)."""
    import shutil

    if os.path.dirname(command):
        return command
    return shutil.which(command, path=os.pathsep.join(command_places(path)))
