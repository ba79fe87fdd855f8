"""Reading command lines: the parser, rule patterns, grant suggestions and the read-only list."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from nbagent.toolbox import Workspace, read_only_problem
from nbagent.toolbox._leaves import Where
from nbagent.toolbox._shellrules import pattern_matches, suggest_pattern
from nbagent.toolbox._shellwords import parse
from nbagent.toolbox._subcommands import subcommands


# --------------------------------------------------------------------------------------------------
# the parser
# --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "command, values",
    [
        ("git status", ["git", "status"]),
        ("git  log   --oneline", ["git", "log", "--oneline"]),
        ("echo 'a b' \"c d\" e\\ f", ["echo", "a b", "c d", "e f"]),
        ("'r''m' -rf x", ["rm", "-rf", "x"]),
        ("\\rm x", ["rm", "x"]),
        ("$'\\x72m' x", ["rm", "x"]),
        ("echo 'a;b' \"x|y\"", ["echo", "a;b", "x|y"]),
        ("git log \\\n --oneline", ["git", "log", "--oneline"]),
    ],
)
def test_words_are_read_as_bash_reads_them(command: str, values: list[str]) -> None:
    parsed = parse(command)
    assert parsed.error is None
    assert [w.value for w in parsed.commands[0]] == values


@pytest.mark.parametrize(
    "command, problem",
    [
        ("a; b", "several commands"),
        ("a && b", "several commands"),
        ("a || b", "several commands"),
        ("a | b", "a pipe"),
        ("a |& b", "a pipe"),
        ("a &", "a background job"),
        ("a\nb", "several lines"),
        ("a > f", "a redirection"),
        ("a 2>&1", "a redirection"),
        ("a &> f", "a redirection"),
        ("a < f", "a redirection"),
        ("a <<< x", "a redirection"),
        ("cat <<EOF\nx\nEOF", "a here-document"),
        ("a $(b)", "a command substitution"),
        ("a `b`", "a command substitution"),
        ('a "$(b)"', "a command substitution"),
        ("a <(b)", "a process substitution"),
        ("a $HOME", "a variable expansion"),
        ("a ${X}", "a variable expansion"),
        ('a "$X"', "a variable expansion"),
        ("a *.py", "a glob pattern"),
        ("a ~/x", "a home directory (~)"),
        ("a {b,c}", "a brace expansion"),
        ("(a)", "a subshell or group"),
        ("{ a; }", "a command group"),
        ("a # c", "a comment"),
        ("X=1 a", "a variable assignment"),
        ("a\rb", "a control or invisible character"),
        ("a\u200bb", "a control or invisible character"),
        ("a\u00a0b", "a control or invisible character"),
        ("if a; then b; fi", "the shell keyword 'if'"),
        ("! a", "history expansion or negation (!)"),
    ],
)
def test_what_makes_a_line_more_than_one_plain_command(command: str, problem: str) -> None:
    parsed = parse(command)
    assert not parsed.is_simple
    assert problem in parsed.problems


@pytest.mark.parametrize("command", ["echo 'open", 'echo "open', "echo $(open", "echo `open", "a )", "a >"])
def test_unreadable_lines_are_errors(command: str) -> None:
    assert parse(command).error is not None


def test_subcommands_include_substitutions_and_wrapped_commands() -> None:
    cmds, ok = subcommands("sudo -u x timeout 5 bash -c 'rm -rf a' && echo $(curl evil) | nice rm")
    assert ok
    assert ["rm", "-rf", "a"] in cmds
    assert ["curl", "evil"] in cmds
    assert ["rm"] in cmds
    # xargs builds its command line from its input: nbagent cannot show what it runs (fail closed)
    assert subcommands("echo a | xargs rm")[1] is False


def test_subcommands_flag_a_program_only_known_at_run_time() -> None:
    assert subcommands("$CMD -rf x")[1] is False
    assert subcommands("r* x")[1] is False
    assert subcommands("echo 'unterminated")[1] is False


# --------------------------------------------------------------------------------------------------
# rule patterns
# --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "command",
    ["git status", "git status --short", "git  status", "git status -- src"],
)
def test_allow_pattern_matches_the_plain_command(command: str) -> None:
    assert pattern_matches("git status*", command, "allow")


@pytest.mark.parametrize(
    "command",
    [
        "git status; rm -rf x",
        "git status && rm -rf x",
        "git status || rm -rf x",
        "git status | sh",
        "git status & rm -rf x",
        "git status\nrm -rf x",
        "git status $(rm -rf x)",
        "git status `rm -rf x`",
        'git status "$(rm -rf x)"',
        "git status > ~/.bashrc",
        "git status <(rm -rf x)",
        "FOO=1 git status",
        "GIT_DIR=/tmp git status",
        "git status # harmless?",
        "git status\r",
        "git status $HOME",
        "git 'status'",
        "git status; ",
        " git status && true",
    ],
)
def test_allow_pattern_is_never_fooled_by_a_compound_line(command: str) -> None:
    assert not pattern_matches("git status*", command, "allow")
    assert not pattern_matches("git status*", command, "grant")


def test_word_prefix_patterns() -> None:
    assert pattern_matches("pytest:*", "pytest -q tests", "allow")
    assert pattern_matches("pytest:*", "pytest", "allow")
    assert not pattern_matches("pytest:*", "pytestx", "allow")
    assert pattern_matches("git diff *", "git diff", "allow")


def test_a_literal_pattern_matches_exactly_that_line() -> None:
    line = "cd build && make"
    assert pattern_matches(line, line, "allow")
    assert not pattern_matches(line, "cd build && make && rm -rf ~", "allow")
    assert pattern_matches("ls [*].py", "ls *.py", "allow")
    assert not pattern_matches("ls [*].py", "ls a.py", "allow")


@pytest.mark.parametrize(
    "command",
    [
        "rm -rf x",
        "git status; rm -rf x",
        "true && rm -rf x",
        "echo $(rm -rf x)",
        "echo `rm -rf x`",
        "\\rm -rf x",
        "/bin/rm -rf x",
        "'rm' -rf x",
        "r''m -rf x",
        "$'\\x72\\x6d' -rf x",
        "RM -rf x",
        "sudo rm -rf x",
        "nice -n 5 rm x",
        "env X=1 rm x",
        "bash -c 'rm -rf x'",
        "sh -lc \"rm -rf x\"",
        "eval 'rm -rf x'",
        "xargs rm < list",
        "find . -exec rm {} \\;",
        "(rm -rf x)",
        "{ rm -rf x; }",
        "f() { rm -rf x; }; f",
        "if true; then rm -rf x; fi",
        "cat <(rm -rf x)",
        "$CMD -rf x",
        "rm 'unterminated",
        # a shell reading its script from stdin, a here-string, a here-document or a file
        "bash < script.sh", "bash <<< 'rm -rf x'", "sh <<EOF\nrm -rf x\nEOF", "sh script.sh", "bash -s",
        "bash", "source script.sh", ". script.sh", "busybox sh script.sh", "bash -c -- 'rm x'",
        "bash script.sh -c 'ls'", "bash -o pipefail -c 'rm x'",
        # wrappers with options of their own, or missing from a short list
        "time -p rm x", "time rm x", "nice -n 5 rm x", "timeout -s KILL 5 rm x", "env -i A=b rm x", "stdbuf -o0 rm x",
        "ionice -c3 rm x", "nohup rm x", "setsid rm x", "setsid -f rm x", "chroot / rm x", "script -c 'rm x'",
        "script -qc 'rm x' /dev/null", "unshare -r rm x", "setpriv --reuid=1000 rm x", "flock /tmp/l rm x",
        "flock /tmp/l -c 'rm x'", "watch 'rm x'", "watch -n1 rm x", "xargs -I{} sh -c 'rm {}'", "parallel rm ::: a b",
        "busybox sh -c 'rm x'", "busybox rm x", "command rm x", "builtin rm x", "exec rm x", "exec -a n rm x",
        "env -S 'rm x'", "su -c 'rm x'", "runuser -u me -- rm x", "prlimit --nofile=10 rm x", "systemd-run rm x",
        # builtins that hold a command for later
        "trap 'rm x' EXIT", "alias ls='rm -rf x'", "function f { rm x; }", "function f() { rm x; }",
        # the program's name only known when it runs, or spelled around the rule
        "$(echo rm) x", "`echo rm` x", "rm${IFS}x", "{rm,x}", "r\\m x", "'r'm x", '"rm" x', "/usr/bin/env rm x",
        "/bin/r? x", "Rm x",
    ],
)
def test_deny_pattern_matches_anything_that_may_run_it(command: str) -> None:
    assert pattern_matches("rm *", command, "deny")


@pytest.mark.parametrize("command", ["ls -la", "git status", "echo rm", "grep rm notes.txt", "cat rm.txt",
                                     "time -p ls", "nice -n 5 ls", "bash --version", "bash -c 'ls -la'",
                                     "timeout 5 grep -q x f", "env A=1 wc x.py", "git commit -m 'rm x'",
                                     "A=1 ls", "sed -n 's/rm/x/p' f", "tar -czf a.tgz src"])
def test_deny_pattern_leaves_other_commands_alone(command: str, tmp_path) -> None:
    where = None
    if command.startswith("git"):  # git keeps the rule once its repository was read: it configures no program
        subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
        where = Where(str(tmp_path.resolve()), sandboxed=True)
    assert not pattern_matches("rm *", command, "deny", where)


@pytest.mark.parametrize("command", ["git status", "git commit -m 'rm x'"])
def test_git_without_its_repository_read_may_run_anything(command: str) -> None:
    """Control: git status may run a filter, git commit an editor or gpg, that the repository names."""
    assert pattern_matches("rm *", command, "deny")


# --------------------------------------------------------------------------------------------------
# grant suggestions
# --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "command, suggestion",
    [
        ("git push origin main", "git push origin main"),
        ("git config --get x", "git config --get x"),
        ("pytest -q tests", "pytest -q tests"),
        ("python train.py --epochs 3", "python train.py --epochs 3"),
        ("rm -rf build", "rm -rf build"),
        ("git status; rm -rf x", "git status; rm -rf x"),
        ("ls *.py", "ls [*].py"),
        ("  make  ", "make"),
    ],
)
def test_suggested_grants_are_exactly_the_command(command: str, suggestion: str) -> None:
    assert suggest_pattern(command) == suggestion


@pytest.mark.parametrize(
    "approved, other",
    [
        ("git config --get x", "git config core.fsmonitor 'touch pwned'"),
        ("git config --get x", "git config --get x y"),
        ("git config --get x", "git config --get x; rm -rf /"),
        ("pytest tests/x.py", "pytest tests/x.py --pdb"),
        ("python train.py", "python train.py --out /etc/passwd"),
        ("ls *.py", "ls a.py"),
        ("make", "make install"),
        ("echo 'a  b'", "echo 'a b'"),
    ],
)
def test_a_grant_covers_exactly_what_was_approved(approved: str, other: str) -> None:
    grant = suggest_pattern(approved)
    assert pattern_matches(grant, approved, "grant")
    assert pattern_matches(grant, "  " + approved + " ", "grant")
    assert not pattern_matches(grant, other, "grant")


def test_a_suggested_grant_for_a_compound_line_covers_only_that_line() -> None:
    line = "git status; rm -rf x"
    grant = suggest_pattern(line)
    assert pattern_matches(grant, line, "grant")
    assert not pattern_matches(grant, "git status; rm -rf y", "grant")


# --------------------------------------------------------------------------------------------------
# read-only commands
# --------------------------------------------------------------------------------------------------
@pytest.fixture
def w(ws: Path) -> Workspace:
    return Workspace(ws)


@pytest.mark.parametrize(
    "command",
    [
        "ls", "ls -la", "ls data", "pwd", "cat notes.txt", "head -n 2 notes.txt", "tail -n 1 notes.txt",
        "wc -l notes.txt data/a.csv", "grep -n beta notes.txt", "grep -rn x data", "find . -name '*.csv'",
        "du -sh data", "sort notes.txt", "uniq notes.txt", "cat link_in", "stat notes.txt", "echo hello",
        "diff data/a.csv data/b.csv", "python --version",
    ],
)
def test_read_only_commands(w: Workspace, command: str) -> None:
    assert read_only_problem(command, w) is None


@pytest.mark.parametrize(
    "command",
    [
        "cat notes.txt; rm -rf data", "cat notes.txt && touch x", "ls | sh", "ls > out", "ls $(touch x)",
        "ls `touch x`", "cat *.txt", "cat ~/.ssh/id_rsa", "cat ../outside/secret.txt", "cat /etc/passwd",
        "cat link_out", "cat dir_out/secret.txt", "ls ..", "X=1 ls", "'ls'", "/bin/ls", "./ls",
        "rm notes.txt", "touch x", "python script.py", "python -c 'print(1)'", "tail -f notes.txt",
        "tail -fn 5 notes.txt", "sort -o out notes.txt", "sort --output=out notes.txt", "sort --out=o notes.txt",
        "uniq notes.txt out.txt", "find . -delete", "find . -exec rm {} +", "find -L .", "grep -R x .",
        "rg --pre sh x", "file -C -m magic", "tree -o out", "date -s 2020-01-01", "env", "printenv",
        "cat -- ../outside/secret.txt", "grep -f../outside/secret.txt x", "grep --file=/etc/passwd x",
        "echo $HOME", "ls\nrm x",
    ],
)
def test_not_read_only(w: Workspace, command: str) -> None:
    assert read_only_problem(command, w) is not None


def _git(w: Workspace, root: Path) -> None:
    (root / ".git").mkdir()


@pytest.mark.parametrize(
    "command",
    ["git status", "git log --oneline -5", "git diff", "git diff HEAD~1 -- notes.txt", "git show HEAD",
     "git branch", "git branch -a", "git branch --list 'feat*'", "git tag", "git tag --list", "git remote -v",
     "git stash list", "git rev-parse HEAD", "git --no-pager log", "git blame notes.txt", "git ls-files"],
)
def test_read_only_git(w: Workspace, ws: Path, command: str) -> None:
    (ws / ".git").mkdir()
    assert read_only_problem(command, w) is None


@pytest.mark.parametrize(
    "command",
    ["git commit -m x", "git push", "git checkout x", "git -c core.pager=sh log", "git -C /tmp status",
     "git --git-dir=/tmp/x status", "git --exec-path=/tmp log", "git diff --output=out", "git diff --ext-diff",
     "git grep -O x", "git grep --open-files-in-pager=sh x", "git branch new-branch", "git branch -D main",
     "git tag v1", "git tag -d v1", "git remote add o url", "git stash", "git stash drop", "git config x y",
     "git status; rm -rf x", "git log > out"],
)
def test_not_read_only_git(w: Workspace, ws: Path, command: str) -> None:
    (ws / ".git").mkdir()
    assert read_only_problem(command, w) is not None


def test_git_in_a_workspace_inside_a_larger_repository_is_not_read_only(tmp_path: Path) -> None:
    (tmp_path / "repo" / ".git").mkdir(parents=True)
    (tmp_path / "repo" / "sub").mkdir()
    w = Workspace(tmp_path / "repo" / "sub")
    assert "larger git repository" in read_only_problem("git status", w)
    assert read_only_problem("ls", w) is None


def test_deny_rules_make_protected_files_and_whole_tree_reads_not_read_only(w: Workspace, ws: Path) -> None:
    (ws / ".git").mkdir()

    def denied(rel: str, real: str) -> bool:
        return rel == ".env"

    assert read_only_problem("cat .env", w, denied) is not None
    assert read_only_problem("cat ./.env", w, denied) is not None
    assert read_only_problem("cat data/../.env", w, denied) is not None
    assert read_only_problem("grep -r KEY .", w, denied) is not None
    assert read_only_problem("git diff", w, denied) is not None
    assert read_only_problem("cat notes.txt", w, denied) is None
    os.symlink(ws / ".env", ws / "alias")
    assert read_only_problem("cat alias", w, lambda rel, real: rel == ".env" or real.endswith("/.env")) is not None
