"""Shared fixtures. Tests never reach the internet; provider tests talk to a local fake server."""

from __future__ import annotations

import dataclasses
import gc
import os

import pytest

from nbagent.tools.schema_library import import_jsonschema

import_jsonschema()  # before a test module imports nbformat or jsonschema: ~3 s of CPU less a worker (see there)

_PROVIDER_ENV = (
    "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "OPENAI_API_KEY", "OPENAI_BASE_URL", "GEMINI_API_KEY",
    "GOOGLE_API_KEY", "GOOGLE_GEMINI_BASE_URL", "MISTRAL_API_KEY", "MISTRAL_BASE_URL", "OLLAMA_BASE_URL",
    "NBAGENT_APPROVAL",
)


@pytest.fixture(autouse=True)
def clean_environ(monkeypatch):
    """No real keys or endpoints leak into a test, and no approval policy from the environment."""
    for name in _PROVIDER_ENV:
        monkeypatch.delenv(name, raising=False)
    yield


@pytest.fixture(autouse=True)
def private_config_dir(tmp_path_factory, monkeypatch):
    """nbagent's trust store and session key in a folder of the test run, never the real home's."""
    monkeypatch.setenv("NBAGENT_CONFIG_DIR", str(tmp_path_factory.mktemp("nbagent-config")))
    monkeypatch.delenv("NBAGENT_UNSIGNED_SESSIONS", raising=False)
    monkeypatch.delenv("NBAGENT_TRUST_WORKSPACE_MCP", raising=False)


@pytest.fixture(autouse=True)
def registered_secrets():
    """Secrets a test registers (`add_secret`, a model's `api_key=`) are forgotten after it: the registry is
    process-wide, and a key one test registers would otherwise redact another test's look-alike value."""
    from nbagent.safety import secrets

    saved = dict(secrets._registered)
    yield
    secrets._registered.clear()
    secrets._registered.update(saved)
    secrets._cache = None  # the cache notices new entries by count only


SERVERS = ("tests/batch/test_dask.py", "tests/providers/test_llamacpp.py", "tests/mcp/test_failures.py",
           "tests/mcp/test_servers.py", "tests/mcp/test_notebook.py")
"""Modules whose tests start real outside programs (a Dask cluster, MCP servers from PyPI and npm, llama.cpp):
marked `servers`, which the fast lane (`./dev test --fast`) leaves out with `kernel` and `browser`."""


FAST_LANE_SKIPS = ("tests/jupyter/browser", *SERVERS)
"""What the fast lane (`NBAGENT_TEST_LANE=fast`) does not collect at all, to spare each of its workers the
imports (about 1.5 s of CPU a worker, measured): a folder and modules whose every test carries a marker the
lane leaves out (`browser`; `servers`, by path above). tests/test_dev.py checks that in every run that
collects the whole suite outside the fast lane (the full lane, and the check run alone)."""


def in_fast_lane_skips(nodeid: str) -> bool:
    module = nodeid.split("::")[0]
    return any(module == skip or module.startswith(skip + "/") for skip in FAST_LANE_SKIPS)


def pytest_ignore_collect(collection_path, config):
    if os.environ.get("NBAGENT_TEST_LANE") == "fast":
        try:
            relative = collection_path.relative_to(config.rootpath).as_posix()
        except ValueError:
            return None
        if relative in FAST_LANE_SKIPS:
            return True
    return None


COLLECTED = pytest.StashKey[list]()
"""Every test this run collected, before `-m` or `-k` chose among them: `Collected` rows (tests/test_dev.py
reads them to check what the fast lane leaves out)."""


@dataclasses.dataclass(frozen=True)
class Collected:
    nodeid: str
    markers: frozenset[str]
    lane: str | None  # the sandbox lane it runs in (`sandbox_lane`), if any
    base: str  # the test and its other parameters: the same for the test in every sandbox lane


@pytest.hookimpl(tryfirst=True)  # before the -m and -k of `_pytest.mark` deselect any
def pytest_collection_modifyitems(config, items):
    host = host_sandbox_lane() if any("sandbox_lane" in getattr(i, "fixturenames", ()) for i in items) else None
    rows = []
    for item in items:
        if item.nodeid.split("::")[0] in SERVERS:
            item.add_marker(pytest.mark.servers)
        callspec = getattr(item, "callspec", None)
        lane = callspec.params.get("sandbox_lane") if callspec else None
        if lane is not None and host is not None and lane != host:
            item.add_marker(pytest.mark.other_sandbox)
        others = sorted((k, repr(v)) for k, v in callspec.params.items() if k != "sandbox_lane") if callspec else []
        rows.append(Collected(item.nodeid, frozenset(m.name for m in item.iter_markers()), lane,
                              f"{item.nodeid.split('[')[0]}{others}"))
    config.stash[COLLECTED] = rows


