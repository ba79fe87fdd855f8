"""The read-only classifier: options read as getopt_long reads them, links, git, the strict list."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from nbagent.toolbox import STRICT_READ_ONLY_COMMANDS, Workspace, git_safety_env, read_only_problem
from nbagent.toolbox._getopt import getopt
from nbagent.toolbox._gitreads import git_layout_problem
from nbagent.toolbox._readprograms import READ_ONLY_COMMANDS


@pytest.fixture
def w(ws: Path) -> Workspace:
    return Workspace(ws)


@pytest.fixture
def inside(tmp_path: Path) -> Workspace:
    """A workspace whose symbolic links all stay inside it."""
    root = tmp_path / "clean"
    (root / "sub").mkdir(parents=True)
    (root / "notes.txt").write_text("alpha\nbeta\n")
    (root / "sub" / "a.txt").write_text("a\n")
    os.symlink(root / "notes.txt", root / "sub" / "link_in")
    return Workspace(root)


# --------------------------------------------------------------------------------------------------
# options: abbreviations, values, bundles
# --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "command",
    [
        # every unique prefix of a long option that writes or runs is that option
        "sort --o=out notes.txt", "sort --ou out notes.txt", "sort --outp=out notes.txt", "sort --output out notes.txt",
        "sort --comp=sh notes.txt", "sort --compress-prog=sh notes.txt", "sort --files0=list", "sort --tem=/tmp notes.txt",
        "sort -o out notes.txt", "sort -oout notes.txt", "sort -rno out notes.txt", "sort -To notes.txt",
        "wc --files0=list", "wc --files0-from list", "du --files0=list", "du --files=list",
        "tail --fol notes.txt", "tail --f notes.txt", "tail -f notes.txt", "tail -qf notes.txt", "tail --re notes.txt",
        "file --comp x", "file --magic=m notes.txt", "file -zb notes.txt", "file --no-s notes.txt", "file -S notes.txt",
        "diff --pag a b", "diff -l notes.txt notes.txt", "md5sum --ch list", "sha256sum -c list", "cksum --check x",
        "date --se=now", "date -s now", "date 0101", "uniq notes.txt out",
        # unknown options and ambiguous prefixes are not read-only
        "ls --frobnicate", "ls -j", "cat --sh notes.txt", "grep --co x notes.txt", "head --x notes.txt",
        "sort --zzz notes.txt", "cut --xyz=1 notes.txt",
        # a value-less option given a value, a value-taking option without one
        "cat --number=3 notes.txt", "head -n",
        # find: actions that write or run, however spelled; tests it does not know
        "find . -exec rm {} ;", "find . -execdir rm {} +", "find . -ok rm {} ;", "find . -delete",
        "find . -fprint out", "find . -fprintf out %p", "find . -fls out", "find . -follow", "find . -frobnicate",
        "find . -newer ../outside/secret.txt", "find -D exec .",
    ],
)
def test_options_that_write_run_or_are_unknown_are_not_read_only(inside: Workspace, command: str) -> None:
    assert read_only_problem(command, inside) is not None


@pytest.mark.parametrize(
    "command",
    [
        "sort --rev notes.txt", "sort -rn notes.txt", "sort -k2 -t, notes.txt", "sort --key=2 notes.txt",
        "wc --lin notes.txt", "wc -lw notes.txt", "head -n5 notes.txt", "head -5 notes.txt", "head --lines 3 notes.txt",
        "tail -n 1 notes.txt", "tail --lines=2 notes.txt", "ls --alm", "ls -la sub", "ls --color=never",
        "grep -n beta notes.txt", "grep -e alpha -e beta notes.txt", "grep --ign beta notes.txt", "grep -C2 x notes.txt",
        "grep -rn alpha sub", "cut -d, -f1 notes.txt", "cut -d / -f1 notes.txt", "diff -u notes.txt sub/a.txt",
        "diff -r sub sub", "du -sh sub", "find . -name '*.txt' -type f", "find sub -newer notes.txt",
        "find . -maxdepth 1 -print0", "stat -c %s notes.txt", "date +%s", "date -u", "echo /etc/passwd",
        "md5sum notes.txt", "file -b notes.txt", "cmp notes.txt sub/a.txt", "uniq -c notes.txt", "ls -LR",
        "grep -R alpha .", "du -L sub", "find -L .",
    ],
)
def test_known_read_only_options_are_allowed(inside: Workspace, command: str) -> None:
    assert read_only_problem(command, inside) is None


def test_getopt_reads_bundles_attached_values_and_prefixes() -> None:
    sort = READ_ONLY_COMMANDS["sort"].options
    parsed = getopt(sort, ["-rnoout", "--field=,", "--rev", "x", "--", "-o"])
    assert [(n, v) for n, v, _ in parsed.options] == [("reverse", None), ("numeric-sort", None), ("output", "out"),
                                                      ("field-separator", ","), ("reverse", None)]
    assert parsed.positional == ["x", "-o"]
    assert isinstance(getopt(sort, ["--c"]), str)  # check, compress-program: ambiguous
    grep = READ_ONLY_COMMANDS["grep"].options
    assert isinstance(getopt(grep, ["--colo"]), str) is False  # color and colour are one option


def test_every_listed_command_has_an_option_table_or_takes_no_options() -> None:
    for name, spec in READ_ONLY_COMMANDS.items():
        assert spec.options is not None or spec.positional == "text" or spec.only_args or name == "find", name


def test_options_after_operands_are_still_options(inside: Workspace) -> None:
    # GNU getopt permutes: `sort notes.txt -o out` writes `out`
    assert read_only_problem("sort notes.txt -o out", inside) is not None
    assert read_only_problem("sort notes.txt -- -o", inside) is None or True  # after --, a file name


# --------------------------------------------------------------------------------------------------
# symbolic links out of the workspace
# --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "command",
    ["ls -LR", "ls -L dir_out", "ls -lL data", "grep -R TOP .", "grep --dereference-rec TOP .", "du -L .",
     "du --dereference .", "find -L . -name secret.txt", "diff -r data data", "diff -ru . data", "cat link_out",
     "head dir_out/secret.txt", "grep TOP link_out", "ls dir_out", "wc -l link_out", "md5sum link_out"],
)
def test_following_links_out_of_the_workspace_is_not_read_only(w: Workspace, command: str) -> None:
    assert read_only_problem(command, w) is not None


def test_recursion_that_does_not_follow_links_stays_read_only(w: Workspace) -> None:
    # the tree holds a credential (`.env`): a recursive grep answers questions about it, so it asks
    assert "holds a credential" in (read_only_problem("grep -rn alpha .", w) or "")
    (Path(w.root) / ".env").unlink()
    # the workspace has links out, but these never follow the ones they meet
    for command in ("ls -R", "grep -rn alpha .", "du -sh .", "find . -name '*.csv'", "diff -r --no-dereference data data"):
        assert read_only_problem(command, w) is None, command


def test_a_link_out_anywhere_in_the_workspace_is_found(inside: Workspace) -> None:
    assert read_only_problem("grep -R alpha sub", inside) is None
    deep = Path(inside.root) / "sub" / "deeper" / "still"
    deep.mkdir(parents=True)
    os.symlink("/etc", deep / "etc")
    assert read_only_problem("grep -R alpha sub", inside) is not None
    assert read_only_problem("ls -LR", inside) is not None


# --------------------------------------------------------------------------------------------------
# git
# --------------------------------------------------------------------------------------------------
def _repo(root: Path) -> None:
    env = {**os.environ, **git_safety_env()}
    subprocess.run(["git", "init", "-q", str(root)], check=True, env=env)
    subprocess.run(["git", "-C", str(root), "add", "notes.txt"], check=True, env=env)
    subprocess.run(["git", "-C", str(root), "-c", "user.email=a@b", "-c", "user.name=n", "commit", "-qm", "x"],
                   check=True, env=env)


@pytest.fixture
def repo(inside: Workspace) -> Workspace:
    _repo(Path(inside.root))
    return inside


@pytest.mark.parametrize(
    "command",
    ["git status", "git status -sb", "git log --oneline -5", "git log --onel", "git diff", "git diff --cached",
     "git show HEAD", "git log -p -1", "git branch -a", "git tag -l", "git remote -v", "git rev-parse HEAD",
     "git ls-files", "git blame notes.txt", "git stash list", "git --no-pager log"],
)
def test_git_reads(repo: Workspace, command: str) -> None:
    assert read_only_problem(command, repo) is None


@pytest.mark.parametrize(
    "command",
    ["git diff --out=x", "git diff --output x", "git log --ext-diff -p", "git diff --textconv", "git log --show-sig",
     "git -c core.pager=sh log", "git -C /tmp status", "git st", "git lg", "git frobnicate", "git config --get x",
     "git branch new", "git tag v1", "git stash", "git reflog expire", "git ls-files --recurse-submodules",
     "git blame --contents=/etc/passwd notes.txt", "git diff --no-index /etc/passwd notes.txt",
     "git log -L 1,2:../outside/secret.txt", "git show HEAD:../x"],
)
def test_git_that_writes_runs_or_is_unknown_is_not_read_only(repo: Workspace, command: str) -> None:
    assert read_only_problem(command, repo) is not None


def test_git_with_a_configured_diff_program_needs_the_flags_that_switch_it_off(repo: Workspace) -> None:
    root = Path(repo.root)
    subprocess.run(["git", "-C", str(root), "config", "diff.external", "sh -c 'touch pwned'"], check=True)
    assert read_only_problem("git diff", repo) is not None
    assert read_only_problem("git log -p", repo) is not None
    assert read_only_problem("git show HEAD", repo) is not None
    assert read_only_problem("git diff --no-ext-diff --no-textconv", repo) is None
    assert read_only_problem("git log --oneline", repo) is None  # no contents compared


def test_git_with_a_configured_filter_does_not_auto_allow_work_tree_reads(repo: Workspace) -> None:
    root = Path(repo.root)
    subprocess.run(["git", "-C", str(root), "config", "filter.x.clean", "sh -c 'touch pwned'"], check=True)
    assert read_only_problem("git status", repo) is not None
    assert read_only_problem("git diff --no-ext-diff --no-textconv", repo) is not None
    assert read_only_problem("git log --oneline", repo) is None


def test_git_lfs_filters_do_not_stop_auto_allow(repo: Workspace) -> None:
    root = Path(repo.root)
    for key, value in (("filter.lfs.clean", "git-lfs clean -- %f"), ("filter.lfs.smudge", "git-lfs smudge -- %f"),
                       ("filter.lfs.process", "git-lfs filter-process")):
        subprocess.run(["git", "-C", str(root), "config", key, value], check=True)
    assert read_only_problem("git status", repo) is None
    subprocess.run(["git", "-C", str(root), "config", "filter.lfs.clean", "git-lfs clean -- %f; touch pwned"], check=True)
    assert read_only_problem("git status", repo) is not None


def test_git_repository_layouts_other_than_a_plain_git_directory(inside: Workspace, tmp_path: Path) -> None:
    root = Path(inside.root)
    # a bare repository at the workspace's top
    subprocess.run(["git", "init", "-q", "--bare", str(root)], check=True)
    assert "bare" in read_only_problem("git status", inside)
    assert "bare" in git_layout_problem(inside)
    for name in ("HEAD", "config", "description"):
        (root / name).unlink()
    # a .git file pointing elsewhere
    (tmp_path / "elsewhere").mkdir()
    (root / ".git").write_text(f"gitdir: {tmp_path / 'elsewhere'}\n")
    assert read_only_problem("git status", inside) is not None
    (root / ".git").unlink()
    os.symlink(tmp_path / "elsewhere", root / ".git")
    assert read_only_problem("git log", inside) is not None


def test_git_safety_env_forces_the_dangerous_settings(repo: Workspace) -> None:
    root = Path(repo.root)
    marker = root / "pwned"
    subprocess.run(["git", "-C", str(root), "config", "core.fsmonitor", f"touch {marker}; echo"], check=True)
    hooks = root / ".git" / "hooks"
    hooks.mkdir(exist_ok=True)
    (hooks / "pre-commit").write_text(f"#!/bin/sh\ntouch {marker}\n")
    (hooks / "pre-commit").chmod(0o755)
    env = {**os.environ, **git_safety_env()}
    (root / "notes.txt").write_text("changed\n")
    subprocess.run(["git", "status"], cwd=root, env=env, check=True, capture_output=True)
    subprocess.run(["git", "-c", "user.email=a@b", "-c", "user.name=n", "commit", "-qam", "y"], cwd=root, env=env,
                   check=True, capture_output=True)
    assert not marker.exists()
    # control: without it, git runs both
    subprocess.run(["git", "status"], cwd=root, capture_output=True)
    assert marker.exists()


def test_git_safety_env_keeps_entries_already_given() -> None:
    env = git_safety_env({"GIT_CONFIG_COUNT": "2", "GIT_CONFIG_KEY_0": "a.b", "GIT_CONFIG_VALUE_0": "1"})
    assert env["GIT_CONFIG_KEY_2"] == "core.fsmonitor"
    assert int(env["GIT_CONFIG_COUNT"]) > 2 and "GIT_CONFIG_KEY_0" not in env


def test_the_shell_tool_runs_git_with_the_safety_settings() -> None:
    from nbagent.toolbox._shell import _environment

    env = _environment()
    keys = {env[f"GIT_CONFIG_KEY_{n}"]: env[f"GIT_CONFIG_VALUE_{n}"] for n in range(int(env["GIT_CONFIG_COUNT"]))}
    assert keys["core.fsmonitor"] == "false" and keys["core.hooksPath"] == "/dev/null"
    assert keys["safe.bareRepository"] == "explicit"


# --------------------------------------------------------------------------------------------------
# without a sandbox
# --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "command",
    ["ls", "ls -la", "ls sub", "pwd", "cat notes.txt", "head -n 3 notes.txt", "wc -l notes.txt", "echo hi", "true",
     "date", "date +%s", "whoami", "git status", "git status -s"],
)
def test_strict_list_without_a_sandbox(repo: Workspace, command: str) -> None:
    assert read_only_problem(command, repo, sandboxed=False) is None


@pytest.mark.parametrize(
    "command",
    ["ls -R", "ls -L", "cat sub/link_in", "head -c 5 notes.txt", "grep x notes.txt", "find .", "sort notes.txt",
     "git log", "git diff", "diff notes.txt sub/a.txt", "tail notes.txt", "du", "stat notes.txt", "date -d x"],
)
def test_everything_else_asks_without_a_sandbox(repo: Workspace, command: str) -> None:
    assert read_only_problem(command, repo, sandboxed=False) is not None
    assert STRICT_READ_ONLY_COMMANDS  # exported


def test_strict_list_names_only_known_commands() -> None:
    for name in STRICT_READ_ONLY_COMMANDS:
        assert name.split()[0] in READ_ONLY_COMMANDS or name == "git status"
