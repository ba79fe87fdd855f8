"""The MCP servers a workspace configures, and the person's trust in them.

    configs = workspace_configs(folder)        # .mcp.json, then .nbagent/mcp.json
    print(configs[0].describe())               # exactly what its servers would run and where they connect
    configs[0].trust()                         # recorded outside the workspace (nbagent.safety.trust)
    agent = Agent(..., mcp_servers=workspace_servers(folder))   # only trusted ones start

Reads: `.mcp.json` and `.nbagent/mcp.json` in a workspace, and the workspace files their servers run
(`python server.py`): files the model (a file edit), a cloned repository or a download could have
written. What could happen: programs started outside the sandbox, and the kernel's keys sent to a URL the
file chose. What stops it: every server read here carries the file's real path and a digest of its bytes
(and of the workspace files its servers run: those its configuration names, and every file in the folders
they run from, `_pinned`), and starts only once the person trusted exactly
that (`untrusted()` in `_config` is checked before any process starts or any request is sent, and before
`${VAR}` is expanded); a change to any of those bytes asks again. Headless code never trusts by itself:
`workspace_servers(folder, trust=True)` is the explicit way to start them unrecorded.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Iterator

from ..errors import ConfigurationError
from ..safety.secrets import SECRET_VARIABLE_PATTERN, redact
from ..safety.shown import shown
from ..safety.trust import content_digest, is_trusted
from ..safety.trust import trust as _record_trust
from ._config import CONFIG_FILES, ServerConfig, parse_document
from ._pins import Launch, code_folders, launch_of, resolved_files, unresolvable

__all__ = ["WorkspaceConfig", "server_summary", "trust_workspace", "workspace_configs", "workspace_servers"]

MAX_CONFIG_BYTES = 1_000_000
MAX_PINNED = 2000
"""Most workspace files a trust covers (the trees its servers run from); past it, trust is refused."""
MAX_PINNED_BYTES = 64 * 1024 * 1024
"""Most bytes of those files, together (each is hashed again at every start); past it, trust is refused."""
SHOWN_PINS = 40
"""Pinned files listed one by one in a prompt (the rest are counted)."""
_NOT_CODE = frozenset({".git", ".nbagent", "__pycache__", ".ipynb_checkpoints"})
"""Folders a tree walk skips: git's own state, nbagent's sessions and trust, Python's byte-code cache, Jupyter's
checkpoints of notebooks."""
_DOCUMENT = ".ipynb"
"""Files a tree walk skips: notebooks are documents a person saves all day, run only by a kernel (a notebook a
server's command or environment names is still pinned by the resolvers, like any file named there)."""
_VAR_RE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-[^}]*)?\}")


@dataclass(slots=True)
class WorkspaceConfig:
    """One configuration file of a workspace: its servers, and whether the person trusts its content."""

    path: Path
    """The file, as found in the workspace."""
    real: str
    """Its real path (what a trust is recorded for)."""
    digest: str
    """sha256 of its bytes, and of the workspace files its servers run."""
    servers: dict[str, ServerConfig] = field(default_factory=dict)
    pinned: dict[str, str] = field(default_factory=dict)
    """Workspace files its servers run (named, and every file in the folders they run from): path -> sha256;
    a file added, removed or changed asks again."""
    error: str | None = None
    """Why it could not be read (it then configures nothing)."""

    @property
    def trusted(self) -> bool:
        return self.error is None and is_trusted(self.real, self.digest)

    def trust(self) -> None:
        """Record that the person trusts exactly this content (asked again when it changes)."""
        if self.error is not None:
            raise ConfigurationError(f"{self.path} cannot be trusted: {self.error}")
        _record_trust(self.real, self.digest)

    def describe(self) -> str:
        """What trusting it would make happen, server by server, as plain text."""
        lines = [f"{self.path} (sha256 {self.digest[:16]}) configures {len(self.servers)} MCP server(s):"]
        for config in self.servers.values():
            s = server_summary(config)
            if s["transport"] == "stdio":
                lines.append(f"  {s['name']}: runs {s['command']!r} with arguments {s['args']!r}"
                             + (f" in {s['cwd']}" if s["cwd"] else ""))
                if s["env"]:
                    lines.append("    environment it sets: "
                                 + ", ".join(f"{shown(n)}={shown(v)}" for n, v in s["env_values"].items()))
            else:
                lines.append(f"  {s['name']}: sends requests to {s['url']}")
                if s["headers"]:
                    lines.append(f"    headers: {', '.join(s['headers'])}")
            lines.extend(f"    ! {w}" for w in s["warnings"])
        if self.pinned:
            lines.append(f"  runs code from {len(self.pinned)} workspace file(s) (every file in the folders its "
                         "servers run from): adding, removing or changing one asks again")
        for path, digest in list(self.pinned.items())[:SHOWN_PINS]:
            lines.append(f"  runs the workspace file {shown(path)} (sha256 {digest[:16]}): a change to it asks again")
        if len(self.pinned) > SHOWN_PINS:
            lines.append(f"  ... and {len(self.pinned) - SHOWN_PINS} more")
        return "\n".join(lines)

    def __repr__(self) -> str:
        state = "error" if self.error else "trusted" if self.trusted else "not trusted yet"
        return f"<WorkspaceConfig {self.path} {state}: {', '.join(self.servers) or 'no servers'}>"


