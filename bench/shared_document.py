"""How long an agent's edit takes to reach another collaborator through the server's shared document, against
the engine's own clients measured in the same run.

    python bench/shared_document.py [--edits 30]

JupyterLab with jupyter-collaboration on a free port, a kernel the server started for a notebook (its sessions
API), and two Y clients of the engine in this process (tests/jupyter/ycollab.py). Timed, alternately, until
the watching client sees the change: an edit made in the kernel through nbagent's shared document (`edit`, as
edit_cell makes it: hunks anchored to what was read, the kernel as a collaborator; the time includes asking the
kernel over its shell channel), and the same edit made by the other Y client (the engine's sync alone).
Reported: the median and 90th percentile of each in milliseconds, and their ratio.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.jupyter.browser.lab import LabServer, collaboration_installed, write_notebook  # noqa: E402
from tests.jupyter.kernelclient import KernelSession  # noqa: E402
from tests.jupyter.ycollab import YCollaborator  # noqa: E402


def seen(watcher: YCollaborator, text: str, t0: float) -> float:
    while text not in watcher.source("c0"):
        if time.perf_counter() - t0 > 10:
            raise TimeoutError(text)
        time.sleep(0.001)
    return (time.perf_counter() - t0) * 1000


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--edits", type=int, default=30)
    args = parser.parse_args()
    if not collaboration_installed():
        sys.exit("jupyter-collaboration is not installed (pip install 'nbagent[collaboration]')")
    from jupyter_core.paths import jupyter_runtime_dir

    root = Path(tempfile.mkdtemp(prefix="nbagent-shared-"))
    write_notebook(root / "nb.ipynb", ["value = 0"])
    server = LabServer(root, collaboration=True)
    try:
        body = json.dumps({"path": "nb.ipynb", "type": "notebook", "kernel": {"name": "python3"}}).encode()
        request = urllib.request.Request(f"{server.url}/api/sessions", data=body, method="POST", headers={
            "Authorization": f"token {server.token}", "Content-Type": "application/json"})
        kernel = json.loads(urllib.request.urlopen(request, timeout=60).read())["kernel"]["id"]
        ks = KernelSession.attach(str(Path(jupyter_runtime_dir()) / f"kernel-{kernel}.json"))
        watcher, typist = YCollaborator(server, "nb.ipynb", "watcher"), YCollaborator(server, "nb.ipynb", "typist")
        ks.execute("%load_ext nbagent\nfrom nbagent.jupyter.notebook.cells import notebook_state\n"
                   "st = notebook_state(get_ipython())\n_ = await st.read_live()")
        agent, engine = [], []
        for i in range(args.edits):
            old, new = f"value = {2 * i}", f"value = {2 * i + 1}"
            t0 = time.perf_counter()
            ks.send_execute(f"st.seen['c0'] = (await st.request('edit', cell_id='c0', old={old!r}, new={new!r}, "
                            f"expected={old!r}))['source']")
            agent.append(seen(watcher, new, t0))
            time.sleep(0.05)
            t0 = time.perf_counter()
            typist.replace("c0", new, f"value = {2 * i + 2}")
            engine.append(seen(watcher, f"value = {2 * i + 2}", t0))
            ks.wait_for(f"'value = {2 * i + 2}' in (await st.live_source('c0'))")
            ks.execute(f"st.seen['c0'] = 'value = {2 * i + 2}'")
        for name, values in (("agent's edit through the shared document", agent), ("engine's own client", engine)):
            q = statistics.quantiles(values, n=10)
            print(f"{name:42s} median {statistics.median(values):7.1f} ms   p90 {q[-1]:7.1f} ms")
        print(f"ratio (median, agent / engine): {statistics.median(agent) / statistics.median(engine):.2f}")
        watcher.close()
        typist.close()
        ks.shutdown()
    finally:
        server.stop()


if __name__ == "__main__":
    main()
