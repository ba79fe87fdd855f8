"""`%agent` / `%%agent` in an IPython shell: options, mistakes as UsageErrors, models, tools, conversations."""

from __future__ import annotations

import pytest
from IPython.core.error import UsageError

from nbagent import AgentRun, AssistantMessage, MaxTurnsExceeded, ScriptedModel, ToolCall
from nbagent.jupyter import get_session, view
from nbagent.jupyter.magics import AgentMagics, add_await, split_options
from nbagent.transcript import check_transcript

from ..conftest import finish, run_cell, settle

PARSER = AgentMagics.agent.parser
WIDGET = "application/vnd.jupyter.widget-view+json"


# -- option parsing ----------------------------------------------------------------------------------------
def test_options_come_first_and_the_prompt_is_kept_verbatim():
    argv, prompt = split_options("--model m --tools a,b --new What's in \"df\"? -x --model", PARSER)
    assert argv == ["--model", "m", "--tools", "a,b", "--new"]
    assert prompt == "What's in \"df\"? -x --model"


def test_option_values_may_be_quoted_or_joined_with_equals():
    argv, prompt = split_options("--instructions 'Be brief, please.' --max-turns=3 hi", PARSER)
    assert argv == ["--instructions", "Be brief, please.", "--max-turns", "3"]
    assert prompt == "hi"


def test_double_dash_ends_the_options():
    argv, prompt = split_options("--new -- --this is the prompt", PARSER)
    assert argv == ["--new"] and prompt == "--this is the prompt"


def test_an_unknown_option_says_what_the_options_are():
    with pytest.raises(UsageError, match=r"unknown option '--modle'.*--model.*put -- before it"):
        split_options("--modle x hi", PARSER)


def test_an_option_without_its_value_is_a_usage_error():
    with pytest.raises(UsageError, match="--model needs a value"):
        split_options("--model", PARSER)


def test_wait_makes_the_cell_await_the_run():
    assert add_await(["get_ipython().run_line_magic('agent', '--wait hi')\n"]) == [
        "await get_ipython()._nbagent_session.wait(get_ipython().run_line_magic('agent', '--wait hi'))\n"]
    assert add_await(["run = get_ipython().run_line_magic('agent', \"-w --new it's\")\n"]) == [
        "run = await get_ipython()._nbagent_session.wait(get_ipython().run_line_magic('agent', \"-w --new it's\"))\n"]
    assert add_await(["get_ipython().run_cell_magic('agent', '--wait', 'do it\\n')\n"])[0].startswith("await ")
    # --wait inside the prompt is just words, and other magics are left alone
    unchanged = ["get_ipython().run_line_magic('agent', 'explain --wait')\n",
                 "get_ipython().run_line_magic('time', '--wait')\n"]
    assert add_await(unchanged) == unchanged


def test_the_shell_applies_the_wait_transformer(shell):
    assert "await get_ipython()._nbagent_session.wait(get_ipython().run_line_magic" in shell.transform_cell(
        "run = %agent --wait hi")
    assert "await" not in shell.transform_cell("run = %agent hi")


def test_a_prompt_ending_with_a_question_mark_is_a_question_not_help(shell):
    assert shell.transform_cell("%agent What columns does df have?") == (
        "get_ipython().run_line_magic('agent', 'What columns does df have?')\n")
    assert shell.transform_cell("run = %agent Why?") == "run = get_ipython().run_line_magic('agent', 'Why?')\n"
    assert "pinfo" in shell.transform_cell("%agent?")  # help on the magic itself still works
    body = shell.transform_cell("%%agent\n%agent is what?")
    assert body == "get_ipython().run_cell_magic('agent', '', '%agent is what?\\n')\n"


def test_help_is_in_the_ipython_style(shell):
    doc = shell.find_line_magic("agent").__doc__
    assert "%agent [--model SPEC_OR_NAME]" in doc
    for option in ("--mode", "--tools", "--new", "--wait", "--max-turns", "--instructions", "NBAGENT_APPROVAL"):
        assert option in doc


