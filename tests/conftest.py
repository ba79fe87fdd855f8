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
