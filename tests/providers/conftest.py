"""Fixtures for provider tests: a local fake provider server, and no provider settings from the environment."""

from __future__ import annotations

from typing import AsyncIterator

import pytest

from nbagent.providers._http import RetryPolicy

from .fakeserver import FakeServer

PROVIDER_ENV = (
    "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL",
    "OPENAI_API_KEY", "OPENAI_BASE_URL",
    "GEMINI_API_KEY", "GOOGLE_API_KEY", "GOOGLE_GEMINI_BASE_URL",
    "MISTRAL_API_KEY", "MISTRAL_BASE_URL",
    "OLLAMA_BASE_URL",
)


@pytest.fixture(autouse=True)
def clean_provider_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """No test sees a real key or base URL from the machine it runs on."""
    for name in PROVIDER_ENV:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
async def fake_server() -> AsyncIterator[FakeServer]:
    """A started `FakeServer` on 127.0.0.1 (see tests/providers/fakeserver.py)."""
    server = await FakeServer().start()
    try:
        yield server
    finally:
        await server.close()


class SleepRecorder:
    """A `RetryPolicy.sleep` that records the delays and returns at once."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)


@pytest.fixture
def no_wait() -> tuple[RetryPolicy, SleepRecorder]:
    """A retry policy whose backoffs are recorded instead of slept."""
    recorder = SleepRecorder()
    return RetryPolicy(sleep=recorder), recorder
