"""`%agent --map` in a real kernel: a DataFrame, one batch view that ends as its static rendering, and the
batch resumed after a kernel restart without asking again for the items done."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ..kernelclient import KernelSession

pytestmark = pytest.mark.kernel

SETUP = (
    "import pandas as pd\n"
    "from nbagent import ScriptedModel, UserMessage\n"
    "asked = []\n"
    "def answer(messages):\n"
    "    text = [m.text for m in messages if isinstance(m, UserMessage)][-1]\n"
    "    asked.append(text)\n"
    "    return text.upper()\n"
    "echo = ScriptedModel([answer] * 100)\n"
    "df = pd.DataFrame({'text': ['late parcel', 'broken lid', 'refund please']}, index=['a', 'b', 'c'])\n"
)


def test_map_over_a_dataframe_shows_one_view_and_resumes_after_a_restart(tmp_path: Path) -> None:
    k = KernelSession(tmp_path, NBAGENT_APPROVAL="deny")
    try:
        k.execute("%load_ext nbagent")
        k.execute(SETUP)
        out = k.execute("batch = %agent --map df --model echo --concurrency 2 Ticket: {text}")
        assert out["error"] is None
        k.execute("await batch")
        assert k.value("[r.output for r in batch.results]") == ["TICKET: LATE PARCEL", "TICKET: BROKEN LID",
                                                                "TICKET: REFUND PLEASE"]
        assert k.value("list(batch.to_pandas().index)") == ["a", "b", "c"]
        updates = k.messages("update_display_data")
        assert any("3/3 items" in json.dumps(m["content"]["data"]) for m in updates)  # the static rendering
        batch_id = k.value("batch.id")
        k.restart()
        k.execute("%load_ext nbagent")
        k.execute(SETUP)
        k.execute("again = %agent --map df --model echo --resume Ticket: {text}")
        k.execute("await again")
        assert k.value("again.id") == batch_id
        assert k.value("again.resumed") == 3
        assert k.value("asked") == []  # nothing asked again
        assert k.value("[r.output for r in again.results]")[2] == "TICKET: REFUND PLEASE"
        bad = k.execute("%agent --map nothing_here Ticket: {text}", check=False)
        assert "no variable" in json.dumps(bad, default=str)
    finally:
        k.shutdown()