def server_summary(config: ServerConfig) -> dict[str, Any]:
    """What a server would do, raw as written (nothing expanded): command and args, cwd, the names of the
    variables it sets and their values (`env_values`, credentials redacted: a value can name a file that runs,
    `BASH_ENV=./x.sh`, or change what runs, `NODE_OPTIONS=--require ./x.js`), url, header names, the
    kernel's variables it reads, and warnings."""
    texts = [config.command or "", *config.args, *config.env.values(), config.url or "", *config.headers.values()]
    variables = sorted({m.group(1) for t in texts for m in _VAR_RE.finditer(t)})
    warnings = []
    secret = [v for v in variables if SECRET_VARIABLE_PATTERN.search(v)]
    if secret:
        where = config.url or "the program it starts"
        warnings.append(f"sends the value of {', '.join(secret)} from the kernel's environment to {where}")
    elif variables:
        warnings.append(f"reads {', '.join(variables)} from the kernel's environment")
    if config.trusted:
        warnings.append("says \"trusted\": its tools that claim to be read-only run without asking")
    if config.url and config.url.startswith("http://") and not re.match(r"http://(127\.|localhost[:/]|\[::1\])", config.url):
        warnings.append("over plain http: what it sends can be read on the way")
    return {
        "name": config.name, "transport": config.transport, "command": config.command, "args": list(config.args),
        "cwd": config.cwd, "env": sorted(config.env),
        "env_values": {name: redact(config.env[name]) for name in sorted(config.env)}, "url": config.url, "headers": sorted(config.headers),
        "variables": variables, "warnings": warnings, "source": config.source,
    }


def _tree(folder: str, root: str) -> Iterator[str]:
    """Every file under `folder` (links not followed into folders; `_NOT_CODE` skipped), relative to `root`."""
    for here, dirs, files in os.walk(folder, onerror=None):
        dirs[:] = sorted(d for d in dirs if d not in _NOT_CODE)
        for name in sorted(files):
            if not name.endswith(_DOCUMENT):
                yield os.path.relpath(os.path.join(here, name), root)


def _pinned(servers: dict[str, ServerConfig], folder: Path) -> dict[str, str]:
    """The workspace code the servers run, with its sha256: every file a resolver of `_pins` finds (command,
    arguments, `-m` modules, files their environment points to, a workspace virtualenv's start-up files),
    and every file in the folder trees they run from (`_pins.code_folders`: the cwd and each found file's
    folder), so what that code imports, requires or reads next is covered, and an added file (a `json.py`
    beside a script) changes the listing. Raises `ConfigurationError` when a server's names are built by a
    shell when it runs (`_pins.unresolvable`), or past `MAX_PINNED` files or `MAX_PINNED_BYTES`: refused,
    never partly pinned."""
    found: dict[str, str] = {}
    root = os.path.realpath(folder)
    for config in servers.values():
        if config.command is None:
            continue
        cwd = Path(config.cwd) if config.cwd and os.path.isabs(config.cwd) else folder / (config.cwd or "")
        launch = launch_of(config.command, config.args, config.env, Path(os.path.abspath(cwd)), root)
        why = unresolvable(launch)
        if why:
            raise ConfigurationError(f"the server {config.name!r} cannot be pinned: {why}, so which files it runs "
                                     "is not known before it runs; write the names literally, or configure the "
                                     "server in code")
        files = resolved_files(launch)
        for rel, real in files.items():
            found.setdefault(rel, real)
        for tree in _trees(launch, files):
            for rel in _tree(tree, root):
                found.setdefault(rel, os.path.join(root, rel))
                if len(found) > MAX_PINNED:
                    raise ConfigurationError(
                        f"its servers run from folders holding more than {MAX_PINNED} files of the workspace "
                        f"({shown(os.path.relpath(tree, root))}); a trust could not cover each of them (run the "
                        "server from a smaller folder, or configure it in code)")
    if len(found) > MAX_PINNED:
        raise ConfigurationError(f"its servers run more than {MAX_PINNED} files of the workspace; a trust "
                                 "could not cover each of them (name fewer, or configure the servers in code)")
    out: dict[str, str] = {}
    total = 0
    for rel, real in sorted(found.items()):
        try:
            if os.path.islink(os.path.join(root, rel)) and not os.path.exists(real):
                out[rel] = "link-" + os.readlink(os.path.join(root, rel))
                continue
            st = os.stat(real)
            if not stat.S_ISREG(st.st_mode):  # a fifo or a device is never read (it could block)
                out[rel] = f"special-{stat.S_IFMT(st.st_mode)}"
                continue
            total += st.st_size
            if total > MAX_PINNED_BYTES:
                raise ConfigurationError(f"its servers run from workspace files of more than {MAX_PINNED_BYTES:,} "
                                         "bytes together; a trust could not cover them (run the server from a "
                                         "smaller folder, or configure it in code)")
            with open(real, "rb") as f:
                out[rel] = hashlib.file_digest(f, "sha256").hexdigest()
        except OSError as exc:
            out[rel] = f"unreadable-{exc.errno}"
    return out


