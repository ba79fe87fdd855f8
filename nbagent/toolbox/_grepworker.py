"""The grep tool's regex worker: a separate process, so a pattern that backtracks without end can be
stopped (Python's `re` holds the interpreter while it matches; a thread could not be interrupted).

Run as a script with the standard library only (`python -I -S _grepworker.py`). It reads JSON lines on
stdin: first `{"pattern": ..., "flags": ...}`, then `{"lines": [...]}` for each batch of lines, and
answers each batch with `{"hits": [indices of the lines that match]}` (or `{"error": ...}`).
"""

import json
import re
import sys


def main() -> None:
    stdin = sys.stdin.buffer
    stdout = sys.stdout.buffer
    first = json.loads(stdin.readline())
    try:
        regex = re.compile(first["pattern"], first.get("flags", 0))
    except re.error as exc:
        stdout.write(json.dumps({"error": str(exc)}).encode() + b"\n")
        stdout.flush()
        return
    for raw in stdin:
        lines = json.loads(raw)["lines"]
        hits = [i for i, line in enumerate(lines) if regex.search(line)]
        stdout.write(json.dumps({"hits": hits}).encode() + b"\n")
        stdout.flush()


if __name__ == "__main__":
    main()
