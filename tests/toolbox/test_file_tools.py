"""read_file, list_files, grep, write_file, edit_file: normal use and hostile input, through an Agent."""

from __future__ import annotations

import asyncio
import io
import subprocess
from pathlib import Path

import pytest

from nbagent import Agent, AssistantMessage, ImageBlock, ScriptedModel, ToolCall, toolbox
from nbagent.toolbox import FileChange, FileContent, GrepResult, _grep

from tests.toolbox.support import Runner, tool_named


# --------------------------------------------------------------------------------------------------
# read_file
# --------------------------------------------------------------------------------------------------
def test_read_file_numbers_lines(runner: Runner) -> None:
    rec = runner.call("read_file", path="notes.txt")
    assert rec.status == "ok"
    assert rec.result.text == "     1\talpha\n     2\tbeta\n     3\tgamma"
    assert isinstance(rec.details, FileContent)
    assert rec.details.text == "alpha\nbeta\ngamma\n"
    assert rec.details.total_lines == 3
    assert rec.label == "Read lines 1-3 of notes.txt"


def test_read_file_ranges_say_how_to_read_on(runner: Runner, ws: Path) -> None:
    (ws / "long.txt").write_text("".join(f"line {i}\n" for i in range(1, 101)))
    rec = runner.call("read_file", path="long.txt", offset=10, limit=5)
    lines = rec.result.text.splitlines()
    assert lines[0] == "    10\tline 10"
    assert lines[4] == "    14\tline 14"
    assert lines[-1] == "[long.txt: lines 10-14 of 100; read on with offset=15]"
    tail = runner.call("read_file", path="long.txt", offset=-3)
    assert tail.result.text.splitlines()[:3] == ["    98\tline 98", "    99\tline 99", "   100\tline 100"]


def test_read_file_past_the_end_and_empty_files(runner: Runner, ws: Path) -> None:
    rec = runner.call("read_file", path="notes.txt", offset=50)
    assert rec.status == "error" and "past its end" in rec.result.text
    (ws / "empty.txt").write_text("")
    assert runner.call("read_file", path="empty.txt").result.text == "empty.txt is empty."


def test_read_file_cuts_very_long_lines(runner: Runner, ws: Path) -> None:
    (ws / "wide.txt").write_text("x" * 50_000 + "\nshort\n")
    text = runner.call("read_file", path="wide.txt").result.text
    assert "line cut: 50,000 bytes" in text
    assert len(text) < 3000
    assert text.endswith("     2\tshort")


def test_read_file_keeps_crlf_lines_and_replaces_bad_utf8(runner: Runner, ws: Path) -> None:
    (ws / "win.txt").write_bytes(b"one\r\ntwo\r\n\xffbad\n")
    text = runner.call("read_file", path="win.txt").result.text
    assert text.splitlines() == ["     1\tone", "     2\ttwo", "     3\t\ufffdbad"]


def test_read_file_detects_binary_files(runner: Runner, ws: Path) -> None:
    (ws / "table.parquet").write_bytes(b"PAR1\x00\x01\x02" * 100)
    rec = runner.call("read_file", path="table.parquet")
    assert rec.status == "error"
    assert "binary file" in rec.result.text and "pandas.read_parquet" in rec.result.text


def test_read_file_shows_images(runner: Runner, ws: Path) -> None:
    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", (20, 10), "red").save(buf, format="PNG")
    (ws / "chart.png").write_bytes(buf.getvalue())
    rec = runner.call("read_file", path="chart.png")
    assert rec.status == "ok"
    assert any(isinstance(b, ImageBlock) and b.mime_type == "image/png" for b in rec.result.content)


@pytest.mark.parametrize("path", ["../outside/secret.txt", "link_out", "dir_out/secret.txt", "/etc/passwd", "data", "nope"])
def test_read_file_refuses_what_it_cannot_read(runner: Runner, path: str) -> None:
    rec = runner.call("read_file", path=path)
    assert rec.status == "error"
    assert "TOP SECRET" not in rec.result.text and "root:" not in rec.result.text


def test_read_file_validates_its_limit(runner: Runner) -> None:
    rec = runner.call("read_file", path="notes.txt", limit=0)
    assert rec.status == "invalid_arguments"


