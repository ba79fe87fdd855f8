"""Redaction's fast paths give exactly what the slow ones gave, on every shape the gate knows: the skeleton made
with `bytes.translate` (ASCII text), the first look that remembers the runs it found clean, and the shape scan
that skips a text holding none of the shapes' marker words. Each test runs both paths over the same corpus
(keys whole, in pieces, reversed, wrapped over lines, quoted in pieces, base64 and hex, JSON-escaped, URLs with
passwords, DSNs, connection strings, configuration fields, every token shape) and compares."""

from __future__ import annotations

import base64
import json
import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nbagent.safety import _first_look
from nbagent.safety import secrets as _secrets
from nbagent.safety import shapes as _shapes
from tests.safety.test_redaction_scan import MORE, TOKENS

KEY = "Zq8vN2xPmL4kR7tY1wB9cE3hJ6uA0sD5"
ENV_KEY = "sk-proj-" + "Qm7Xv2Lp9Rt4Wz8Kc3Nb6Hd1Fy5Gs0Ja" * 2
PASSWORD = 'pa"ss\\wo\nrd#2024'


def _carriers(secret: str) -> list[str]:
    raw = secret.encode()
    return [secret, secret[3:11], secret[::-1][5:14], secret[:9] + "\n" + secret[9:], f'"{secret[:7]}" "{secret[7:]}"',
            " ".join(secret[:12]), json.dumps(secret)[1:-1], raw.hex(), raw.hex().upper(), base64.b64encode(raw).decode(),
            base64.b64encode(b"x" + raw).decode(), base64.urlsafe_b64encode(b"xy" + raw).decode()]


SHAPES = [
    "postgres://app:Tr0ub4dor3@db:5432/x", "amqp://guest:s3cr3t-pw@broker//", "REDIS_URL=redis://:Pq9wErTy@cache:6379",
    "Server=sql1;Database=app;User Id=web;Password=p4ss-w0rd;", "SERVER=X;PWD=Hunter22;",
    "DefaultEndpointsProtocol=https;AccountName=a;AccountKey=abc+def/ghi==;EndpointSuffix=core",
    "https://acct.blob.core.windows.net/c?sv=2022&SIG=Qm9vbGVhbiBub3Q%3D&se=1", 'config = {"Api-Key": "k-1234567890"}',
    "password = 'hunter2!!'", "export DB_PASSWORD=hunter2x", "AUTHORIZATION: Bearer abcdefgh12345678",
    "https://f3a9b7c2d8e1f6a4b0c5d9e2f7a1b3c8@o451.ingest.sentry.io/6021", "client_secret = 'Zx81Qw72Er63'",
    'CREDENTIALS: "Uu7Yy6Tt5Rr4"', "SharedAccessSignature=sv=2021&sig=Ab12Cd34Ef56", "token: 'Qm7Xv2Lp9R'",
    "https://discord.com/api/webhooks/123456/AbCdEfGhIjKlMnOpQrStUvWxYz0123456789",
    *TOKENS.values(), *MORE,
]


def corpus() -> list[str]:
    """Every carrier and shape alone, inside prose, and inside a store line (JSON: quotes and escapes)."""
    out = []
    for item in [*(_carriers(s) for s in (KEY, ENV_KEY, PASSWORD)), SHAPES]:
        for text in item:
            out += [text, f"the output was {text} and more", json.dumps({"kind": "message", "text": text}),
                    text.upper(), text.lower()]
    out += ['{"kind":"call","id":"call_71d7eaa8001101","arguments":{"a":1,"b":2},"duration":0.00018}',
            "the high road, though: see github.com/x", "max_tokens=100", "password: str", "é " + KEY[2:10] + " ü"]
    return out


@pytest.fixture
def keyed(monkeypatch, registered_secrets):
    monkeypatch.setenv("OPENAI_API_KEY", ENV_KEY)
    monkeypatch.setenv("DB_PASSWORD", PASSWORD)
    _secrets.add_secret(KEY, "my_key")
    return _secrets._compiled()


