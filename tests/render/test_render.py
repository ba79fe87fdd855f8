"""How runs, calls and results look: HTML for notebooks, plain text for scripts."""

from __future__ import annotations

import pandas as pd

from nbagent import Agent, AssistantMessage, ScriptedModel, ToolCall, ToolContext, ToolResult, tool
from nbagent import render
from nbagent.render.markdown import LIVE_MARK


@tool(read_only=True, describe_activity=lambda a: f"Summarising {a.column}",
      describe_completed_activity=lambda a, r: f"Summarised {a.column} ({len(r)} rows)")
def summarize(column: str) -> pd.DataFrame:
    """Summarise a column."""
    return pd.DataFrame({column: [1, 2, 3]})


@tool(destructive=True)
def wipe(path: str) -> str:
    """Wipe a path."""
    return "wiped"


def _run():
    model = ScriptedModel([
        AssistantMessage(text="Looking <b>now</b>.", tool_calls=[
            ToolCall(name="summarize", arguments={"column": "revenue"}),
            ToolCall(name="wipe", arguments={"path": "/tmp/x"}),
            ToolCall(name="missing", arguments={}),
        ]),
        "All **done**.",
    ])
    return Agent(model=model, tools=[summarize, wipe], approver=lambda r: False).run_sync("Sum revenue")


def test_a_run_renders_its_prompt_text_calls_results_and_decisions():
    run = _run()
    page = run._repr_html_()
    assert page.startswith("<style>")
    assert "Sum revenue" in page and "<strong>done</strong>" in page
    assert "Looking &lt;b&gt;now&lt;/b&gt;." in page  # a model's markup is shown, never rendered
    assert "Summarised revenue (3 rows)" in page and "calls[0].details" in page
    assert "<table" in page  # the DataFrame, rendered by its own _repr_html_
    assert "denied by you" in page and "destructive" in page
    assert "does not exist" in page and "unknown tool" in page
    assert page.index("Summarised revenue") < page.index("All <strong>done</strong>")


def test_a_call_record_shows_the_wire_json_and_a_result_its_object():
    run = _run()
    rec = run.calls[0]
    html = rec._repr_html_()
    assert "wire: the JSON the model received" in html and rec.id in html
    result = rec.result._repr_html_()
    assert "<table" in result and "what the model received" in result
    assert "error" in ToolResult("boom", is_error=True)._repr_html_()


def test_arguments_are_labelled_and_long_values_kept_in_blocks():
    html = render.args_html({"path": "a.txt", "code": "x = 1\ny = 2", "n": 3, "big": list(range(40)),
                             "nested": [{"a": 1, "b": "x" * 80}]})
    assert '<div class="nba-k">path</div><div class="nba-v">&quot;a.txt&quot;</div>' in html
    assert '<div class="nba-pre">x = 1\ny = 2</div>' in html
    assert '<div class="nba-k">n</div><div class="nba-v">3</div>' in html
    assert '<div class="nba-pre">[0, 1, 2, 3,' in html  # a flat list wraps
    assert '<div class="nba-pre">[\n  {\n    &quot;a&quot;: 1,' in html  # a structure is indented
    assert "<table" not in html and "<pre" not in html  # the host notebook's table styles cannot reach it
    assert "more characters" in render.args_html({"t": "x" * 5000}, limit=100)
    assert "receiving arguments" in render.args_html({"t": "x"}, streaming=True)


def test_plain_text_for_scripts():
    run = _run()
    assert str(run) == render.run_text(run) and str(run.calls[0]) == render.call_text(run.calls[0])
    assert repr(run).startswith("<AgentRun done")
    text = render.run_text(run)
    assert text.splitlines()[0].startswith("nbagent run · scripted · default mode · done · 2 turns · 3 calls")
    assert "✓ Summarised revenue (3 rows)  [summarize · done" in text
    assert "⊘ Did not run wipe  [wipe · denied" in text and "denied by user" in text
    assert "answer: All **done**." in text


def test_the_default_label_is_in_the_past_tense_once_the_call_ended():
    script = [AssistantMessage(tool_calls=[ToolCall(name="wipe", arguments={"path": "x"})]), "ok"]
    allowed = Agent(model=ScriptedModel(script), tools=[wipe], approver="allow").run_sync("go")
    assert "Called wipe" in allowed._repr_html_() and "Called wipe" in str(allowed)  # HTML and text agree
    denied = _run()
    assert "Did not run wipe" in denied._repr_html_() and "Calling wipe" not in denied._repr_html_()
    assert "Calling wipe" not in str(denied)