# --------------------------------------------------------------------------------------------------
# list_files
# --------------------------------------------------------------------------------------------------
def test_list_files_top_level_by_default(runner: Runner) -> None:
    text = runner.call("list_files").result.text
    lines = text.splitlines()
    assert "data/" in lines
    assert any(line.startswith("notes.txt  (") for line in lines)
    assert "link_out -> (outside the workspace)" in lines
    assert "link_in -> notes.txt" in lines
    assert not any(line.startswith("data/a.csv") for line in lines)


def test_list_files_globs(runner: Runner, ws: Path) -> None:
    (ws / "data" / "deep").mkdir()
    (ws / "data" / "deep" / "c.csv").write_text("1\n")
    rec = runner.call("list_files", pattern="**/*.csv")
    assert rec.details == ["data/a.csv", "data/b.csv", "data/deep/c.csv"]
    assert runner.call("list_files", pattern="data/*.csv").details == ["data/a.csv", "data/b.csv"]
    assert "No files match" in runner.call("list_files", pattern="*.xlsx").result.text


def test_list_files_never_lists_through_links_out_or_dot_git(runner: Runner, ws: Path) -> None:
    (ws / ".git").mkdir()
    (ws / ".git" / "config").write_text("[core]\n")
    found = runner.call("list_files", pattern="**").details
    assert "dir_out" in found and not any(p.startswith("dir_out/") for p in found)
    assert not any(p.startswith(".git/") for p in found)
    assert runner.call("list_files", pattern="dir_out/*").result.is_error


@pytest.mark.parametrize("pattern", ["../*", "/etc/*", "~/*", "data/../../*"])
def test_list_files_refuses_patterns_outside(runner: Runner, pattern: str) -> None:
    rec = runner.call("list_files", pattern=pattern)
    assert rec.status == "error"


def test_list_files_hides_what_a_deny_rule_covers(tools, ws: Path) -> None:
    r = Runner(tools, mode="bypassPermissions", workspace=ws, rules=["deny: list_files(data/b.csv)"])
    found = r.call("list_files", pattern="**").details
    assert "data/a.csv" in found and "data/b.csv" not in found


# --------------------------------------------------------------------------------------------------
# grep
# --------------------------------------------------------------------------------------------------
def test_grep_prints_path_line_text(runner: Runner) -> None:
    rec = runner.call("grep", pattern=r"^x,y$")
    assert rec.result.text.splitlines()[:2] == ["data/a.csv:1: x,y", "data/b.csv:1: x,y"]
    assert isinstance(rec.details, GrepResult) and len(rec.details.matches) == 2


def test_grep_options(runner: Runner) -> None:
    assert runner.call("grep", pattern="BETA", ignore_case=True).result.text.splitlines()[0] == "notes.txt:2: beta"
    assert runner.call("grep", pattern="3", path="data").result.text == "data/b.csv:2: 3,4"
    assert runner.call("grep", pattern="3", glob="*.csv").details.matches[0].path == "data/b.csv"
    assert runner.call("grep", pattern="a", path="notes.txt").result.text.startswith("notes.txt:1: alpha")
    assert "No matches" in runner.call("grep", pattern="zzz").result.text
    limited = runner.call("grep", pattern=".", max_results=2)
    assert len(limited.details.matches) == 2 and "stopped at 2 matches" in limited.result.text


def test_grep_invalid_regex_is_an_error_for_the_model(runner: Runner) -> None:
    rec = runner.call("grep", pattern="(unclosed")
    assert rec.status == "error" and "invalid regular expression" in rec.result.text


def test_grep_skips_binary_files_and_links_out(runner: Runner, ws: Path) -> None:
    (ws / "blob.bin").write_bytes(b"SECRET\x00\x00binary")
    text = runner.call("grep", pattern="SECRET").result.text
    assert "blob.bin" not in text and "TOP SECRET" not in text
    assert "leading outside the workspace skipped" in text


@pytest.mark.parametrize("path", ["../outside", "/etc", "dir_out"])
def test_grep_refuses_paths_outside(runner: Runner, path: str) -> None:
    rec = runner.call("grep", pattern="SECRET", path=path)
    assert rec.status == "error" and "TOP SECRET" not in rec.result.text


def test_grep_skips_files_a_read_deny_rule_protects(tools, ws: Path) -> None:
    r = Runner(tools, mode="bypassPermissions", workspace=ws, rules=["deny: read_file(.env)"])
    rec = r.call("grep", pattern="API_KEY")
    assert "sk-123" not in rec.result.text
    assert "protected by deny rules" in rec.result.text


