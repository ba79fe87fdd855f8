"""Deny rules against programs that run other programs from their options, scripts or environment.

Written from the outside: the README says `deny: shell(rm*)` stops every command that may run `rm`. Each
attack below makes a program run it from somewhere the shell parser does not see (an option value, a
script language, a variable on the line). The defence (`_runsprograms.unseen`) makes such a line
unreadable, so the deny rule matches it; turned off, the attacks get through, and the real ones delete
the file.
"""

from __future__ import annotations

import shutil

import pytest

from nbagent.toolbox import _subcommands
from nbagent.toolbox._leaves import Where
from nbagent.toolbox._runsprograms import RUNNERS, unseen
from nbagent.toolbox._shellrules import pattern_matches

from .conftest import Recorder, run_agent, sh
from .recorders import init_repo

pytestmark = pytest.mark.timeout(60)

RM = "rm -f notes.md"
WALKAROUNDS = {
    # the ones named
    "git_c_pager": f"git -c core.pager='{RM}' log",
    "git_c_alias": f"git -c alias.x='!{RM}' x",
    "sed_e_command": f"sed -n '1e {RM}' data.txt",
    "sed_s_e_flag": f"sed 's/.*/{RM}/e' data.txt",
    "tar_checkpoint": f"tar -cf /dev/null data.txt --checkpoint=1 --checkpoint-action=exec='{RM}'",
    "tar_to_command": f"tar -xf a.tar --to-command='{RM}'",
    "awk_system": f"awk 'BEGIN{{system(\"{RM}\")}}'",
    # other members of the class
    "git_c_sshcommand": f"git -c core.sshCommand='{RM}' fetch origin",
    "git_c_fsmonitor": f"git -c core.fsmonitor='{RM}' status",
    "git_config_env": "git --config-env=core.pager=CMD log",
    "git_exec_path": "git --exec-path=. status",
    "git_ext_transport": f"git clone 'ext::sh -c {RM}' x",
    "git_rebase_exec": f"git rebase --exec '{RM}' HEAD~1",
    "git_unknown_subcommand": "git x",
    "git_dash_program": "git-x",
    "gsed_abbreviated_expression": f"sed --expr='1e {RM}' data.txt",
    "sed_script_file": "sed -f script.sed data.txt",
    "tar_abbreviated_option": f"tar -xf a.tar --to-com='{RM}'",
    "tar_use_compress_short": f"tar -I '{RM}' -xf a.tar",
    "tar_old_style_bundle": f"tar xIf ./rm-it a.tar",
    "sort_compress_program": "sort --compress-program=./rm-it data.txt",
    "sort_compress_abbreviated": "sort --compress-prog=./rm-it data.txt",
    "zip_unzip_command": f"zip -TT '{RM}' a.zip data.txt",
    "rsync_rsh": f"rsync -e 'sh -c \"{RM}\"' a host:b",
    "scp_program": "scp -S ./rm-it a host:b",
    "ssh_proxy": f"ssh -o ProxyCommand='{RM}' host",
    "man_pager": f"man -P '{RM}' ls",
    "less_initial_command": f"less '+!{RM}' data.txt",
    "lessopen_variable": f"LESSOPEN='|{RM} %s' less data.txt",
    "path_variable": "PATH=. ls",
    "ld_preload_variable": "LD_PRELOAD=./evil.so ls",
    "git_ssh_variable": f"GIT_SSH_COMMAND='{RM}' git fetch origin",
    "exported_variable": f"export PAGER='{RM}'; git log",
    "env_ld_preload": "env LD_PRELOAD=./evil.so ls",
    "xargs_from_input": "echo notes.md | xargs rm",
    "find_fprint": "find . -fprint out.txt",
    "make_recipe": "make clean",
    "npm_script": "npm test",
    "pytest_conftest": "pytest -q",
    "perl_e": "perl -e 'unlink q(notes.md)'",
    "python_c": "python3 -c \"import os; os.remove('notes.md')\"",
    "vim_command": f"vim -c '!{RM}' -c q",
    "wget_askpass": "wget --use-askpass=./rm-it http://x",
    "mapfile_callback": f"mapfile -C '{RM}' -c 1 < data.txt",
    "wrapped_in_timeout": f"timeout 5 sed -n '1e {RM}' data.txt",
    "wrapped_in_nice_env": f"nice env sed 's/x/{RM}/e' data.txt",
    "in_a_substitution": f"echo $(sed -n '1e {RM}' data.txt)",
    "gcc_wrapper": "gcc -wrapper ./rm-it,-x a.c",
    "socat_exec": f"socat - EXEC:'{RM}'",
}
KEEPS_THE_RULE = {
    "tar_create": "tar -czf a.tgz src",
    "tar_list": "tar tf a.tar",
    "sed_print": "sed -n 's/a/b/p' data.txt",
    "sed_delete": "sed -e '/x/d' -e 's/a/b/g' data.txt",
    "git_log": "git log --oneline",
    "git_c_color": "git -c color.ui=never log",
    "git_commit": "git commit -m 'rm -f later'",
    "sort_plain": "sort -n data.txt",
    "find_names": "find . -name '*.py'",
    "less_plain": "less data.txt",
    "lang_variable": "LANG=C sort data.txt",
    "plain_variable_before_ls": "A=1 ls",
    "zip_plain": "zip -r a.zip src",
    "gcc_define": "gcc -DBUILD=1 -O2 a.c",
}