def _slow_shapes(monkeypatch) -> None:
    """The shape scan without its first looks: every text goes through every shape's search."""
    monkeypatch.setattr(_shapes, "_may_hold_shape", lambda text: True)
    monkeypatch.setattr(_shapes, "_ANY_WORD", ("",))
    monkeypatch.setattr(_shapes, "_ANY_MARKER", ("",))


def _slow_first_look(text: str, runs, heads) -> bool:
    """The first look as it was: every window of every run, nothing remembered."""
    for run in runs.findall(text):
        for i in range(len(run) - _secrets.PIECE_LENGTH + 1):
            if run[i : i + _secrets.PIECE_LENGTH] in heads:
                return True
    return False


def test_every_shape_word_and_marker_holds_one_the_first_look_tries():
    for words in _shapes._PART_WORDS.values():
        for word in words:
            assert any(short in word for short in _shapes._ANY_WORD), word
    for marker in _shapes._TOKEN_MARKERS:
        assert any(short in marker for short in _shapes._ANY_MARKER), marker
        assert any(needle in marker.lower() for needle in _shapes._NEEDLES), marker
    for word in _shapes._ANY_WORD:
        assert any(needle in word for needle in _shapes._NEEDLES) and '"' not in word, word


def test_the_shape_scan_finds_the_same_with_and_without_its_first_look(monkeypatch):
    texts = corpus()
    fast = [_shapes.shape_spans(t) for t in texts]
    assert sum(map(bool, fast)) > len(SHAPES)  # the corpus holds shapes
    _slow_shapes(monkeypatch)
    assert [_shapes.shape_spans(t) for t in texts] == fast


def test_control_a_first_look_missing_a_word_misses_shapes(monkeypatch):
    texts = corpus()
    fast = [_shapes.shape_spans(t) for t in texts]
    monkeypatch.setattr(_shapes, "_ANY_WORD", tuple(w for w in _shapes._ANY_WORD if w != "pass"))
    assert [_shapes.shape_spans(t) for t in texts] != fast


def test_control_a_first_look_missing_a_needle_misses_shapes(monkeypatch):
    texts = corpus()
    fast = [_shapes.shape_spans(t) for t in texts]
    monkeypatch.setattr(_shapes, "_clean_pieces", set())
    monkeypatch.setattr(_shapes, "_NEEDLES", tuple(n for n in _shapes._NEEDLES if n != "://"))
    assert [_shapes.shape_spans(t) for t in texts] != fast


def test_a_piece_once_clean_stays_clean_and_a_text_holding_a_shape_is_looked_at_each_time():
    line = '{"kind":"message","text":"a DataFrame of 10 rows"}'
    assert not _shapes._may_hold_shape(line) and not _shapes._may_hold_shape(line)  # the second from memory
    assert _shapes._may_hold_shape(line.replace("10 rows", "postgres://app:Tr0ub4dor3@db/x"))
    assert _shapes._may_hold_shape(line.replace("10 rows", "X-API-KEY"))  # any case


def test_the_skeleton_is_the_text_with_its_gaps_left_out():
    every_ascii = "".join(map(chr, range(128)))
    for text in [every_ascii, every_ascii * 3, *corpus(), "a\u2028b\u00a0c\u3000d\x85e"]:
        assert _secrets._skeleton(text) == _secrets._GAPS.sub("", text)


def test_redaction_is_the_same_with_the_fast_paths_as_with_the_slow(keyed, monkeypatch):
    texts = corpus()
    fast = [_secrets.redact(t) for t in texts]
    again = [_secrets.redact(t) for t in texts]  # the runs found clean are remembered now
    assert fast == again
    for text, clean in zip(texts, fast):
        for secret in (KEY, ENV_KEY):
            assert secret not in clean and secret[3:11] not in clean
    monkeypatch.setattr(_secrets, "_may_hold_secret", _slow_first_look)
    monkeypatch.setattr(_secrets, "_skeleton", lambda text: _secrets._GAPS.sub("", text))
    monkeypatch.setattr(_secrets, "_glance", lambda text, compiled: False)
    _slow_shapes(monkeypatch)
    assert [_secrets.redact(t) for t in texts] == fast


