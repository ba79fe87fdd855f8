"""Markup that makes the page sanitizer's parser work quadratically, at every draw of a view.

Written from the outside: a result's `_repr_html_()` (or the model's Markdown) is drawn at every update of
the live view and once more in the saved notebook. html5ever (nh3) looks through its stack of open elements
for each tag, so markup nested N deep costs it N²: 16,000 `<ul>` in a row take seconds, and a tag with
tens of thousands of attributes, or formatting elements re-opened after every block, are quadratic too.
The defence (`nbagent.safety.nesting`): one linear pass measures what the parser would hold at once, and
markup past `LIMITS` is shown escaped as text, with a note, never parsed. No timing here: the walk's own
work is counted (`Shape.steps`), and what reaches the parser is checked to be no deeper than the limits.
"""

from __future__ import annotations

import html.parser

import nh3
import pytest

from nbagent.safety import nesting, sanitize
from nbagent.safety.nesting import LIMITS, measure

N = 4000
ATTACKS = {
    "div": "<div>" * N + "x" + "</div>" * N,
    "unclosed_list": "<ul><li>" * N,
    "details": "<details><summary>s</summary>" * N,
    "formatting_reopened": "".join(f'<b title="{i}">' for i in range(N)) + "<div>x</div>y" * 10,
    "attributes": "<div " + " ".join(f"a{i}" for i in range(N * 5)) + ">x</div>",
    "end_tags_in_comments": "<div><!--</div>-->" * N,
    "end_tags_in_attributes": '<div title="</div>">' * N,
    "svg_style_holds_elements": "<svg><style>" + "<g>" * N + "</style></svg>",
    "misnested": "<span><div></span>" * N,
    "table_cells": "<table><tr><td>" * N,
    "svg_plaintext": "<svg><plaintext>" + "<div>" * N,
    "math_plaintext": "<math><plaintext>" + "<div>" * N,
    "svg_desc_closed_plaintext": "<svg><desc><p></desc><plaintext>" + "<div>" * N,
}
"""Each is under LIMITS.chars and costs the parser quadratic time."""


@pytest.mark.parametrize("name", sorted(ATTACKS))
def test_every_attack_is_measured_past_a_limit_in_linear_steps(name):
    markup = ATTACKS[name]
    shape = measure(markup)
    assert nesting.past_limits(shape) is not None, (name, shape)
    assert shape.steps <= markup.count("<")  # one step per tag or comment at most: linear in the size


@pytest.mark.parametrize("name", sorted(ATTACKS))
def test_past_a_limit_the_markup_is_shown_as_text_and_never_parsed(name, monkeypatch):
    parsed = []
    monkeypatch.setattr(sanitize, "_nh3", lambda code_blocks=False: parsed.append(1))
    shown = sanitize.sanitize_html(ATTACKS[name] + "<!-- " + name + " -->")
    assert not parsed
    assert shown.startswith('<div class="nba-safe"><p><em>Not drawn as HTML: ')
    assert "&lt;" in shown and "<div>x" not in shown.split("</em></p>", 1)[1].replace("&lt;div&gt;", "")