# -- mistakes are UsageErrors ------------------------------------------------------------------------------
async def test_no_model_names_the_variables_and_the_offline_option(shell):
    result = await run_cell(shell, "%agent hello")
    error = result.error_in_exec
    assert isinstance(error, UsageError)
    for text in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GEMINI_API_KEY", "MISTRAL_API_KEY", "ScriptedModel",
                 "--model", "%config NBAgent.model"):
        assert text in str(error)


async def test_a_namespace_name_that_is_not_a_model(shell):
    shell.user_ns["df"] = [1, 2]
    result = await run_cell(shell, "%agent --model df hello")
    assert isinstance(result.error_in_exec, UsageError)
    assert "'df' in the notebook is a list, not a Model" in str(result.error_in_exec)


async def test_an_unknown_tool_name_lists_the_functions_there_are(shell):
    shell.user_ns["model"] = ScriptedModel(["hi"])
    await run_cell(shell, "def load_data(path: str) -> str:\n    return path")
    result = await run_cell(shell, "%agent --model model --tools load_dta hello")
    assert isinstance(result.error_in_exec, UsageError)
    assert "no function named 'load_dta'" in str(result.error_in_exec)
    assert "load_data" in str(result.error_in_exec)


async def test_other_mistakes(shell):
    shell.user_ns["model"] = ScriptedModel(["hi"])
    shell.user_ns["number"] = 3
    cases = {
        "%agent --model model": "needs a prompt",
        "%agent --model model --max-turns 0 hi": "at least 1",
        "%agent --model model --mode yolo hi": "invalid choice",
        "%agent --model model --tools number hi": "'number' is an int, not a function",
        "%agent --model nosuchprovider:x hi": "unknown provider",
    }
    for line, message in cases.items():
        result = await run_cell(shell, line)
        assert isinstance(result.error_in_exec, UsageError), line
        assert message in str(result.error_in_exec), (line, str(result.error_in_exec))


# -- models ------------------------------------------------------------------------------------------------
async def test_model_from_the_flag_the_config_or_the_first_key(shell, monkeypatch):
    session = get_session(shell)
    mine = ScriptedModel(["a"])
    shell.user_ns["mine"] = mine
    assert session.resolve_model("mine") is mine
    shell.run_line_magic("config", "NBAgent.model = 'mine'")  # the name of a Model in the notebook
    assert session.resolve_model() is mine
    session.config.model = mine  # or the object itself, set from code
    assert session.resolve_model() is mine
    shell.run_line_magic("config", "NBAgent.model = None")

    asked = []
    monkeypatch.setattr("nbagent.jupyter.session.resolve.load_model", lambda spec: asked.append(spec) or ScriptedModel())
    monkeypatch.setenv("MISTRAL_API_KEY", "k")
    monkeypatch.setenv("GOOGLE_API_KEY", "k")
    session.resolve_model()
    assert asked == ["google:gemini-2.5-flash"]  # google comes before mistral
    monkeypatch.setenv("ANTHROPIC_API_KEY", "k")
    session.resolve_model()
    assert asked[-1] == "anthropic:claude-sonnet-4-5"


# -- runs --------------------------------------------------------------------------------------------------
def _script() -> ScriptedModel:
    return ScriptedModel([
        AssistantMessage(text="Looking.", tool_calls=[ToolCall(name="double", arguments={"x": 21})]),
        "It is 42.",
        "Still 42.",
        "A new start.",
    ])


async def test_a_run_starts_in_the_background_and_the_magic_returns_it(shell, monkeypatch):
    monkeypatch.setenv("NBAGENT_APPROVAL", "allow")
    shell.user_ns["model"] = _script()
    await run_cell(shell, "def double(x: int) -> int:\n    '''Double a number.'''\n    return 2 * x")
    result = await run_cell(shell, "run = %agent --model model --tools double What is double 21?")
    assert result.error_in_exec is None
    run = shell.user_ns["run"]
    assert isinstance(run, AgentRun)
    assert not run.done  # the magic returned at once
    await finish(run)
    assert run.status == "done" and run.output == "It is 42."
    assert run.calls[0].name == "double" and run.calls[0].result.details == 42
    assert check_transcript(run.messages) == []
    assert view(run).rows[0].record is run.calls[0]