ALPHABET = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_+/=.:;@ \"'\\\n#é{}"


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(noise=st.lists(st.text(ALPHABET, max_size=25), min_size=1, max_size=5),
       picks=st.lists(st.integers(0, 10_000), max_size=4))
def test_mixed_texts_redact_the_same_both_ways(noise, picks, keyed, monkeypatch):
    pool = corpus()
    text = "".join(n + (pool[picks[i] % len(pool)] if i < len(picks) else "") for i, n in enumerate(noise))
    fast = _secrets.redact(text), _secrets.redact(text)
    with monkeypatch.context() as m:
        m.setattr(_secrets, "_may_hold_secret", _slow_first_look)
        m.setattr(_secrets, "_skeleton", lambda t: _secrets._GAPS.sub("", t))
        m.setattr(_secrets, "_glance", lambda t, compiled: False)
        _slow_shapes(m)
        assert fast == (_secrets.redact(text),) * 2


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(noise=st.lists(st.text(ALPHABET + ",[]", max_size=25), min_size=1, max_size=5),
       picks=st.lists(st.integers(0, 10_000), max_size=4))
def test_the_glance_calls_clean_only_what_redaction_leaves_alone(noise, picks, keyed_plain):
    """`nothing_to_redact` on store-like batches (JSON lines) and on mixed texts: True only where `redact`, with
    every first look off, changes nothing; and it does say True for ordinary lines (the store's fast path)."""
    pool = corpus()
    lines = [json.dumps({"kind": "message", "text": n, "more": [pool[p % len(pool)] for p in picks[:i]]})
             for i, n in enumerate(noise)]
    mixed = "".join(n + (pool[picks[i] % len(pool)] if i < len(picks) else "") for i, n in enumerate(noise))
    for text in ("\n".join(lines), mixed, ",".join(noise)):
        if text.isascii() and _secrets.nothing_to_redact(text.encode()):
            assert _redacted_slowly(text) == text


@pytest.fixture
def keyed_plain(monkeypatch, registered_secrets):
    """Keys without a gap (a quote, a space): the glance looks only then."""
    monkeypatch.setenv("OPENAI_API_KEY", ENV_KEY)
    monkeypatch.delenv("DB_PASSWORD", raising=False)
    _secrets.add_secret(KEY, "my_key")
    return _secrets._compiled()


def test_a_gap_holding_secret_turns_the_glance_off(keyed):
    assert not _secrets.nothing_to_redact(b'{"kind":"message","text":"hello"}')


def test_the_glance_passes_ordinary_lines_and_stops_at_every_carrier(keyed_plain):
    line = '{"kind":"call","id":"call_71d7eaa8001101","arguments":{"a":1,"b":2},"duration":0.00018}'
    assert _secrets.nothing_to_redact(line.encode()) and _secrets.nothing_to_redact(line.encode())
    for text in corpus():
        if text.isascii() and _redacted_slowly(text) != text:
            assert not _secrets.nothing_to_redact(json.dumps({"kind": "message", "text": text}).encode()), text
            assert not _secrets.nothing_to_redact(text.encode()), text


def _redacted_slowly(text: str) -> str:
    with pytest.MonkeyPatch.context() as m:
        m.setattr(_secrets, "_may_hold_secret", lambda text, runs, heads: True)
        m.setattr(_secrets, "_glance", lambda t, compiled: False)
        _slow_shapes(m)
        return _secrets.redact(text)


def test_a_number_is_looked_through_when_a_secret_holds_six_digits_in_a_row(registered_secrets):
    text = '{"duration":0.00018678999913390726,"time":1796333562.0288522}'
    assert _secrets.redact(text) == text
    _secrets.add_secret("pin-8675309-x", "pin")  # its head `pin-86` is not all digits, its pieces are none
    _secrets.add_secret("7333562042", "numeric")
    assert _first_look._clean_runs[0] is not None and "[REDACTED:numeric" in _secrets.redact(text.replace(
        "1796333562", "1773335620429"))