def test_small_pieces():
    assert render.seconds(0.0123) == "0.01 s" and render.seconds(3.21) == "3.2 s"
    assert render.seconds(42.4) == "42 s" and render.seconds(125) == "2 min 05 s"
    assert render.describe_object(pd.DataFrame({"a": [1, 2]})) == "DataFrame, 2 rows × 1 columns"
    assert render.describe_object("abc") == "str of 3 characters" and render.describe_object(3) == "int"
    assert render.status_word("waiting_for_approval") == "needs approval"


def test_arguments_being_approved_are_shown_whole_however_long():
    from nbagent.records import CallRecord

    code = "\n".join(f"step_{i} = {i}" for i in range(4000)) + "\nimport os; os.system('the end')"
    rec = CallRecord(ToolCall(name="python", arguments={"code": code}))
    rec.arguments = {"code": code}
    rec.status = "waiting_for_approval"
    shown = render.call_inner_html(rec, waiting=True)
    assert "os.system(&#x27;the end&#x27;)" in shown and "more characters" not in shown  # every byte that will run
    assert "more characters" in render.call_inner_html(rec)  # a row that is not being approved stays short


def test_badges_say_what_a_call_is_and_each_row_why_it_ran(tmp_path):
    from nbagent import toolbox

    tools = toolbox.all(workspace=tmp_path)
    model = ScriptedModel([AssistantMessage(tool_calls=[ToolCall(name="shell", arguments={"command": "ls"}),
                                                        ToolCall(name="python", arguments={"code": "1 + 1"}),
                                                        ToolCall(name="read_file", arguments={"path": "a.txt"})]),
                           "done"])
    (tmp_path / "a.txt").write_text("hello")
    run = Agent(model=model, tools=tools, rules=["allow: python"]).run_sync("go")
    shell, python, read = (render.call_inner_html(rec) for rec in run.calls)
    assert "destructive" not in shell + python + read  # a command that only lists is not destructive
    assert ">read-only<" in shell and "ran without asking" in shell
    assert ">runs code<" in python and "<b>allowed</b> by rule" in python
    assert ">read-only<" in read and "ran without asking: it only reads" in read


def test_the_progress_message_stays_while_the_tool_prints_and_the_answer_line_reads_plain():
    from nbagent.context import ProgressUpdate
    from nbagent.records import CallRecord

    rec = CallRecord(ToolCall(name="load", arguments={}))
    rec.arguments, rec.status = {}, "running"
    for update in (ProgressUpdate("Loading March", fraction=0.2), ProgressUpdate(None, output="row 1\n")):
        rec.progress.append(update)
        rec.progress_count += 1
    rec.fraction = 0.2
    shown = render.call_inner_html(rec)
    assert "20% · Loading March" in shown
    assert render.plain_answer("**Revenue** is up by *3%* in `march`, see [the chart](http://x)") == (
        "Revenue is up by 3% in march, see the chart")
    assert render.plain_answer("To fill it:\n\n```python\norders.fillna(0)\n```\n~~~bash\nls\n~~~") == (
        "To fill it: orders.fillna(0) ls")  # a fence and its language are not words of the answer


def test_the_models_code_blocks_are_highlighted_and_stay_inert():
    shown = render.markdown_html("```python\nimport os  # hi\n```\n\n```python\n</code></pre><img src=x onerror=alert(1)>\n```")
    assert '<span class="hl-kn">import</span>' in shown and '<span class="hl-c1"># hi</span>' in shown
    assert "<img" not in shown and "onerror" in shown  # code is text, whatever it spells
    assert render.markdown_html("```\nplain\n```") == f'<pre class="nba-code-block {LIVE_MARK}"><code>plain\n</code></pre>\n'


# -- the model's code blocks: marked for the frontend's Copy and Insert as cell buttons ----------------------
def _blocks(markup: str) -> list[tuple[str, str]]:
    """Each `<pre>` of `markup`: its class attribute and the text of its `<code>` (as a browser's
    textContent reads it: tags gone, entities decoded)."""
    import html as html_module
    import re

    return [(cls, html_module.unescape(re.sub(r"<[^>]+>", "", body)))
            for cls, body in re.findall(r'<pre(?: class="([^"]*)")?><code>(.*?)</code></pre>', markup, re.S)]


