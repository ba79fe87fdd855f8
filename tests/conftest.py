"""Shared fixtures. Tests never reach the internet; provider tests talk to a local fake server."""

from __future__ import annotations


import pytest

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


def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.nodeid.split("::")[0] in SERVERS:
            item.add_marker(pytest.mark.servers)


@pytest.fixture(autouse=True)
def kernels_only_where_marked(request, monkeypatch):
    """A test that starts a Jupyter kernel says so (`@pytest.mark.kernel`, or `browser`): every local kernel
    jupyter_client starts (KernelManager, nbclient) passes its provisioner, which refuses for the others, so
    the fast lane's `-m "not kernel"` cannot let one through by a missing mark."""
    if request.node.get_closest_marker("kernel") or request.node.get_closest_marker("browser"):
        return
    try:
        from jupyter_client.provisioning.local_provisioner import LocalProvisioner
    except ImportError:  # pragma: no cover - the front's extra is not installed
        return

    async def refuse(self, *args, **kwargs):
        raise RuntimeError(f"{request.node.nodeid} starts a Jupyter kernel: mark it @pytest.mark.kernel")

    monkeypatch.setattr(LocalProvisioner, "launch_kernel", refuse)


SANDBOX_LANES = ("bubblewrap", "landlock", "landlock-nomount")
"""The sandboxes a host can give shell commands (`NBAGENT_SANDBOX`): bubblewrap; Landlock with a mount
namespace per command (root in a VM or a privileged container, without bubblewrap); Landlock alone (a
container without user namespaces or privileges: the usual Docker or Kubernetes JupyterHub)."""


@pytest.fixture(params=SANDBOX_LANES)
def sandbox_lane(request, monkeypatch):
    """Runs a test once per sandbox lane this machine can run (the `SandboxBackend` in force). `landlock` is
    skipped where it would be the same as `landlock-nomount` (no mount namespace here)."""
    from nbagent.safety.sandbox import sandbox_backend
    from nbagent.safety.sandbox_linux import landlock_abi

    monkeypatch.setenv("NBAGENT_SANDBOX", request.param)
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
    sandbox_backend.cache_clear()
