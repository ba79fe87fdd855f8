"""The panel's Settings in a real kernel, played over the `nbagent.panel` comm as the page plays it.

A key stored through the comm lands only in the key file (0600, outside the workspace), the next run sends it
to the provider, and it appears nowhere else: not in what the kernel sends the page (replies, pushes, outputs),
not in the session store or the workspace, not in `%config NBAgent`; after a restart it is still used and
redacted; Remove forgets it. A bad base URL, an unknown provider, a key with a space inside and a setting that
does not fit are refused with why, and nothing is stored."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from ..fake_openai import FakeOpenAI
from ..kernelclient import KernelSession
from .test_comm import Page

pytestmark = pytest.mark.kernel

KEY = "sk-local-Vb7Kp2Xq9Rw4Zt6Nm3"


def _files_holding(folder: Path, text: str) -> list[str]:
    return [str(p) for p in folder.rglob("*") if p.is_file() and text.encode() in p.read_bytes()]


def test_a_key_stored_from_the_page_is_used_and_kept_out_of_everything_else(tmp_path):
    workspace, config = tmp_path / "ws", tmp_path / "cfg"
    workspace.mkdir()
    server = FakeOpenAI()
    kernel = KernelSession(workspace, NBAGENT_CONFIG_DIR=str(config))
    try:
        kernel.execute("%load_ext nbagent")
        page = Page(kernel)
        state = page.ask("settings")["result"]
        assert [p["id"] for p in state["providers"]] == ["anthropic", "openai", "openai-responses", "google",
                                                          "mistral", "ollama"]
        local = next(p for p in state["providers"] if p["id"] == "ollama")
        assert local["key"] == {"source": None, "ends": None, "required": False}
        assert local["base_url"]["source"] is None and local["base_url"]["default"] == "http://localhost:11434/v1"
        assert {o["name"] for o in state["options"]} >= {"model", "mode", "sandbox", "max_cost", "rules"}
        assert next(o for o in state["options"] if o["name"] == "rules")["kind"] == "other"

        # refused with why, nothing stored
        for op, fields, why in [
            ("set_base_url", {"provider": "nope", "base_url": "http://localhost:1/v1"}, "unknown provider 'nope'"),
            ("set_key", {"provider": "nope", "key": KEY}, "unknown provider 'nope'"),
            ("set_base_url", {"provider": "ollama", "base_url": "localhost:8000/v1"}, "starts with http:// or https://"),
            ("set_base_url", {"provider": "ollama", "base_url": "ftp://localhost/v1"}, "starts with http:// or https://"),
            ("set_base_url", {"provider": "ollama", "base_url": "http:///v1"}, "names a host"),
            ("set_base_url", {"provider": "ollama", "base_url": "http://me:pw@localhost/v1"}, "no user name or password"),
            ("set_base_url", {"provider": "ollama", "base_url": "http://localhost:99999/v1"}, "cannot be read"),
            ("set_base_url", {"provider": "ollama", "base_url": "http://localhost/v1?x=1"}, "no ?query"),
            ("set_key", {"provider": "ollama", "key": "sk-with a-space-inside"}, "whitespace or a control character"),
            ("set_key", {"provider": "ollama", "key": "short"}, "too short"),
            ("set_option", {"name": "mode", "value": "yolo"}, "NBAgent.mode"),
            ("set_option", {"name": "max_turns", "value": "many"}, "NBAgent.max_turns is a whole number"),
            ("set_option", {"name": "rules", "value": "allow: shell"}, "%config NBAgent.rules"),
            ("set_option", {"name": "no_such", "value": 1}, "NBAgent has no setting 'no_such'"),
        ]:
            reply = page.ask(op, **fields)
            assert reply["ok"] is False and why in reply["error"], (op, fields, reply)
            assert "a-space-inside" not in reply["error"]
        assert not (config / "keys.json").exists()

        # stored: the answer says only that, and how the key ends
        assert page.ask("set_base_url", provider="ollama", base_url=server.url + "/")["ok"]
        stored = page.ask("set_key", provider="ollama", key=KEY + "\n")  # a pasted newline is dropped
        assert stored["ok"], stored
        local = next(p for p in stored["result"]["providers"] if p["id"] == "ollama")
        assert local["key"] == {"source": "stored", "ends": KEY[-4:], "required": False}
        assert local["base_url"] == {"variable": "OLLAMA_BASE_URL", "value": server.url, "source": "stored",
                                     "default": "http://localhost:11434/v1"}
        chosen = page.ask("set_option", name="model", value="ollama:local-model")
        assert chosen["ok"] and next(o for o in chosen["result"]["options"] if o["name"] == "model")["value"] == \
            "ollama:local-model"
        assert page.ask("set_option", name="max_cost", value="")["ok"]  # empty: not set (None)

        key_file = config / "keys.json"
        assert stat.S_IMODE(key_file.stat().st_mode) == 0o600 and stat.S_IMODE(config.stat().st_mode) == 0o700
        assert json.loads(key_file.read_text())["values"] == {"OLLAMA_API_KEY": KEY, "OLLAMA_BASE_URL": server.url}

        # the next run uses it: the model is the stored one, the request carries the key
        out = kernel.execute("run = %agent --wait Say something.")
        assert kernel.value("run.status") == "done" and kernel.value("run.output") == "answer 1"
        assert server.requests[-1]["headers"]["authorization"] == f"Bearer {KEY}"
        assert server.requests[-1]["body"]["model"] == "local-model"
        shown = kernel.execute("%config NBAgent")
        assert "ollama:local-model" in shown["stdout"] + json.dumps(shown["data"])

        # the key is nowhere else: what the kernel sent, the workspace (with the session store), %config
        assert kernel.value("__import__('nbagent.jupyter').jupyter.get_session().stored.session_id is not None")
        assert (workspace / ".nbagent" / "sessions").is_dir()
        assert _files_holding(workspace, KEY) == []
        assert _files_holding(config, KEY) == [str(key_file)]
        assert not [m for m in kernel.messages() if KEY in json.dumps(m, default=str)]
        assert KEY not in json.dumps(out, default=str) + json.dumps(shown, default=str)

        # a restart: the key file is read again; the key is a secret from %load_ext on, and still used
        kernel.restart()
        kernel.execute("%load_ext nbagent")
        assert kernel.value("__import__('nbagent.safety').safety.redact(open(__import__('nbagent.safety.keys')"
                            ".safety.keys.keys_path()).read())").count("[REDACTED:OLLAMA_API_KEY]") == 1
        kernel.execute("again = %agent --model ollama:local-model --wait Once more.")
        assert kernel.value("again.output") == "answer 2"
        assert server.requests[-1]["headers"]["authorization"] == f"Bearer {KEY}"

        # Remove forgets it: the file no longer holds it, the page is told so, the next request goes without
        page = Page(kernel)
        removed = page.ask("remove_key", provider="ollama")
        assert removed["ok"]
        assert next(p for p in removed["result"]["providers"] if p["id"] == "ollama")["key"]["source"] is None
        assert KEY not in key_file.read_text()
        kernel.execute("third = %agent --model ollama:local-model --wait And again.")
        assert kernel.value("third.output") == "answer 3" and "authorization" not in server.requests[-1]["headers"]
        assert page.ask("set_base_url", provider="ollama", base_url=None)["ok"]
        assert json.loads(key_file.read_text())["values"] == {}
        assert not [m for m in kernel.messages() if KEY in json.dumps(m, default=str)]
        problems = Page.problems(kernel)
        assert not problems, "\n".join(problems)
    finally:
        kernel.shutdown()
        server.close()
