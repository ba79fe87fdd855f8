"""Keys and base URLs the person stored with the panel's Settings (nbagent.safety.keys), as units: where they live
and with which rights, that the environment wins, that providers read them, that they are redacted like the
environment's keys, and what a damaged file does."""

from __future__ import annotations

import json
import stat

import pytest

from nbagent.errors import AuthenticationError
from nbagent.providers import load_model
from nbagent.safety import keys, redact

KEY = "sk-stored-Zq8xV3mW1pL7rT4y"


@pytest.fixture
def cfg(tmp_path, monkeypatch):
    monkeypatch.setenv("NBAGENT_CONFIG_DIR", str(tmp_path / "cfg"))
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "OLLAMA_API_KEY", "OLLAMA_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    return tmp_path / "cfg"


def test_a_stored_key_lives_in_a_private_file_outside_the_workspace(cfg):
    keys.store("OPENAI_API_KEY", KEY)
    path = cfg / "keys.json"
    assert keys.keys_path() == path
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and stat.S_IMODE(cfg.stat().st_mode) == 0o700
    assert json.loads(path.read_text()) == {"format": 1, "values": {"OPENAI_API_KEY": KEY}}
    assert keys.stored("OPENAI_API_KEY") == KEY and keys.lookup("OPENAI_API_KEY") == KEY
    assert [p.name for p in cfg.iterdir() if p.name.startswith(".keys-")] == []  # no temporary file left
    assert keys.remove("OPENAI_API_KEY") is True and keys.remove("OPENAI_API_KEY") is False
    assert keys.stored("OPENAI_API_KEY") is None and json.loads(path.read_text())["values"] == {}


def test_the_environment_wins_over_a_stored_value(cfg, monkeypatch):
    keys.store("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-the-environment-123")
    assert keys.lookup("OPENAI_API_KEY") == "sk-from-the-environment-123"
    assert load_model("openai:gpt-4.1").api_key().value == "sk-from-the-environment-123"


def test_providers_read_the_stored_key_and_base_url(cfg):
    assert load_model("openai:gpt-4.1").api_key() is None
    keys.store("OPENAI_API_KEY", KEY)
    keys.store("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    model = load_model("openai:gpt-4.1")
    assert model.api_key().value == KEY and model.base_url == "http://127.0.0.1:9/v1"
    assert load_model("openai-responses:gpt-4.1").api_key().value == KEY  # one variable, one stored key
    assert model._request_headers()["authorization"] == f"Bearer {KEY}"
    keys.store("OLLAMA_API_KEY", "local-key-Aa11Bb22Cc33")
    keys.store("OLLAMA_BASE_URL", "http://127.0.0.1:8123")
    local = load_model("ollama:llama3")
    assert local.base_url == "http://127.0.0.1:8123/v1" and local._request_headers()["authorization"] == \
        "Bearer local-key-Aa11Bb22Cc33"


def test_a_stored_key_that_is_damaged_is_refused_by_name_without_showing_it(cfg):
    cfg.mkdir(mode=0o700)
    (cfg / "keys.json").write_text(json.dumps({"format": 1, "values": {"OPENAI_API_KEY": "sk-abc def-ghijklmnop"}}))
    with pytest.raises(AuthenticationError) as caught:
        load_model("openai:gpt-4.1").api_key()
    assert "the key stored for OPENAI_API_KEY" in str(caught.value) and "ghijklmnop" not in str(caught.value)


def test_stored_keys_are_redacted_like_the_environments(cfg):
    key = "sk-registered-Yt5Rk2Qw9Ln4Jh7"
    keys.store("MISTRAL_API_KEY", key)
    assert redact(f"the key is {key}") == "the key is [REDACTED:MISTRAL_API_KEY]"
    assert key not in redact(f"a piece: {key[3:15]}")


def test_a_key_file_read_at_load_registers_its_keys(cfg):
    """A key stored by another kernel is a secret here from the moment the file is read (at %load_ext)."""
    key = "sk-elsewhere-Hq3Zp8Wd2Lm6Vx1"
    cfg.mkdir(mode=0o700)
    (cfg / "keys.json").write_text(json.dumps({"format": 1, "values": {"GEMINI_API_KEY": key, "X_BASE_URL": "http://h"}}))
    (cfg / "keys.json").chmod(0o644)
    keys.stored_values()
    assert redact(key) == "[REDACTED:GEMINI_API_KEY]"
    assert stat.S_IMODE((cfg / "keys.json").stat().st_mode) == 0o600  # made private again


def test_an_unreadable_file_holds_nothing_and_says_so_without_its_content(cfg):
    cfg.mkdir(mode=0o700)
    (cfg / "keys.json").write_text('{"format": 1, "values": {"OPENAI_API_KEY": "sk-broken-Lq2Wz')
    with pytest.warns(UserWarning, match="cannot be read") as warned:
        assert keys.stored_values() == {}
    assert "sk-broken" not in str(warned[0].message)
    with pytest.raises(ValueError):
        keys.store("not a name", "x" * 20)


def test_a_run_request_carries_the_stored_key(cfg):
    """The next request of a model made after the key was stored sends it (read at request time)."""
    model = load_model("openai:gpt-4.1")
    with pytest.raises(AuthenticationError, match="store one in the nbagent panel's Settings"):
        model._request_headers()
    keys.store("OPENAI_API_KEY", KEY)
    assert model._request_headers()["authorization"] == f"Bearer {KEY}"
