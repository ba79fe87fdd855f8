"""The live view of a run: one widget per run (`widgets.RunView`), one row per tool call (`call_row`) with its
approval panel (`approval_panel`, decided through `approval.NotebookApprover`), steering (`steering`), the
batch view (`batch_view`), the text view for terminals (`text`), a tool's output routed to its row
(`capture`), and at most a few widget messages a second however many events arrive (`throttle`).

The rule: this room imports the core and the front's settings only. The widgets load on first use.
"""

from __future__ import annotations

from .._lazy import lazy_names

__all__ = ["BatchView", "CallRow", "NotebookApprover", "RunView", "SteerBox", "TextView", "Throttle", "capturing"]

__getattr__, __dir__ = lazy_names(__name__, {
    "BatchView": "batch_view", "CallRow": "call_row", "NotebookApprover": "approval", "RunView": "widgets",
    "SteerBox": "steering", "TextView": "text", "Throttle": "throttle", "capturing": "capture",
})
