"""Every tool passes the secret gate (SECURITY.md invariant 5), proven for each one, not door by door.

The property: what the model gets from an auto-allowed call must not depend on the value of a secret the
call could read. Each tool is run over the same sources twice (the workspace's files, the environment, the
notebook's namespace and history, a background process's log, a saved notebook, an MCP server's reply),
once holding one key and once another of the same length under the same name, with arguments chosen to take
a secret apart (a 5-character slice, a yes/no match on a guessed prefix, an index into a frame holding the
environment, an edit whose `old` is a guess): everything the model got must be the same both times. A slice,
a match, a count or an error message that depends on the key shows up as a difference. The structural half:
every result the model got went through the gate's choke point (`nbagent.calls.execution.admit`).

`TOOL_CALLS` holds the calls for each tool by name; a tool of the enumeration that has none fails the test,
so a new tool cannot join without being put through it. `test_a_tool_that_bypasses_the_gate_is_caught`
registers a tool that reads a file itself and returns a slice: the check fails, as it must. With the gate
turned off at a tool's data (`test_with_the_gate_off_a_built_in_tool_leaks`), the same check fails too.
"""

from __future__ import annotations

import difflib
import os
import re
import shutil
import sys
from pathlib import Path
from typing import Any, Callable

import pytest

from nbagent import Agent, AssistantMessage, ScriptedModel, ToolCall, ToolResult, tool, toolbox
from nbagent.calls import execution, gate

pytestmark = pytest.mark.timeout(240)

HERE = Path(__file__).parent
KEYS = {"A": "zq7Wm3Kp9Lx2Vb8Nr4Tc6Yh1Jd5Fg0Qs", "B": "Hd4Rt8Lm2Xc6Vn0Bq9Wz3Kp7Fy1Gs5Jj"}
PASSWORDS = {"A": "Tr0ub4dor3-horse", "B": "Xq9mZ2kL7-staple"}  # in DATABASE_URL: no credential's name
GUESS = KEYS["A"]
"""What the attacker's arguments guess: right in run A, wrong in run B."""
NOTEBOOK_CELL = "c-secret"


def c(name: str, /, **arguments: Any) -> ToolCall:
    return ToolCall(name=name, arguments=arguments)


TOOL_CALLS: dict[str, list[ToolCall]] = {
    "python": [c("python", code="import os\nos.environ['MYSVC_API_KEY'][:5]")],
    "list_variables": [c("list_variables")],
    "inspect_variable": [c("inspect_variable", name="env_frame.value.str[3]"),
                         c("inspect_variable", name="env_frame.iloc[(0, 1)]"),
                         c("inspect_variable", name='cfg["service"]["token"]'),
                         c("inspect_variable", name="head"),
                         c("inspect_variable", name="rows")],
    "history": [c("history", limit=20)],
    "read_file": [c("read_file", path="settings.ini"), c("read_file", path="wrapped.txt", offset=3, limit=1),
                  c("read_file", path="db.yaml"), c("read_file", path="app.log", offset=1, limit=1)],
    "list_files": [c("list_files", pattern="**/*")],
    "grep": [c("grep", pattern=f"token={GUESS[:6]}", path="."), c("grep", pattern=f"^{GUESS[5:10]}$", path="wrapped.txt"),
             c("grep", pattern=f"app:{PASSWORDS['A'][:4]}", path="db.yaml"),
             c("grep", pattern="Bearer z", path="app.log"), c("grep", pattern="service", path=".")],
    "write_file": [c("write_file", path="copy.txt", content="plain\n")],
    "edit_file": [c("edit_file", path="settings.ini", old=f"token={GUESS[:3]}", new="token=x"),
                  c("edit_file", path="notes.md", old="hello", new="hi")],
    "shell": [c("shell", command="cut -c7-11 settings.ini"), c("shell", command="cat settings.ini"),
              c("shell", command=f"grep -c 'token={GUESS[:3]}' settings.ini"), c("shell", command="printenv DATABASE_URL"),
              c("shell", command="cat settings.ini wrapped.txt", background=True)],
    "process": [c("process", action="log", id="p1", offset=o, limit=5) for o in (14, 19, 24, 30)]
               + [c("process", action="poll", id="p1", wait_ms=2000), c("process", action="list")],
    "read_notebook": [c("read_notebook"), c("read_notebook", cell_id=NOTEBOOK_CELL)],
    "edit_cell": [c("edit_cell", cell_id=NOTEBOOK_CELL, old=f'"{GUESS[:4]}', new='"x')],
    "insert_cell": [c("insert_cell", source="1 + 1")],
    "delete_cell": [c("delete_cell", cell_id=NOTEBOOK_CELL)],
    "run_cell": [c("run_cell", cell_id=NOTEBOOK_CELL)],
    "submit_result": [c("submit_result", result=3)],
    "svc__whoami": [c("svc__whoami")],
}
"""For each tool, the calls that try to take a secret apart (and one or two that simply use it)."""


