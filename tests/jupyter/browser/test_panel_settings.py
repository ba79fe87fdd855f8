"""The panel's Settings in a real chromium, in JupyterLab and Notebook 7: a local OpenAI-compatible server's base
URL and a key typed in the page, the model chosen there, and a prompt sent from the panel runs against that server
with that key. The key is kept only in the key file: the password field is emptied, the page shows only how the
key ends, and the saved notebook does not hold it. Screenshots go to test-artifacts/."""

from __future__ import annotations

import json
import time
from contextlib import closing

import pytest

from ..fake_openai import FakeOpenAI
from .lab import LabPage, serve, write_notebook
from .panel import Panel

pytestmark = pytest.mark.browser

KEY = "sk-typed-Qm4Wx8Zr2Tn6Yp1Lk5"


@pytest.fixture(scope="module", params=["lab", "notebook"])
def server(request, tmp_path_factory):
    config = tmp_path_factory.mktemp("settings-config-" + request.param)
    for srv in serve(request, tmp_path_factory, request.param, NBAGENT_CONFIG_DIR=str(config)):
        srv.config = config
        yield srv


def test_a_local_server_and_a_key_set_in_the_page_answer_a_prompt(server):
    app = server.app
    name = f"settings_{app}.ipynb"
    write_notebook(server.root / name, ["%load_ext nbagent", "1 + 1"])
    with closing(FakeOpenAI()) as fake, LabPage(server, name, width=1400, height=1000) as page:
        p = page.page
        page.hide_sidebar()
        page.run_cell(0)
        panel = Panel(page).open()
        panel.find(".nba-panel-settings").click()
        local = panel.find(".nba-provider-ollama")
        local.wait_for(state="visible", timeout=15_000)

        # a bad base URL is refused with why
        local.locator(".nba-settings-urlfield").fill("localhost:8000/v1")
        local.locator(".nba-settings-saveurl").click()
        panel.wait_text(".nba-settings-error", "starts with http:// or https://")

        local.locator(".nba-settings-urlfield").fill(fake.url)
        local.locator(".nba-settings-saveurl").click()
        panel.wait_text(".nba-provider-ollama .nba-settings-url", f"{fake.url} (stored)")
        local = panel.find(".nba-provider-ollama")
        local.locator(".nba-settings-keyfield").fill(KEY)
        local.locator(".nba-settings-storekey").click()
        panel.wait_text(".nba-provider-ollama .nba-settings-key", f"stored, ends in …{KEY[-4:]}")
        assert panel.find(".nba-provider-ollama .nba-settings-remove").is_visible()
        assert all(f.input_value() == "" for f in panel.find(".nba-settings-keyfield").all())
        model = panel.find(".nba-option-model")
        drawn = panel.find(".nba-settings").get_attribute("data-drawn")
        model.locator("input").fill("ollama:local-model")
        model.locator(".nba-settings-set").click()
        page.wait_for("the model setting was not taken",  # drawn again from the kernel's answer
                      "n => document.querySelector('#nbagent-panel .nba-settings').dataset.drawn !== n && "
                      "document.querySelector('#nbagent-panel .nba-option-model input').value === 'ollama:local-model' && "
                      "!document.querySelector('#nbagent-panel .nba-settings-error').textContent", arg=drawn)
        panel.find(".nba-provider-ollama").scroll_into_view_if_needed()
        page.shot(f"settings-{app}", panel.find())
        assert KEY not in panel.text() and KEY not in p.content()

        # back to the chat: the prompt runs on the local server, with the key
        panel.find(".nba-panel-settings").click()
        panel.wait_text(".nba-panel-conv", "model: ollama:local-model")
        panel.send("Say something.")
        panel.wait_runs("the panel's run did not end with the local server's answer", "answer 1")
        assert fake.requests[-1]["headers"]["authorization"] == f"Bearer {KEY}"
        assert fake.requests[-1]["body"]["model"] == "local-model"
        page.shot(f"settings-{app}-answer", panel.find())

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
