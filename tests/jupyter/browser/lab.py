"""JupyterLab in a real chromium, for tests and screenshots.

`LabServer` runs `jupyter lab` on a free port with a private settings directory (no news pop-up, no
restored workspace) and stops it by its process id. `LabPage` opens a notebook in Debian's chromium
through Playwright (never `playwright install`) and runs its cells the way a person does (./panel.py has
the nbagent panel in such a page). Both are context managers that stop or close what they started (a page
saves a screenshot first when the block failed).

What a test reads of the page it waits for (`wait_text`, `wait_for`, `wait_cells`, `wait_sources`): the
page draws asynchronously, so a test that reads it once fails on a loaded machine. Every wait has a
generous timeout and says, when it fails, what it waited for and what it saw; `LabPage.shot()` saves
screenshots under test-artifacts/.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ..kernelclient import ROOT, kernel_env

ARTIFACTS = ROOT / "test-artifacts"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--no-first-run", "--disable-sync"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


COLLABORATION = ("jupyter_server_ydoc", "jupyter_collaboration")
"""The collaboration engine's server extensions (jupyter-collaboration)."""
COLLABORATION_PAGES = ("@jupyter/docprovider-extension", "@jupyter/collaboration-extension")
"""Its parts in the page."""


def collaboration_installed() -> bool:
    import importlib.util

    return importlib.util.find_spec("jupyter_server_ydoc") is not None


class LabServer:
    """`jupyter lab` (or `jupyter notebook`, Notebook 7) serving `root`, stopped by PID.

    `collaboration=True` runs it with the collaboration engine (jupyter-collaboration, as installed: the test is
    skipped where it is not); by default the engine is switched off where it is installed, so a test sees the
    page-only setup whatever the environment holds. `options` are more command-line options for the server.
    """

    def __init__(self, root: Path, *, app: str = "lab", theme: str | None = None, collaboration: bool = False,
                 options: Sequence[str] = (), **env: str) -> None:
        self.root = root
        self.app = app
        self.port = free_port()
        self.token = secrets.token_hex(16)
        settings = root / ".lab-settings"
        (settings / "@jupyterlab" / "apputils-extension").mkdir(parents=True, exist_ok=True)
        (settings / "@jupyterlab" / "apputils-extension" / "notification.jupyterlab-settings").write_text(
            json.dumps({"fetchNews": "false", "checkForUpdates": False}))
        if theme is not None:
            (settings / "@jupyterlab" / "apputils-extension" / "themes.jupyterlab-settings").write_text(
                json.dumps({"theme": theme}))
        (root / ".lab-workspaces").mkdir(exist_ok=True)
        # this checkout's frontend part first, then whatever the environment adds
        env.setdefault("JUPYTER_PATH", os.pathsep.join([str(extension_path(root)), os.environ.get("JUPYTER_PATH", "")]))
        options = list(options)
        if collaboration:
            import pytest

            if not collaboration_installed():
                pytest.skip("jupyter-collaboration is not installed (it is in nbagent's test extra)")
            options.append(f"--BaseFileIdManager.db_path={root / '.file-ids.db'}")  # not the user's own
        else:
            env.setdefault("JUPYTER_CONFIG_PATH", os.pathsep.join(
                [str(_without_collaboration(root)), os.environ.get("JUPYTER_CONFIG_PATH", "")]))
        self.collaboration = collaboration
        full_env = kernel_env(root, JUPYTERLAB_SETTINGS_DIR=str(settings),
                              JUPYTERLAB_WORKSPACES_DIR=str(root / ".lab-workspaces"), **env)
        self.log = (root / "lab.log").open("w")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "jupyter", app, "--no-browser", "--ip=127.0.0.1", f"--port={self.port}",
             f"--ServerApp.token={self.token}", "--allow-root", f"--ServerApp.root_dir={root}",
             "--ServerApp.port_retries=0", *options],
            cwd=root, env=full_env, stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True,
        )
        self._wait_up(timeout=60)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _wait_up(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"jupyter lab exited: {(self.root / 'lab.log').read_text()[-2000:]}")
            try:
                with urllib.request.urlopen(f"{self.url}/api/status?token={self.token}", timeout=2):
                    return
            except OSError:
                time.sleep(0.25)
        raise TimeoutError(f"jupyter lab did not start within {timeout} s")

    def __enter__(self) -> LabServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=5)
        self.log.close()


def serve(request: Any, tmp_path_factory: Any, app: str, options: Sequence[str] = (), **env: str) -> Any:
    """A fixture's `jupyter <app>` (with `options` and `env`) serving a fresh folder named after the test module;
    stopped after."""
    root = tmp_path_factory.mktemp(f"{request.module.__name__.rsplit('.', 1)[-1]}-{app}")
    with LabServer(root, app=app, options=options, JUPYTER_PATH=str(extension_path(root)), **env) as server:
        yield server


