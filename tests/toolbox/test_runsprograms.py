"""The table of programs that run others (`_runsprograms`), the sandbox's secret places and Landlock's
tree rules, and redaction by the piece: the units behind tests/security/test_sandbox_secrets.py."""

from __future__ import annotations

import base64
import os
from pathlib import Path

import pytest

from nbagent.safety import sandbox as _sandbox
from nbagent.safety import secrets as _secrets
from nbagent.safety.sandbox_linux import _tree_except
from nbagent.toolbox._runsprograms import unseen, unseen_assignment


@pytest.mark.parametrize("script,runs", [
    ("s/a/b/g", False), ("1d", False), ("/x/!d;s|a|b|2p", False), ("$p", False), ("y/abc/xyz/", False),
    ("1e id", True), ("s/a/id/e", True), ("s/a/b/w out", True), ("r /etc/passwd", True), ("1,3{s/a/b/;p}", False),
    (":a;N;ba", True),  # labels and branches: not in the grammar, so not shown to keep a rule
])
def test_sed_scripts_are_read_by_a_small_grammar(script, runs):
    assert (unseen(["sed", "-n", script, "f"]) is not None) is runs
    assert (unseen(["sed", "-e", script, "f"]) is not None) is runs


@pytest.mark.parametrize("words", [["tar", "--to-c=x", "-xf", "a"], ["tar", "xIf", "p", "a"], ["git", "-c", "core.pager=x", "log"],
                                   ["git", "--config-env", "core.pager=X", "log"], ["sort", "--compress-p=x"], ["git", "submodule", "foreach", "x"],
                                   ["git", "fetch", "--upload-pack=x"], ["ssh", "h"], ["xargs"], ["gawk", "1"], ["python3.12", "x.py"]])
def test_option_abbreviations_and_bundles_are_caught(words):
    assert unseen(words) is not None


@pytest.mark.parametrize("words", [["tar", "-czf", "a", "b"], ["git", "-c", "user.name=x", "commit"], ["git", "status"],
                                   ["sort", "-k2", "f"], ["gcc", "-DBUILD", "a.c"], ["python3", "--version"], ["ls", "-la"]])
def test_control_ordinary_uses_are_shown(words):
    assert unseen(words) is None


def test_variables_on_the_line():
    assert unseen_assignment("PATH=.") and unseen_assignment("LD_PRELOAD=x", "ls")
    assert unseen_assignment("GIT_SSH_COMMAND=x", "git") and unseen_assignment("FOO=1", None)
    assert unseen_assignment("FOO=1", "ls") is None and unseen_assignment("LANG=C", "git") is None


def test_secret_places_cover_credential_stores_and_the_jupyter_runtime(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(tmp_path / "rt"))
    places = _sandbox.secret_places()
    for rel in (".ssh", ".aws", ".config/gcloud", ".netrc", ".docker", ".config/nbagent", ".local/share/nbagent", "rt",
                ".local/share/jupyter/runtime"):
        assert str(tmp_path / rel) in places
    assert _sandbox._holds(str(tmp_path / ".local"), places) and not _sandbox._holds(str(tmp_path / "proj"), places)


def test_landlock_tree_rules_leave_out_what_is_excluded(tmp_path):
    for rel in ("a/b/secret", "a/b/ok", "a/c", "d"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("x")
    os.symlink(tmp_path / "a" / "b" / "secret", tmp_path / "link")
    rules = dict(_tree_except(str(tmp_path), [str(tmp_path / "a" / "b" / "secret")]))
    assert rules[str(tmp_path)] is False and rules[str(tmp_path / "a")] is False and rules[str(tmp_path / "a" / "b")] is False
    assert rules[str(tmp_path / "a" / "b" / "ok")] and rules[str(tmp_path / "a" / "c")] and rules[str(tmp_path / "d")]
    assert str(tmp_path / "a" / "b" / "secret") not in rules and str(tmp_path / "link") not in rules
    assert _tree_except(str(tmp_path), []) == [(str(tmp_path), True)]
    assert _tree_except(str(tmp_path / "a"), [str(tmp_path)]) == []  # inside an excluded place: nothing


KEY = "Zq8vN2xPmL4kR7tY1wB9cE3hJ6uA0sD5"


@pytest.mark.parametrize("form", [KEY, KEY[:6], KEY[9:20], KEY[::-1], KEY[20:][::-1], KEY.encode().hex(),
                                  base64.b64encode(KEY.encode()).decode(), base64.b64encode(b"ab" + KEY.encode()).decode(),
                                  base64.urlsafe_b64encode(b"?" + KEY.encode()).decode()])
def test_redaction_finds_pieces_reversed_and_encoded(form, monkeypatch):
    monkeypatch.setenv("MY_SERVICE_TOKEN", KEY)
    out = _secrets.redact(f"before {form} after")
    assert "REDACTED:MY_SERVICE_TOKEN" in out and out.startswith("before ") and out.endswith(" after")
    assert KEY[:6] not in out and KEY[-6:] not in out


def test_control_ordinary_text_and_short_pieces_are_left_alone(monkeypatch):
    monkeypatch.setenv("MY_SERVICE_TOKEN", KEY)
    text = "git log --oneline shows 1f2e3d4 and a DataFrame of 10 rows"
    assert _secrets.redact(text) == text
    assert _secrets.redact(f"x {KEY[:5]} y") == f"x {KEY[:5]} y"  # below PIECE_LENGTH: the tools keep it unreachable


def test_short_secrets_are_not_matched_by_the_piece(monkeypatch):
    monkeypatch.setenv("DB_PASSWORD", "postgres-pw")  # 11 characters: whole only
    assert _secrets.redact("the postgres server") == "the postgres server"
    assert "REDACTED" in _secrets.redact("pw is postgres-pw")


def test_the_hidden_scan_raises_on_an_unreadable_top(tmp_path, monkeypatch):
    monkeypatch.setattr(_sandbox, "HIDDEN_SCAN_LIMIT", 0)
    (tmp_path / "x").write_text("x")
    with pytest.raises(_sandbox.HiddenScanError):
        _sandbox.hidden_paths(Path(tmp_path), lambda rel, real: False)