async def test_consecutive_runs_continue_one_conversation_and_new_starts_another(shell):
    shell.run_line_magic("config", "NBAgent.approver = 'allow'")
    shell.user_ns["model"] = _script()
    await run_cell(shell, "def double(x: int) -> int:\n    return 2 * x")
    await run_cell(shell, "first = %agent --model model --tools double What is double 21?")
    await finish(shell.user_ns["first"])
    await run_cell(shell, "second = %agent --model model And now?")
    second = await finish(shell.user_ns["second"])
    assert second.messages[: len(shell.user_ns["first"].messages)] == shell.user_ns["first"].messages
    await run_cell(shell, "third = %agent --model model --new Start over")
    third = await finish(shell.user_ns["third"])
    assert len(third.messages) == 2 and third.output == "A new start."


async def test_a_failed_run_leaves_no_unanswered_prompt_in_the_conversation(shell):
    from nbagent import UserMessage

    def broken(messages):
        raise RuntimeError("the provider is down")

    shell.user_ns["model"] = ScriptedModel(["First answer.", broken, "Second answer.", broken, "Fourth answer."])
    await run_cell(shell, "a = %agent --model model One")
    await finish(shell.user_ns["a"])
    await run_cell(shell, "b = %agent --model model Two", cell_id="cell-b")
    with pytest.raises(RuntimeError):
        await finish(shell.user_ns["b"])
    # another cell: the failed prompt is not sent again, and no two user messages follow each other
    await run_cell(shell, "c = %agent --model model Three")
    c = await finish(shell.user_ns["c"])
    texts = [m.text for m in c.messages if isinstance(m, UserMessage)]
    assert texts == ["One", "Three"]
    kinds = [type(m).__name__ for m in c.messages]
    assert all(not (x == y == "UserMessage") for x, y in zip(kinds, kinds[1:]))
    # the failed cell, run again: a retry; the conversation is what came before the failed run
    await run_cell(shell, "d = %agent --model model Four", cell_id="cell-d")
    with pytest.raises(RuntimeError):
        await finish(shell.user_ns["d"])
    await run_cell(shell, "d = %agent --model model Four", cell_id="cell-d")
    d = await finish(shell.user_ns["d"])
    assert [m.text for m in d.messages if isinstance(m, UserMessage)] == ["One", "Three", "Four"]
    assert check_transcript(d.messages) == []


async def test_a_new_prompt_while_the_last_run_goes_on_says_what_to_do(shell):
    shell.user_ns["model"] = ScriptedModel(["slow answer", "other"], delay=0.05)
    await run_cell(shell, "run = %agent --model model Tell me a story")
    result = await run_cell(shell, "%agent --model model And then?")
    assert isinstance(result.error_in_exec, UsageError)
    assert "still going" in str(result.error_in_exec) and "--new" in str(result.error_in_exec)
    await finish(shell.user_ns["run"])


async def test_wait_returns_the_finished_run_or_raises_its_error(shell):
    shell.user_ns["model"] = ScriptedModel(["done waiting"], delay=0.01)
    result = await run_cell(shell, "run = %agent --model model --wait Go")
    assert result.error_in_exec is None
    assert shell.user_ns["run"].status == "done"
    result = await run_cell(shell, "%agent --model model --wait Again")  # the script is used up
    assert type(result.error_in_exec).__name__ == "ScriptedModelExhausted"  # a headless notebook fails here


async def test_cell_magic_prompt_and_undecorated_tools(shell):
    shell.run_line_magic("config", "NBAgent.approver = 'deny'")
    shell.user_ns["model"] = ScriptedModel([
        AssistantMessage(tool_calls=[ToolCall(name="shout", arguments={"text": "hi"})]), "Shouted."])
    await run_cell(shell, "def shout(text):\n    return text.upper()")
    result = await run_cell(shell, "%%agent --model model --tools shout --wait\nShout hi,\nplease.")
    assert result.error_in_exec is None
    run = get_session(shell).runs[-1]
    assert run.prompt == "Shout hi,\nplease."
    assert run.calls[0].status == "denied"
    assert run.calls[0].decision.reason == "approval policy 'deny' (NBAgent.approver)"


