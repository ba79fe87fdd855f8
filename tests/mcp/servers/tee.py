"""Start an MCP server and copy every line the client sends it to a log file: `python tee.py LOG -- CMD ...`.

The tests read the log to see what reached the server (`notifications/cancelled`, say).
"""

import subprocess
import sys
import threading

log_path = sys.argv[1]
command = sys.argv[sys.argv.index("--") + 1 :]
child = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=sys.stdout, stderr=sys.stderr)


def pump() -> None:
    with open(log_path, "ab", buffering=0) as log:
        for line in sys.stdin.buffer:
            log.write(line)
            try:
                child.stdin.write(line)
                child.stdin.flush()
            except BrokenPipeError:
                break
    try:
        child.stdin.close()
    except BrokenPipeError:
        pass


threading.Thread(target=pump, daemon=True).start()
sys.exit(child.wait())
