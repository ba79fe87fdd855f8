"""Where the kernel's values came from: what each call that ran code did to the namespace, the calls a run's
final state needs, cells that make it again, and the comparison of a rerun with the live kernel.

    _names        what code does with names, from its syntax: binds, reads (in order), changes in place
    _fingerprint  bounded digests (did a value change in place?) and signatures (the same value elsewhere?)
    _watch        `NamespaceWatch` around one run of code -> `StateChange` (assigned, rebound, mutated,
                  deleted, read), which the call's record keeps
    _cells        `kernel_only(run)`, `plan_cells(run)`, `to_cells(run)`: the dependency cut over a run's
                  state changes, and nbformat code cells with their provenance
    _report       `Reproducibility`: what a rerun of the saved notebook made, name by name

The python tool (`nbagent.toolbox`) and `run_cell` (`nbagent.jupyter.notebook`) watch the code they run;
`AgentRun.kernel_only` and `AgentRun.to_cells()` read the records; `nbagent.jupyter.check_reproducible`
reruns a notebook and compares.

The rule: this wing imports only the vocabulary at the top of nbagent.
"""

from __future__ import annotations

from ._cells import (
    CellPlan, CellSource, Step, defined_names, kernel_only, plan_cells, provenance, steps_of, to_cells,
)
from ._fingerprint import WHOLE_BYTES, Print, fingerprint, same, signature
from ._names import CodeNames, code_names
from ._report import NameCheck, Reproducibility, compare
from ._watch import NamespaceWatch, StateChange

__all__ = ["WHOLE_BYTES", "CellPlan", "CellSource", "CodeNames", "NameCheck", "NamespaceWatch", "Print",
           "Reproducibility", "StateChange", "Step", "code_names", "compare", "defined_names", "fingerprint",
           "kernel_only", "plan_cells", "provenance", "same", "signature", "steps_of", "to_cells"]
