"""Secrets by the piece (SECURITY.md invariant 5): credential values are unreachable by auto-allowed tools,
not whole, not sliced, not encoded. The key sits in the environment (and, as is common, in the workspace's
`.env` that loaded it). Effect checked: a 6+ character piece of the key in what the model received.
"""

from __future__ import annotations

import os
import re

import pytest

from nbagent import Agent, toolbox

from .conftest import Recorder, call, everything_model_saw, sh, ws  # noqa: F401 - fixtures
from .recorders import turns

KEY = "zq7Wm3Kp9Lx2Vb8Nr4Tc6Yh1Jd5Fg0Qs"


def _pieces(text: str, n: int = 6) -> list[str]:
    return [KEY[i:i + n] for i in range(len(KEY) - n + 1) if KEY[i:i + n] in text]


@pytest.fixture
def keyed(ws, monkeypatch):
    monkeypatch.setenv("MYSVC_API_KEY", KEY)
    (ws / ".env").write_text(f"MYSVC_API_KEY={KEY}\n")
    return ws


def _auto(ws, *calls, namespace=None, approve=False):
    approver = Recorder(approve)
    agent = Agent(model=turns(*calls), tools=toolbox.all(workspace=ws, namespace=namespace), approver=approver,
                  workspace=ws)
    run = agent.run_sync("go")
    return run, approver


SLICERS = [
    ("cut-chars", "cut -c 15-40 .env"),
    ("head-bytes", "head -c 30 .env"),
    ("tail-bytes", "tail -c 20 .env"),
    ("grep-only-matching", "grep -oE 'KEY=.......' .env"),
    ("diff-side-by-side-width", "diff -y -W 44 .env notes.md"),
]


@pytest.mark.parametrize("command", [s[1] for s in SLICERS], ids=[s[0] for s in SLICERS])
def test_auto_allowed_shell_cannot_slice_a_key(keyed, command):
    run, approver = _auto(keyed, sh(command))
    if approver.asked:
        return  # not auto-allowed: the person is asked first
    seen = everything_model_saw(run)
    assert not _pieces(seen), f"`{command}` (auto-allowed) gave the model pieces of the key: {_pieces(seen)}"


def test_auto_allowed_cmp_cannot_encode_a_key(keyed):
    """`cmp -l` prints every differing byte in octal: the key, encoded."""
    (keyed / "zeros.txt").write_text("0" * 64 + "\n")
    run, approver = _auto(keyed, sh("cmp -l .env zeros.txt"))
    if approver.asked:
        return
    text = run.calls[0].result.text
    decoded = "".join(chr(int(m.group(1), 8)) for m in re.finditer(r"^\s*\d+\s+(\d+)\s+\d+", text, re.M))
    assert not _pieces(decoded), f"cmp -l gave the key in octal (decoded: {decoded!r})"


def test_inspect_variable_cannot_index_a_key_character_by_character(keyed):
    namespace = {"os": os}
    calls = [call("inspect_variable", name=f"os.environ['MYSVC_API_KEY'][{i}]") for i in range(len(KEY))]
    run, approver = _auto(keyed, calls, namespace=namespace)
    chars = []
    for rec in run.calls:
        m = re.search(r"^value: '(.)'$", rec.result.text if rec.result else "", re.M)
        chars.append(m.group(1) if m else "?")
    rebuilt = "".join(chars)
    assert not _pieces(rebuilt), f"inspect_variable (read-only) handed out the key one character at a time: {rebuilt}"


def test_read_file_line_cut_does_not_leave_a_key_piece(keyed):
    """A long line cut at MAX_LINE_CHARS: the part of the key before the cut escapes whole-value redaction."""
    (keyed / "debug.log").write_text("x" * 1975 + f"Authorization: {KEY}\n")
    run, _ = _auto(keyed, call("read_file", path="debug.log"))
    seen = everything_model_saw(run)
    assert not _pieces(seen), f"read_file cut the line inside the key and showed {_pieces(seen)}"


def test_inspect_variable_long_string_cut_does_not_leave_a_key_piece(keyed):
    """reprlib cuts long strings in the middle: a key at the cut is shown in part."""
    blob = "a" * 2090 + KEY + "b" * 5000
    run, _ = _auto(keyed, call("inspect_variable", name="blob"), namespace={"blob": blob})
    seen = everything_model_saw(run)
    assert not _pieces(seen), f"inspect_variable's cut left {_pieces(seen)}"


def test_control_whole_key_is_redacted_and_tools_work(keyed):
    """Control: read_file and cat of .env run, and the whole key is redacted from them."""
    run, approver = _auto(keyed, [call("read_file", path=".env"), sh("cat .env"), sh("cat notes.md")])
    assert [r.status for r in run.calls] == ["ok", "ok", "ok"] and not approver.asked
    assert "REDACTED" in run.calls[0].result.text and "hello notes" in run.calls[2].result.text
    assert KEY not in everything_model_saw(run)


