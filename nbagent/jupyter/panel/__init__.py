"""The kernel's end of the nbagent side panel: the panel's comm (`hub`), what it shows of runs and cell
reviews (`model`), and the prompts its buttons make from a cell (`prompts`: Fix, Explain, Ask).

The rule: this room imports the core, the front's settings and the rooms below it (`session`, `notebook`,
`live`); only the entry points (`magics`) import it.
"""

from __future__ import annotations

from .hub import TARGET, PanelHub, attach_panel, check, detach_panel

__all__ = ["TARGET", "PanelHub", "attach_panel", "check", "detach_panel"]
