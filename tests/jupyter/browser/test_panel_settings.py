"""The panel's Settings in a real chromium, in JupyterLab and Notebook 7: a local OpenAI-compatible server's base
URL and a key typed in the page, the model chosen there, and a prompt sent from the panel runs against that server
with that key. The key is kept only in the key file: the password field is emptied, the page shows only how the
key ends, and the saved notebook does not hold it. Screenshots go to test-artifacts/."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest

from ..fake_openai import FakeOpenAI
from .lab import LabPage, LabServer, write_notebook
from .test_notebook_tools import extension_path
from .test_panel import open_panel, panel_text, wait_for

pytestmark = pytest.mark.browser

if shutil.which("chromium") is None and not Path("/usr/bin/chromium").exists():  # pragma: no cover
    pytest.skip("chromium is not installed (./dev test installs it)", allow_module_level=True)

KEY = "sk-typed-Qm4Wx8Zr2Tn6Yp1Lk5"


@pytest.fixture(scope="module", params=["lab", "notebook"])
def server(request, tmp_path_factory):
    root = tmp_path_factory.mktemp("settings-" + request.param)
    config = tmp_path_factory.mktemp("settings-config-" + request.param)
    srv = LabServer(root, app=request.param, JUPYTER_PATH=str(extension_path(root)), NBAGENT_CONFIG_DIR=str(config))
    srv.config = config
    yield srv
    srv.stop()


def test_a_local_server_and_a_key_set_in_the_page_answer_a_prompt(server):
    app = server.app
    name = f"settings_{app}.ipynb"
    write_notebook(server.root / name, ["%load_ext nbagent", "1 + 1"])
    fake = FakeOpenAI()
    page = LabPage(server, name, width=1400, height=1000)
    p = page.page
    try:
        if app == "lab":
            page.hide_sidebar()
        page.run_cell(0)
        open_panel(page)
        wait_for(page, "the panel did not connect to the kernel",
                 "() => !!document.querySelector('#nbagent-panel .nba-panel-m') && "
                 "!document.querySelector('#nbagent-panel .nba-panel-absent')")
        p.locator("#nbagent-panel .nba-panel-settings").click()
        local = p.locator("#nbagent-panel .nba-provider-ollama")
        local.wait_for(state="visible", timeout=15_000)

        # a bad base URL is refused with why
        local.locator(".nba-settings-urlfield").fill("localhost:8000/v1")
        local.locator(".nba-settings-saveurl").click()
        page.wait_text(p.locator("#nbagent-panel .nba-settings-error"), "starts with http:// or https://")

        local.locator(".nba-settings-urlfield").fill(fake.url)
        local.locator(".nba-settings-saveurl").click()
        page.wait_text(p.locator("#nbagent-panel .nba-provider-ollama .nba-settings-url"), f"{fake.url} (stored)")
        local = p.locator("#nbagent-panel .nba-provider-ollama")
        local.locator(".nba-settings-keyfield").fill(KEY)
        local.locator(".nba-settings-storekey").click()
        page.wait_text(p.locator("#nbagent-panel .nba-provider-ollama .nba-settings-key"), f"stored, ends in …{KEY[-4:]}")
        assert p.locator("#nbagent-panel .nba-provider-ollama .nba-settings-remove").is_visible()
        assert all(f.input_value() == "" for f in p.locator("#nbagent-panel .nba-settings-keyfield").all())
        model = p.locator("#nbagent-panel .nba-option-model")
        drawn = p.locator("#nbagent-panel .nba-settings").get_attribute("data-drawn")
        model.locator("input").fill("ollama:local-model")
        model.locator(".nba-settings-set").click()
        wait_for(page, "the model setting was not taken",  # drawn again from the kernel's answer
                 "n => document.querySelector('#nbagent-panel .nba-settings').dataset.drawn !== n && "
                 "document.querySelector('#nbagent-panel .nba-option-model input').value === 'ollama:local-model' && "
                 "!document.querySelector('#nbagent-panel .nba-settings-error').textContent", arg=drawn)
        p.locator("#nbagent-panel .nba-provider-ollama").scroll_into_view_if_needed()
        page.shot(f"settings-{app}", p.locator("#nbagent-panel"))
        assert KEY not in panel_text(page) and KEY not in p.content()

        # back to the chat: the prompt runs on the local server, with the key
        p.locator("#nbagent-panel .nba-panel-settings").click()
        wait_for(page, "the chat did not come back with the chosen model",
                 "() => /model: ollama:local-model/.test(document.querySelector('#nbagent-panel .nba-panel-conv').innerText)")
        p.locator("#nbagent-panel .nba-panel-prompt").fill("Say something.")
        p.locator("#nbagent-panel .nba-panel-send").click()
        wait_for(page, "the panel's run did not end with the local server's answer",
                 "() => /answer 1/.test(document.querySelector('#nbagent-panel .nba-panel-runs').innerText)")
        assert fake.requests[-1]["headers"]["authorization"] == f"Bearer {KEY}"
        assert fake.requests[-1]["body"]["model"] == "local-model"
        page.shot(f"settings-{app}-answer", p.locator("#nbagent-panel"))

        # saved, the notebook does not hold the key; the key file does, private
        page.run_cell(1)
        page.code_cells.nth(1).locator(".cm-content").click()
        p.keyboard.press("Escape")
        p.keyboard.press("Control+s")
        path = server.root / name
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            saved = json.loads(path.read_text())
            if saved["cells"][1].get("execution_count"):
                break
            time.sleep(0.25)
        else:
            raise AssertionError("the notebook was not saved")
        assert KEY not in path.read_text()
        key_file = server.config / "keys.json"
        assert json.loads(key_file.read_text())["values"]["OLLAMA_API_KEY"] == KEY
        assert oct(key_file.stat().st_mode & 0o777) == "0o600"
        assert [str(f) for f in server.root.rglob("*") if f.is_file() and KEY.encode() in f.read_bytes()] == []
    except Exception:
        page.shot(f"settings-{app}-failure")
        raise
    finally:
        page.close()
        fake.close()