def test_a_fenced_block_is_marked_with_its_language_and_holds_the_code_as_written():
    text = ("Run this:\n\n```python\nimport os\nprint(os.getcwd(), 'a < b & \"c\"')\n```\n\n"
            "then\n\n```bash\nls -la | grep '<x>'\n```\n\n```\nno language\n```\n\n"
            "```C++ {.numberLines}\nint x;\n```\n\n```{r}\nx <- 1\n```\n\n```nosuchlang\nplain <b>\n```\n\n"
            "and `inline` code.")
    blocks = _blocks(render.markdown_html(text))
    assert all(cls.endswith(f" {LIVE_MARK}") for cls, _ in blocks)  # this kernel's: see test_live_mark_*
    assert [(cls.removesuffix(f" {LIVE_MARK}"), code) for cls, code in blocks] == [
        ("nba-code-block nba-lang-python", "import os\nprint(os.getcwd(), 'a < b & \"c\"')\n"),
        ("nba-code-block nba-lang-bash", "ls -la | grep '<x>'\n"),
        ("nba-code-block", "no language\n"),
        ("nba-code-block nba-lang-c++", "int x;\n"),
        ("nba-code-block nba-lang-r", "x <- 1\n"),
        ("nba-code-block nba-lang-nosuchlang", "plain <b>\n"),
    ]
    assert "<code>inline</code>" in render.markdown_html(text)  # inline code is no block
    assert render.markdown_html("```python\n\n\nx = 1\n```").count("\n") >= 3  # leading blank lines stay


def test_the_models_raw_html_cannot_forge_a_code_block():
    forged = '<pre class="nba-code-block nba-lang-python"><code>import evil</code></pre>\n\nok'
    shown = render.markdown_html(forged)
    assert "<pre" not in shown and "&lt;pre" in shown  # shown as text, no element
    assert _blocks(shown) == []


def test_hidden_characters_in_a_code_block_are_shown_as_markers_even_those_prose_keeps():
    code = "a = 1\u202e # \u200dtxt\u200b\ufe0f\x1b[2J"
    blocks = _blocks(render.markdown_html(f"```python\n{code}\n```\n\nprose keeps 👩\u200d💻"))
    assert len(blocks) == 1
    text = blocks[0][1]
    for hidden in ("\u202e", "\u200d", "\u200b", "\ufe0f", "\x1b"):
        assert hidden not in text
    for marker in ("⟨U+202E RIGHT-TO-LEFT OVERRIDE⟩", "⟨U+200D ZERO WIDTH JOINER⟩", "⟨U+200B ZERO WIDTH SPACE⟩",
                   "⟨U+FE0F VARIATION SELECTOR-16⟩", "⟨U+001B ESC⟩"):
        assert marker in text
    assert "👩\u200d💻" in render.markdown_html("prose keeps 👩\u200d💻")  # prose: the emoji stays whole


def test_a_tools_markdown_and_results_get_no_code_block_marker():
    from nbagent import Presentation

    @tool(read_only=True)
    def forge() -> ToolResult:
        """Return HTML that claims to be the model's code."""
        return ToolResult("done", details=Forger(), presentation=[
            Presentation("markdown", "```python\nimport tool_presentation\n```")])

    class Forger:
        def _repr_html_(self):
            return ('<div class="nba-md"><pre class="nba-code-block nba-lang-python"><code>import forged</code>'
                    '</pre></div>')

        def link_html(self):
            return '<pre class="nba-code-block nba-lang-bash"><code>rm -rf ~</code></pre>'

    model = ScriptedModel([AssistantMessage(tool_calls=[ToolCall(name="forge", arguments={})]),
                           "Mine:\n\n```python\nimport model_code\n```"])
    page = Agent(model=model, tools=[forge], approver="allow").run_sync("go")._repr_html_()
    every = [text for _, text in _blocks(page)]
    assert {"import forged", "rm -rf ~", "import tool_presentation\n", "import model_code\n"} <= set(every)
    marked = [text for cls, text in _blocks(page) if cls and "nba-code-block" in cls]
    assert marked == ["import model_code\n"]  # the model's, and only it
    assert 'class="nba-md"' not in page.split("nba-safe", 1)[1].split("</details>", 1)[0]


def test_a_row_shows_the_arguments_the_model_chose_not_the_defaults_it_left_out():
    @tool(read_only=True)
    def fetch(url: str, timeout: float = 120.0, retries: int = 2, tag: str | None = None) -> str:
        """Fetch a page."""
        return "ok"

    model = ScriptedModel([AssistantMessage(tool_calls=[
        ToolCall(name="fetch", arguments={"url": "http://a", "retries": 2}),  # sent, though the default
    ]), "done"])
    run = Agent(model=model, tools=[fetch]).run_sync("go")
    assert run.calls[0].arguments == {"url": "http://a", "timeout": 120.0, "retries": 2, "tag": None}
    row = render.call_inner_html(run.calls[0])
    assert "&quot;http://a&quot;" in row and ">retries<" in row  # what the model sent stays, default or not
    assert ">timeout<" not in row and ">tag<" not in row  # defaults it left out are not its choice