def test_a_run_found_clean_is_looked_at_again_once_a_secret_it_holds_is_known(registered_secrets):
    later = "Wq3Rt5Yu7Io9Pa1Sd"
    text = f'{{"text":"x{later}x"}}'
    assert _secrets.redact(text) == text  # its run is remembered clean, for the secrets known then
    _secrets.add_secret(later, "later_key")
    assert later not in _secrets.redact(text) and "[REDACTED:later_key" in _secrets.redact(text)


@pytest.fixture
def bare(registered_secrets, monkeypatch):
    """No secret known (no credential variable, nothing registered): the glance reads numbers as 0s."""
    for name, value in list(os.environ.items()):
        if _secrets.SECRET_VARIABLE_PATTERN.search(name) or _secrets._parts(value):
            monkeypatch.delenv(name)
    monkeypatch.setattr(_secrets, "_registered", {})
    monkeypatch.setattr(_secrets, "_cache", None)
    compiled = _secrets._compiled()
    assert compiled[5] is None
    return compiled


def test_with_no_secret_known_a_part_that_differs_only_in_its_numbers_is_clean_from_memory(bare):
    line = '{"kind":"call","id":"call_71d7eaa8001101","arguments":{"a":1,"b":2},"duration":0.00018}'
    assert _secrets.nothing_to_redact(line.encode())
    clean = _first_look._glanced[2]
    remembered = set(clean)
    assert _first_look._glanced[7] is not None  # numbers are read as 0s
    for other in ("call_71d7eaa8001102", "call_50d3eaa9007734"):
        changed = line.replace("call_71d7eaa8001101", other).replace("0.00018", "0.93714").replace('"a":1', '"a":7')
        assert _secrets.nothing_to_redact(changed.encode())
    assert clean == remembered  # nothing new was looked at: every part was known clean, numbers read as 0s
    assert _secrets.nothing_to_redact(line.replace('"a":1', '"a":785').encode())  # (other lengths: looked at)
    assert clean != remembered


def test_with_no_secret_known_a_needle_beside_numbers_is_still_found(bare):
    line = '{"kind":"message","text":"run 12 of 40"}'
    assert _secrets.nothing_to_redact(line.encode())
    for text in ("run 12 of sk-40", "run 12 of 40 ghp_1234567890", "token=12 of 40", "run 12://40"):
        assert not _secrets.nothing_to_redact(line.replace("run 12 of 40", text).encode()), text


def test_a_secret_whose_pieces_hold_digits_turns_the_reading_of_numbers_off(bare, monkeypatch):
    line = '{"kind":"message","text":"order 1234567890 and 7654321"}'
    assert _secrets.nothing_to_redact(line.encode())
    _secrets.add_secret("8675309142", "numeric")  # a secret of digits: its head `867530` is a number
    assert _first_look._glance_state(_secrets._compiled())[7] is None
    secret_line = line.replace("1234567890", "8675309142")  # the part seen clean when digits were 0s
    assert not _secrets.nothing_to_redact(secret_line.encode())
    assert "[REDACTED:numeric]" in _secrets.redact(secret_line)


def test_control_numbers_read_as_0s_with_a_secret_of_digits_would_let_it_through(bare, monkeypatch):
    line = '{"kind":"message","text":"order 1234567890 and 7654321"}'
    assert _secrets.nothing_to_redact(line.encode())
    _secrets.add_secret("8675309142", "numeric")
    state = _first_look._glance_state(_secrets._compiled())
    monkeypatch.setattr(_first_look, "_glanced", (*state[:2], {b"{kind:message", b"text:order0000000000and0000000}"},
                                               *state[3:7], bytes.maketrans(b"123456789", b"000000000")))
    monkeypatch.setattr(_first_look, "_glance_state", lambda compiled: _first_look._glanced)
    assert _secrets.nothing_to_redact(line.replace("1234567890", "8675309142").encode())  # wrongly clean


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(noise=st.lists(st.text(ALPHABET + ",[]", max_size=25), min_size=1, max_size=5),
       picks=st.lists(st.integers(0, 10_000), max_size=4), numbers=st.lists(st.integers(0, 10**12), max_size=4))
