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


# -- module paths that moved (nbagent._moved) -----------------------------------------------------------
def test_every_old_module_path_imports_the_module_at_its_new_place_with_a_warning():
    """Each old path gives the very module at its new place (patching one patches the other), and warns
    with the new place's name; in a fresh interpreter, so the import really goes through the hook."""
    from nbagent._moved import MOVED

    code = (
        "import importlib, warnings\n"
        "from nbagent._moved import MOVED\n"
        "bad = []\n"
        "for old, new in MOVED.items():\n"
        "    with warnings.catch_warnings(record=True) as caught:\n"
        "        warnings.simplefilter('always')\n"
        "        module = importlib.import_module(old)\n"
        "    if module is not importlib.import_module(new) or module.__name__ != new:\n"
        "        bad.append(f'{old}: not the module at {new}')\n"
        "    if not any(issubclass(w.category, DeprecationWarning) and new in str(w.message) for w in caught):\n"
        "        bad.append(f'{old}: no DeprecationWarning naming {new}')\n"
        "print('|'.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "", out.stdout
    assert len(MOVED) > 60  # every module that lay flat in nbagent/ and nbagent/jupyter/ before the wings


def test_an_old_path_works_in_every_import_form():
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        from nbagent import sandbox
        from nbagent.grants import grant_label
        from nbagent.safety import sandbox as new

        import nbagent.protected
    assert sandbox is new and nbagent.protected.__name__ == "nbagent.safety.protected"
    assert grant_label.__module__ == "nbagent.calls.grants"


def test_an_unknown_module_is_still_an_import_error():
    import pytest

    with pytest.raises(ModuleNotFoundError):
        __import__("nbagent.no_such_module")


OLD_MODULE_NAMES = {
    # modules that are now a wing's package: the face keeps every name the module exported
    "nbagent.tools": ["Arguments", "ArgumentsError", "Tool", "ToolDefinitionError", "as_tool", "parse_docstring", "tool"],
    "nbagent.render": ["args_html", "call_inner_html", "call_label", "call_record_html", "call_text", "compaction_html",
                       "css", "describe_object", "header_html", "markdown_html", "one_line", "result_html", "run_html",
                       "run_text", "seconds", "status_word", "tool_result_html", "tools_summary"],
    "nbagent.batch": ["BatchRun", "ItemResult", "PendingApproval", "start_batch"],
    "nbagent.jupyter.session": ["CallResults", "NotebookSession", "RunList", "RunOptions", "SessionList",
                                "builtin_tools", "no_model_message"],
    "nbagent.jupyter.panel": ["PanelHub", "TARGET", "attach_panel", "detach_panel", "check"],
}


def test_a_module_that_became_a_package_keeps_its_names():
    import importlib

    for module, names in OLD_MODULE_NAMES.items():
        face = importlib.import_module(module)
        missing = [n for n in names if not hasattr(face, n)]
        assert not missing, f"{module} lost {missing}"
