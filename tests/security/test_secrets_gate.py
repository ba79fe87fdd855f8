"""The secret gate, attacked from the outside (SECURITY.md invariant 5): members of the class "secrets
guarded at some doors, not at the data" other than the ones that were found, each with a control.

From the README and docs/notes/secrets.md an outsider knows: read-only calls run without asking, keys never
reach the model, whole or in pieces; what holds a secret is decided by content, not by a name. So the
attacks reach credentials whose names say nothing, through doors nobody listed: an edit's found / not
found, a notebook cell's edit, a JSON config's token under grep, a numpy array of the environment, a DSN
in a dict, a slice kept in a variable, the Explain prompt, a compaction stub, a persist hook, an MCP
header with an innocent name, a tool's closure on its way to a cluster, a user tool's own derivation.
"""

from __future__ import annotations

import os

import pytest

from nbagent import Agent, AssistantMessage, Hooks, ScriptedModel, ToolContext, ToolResult, tool, toolbox
from nbagent.safety import secrets as _secrets

from .conftest import Recorder, call, everything_model_saw, sh, text_of

pytestmark = pytest.mark.timeout(120)

KEY = "Kq3Vx8Nm2Lp7Rt4Wz9Bc6Yd1Hf5Gj0Ss"
PASSWORD = "Pl4nk-Ocean-Dw31"
GITHUB = "ghp_" + "R8s2Kd7Lq4Nz1Vb6Xm3Wc9Pt5Yh0Jf2Ga8Ue"
DSN = "https://f3a9B7c2D8e1F6a4B0c5D9e2F7a1B3c8@o451.ingest.sentry.io/6021"


@pytest.fixture
def keyed(ws, monkeypatch):
    monkeypatch.setenv("MYSVC_API_KEY", KEY)
    monkeypatch.setenv("ORDERS_DB", f"postgresql://orders:{PASSWORD}@10.0.0.7/orders")
    return ws


def _run(ws, *turns, namespace=None, mode="default", approve=False, **kw):
    approver = Recorder(approve)
    messages = [AssistantMessage(tool_calls=list(t) if isinstance(t, list) else [t]) for t in turns]
    agent = Agent(model=ScriptedModel(messages + [AssistantMessage(text="done")]),
                  tools=toolbox.all(workspace=ws, namespace=namespace), approver=approver, mode=mode,
                  workspace=ws, **kw)
    return agent.run_sync("go"), approver


def _pieces(secret: str, text: str, n: int = 4) -> list[str]:
    return [secret[i:i + n] for i in range(len(secret) - n + 1) if secret[i:i + n] in text]


# ---------------------------------------------------------------------------------------------------------
# Edits as oracles
# ---------------------------------------------------------------------------------------------------------
def test_edit_file_in_accept_edits_is_no_oracle_on_a_key(keyed):
    """acceptEdits allows edits unasked; `old` guessed at the key's start would be found, or not."""
    (keyed / "service.cfg").write_text(f"endpoint = https://api.example\napi_key = {KEY}\n")
    right = call("edit_file", path="service.cfg", old=f"api_key = {KEY[:3]}", new="api_key = x")
    wrong = call("edit_file", path="service.cfg", old="api_key = zzz", new="api_key = x")
    run, _ = _run(keyed, right, wrong, mode="acceptEdits")
    assert text_of(run.calls[0]) == text_of(run.calls[1]) and run.calls[0].status == "error"
    assert KEY in (keyed / "service.cfg").read_text()


def test_control_edit_file_edits_a_file_holding_a_key_and_keeps_the_key(keyed):
    (keyed / "service.cfg").write_text(f"endpoint = https://api.example\napi_key = {KEY}\n")
    run, _ = _run(keyed, call("read_file", path="service.cfg"),
                  call("edit_file", path="service.cfg", old="api_key = [REDACTED:MYSVC_API_KEY]\n",
                       new="api_key = [REDACTED:MYSVC_API_KEY]\ntimeout = 30\n"),
                  call("edit_file", path="service.cfg", old="api.example", new="api.example.org"), mode="acceptEdits")
    assert [r.status for r in run.calls] == ["ok", "ok", "ok"], [text_of(r) for r in run.calls]
    assert (keyed / "service.cfg").read_text() == f"endpoint = https://api.example.org\napi_key = {KEY}\ntimeout = 30\n"
    assert KEY not in everything_model_saw(run)


