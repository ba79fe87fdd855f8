"""The built-in tools inside an IPython kernel: code runs in the kernel's namespace, history is IPython's.

Entry point (stable)::

    from nbagent.jupyter.notebook.kernel_tools import kernel_toolbox

    tools = kernel_toolbox(shell, workspace=None)    # -> list[Tool]: the ten tools of nbagent.toolbox,
                                                     #    then the five notebook tools

`shell` is the `InteractiveShell` (in a magic: `self.shell`; None: `get_ipython()`), `workspace` the
directory the file tools and `shell` are confined to (None: the agent's workspace, by default the
working directory when the agent is made, which in Jupyter is the notebook's directory). Keyword options
of `nbagent.toolbox.all` (`python_timeout`) pass through. Calling it again for the same shell gives a
new set of tools over the same runner and history. The notebook tools (`read_notebook`, `insert_cell`,
`edit_cell`, `delete_cell`, `run_cell`; see `nbagent.jupyter.notebook.tools`) follow the ten unless
`notebook=False`; with them, `python` also honours `NBAgent.python_in_cells`.

For tools taken from `nbagent.toolbox` by name, `kernel_extensions(shell)` gives the objects to register
instead: `Agent(tools=[toolbox.python, ...], extensions=kernel_extensions(shell))`.

What the kernel versions do differently from the headless ones (`KernelRunner`, `KernelHistory`):

- `python` runs code in `shell.user_ns`, the notebook's own variables, after IPython's input
  transformations (`%magic`, `!command`, `x?` help) and AST transformers, like a cell would. It is not
  added to `In`/`Out`: the notebook's history stays the user's.
- It runs on a worker thread, not on the kernel's main thread (see `nbagent.toolbox._runner` for why: the
  event loop keeps serving Stop / Approve clicks and widget updates; timeouts and Stop can interrupt the
  code; captured output is per thread). What the code prints is captured by thread, so cells the user
  runs meanwhile print as usual; what it displays (`display(df)`, the inline backend's `plt.show()`) is
  captured by thread too, through a routing wrapper put in front of `shell.display_pub` once (every other
  attribute is the real publisher's). Figures it leaves open in pyplot are returned and closed, so the
  inline backend does not show them again under the user's next cell.
- `history` reads IPython's input history (`history_manager.input_hist_raw`) with each cell's output
  (`Out`, and in IPython 9 its printed output and errors), most recent first.
- `list_variables` leaves out what IPython itself puts in the namespace (`In`, `Out`, `get_ipython`,
  `exit`, `quit`, `_`-names).

This module is the only part of the toolbox that imports IPython.
"""

from __future__ import annotations

import ast
import threading
from contextlib import contextmanager
from typing import Any, Callable, Iterator

from IPython.core.displaypub import DisplayPublisher

from nbagent.toolbox import HistoryEntry, HistorySource, PythonRunner, ThreadRoutes, cut, text_form
from nbagent.toolbox import all as _toolbox_all
from nbagent.tools.definition import Tool

__all__ = ["KernelHistory", "KernelRunner", "kernel_extensions", "kernel_runner", "kernel_toolbox"]

_IPYTHON_NAMES = frozenset({"In", "Out", "get_ipython", "exit", "quit", "open"})


def kernel_toolbox(shell: Any = None, workspace: Any = None, *, notebook: bool = True, **options: Any) -> list[Tool]:
    """The ten built-in tools, running code in `shell`'s namespace with its history, and the notebook tools.

    Args:
        shell: the IPython `InteractiveShell` (default: `get_ipython()`).
        workspace: the directory file tools are confined to (default: the agent's workspace).
        notebook: add the five notebook tools (and let `python` write its code as cells when
            `NBAgent.python_in_cells` is on).
        **options: more options of `nbagent.toolbox.all` (`python_timeout`).
    """
    shell = _shell(shell)
    runner = kernel_runner(shell)
    tools = _toolbox_all(workspace, runner=runner, history=runner.history_source(), **options)
    if notebook:
        from .python_cells import cell_python
        from .tools import notebook_tools

        tools = [cell_python(shell, t) if t.name == "python" else t for t in tools] + notebook_tools(shell)
    return tools


def kernel_extensions(shell: Any = None) -> list[Any]:
    """The typed extensions that make the shared `nbagent.toolbox` tools work in this kernel."""
    runner = kernel_runner(_shell(shell))
    return [runner, runner.history_source()]


def kernel_runner(shell: Any = None) -> KernelRunner:
    """The `KernelRunner` of a shell (one per shell, made on first use)."""
    shell = _shell(shell)
    with _runners_lock:
        runner = getattr(shell, "_nbagent_runner", None)
        if not isinstance(runner, KernelRunner):
            runner = KernelRunner(shell)
            try:
                shell._nbagent_runner = runner
            except Exception:  # pragma: no cover - a shell that refuses new attributes
                pass
        return runner


_runners_lock = threading.Lock()


def _shell(shell: Any) -> Any:
    if shell is not None:
        return shell
    from IPython import get_ipython

    found = get_ipython()
    if found is None:
        raise RuntimeError("no IPython shell is running here: pass shell=..., or use nbagent.toolbox.all() headless")
    return found