@pytest.mark.parametrize("name", sorted(WALKAROUNDS))
def test_a_program_that_runs_another_is_denied(name):
    assert pattern_matches("rm*", WALKAROUNDS[name], "deny"), name


@pytest.fixture
def plain_repository(tmp_path):
    """Where a line runs: a workspace holding a plain repository that configures no program for git."""
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    (tmp_path / "notes.md").write_text("hello\n")
    init_repo(tmp_path)
    return Where(str(tmp_path.resolve()), sandboxed=True)


@pytest.mark.parametrize("name", sorted(KEEPS_THE_RULE))
def test_control_the_same_programs_otherwise_keep_the_rule(name, plain_repository):
    # git commit runs what the repository configures (gpg.program, core.editor): known to keep the rule only
    # once that repository was read, as the shell tool does
    assert not pattern_matches("rm*", KEEPS_THE_RULE[name], "deny", plain_repository), name


@pytest.mark.parametrize("name", sorted(n for n in WALKAROUNDS if n not in (
    "git_unknown_subcommand", "git_dash_program", "in_a_substitution",
    # caught before this change too: an alias set with -c, xargs's own command, a script word with spaces
    "git_c_alias", "xargs_from_input", "wrapped_in_nice_env")))
def test_defence_off_the_walkarounds_pass_the_rule(name, monkeypatch):
    monkeypatch.setattr(_subcommands, "unseen", lambda words: None)
    monkeypatch.setattr(_subcommands, "unseen_assignment", lambda text, program=None: None)
    # and the second wall: only programs known to run no others pass (`_leaves`)
    monkeypatch.setattr(_subcommands, "program_problem", lambda words, where, known=(): None)
    monkeypatch.setattr(_subcommands, "git_problem", lambda words, where: None)
    assert not pattern_matches("rm*", WALKAROUNDS[name], "deny"), name


def test_the_knowledge_is_a_table_with_one_entry_per_program():
    assert {"tar", "sed", "git", "sort", "zip", "rsync", "man", "less", "xargs", "make", "awk"} <= set(RUNNERS)
    assert unseen(["tar", "--checkpoint-action=exec=x"]) and unseen(["tar", "-cf", "a", "b"]) is None
    assert unseen(["python3", "--version"]) is None  # harmless arguments


REAL = {  # commands that really delete notes.md once the rule lets them through
    "sed_e_command": "sed -n '1e rm -f notes.md' data.txt",
    "sed_s_e_flag": "sed 's/.*/rm -f notes.md/e' data.txt",
    "awk_system": "awk 'BEGIN{system(\"rm -f notes.md\")}'",
    "tar_checkpoint": "tar -cf /dev/null data.txt --checkpoint=1 --checkpoint-action=exec='rm -f notes.md'",
}


@pytest.mark.parametrize("name", sorted(REAL))
@pytest.mark.parametrize("defence", [True, False])
def test_end_to_end_the_rule_keeps_the_file(ws, name, defence, monkeypatch):
    if shutil.which(REAL[name].split()[0]) is None:
        pytest.skip(f"{REAL[name].split()[0]} is not installed")
    if not defence:
        monkeypatch.setattr(_subcommands, "unseen", lambda words: None)
        monkeypatch.setattr(_subcommands, "program_problem", lambda words, where, known=(): None)
    run = run_agent(ws, [sh(REAL[name]), sh("cat data.txt")], mode="bypassPermissions",
                    rules=["deny: shell(rm*)"], approver=Recorder(True))
    assert run.calls[1].status == "ok"  # control: other commands run
    if defence:
        assert run.calls[0].status == "denied" and (ws / "notes.md").exists()
    else:
        assert run.calls[0].status != "denied" and not (ws / "notes.md").exists()
