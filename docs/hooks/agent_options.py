"""The `%agent` options page, written at build time from the magic's own help (what `%agent?` shows), and
the settings table, from the help of each `NBAgent` setting (what `%config NBAgent` lists).

A page holding the line `<!-- %agent? -->` gets, in its place, the magic's usage line, its description and
one section per option, each read from the argparse parser that IPython's `magic_arguments` builds for
`%agent` (`AgentMagics.agent.parser`): the option's names, its value, its choices and its help, word for
word. Nothing is written by hand, so the page cannot drift from `%agent?`; `tests/test_docs.py` checks the
built page against the text a real IPython shell shows for `%agent?`. The line `<!-- %config NBAgent -->`
gets one row per setting of `nbagent.jupyter.config.NBAgent`: its name, default and help.
"""

from __future__ import annotations

import argparse
import html
import re
import textwrap

MARKER = "<!-- %agent? -->"
SETTINGS_MARKER = "<!-- %config NBAgent -->"


def _parser() -> argparse.ArgumentParser:
    from nbagent.jupyter.magics import AgentMagics

    return AgentMagics.agent.parser


def _options(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    return [a for a in parser._actions if a.option_strings and not isinstance(a, argparse._HelpAction)]


def _anchor(action: argparse.Action) -> str:
    return max(action.option_strings, key=len).lstrip("-")


def _code(text: str) -> str:
    """Help text as Markdown: escaped, with `backticks` kept as code."""
    parts = re.split(r"(`[^`]+`)", text)
    return "".join(p if p.startswith("`") and p.endswith("`") else html.escape(p, quote=False)
                   .replace("*", r"\*").replace("_", r"\_").replace("[", r"\[") for p in parts)


def _value(action: argparse.Action) -> str:
    """How the option's value is written in `%agent?` (`--resume [ID]`, `--mode {default,...}`...)."""
    if action.nargs == 0:
        return ""
    formatter = argparse.HelpFormatter("%agent")
    return formatter._format_args(action, action.dest.upper())


def _usage(parser: argparse.ArgumentParser) -> str:
    usage = parser.format_usage()  # "::\n\n  %agent [--model SPEC_OR_NAME]\n             [--mode ..." (reST)
    first, *rest = usage.removeprefix("::").strip().splitlines()
    return "\n".join([first.strip(), *(" " * len("%agent ") + line.strip() for line in rest)])


def _description(parser: argparse.ArgumentParser) -> str:
    """The magic's docstring as Markdown: its `Examples::` block becomes a code block."""
    text = textwrap.dedent("\n".join(parser.description.splitlines()[1:]))
    first = parser.description.splitlines()[0].strip()
    out, lines = [first, ""], text.strip("\n").splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.rstrip().endswith("::"):  # a reST literal block: the indented lines that follow
            out.append(_code(line.rstrip()[:-1]))
            i += 1
            block = []
            while i < len(lines) and (not lines[i].strip() or lines[i].startswith(" ")):
                block.append(lines[i])
                i += 1
            out += ["", "```text", textwrap.dedent("\n".join(block)).strip("\n"), "```", ""]
            continue
        if line.startswith("%"):  # the forms of the magic, one a line
            block = []
            while i < len(lines) and lines[i].strip():
                block.append(lines[i])
                i += 1
            out += ["```text", "\n".join(block), "```"]
            continue
        out.append(_code(line))
        i += 1
    return "\n".join(out)


def options_markdown() -> str:
    """The generated part of the page, as Markdown."""
    parser = _parser()
    out = ["```text", _usage(parser), "```", "", _description(parser), "", "## Options", ""]
    for action in _options(parser):
        names = ", ".join(f"`{name}`" for name in action.option_strings)
        value = _value(action)
        heading = f"### {names}" + (f" `{value}`" if value else "")
        out += [f"{heading} {{ #{_anchor(action)} .agent-option }}", ""]
        out += [_code(argparse.HelpFormatter("%agent")._expand_help(action)), ""]
    return "\n".join(out)


def _cell(text: str) -> str:
    return _code(" ".join(text.split())).replace("|", r"\|")


def settings_markdown() -> str:
    """One table row per `NBAgent` setting: `%config NBAgent.<name>`, its default, its help."""
    from nbagent.jupyter.config import NBAgent

    rows = ["| setting | default | what it does |", "|---|---|---|"]
    for name, trait in NBAgent.class_traits(config=True).items():
        default = trait.default_value_repr().replace("|", r"\|")
        anchor = name.replace("_", "-")
        rows.append(f"| `NBAgent.{name}` {{ #{anchor} }} | `{default}` | {_cell(trait.help)} |")
    return "\n".join(rows)


def on_page_markdown(markdown: str, page, config, files) -> str:
    if MARKER in markdown:
        markdown = markdown.replace(MARKER, options_markdown())
    if SETTINGS_MARKER in markdown:
        markdown = markdown.replace(SETTINGS_MARKER, settings_markdown())
    return markdown
