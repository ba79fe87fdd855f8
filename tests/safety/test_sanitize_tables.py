"""pandas' own table markup, sanitized without nh3 (`nbagent.safety.sanitize._pandas_table`), and style sheets.

The short way must give what nh3 gives (the same tree, read with a real HTML parser), take the markup
pandas writes, and refuse everything else, so that the rest goes through nh3 as before.
"""

from __future__ import annotations

from html.parser import HTMLParser

import numpy as np
import pandas as pd
import pytest

from nbagent.safety import sanitize
from nbagent.safety.sanitize import sanitize_html

from ..page_checks import active


def tree(markup: str) -> list[tuple]:
    """What a parser reads in `markup`: tags with their attributes, and text (entities decoded, blank
    text between tags left out, runs of white space as one)."""
    out: list[tuple] = []

    class Reader(HTMLParser):
        def handle_starttag(self, tag, attrs):
            out.append(("<", tag, tuple(sorted(attrs))))

        def handle_endtag(self, tag):
            out.append((">", tag))

        def handle_data(self, data):
            if data.split():
                out.append(("text", " ".join(data.split())))

    reader = Reader(convert_charrefs=True)
    reader.feed(markup)
    reader.close()
    return out


def through_nh3(monkeypatch, markup: str, **kw) -> str:
    with monkeypatch.context() as m:
        m.setattr(sanitize, "_pandas_table", lambda _markup: None)
        return sanitize._sanitize(markup, kw.get("wrap", True), kw.get("scope"))


FRAME = pd.DataFrame({"n": [1, 2, 3], "s": ["a <b>b</b> & c", "<script>alert(1)</script>", "x > y"],
                      "f": [1.5, np.nan, -2.0]})
MULTI = pd.DataFrame(np.arange(8).reshape(4, 2), columns=["p", "q"],
                     index=pd.MultiIndex.from_product([["a", "b"], [1, 2]], names=["k", "n"]))


def tables() -> dict[str, str]:
    return {
        "dataframe": FRAME._repr_html_(),
        "named index": FRAME.rename_axis("idx")._repr_html_(),
        "multiindex rows": MULTI._repr_html_(),
        "truncated": pd.DataFrame({"a": range(500)})._repr_html_(),
        "styler": FRAME[["n", "f"]].style.highlight_max(color="lightgreen").set_caption("Totals")._repr_html_(),
        "styler, inline markup in cells": pd.DataFrame({"a": ["<b>x</b>", "<i>y</i>"]}).style.highlight_min(
            color="red")._repr_html_(),
        "styler with table styles": FRAME[["n"]].style.set_table_styles(
            [{"selector": "th", "props": [("color", "navy"), ("position", "fixed")]}])._repr_html_(),
    }


@pytest.mark.parametrize("name", sorted(tables()))
def test_pandas_markup_takes_the_short_way_and_gives_what_nh3_gives(monkeypatch, name):
    raw = tables()[name]
    assert sanitize._pandas_table(raw) is not None, f"{name}: pandas' own markup should not need nh3"
    for wrap in (True, False):
        fast = sanitize._sanitize(raw, wrap)
        assert tree(fast) == tree(through_nh3(monkeypatch, raw, wrap=wrap)), (name, wrap)
        assert active(fast) == []


def test_the_short_way_prefixes_ids_scopes_sheets_and_filters_inline_styles():
    raw = tables()["styler with table styles"]
    out = sanitize_html(raw)
    scope = out.split('class="nba-safe ', 1)[1].split('"', 1)[0]
    sheet = out.split("<style>", 1)[1].split("</style>", 1)[0]
    assert sheet and all(line.startswith(f".{scope} ") for line in sheet.splitlines())
    assert "color: navy" in sheet and "position" not in out
    assert 'id="nba-u-T_' in out and ' id="T_' not in out
    inline = sanitize_html(FRAME._repr_html_().replace('style="text-align: right;"',
                                                       'style="text-align: right; position: fixed"'))
    assert 'style="text-align: right"' in inline and "position" not in inline
    remote = FRAME._repr_html_().replace('style="text-align: right;"', 'style="background: url(//evil.example/x)"')
    assert sanitize._pandas_table(remote) is not None  # filtered on the short way, as nh3's would be
    assert "url" not in sanitize_html(remote) and "<tr>" in sanitize_html(remote) and active(sanitize_html(remote)) == []