def test_a_call_still_waiting_for_a_decision_when_its_run_stopped_says_it_never_ran():
    run = _run()
    waiting, running = run.calls[0], run.calls[1]
    waiting.status, running.status = "waiting_for_approval", "running"
    assert "never ran" in render.call_inner_html(waiting, frozen=True)
    assert "did not finish" in render.call_inner_html(running, frozen=True)
    assert "never ran" in render.call_text(waiting, frozen=True)
    assert "needs approval" in render.call_inner_html(waiting)  # while the run goes on: what it waits for


def test_the_header_names_the_mcp_servers_a_run_was_offered():
    from types import SimpleNamespace

    from nbagent.mcp import MCPServers

    servers = MCPServers({"time": {"command": "mcp-server-time"}, "git": {"command": "mcp-server-git"},
                          "off": {"command": "x", "disabled": True}})
    short, full = render.tools_summary(SimpleNamespace(tools=[servers, summarize]))
    assert short == "tools: MCP time, git, summarize" and "MCP time, git" in full


def test_the_text_form_keeps_a_long_answers_lines():
    run = Agent(model=ScriptedModel(["Done. **One** missing.\n\n```python\norders.fillna(0)\n```"])).run_sync("x")
    text = str(run)
    assert "  answer:\n    Done. **One** missing.\n\n    ```python\n    orders.fillna(0)\n    ```" in text
    short = Agent(model=ScriptedModel(["Just this."])).run_sync("x")
    assert "  answer: Just this." in str(short)


def test_a_message_sent_into_a_run_that_stopped_before_reading_it_is_shown_undelivered():
    import asyncio

    async def go():
        gate = asyncio.Event()

        async def slow(messages):
            await gate.wait()
            return "never"

        run = Agent(model=ScriptedModel([slow])).start("summarise")
        await asyncio.sleep(0.05)
        assert run.steer("use the cleaned rows")
        run.cancel("stopped from the notebook")
        try:
            await run
        except BaseException:
            pass
        return run

    run = asyncio.run(go())
    assert run.status == "cancelled"
    assert "not delivered (the run ended before its next turn): use the cleaned rows" in render.run_text(run)
    assert "Not delivered" in render.footer_html(run) and "use the cleaned rows" in render.run_html(run)
    ended = Agent(model=ScriptedModel(["ok"])).run_sync("x")
    assert "Not delivered" not in render.footer_html(ended)


def test_a_command_that_exits_0_after_the_sandbox_refused_its_network_call_is_not_shown_done():
    from nbagent.toolbox import ShellResult

    said = "curl: (6) Could not resolve host: example.com\n"

    def fetch(ctx: ToolContext, url: str) -> ToolResult:
        """Fetch a page (as `curl -s URL || true` in the sandbox would)."""
        details = ShellResult(command=f"curl -s {url} || true", exit_code=0, stdout="", stderr=said, output=said,
                              sandbox="workspace-write")
        return ToolResult(said, details=details)

    model = ScriptedModel([AssistantMessage(tool_calls=[ToolCall(name="fetch", arguments={"url": "https://example.com"})]),
                           "done"])
    run = Agent(model=model, tools=[tool(fetch)], mode="bypassPermissions").run_sync("x")
    rec = run.calls[0]
    row = render.call_inner_html(rec)
    assert "hit the sandbox" in row and ">done<" not in row and "the network is off there" in row
    assert rec.status == "ok" and render.shown_status(rec) == "sandboxed"  # the record keeps what happened
    assert 'class="nba-call nba-s-sandboxed"' in render.run_html(run)
    assert "⊘" in render.call_text(rec) and "hit the sandbox" in render.call_text(rec)


def test_live_mark_is_this_process_own_and_only_the_models_markdown_keeps_it():
    """The class the page gives Copy and Insert as cell to, in a notebook: new in each process, kept by the
    model's Markdown only; a result's HTML that spells it loses it as every class of the page's own."""
    import re

    from nbagent.safety.sanitize import sanitize_html

    assert re.fullmatch(r"nba-live-[0-9a-f]{24}", LIVE_MARK)
    forged = f'<pre class="nba-code-block {LIVE_MARK}"><code>x</code></pre>'
    assert LIVE_MARK not in sanitize_html(forged) and LIVE_MARK not in sanitize_html(forged, wrap=False)
    assert LIVE_MARK in render.markdown_html("```python\nx\n```")