async def test_default_instructions_describe_the_kernel_and_can_be_replaced(shell):
    shell.user_ns["model"] = model = ScriptedModel(["a", "b", "c"])
    shell.user_ns["prices"] = {"apple": 1.5}
    await run_cell(shell, "%agent --model model --wait hi")
    text = model.requests[-1].instructions
    assert "live Jupyter notebook" in text and str(shell.user_ns.get("__file__", "")) in text
    assert "- prices: dict of 1 item (keys: 'apple')" in text
    shell.user_ns["style"] = "Answer in French."
    await run_cell(shell, "%agent --model model --new --wait --instructions style hi")
    assert model.requests[-1].instructions == "Answer in French."
    shell.run_line_magic("config", "NBAgent.instructions = 'Be terse.'")
    await run_cell(shell, "%agent --model model --new --wait hi")
    assert model.requests[-1].instructions == "Be terse."


async def test_tools_offered_are_visible_and_only_tools_offers_just_those(shell):
    shell.user_ns["model"] = ScriptedModel(["a", "b", "c"])
    await run_cell(shell, "def double(x: int) -> int:\n    return 2 * x")
    await run_cell(shell, "run = %agent --model model --tools double --wait hi")
    run = shell.user_ns["run"]
    assert "tools: double + 16 built-in" in run._repr_html_() and "tools: double + 16 built-in" in str(run)
    await run_cell(shell, "run = %agent --model model --new --only-tools double,read_file --wait hi")
    run = shell.user_ns["run"]
    assert sorted(t.name for t in run.agent.tools) == ["double", "read_file"]
    assert "tools: double + 1 built-in" in str(run)
    result = await run_cell(shell, "%agent --model model --tools double --only-tools double hi")
    assert "use one of the two" in str(result.error_in_exec)
    result = await run_cell(shell, "%agent --model model --only-tools nosuch hi")
    assert "no function named 'nosuch'" in str(result.error_in_exec) and "Built-in tools: " in str(result.error_in_exec)


async def test_model_mistakes_point_the_right_way(shell):
    result = await run_cell(shell, "%agent --model m2 hi")
    assert "there is no variable named 'm2' in the notebook" in str(result.error_in_exec)
    result = await run_cell(shell, "%agent --model openai: hi")
    assert "names no model after 'openai:'" in str(result.error_in_exec)
    assert "provider prefix" not in str(result.error_in_exec)


async def test_config_mode_and_max_turns(shell):
    shell.user_ns["model"] = ScriptedModel([AssistantMessage(tool_calls=[ToolCall(name="nope")])] * 3)
    shell.run_line_magic("config", "NBAgent.mode = 'plan'")
    shell.run_line_magic("config", "NBAgent.max_turns = 2")
    await run_cell(shell, "run = %agent --model model loop")
    run = shell.user_ns["run"]
    with pytest.raises(MaxTurnsExceeded):
        await finish(run)
    assert run.agent.mode == "plan" and run.status == "failed" and run.turns == 2
    assert check_transcript(run.messages) == []


async def test_a_finished_run_is_shown_whole_once_and_in_one_line_elsewhere(shell):
    shell.user_ns["model"] = ScriptedModel(["**bold** answer"])
    await run_cell(shell, "run = %agent --model model --wait hi")
    run = shell.user_ns["run"]
    await settle(lambda: view(run).ended)
    shown = []
    updates = []
    shell.display_pub.publish = lambda data, **kw: (updates if kw.get("update") else shown).append(data)
    try:
        get_session(shell).display_run(run)  # displayed in the same cell: not again
        assert shown == []
        shell.execution_count += 1
        get_session(shell).display_run(run)  # `await run` in another cell: one line, saying where the run is
        view(run)._ipython_display_()  # `view(run)`: the whole run again
        await run_cell(shell, "1")  # the next cell hears the update of the starting cell's display again
    finally:
        del shell.display_pub.publish
    assert "shown whole in the cell that started it (In [" in shown[0]["text/plain"]
    assert "answer: bold answer" in shown[0]["text/plain"]
    assert "<strong>bold</strong>" in shown[1]["text/html"]
    assert shown[1]["text/plain"].startswith("nbagent run · scripted · default mode · done")
    assert updates and "<strong>bold</strong>" in updates[-1]["text/html"]  # the starting cell's final form
    assert view(run).widget.comm is None  # the widgets are closed


