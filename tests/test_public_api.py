"""The public surface: every name API.md promises, a sorted and complete __all__, and the layering rule."""

from __future__ import annotations

import ast
import pathlib
import subprocess
import sys

import nbagent

ROOT = pathlib.Path(__file__).resolve().parents[1]
API_NAMES = ["Agent", "AgentRun", "AssistantMessage", "BatchRun", "Block", "Decision", "Hooks", "ImageBlock", "ItemResult", "RateLimit", "ScriptedModel",
             "StopAfterBatch", "TextBlock", "ToolCall", "ToolContext", "ToolResult", "UserMessage", "load_model", "tool"]


def test_api_names_import():
    namespace: dict = {}
    exec(f"from nbagent import ({', '.join(API_NAMES)})", namespace)
    assert all(name in namespace for name in API_NAMES)


def test_all_is_sorted_and_complete():
    assert nbagent.__all__ == sorted(nbagent.__all__)
    for name in nbagent.__all__:
        assert hasattr(nbagent, name), name
    public = {n for n in dir(nbagent) if not n.startswith("_") and not isinstance(getattr(nbagent, n), type(nbagent))}
    public -= {"annotations", "load_ipython_extension", "unload_ipython_extension"}
    assert public <= set(nbagent.__all__), public - set(nbagent.__all__)


def _runtime_modules() -> list[str]:
    mods = []
    for path in sorted((ROOT / "nbagent").rglob("*.py")):
        rel = path.relative_to(ROOT).with_suffix("")
        if rel.parts[1:2] == ("jupyter",):
            continue
        name = ".".join(rel.parts)
        mods.append(name[: -len(".__init__")] if name.endswith(".__init__") else name)
    return mods


def test_runtime_never_imports_ipython_at_runtime():
    """Import every runtime module in a fresh interpreter: IPython, ipywidgets and ipykernel stay unloaded."""
    code = (
        "import importlib, sys\n"
        f"for m in {_runtime_modules()!r}:\n"
        "    if m.endswith('demo'): continue\n"
        "    importlib.import_module(m)\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('IPython', 'ipywidgets', 'ipykernel'))\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "", f"runtime imported: {out.stdout.strip()}"


def test_runtime_sources_have_no_ipython_imports():
    """Also statically: no import statement of those packages outside nbagent/jupyter/ (lazy ones included)."""
    offenders = []
    for path in (ROOT / "nbagent").rglob("*.py"):
        if "jupyter" in path.relative_to(ROOT / "nbagent").parts:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
            for n in names:
                if n.split(".")[0] in ("IPython", "ipywidgets", "ipykernel"):
                    offenders.append(f"{path.relative_to(ROOT)}: {n}")
    assert offenders == []


def test_a_plain_script_runs_headless():
    script = (
        "from nbagent import Agent, ScriptedModel, AssistantMessage, ToolCall, tool\n"
        "@tool(read_only=True)\n"
        "def add(a: int, b: int) -> int:\n"
        "    return a + b\n"
        "m = ScriptedModel([AssistantMessage(tool_calls=[ToolCall(name='add', arguments={'a': 2, 'b': 3})]), 'five'])\n"
        "run = Agent(model=m, tools=[add]).run_sync('2+3?')\n"
        "import sys\n"
        "assert not any(k.startswith(('IPython', 'ipywidgets')) for k in sys.modules)\n"
        "print(run.status, run.calls[0].result.text, run.output)\n"
    )
    out = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["done", "5", "five"]
