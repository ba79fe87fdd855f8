"""Fixtures for provider tests: a local fake provider server (tests/conftest.py keeps real keys out)."""

from __future__ import annotations

from typing import AsyncIterator

import pytest

from nbagent.providers._http import RetryPolicy

from .fakeserver import FakeServer


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
