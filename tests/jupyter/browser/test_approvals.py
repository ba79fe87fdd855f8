"""Approvals that cannot be lost, in a real chromium: Approve, Deny, Always allow and Stop reach the kernel through
the page's own `nbagent.panel` comm, so they work where the live view's widgets were closed by another page.

- Notebook 7's usual flow: a notebook made with the file browser's New opens in a new tab, and the file-browser
  tab keeps a kernel connection without a widget manager, which answers every `comm_open` of the run's view
  with `comm_close`. The kernel then forgets the view's widgets, and a click that went through them was dropped
  while the timer kept ticking. Here Approve runs the tool, the view says in one line that another page closed
  its widgets (and offers `view(run)`), and Stop stops a second run.

  Whether that tab keeps its connection is a race in Notebook 7 (it starts the new notebook's session, then
  disposes the document it opened in the other tab: a session that comes up after the dispose stays connected;
  one that comes up before is closed with it). Where the race went the other way, the test makes the same
  connection with that tab's own services (JupyterLab's kernel connection, which answers a `comm_open` for a
  target it does not know with `comm_close`), so the condition under test exists in every run.
- JupyterLab with the same notebook in two tabs on one kernel, where the widgets work: a decision from the second
  tab's panel is taken once, and the first tab's view shows the run done.

Screenshots go to test-artifacts/ (also on failure)."""

from __future__ import annotations

import pytest

from .lab import DONE, REMOVE_TOOL, LabPage, serve, write_notebook
from .panel import Panel

pytestmark = [pytest.mark.browser, pytest.mark.timeout(600)]


@pytest.fixture(scope="module")
def notebook7(request, tmp_path_factory):
    """Notebook 7, its pages' application reachable as `window.jupyterapp` (to connect to a kernel as a page does)."""
    yield from serve(request, tmp_path_factory, "notebook", options=["--JupyterNotebookApp.expose_app_in_browser=True"])

MODEL = REMOVE_TOOL + '''from nbagent import AssistantMessage, ScriptedModel, ToolCall


def removing(path):
    return AssistantMessage(text=f"I'll remove {path}.", tool_calls=[ToolCall(name="remove", arguments={"path": path})])


model = ScriptedModel([removing("old-export.csv"), "The old export is gone.", removing("keep.csv"), "Not reached."],
                      delay=0.02)
'''

COUNT_FRAMES = """
(() => {
  // what this page sends its kernels and receives from them, by message type (a kernel websocket's frames name it
  // in their header, as text or in the binary protocol's header part)
  window.__nba_sent = {};
  window.__nba_got = {};
  window.__nba_open = 0;  // kernel websockets open now
  const count = (into, data) => {
    try {
      const text = typeof data === 'string' ? data : new TextDecoder().decode(data);
      const type = /"msg_type":\\s*"([a-z_]+)"/.exec(text);
      if (type) { into[type[1]] = (into[type[1]] || 0) + 1; }
    } catch (e) { /* not text */ }
  };
  const send = WebSocket.prototype.send;
  WebSocket.prototype.send = function (data) {
    count(window.__nba_sent, data);
    return send.call(this, data);
  };
  const Native = window.WebSocket;
  window.WebSocket = class extends Native {
    constructor(...args) {
      super(...args);
      this.addEventListener('message', (event) => count(window.__nba_got, event.data));
      if (String(args[0]).includes('/api/kernels/')) {
        this.addEventListener('open', () => { window.__nba_open += 1; });
        this.addEventListener('close', () => { window.__nba_open -= 1; });
      }
    }
  };
})();
"""

TREE_CONNECTED = "() => window.__nba_open >= 1 && (window.__nba_got.kernel_info_reply || 0) >= 1"
"""The file-browser tab has a connection to the new notebook's kernel open, and it is up: its kernel_info request
answered (a connection asks it first; the server sends the reply once the kernel's broadcasts reach it)."""

CONNECT = """async () => {
  // the file-browser tab connects to the new notebook's kernel with its own services, as its leaked session does:
  // a kernel connection that handles comms and has no widget manager's target
  const sessions = window.jupyterapp.serviceManager.sessions;
  for (let tries = 0; tries < 600; tries++) {
    await sessions.refreshRunning();
    const session = Array.from(sessions.running()).find((s) => s.path.endsWith('.ipynb') && s.kernel);
    if (session) {
      window.__nba_connection = window.jupyterapp.serviceManager.kernels.connectTo(
        {model: session.kernel, handleComms: true});
      await window.__nba_connection.info;  // connected, and its kernel_info request answered
      return session.path;
    }
    await new Promise((done) => setTimeout(done, 100));
  }
  throw new Error('no session for the new notebook in 60 s');
}"""


def frames(page: LabPage) -> str:
    """What the page's kernel connections sent and received so far, by message type: for a failure's message."""
    return page.page.evaluate(
        "() => JSON.stringify({open: window.__nba_open, sent: window.__nba_sent, got: window.__nba_got})")


def type_and_run(page: LabPage, index: int, code: str) -> None:
    """Put `code` in the index-th cell of a new notebook (a new cell below the last, if there is none; inserted as
    one piece: no brackets auto-closed) and run it."""
    if page.code_cells.count() <= index:
        page.code_cells.nth(index - 1).locator(".jp-InputPrompt").click()
        page.page.locator('.jp-Toolbar [data-command="notebook:insert-cell-below"]').first.click()
        page.code_cells.nth(index).wait_for(state="visible", timeout=15_000)
    cell = page.code_cells.nth(index)
    cell.locator(".cm-content").click()
    page.page.keyboard.insert_text(code)
    page.run_cell(index)


