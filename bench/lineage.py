"""What watching the namespace adds to one run of the python tool's code (`PythonRunner.watch_state`).

    python bench/lineage.py [--rounds 7] [--clock cpu|wall]

The same code runs through one runner with the watch on and off, in alternating rounds; the figure is
the median per run of code, and the ratio on/off. The workloads:

- `small`: `total = sum(values) + k` in a namespace of 60 small variables (lists, dicts, numbers);
- `frame 100k`: `s = df.a.sum()` with `df` a 100,000 x 8 float frame (6.4 MB: hashed whole, twice);
- `frame 2M`: the same with 2,000,000 rows (128 MB: sampled at `WHOLE_BYTES`, twice);
- `frame 2M untouched`: `s = 1 + 1` with the 2M frame in the namespace (not read: not looked at).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from nbagent.lineage import WHOLE_BYTES  # noqa: E402
from nbagent.toolbox import PythonRunner  # noqa: E402


def namespace(rows: int) -> dict:
    ns = {f"v{i}": ([i] * 20 if i % 3 == 0 else {"k": i} if i % 3 == 1 else i) for i in range(60)}
    ns.update(values=list(range(1000)), k=3)
    if rows:
        rng = np.random.default_rng(0)
        ns["df"] = pd.DataFrame(rng.random((rows, 8)), columns=list("abcdefgh"))
    return ns


WORKLOADS = [
    ("small", 0, "total = sum(values) + k", 400),
    ("frame 100k", 100_000, "s = df.a.sum()", 60),
    ("frame 2M", 2_000_000, "s = df.a.sum()", 12),
    ("frame 2M untouched", 2_000_000, "s = 1 + 1", 200),
]


def measure(runner: PythonRunner, code: str, n: int, clock) -> float:
    t0 = clock()
    for _ in range(n):
        runner.run(code)
    return (clock() - t0) / n


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--clock", choices=["cpu", "wall"], default="cpu")
    args = parser.parse_args()
    clock = time.process_time if args.clock == "cpu" else time.perf_counter
    print(f"WHOLE_BYTES = {WHOLE_BYTES / 2**20:.0f} MiB; {args.rounds} alternating rounds; {args.clock} time")
    print(f"{'workload':<20} {'watch off':>12} {'watch on':>12} {'added':>12} {'ratio':>7}")
    for name, rows, code, n in WORKLOADS:
        runner = PythonRunner(namespace(rows) | {"__name__": "__main__"})
        runner.run(code)  # warm up
        off, on = [], []
        for _ in range(args.rounds):
            runner.watch_state = False
            off.append(measure(runner, code, n, clock))
            runner.watch_state = True
            on.append(measure(runner, code, n, clock))
        a, b = statistics.median(off), statistics.median(on)
        print(f"{name:<20} {a * 1e3:>10.3f}ms {b * 1e3:>10.3f}ms {(b - a) * 1e3:>10.3f}ms {b / a:>6.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