# ---------------------------------------------------------------------------------------------------
# The sources, holding key A or key B
# ---------------------------------------------------------------------------------------------------
def plant(base: Path, run: str, monkeypatch) -> tuple[Path, dict[str, Any]]:
    key, password = KEYS[run], PASSWORDS[run]
    monkeypatch.setenv("MYSVC_API_KEY", key)
    monkeypatch.setenv("DATABASE_URL", f"postgres://app:{password}@db.internal:5432/sales")
    ws = base / "ws"
    if ws.exists():
        shutil.rmtree(ws)
    ws.mkdir()
    (ws / "notes.md").write_text("hello notes\n")
    (ws / "settings.ini").write_text(f"[service]\ntoken={key}\n")
    (ws / "app.log").write_text(f"GET /orders 200 Authorization: Bearer {key}\n")
    (ws / "wrapped.txt").write_text("\n".join(key[i:i + 5] for i in range(0, len(key), 5)) + "\n")
    (ws / "db.yaml").write_text(f"url: postgres://app:{password}@db.internal:5432/sales\n")
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(f'token = "{key}"\nprint(len(token))', id=NOTEBOOK_CELL),
                nbformat.v4.new_markdown_cell("plain notes", id="c-plain")]
    nbformat.write(nb, ws / "analysis.ipynb")
    monkeypatch.setenv("NBAGENT_NOTEBOOK", str(ws / "analysis.ipynb"))
    pd = pytest.importorskip("pandas")
    namespace = {
        "api_key": key,
        "head": key[:4],  # a slice the notebook kept: too short for redaction to recognise
        "cfg": {"service": {"token": key, "timeout": 30}},
        "env_frame": pd.DataFrame([("DATABASE_URL", os.environ["DATABASE_URL"]), ("MYSVC_API_KEY", key)],
                                  columns=["name", "value"]),
        "rows": [1, 2, 3],
        "os": os,
    }
    return ws, namespace


def kernel_shell(namespace: dict[str, Any]) -> Any:
    """The in-process IPython shell, fresh (namespace, history, execution count), holding `namespace` and a
    history with the key in a cell."""
    pytest.importorskip("IPython")
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    shell.reset(new_session=True)
    for name in [n for n in vars(shell) if n.startswith("_nbagent_")]:  # a page an earlier test connected, its
        delattr(shell, name)  # live notebook: this one's tools read analysis.ipynb from the disk, as a new kernel's
    shell.user_ns.update(namespace)
    shell.run_cell(f'service_key = "{namespace["api_key"]}"\nlen(service_key)', store_history=True)
    return shell


def mcp_servers(run: str) -> dict[str, Any]:
    return {"svc": {"command": sys.executable, "args": [str(HERE / "servers" / "keyed.py")], "trusted": True,
                    "env": {"SERVICE_TOKEN": "svc-" + KEYS[run][::-1], "NOTE": "for the person only"}}}