def test_with_no_secret_known_the_glance_calls_clean_only_what_redaction_leaves_alone(noise, picks, numbers, bare):
    """As `test_the_glance_calls_clean_only_what_redaction_leaves_alone`, numbers read as 0s: every batch once as it
    is and once with other numbers (what the glance may then answer from memory)."""
    pool = corpus()
    lines = [json.dumps({"kind": "message", "text": n, "n": numbers, "more": [pool[p % len(pool)] for p in picks[:i]]})
             for i, n in enumerate(noise)]
    mixed = "".join(n + (pool[picks[i] % len(pool)] if i < len(picks) else "") for i, n in enumerate(noise))
    for text in ("\n".join(lines), mixed, ",".join(noise)):
        for variant in (text, text.translate(str.maketrans("0123456789", "9876543210"))):
            if variant.isascii() and _secrets.nothing_to_redact(variant.encode()):
                assert _redacted_slowly(variant) == variant


def _long_text(tag: str) -> str:
    return " ".join(f"row{i} {tag} value{i * 7919 % 1000}" for i in range(300))  # about 6,000 characters


def _looked_at(monkeypatch) -> list[int]:
    """The lengths of the texts redaction looks through (from now on in this test)."""
    looked: list[int] = []
    slow = _secrets._spans
    monkeypatch.setattr(_secrets, "_spans", lambda text, *a: looked.append(len(text)) or slow(text, *a))
    return looked


def test_a_long_string_sent_again_is_not_looked_at_again_and_comes_back_as_itself(registered_secrets, monkeypatch):
    looked = _looked_at(monkeypatch)
    body = {"messages": [{"role": "tool", "content": _long_text("alpha")}, {"role": "user", "content": "short"}]}
    assert _secrets.redact_value(body, shapes=False) is body
    assert [n for n in looked if n >= _secrets._REMEMBERED] == [len(body["messages"][0]["content"])]
    looked.clear()
    again = {"messages": [{"role": "tool", "content": "".join(_long_text("alpha"))}, {"role": "user", "content": "short"}]}
    assert again["messages"][0]["content"] is not body["messages"][0]["content"]  # equal, another object
    assert _secrets.redact_value(again, shapes=False) is again  # nothing changed: the same object back
    assert [n for n in looked if n >= _secrets._REMEMBERED] == []


def test_a_result_screened_clean_is_not_looked_at_again_in_the_bodies_that_carry_it(registered_secrets, monkeypatch):
    looked = _looked_at(monkeypatch)
    result = _long_text("beta")
    assert _secrets.redact(result) is result  # the gate: credential shapes looked for too
    assert _secrets.redact_value({"content": result}, shapes=False)["content"] is result
    assert [n for n in looked if n >= _secrets._REMEMBERED] == [len(result)]
    # the other way, or with secrets in it, a body's look does not stand for the gate's
    other = _long_text("gamma")
    assert _secrets.redact_value([other], shapes=False)[0] is other and _secrets.redact(other) is other
    assert [n for n in looked if n >= _secrets._REMEMBERED] == [len(result), len(other), len(other)]


def test_a_remembered_text_with_a_secret_is_redacted_the_same_and_spares_what_it_is_asked_to(registered_secrets):
    secret = "Pq7Rs9Tu1Vw3Xy5Za"
    _secrets.add_secret(secret, "remembered_key")
    text = _long_text(secret)
    first = _secrets.redact(text)
    assert secret not in first and _secrets.redact(text) == first == _secrets.redact_value(text)
    assert _secrets.redact(text, spare=(secret,)) == text  # an echo of the caller's own words is spared


