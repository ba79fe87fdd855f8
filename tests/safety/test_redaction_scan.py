"""Redaction's first look (`_may_hold_secret`) only skips texts the full passes would leave alone: whatever
the secret and wherever its value, pieces, reversal or encodings sit in a text, redacting with the first
look gives exactly what redacting without it gives."""

from __future__ import annotations

import base64
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nbagent.safety import secrets as _secrets
from nbagent.safety import shapes as _shapes
from tests.helpers import examples

ALPHABET = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_+/=.: \"\\\n#é"


def forms(secret: str, a: int, b: int) -> list[str]:
    """What can carry a secret or part of it, as redaction knows it."""
    raw = secret.encode()
    return [secret, secret[a:b], secret[::-1][a:b], json.dumps(secret)[1:-1], raw.hex(), raw.hex().upper(),
            base64.b64encode(raw).decode(), base64.b64encode(b"x" + raw).decode(),
            base64.urlsafe_b64encode(b"xy" + raw).decode()]


@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(secret=st.text(ALPHABET, min_size=8, max_size=60), noise=st.lists(st.text(ALPHABET, max_size=30), max_size=6),
       a=st.integers(0, 60), b=st.integers(0, 60), picks=st.lists(st.integers(0, 8), max_size=4))
def test_the_first_look_never_skips_what_the_full_passes_would_replace(secret, noise, a, b, picks, monkeypatch):
    monkeypatch.setenv("MY_SERVICE_TOKEN", secret)
    compiled = _secrets._compiled()
    carried = forms(secret, a, b)
    text = "".join(n + (carried[picks[i]] if i < len(picks) else "") for i, n in enumerate(noise or [""]))
    looked = _secrets._redact(text, compiled)
    monkeypatch.setattr(_secrets, "_may_hold_secret", lambda text, runs, heads: True)
    assert looked == _secrets._redact(text, compiled)


def test_the_first_look_passes_a_text_holding_a_piece_and_skips_one_holding_none(monkeypatch):
    key = "Zq8vN2xPmL4kR7tY1wB9cE3hJ6uA0sD5"
    monkeypatch.setenv("MY_SERVICE_TOKEN", key)
    _, _, _, _, _, runs, heads, _ = _secrets._compiled()
    assert _secrets._may_hold_secret(f'{{"text":"before {key[9:16]} after"}}', runs, heads)
    assert _secrets._may_hold_secret(f"x {key[::-1][3:10]} y", runs, heads)
    assert not _secrets._may_hold_secret('{"kind":"message","text":"a DataFrame of 10 rows","id":"call_12ab"}',
                                         runs, heads)


@pytest.mark.parametrize("secret", ["Zq8vN2xPmL4kR7tY1wB9cE3hJ6uA0sD5", "correct horse battery", 'pa"ss\\wo\nrd#2024'])
def test_control_the_first_look_off_gives_the_same_redaction(secret, monkeypatch):
    monkeypatch.setenv("DB_PASSWORD", secret)
    text = f"a {secret} b {json.dumps(secret)} c {secret[2:14]} d"
    looked = _secrets.redact(text)
    assert "REDACTED:DB_PASSWORD" in looked and secret not in looked
    monkeypatch.setattr(_secrets, "_may_hold_secret", lambda text, runs, heads: True)
    assert _secrets.redact(text) == looked


# One made-up token of each key shape redaction knows (nbagent.safety.shapes.TOKEN_PATTERNS).
TOKENS = {
    "anthropic-key": "sk-ant-api03-" + "Ab3dE5fG7hJ9kL1mN3pQ5rS7",
    "openai-key": "sk-proj-" + "Ab3dE5fG7hJ9kL1mN3pQ5rS7",
    "google-key": "AIza" + "Sy" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q",
    "github-token": "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8",
    "slack-token": "xoxb-" + "1234567890-abcdefghij",
    "aws-key": "AKIA" + "ABCDEFGHIJKLMNOP",
    "huggingface-token": "hf_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6",
    "gitlab-token": "glpat-" + "Ab3dE5fG7hJ9kL1mN3pQ5rS7",
    "stripe-key": "sk_live_" + "Ab3dE5fG7hJ9kL1mN3pQ",
    "npm-token": "npm_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8",
    "pypi-token": "pypi-" + "AgEIcHlwaS5vcmc" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8",
    "jwt": "eyJhbGciOiJIUzI1NiJ9" + ".eyJzdWIiOiIxMjM0NTY3ODkwIn0" + ".dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
    "private-key": "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA\n-----END RSA PRIVATE KEY-----",
    "webhook": "https://hooks.slack.com/services/" + "T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX",
}
MORE = ["gho_" + "x" * 36, "ghu_" + "y" * 36, "ghs_" + "z" * 36, "ghr_" + "w" * 36, "github_pat_" + "Q" * 40,
        "ASIA" + "QRSTUVWXYZ234567", "xoxp-" + "0987654321", "sk-svcacct-" + "Z" * 24]


def test_every_token_shape_passes_the_first_look_and_is_redacted() -> None:
    assert set(TOKENS) == set(_shapes.TOKEN_PATTERNS)  # a new shape needs its example here
    for name, token in [*TOKENS.items(), *((None, t) for t in MORE)]:
        text = f'{{"text":"the output was {token} and more"}}'
        assert any(m in text for m in _shapes._TOKEN_MARKERS), token
        assert token not in _secrets.redact(text) and "[REDACTED:" in _secrets.redact(text), token
        if name is not None:
            assert _shapes.TOKEN_PATTERNS[name].search(token), name


def test_control_text_with_no_token_shape_is_not_looked_at_again() -> None:
    text = '{"kind":"message","text":"the main road, then: see example.com/x"}'
    assert not any(m in text for m in _shapes._TOKEN_MARKERS) and _shapes.shape_spans(text) == []
    assert _shapes.shape_spans("the high road, though: see github.com/x") == []  # a marker, and no token
