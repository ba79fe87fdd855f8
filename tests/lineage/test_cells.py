"""A run's calls cut to what its final state needs, and the cells that make it again (no kernel: a plain
Agent with the python tool in a namespace of its own)."""

from __future__ import annotations

import json
import subprocess
import sys

import nbformat
import pytest

from nbagent import Agent, AssistantMessage, ScriptedModel, ToolCall, toolbox
from nbagent.lineage import CellSource, plan_cells, signature
from nbagent.toolbox import PythonRunner


def agent_run(*codes: str, runner: PythonRunner | None = None, extensions=()):
    runner = runner or PythonRunner()
    model = ScriptedModel([AssistantMessage(tool_calls=[ToolCall(id=f"c{i}", name="python", arguments={"code": c})])
                           for i, c in enumerate(codes)] + ["done"])
    agent = Agent(model=model, tools=toolbox.all(runner=runner), approver="allow", extensions=list(extensions))
    return agent.run_sync("go"), runner


def codes_of(cells) -> list[str]:
    return [c["source"].split("\n", 1)[1] for c in cells]


def test_replaced_failed_and_looking_calls_are_left_out_with_their_reason():
    run, _ = agent_run("a = [1, 2]", "b = len(a)", "b = sum(a)", "print(a)", "a.append(undefined)", "c = b * 2")
    plan = plan_cells(run)
    assert codes_of(plan.cells()) == ["a = [1, 2]", "b = sum(a)", "c = b * 2"]
    assert plan.left_out == {"c1": "what it changed was replaced later (by call c2)",
                             "c3": "it changed nothing: it only looked", "c4": "it failed"}
    assert plan.targets == ["a", "b", "c"] and plan.not_recreated == {} and plan.needs == []


def test_a_call_that_changes_a_value_in_place_keeps_the_one_that_made_it():
    run, _ = agent_run("rows = []", "rows.append(1)", "total = 5", "rows.append(2)")
    assert codes_of(run.to_cells()) == ["rows = []", "rows.append(1)", "total = 5", "rows.append(2)"]


def test_a_value_read_through_a_helper_keeps_what_the_helper_reads():
    run, _ = agent_run("SCALE = 3", "def helper(x):\n    return x * SCALE", "unused = 1", "unused = 2",
                       "out = helper(2)")
    assert codes_of(run.to_cells()) == ["SCALE = 3", "def helper(x):\n    return x * SCALE", "unused = 2",
                                        "out = helper(2)"]


def test_a_name_whose_last_change_failed_cannot_be_made_again():
    run, _ = agent_run("x = [1]", "x.append(2)\nraise ValueError('half way')")
    plan = plan_cells(run)
    assert "x" in plan.not_recreated and "failed" in plan.not_recreated["x"]
    assert run.kernel_only == ["x"]  # it is in the kernel all the same


def test_what_the_notebook_defines_is_not_kernel_only_and_what_it_lacks_is_needed():
    runner = PythonRunner()
    runner.namespace.update({"data": [3, 1, 2], "other": 1})

    class Cells(CellSource):
        namespace = runner.namespace

        def defined_names(self):
            return {"data"}

    run, _ = agent_run("data.sort()", "top = data[-1] + other", "gone = 1", "del gone", runner=runner,
                       extensions=[Cells()])
    assert run.kernel_only == ["top"]  # data is the notebook's; gone was made and deleted
    plan = plan_cells(run)
    assert codes_of(plan.cells()) == ["data.sort()", "top = data[-1] + other"]
    assert plan.needs == ["other"]  # read from before the run, and no cell defines it


def test_cells_are_nbformat_and_carry_their_provenance():
    run, _ = agent_run("a = 1", "b = a + 1")
    cells = run.to_cells()
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.from_dict(c) for c in cells]
    nbformat.validate(nb)
    assert cells[1]["metadata"]["nbagent"] == {
        "action": "recreated", "run": run.id, "model": "scripted", "call": "c1", "calls": ["c1"], "tool": "python",
        "step": 2, "steps": 2, "makes": ["b"]}
    assert cells[1]["source"] == f"# nbagent: step 2 of 2 of run {run.id} (scripted), call c1; makes b\nb = a + 1"