def test_a_long_string_remembered_clean_is_looked_at_again_once_a_secret_in_it_is_known(registered_secrets):
    later = "Wq3Rt5Yu7Io9Pa1SdLong"
    text = _long_text(later)
    for shapes in (True, False):
        assert _secrets.redact_value([text], shapes=shapes)[0] is text
    _secrets.add_secret(later, "later_key")
    for shapes in (True, False):
        out = _secrets.redact_value([text], shapes=shapes)[0]
        assert later not in out and "[REDACTED:later_key" in out
        assert _secrets.redact_value([text], shapes=shapes)[0] == out  # remembered redacted: the same answer
        if shapes:
            assert out == _secrets.redact(text)


def test_what_is_remembered_is_bounded_and_the_answers_stay_right(registered_secrets, monkeypatch):
    monkeypatch.setattr(_secrets, "_MEMO_CHARS", 20_000)
    secret = "Hk4Lm8Np2Qr6St0Vw3"
    _secrets.add_secret(secret, "bounded_key")
    texts = [_long_text(f"t{i}" + (secret if i % 3 == 0 else "")) for i in range(12)]
    for _ in range(2):
        for i, text in enumerate(texts):
            out = _secrets.redact_value(text)
            assert (secret not in out and "[REDACTED:bounded_key" in out) if i % 3 == 0 else out is text
            assert _secrets._memo_chars <= 20_000 and _secrets._memo_chars == sum(len(k[1]) for k in _secrets._memo)


def test_an_answer_stored_late_for_secrets_since_changed_is_not_used(registered_secrets):
    """Another thread looked a text through with the secrets of before and stores its answer after they changed:
    the answer is kept with the secrets it was found with, and does not answer for the new ones."""
    later = "Mn5Bv7Cx9Zl2Kj4Hg"
    text = _long_text(later)
    before = _secrets._compiled()
    _secrets.add_secret(later, "late_key")
    assert _secrets._compiled() is not before
    _secrets.redact(_long_text("now"))  # the memory is the new secrets' now
    assert _secrets._memo_for is _secrets._compiled()
    _secrets._memo[(True, text)] = (before, [])  # what the late store leaves: clean, for the secrets of before
    assert "[REDACTED:late_key" in _secrets.redact(text)
    assert "[REDACTED:late_key" in _secrets.redact_value([text], shapes=False)[0]


def _short_looked_at(monkeypatch) -> list[str]:
    """The texts shorter than `_REMEMBERED` that redaction looks through (from now on in this test)."""
    looked: list[str] = []
    slow = _secrets._spans
    monkeypatch.setattr(_secrets, "_spans", lambda text, *a: (len(text) < _secrets._REMEMBERED and looked.append(text))
                        or slow(text, *a))
    return looked


def _body(turns: int) -> dict:
    """A request body as a run sends it: the whole conversation again each turn (new objects each time)."""
    messages = [{"role": "user", "content": "add the numbers up"}]
    for i in range(turns):
        messages += [{"role": "assistant", "tool_calls": [{"id": f"call_{i:06d}", "type": "function",
                                                           "function": {"name": "add", "arguments": f'{{"a": {i}}}'}}]},
                     {"role": "tool", "tool_call_id": f"call_{i:06d}", "content": f"the sum is {i + 1}"}]
    return {"model": "gpt-4o-mini", "messages": messages, "max_tokens": 1000, "temperature": 0.5}


def test_a_body_looks_only_at_the_strings_it_did_not_send_before(registered_secrets, monkeypatch):
    # a run's requests cost what each turn added, not the square of the run's length
    looked = _short_looked_at(monkeypatch)
    first = _body(30)
    assert _secrets.redact_value(first, shapes=False) is first
    seen = len(looked)
    assert seen >= 60
    looked.clear()
    second = _body(31)  # equal strings, other objects, and one turn more
    assert _secrets.redact_value(second, shapes=False) is second  # nothing changed: the same object back
    assert sorted(looked) == sorted({'{"a": 30}', "call_000030", "the sum is 31"}), looked