def _without_collaboration(root: Path) -> Path:
    """A Jupyter configuration folder that switches the collaboration engine off (server and page), ahead of the
    environment's, which switches it on where it is installed."""
    folder = root / ".jupyter-config-solo"
    (folder / "labconfig").mkdir(parents=True, exist_ok=True)
    (folder / "jupyter_server_config.json").write_text(json.dumps(
        {"ServerApp": {"jpserver_extensions": {name: False for name in COLLABORATION}}}))
    (folder / "labconfig" / "page_config.json").write_text(json.dumps(
        {"disabledExtensions": {name: True for name in COLLABORATION_PAGES}}))
    return folder


def extension_path(root: Path) -> Path:
    """A JUPYTER_PATH entry whose labextensions/nbagent is this checkout's built frontend part (ahead of the
    one the virtualenv links to, which may be another checkout's)."""
    jp = root / ".jupyter-path"
    (jp / "labextensions").mkdir(parents=True, exist_ok=True)
    link = jp / "labextensions" / "nbagent"
    if not link.exists():
        link.symlink_to(ROOT / "nbagent" / "labextension", target_is_directory=True)
    return jp


def write_notebook(path: Path, cells: list[str | tuple[str, dict]]) -> Path:
    """A notebook file with these code cells (written first, so nothing is typed into the editor).

    A cell is its source, or (source, metadata): `{"jupyter": {"source_hidden": True}}` folds its code away.
    """
    items = [c if isinstance(c, tuple) else (c, {}) for c in cells]
    nb = {
        "cells": [{"cell_type": "code", "execution_count": None, "id": f"c{i}", "metadata": meta, "outputs": [],
                   "source": src} for i, (src, meta) in enumerate(items)],
        "metadata": {"kernelspec": {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}},
        "nbformat": 4, "nbformat_minor": 5,
    }
    path.write_text(json.dumps(nb, indent=1))
    return path


SCRIPT = '''from nbagent import AssistantMessage, ScriptedModel, ToolCall


def call(name, **arguments):
    return AssistantMessage(tool_calls=[ToolCall(name=name, arguments=arguments)])
'''
"""Notebook code that the tests' scripted models start with: `call(name, **arguments)`, a turn that calls a tool."""

REMOVE_TOOL = '''from pathlib import Path
from nbagent import tool


@tool(destructive=True, describe_activity=lambda a: f"Removing {a.path}",
      describe_completed_activity=lambda a, r: f"Removed {a.path}")
def remove(path: str) -> str:
    """Remove a file."""
    Path(path).unlink()
    return f"removed {path}"
'''
"""Notebook code: `remove`, a destructive tool (so each call waits for the person's approval) that the scripted
models of these tests call, with the words its call is shown with."""

DONE = ".jp-OutputArea .nba:not(.nba-view) .nba-head .nba-s-done"
"""The run's static rendering, which replaces the live view in its cell when the run ends."""


