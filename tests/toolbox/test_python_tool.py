"""The python tool (headless runner) and the namespace tools: list_variables, inspect_variable, history."""

from __future__ import annotations

import asyncio
import sys
import threading
import time
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import pandas as pd  # noqa: E402
import pytest  # noqa: E402

from nbagent import Agent, AssistantMessage, ImageBlock, ScriptedModel, ToolCall, toolbox  # noqa: E402
from nbagent.events import ToolCallProgress  # noqa: E402
from nbagent.toolbox import Execution, PythonRunner  # noqa: E402

from tests.toolbox.support import Runner  # noqa: E402


@pytest.fixture
def ns() -> dict:
    return {"__name__": "__main__"}


@pytest.fixture
def py(ns: dict, ws: Path) -> Runner:
    return Runner(toolbox.all(workspace=ws, namespace=ns), mode="bypassPermissions", workspace=ws)


def test_prints_and_the_last_value(py: Runner, ns: dict) -> None:
    rec = py.call("python", code="x = 20\nprint('hello')\nx + 1")
    assert rec.status == "ok"
    assert rec.result.text == "hello\nOut: 21"
    assert rec.details == 21
    assert ns["x"] == 20
    assert rec.label == "Ran Python: x = 20"


def test_no_value_after_a_statement_or_a_semicolon(py: Runner) -> None:
    rec = py.call("python", code="y = 1")
    assert rec.result.text == "(done: no output and no value)"
    assert isinstance(rec.details, Execution)
    assert py.call("python", code="y + 1;").result.text == "(done: no output and no value)"


def test_stderr_is_captured(py: Runner) -> None:
    rec = py.call("python", code="import sys\nprint('out')\nprint('oops', file=sys.stderr)")
    assert rec.result.text == "out\n[stderr]\noops"
    assert rec.details.stdout == "out\n" and rec.details.stderr == "oops\n"


def test_a_dataframe_stays_a_dataframe(py: Runner, ns: dict) -> None:
    ns["pd"] = pd
    rec = py.call("python", code="df = pd.DataFrame({'a': range(10_000), 'b': ['x'] * 10_000})\ndf")
    assert isinstance(rec.details, pd.DataFrame)
    assert rec.details is ns["df"]
    assert len(rec.result.text) < 3000
    assert "[10000 rows x 2 columns]" in rec.result.text


def test_a_figure_comes_back_as_an_image_and_a_live_figure(py: Runner) -> None:
    rec = py.call("python", code="import matplotlib.pyplot as plt\nfig, ax = plt.subplots()\nax.plot([1, 3, 2])\nax.set_title('trend');")
    images = [b for b in rec.result.content if isinstance(b, ImageBlock)]
    assert len(images) == 1 and images[0].mime_type == "image/png"
    assert "[figure] <Figure" in rec.result.text
    from matplotlib.figure import Figure
    import matplotlib.pyplot as plt

    fig = rec.details
    assert isinstance(fig, Figure) and fig.axes[0].get_title() == "trend"
    assert plt.get_fignums() == []  # closed in pyplot: not shown again by the inline backend


def test_a_figure_as_the_last_value(py: Runner) -> None:
    rec = py.call("python", code="from matplotlib.figure import Figure\nf = Figure()\nf.add_subplot().plot([1])\nf")
    assert any(isinstance(b, ImageBlock) for b in rec.result.content)
    assert type(rec.details).__name__ == "Figure"


def test_exceptions_are_error_results_with_a_trimmed_traceback(py: Runner) -> None:
    rec = py.call("python", code="def f():\n    return 1 / 0\nprint('before')\nf()")
    assert rec.status == "error"
    text = rec.result.text
    assert text.startswith("before\nTraceback")
    assert "ZeroDivisionError: division by zero" in text
    assert "return 1 / 0" in text
    assert "_runner.py" not in text and "nbagent" not in text
    assert isinstance(rec.details, Execution) and isinstance(rec.details.error, ZeroDivisionError)
    assert rec.label == "Python raised ZeroDivisionError"


def test_syntax_errors(py: Runner) -> None:
    rec = py.call("python", code="x = (1,")
    assert rec.status == "error" and "SyntaxError" in rec.result.text and "Traceback" not in rec.result.text


