"""The person's trust store and session key (nbagent.safety.trust), the protected-path list (nbagent.safety.protected)
and signed lines (nbagent.safety.signing), as units."""

from __future__ import annotations

import os
import stat

import pytest

from nbagent.safety import protected, signing, trust


def test_the_key_is_private_made_once_and_read_back(tmp_path, monkeypatch):
    monkeypatch.setenv("NBAGENT_CONFIG_DIR", str(tmp_path / "cfg"))
    assert trust.session_key(create=False) is None
    key = trust.session_key()
    path = tmp_path / "cfg" / "session.key"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and stat.S_IMODE((tmp_path / "cfg").stat().st_mode) == 0o700
    assert len(key) == 32 and trust.session_key() == key and trust.session_key(create=False) == key
    path.write_text("not hex")
    with pytest.raises(OSError, match="damaged"):
        trust.session_key()


def test_trust_is_per_real_path_and_content(tmp_path, monkeypatch):
    monkeypatch.setenv("NBAGENT_CONFIG_DIR", str(tmp_path / "cfg"))
    target = tmp_path / "ws" / ".mcp.json"
    target.parent.mkdir()
    target.write_text("{}")
    os.symlink(target, tmp_path / "link.json")
    digest = trust.content_digest(b"{}")
    assert not trust.is_trusted(target, digest)
    trust.trust(tmp_path / "link.json", digest)  # recorded for the real path
    assert trust.is_trusted(target, digest) and not trust.is_trusted(target, trust.content_digest(b"{ }"))
    trust.trust(target, trust.content_digest(b"{ }"))  # a new content replaces the old trust
    assert not trust.is_trusted(target, digest)
    assert stat.S_IMODE((tmp_path / "cfg" / "trusted.json").stat().st_mode) == 0o600
    assert trust.forget(target) == 1 and trust.trusted_entries() == []


def test_an_unreadable_store_trusts_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("NBAGENT_CONFIG_DIR", str(tmp_path))
    trust.trust(tmp_path / "x", "d")
    (tmp_path / "trusted.json").write_text("{broken")
    with pytest.warns(UserWarning, match="cannot be read"):
        assert not trust.is_trusted(tmp_path / "x", "d")


@pytest.mark.parametrize("name,expected", [(".GIT", ".git"), (".git.", ".git"), (".git ", ".git"),
                                           (".g\u200bit", ".git"), (".ｇｉｔ", ".git"), (".mcp.json::$DATA", ".mcp.json"),
                                           ("notes.md", "notes.md")])
def test_names_are_seen_as_file_systems_see_them(name, expected):
    assert protected.normalize_name(name) == expected


@pytest.mark.parametrize("path", ["notes.md", "src/git.py", "docs/vscode.md", "my.mcp.json.bak",
                                  "jupyter_notes.py", "sub/envrc.txt"])
def test_ordinary_files_are_not_protected(path):
    assert protected.protected_reason([path]) is None


def test_a_hidden_file_asks_whatever_its_name():
    """Decided by kind: a dot-file is where programs keep the settings they load (`.gitignore` included)."""
    assert "hidden" in protected.protected_reason([".gitignore"])


def test_signed_lines_verify_in_order_only():
    keyed, key = signing.signer(b"k" * 32), b"k" * 32
    data, end = signing.seal(keyed, signing.START, [b'{"a":1}', b'{"b":2}'])
    first, second = data.split(b"\n")[:2]
    body, chain = signing.unseal(key, signing.START, first)
    assert body == b'{"a":1}' and signing.unseal(key, chain, second)[1] == end
    assert signing.unseal(key, signing.START, second) is None  # out of place
    assert signing.unseal(b"other" * 8, signing.START, first) is None  # another key
    assert signing.unseal(key, signing.START, first.replace(b"1", b"2", 1)) is None  # edited
    assert signing.unseal(key, signing.START, b'{"a":1}') is None and not signing.has_mac(b'{"a":1}')