class KernelRunner(PythonRunner):
    """Runs code in an IPython shell's namespace, with IPython's transformations and display capture."""

    def __init__(self, shell: Any) -> None:
        self.shell = shell
        super().__init__(shell.user_ns, name="agent")
        self._history = KernelHistory(shell)

    @property  # type: ignore[override]
    def namespace(self) -> dict[str, Any]:
        """Always the shell's current `user_ns`."""
        return self.shell.user_ns

    @namespace.setter
    def namespace(self, value: dict[str, Any]) -> None:
        pass  # the namespace is the shell's

    def transform(self, code: str) -> str:
        return self.shell.transform_cell(code)

    def transform_tree(self, tree: ast.Module) -> ast.Module:
        return self.shell.transform_ast(tree)

    def hidden_names(self) -> set[str]:
        hidden = super().hidden_names() | set(_IPYTHON_NAMES)
        hidden_ns = getattr(self.shell, "user_ns_hidden", {}) or {}
        ns = self.shell.user_ns
        # a name counts as hidden only while it still holds what IPython put there
        hidden.update(k for k, v in hidden_ns.items() if ns.get(k, _MISSING) is v)
        return hidden

    def display_capture(self, outputs: list[dict[str, Any]],
                        on_display: Callable[[dict[str, Any]], None] | None = None):
        return _route_displays(self.shell, outputs, on_display)

    def history_source(self) -> HistorySource:
        return self._history


_MISSING = object()


# --------------------------------------------------------------------------------------------------
# Display capture, by thread
# --------------------------------------------------------------------------------------------------
_display_routes: ThreadRoutes[Callable[[dict[str, Any]], None]] = ThreadRoutes()
_install_lock = threading.Lock()


class RoutingDisplayPublisher(DisplayPublisher):
    """Put in front of a shell's display publisher: a routed thread's displays go to its sink; every
    other call, and every other attribute, goes to the real publisher."""

    def __init__(self, inner: Any) -> None:
        super().__init__(shell=None)
        self.__dict__["_nbagent_inner"] = inner

    @property
    def inner(self) -> Any:
        return self.__dict__["_nbagent_inner"]

    def publish(self, data, metadata=None, *args, transient=None, update=False, **kwargs):  # type: ignore[override]
        sink = _display_routes.get(threading.get_ident())
        if sink is not None:
            sink({"data": dict(data or {}), "metadata": dict(metadata or {}), "transient": transient, "update": update})
            return None
        return self.inner.publish(data, metadata, *args, transient=transient, update=update, **kwargs)

    def clear_output(self, wait: bool = False) -> None:
        if threading.get_ident() in _display_routes:
            return None
        return self.inner.clear_output(wait)

    @property
    def is_publishing(self) -> bool:  # type: ignore[override]
        return bool(getattr(self.inner, "is_publishing", False))

    def __getattr__(self, name: str) -> Any:
        inner = self.__dict__.get("_nbagent_inner")
        if inner is None:
            raise AttributeError(name)
        return getattr(inner, name)


def install_display_routing(shell: Any) -> RoutingDisplayPublisher:
    """Put the routing publisher in front of `shell.display_pub` (once; again if it was replaced)."""
    with _install_lock:
        current = shell.display_pub
        if isinstance(current, RoutingDisplayPublisher):
            return current
        router = RoutingDisplayPublisher(current)
        shell.display_pub = router
        return router


@contextmanager
def _route_displays(shell: Any, outputs: list[dict[str, Any]],
                    on_display: Callable[[dict[str, Any]], None] | None) -> Iterator[None]:
    install_display_routing(shell)

    def sink(output: dict[str, Any]) -> None:
        outputs.append(output)
        if on_display is not None:
            try:
                on_display(output)
            except Exception:  # pragma: no cover - progress is best effort
                pass

    with _display_routes.route(sink):
        yield


# --------------------------------------------------------------------------------------------------
# History
# --------------------------------------------------------------------------------------------------
class KernelHistory(HistorySource):
    """The notebook's cells (IPython's input history) with their outputs, most recent first."""

    def __init__(self, shell: Any) -> None:
        self.shell = shell

    def page(self, limit: int, offset: int = 0) -> tuple[list[HistoryEntry], int]:
        hm = self.shell.history_manager
        inputs = list(hm.input_hist_raw)
        numbered = [(n, src) for n, src in enumerate(inputs) if n > 0 and src.strip()]
        total = len(numbered)
        numbered.reverse()
        page = numbered[offset : offset + limit]
        return [HistoryEntry(n, src, self._output(hm, n), "user") for n, src in page], total

    def _output(self, hm: Any, n: int) -> str | None:
        parts: list[str] = []
        outputs = getattr(hm, "outputs", None) or {}
        for out in outputs.get(n, []) if hasattr(outputs, "get") else []:
            kind = getattr(out, "output_type", "")
            bundle = getattr(out, "bundle", {}) or {}
            if kind in ("out_stream", "err_stream"):
                text = "".join(bundle.get("stream", []))
                if text.strip():
                    parts.append(cut(text.rstrip("\n"), 300))
            elif kind == "display_data":
                text = bundle.get("text/plain")
                parts.append("[display] " + cut(str(text), 200) if text else "[display]")
        value = hm.output_hist.get(n, _MISSING) if hasattr(hm, "output_hist") else _MISSING
        if value is not _MISSING:
            parts.append(text_form(value, 400))
        exceptions = getattr(hm, "exceptions", None) or {}
        if hasattr(exceptions, "get") and exceptions.get(n):
            info = exceptions[n]
            name = info.get("ename") if isinstance(info, dict) else None
            parts.append(f"[raised {name}: {info.get('evalue', '')}]" if name else "[raised an exception]")
        return "\n".join(parts) if parts else None