CATASTROPHIC = "(a+)+$"
"""Backtracks for ever on a long line of a's that does not end the way it wants."""


def test_grep_stops_a_pattern_that_runs_away(runner: Runner, ws: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_grep, "GREP_TIMEOUT", 0.5)
    (ws / "aaa.txt").write_text("a" * 60 + "b\n")
    rec = runner.call("grep", pattern=CATASTROPHIC, path="aaa.txt")
    assert rec.status == "error" and "took longer than 0.5 s on aaa.txt; simplify it" in rec.result.text
    control = runner.call("grep", pattern="(a+)+b$", path="aaa.txt")
    assert control.status == "ok" and "aaa.txt:1:" in control.result.text


async def test_stop_ends_a_runaway_grep_and_its_worker(ws: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (ws / "aaa.txt").write_text("a" * 60 + "b\n")
    workers: list[subprocess.Popen] = []
    real_popen = subprocess.Popen

    def recording_popen(*args, **kwargs):
        proc = real_popen(*args, **kwargs)
        workers.append(proc)
        return proc

    monkeypatch.setattr(_grep.subprocess, "Popen", recording_popen)
    monkeypatch.setattr(_grep, "GREP_TIMEOUT", 600.0)  # only Stop can end it
    model = ScriptedModel([AssistantMessage(tool_calls=[ToolCall(name="grep", arguments={
        "pattern": CATASTROPHIC, "path": "aaa.txt"})]), "done"])
    agent = Agent(model=model, tools=toolbox.all(workspace=ws), workspace=ws)
    run = agent.start("go")
    while not workers:
        await asyncio.sleep(0.01)
    run.cancel()
    await run
    assert run.calls[0].status == "cancelled"
    for _ in range(3000):  # the tool's thread notices the cancellation and kills the worker
        if workers[0].poll() is not None:
            break
        await asyncio.sleep(0.01)
    assert workers[0].poll() is not None


# --------------------------------------------------------------------------------------------------
# write_file
# --------------------------------------------------------------------------------------------------
def test_write_file_creates_with_parents(runner: Runner, ws: Path) -> None:
    rec = runner.call("write_file", path="notebooks/out/result.md", content="# Title\nbody\n")
    assert rec.status == "ok"
    assert rec.result.text == "Created notebooks/out/result.md (2 lines, 13 bytes)."
    assert (ws / "notebooks" / "out" / "result.md").read_text() == "# Title\nbody\n"
    assert isinstance(rec.details, FileChange) and rec.details.created


def test_write_file_over_a_file_returns_a_diff(runner: Runner, ws: Path) -> None:
    rec = runner.call("write_file", path="notes.txt", content="alpha\nBETA\ngamma\n")
    assert "-beta\n+BETA" in rec.result.text
    assert rec.details.created is False
    assert "already exactly" in runner.call("write_file", path="notes.txt", content="alpha\nBETA\ngamma\n").result.text


@pytest.mark.parametrize("path", ["../outside/new.txt", "dir_out/new.txt", "link_out", "/tmp/nbagent-pwned.txt", "data"])
def test_write_file_refuses_paths_outside(runner: Runner, outside: Path, path: str) -> None:
    rec = runner.call("write_file", path=path, content="pwned")
    assert rec.status == "error"
    assert (outside / "secret.txt").read_text() == "TOP SECRET\n"
    assert not (outside / "new.txt").exists()
    assert not Path("/tmp/nbagent-pwned.txt").exists()


def test_write_file_size_cap(runner: Runner) -> None:
    from nbagent.toolbox._edits import MAX_WRITE_BYTES

    rec = runner.call("write_file", path="big.txt", content="x" * (MAX_WRITE_BYTES + 1))
    assert rec.status == "error" and "at most" in rec.result.text


# --------------------------------------------------------------------------------------------------
# edit_file
# --------------------------------------------------------------------------------------------------
def test_edit_file_replaces_once_and_returns_a_diff(runner: Runner, ws: Path) -> None:
    rec = runner.call("edit_file", path="notes.txt", old="beta", new="BETA")
    assert rec.status == "ok"
    assert rec.result.text.splitlines()[0] == "Edited notes.txt: replaced 1 occurrence."
    assert "--- a/notes.txt" in rec.result.text and "-beta\n+BETA" in rec.result.text
    assert (ws / "notes.txt").read_text() == "alpha\nBETA\ngamma\n"
    assert rec.details.replacements == 1


def test_edit_file_missing_text_says_so(runner: Runner) -> None:
    rec = runner.call("edit_file", path="notes.txt", old="delta", new="x")
    assert rec.status == "error" and "was not found in notes.txt" in rec.result.text
    spaced = runner.call("edit_file", path="notes.txt", old="alpha  beta", new="x")
    assert "different whitespace" in spaced.result.text


def test_edit_file_ambiguous_text_says_where(runner: Runner, ws: Path) -> None:
    (ws / "dup.txt").write_text("x = 1\ny = 2\nx = 1\n")
    rec = runner.call("edit_file", path="dup.txt", old="x = 1", new="x = 3")
    assert rec.status == "error"
    assert "occurs 2 times" in rec.result.text and "lines 1, 3" in rec.result.text
    assert (ws / "dup.txt").read_text() == "x = 1\ny = 2\nx = 1\n"
    every = runner.call("edit_file", path="dup.txt", old="x = 1", new="x = 3", replace_all=True)
    assert every.status == "ok" and (ws / "dup.txt").read_text() == "x = 3\ny = 2\nx = 3\n"


def test_edit_file_adapts_to_crlf_files(runner: Runner, ws: Path) -> None:
    (ws / "win.txt").write_bytes(b"one\r\ntwo\r\nthree\r\n")
    rec = runner.call("edit_file", path="win.txt", old="one\ntwo", new="uno\ndos")
    assert rec.status == "ok" and "CRLF" in rec.result.text
    assert (ws / "win.txt").read_bytes() == b"uno\r\ndos\r\nthree\r\n"


@pytest.mark.parametrize("old, new, words", [("", "x", "old is empty"), ("beta", "beta", "the same")])
def test_edit_file_refuses_pointless_edits(runner: Runner, old: str, new: str, words: str) -> None:
    rec = runner.call("edit_file", path="notes.txt", old=old, new=new)
    assert rec.status == "error" and words in rec.result.text


def test_edit_file_refuses_binary_and_outside_files(runner: Runner, ws: Path, outside: Path) -> None:
    (ws / "latin.txt").write_bytes(b"caf\xe9\n")
    assert "not UTF-8" in runner.call("edit_file", path="latin.txt", old="caf", new="x").result.text
    for path in ("link_out", "../outside/secret.txt", "dir_out/secret.txt"):
        rec = runner.call("edit_file", path=path, old="TOP", new="PWNED")
        assert rec.status == "error"
    assert (outside / "secret.txt").read_text() == "TOP SECRET\n"


def test_module_level_tools_use_the_agents_workspace(ws: Path, outside: Path) -> None:
    r = Runner([toolbox.read_file, toolbox.write_file], mode="bypassPermissions", workspace=ws)
    assert r.call("read_file", path="notes.txt").status == "ok"
    assert r.call("read_file", path="../outside/secret.txt").status == "error"
    assert r.call("write_file", path="made.txt", content="x").status == "ok"
    assert (ws / "made.txt").exists()


def test_all_returns_the_ten_tools_in_order(ws: Path) -> None:
    names = [t.name for t in toolbox.all(workspace=ws)]
    assert names == list(toolbox.TOOL_NAMES)
    flags = {t.name: (t.read_only, t.destructive, t.capability) for t in toolbox.all(workspace=ws)}
    assert flags["read_file"] == (True, False, "read")
    assert flags["write_file"][2] == "write" and flags["edit_file"][2] == "write"
    assert flags["python"] == (False, True, "execute")
    assert flags["shell"] == (False, True, "execute")
    with pytest.raises(ValueError, match="not a directory"):
        toolbox.all(workspace=ws / "missing")


def test_file_tools_can_be_called_as_plain_functions(ws: Path) -> None:
    read = tool_named(toolbox.all(workspace=ws), "read_file")
    assert read("notes.txt").text.startswith("     1\talpha")


def test_write_file_below_a_file_says_so(runner: Runner) -> None:
    rec = runner.call("write_file", path="notes.txt/inner.txt", content="x")
    assert rec.status == "error" and "is a file, not a directory" in rec.result.text


def test_the_toolbox_exports_are_sorted_and_complete() -> None:
    assert toolbox.__all__ == sorted(toolbox.__all__)
    for name in toolbox.__all__:
        assert hasattr(toolbox, name), name
    for name in toolbox.TOOL_NAMES:
        assert getattr(toolbox, name).name == name