def test_edit_cell_is_no_oracle_on_a_key_in_a_cell(keyed):
    pytest.importorskip("IPython")
    from nbagent.jupyter.notebook.cells import NotebookState
    from nbagent.jupyter.notebook.tools import _edit_problem

    state = NotebookState(shell=None)
    state.seen["c1"] = f'client = Client(key="{KEY}")\nclient.ping()'
    right = _edit_problem(state, "c1", f'key="{KEY[:4]}', 'key="x')
    wrong = _edit_problem(state, "c1", 'key="abcd', 'key="x')
    assert right == wrong and "does not occur" in right and KEY not in right
    assert _edit_problem(state, "c1", "client.ping()", "client.ping(timeout=5)") is None  # control


# ---------------------------------------------------------------------------------------------------------
# Credentials known by their shape only
# ---------------------------------------------------------------------------------------------------------
def test_grep_is_no_oracle_on_a_token_in_a_json_config(ws):
    """A GitHub token in a config file, in no variable: grep's yes/no on its prefix."""
    (ws / "deploy.json").write_text('{\n  "repo": "acme/site",\n  "token": "' + GITHUB + '"\n}\n')
    run, _ = _run(ws, call("grep", pattern='"token": "ghp_R8', path="deploy.json"),
                  call("grep", pattern='"token": "ghp_Q1', path="deploy.json"),
                  call("grep", pattern="acme/site", path="deploy.json"))
    assert "No matches" in text_of(run.calls[0]) and "No matches" in text_of(run.calls[1])
    assert "deploy.json:2" in text_of(run.calls[2])  # control: grep finds the rest
    assert GITHUB[4:10] not in everything_model_saw(run)


def test_cut_over_a_connection_string_asks_first(ws):
    """A connection string's password, in no variable: cut takes it apart without asking."""
    (ws / "appsettings.json").write_text('{"Db": "Server=sql1;Database=app;User Id=web;Password=' + PASSWORD + ';"}\n')
    run, approver = _run(ws, sh("cut -c55-60 appsettings.json"), sh("cut -c1-5 notes.md"))
    assert [r.arguments["command"] for r in approver.asked] == ["cut -c55-60 appsettings.json"]
    assert "hello" in text_of(run.calls[1])  # control: cut runs unasked elsewhere


def test_spaced_characters_of_a_key_are_redacted_in_a_file(keyed):
    """`od -c`-like output kept in a file: the key with a space between each character."""
    (keyed / "dump.txt").write_text("0000000  " + "  ".join(KEY) + "\n0000040  plain text here\n")
    run, _ = _run(keyed, call("read_file", path="dump.txt"))
    seen = text_of(run.calls[0])
    assert "plain text here" in seen  # control
    assert " ".join(KEY[4:9]) not in seen and "  ".join(KEY[4:9]) not in seen


def test_a_credential_named_innocently_stays_secret_in_a_commands_output(keyed):
    """ORDERS_DB holds a password; its name says nothing. An approved command prints it, whole and cut."""
    os.environ["MYSVC_REGION"] = "eu-west-1"
    try:
        run, _ = _run(keyed, sh('echo "db: $ORDERS_DB"; echo "$ORDERS_DB" | cut -c18-'),
                      sh('echo "region: $MYSVC_REGION"'), approve=True)
    finally:
        del os.environ["MYSVC_REGION"]
    assert "db:" in text_of(run.calls[0])
    assert "region: eu-west-1" in text_of(run.calls[1])  # control: other variables are there
    assert not _pieces(PASSWORD, everything_model_saw(run), 6)