def test_approved_shell_cannot_read_the_kernels_environ(keyed):
    """An approved command reads /proc/<the kernel>/environ, where the key lives."""
    approver = Recorder(True)
    agent = Agent(model=turns(sh(f"cat /proc/{os.getpid()}/environ | tr '\\0' '\\n' | cut -c 1-24")),
                  tools=toolbox.all(workspace=keyed), approver=approver, workspace=keyed)
    run = agent.run_sync("go")
    assert not _pieces(everything_model_saw(run)), "the kernel's environment was readable from the shell tool"


def test_auto_allowed_shell_environment_has_no_key(keyed):
    """The approved (networkless) command's own environment holds no key (its pieces included)."""
    approver = Recorder(True)
    run = Agent(model=turns(sh("env | cut -c 1-30")), tools=toolbox.all(workspace=keyed), approver=approver,
                workspace=keyed).run_sync("go")
    assert run.calls[0].status == "ok"
    assert not _pieces(everything_model_saw(run))


def test_list_variables_preview_does_not_leave_a_key_piece(keyed):
    """list_variables (auto-allowed, no arguments) previews the first 80 characters of each string: a key
    that crosses the 80th character is shown in part, so whole-value redaction misses it."""
    line = "curl -s -H 'Accept: application/json' -H 'Authorization: Bearer " + KEY + "' https://api"
    run, _ = _auto(keyed, call("list_variables"), namespace={"cmd": line})
    seen = everything_model_saw(run)
    assert "cmd" in seen
    assert not _pieces(seen), f"list_variables showed {_pieces(seen)}"


def test_inspect_variable_cannot_reach_mcp_header_secrets_through_the_shell(ws):
    """In a notebook the namespace holds IPython's `exit`, whose `_ip` is the shell: its config carries the
    person's MCP headers (a literal token). inspect_variable is read-only and auto-allowed."""
    pytest.importorskip("IPython")
    from IPython.core.interactiveshell import InteractiveShell

    from nbagent.jupyter.notebook.kernel_tools import kernel_toolbox

    token = "rt3-literal-header-token-40d2ab"
    shell = InteractiveShell.instance()
    shell.run_line_magic("load_ext", "nbagent")
    shell.run_line_magic("config", "NBAgent.mcp_servers = " + repr(
        {"web": {"url": "http://127.0.0.1:9/mcp", "headers": {"Authorization": f"Bearer {token}"}}}))
    try:
        tools = kernel_toolbox(shell, workspace=ws)
        agent = Agent(model=turns(call("inspect_variable", name="exit._ip.config"), call("list_variables")),
                      tools=tools, approver=Recorder(False), workspace=ws)
        run = agent.run_sync("go")
    finally:
        shell.run_line_magic("config", "NBAgent.mcp_servers = {}")
    assert run.calls[1].status == "ok"  # control: the tools work
    seen = everything_model_saw(run)
    assert token[:10] not in seen, "an MCP header secret reached the model through inspect_variable"


@pytest.mark.parametrize("variable", ["AZURE_OPENAI_KEY", "DEEPL_AUTH_KEY", "PGPASSWORD"])
def test_credential_variables_outside_the_name_pattern_stay_secret(ws, monkeypatch, variable):
    """Well-known credential variables whose names the secret pattern does not know: inspect_variable
    (auto-allowed) on os.environ shows them whole."""
    value = "c0ffee5e" + KEY
    monkeypatch.setenv(variable, value)
    # os.environ holds the keys: inspecting it asks first; approved, it shows them redacted
    run, approver = _auto(ws, call("inspect_variable", name="os.environ"), namespace={"os": os}, approve=True)
    assert run.calls[0].status == "ok" and approver.asked
    assert value[:12] not in everything_model_saw(run), f"{variable} reached the model through inspect_variable"


def test_control_known_credential_variable_is_redacted_in_environ(keyed):
    run, _ = _auto(keyed, call("inspect_variable", name="os.environ"), namespace={"os": os}, approve=True)
    seen = everything_model_saw(run)
    assert "MYSVC_API_KEY" in seen and KEY not in seen


def test_notebook_instructions_do_not_send_a_piece_of_a_long_key(ws, monkeypatch):
    """%agent's default instructions summarise the notebook's variables, a string as its first 60
    characters: a long credential (a JWT, say) copied into a variable goes to the provider in part, on
    every run, with no tool call at all."""
    pytest.importorskip("IPython")
    from IPython.core.interactiveshell import InteractiveShell

    from nbagent import AssistantMessage, ScriptedModel

    jwt = "eyJhbGciOiJIUzI1NiJ9." + KEY * 3 + ".sig"
    monkeypatch.setenv("MYSVC_TOKEN", jwt)
    monkeypatch.chdir(ws)
    shell = InteractiveShell.instance()
    shell.run_line_magic("load_ext", "nbagent")
    shell.user_ns["service_token"] = os.environ["MYSVC_TOKEN"]
    shell.user_ns["rt3_model"] = ScriptedModel([AssistantMessage(text="hi")])
    try:
        run = shell.run_line_magic("agent", "--new --model rt3_model --wait go")
    finally:
        shell.user_ns.pop("service_token", None)
    sent = repr(run.requests)
    assert "service_token" in sent  # control: the summary is there
    assert not _pieces(sent), f"the instructions sent pieces of MYSVC_TOKEN to the provider: {_pieces(sent)[:3]}"