async def test_unload_removes_the_magic(shell):
    shell.run_line_magic("unload_ext", "nbagent")
    try:
        assert shell.find_line_magic("agent") is None
        assert "await" not in shell.transform_cell("%agent --wait hi")
    finally:
        shell.run_line_magic("load_ext", "nbagent")


def test_without_an_event_loop_the_run_happens_in_the_cell_and_asks_on_stdin(shell, monkeypatch, capsys):
    """Terminal IPython: no loop keeps running between cells, so the magic runs to the end, printing."""
    shell.run_line_magic("config", "NBAgent.view = 'text'")
    shell.user_ns["model"] = ScriptedModel([
        AssistantMessage(text="Deleting.", tool_calls=[ToolCall(name="remove", arguments={"path": "a"}),
                                                       ToolCall(name="remove", arguments={"path": "b"})]),
        "Done.",
    ])
    shell.run_cell("def remove(path: str) -> str:\n    return 'removed ' + path")
    answers = iter(["y", "n keep it"])
    monkeypatch.setattr("builtins.input", lambda prompt="": next(answers))
    shell.run_cell("run = %agent --model model --tools remove clean up")
    run = shell.user_ns["run"]
    assert run.status == "done"
    assert {c.arguments["path"]: c.status for c in run.calls} == {"a": "ok", "b": "denied"}
    assert [c.decision.reason for c in run.calls if c.status == "denied"] == ["keep it"]
    printed = capsys.readouterr().out
    assert "Deleting." in printed and "[done · 2 turns · 2 calls" in printed


async def test_a_lambda_becomes_a_tool_under_its_name_in_the_notebook(shell):
    shell.run_line_magic("config", "NBAgent.approver = 'allow'")
    shell.user_ns["model"] = ScriptedModel([AssistantMessage(tool_calls=[ToolCall(name="triple", arguments={"x": 2})]),
                                            "six"])
    shell.user_ns["triple"] = lambda x: 3 * x
    result = await run_cell(shell, "run = %agent --model model --tools triple --wait go")
    assert result.error_in_exec is None
    assert shell.user_ns["run"].calls[0].result.details == 6


def test_a_mistyped_option_gets_a_suggestion_and_loading_says_what_it_did(capsys, monkeypatch):
    from IPython.core.interactiveshell import InteractiveShell

    from nbagent.jupyter.magics import loaded_message

    ip = InteractiveShell.instance()
    ip.run_line_magic("load_ext", "nbagent")
    config = ip._nbagent_session.config
    try:
        with pytest.raises(UsageError, match="Did you mean --tools"):
            ip.run_line_magic("agent", "--tool plot Draw it")
        with pytest.raises(UsageError, match="Did you mean --only-tools"):
            ip.run_line_magic("agent", "--only-tool plot Draw it")
    finally:
        ip.run_line_magic("unload_ext", "nbagent")
    for name in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY", "MISTRAL_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    assert "no model yet" in loaded_message(config) and "%agent <task>" in loaded_message(config)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    assert "model: openai ($OPENAI_API_KEY is set)" in loaded_message(config)


async def test_view_shows_a_run_not_started_with_agent(shell):
    import asyncio

    from nbagent import Agent

    gate = asyncio.Event()

    async def slow(messages):
        await gate.wait()
        return "**late** answer"

    def note(text: str) -> str:
        """Write a note."""
        return f"noted {text}"

    script = ScriptedModel([AssistantMessage(tool_calls=[ToolCall(name="note", arguments={"text": "a"})]), slow])
    run = Agent(model=script, tools=[note], mode="bypassPermissions").start("take a note")
    await settle(lambda: len(run.calls) == 1 and run.calls[0].status == "ok")
    live = view(run)  # a live view made now, with what the run did so far
    assert live is not None and live.rows[0].record is run.calls[0] and not live.ended
    shown = []
    shell.display_pub.publish = lambda data, **kw: shown.append(data)
    try:
        live._ipython_display_()
        gate.set()
        await finish(run)
        await settle(lambda: live.ended)
        assert view(run) is live
        done = await Agent(model=ScriptedModel(["**bold** answer"])).run("hi")
        assert view(done) is done  # a run that ended unseen: the run itself, shown whole
        get_session(shell).display_run(view(done))
    finally:
        del shell.display_pub.publish
    assert WIDGET in shown[0]
    assert "<strong>late</strong>" in shown[1]["text/html"]  # the display became the run's static rendering
    assert "<strong>bold</strong>" in shown[-1]["text/html"]