def _trees(launch: Launch, files: dict[str, str]) -> list[str]:
    """The folder trees whose every file is pinned (`_pins.code_folders`)."""
    return code_folders(launch, files)


def _read(path: Path, folder: Path) -> WorkspaceConfig:
    real = os.path.realpath(path)
    try:
        with open(real, "rb") as f:
            data = f.read(MAX_CONFIG_BYTES + 1)
    except OSError as exc:
        return WorkspaceConfig(path, real, "", error=f"cannot be read ({exc})")
    digest = content_digest(data)
    if len(data) > MAX_CONFIG_BYTES:
        return WorkspaceConfig(path, real, digest, error=f"larger than {MAX_CONFIG_BYTES:,} bytes")
    try:
        servers = parse_document(data, str(path))
    except ConfigurationError as exc:
        return WorkspaceConfig(path, real, digest, error=str(exc))
    for name, config in servers.items():
        if config.command is not None and not config.cwd:  # runs in its workspace (what its pins are found from)
            servers[name] = config = replace(config, cwd=str(folder))
        elif config.cwd and not os.path.isabs(config.cwd):  # relative to the workspace it came from
            servers[name] = config = replace(config, cwd=str(folder / config.cwd))
    try:
        pinned = _pinned(servers, folder)
    except ConfigurationError as exc:
        return WorkspaceConfig(path, real, digest, error=str(exc))
    if pinned:
        digest = content_digest(data + b"\n" + json.dumps(pinned, sort_keys=True).encode())
    servers = {name: replace(c, source=real, digest=digest, workspace=str(folder)) for name, c in servers.items()}
    return WorkspaceConfig(path, real, digest, servers, pinned)


def changed_since_read(config: ServerConfig) -> str | None:
    """Why a workspace server may not start now although its configuration was trusted when read (None: it
    may): its file, or a workspace file it runs, holds other bytes now. Checked at every start, restarts
    included: what starts is what the person trusted, never what a file holds since."""
    if config.source is None or config.approved or config.workspace is None:
        return None
    fresh = _read(Path(config.source), Path(config.workspace))
    if fresh.error is None and fresh.digest == config.digest:
        return None
    names = [str(config.source), *fresh.pinned]
    files = ", ".join(names[:SHOWN_PINS]) + (f" and {len(names) - SHOWN_PINS} more" if len(names) > SHOWN_PINS else "")
    return (f"not started: the MCP server {config.name!r} was trusted as configured in {config.source}, and its "
            f"configuration or a workspace file it runs ({files}) changed since"
            + (f" ({fresh.error})" if fresh.error else "") + "; nothing starts until you trust the new content "
            "(%agent asks again on the next run, or nbagent.mcp.trust_workspace(folder))")


def workspace_configs(workspace: str | os.PathLike[str]) -> list[WorkspaceConfig]:
    """The configuration files of a workspace that exist, in the order they are read. A file that cannot
    be read or parsed is one with an `error` and no servers (it never stops a run)."""
    folder = Path(workspace)
    found = []
    for name in CONFIG_FILES:
        path = folder / name
        if path.is_file():
            found.append(_read(path, folder))
    return found


def workspace_servers(workspace: str | os.PathLike[str], *, trust: bool = False) -> dict[str, ServerConfig]:
    """The servers configured by `.mcp.json` and `.nbagent/mcp.json` in a workspace (the latter wins).

    Each one starts only if the person trusted its file's exact content (`WorkspaceConfig.trust`, or the
    notebook's Trust button); the others are listed, "not trusted yet", and start nothing. `trust=True`
    is the explicit setting that starts them all for this process without recording anything (for a CI
    job that runs its own repository)."""
    servers: dict[str, ServerConfig] = {}
    for config in workspace_configs(workspace):
        for name, server in config.servers.items():
            servers[name] = replace(server, approved=True) if trust else server
    return servers


def trust_workspace(workspace: str | os.PathLike[str]) -> list[WorkspaceConfig]:
    """Record trust in every configuration file of the workspace as it is now, and return them (read their
    `describe()` first: trusting starts what they name)."""
    configs = workspace_configs(workspace)
    for config in configs:
        if config.error is None:
            config.trust()
    return configs