def test_a_short_string_remembered_clean_is_redacted_once_a_secret_in_it_is_known(registered_secrets):
    later = "Zx8Cv6Bn4Mq2Wl"
    body = {"messages": [{"role": "tool", "content": f"the token is {later}"}]}
    for shapes in (True, False):
        assert _secrets.redact_value(body, shapes=shapes) is body
    _secrets.add_secret(later, "short_later_key")
    for shapes in (True, False):
        for _ in range(2):  # and remembered redacted
            out = _secrets.redact_value(body, shapes=shapes)["messages"][0]["content"]
            assert later not in out and "[REDACTED:short_later_key" in out


def test_an_answer_for_short_strings_stored_late_for_secrets_since_changed_is_not_used(registered_secrets):
    """Another thread redacting a body with the secrets of before stores its answers in their memory, not in the
    new secrets' memory."""
    later = "Qw2Er4Ty6Ui8Op"
    text = f"a value: {later}"
    _secrets.redact_value(["warm"])
    before, memos = _secrets._short
    _secrets.add_secret(later, "short_late_key")
    assert "[REDACTED:short_late_key" in _secrets.redact_value([text])[0]
    memos[True][text] = text  # what the late thread leaves: clean, for the secrets of before
    assert _secrets._short[0] is not before
    assert "[REDACTED:short_late_key" in _secrets.redact_value([text])[0]


def test_the_memory_of_short_strings_is_bounded_and_the_answers_stay_right(registered_secrets, monkeypatch):
    monkeypatch.setattr(_secrets, "_SHORT_MEMO", 50)
    secret = "Rt7Yu9Io1Pa3Sd"
    _secrets.add_secret(secret, "short_bounded_key")
    texts = [f"row {i} " + (secret if i % 7 == 0 else "plain words") for i in range(200)]
    for _ in range(2):
        out = _secrets.redact_value(texts)
        for i, (text, got) in enumerate(zip(texts, out)):
            assert ("[REDACTED:short_bounded_key" in got and secret not in got) if i % 7 == 0 else got is text
        assert len(_secrets._short[1][True]) <= 50
    monkeypatch.setattr(_secrets, "_SHORT_MEMO", 10**6)
    monkeypatch.setattr(_secrets, "_SHORT_CHARS", 1000)
    for _ in range(2):
        out = _secrets.redact_value(texts)
        for i, (text, got) in enumerate(zip(texts, out)):
            assert ("[REDACTED:short_bounded_key" in got and secret not in got) if i % 7 == 0 else got is text
        assert _secrets._short[1][True].chars <= 1000 + 40


# The glance's named shapes: a credential's name is looked at only where a value could follow it. Mechanism: each
# part shape is declared once (`shapes._KEYED`: its names, the gap after a name, its separator; or
# `shapes._LITERAL`), its pattern is built from that, and the glance looks for each name followed by its separator.

def test_every_part_shape_is_declared_for_the_glance_and_built_from_its_declaration():
    for kind, pattern in _shapes._PART_PATTERNS.items():
        assert (kind in _shapes._KEYED) != (kind in _shapes._LITERAL), kind
        if kind in _shapes._KEYED:
            assert _shapes._named(kind) in pattern.pattern, kind
        else:
            assert _shapes._LITERAL[kind] in pattern.pattern, kind
    for kind, literal in _shapes._LITERAL.items():  # every match of it holds its literal
        matches = [m.group(0) for text in corpus() for m in _shapes._PART_PATTERNS[kind].finditer(text)]
        assert matches and all(literal in m for m in matches), kind


def test_a_named_shape_s_gap_holds_only_what_the_glance_leaves_out_and_its_names_read_the_same_in_lower_case():
    gaps = set(_first_look._ASCII_GAPS.decode("ascii"))
    ascii_chars = [chr(c) for c in range(128)]
    for kind, (names, gap, separator) in _shapes._KEYED.items():
        pairs = [a + b for a in ascii_chars for b in ascii_chars]
        for text in ["", *ascii_chars, *pairs]:
            if _shapes.re.fullmatch(gap, text):
                assert set(text) <= gaps, (kind, text)
        assert all(c not in gaps and c != "," for c in ascii_chars if _shapes.re.fullmatch(separator, c)), kind
        literal = names.replace("\\-", "-")  # its only escape; the rest is letters, `_`, `-` and `|?[]()`
        assert "\\" not in literal and not ((set(literal) - set("|?[]()")) & (gaps | {","})), kind