class LabPage:
    """A notebook open in JupyterLab (or Notebook 7), in chromium.

    `notebook=None` opens Notebook 7's file browser (`/tree`) instead; `LabPage(server, page=p, owner=o)` adopts
    a page another one opened in the same browser (Notebook 7's New opens the notebook in a new tab).
    """

    def __init__(self, server: LabServer, notebook: str | None = None, *, width: int = 1280, height: int = 1000,
                 page: Any = None, owner: LabPage | None = None, label: str | None = None) -> None:
        self.server = server
        self.owner = owner
        self.label = label or f"{server.app}-{Path(notebook).stem if notebook else 'files'}"  # of its screenshots
        if page is not None:  # opened by another page: same browser, which that page closes
            self._pw = self.browser = None
            self.page = page
        else:
            from playwright.sync_api import sync_playwright

            self._pw = sync_playwright().start()
            self.browser = self._pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            self.page = self.browser.new_page(viewport={"width": width, "height": height}, device_scale_factor=1)
        self.page.set_default_timeout(30_000)
        if page is None and notebook is None:
            self.page.goto(f"{server.url}/tree?token={server.token}")
            self.page.wait_for_selector(".jp-DirListing-content", timeout=90_000)
            self.check_build()
            return
        if page is None and server.app == "lab":
            self.page.goto(f"{server.url}/lab/tree/{notebook}?reset&token={server.token}")  # no restored tabs
        elif page is None:
            self.page.goto(f"{server.url}/notebooks/{notebook}?token={server.token}")
        self.wait_kernel_idle(timeout=90)
        self.check_build()

    def __enter__(self) -> LabPage:
        return self

    def __exit__(self, kind: type[BaseException] | None, *exc: object) -> None:
        """Close the page; a screenshot first when the block failed (`<app>-<notebook>-failure.png`)."""
        try:
            if kind is not None:
                with contextlib.suppress(Exception):  # the failure is what the test reports, not the screenshot
                    self.shot(f"{self.label}-failure")
        finally:
            self.close()

    def open_page(self, notebook: str, *, width: int = 1280, height: int = 1000) -> LabPage:
        """The same notebook (or another) in a second tab of this page's browser: another kernel connection."""
        browser = self.browser if self.browser is not None else self.owner.browser  # type: ignore[union-attr]
        second = browser.new_page(viewport={"width": width, "height": height}, device_scale_factor=1)
        if self.server.app == "lab":
            second.goto(f"{self.server.url}/lab/tree/{notebook}?reset&token={self.server.token}")
        else:
            second.goto(f"{self.server.url}/notebooks/{notebook}?token={self.server.token}")
        return LabPage(self.server, page=second, owner=self, label=f"{self.label}-second-tab")

    def another_person(self, notebook: str, *, width: int = 1280, height: int = 1000) -> LabPage:
        """The notebook opened by someone else: a browser context of their own in this page's browser (their own
        cookies, so the server sees another user)."""
        browser = self.browser if self.browser is not None else self.owner.browser  # type: ignore[union-attr]
        second = browser.new_context(viewport={"width": width, "height": height}, device_scale_factor=1).new_page()
        second.goto(f"{self.server.url}/lab/tree/{notebook}?reset&token={self.server.token}")
        return LabPage(self.server, page=second, owner=self, label=f"{self.label}-another-person")

    def check_build(self) -> None:
        """The page runs this checkout's build of the frontend part (nbagent/labextension), not another's: the
        `remoteEntry` the page loaded for nbagent is the one this checkout's build names."""
        built = json.loads((ROOT / "nbagent" / "labextension" / "package.json").read_text())["jupyterlab"]["_build"]
        want = built["load"].rsplit("/", 1)[-1]
        loaded = self.page.evaluate("""() => performance.getEntriesByType('resource').map(e => e.name)
            .filter(n => n.includes('/extensions/nbagent/'))""")
        entries = [n.rsplit("/", 1)[-1].split("?")[0] for n in loaded if "remoteEntry." in n]
        assert entries == [want], f"the page loaded nbagent's {entries or 'nothing'}, this checkout built {want}"

    def wait_kernel_idle(self, timeout: float = 60) -> None:
        """The kernel exists, is named in the toolbar and is idle, and every cell is rendered."""
        page = self.page
        page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=timeout * 1000)
        # JupyterLab's execution indicator says idle before a kernel exists: also wait for the kernel's name,
        # and for the status bar (Lab) or the indicator (Notebook 7, which has no status bar) to say Idle.
        page.wait_for_function(
            r"""() => {
                const name = document.querySelector('.jp-KernelName, .jp-Toolbar-kernelName');
                const bar = [...document.querySelectorAll('.jp-StatusBar-TextItem')].map(e => e.textContent).join(' ');
                const indicator = document.querySelector('.jp-Notebook-ExecutionIndicator');
                const named = /\|\s*(Idle|Busy|Starting|Connecting|Unknown)/.test(bar);  // Lab: "Python 3 | Idle"
                const idle = named ? /\|\s*Idle/.test(bar)
                    : !!indicator && indicator.getAttribute('data-status') === 'idle';
                return name && /Python/.test(name.textContent) && idle;
            }""",
            timeout=timeout * 1000,
        )

    def wait_text(self, locator: Any, *texts: str, timeout: float = 30) -> str:
        """The text of `locator` (its first match) once it holds every one of `texts`: what a person waits to
        see, however loaded the machine. Fails after `timeout` seconds, saying what the text was then."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                last = locator.first.inner_text(timeout=5000)
            except Exception:  # not drawn yet
                last = ""
            if all(t in last for t in texts):
                return last
            if time.monotonic() > deadline:
                raise AssertionError(f"waited {timeout:g} s for {texts!r}; the text is {last[:3000]!r}")
            time.sleep(0.1)

    def wait_for(self, what: str, predicate_js: str, arg: Any = None, timeout: float = 30) -> None:
        """Wait until `predicate_js` (a JavaScript function of `arg`) holds in the page; on timeout a screenshot,
        and an AssertionError that says `what` did not happen."""
        try:
            self.page.wait_for_function(predicate_js, arg=arg, timeout=timeout * 1000)
        except Exception as exc:
            with contextlib.suppress(Exception):
                self.shot(f"{self.label}-waited-{int(time.time())}")
            raise AssertionError(f"{what} (waited {timeout:g} s): {exc}") from None

    def click_until_gone(self, locator: Any) -> None:
        """Click a button until it goes (again if the click was lost: the notebook may scroll under the pointer
        between press and release, or a click into a view makes its cell the active one first)."""
        target = locator.element_handle(timeout=30_000)  # this button, not whichever matches next
        for attempt in range(3):
            target.click()
            try:
                target.wait_for_element_state("hidden", timeout=5000)
                return
            except Exception:
                if attempt == 2:
                    with contextlib.suppress(Exception):
                        self.shot(f"{self.label}-failed-click-{int(time.time())}")
                    raise

    def hide_sidebar(self) -> None:
        """Fold JupyterLab's left sidebar away (View > Show Left Sidebar); Notebook 7 shows none."""
        if self.server.app == "lab" and self.page.locator("#jp-left-stack:visible").count():
            self.page.locator(".jp-Notebook").first.click(position={"x": 5, "y": 5})
            self.page.keyboard.press("Control+b")
            self.page.wait_for_selector("#jp-left-stack", state="hidden", timeout=5000)

    @property
    def code_cells(self) -> Any:
        return self.page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook .jp-CodeCell")

    def run_cell(self, index: int, *, timeout: float = 60, wait: bool = True) -> None:
        """Click into the index-th code cell and press Control+Enter (again if it did not start); wait until
        it ran."""
        cell = self.code_cells.nth(index)
        cell.scroll_into_view_if_needed()
        prompt = cell.locator(".jp-InputPrompt")
        before = prompt.inner_text()
        for attempt in range(3):
            editor = cell.locator(".cm-content")
            if editor.count() and editor.first.is_visible():
                editor.first.click()
            else:  # its code is folded away: clicking its prompt selects it (and unfolds the code)
                prompt.click()
            self.page.keyboard.press("Control+Enter")
            try:
                self.page.wait_for_function(
                    "([el, before]) => el.textContent !== before",
                    arg=[prompt.element_handle(), before], timeout=4000)
                break
            except Exception:
                if attempt == 2:
                    raise
        if wait:
            self.page.wait_for_function(
                "el => /\\[\\d+\\]/.test(el.textContent)", arg=prompt.element_handle(), timeout=timeout * 1000)

    def run_cells(self, *indexes: int) -> None:
        """Run these code cells one after the other, each to its end."""
        for index in indexes:
            self.run_cell(index)

    def cells(self) -> list[dict]:
        """Each cell of the notebook in front: its source (as the editor shows it), prompt, number of outputs
        and whether it is a Markdown cell."""
        return self.page.evaluate("""() => [...document.querySelectorAll(
            '.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook .jp-Cell')].map(c => ({
                source: [...c.querySelectorAll('.jp-InputArea .cm-line')].map(l => l.textContent).join('\\n'),
                prompt: (c.querySelector('.jp-InputPrompt') || {}).textContent || '',
                outputs: c.querySelectorAll('.jp-OutputArea-output').length,
                markdown: c.classList.contains('jp-MarkdownCell')}))""")

    def wait_cells(self, predicate: Any, what: str, timeout: float = 30) -> list[dict]:
        """`cells()` once `predicate` holds for them; fails after `timeout` s, saying `what` and what they were."""
        deadline = time.monotonic() + timeout
        last: list[dict] = []
        while time.monotonic() < deadline:
            last = self.cells()
            if predicate(last):
                return last
            time.sleep(0.1)
        self.shot(f"{self.server.app}-failure-cells")
        raise AssertionError(f"{what}: the cells are {[c['source'] for c in last]!r}")

    def sources(self) -> list[str]:
        """The source of each cell of the notebook in front, as its editor shows it."""
        return [c["source"] for c in self.cells()]

    def wait_sources(self, predicate: Callable[[list[str]], bool], what: str, timeout: float = 30) -> list[str]:
        """`sources()` once `predicate` holds for them; fails after `timeout` s, saying `what` and what they were."""
        cells = self.wait_cells(lambda cells: predicate([c["source"] for c in cells]), what, timeout)
        return [c["source"] for c in cells]

    def run_all(self) -> None:
        """Run > Run All Cells, as a person would."""
        self.page.click(".lm-MenuBar-item:has-text('Run')")
        self.page.click(".lm-Menu-item:has-text('Run All Cells')")

    def shot(self, name: str, locator: Any = None) -> Path:
        ARTIFACTS.mkdir(exist_ok=True)
        path = ARTIFACTS / f"{name}.png"
        (locator or self.page).screenshot(path=str(path))
        return path

    def close(self) -> None:
        if self.browser is None:  # a page another one opened: only it
            self.page.close()
            return
        try:
            self.browser.close()
        finally:
            self._pw.stop()