def test_a_call_id_cannot_break_out_of_the_comment():
    runner = PythonRunner()
    model = ScriptedModel([AssistantMessage(tool_calls=[ToolCall(id="x\nimport os; os.system('boom')#",
                                                                 name="python", arguments={"code": "a = 1"})]), "ok"])
    run = Agent(model=model, tools=toolbox.all(runner=runner), approver="allow").run_sync("go")
    source = run.to_cells()[0]["source"]
    assert source.count("\n") == 1 and source.endswith("\na = 1")  # one comment line, then the code
    assert "\nimport" not in source


def test_the_code_is_exactly_what_ran_hidden_characters_included():
    code = "label = 'admin\u202e\u2066'  # looks harmless"
    run, runner = agent_run(code)
    assert run.to_cells()[0]["source"].split("\n", 1)[1] == code == runner.executions[0].code


def test_without_watching_there_is_nothing_to_cut():
    runner = PythonRunner()
    runner.watch_state = False  # the mechanism off: records say nothing, so no cells and no names
    run, _ = agent_run("a = 1", runner=runner)
    assert run.calls[0].state_change is None and run.to_cells() == [] and run.kernel_only == []


SIGNATURE = """
import json, sys
import numpy as np, pandas as pd
sys.path.insert(0, {root!r})
from nbagent.lineage import signature
def helper(frame, k=2):
    return frame.a.sum() * k
class Scaler:
    factor = 3
    def apply(self, x):
        return x * self.factor
values = {{"frame": pd.DataFrame({{"a": [1.5, 2.0], "b": ["x", "y"]}}), "array": np.arange(6).reshape(2, 3),
          "tags": {{"alpha", "beta", "gamma"}}, "config": {{"k": [1, 2], "name": "run"}}, "helper": helper,
          "Scaler": Scaler, "n": 42}}
print(json.dumps({{k: signature(v) for k, v in values.items()}}))
"""


def test_signatures_are_the_same_in_another_process():
    from pathlib import Path

    root = str(Path(__file__).resolve().parents[2])
    code = SIGNATURE.format(root=root)
    outs = []
    for seed in ("1", "2"):  # set order follows string hashing, which differs between processes
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                              env={"PYTHONHASHSEED": seed, "PATH": "/usr/bin:/bin"})
        assert done.returncode == 0, done.stderr
        outs.append(json.loads(done.stdout))
    assert outs[0] == outs[1]
    assert outs[0]["frame"]["how"] == "content" and outs[0]["helper"]["how"] == "code"
    assert outs[0]["tags"]["value"] == "set({'alpha', 'beta', 'gamma'})"


def test_a_function_defined_elsewhere_with_the_same_code_has_the_same_signature():
    a, b = {}, {}
    exec(compile("def f(x):\n    return x + 1\n", "<agent-3>", "exec"), a)
    exec(compile("# a comment first\n\ndef f(x):\n    return x + 1\n", "/tmp/cell.py", "exec"), b)
    assert signature(a["f"])["hash"] == signature(b["f"])["hash"]
    exec("def f(x):\n    return x + 2\n", b)
    assert signature(a["f"])["hash"] != signature(b["f"])["hash"]


@pytest.mark.parametrize("value", [object(), (lambda: None).__code__])
def test_values_that_cannot_be_hashed_compare_by_type(value):
    sig = signature(value)
    assert sig["type"] and (sig["how"] in ("type", "pickle"))


def test_the_stored_session_keeps_the_names(tmp_path):
    from nbagent.sessions import load_session

    model = ScriptedModel([AssistantMessage(tool_calls=[ToolCall(id="c0", name="python",
                                                                 arguments={"code": "rows = [1]\nrows.append(2)"})]),
                           "done"])
    agent = Agent(model=model, tools=toolbox.all(runner=PythonRunner()), approver="allow", workspace=tmp_path,
                  session=True)
    agent.run_sync("go")
    stored = load_session(tmp_path, agent.session_id)
    assert stored.calls[0]["state"] == {"assigned": ["rows"], "rebound": [], "mutated": [], "deleted": [], "read": [],
                                        "ok": True, "exact": True, "tool": "python", "cell_id": None}
