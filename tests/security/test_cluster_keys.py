"""Attacks on how a key given in code reaches a cluster's workers (nbagent.batch.dask_keys): the sealed bytes
sit in a queue on the scheduler, which anyone who can reach it can read or write; the agent's pickle is
scattered through it. Each attack has a control showing the mechanism works in the legitimate case."""

from __future__ import annotations

import pytest

pytest.importorskip("cryptography")

from nbagent import Agent, ConfigurationError, tool  # noqa: E402
from nbagent.batch.dask_keys import KeyPair, give_keys, has_key, model_secrets, seal  # noqa: E402
from nbagent.providers.openai import OpenAIChatModel  # noqa: E402
from nbagent.safety import secrets  # noqa: E402

KEY = "sk-sealed-key-93b1e7c54a2d0f86"
CONTEXT = b"nbagent-items-batch-tag|0|life-a"


def test_sealed_keys_open_only_for_the_runner_and_the_life_they_were_sealed_to():
    runner, stranger = KeyPair(), KeyPair()
    sealed = seal(runner.public, {"api_key": KEY}, CONTEXT)
    assert KEY.encode() not in sealed
    assert runner.open(sealed, CONTEXT) == {"api_key": KEY}  # control: its runner opens it
    with pytest.raises(ValueError, match="did not open"):
        stranger.open(sealed, CONTEXT)  # another runner (or whoever read the queue) cannot
    with pytest.raises(ValueError, match="did not open"):
        runner.open(sealed, b"nbagent-items-batch-tag|0|life-b")  # nor can the next life, copied it
    tampered = sealed[:-1] + bytes([sealed[-1] ^ 1])
    with pytest.raises(ValueError, match="did not open"):
        runner.open(tampered, CONTEXT)
    for junk in (b"", b"x" * 10, "not bytes"):
        with pytest.raises(ValueError):
            runner.open(junk, CONTEXT)  # type: ignore[arg-type]


def test_a_forged_public_key_gets_nothing_sealed():
    for forged in (b"", b"\x00" * 31, "a string", None):
        with pytest.raises(ValueError):
            seal(forged, {"api_key": KEY}, CONTEXT)


def test_a_key_pair_never_travels_in_a_pickle():
    import pickle

    with pytest.raises(TypeError, match="not picklable"):
        pickle.dumps(KeyPair())


def test_the_worker_holds_the_key_as_the_process_does_and_redacts_it(tmp_path):
    agent = Agent(model=OpenAIChatModel("gpt-4o-mini", base_url="http://127.0.0.1:9/v1"), workspace=tmp_path)
    header = "hdr-secret-0a9b8c7d6e5f4321"
    given = give_keys(agent, {"api_key": KEY, "headers": {"api-key": header}})
    assert given.model.api_key().value == KEY and repr(given.model.api_key()) == "Secret('***')"
    assert given.model.http._headers()["authorization"] == f"Bearer {KEY}"
    assert given.model.http._headers()["api-key"] == header
    assert secrets.redact(f"a log line with {KEY} and {header}").count("[REDACTED") == 2
    assert agent.model._api_key is None  # the shared (cached) copy stays keyless
    with pytest.raises(ValueError):
        give_keys(agent, {"api_key": ["not", "a", "key"]})


def test_a_worker_without_a_key_says_so_before_any_request(tmp_path, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    model = OpenAIChatModel("gpt-4o-mini", base_url="http://127.0.0.1:9/v1")
    assert has_key(model) == (False, None)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-bad key with spaces 0123456789")
    ready, problem = has_key(model)
    assert not ready and "OPENAI_API_KEY" in problem and "spaces" not in problem
    monkeypatch.setenv("OPENAI_API_KEY", KEY)  # control
    assert has_key(model) == (True, None)


def test_a_secret_anything_in_the_agent_holds_refuses_to_travel(tmp_path, monkeypatch):
    """The shipped agent's bytes are checked for every secret this process knows, whatever holds it: here a
    tool's closure over a key from the environment."""
    import cloudpickle

    from nbagent.batch.dask import portable_agent
    from nbagent.batch.dask_keys import check_no_secret

    monkeypatch.setenv("WEATHER_API_KEY", "wx-9f8e7d6c5b4a39281706")
    token = __import__("os").environ["WEATHER_API_KEY"]

    @tool
    def weather(city: str) -> str:
        """The weather in a city."""
        return f"sunny (asked with {token[:2]})"

    model = OpenAIChatModel("gpt-4o-mini", base_url="http://127.0.0.1:9/v1", api_key=KEY)
    leaky = Agent(model=model, tools=[weather], workspace=tmp_path)
    with pytest.raises(ConfigurationError, match="WEATHER_API_KEY"):
        check_no_secret(cloudpickle.dumps(portable_agent(leaky, leaky.policy)))

    @tool
    def calm(city: str) -> str:
        """The weather in a city."""
        return "sunny"

    clean = Agent(model=model, tools=[calm], workspace=tmp_path)  # control: the key given in code is not in it
    check_no_secret(cloudpickle.dumps(portable_agent(clean, clean.policy)))
    assert model_secrets(clean.model) == {"api_key": KEY}


def test_the_check_is_what_stops_a_key_in_the_pickle(tmp_path, monkeypatch):
    """Turned off (the key left on the shipped model), the same bytes hold the key, and the check says so."""
    import cloudpickle

    import nbagent.batch.dask as engine
    from nbagent.batch.dask import portable_agent
    from nbagent.batch.dask_keys import check_no_secret

    monkeypatch.setattr(engine, "strip_secrets", lambda model: _Exposed(model))
    agent = Agent(model=OpenAIChatModel("gpt-4o-mini", base_url="http://127.0.0.1:9/v1", api_key=KEY),
                  workspace=tmp_path)
    blob = cloudpickle.dumps(portable_agent(agent, agent.policy))
    assert KEY.encode() in blob
    with pytest.raises(ConfigurationError, match="secret"):
        check_no_secret(blob)


class _Exposed:
    """A stand-in for a model that kept its key as a plain attribute (what the strip prevents)."""

    def __init__(self, model) -> None:
        self.key = model.api_key().value
        self.http = None