def test_system_exit_does_not_end_anything(py: Runner) -> None:
    rec = py.call("python", code="import sys\nsys.exit(3)")
    assert rec.status == "error" and "SystemExit: 3" in rec.result.text


def test_top_level_await(py: Runner) -> None:
    rec = py.call("python", code="import asyncio\nawait asyncio.sleep(0)\nasync def f():\n    return 5\nawait f()")
    assert rec.status == "ok" and rec.details == 5


def test_input_is_refused(py: Runner) -> None:
    rec = py.call("python", code="input('name? ')")
    assert rec.status == "error" and "EOFError" in rec.result.text


def test_output_streams_as_progress(ns: dict, ws: Path) -> None:
    tools = toolbox.all(workspace=ws, namespace=ns)
    model = ScriptedModel([AssistantMessage(tool_calls=[ToolCall(name="python", arguments={
        "code": "import time\nfor i in range(3):\n    print(i)\n    time.sleep(0.15)"})]), "done"])
    chunks: list[str] = []
    Agent(model=model, tools=tools, mode="bypassPermissions", workspace=ws).run_sync(
        "go", on_event=lambda e: chunks.append(e.update.output) if isinstance(e, ToolCallProgress) and e.update.output else None)
    assert "".join(chunks) == "0\n1\n2\n"
    assert len(chunks) >= 2  # it streamed, not one chunk at the end


def test_capture_is_per_thread(ns: dict) -> None:
    """What another thread prints while the code runs is not taken into the result."""
    runner = PythonRunner(ns)
    seen = []

    class Capture:
        def __init__(self) -> None:
            self.parts: list[str] = []

        def write(self, s: str) -> int:
            self.parts.append(s)
            return len(s)

        def flush(self) -> None:
            pass

    real, sys.stdout = sys.stdout, Capture()
    try:
        started = threading.Event()
        ns["started"] = started
        done = threading.Event()

        def other() -> None:
            started.wait(5)
            print("from another thread")
            done.set()

        t = threading.Thread(target=other)
        t.start()
        ex = runner.run("started.set()\nimport time\ntime.sleep(0.3)\nprint('from the code')")
        t.join()
        seen = sys.stdout
    finally:
        captured = sys.stdout
        sys.stdout = real
    assert ex.stdout == "from the code\n"
    assert "from another thread\n" in "".join(getattr(seen, "_nbagent_underlying", captured).parts)


def test_a_timeout_stops_pure_python_code_even_if_it_catches_exceptions(ws: Path, ns: dict) -> None:
    tools = toolbox.all(workspace=ws, namespace=ns, python_timeout=0.5)
    r = Runner(tools, mode="bypassPermissions", workspace=ws)
    code = "n = 0\nwhile True:\n    try:\n        n += 1\n    except Exception:\n        pass"
    rec = r.call("python", code=code)
    assert rec.status == "timeout"
    assert "was stopped" in rec.result.text
    before = ns["n"]
    time.sleep(0.2)
    assert ns["n"] == before  # it really stopped


def test_code_blocked_outside_python_is_reported_as_not_stopped(ws: Path, ns: dict) -> None:
    tools = toolbox.all(workspace=ws, namespace=ns, python_timeout=0.2)
    r = Runner(tools, mode="bypassPermissions", workspace=ws)
    rec = r.call("python", code="import time\ntime.sleep(3)")
    assert rec.status == "timeout"
    assert "could not be stopped" in rec.result.text


def test_the_agents_own_namespace_by_default(ws: Path) -> None:
    r = Runner(toolbox.all(workspace=ws), mode="bypassPermissions", workspace=ws)
    rec = r.run(ToolCall(name="python", arguments={"code": "a = 1"}),
                ToolCall(name="python", arguments={"code": "a + 1"}))
    assert rec.calls[1].details == 2


def test_a_runner_extension_is_used_by_module_level_tools(ws: Path) -> None:
    shared = {"__name__": "__main__", "z": 41}
    r = Runner([toolbox.python, toolbox.list_variables], mode="bypassPermissions", workspace=ws,
               extensions=[PythonRunner(shared)])
    assert r.call("python", code="z + 1").details == 42
    assert "z: int" in r.call("list_variables").result.text