# ---------------------------------------------------------------------------------------------------------
# Live values
# ---------------------------------------------------------------------------------------------------------
def test_inspect_variable_cannot_index_a_numpy_array_of_the_environment(keyed):
    np = pytest.importorskip("numpy")
    namespace = {"env": np.array(sorted(os.environ.items())), "sizes": np.arange(12).reshape(3, 4)}
    rows = sorted(os.environ)
    i = rows.index("ORDERS_DB")
    run, approver = _run(keyed, call("inspect_variable", name=f"env[{i}]"), call("inspect_variable", name="sizes"),
                         namespace=namespace)
    assert [r.arguments["name"] for r in approver.asked] == [f"env[{i}]"]
    assert "shape: (3, 4)" in text_of(run.calls[1])  # control: arrays of numbers are inspected freely


def test_a_dsn_under_an_innocent_key_is_a_credential(ws):
    namespace = {"settings": {"monitoring": {"dsn": DSN, "sample_rate": 0.2}}, "plain": {"retries": 3}}
    run, approver = _run(ws, call("inspect_variable", name='settings["monitoring"]'),
                         call("inspect_variable", name="plain"), namespace=namespace)
    assert [r.arguments["name"] for r in approver.asked] == ['settings["monitoring"]']
    assert "'retries': 3" in text_of(run.calls[1])  # control


def test_a_slice_of_a_key_kept_in_a_variable_is_not_shown(keyed):
    namespace = {"prefix": KEY[:4], "suffix": KEY[-3:], "unit": "km"}
    run, approver = _run(keyed, call("list_variables"), call("inspect_variable", name="prefix"), namespace=namespace)
    listing = text_of(run.calls[0])
    assert KEY[:4] not in listing and KEY[-3:] not in listing and "'km'" in listing  # control: other strings show
    assert [r.arguments["name"] for r in approver.asked] == ["prefix"]


def test_a_user_tools_own_derivation_is_withheld_unless_approved(keyed):
    """A read-only tool says its answer is derived from a credential: auto-allowed, the gate withholds it."""

    @tool(read_only=True)
    def key_length(ctx: ToolContext) -> str:
        """How long the service key is, and how it starts."""
        ctx.derived_from("the value of MYSVC_API_KEY")
        return f"{len(KEY)} characters, starting {KEY[:2]}"

    @tool
    def key_length_asking(ctx: ToolContext) -> str:
        """The same, asking first."""
        ctx.derived_from("the value of MYSVC_API_KEY")
        return f"{len(KEY)} characters, starting {KEY[:2]}"

    agent = Agent(model=ScriptedModel([AssistantMessage(tool_calls=[call("key_length")]),
                                       AssistantMessage(tool_calls=[call("key_length_asking")]),
                                       AssistantMessage(text="done")]),
                  tools=[key_length, key_length_asking], approver=Recorder(True), workspace=keyed)
    run = agent.run_sync("go")
    assert "withheld" in text_of(run.calls[0]) and KEY[:2] not in text_of(run.calls[0])
    assert "32 characters" in text_of(run.calls[1])  # control: with the person's approval it goes through


def test_a_persist_hook_cannot_put_a_key_back(keyed):
    def hook(call_, result):
        return ToolResult(result.text + f"\n(debug: {os.environ['MYSVC_API_KEY']})", details=result.details)

    run, _ = _run(keyed, call("read_file", path="notes.md"), hooks=Hooks(tool_result_persist=[hook]))
    assert "hello notes" in text_of(run.calls[0]) and "(debug: " in text_of(run.calls[0])  # control: the hook ran
    assert KEY not in everything_model_saw(run)


# ---------------------------------------------------------------------------------------------------------
# What is sent without a tool call
# ---------------------------------------------------------------------------------------------------------
def test_the_explain_prompt_shows_no_credential_value(keyed):
    pd = pytest.importorskip("pandas")
    from nbagent.jupyter.panel.prompts import cell_prompt

    namespace = {"conn": os.environ["ORDERS_DB"], "frame": pd.DataFrame({"k": list(os.environ)[:3] + ["ORDERS_DB"],
                                                                       "v": [os.environ[k] for k in list(os.environ)[:3]]
                                                                       + [os.environ["ORDERS_DB"]]}),
                 "head": KEY[:5], "rows": 120}
    cell = {"id": "c1", "source": "engine = create_engine(conn)\nframe.head(); head; rows",
            "outputs": [{"output_type": "error", "ename": "OperationalError", "evalue": "could not connect",
                         "traceback": ["OperationalError: could not connect"]}]}
    for kind in ("explain", "ask", "fix"):
        prompt, _ = cell_prompt(kind, cell, "why?", namespace)
        assert "rows: int = 120" in prompt  # control: plain values go along
        assert PASSWORD not in prompt and PASSWORD[:5] not in prompt and KEY[:5] not in prompt, kind
        assert "conn: str (its value is not shown" in prompt and "frame: DataFrame (its value is not shown" in prompt


