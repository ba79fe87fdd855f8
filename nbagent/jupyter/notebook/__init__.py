"""The notebook itself: the live notebook in the page over nbagent's comm (`comm`), its cells as the agent
reads and changes them (`cells`), the notebook tools (`tools`: read_notebook, insert_cell, edit_cell,
delete_cell, run_cell) and the kernel's toolbox (`kernel_tools`), what a run leaves in its cell
(`document`, `snapshots`, and `kept` for the live displays that are not run views: batch views, MCP trust
prompts) and the notebook's runs with their views (`runs`).

The rule: this room imports the core, the front's settings and `live` (the live view). Its names load on first use.
"""

from __future__ import annotations

from .._lazy import lazy_names

__all__ = ["Displays", "KeptDisplays", "NotebookFrontend", "NotebookRuns", "RunList", "Snapshots", "frontend_for",
           "kernel_toolbox", "notebook_tools"]

__getattr__, __dir__ = lazy_names(__name__, {
    "Displays": "document", "KeptDisplays": "kept", "NotebookFrontend": "comm", "NotebookRuns": "runs", "RunList": "runs",
    "Snapshots": "snapshots", "frontend_for": "comm", "kernel_toolbox": "kernel_tools", "notebook_tools": "tools",
})
