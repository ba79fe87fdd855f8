"""Every provider reads the keys and base URLs stored with the panel's Settings (nbagent.safety.keys) through the
one lookup in `HTTPModel`, when the environment has none: taken member by member, so a provider that reads its
variables some other way fails here. And the key file is out of the tools' reach."""

from __future__ import annotations

import os

import pytest

from nbagent.providers import PROVIDERS, load_model
from nbagent.safety import keys
from nbagent.safety.reach import out_of_reach
from nbagent.safety.sandbox import secret_places


@pytest.fixture
def cfg(tmp_path, monkeypatch):
    monkeypatch.setenv("NBAGENT_CONFIG_DIR", str(tmp_path / "cfg"))
    for name in list(os.environ):
        if name.endswith(("_API_KEY", "_BASE_URL")):
            monkeypatch.delenv(name)
    return tmp_path / "cfg"


@pytest.mark.parametrize("provider", list(PROVIDERS))
def test_every_provider_reads_its_stored_key_and_base_url(cfg, provider):
    model = load_model(f"{provider}:some-model")
    assert model.key_env and model.base_url_env, f"{provider} names no variables the Settings could store"
    key, url = f"sk-{provider}-Rk4Wq8Zm2Xt6Lp", "http://127.0.0.1:8999/v1"
    keys.store(model.key_env[0], key)
    keys.store(model.base_url_env[0], url)
    again = load_model(f"{provider}:some-model")
    assert again.api_key().value == key
    assert again.base_url.startswith("http://127.0.0.1:8999")  # (Anthropic's is taken without /v1)
    assert any(key in value for value in again._request_headers().values())  # the header that carries it


def test_the_key_file_is_out_of_reach_of_tools_and_shell_commands(cfg, tmp_path):
    keys.store("OPENAI_API_KEY", "sk-reach-Hw3Kq9Zt5Lm1Vp")
    path = os.path.realpath(keys.keys_path())
    assert any(path == p or path.startswith(p + "/") for p in secret_places())
    home_like = str(tmp_path)  # a workspace that holds the config folder: still out of reach
    assert out_of_reach(path, home_like) is not None