# --------------------------------------------------------------------------------------------------
# list_variables, inspect_variable
# --------------------------------------------------------------------------------------------------
def test_list_variables_is_bounded_and_skips_private_names(py: Runner, ns: dict) -> None:
    import json

    ns.update(df=pd.DataFrame({"a": range(5)}), big=list(range(1_000_000)), _hidden=1, json=json,
              text="x" * 100_000, f=lambda q, r=2: q)
    rec = py.call("list_variables")
    text = rec.result.text
    assert "df: DataFrame — 5 rows x 1 columns: a" in text
    assert "big: list — 1,000,000 items" in text
    assert "_hidden" not in text
    assert text.splitlines()[-1] == "modules: json"
    assert "f: function — <lambda>(q, r=2)" in text
    assert len(text) < 1000


def test_inspect_variable(py: Runner, ns: dict) -> None:
    ns["df"] = pd.DataFrame({"a": [1, 2, None], "b": ["x", "y", "z"]})
    ns["cfg"] = {"model": {"lr": 0.1}, "items": [1, 2, 3]}
    text = py.call("inspect_variable", name="df").result.text
    assert "shape: 3 rows x 2 columns" in text and "a: float64" in text and "missing values: a: 1" in text
    assert py.call("inspect_variable", name="cfg['model']").details == {"lr": 0.1}
    assert py.call("inspect_variable", name="cfg['items'][0]").details == 1
    assert list(py.call("inspect_variable", name="df.columns").details) == ["a", "b"]


@pytest.mark.parametrize("name, words", [
    ("missing", "no variable 'missing'"),
    ("df.__class__", "special attributes"),
    ("cfg[__import__('os')]", "literal keys"),
    ("print('x')", "not a variable name"),
    ("cfg['nope']", "KeyError"),
])
def test_inspect_variable_never_runs_code(py: Runner, ns: dict, name: str, words: str) -> None:
    ns["df"] = pd.DataFrame({"a": [1]})
    ns["cfg"] = {}
    rec = py.call("inspect_variable", name=name)
    assert rec.status == "error" and words in rec.result.text


# --------------------------------------------------------------------------------------------------
# history (headless: the agent's own code)
# --------------------------------------------------------------------------------------------------
def test_history_is_most_recent_first_and_pages(ws: Path) -> None:
    r = Runner(toolbox.all(workspace=ws), mode="bypassPermissions", workspace=ws)
    calls = [ToolCall(name="python", arguments={"code": f"v{i} = {i}\nv{i}"}) for i in range(5)]
    calls.append(ToolCall(name="history", arguments={"limit": 2}))
    calls.append(ToolCall(name="history", arguments={"limit": 2, "offset": 4}))
    run = r.run(*calls)
    first, last = run.calls[5].result.text, run.calls[6].result.text
    assert first.startswith("Agent [5]:\nv4 = 4\nv4\nOut [5]: 4\n\nAgent [4]:")
    assert "call history(limit=2, offset=2) for older ones" in first
    assert last.startswith("Agent [1]:") and "older ones" not in last


async def _cancel_once_started(ws: Path, ns: dict, code: str):
    """Run `code` (which sets `started` first) through an Agent, cancel the run once it began, finish it."""
    started = threading.Event()
    ns["started"] = started
    model = ScriptedModel([AssistantMessage(tool_calls=[ToolCall(name="python", arguments={
        "code": "started.set()\n" + code})]), "done"])
    agent = Agent(model=model, tools=toolbox.all(workspace=ws, namespace=ns), mode="bypassPermissions", workspace=ws)
    run = agent.start("go")
    while not started.is_set():
        await asyncio.sleep(0.01)
    run.cancel()
    await run
    return run


async def test_cancelling_blocked_code_says_it_could_not_be_stopped(ws: Path, ns: dict) -> None:
    run = await _cancel_once_started(ws, ns, "import time\ntime.sleep(2.5)")
    rec = run.calls[0]
    assert rec.status == "cancelled"
    assert "could not be stopped" in rec.result.text


async def test_cancelling_running_python_code_stops_it(ws: Path, ns: dict) -> None:
    run = await _cancel_once_started(ws, ns, "n = 0\nwhile True:\n    n += 1")
    rec = run.calls[0]
    assert rec.status == "cancelled"
    assert "could not be stopped" not in rec.result.text
    n = ns["n"]
    await asyncio.sleep(0.2)
    assert ns["n"] == n
