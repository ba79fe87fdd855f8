"""A user's tools in a real kernel: what they print goes to their call's row, not to a cell; a figure they
return is drawn in their row and result, and not again under the next cell."""

from __future__ import annotations

import pytest

from ..kernelclient import KernelSession

pytestmark = pytest.mark.kernel

SETUP = '''
%matplotlib inline
import asyncio
import matplotlib.pyplot as plt
from nbagent import AssistantMessage, ScriptedModel, ToolCall, tool
from nbagent.jupyter import view

@tool(read_only=True)
def chart() -> object:
    """Draw a chart."""
    fig, ax = plt.subplots(figsize=(3, 2))
    ax.plot([1, 2, 3], [2, 1, 3])
    return fig

def chatty(n: int) -> str:
    """Print n lines."""
    for i in range(n):
        print(f"sync line {i}")
    return "printed"

async def achatty(n: int) -> str:
    """Print n lines, awaiting between them."""
    for i in range(n):
        print(f"async line {i}")
        await asyncio.sleep(0.01)
    return "printed"

model = ScriptedModel([
    AssistantMessage(text="Working.", tool_calls=[ToolCall(name="chart", arguments={}),
                                                  ToolCall(name="chatty", arguments={"n": 50}),
                                                  ToolCall(name="achatty", arguments={"n": 20})]),
    "All done.",
])
'''


@pytest.fixture
def k(tmp_path):
    kernel = KernelSession(tmp_path, NBAGENT_APPROVAL="allow")
    kernel.execute("%load_ext nbagent")
    kernel.execute(SETUP)
    yield kernel
    kernel.shutdown()


def test_prints_go_to_the_row_and_a_figure_is_drawn_once_in_the_row(k):
    out = k.execute("run = %agent --model model --tools chart,chatty,achatty --wait Go")
    assert "sync line" not in out["stdout"] and "async line" not in out["stdout"]
    calls = k.value("{c.name: [c.status, c.output_tail.text] for c in run.calls}")
    assert calls["chatty"][0] == "ok" and calls["chatty"][1].count("sync line") == 50
    assert calls["achatty"][0] == "ok" and calls["achatty"][1].count("async line") == 20
    assert k.value("plt.get_fignums()") == []  # closed: the inline backend will not draw it again
    after = k.execute("x = 1")
    assert not any("image/png" in d for d in after["data"])  # nothing drawn under an unrelated cell
    k.wait_for("view(run).ended")
    html = k.value("view(run).static_bundle()['text/html']")
    assert 'class="nba-figure" src="data:image/png;base64,' in html
    assert "async line 19" in html  # the output tail of the async tool's row
