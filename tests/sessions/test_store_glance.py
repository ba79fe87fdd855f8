"""The store's whole-batch glance (`nbagent.safety.secrets.nothing_to_redact`) writes exactly what redacting each
batch's text writes: the same records written both ways, with secrets whole, in pieces split across records and
across batches, encoded (base64, URL-safe base64, hex, URL-quoted, JSON-escaped), in credential shapes, and a key
registered or set in the environment between two records of one batch, give the same lines, none holding a secret.
A control shows the comparison fails when the glance wrongly says a batch is clean."""

from __future__ import annotations

import base64
import json
import urllib.parse
from pathlib import Path

import pytest

from nbagent import AssistantMessage, ToolCall
from nbagent.messages import TextBlock, ToolResultMessage
from nbagent.safety import secrets as _secrets
from nbagent.sessions import SessionWriter, _writer
from nbagent.sessions._reader import load_session

KEY = "Zq8vN2xPmL4kR7tY1wB9cE3hJ6uA0sD5"
LATER = "Wq3Rt5Yu7Io9Pa1Sd8Fg6Hj4Kl2"
ENV_KEY = "sk-proj-" + "Qm7Xv2Lp9Rt4Wz8Kc3Nb6Hd1Fy5Gs0Ja" * 2


def _result(i: int, text: str) -> ToolResultMessage:
    return ToolResultMessage(f"call_{i}", "shell", [TextBlock(text)], False)


def _call(i: int, arguments: dict) -> AssistantMessage:
    return AssistantMessage(tool_calls=[ToolCall(name="shell", arguments=arguments, id=f"call_{i}")])


def _carriers(secret: str) -> list[str]:
    raw = secret.encode()
    return [secret, f"the key is {secret[:9]}", secret[::-1][4:15], base64.b64encode(raw).decode(),
            base64.urlsafe_b64encode(b"xy" + raw).decode(), raw.hex(), urllib.parse.quote(secret + "/&="),
            json.dumps({"nested": secret[5:20]})]


def _script(monkeypatch: pytest.MonkeyPatch) -> list:
    """Batches of records (each a list of steps; a step writes records or changes the secrets)."""
    ordinary = [[lambda w, i=i: w.messages([_call(i, {"a": i}), _result(i, str(i))]),
                 lambda w, i=i: w.request({"model": "m", "messages": {"$transcript": i}})] for i in range(6)]
    hostile = []
    for n, text in enumerate(_carriers(KEY) + _carriers(ENV_KEY)):
        hostile.append([lambda w, n=n, text=text: w.messages([_call(100 + n, {"cmd": "cat x"}),
                                                            _result(100 + n, text)])])
    split = [[lambda w: w.messages([_result(200, KEY[:12])]), lambda w: w.messages([_result(201, KEY[12:])])],
             [lambda w: w.messages([_result(202, KEY[:16])])], [lambda w: w.messages([_result(203, KEY[16:])])]]
    shapes = [[lambda w: w.messages([_call(300, {"url": "postgres://app:Tr0ub4dor3@db/x"})])],
              [lambda w: w.messages([_call(301, {"config": 'api_key = "k-1234567890"'})])],
              [lambda w: w.messages([_result(302, "AUTHORIZATION: Bearer abcdefgh12345678")])]]
    later = [[lambda w: w.messages([_result(400, f"before: {LATER}")]),
              lambda w: _secrets.add_secret(LATER, "later_key"),
              lambda w: w.messages([_result(401, f"after: {LATER[2:14]}")])],
             [lambda w: w.messages([_result(402, "clean again")])],
             [lambda w: w.messages([_result(403, f"env {ENV_KEY[10:30]}")]),
              lambda w: monkeypatch.setenv("OPENAI_API_KEY", ENV_KEY),
              lambda w: w.messages([_result(404, f"env {ENV_KEY[30:50]}")])]]
    return [*ordinary, *hostile, *ordinary, *split, *shapes, *ordinary, *later, *ordinary]


def _write(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str) -> list[bytes]:
    """Run the script into a new session; the body of each line written after the header, MAC left out."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    _secrets.add_secret(KEY, "my_key")
    try:
        writer = SessionWriter(tmp_path / name)
        for batch in _script(monkeypatch):
            for step in batch:
                step(writer)
            writer.commit()
        writer.close()
        lines = writer.path.read_bytes().splitlines()[1:]
        assert not load_session(tmp_path / name, writer.id).warnings  # every line verifies
        return [line[: line.rindex(b',"mac":')] for line in lines]
    finally:
        _secrets._registered.pop(KEY, None)
        _secrets._registered.pop(LATER, None)


@pytest.fixture
def glances(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """What the glance answered for each batch (so a test knows it took the fast path, and the slow one)."""
    answers: list[bool] = []

    def spy(data: bytes) -> bool:
        answers.append(_secrets.nothing_to_redact(data))
        return answers[-1]

    monkeypatch.setattr(_writer, "nothing_to_redact", spy)
    return answers


def _slow(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_writer, "nothing_to_redact", lambda data: False)


def test_the_glance_writes_what_redacting_every_batch_writes(tmp_path, monkeypatch, glances):
    fast = _write(tmp_path, monkeypatch, "fast")
    assert True in glances and False in glances  # both paths were taken
    with monkeypatch.context() as m:
        _slow(m)
        slow = _write(tmp_path, m, "slow")
    assert fast == slow
    text = b"\n".join(fast).decode()
    assert "[REDACTED:my_key" in text and "[REDACTED:later_key" in text and "[REDACTED:OPENAI_API_KEY" in text
    for piece in (KEY[:8], KEY[10:18], KEY[-8:], LATER[4:12], ENV_KEY[32:40]):  # (the others were written
        assert piece not in text  # before they were secrets)


def test_control_a_glance_that_calls_every_batch_clean_lets_secrets_through(tmp_path, monkeypatch):
    with monkeypatch.context() as m:
        _slow(m)
        slow = _write(tmp_path, m, "slow")
    monkeypatch.setattr(_secrets, "_glance", lambda text, compiled: True)
    broken = _write(tmp_path, monkeypatch, "broken")
    assert broken != slow and KEY.encode() in b"\n".join(broken)


def test_a_key_registered_after_its_parts_were_seen_clean_is_found_in_them(tmp_path, monkeypatch, glances):
    """Parts the glance remembered clean are looked at again once the secrets change."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    writer = SessionWriter(tmp_path)
    try:
        writer.messages([_result(1, LATER)])
        writer.commit()
        assert glances == [True] and LATER.encode() in writer.path.read_bytes()  # not a secret yet
        _secrets.add_secret(LATER, "later_key")
        writer.messages([_result(1, LATER)])
        writer.commit()
        assert glances[-1] is False and writer.path.read_bytes().count(LATER.encode()) == 1
    finally:
        _secrets._registered.pop(LATER, None)
        writer.close()