def test_too_long_markup_is_cut_with_a_note(monkeypatch):
    monkeypatch.setattr(sanitize, "_nh3", lambda code_blocks=False: pytest.fail("parsed"))
    markup = "<p>x</p>" * (LIMITS.chars // 8 + 1)
    shown = sanitize.sanitize_html(markup)
    assert "longer than 2,000,000 characters" in shown and "more are not shown" in shown
    assert len(shown) < sanitize.SHOWN_AS_TEXT_CHARS * 6


def _parsed_depth(markup: str) -> int:
    """How deep the tree html5ever builds from `markup` is (nh3 allowing every element the attacks use)."""
    every = {"div", "span", "b", "i", "p", "ul", "li", "details", "summary", "svg", "style", "g", "table", "tbody",
             "tr", "td", "em", "a", "font", "code", "script", "title", "textarea", "select", "option", "dl", "dt"} | set(RAW) | {
        "math", "foreignobject", "desc", "annotation-xml", "mi", "mtext"}
    out = nh3.Cleaner(tags=every, clean_content_tags=set(), attributes={"*": {"title", "id"}}).clean(markup)
    depth = [0, 0]

    class Walk(html.parser.HTMLParser):
        # what html5ever serialized as raw text is text here too (html.parser knows only script and style)
        CDATA_CONTENT_ELEMENTS = tuple(set(RAW) - {"noscript", "textarea", "title"})

        def handle_starttag(self, tag, attrs):
            if tag not in ("br", "img", "hr"):
                depth[0] += 1
                depth[1] = max(depth)

        def handle_endtag(self, tag):
            depth[0] -= 1

    Walk().feed(out)
    return depth[1]


RAW = ("plaintext", "script", "style", "textarea", "title", "xmp", "noscript", "iframe", "noembed", "noframes")
"""What the HTML tokenizer reads as raw text (or, `plaintext`, the rest as text): in svg and math, elements."""
DIVS = "<div>" * 150
FOREIGN = {
    **{f"svg_{raw}": f"<svg><{raw}>" + DIVS for raw in RAW},
    **{f"math_{raw}": f"<math><{raw}>" + DIVS for raw in RAW},
    **{f"svg_in_math_{raw}": f"<math><mi><svg><{raw}>" + DIVS for raw in RAW},
    **{f"math_in_svg_desc_{raw}": f"<svg><desc><math><{raw}>" + DIVS for raw in RAW},
    **{f"svg_foreignobject_{raw}": f"<svg><foreignObject><{raw}>" + DIVS for raw in RAW},
    **{f"svg_desc_closed_{raw}": f"<svg><desc><p></desc><{raw}>" + DIVS for raw in RAW},
    **{f"svg_title_closed_{raw}": f"<svg><title><b></TITLE><{raw}>" + DIVS for raw in RAW},
    **{f"math_annotation_{raw}": f'<math><annotation-xml encoding="text/html"><{raw}>' + DIVS for raw in RAW},
    **{f"math_annotation_other_{raw}": f'<math><annotation-xml encoding="x"><{raw}>' + DIVS for raw in RAW},
    **{f"math_mtext_{raw}": f"<math><mtext><{raw}>" + DIVS for raw in RAW},
    **{f"svg_closed_then_{raw}": f"<svg></svg><{raw}>" + DIVS for raw in RAW},
    **{f"svg_self_closed_{raw}": f"<svg/><{raw}>" + DIVS for raw in RAW},
    **{f"svg_breakout_{raw}": f"<svg><div><{raw}>" + DIVS for raw in RAW},
}
"""Foreign content (svg, math, nested, and HTML integration points) around each raw-text name."""

TRICKS = {
    **FOREIGN,
    "misnested_blocks": "<span><div></span>" * 60,
    "reopened_formatting": "".join(f'<b title="{i}">' for i in range(20)) + "<div>x</div>y" * 20,
    "adoption": "<a><div><b><p></a>x</b>" * 30,
    "comments_hiding_ends": "<div><!-- </div> --!><i>" * 40,
    "raw_text_ends": "<div><textarea></div></textarea><div><title></div></title>" * 30,
    "lists_implied": "<ul><li>a<li>b<ul><li>c" * 40,
    "table_implied": "<table><td><div>" * 40,
    "select_ignores": "<div><select><div><option>x</div>" * 30,
    "svg_style": "<div><svg><style><g><div>" * 30,
    "ends_without_starts": "</div></span></p><div>" * 50,
    "quoted_gt": '<div title="a>b"><div title=\'c>d\'><span =\"x>' * 30,
}


@pytest.mark.parametrize("name", sorted(TRICKS))
def test_the_parser_never_holds_more_than_the_walk_counted(name):
    """The measure errs on the side of more: what html5ever builds is no deeper than it said (plus the few
    elements the parser adds itself: a table's tbody and tr)."""
    markup = TRICKS[name]
    assert _parsed_depth(markup) <= 3 * measure(markup).depth + 2, name


def test_control_ordinary_markup_is_parsed_as_before():
    import pandas as pd

    frame = pd.DataFrame({"a": range(30), "b": ["<x>"] * 30})
    nested = "<div>" * 40 + "<ul><li><b><i>deep enough</i></b></li></ul>" + "</div>" * 40
    for markup in (frame._repr_html_(), frame.style.highlight_max()._repr_html_(), nested):
        assert "Not drawn as HTML" not in sanitize.sanitize_html(markup)
    assert "deep enough" in sanitize.sanitize_html(nested)
    assert nesting.past_limits(measure(nested)) is None


def test_the_mechanism_off_hands_the_parser_markup_n_deep(monkeypatch):
    """With the limits out of the way, the attack's full depth reaches the parser (work N² for N deep)."""
    reached = []
    real = sanitize._nh3

    class Spy:
        def clean(self, markup):
            reached.append(measure(markup).depth)
            return real().clean(markup[:100])

    monkeypatch.setattr(sanitize, "LIMITS", nesting.Limits(depth=10**9, formatting=10**9, attributes=10**9))
    monkeypatch.setattr(sanitize, "_nh3", lambda code_blocks=False: Spy())
    sanitize.sanitize_html(ATTACKS["div"] + "<!-- off -->")
    assert reached == [N]
