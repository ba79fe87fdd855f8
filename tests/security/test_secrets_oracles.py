"""Credentials in workspace files, taken apart by read-only commands: pieces too small for redaction to
recognise (`cut -c1-5`), or answers to questions about them (`grep -c '^token=sk-a'`).

From the outside: the README says read-only commands run without asking and keys never reach the model.
The defence (`_secretreads`): a command that does not print files whole is not auto-allowed over a
file that holds a known secret's value. Turned off, the pieces reach the model.
"""

from __future__ import annotations

import pytest

from nbagent.toolbox import _readonly

from .conftest import Recorder, everything_model_saw, run_agent, sh, text_of

pytestmark = pytest.mark.timeout(60)

KEY = "sk-oracle-Zq8vN2xPmL4kR7tY1wB9cE3hJ6uA0sD5"

TAKE_APART = {
    "cut_chars": "cut -c7-11 settings.ini",
    "cut_bytes": "cut -b7-11 settings.ini",
    "cut_fields": "cut -d- -f2 settings.ini",
    "head_bytes": "head -c 11 settings.ini",
    "tail_bytes": "tail -c 6 settings.ini",
    "grep_only_matching": "grep -o 'sk-o.\\{3\\}' settings.ini",
    "grep_count_oracle": "grep -c '^token=sk-oracle-Z' settings.ini",
    "grep_recursive_oracle": "grep -rl 'sk-oracle-Zq' .",
    "cmp_oracle": "cmp settings.ini notes.md",
    "sort_oracle": "sort settings.ini notes.md",
    "uniq_window": "uniq -w 12 settings.ini",
}


@pytest.fixture
def key_ws(ws, monkeypatch):
    monkeypatch.setenv("MY_SERVICE_TOKEN", KEY)
    (ws / "settings.ini").write_text(f"token={KEY}\n")
    return ws


@pytest.mark.parametrize("name", sorted(TAKE_APART))
def test_a_command_that_takes_a_key_apart_asks_first(key_ws, name):
    asked = Recorder(False)
    run = run_agent(key_ws, [sh(TAKE_APART[name]), sh("cut -c1-5 notes.md"), sh("cat settings.ini")], approver=asked)
    assert [r.arguments["command"] for r in asked.asked] == [TAKE_APART[name]]
    assert "hello" in text_of(run.calls[1])  # control: the same programs run unasked on other files
    assert "token=" in text_of(run.calls[2]) and KEY not in everything_model_saw(run)  # control: cat, redacted


@pytest.mark.parametrize("name", ["cut_chars", "head_bytes", "grep_count_oracle"])
def test_defence_off_the_pieces_reach_the_model(key_ws, name, monkeypatch):
    monkeypatch.setattr(_readonly, "holder_of_secret", lambda *a, **k: None)
    asked = Recorder(False)
    run = run_agent(key_ws, [sh(TAKE_APART[name])], approver=asked)
    assert asked.asked == [] and run.calls[0].status == "ok"
    out = run.calls[0].result.details.stdout
    assert {"cut_chars": "sk-or", "head_bytes": "sk-or", "grep_count_oracle": "1"}[name] in out
