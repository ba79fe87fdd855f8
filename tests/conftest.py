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