@pytest.mark.parametrize("line", [
    '{"usage":{"input_tokens":190,"output_tokens":12,"cache_read_tokens":0}}',
    '{"text":"the token limit was reached","max_tokens":4096}',
    '{"name":"read_secret_file","description":"reads the password policy"}',
])
def test_a_credential_s_name_with_no_separator_after_it_is_clean_at_a_glance(line, bare):
    assert _secrets.nothing_to_redact(line.encode()) and _redacted_slowly(line) == line


def test_a_credential_s_name_followed_by_its_separator_is_looked_at(bare):
    for text in SHAPES:
        if _redacted_slowly(text) != text:
            for carrier in (text, json.dumps({"kind": "message", "text": text}), text.lower(), text.upper()):
                if carrier.isascii():
                    assert not _secrets.nothing_to_redact(carrier.encode()), carrier


NAMED = ["token", "tokens", "input_tokens", "password", "Password", "PASSWORD", "api_key", "Api-Key", "apikey",
         "AUTH", "auth", "_KEY", "access_key", "secret", "client_secret", "sig", "PWD", "credentials",
         "Authorization", "passphrase", "private_key"]
GLUE = [":", "=", " ", '"', "'", ": ", " = ", '":"', '": "', "\\\"", ",", "\n", "export ", ";", "b'", "\t"]
VALUES = ["hunter2x!", "Qm7Xv2Lp9R", "120", "0.5", "abcdef", "${TOKEN}", "x", "Bearer abcdefgh12345678"]


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(parts=st.lists(st.one_of(st.sampled_from(NAMED), st.sampled_from(GLUE), st.sampled_from(VALUES)),
                      min_size=1, max_size=9))
def test_the_glance_calls_clean_only_what_redaction_leaves_alone_around_credential_names(parts, bare):
    """Texts made of credential names, what may sit between a name and a value, and values: the glance's answer
    True (clean) only where `redact`, with every first look off, changes nothing; as text and as a store line."""
    text = "".join(parts)
    for variant in (text, json.dumps({"kind": "message", "text": text}), text.upper()):
        if _secrets.nothing_to_redact(variant.encode()):
            assert _redacted_slowly(variant) == variant, variant


def test_control_a_glance_without_a_named_shape_misses_it(bare, monkeypatch):
    line = json.dumps({"kind": "message", "text": "token: 'Qm7Xv2Lp9R'"})
    assert not _secrets.nothing_to_redact(line.encode())
    monkeypatch.setattr(_shapes, "_KEYED", {k: v for k, v in _shapes._KEYED.items() if k != "credential-field"})
    monkeypatch.setattr(_first_look, "_glanced", (None,) * 8)
    assert _secrets.nothing_to_redact(line.encode()) and _redacted_slowly(line) != line  # wrongly clean


def test_each_named_shape_s_fragment_is_spelled_whole():
    """`shapes.spelled` (what the glance looks for) gives every text the fragment matches and nothing else: each
    spelling matches it, and no text one edit away from a spelling matches it unless it is a spelling too."""
    for kind, (names, _, separator) in _shapes._KEYED.items():
        for fragment in (names, separator):
            spellings = set(_shapes.spelled(fragment))
            assert spellings and all(_shapes.re.fullmatch(fragment, s) for s in spellings), kind
            near = {s[:i] + c + s[j:] for s in spellings for i in range(len(s) + 1) for j in (i, i + 1)
                    for c in ("", "_", "-", "s", "S", ":", "=")}
            assert {t for t in near if _shapes.re.fullmatch(fragment, t)} <= spellings, kind
    with pytest.raises(ValueError):
        _shapes.spelled(r"token\w*")  # a fragment it cannot spell whole is refused, not spelled short