def pytest_collection_finish(session):
    """What collection made (every test module, its imports, the items) lives to the end of the run: frozen
    out of the garbage collector's full passes, which would walk all of it at every `gc.collect()` (IPython's
    `reset` calls one; a test process holds hundreds of thousands of such objects)."""
    gc.freeze()


_running: dict[str, pytest.Item | None] = {"item": None}


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    """The test being set up, for the kernel guard below: a module- or session-scoped fixture is set up
    within the setup of the first test that asks for it, so the guard knows whose fixture starts a kernel."""
    _running["item"] = item


@pytest.fixture(scope="session", autouse=True)
def kernels_only_where_marked():
    """A test that starts a Jupyter kernel says so (`@pytest.mark.kernel`, or `browser`): every local kernel
    jupyter_client starts (KernelManager, nbclient) passes its provisioner, which refuses for the others, so
    the fast lane's `-m "not kernel"` cannot let one through by a missing mark. Patched for the whole session,
    so a kernel started by a module-scoped fixture is refused too (it is set up before any function fixture)."""
    try:
        from jupyter_client.provisioning.local_provisioner import LocalProvisioner
    except ImportError:  # pragma: no cover - the front's extra is not installed
        yield
        return

    launch = LocalProvisioner.launch_kernel

    async def guarded(self, *args, **kwargs):
        item = _running["item"]
        if item is not None and not (item.get_closest_marker("kernel") or item.get_closest_marker("browser")):
            raise RuntimeError(f"{item.nodeid} starts a Jupyter kernel: mark it @pytest.mark.kernel")
        return await launch(self, *args, **kwargs)

    LocalProvisioner.launch_kernel = guarded
    yield
    LocalProvisioner.launch_kernel = launch


SANDBOX_LANES = ("bubblewrap", "landlock", "landlock-nomount", "landlock-launched")
"""The sandboxes a host can give shell commands (`NBAGENT_SANDBOX`): bubblewrap; Landlock with a mount
namespace per command (root in a VM or a privileged container, without bubblewrap); Landlock alone (a
container without user namespaces or privileges: the usual Docker or Kubernetes JupyterHub); and Landlock
(with a mount namespace where this process may make one) in a kernel too big to fork cheaply, every command
started through `nbagent.safety._launcher` (`NBAGENT_SPAWN=launcher`), as a notebook holding GBs of data has
them: the steps a forked child takes between fork and exec, taken in another program."""


def host_sandbox_lane() -> str | None:
    """The lane of the sandbox this host gives commands by itself (`sandbox_backend()` as `NBAGENT_SANDBOX`
    leaves it), None without one. The fast lane runs the sandbox tests in this lane only (the others are
    marked `other_sandbox`); the full lane runs them in every lane."""
    from nbagent.safety.sandbox import sandbox_backend

    sandbox_backend.cache_clear()
    try:
        chosen = sandbox_backend()
    finally:
        sandbox_backend.cache_clear()
    if chosen.name == "landlock":
        return "landlock" if chosen.mounts else "landlock-nomount"
    return chosen.name if chosen.name in SANDBOX_LANES else None


@pytest.fixture(params=SANDBOX_LANES)
def sandbox_lane(request, monkeypatch):
    """Runs a test once per sandbox lane this machine can run (the `SandboxBackend` in force). `landlock` is
    skipped where it would be the same as `landlock-nomount` (no mount namespace here)."""
    from nbagent.safety.sandbox import sandbox_backend
    from nbagent.safety.sandbox_linux import landlock_abi

    monkeypatch.setenv("NBAGENT_SANDBOX", request.param.removesuffix("-launched"))
    if request.param.endswith("-launched"):
        monkeypatch.setenv("NBAGENT_SPAWN", "launcher")
    sandbox_backend.cache_clear()
    chosen = sandbox_backend()
    if chosen.name != request.param.split("-")[0]:
        sandbox_backend.cache_clear()
        if request.param.startswith("landlock") and landlock_abi() >= 1:  # the kernel has it: never a silent skip
            pytest.fail(f"NBAGENT_SANDBOX={request.param} did not give Landlock: {chosen.reason}")
        pytest.skip(f"{request.param} is not available here: {chosen.reason}")
    if request.param == "landlock" and not chosen.mounts:
        sandbox_backend.cache_clear()
        pytest.skip("this process cannot make a mount namespace: the landlock-nomount lane is this one")
    yield chosen
    monkeypatch.delenv("NBAGENT_SANDBOX", raising=False)
    monkeypatch.delenv("NBAGENT_SPAWN", raising=False)
    sandbox_backend.cache_clear()