def test_notebook_7_new_from_the_file_browser_approve_and_stop_work(notebook7):
    root = notebook7.root
    (root / "agent_setup.ipy").write_text(
        "%load_ext nbagent\n" + MODEL +
        "\nrun = %agent --model model --tools remove Remove old-export.csv, it is out of date.\n")
    (root / "old-export.csv").write_text("a,b\n1,2\n")
    (root / "keep.csv").write_text("a,b\n3,4\n")
    with LabPage(notebook7, None) as tree:  # the file browser, which stays open
        tree.page.add_init_script(COUNT_FRAMES)
        tree.page.reload()
        tree.page.wait_for_selector(".jp-DirListing-content", timeout=60_000)
        with tree.page.context.expect_page(timeout=60_000) as opened:
            tree.page.locator(".jp-Toolbar-item:has-text('New')").first.click()
            tree.page.locator(".lm-Menu-item:has-text('Python 3')").first.click()
        with LabPage(notebook7, page=opened.value, owner=tree, label="approvals-nb7") as nb:
            # the condition this test is about, made before the run starts: the file-browser tab connected to the
            # new notebook's kernel, by Notebook 7's own race or, where that went the other way, by the tab's services
            try:
                tree.wait_for("the file-browser tab's session did not stay connected", TREE_CONNECTED, timeout=20)
            except AssertionError:
                print("the file-browser tab's session was closed; it connects with its services:", frames(tree))
                tree.page.evaluate(CONNECT)
                tree.wait_for("the file-browser tab did not connect to the new notebook's kernel", TREE_CONNECTED)
            type_and_run(nb, 0, "%run -i agent_setup.ipy")
            p = nb.page
            approve = p.locator(".nba-view button.nba-approve")
            approve.wait_for(state="visible", timeout=60_000)
            view = p.locator(".nba-view").first
            # the failure's cause is there: the file-browser tab answered the view's comm_open messages with comm_close
            try:
                tree.wait_for("the file-browser tab did not close the view's widgets",
                              "() => (window.__nba_sent.comm_close || 0) > 10")
            except AssertionError as exc:
                raise AssertionError(f"{exc}; the file-browser tab's kernel frames: {frames(tree)}") from None
            # the view says so, in one line, and offers view(run)
            nb.wait_text(view, "Needs your approval", "old-export.csv", "closed this view's widgets", "view(run)")
            nb.shot("approvals-nb7-waiting", view)
            approve.click()
            p.wait_for_selector(DONE, timeout=30_000)
            final = p.locator(".jp-OutputArea .nba").first
            nb.wait_text(final, "Removed old-export.csv", "approved by you", "The old export is gone.")
            assert not (root / "old-export.csv").exists()
            nb.shot("approvals-nb7-approved", final)

            # Stop, in the same flow: the second run asks, Stop ends it, the file stays
            type_and_run(nb, 1, "run2 = %agent --model model --tools remove Remove keep.csv too.")
            second = p.locator(".jp-Cell").nth(1).locator(".nba-view")
            second.locator("button.nba-approve").wait_for(state="visible", timeout=60_000)
            nb.wait_text(second, "keep.csv", "closed this view's widgets")
            second.locator("button.nba-stop").click()
            nb.wait_text(p.locator(".jp-Cell").nth(1).locator(".jp-OutputArea .nba").first, "stopped", timeout=30)
            assert (root / "keep.csv").exists()
            nb.shot("approvals-nb7-stopped", p.locator(".jp-Cell").nth(1))


def test_jupyterlab_two_tabs_on_one_kernel_decide_once(lab):
    root = lab.root
    write_notebook(root / "two_tabs.ipynb", [
        "%load_ext nbagent",
        MODEL,
        "run = %agent --model model --tools remove Remove old-export.csv, it is out of date.",
    ])
    (root / "old-export.csv").write_text("a,b\n1,2\n")
    with LabPage(lab, "two_tabs.ipynb", width=1300, height=1000) as first:
        first.hide_sidebar()
        with first.open_page("two_tabs.ipynb", width=1300, height=1000) as second:
            first.run_cells(0, 1, 2)
            first.page.locator(".nba-view button.nba-approve").wait_for(state="visible", timeout=60_000)
            # the second tab shows the same run in its panel, drawn by its own widget manager
            panel = Panel(second)
            second.page.locator(".nba-toolbar-ask").first.click()
            live = panel.find(".nba-panel-live")
            live.locator("button.nba-approve").wait_for(state="visible", timeout=60_000)
            second.wait_text(live, "Needs your approval", "old-export.csv")
            assert "closed this view's widgets" not in live.inner_text()  # both pages keep the widgets here
            second.shot("approvals-lab-second-tab-waiting", panel.find())
            # Approve in the second tab, then (too late) in the first: one decision
            live.locator("button.nba-approve").click()
            first.page.wait_for_selector(DONE, timeout=30_000)
            final = first.page.locator(".jp-OutputArea .nba").first
            text = first.wait_text(final, "Removed old-export.csv", "The old export is gone.")
            assert text.count("approved by you") == 1, text
            assert not (root / "old-export.csv").exists()
            first.shot("approvals-lab-first-tab-done", final)
            panel.wait_runs("the second tab's panel did not show the run done", "The old export is gone")
