"""Credential shapes (`nbagent.safety.shapes`): found by content in any text, ordinary text left alone."""

from __future__ import annotations

import pytest

from nbagent.safety.shapes import credential_parts, looks_random_token, shape_spans
from nbagent.safety.secrets import redact


@pytest.mark.parametrize("text,secret", [
    ("postgres://app:Tr0ub4dor3@db:5432/x", "Tr0ub4dor3"),
    ("amqp://guest:s3cr3t-pw@broker//", "s3cr3t-pw"),
    ("Server=sql1;Database=app;User Id=web;Password=p4ss-w0rd;", "p4ss-w0rd"),
    ("DefaultEndpointsProtocol=https;AccountName=a;AccountKey=abc+def/ghi==;EndpointSuffix=core", "abc+def/ghi=="),
    ("https://acct.blob.core.windows.net/c?sv=2022&sig=Qm9vbGVhbiBub3Q%3D&se=1", "Qm9vbGVhbiBub3Q%3D"),
    ('{"api_key": "k-1234567890"}', "k-1234567890"),
    ("password = 'hunter2!!'", "hunter2!!"),
    ("export DB_PASSWORD=hunter2x", "hunter2x"),
    ("Authorization: Bearer abcdefgh12345678", "abcdefgh12345678"),
    ("https://f3a9b7c2d8e1f6a4b0c5d9e2f7a1b3c8@o451.ingest.sentry.io/6021", "f3a9b7c2d8e1f6a4b0c5d9e2f7a1b3c8"),
    ("hook https://hooks.slack.com/services/T0AAAAAAA/B0BBBBBBB/abcdEFGHijklMNOPqrst1234 ok",
     "https://hooks.slack.com/services/T0AAAAAAA/B0BBBBBBB/abcdEFGHijklMNOPqrst1234"),
    ("tok eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.c2lnbmF0dXJlLXZhbHVl end",
     "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.c2lnbmF0dXJlLXZhbHVl"),
    ("key sk_live_4eC39HqLyjWDarjtT1zdp7dc here", "sk_live_4eC39HqLyjWDarjtT1zdp7dc"),
])
def test_a_credential_shape_is_found_and_redacted(text, secret):
    spans = shape_spans(text)
    assert any(text[a:b] == secret for a, b, _ in spans), spans
    assert secret not in redact(text)


@pytest.mark.parametrize("text", [
    "password: str", "max_tokens=100", "token = get_token()", "tokenizer = 'gpt2-tokenizer'",
    "http://localhost:8888/lab", "git@github.com:acme/site.git", "ssh://deploy_user_account@host/x",
    "sha256 3f786850e387550fdab836ed7e6dc881de23001b", "uuid 123e4567-e89b-12d3-a456-426614174000",
    'password = "${DB_PASSWORD}"', "API_KEY=<your key here>", "https://user@example.com/path",
    "/usr/lib/python3.11/site-packages/pandas/core/frame.py",
])
def test_ordinary_text_is_left_alone(text):
    assert shape_spans(text) == [] and redact(text) == text


def test_credential_parts_of_values_a_person_set():
    assert credential_parts("postgres://app:Tr0ub4dor3@db/x") == ["Tr0ub4dor3"]
    assert credential_parts("https://discord.com/api/webhooks/123456/AbCdEfGhIjKlMnOpQrStUvWxYz0123456789")
    assert credential_parts("Bearer Zq8vN2xPmL4kR7tY1wB9cE3h") == ["Zq8vN2xPmL4kR7tY1wB9cE3h"]
    assert credential_parts("Zq8vN2xPmL4kR7tY1wB9cE3h") == ["Zq8vN2xPmL4kR7tY1wB9cE3h"]
    for plain in ("/home/me/.local/bin:/usr/bin", "en_US.UTF-8", "http://127.0.0.1:8000/v1", "xterm-256color",
                  "3f786850e387550fdab836ed7e6dc881de23001b", "MyVeryLongClassName2"):
        assert credential_parts(plain) == [], plain
    assert not looks_random_token("version-1.2.3-build-20240101")