# ---------------------------------------------------------------------------------------------------
# The check
# ---------------------------------------------------------------------------------------------------
_NOISE = [(re.compile(r"\b\d+(?:\.\d+)? ?(?:ms|s)\b"), "<time>"), (re.compile(r"pytest-\d+/[^/\s]+"), "<tmp>"),
          (re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b"), "<uuid>")]


def _seen(text: str) -> str:
    for pattern, by in _NOISE:
        text = pattern.sub(by, text)
    return text


def _script(calls: list[ToolCall]) -> ScriptedModel:
    return ScriptedModel([AssistantMessage(tool_calls=[call]) for call in calls] + [AssistantMessage(text="done")])


def run_once(base: Path, run: str, monkeypatch, make_tools: Callable[[Path, dict[str, Any]], list[Any]],
             calls: list[ToolCall], **agent: Any) -> tuple[list[tuple[str, str, str]], Any]:
    ws, namespace = plant(base, run, monkeypatch)
    tools = make_tools(ws, namespace)
    if "mcp_servers" in agent:
        agent["mcp_servers"] = mcp_servers(run)
    agent_ = Agent(model=_script(calls), tools=tools, workspace=ws, approver=lambda request: False, max_turns=len(calls) + 2,
                   mode=agent.pop("mode", "acceptEdits"), **agent)
    result = agent_.run_sync("go")
    seen = [(r.name, r.status, _seen(r.message.text if r.message is not None else "")) for r in result.calls]
    return seen, result


def differences(base: Path, monkeypatch, make_tools, calls: list[ToolCall], **agent: Any) -> list[str]:
    """The calls whose model-visible answer differed between the key-A and key-B runs (with the diff), and
    the calls whose result did not pass the gate's choke point."""
    admitted: list[ToolResult] = []  # what the gate's screening step produced (kept alive: compared by identity)
    real_screen = gate.redact_result

    def spy(result: ToolResult, *args: Any) -> ToolResult:
        out = real_screen(result, *args)
        admitted.append(out)
        return out

    monkeypatch.setattr(gate, "redact_result", spy)
    a, run_a = run_once(base, "A", monkeypatch, make_tools, list(calls), **dict(agent))
    b, _ = run_once(base, "B", monkeypatch, make_tools, list(calls), **dict(agent))
    problems = []
    assert len(a) == len(b) == len(calls), (a, b)
    for (name, status_a, text_a), (_, status_b, text_b) in zip(a, b):
        if (status_a, text_a) != (status_b, text_b):
            diff = "\n".join(difflib.unified_diff(text_a.splitlines(), text_b.splitlines(), "key A", "key B", lineterm=""))
            problems.append(f"{name}: the answer depends on the key ({status_a} / {status_b})\n{diff}")
    for rec in run_a.calls:
        if not any(rec.result is r for r in admitted):
            problems.append(f"{rec.name}: a result reached the model without passing the gate")
    return problems


def _toolbox(ws: Path, namespace: dict[str, Any]) -> list[Any]:
    return toolbox.all(workspace=ws, namespace=namespace)


def _kernel(ws: Path, namespace: dict[str, Any]) -> list[Any]:
    from nbagent.jupyter.notebook.kernel_tools import kernel_toolbox

    return kernel_toolbox(kernel_shell(namespace), workspace=ws)


def calls_for(tools: list[Any]) -> list[ToolCall]:
    missing = [t.name for t in tools if t.name not in TOOL_CALLS]
    assert not missing, f"tools without calls in TOOL_CALLS (put every tool through the gate's check): {missing}"
    out: list[ToolCall] = []
    names = [t.name for t in tools]
    for name in names:
        if name != "process":
            out += TOOL_CALLS[name]
    # the background command first (as p1), the process calls last: by then it has long ended
    out.sort(key=lambda call: not call.arguments.get("background"))
    if "process" in names:
        out += TOOL_CALLS["process"]
    return [ToolCall(name=call.name, arguments=dict(call.arguments)) for call in out]


# ---------------------------------------------------------------------------------------------------
# Every tool
# ---------------------------------------------------------------------------------------------------
def test_every_tool_of_the_toolbox_passes_the_gate(tmp_path, monkeypatch):
    tools = toolbox.all(workspace=tmp_path)
    assert [t.name for t in tools] == list(toolbox.TOOL_NAMES)
    problems = differences(tmp_path, monkeypatch, _toolbox, calls_for(tools))
    assert not problems, "\n\n".join(problems)


def test_every_tool_of_the_kernel_toolbox_and_the_notebook_passes_the_gate(tmp_path, monkeypatch):
    pytest.importorskip("IPython")
    probe_ws, probe_ns = plant(tmp_path, "A", monkeypatch)
    tools = _kernel(probe_ws, probe_ns)
    assert {"read_notebook", "edit_cell", "insert_cell", "delete_cell", "run_cell"} <= {t.name for t in tools}
    problems = differences(tmp_path, monkeypatch, _kernel, calls_for(tools))
    assert not problems, "\n\n".join(problems)


def test_structured_submit_and_an_mcp_tool_pass_the_gate(tmp_path, monkeypatch):
    pytest.importorskip("mcp")
    calls = TOOL_CALLS["svc__whoami"] + TOOL_CALLS["submit_result"]
    problems = differences(tmp_path, monkeypatch, lambda ws, ns: [], calls, output_type=int, mcp_servers=True)
    assert not problems, "\n\n".join(problems)
    # control: the server answered, its token redacted, its note for the person kept out
    seen, run = run_once(tmp_path, "A", monkeypatch, lambda ws, ns: [], calls, output_type=int, mcp_servers=True)
    assert seen[0][1] == "ok" and "connected with token [REDACTED:SERVICE_TOKEN]" in seen[0][2], seen
    assert "for the person only" not in repr(run.messages) and run.output == 3


# ---------------------------------------------------------------------------------------------------
# The check fails when it must
# ---------------------------------------------------------------------------------------------------
def test_a_tool_that_bypasses_the_gate_is_caught(tmp_path, monkeypatch):
    """A read-only tool that reads a file itself and hands out a slice: redaction cannot see four
    characters of a key, and the check says so."""

    def make(ws: Path, namespace: dict[str, Any]) -> list[Any]:
        @tool(read_only=True)
        def peek(path: str, offset: int) -> str:
            """Four characters of a file."""
            return (ws / path).read_text()[offset:offset + 4]

        return [*_toolbox(ws, namespace), peek]

    TOOL_CALLS_WITH_PEEK = [c("read_file", path="settings.ini"), c("peek", path="settings.ini", offset=16)]
    problems = differences(tmp_path, monkeypatch, make, TOOL_CALLS_WITH_PEEK)
    assert [p.split(":")[0] for p in problems] == ["peek"], problems


def test_a_result_that_skips_the_choke_point_is_caught(tmp_path, monkeypatch):
    """The structural half: a result that reaches the model without the gate is counted as such."""
    real = execution.admit

    def skip_grep(result, **kw):
        return result if kw.get("tool") == "grep" else real(result, **kw)

    monkeypatch.setattr(execution, "admit", skip_grep)
    problems = differences(tmp_path, monkeypatch, _toolbox, [c("grep", pattern="service", path=".")])
    assert any("without passing the gate" in p for p in problems), problems


OFF = {
    "grep": ("nbagent.toolbox._grep.screen_lines", lambda lines: lines, [c("grep", pattern=f"token={GUESS[:6]}")]),
    "process": ("nbagent.toolbox._background.screen", lambda text: text,
                [c("shell", command="cat settings.ini", background=True),
                 c("process", action="poll", id="p1", wait_ms=5000), c("process", action="list"),
                 c("process", action="log", id="p1", offset=16, limit=5)]),
    "read_file": ("nbagent.toolbox._files.screen_lines", lambda lines: lines,
                  [c("read_file", path="wrapped.txt", offset=3, limit=1)]),
    "edit_file": ("nbagent.toolbox._edits.Screened", None,
                  [c("edit_file", path="settings.ini", old=f"token={GUESS[:3]}", new="token=x")]),
    "inspect_variable": ("nbagent.toolbox._python.credential_holder", lambda value, name="": None,
                         [c("inspect_variable", name="env_frame.value.str[3]")]),
}


@pytest.mark.parametrize("name", sorted(OFF))
def test_with_the_gate_off_a_built_in_tool_leaks(tmp_path, monkeypatch, name):
    target, replacement, calls = OFF[name]
    if replacement is None:  # the identity view: `old` looked for in the raw text
        class Raw:
            def __init__(self, raw: str) -> None:
                self.raw = self.text = raw
                self.tokens = []

            def count(self, old: str) -> int:
                return self.raw.count(old)

            def replace(self, old: str, new: str, count: int = -1) -> str:
                return self.raw.replace(old, new, count)

        replacement = Raw
    monkeypatch.setattr(target, replacement)
    problems = differences(tmp_path, monkeypatch, _toolbox, calls)
    assert any(p.startswith(calls[-1].name + ":") for p in problems), problems