async def test_resume_without_a_model_says_so_before_saying_it_resumed(shell, capsys, monkeypatch):
    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    shell.user_ns["model"] = ScriptedModel(["first answer"])
    await run_cell(shell, "run = %agent --model model --wait hi")
    stored = get_session(shell).stored.session_id
    assert stored
    del shell.user_ns["model"]  # as after a restart: the conversation's --model model names nothing now
    capsys.readouterr()
    result = await run_cell(shell, f"%agent --resume {stored} and now?")
    out = capsys.readouterr().out
    assert isinstance(result.error_in_exec, UsageError), out
    why = str(result.error_in_exec)
    assert why.startswith("not started: --model model: there is no variable named 'model'") and (
        f"the conversation {stored} is resumed" in why)
    assert "Resumed" not in out
    await run_cell(shell, f"%agent --resume {stored}")  # no prompt: resumed, and what it needs is said with it
    out = capsys.readouterr().out
    assert f"Resumed {stored}" in out and "It needs a model first" in out
    shell.user_ns["model"] = ScriptedModel(["second answer"])
    result = await run_cell(shell, "run = %agent --model model --wait and now?")
    assert result.error_in_exec is None and shell.user_ns["run"].output == "second answer"


async def test_the_sessions_table_keeps_each_id_on_one_line_with_the_command_that_resumes_it(shell):
    shell.user_ns["model"] = ScriptedModel(["an answer"])
    await run_cell(shell, "run = %agent --model model --wait hi")
    stored = get_session(shell).stored.session_id
    table = get_session(shell).stored.sessions()._repr_html_()
    assert f'<td style="white-space: nowrap"><code>{stored}</code> (current)' in table
    assert f"%agent --resume {stored}</code>" in table


async def test_a_notebook_saved_with_the_stylesheet_gets_no_second_copy_after_a_restart(shell) -> None:
    import asyncio

    from nbagent import render
    from nbagent.jupyter.notebook.comm import NotebookFrontend

    from ..fake_frontend import FakeNotebook, InProcessComm

    earlier = {"output_type": "display_data", "data": {"text/html": f"<style>{render.css()}</style><div class='nba'>",
                                                        "text/plain": "nbagent run"}}
    notebook = FakeNotebook([{"id": "old", "source": "%agent hi", "execution_count": 1, "outputs": [earlier]},
                             {"id": "new", "source": "%agent again"}])
    shell._nbagent_frontend = NotebookFrontend(opener=InProcessComm(notebook).opener)
    async def answer(messages):  # the look at the notebook, begun as the run was shown, is over before it ends
        looked = getattr(get_session(shell).notebook_runs, "_style_looked", None)
        if looked is not None:
            await asyncio.wait_for(asyncio.shield(looked), 10)
        return "an answer"

    shell.user_ns["model"] = ScriptedModel([answer])
    updates = []
    shell.display_pub.publish = lambda data, **kw: updates.append(data) if kw.get("update") else None
    try:
        await run_cell(shell, "run = %agent --model model --wait hi", cell_id="new")
        await settle(lambda: view(shell.user_ns["run"]).ended)
    finally:
        del shell.display_pub.publish
    assert any(r["op"] == "read" for r in notebook.requests)
    assert get_session(shell).notebook_runs.styled_cell == "old"
    final = [u for u in updates if "an answer" in u.get("text/html", "")]
    assert final and "<style>" not in final[-1]["text/html"]  # the cell saved before carries it