def test_a_compaction_stub_of_a_stored_result_carries_no_key(keyed):
    """A transcript read back (a resumed conversation) whose result held a key: the stub quotes its start."""
    from nbagent.budget.compaction import stub_text, transcript_text
    from nbagent.messages import TextBlock, ToolResultMessage

    message = ToolResultMessage("c1", "read_file", [TextBlock(f"token: {KEY} and more " + "x" * 500)], False)
    assert KEY[:8] not in stub_text(message) and "token: [REDACTED" in stub_text(message)
    assert KEY[:8] not in transcript_text([message]) and "and more" in transcript_text([message])  # control


def test_an_mcp_header_with_an_innocent_name_is_a_secret():
    from nbagent.mcp import parse_servers

    tenant = "Tn7Qw2Er9Ty4Ui1Op6As3Df8Gh5Jk0Lz"
    parse_servers({"crm": {"url": "https://crm.example/mcp", "headers": {"X-Tenant": tenant, "Accept": "application/json"}}})
    assert tenant not in _secrets.redact(f"tenant {tenant}") and tenant[3:11] not in _secrets.redact(f"x {tenant[3:11]} y")
    assert "application/json" in _secrets.redact("Accept: application/json")  # control: ordinary values stay


def test_a_tools_closure_holding_a_key_does_not_travel_to_workers(keyed):
    pytest.importorskip("cloudpickle")
    import cloudpickle

    from nbagent.batch.dask_keys import check_no_secret as _refuse_secrets
    from nbagent.errors import ConfigurationError

    secret = os.environ["MYSVC_API_KEY"]

    @tool
    def lookup(q: str) -> str:
        """Look it up."""
        return f"{q} with {secret}"

    with pytest.raises(ConfigurationError, match="MYSVC_API_KEY"):
        _refuse_secrets(cloudpickle.dumps(lookup))

    @tool
    def plain(q: str) -> str:
        """Look it up, keyless."""
        return q.upper()

    _refuse_secrets(cloudpickle.dumps(plain))  # control: a keyless tool travels


def test_content_for_the_person_only_stays_out_of_reach_after_the_transcript_lets_go(ws):
    """An MCP server's note addressed to the user only is kept in the call's details; a compaction stub
    points the model at the details (`_agent_results[...]` in a notebook). inspect_variable must ask."""
    pytest.importorskip("mcp")
    import sys
    from pathlib import Path

    server = {"svc": {"command": sys.executable, "args": [str(Path(__file__).parent / "servers" / "keyed.py")],
                      "trusted": True, "env": {"SERVICE_TOKEN": "svc-token-Zx81Lq", "NOTE": "salary review: 2 staff"}}}
    agent = Agent(model=ScriptedModel([AssistantMessage(tool_calls=[call("svc__whoami")]), AssistantMessage(text="ok")]),
                  mcp_servers=server, workspace=ws, approver=Recorder(False))
    run = agent.run_sync("go")
    assert run.calls[0].status == "ok" and "salary" not in everything_model_saw(run)
    namespace = {"_agent_results": {run.calls[0].id: run.calls[0].details}, "rows": [1, 2]}
    rid = run.calls[0].id
    later, approver = _run(ws, call("inspect_variable", name=f'_agent_results["{rid}"]'),
                           call("inspect_variable", name=f'_agent_results["{rid}"].hidden'),
                           call("inspect_variable", name="rows"), namespace=namespace)
    assert len(approver.asked) == 2 and "salary" not in everything_model_saw(later)
    assert "[1, 2]" in text_of(later.calls[2])  # control
