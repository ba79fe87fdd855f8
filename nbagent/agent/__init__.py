"""The agent and its runs: `Agent` (`run`; its settings resolved once into `AgentOptions`, `options`) makes
`AgentRun`s (`handle`, reading what they did through `readout`), each driven by the turn loop (`loop`): ask
the model, run the calls through the stages, until the model answers or a limit stops it.

The rule: this wing may import every other wing of the runtime (it is where they meet), and nothing imports
it but the package's face (`nbagent`) and the notebook front (`nbagent.jupyter`).
"""

from __future__ import annotations

from .loop import RunSettings, RunState, drive
from .options import AgentOptions
from .run import Agent, AgentRun

__all__ = ["Agent", "AgentOptions", "AgentRun", "RunSettings", "RunState", "drive"]
