"""File names that pass for something else in a file tool's answer.

Written from the outside: `list_files` answers one entry a line, `grep` one match a line. A file named with
a line break, a control or invisible character, or the very text the answer's forms use (`  (12 bytes)`,
` -> target`) made extra entries and matches appear (a `.env` that is not there, a match in a file that
holds none). The defence is one form (`_filetext.shown_path`): a name that is not plain is written in
double quotes with escapes, so each entry is one line and reads as what it is.
"""

from __future__ import annotations

import pytest

from nbagent.toolbox import _filetext

from .conftest import call, run_agent, text_of

pytestmark = pytest.mark.timeout(60)

NAMES = {
    "newline": "report.md\n.env  (42 bytes)",
    "carriage_return": "data.csv\r.ssh-id_rsa",
    "line_separator": "a\u2028b.txt",
    "invisible": "no\u200btes.md",
    "fake_size": "a.txt  (1.0 KB)",
    "fake_link": "b.txt -> (outside the workspace)",
    "leading_quote": '"quoted".txt',
    "trailing_space": "space ",
}


@pytest.fixture
def named(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    for name in NAMES.values():
        (ws / name).write_text("needle\n")
    (ws / "plain.txt").write_text("needle\n")
    return ws


def test_list_files_shows_one_line_per_entry(named):
    run = run_agent(named, call("list_files", pattern="*"))
    lines = text_of(run.calls[0]).splitlines()
    assert len(lines) == len(NAMES) + 1, lines
    assert not any(line.startswith((".env", ".ssh")) for line in lines)
    assert "plain.txt  (7 bytes)" in lines  # control: a plain name is shown as it is
    assert '"report.md\\n.env  (42 bytes)"  (7 bytes)' in lines


def test_grep_shows_one_line_per_match(named):
    run = run_agent(named, call("grep", pattern="needle", path="."))
    lines = text_of(run.calls[0]).splitlines()
    assert len(lines) == len(NAMES) + 1, lines
    assert "plain.txt:1: needle" in lines  # control
    assert all(line.startswith('"') for line in lines if line != "plain.txt:1: needle")


@pytest.mark.parametrize("name", sorted(NAMES))
def test_every_name_that_is_not_plain_is_quoted(name):
    shown = _filetext.shown_path(NAMES[name])
    assert shown.startswith('"') and shown.endswith('"') and "\n" not in shown and "\r" not in shown


def test_the_form_off_lets_a_name_make_an_entry(named, monkeypatch):
    monkeypatch.setattr("nbagent.toolbox._files.shown_path", lambda rel: rel)
    run = run_agent(named, call("list_files", pattern="*"))
    assert any(line.startswith(".env") for line in text_of(run.calls[0]).splitlines())