BASE = FRAME[["n"]]._repr_html_()
STYLED = FRAME[["n"]].style.highlight_max(color="red")._repr_html_()
NEAR_MISSES = {
    "script in a cell": BASE.replace("<td>1</td>", "<td><script>alert(1)</script></td>"),
    "image in a cell": BASE.replace("<td>1</td>", '<td><img src=x onerror="alert(1)"></td>'),
    "link in a cell": BASE.replace("<td>1</td>", '<td><a href="javascript:alert(1)">1</a></td>'),
    "event handler": BASE.replace("<td>1</td>", '<td onclick="alert(1)">1</td>'),
    "unquoted attribute": BASE.replace('class="dataframe"', "class=dataframe onmouseover=alert(1)"),
    "page's own class": BASE.replace('class="dataframe"', 'class="dataframe jp-Dialog"'),
    "page's own class, other case": BASE.replace('class="dataframe"', 'class="NBA-ask"'),
    "entity in a style": BASE.replace('style="text-align: right;"', 'style="po&#115;ition: fixed"'),
    "escape in a style": BASE.replace('style="text-align: right;"', 'style="background: u\\72l(//e/x)"'),
    "sheet with attributes": BASE.replace("<style scoped>", '<style id="x">'),
    "comment": BASE.replace("<tbody>", "<tbody><!-- x -->"),
    "an element left open": BASE.replace("</table>", ""),
    "a wrapper closed early": BASE.replace("<table", "</div><table"),
    "a cell outside a row": BASE.replace("<tbody>", "<tbody><td>x</td>"),
    "text in a row": BASE.replace("<tr>", "<tr>moved out", 1),
    "upper-case tag": BASE.replace("<td>1</td>", "<TD>1</TD>"),
    "border on a cell": BASE.replace("<td>1</td>", '<td border="1">1</td>'),
    "nul": BASE.replace("<td>1</td>", "<td>1\x00</td>"),
    "carriage return": BASE.replace("<td>1</td>", "<td>1\r</td>"),
    "quote in text": BASE.replace("<td>1</td>", '<td>a "quoted" id="x"</td>'),
    "nested inline": STYLED.replace(">1</td>", "><b><i>1</i></b></td>", 1),
    "style tag in a cell": STYLED.replace(">1</td>", "><style>td{color:red}</style></td>", 1),
    "unclosed style": BASE.replace("</style>", ""),
}


@pytest.mark.parametrize("name", sorted(NEAR_MISSES))
def test_anything_but_pandas_own_markup_goes_through_nh3(name):
    markup = NEAR_MISSES[name]
    assert markup not in (BASE, STYLED), f"{name}: the replacement did not apply"
    assert sanitize._pandas_table(markup) is None, name
    out = sanitize_html(markup)
    assert active(out) == [], (name, out)


def test_a_style_element_with_attributes_is_scoped_like_any_other():
    for markup in ('<style id="a">.jp-Notebook { display: none; color: red }</style><p>x</p>',
                   '<style title="t" media="all">body { display: none }</style><p>x</p>'):
        out = sanitize_html(markup)
        scope = out.split('class="nba-safe ', 1)[1].split('"', 1)[0]
        sheets = [part.split("</style>", 1)[0].split(">", 1)[1] for part in out.split("<style")[1:]]
        assert all(line.startswith(f".{scope} ") for sheet in sheets for line in sheet.splitlines()), out
        assert "<style " not in out and 'id="nba-u-a"' not in out
        assert "<style" not in sanitize_html(markup, wrap=False)


def test_each_sheet_is_read_once_and_scoped_anew():
    css = ".dataframe td { color: red; position: fixed } #T_1 th { text-align: right }"
    a, b = sanitize.clean_stylesheet(css, "one"), sanitize.clean_stylesheet(css, "two")
    assert a == ".one .dataframe td { color: red }\n.one #nba-u-T_1 th { text-align: right }"
    assert b == a.replace(".one ", ".two ")
    long = css * (sanitize._CACHED_CSS // len(css) + 1)  # past the cache: filtered the same way
    assert sanitize.clean_stylesheet(long, "one") == "\n".join([a] * (sanitize._CACHED_CSS // len(css) + 1))
    assert sanitize.clean_css_declarations("color: red; z-index: 9") == "color: red"
