"""The model's Markdown as HTML: mistune with raw HTML escaped, images as links, code blocks in colour.

Reads what someone else wrote: the model's text (it may be prompt-injected) and a tool's Markdown
presentation (an MCP server's, say). Neither can put HTML of its own on the page: mistune escapes raw
HTML, an image becomes a link that shows its URL (nothing is loaded), and what comes out goes through
`sanitize.sanitize_html`.

A fenced block is `<pre class="nba-code-block nba-lang-LANG nba-live-MARK"><code>...</code></pre>`: the
frontend part finds it there and gives it Copy and Insert as cell buttons (frontend/src/codeblocks.ts), in
a notebook only when MARK is this kernel's (`LIVE_MARK`, which the kernel tells the page). Only this
module's own markup for the model's text keeps those classes: `markdown_html(text)` asks the sanitizer for
them (`code_blocks=True`), a tool's Markdown (`code_blocks=False`) and every other piece of HTML (a
result's `_repr_html_()`, `link_html()`) lose them, as every other class of the page's own. What the block
shows is what its text is: every control, bidi and invisible character in it is shown as
`⟨U+XXXX NAME⟩`, the emoji joiner and variation selectors too (prose keeps those as they are; code that
is copied into a cell and run does not).
"""

from __future__ import annotations

import functools
import html
import re
import secrets
from typing import Any

from ..safety import sanitize
from ..safety.shown import shown_html

__all__ = ["LIVE_MARK", "code_language", "markdown_html"]

LIVE_MARK = "nba-live-" + secrets.token_hex(12)
"""A class every code block this process draws carries, new in each process (each kernel). The kernel tells
the page it (the notebook comm's hello, which only the live kernel can send), and the page gives Copy and
Insert as cell only to blocks that carry it: a saved output (a notebook from the web, or this notebook's
outputs of an earlier kernel) cannot, since nobody knew it when the output was written."""

_LANG_CHARS = re.compile(r"[^a-z0-9_+#-]")


def _esc(text: Any) -> str:
    return shown_html(text)


def code_language(info: str | None) -> str:
    """The language a fence names, as the block's class spells it (`Python {.x}` -> `python`): lower case,
    only `a-z 0-9 _ + # -`, at most 32 characters; '' for a fence that names none, `other` for one whose
    name has none of those characters."""
    words = (info or "").strip().split(None, 1)
    if not words:
        return ""
    return _LANG_CHARS.sub("", words[0].lower())[:32] or "other"


@functools.cache
def _markdown() -> Any:
    try:
        import mistune
    except ImportError:  # pragma: no cover - mistune comes with Jupyter
        return None

    class Renderer(mistune.HTMLRenderer):
        def image(self, text: str, url: str, title: str | None = None) -> str:
            """An image is never loaded (it would tell its host that the view was opened, and what the URL
            carries): it becomes a link that shows where it points."""
            alt = html.unescape(mistune.util.striptags(text))
            shown = f"image: {alt} · {url}" if alt else f"image: {url}"
            return (f'<a class="nba-md-image" href="{self.safe_url(url)}" title="an image the model linked; '
                    f'not loaded">{_esc(shown)}</a>')

        def block_code(self, code: str, info: str | None = None) -> str:
            """A fenced block, marked as one with its language, in that language's colours (Pygments, when
            it is installed and knows the language); plain, escaped text otherwise."""
            code = sanitize.visible(code)[0]  # the joiner and variation selectors prose keeps, shown
            words = (info or "").strip().split(None, 1)
            lang = code_language(info)
            shown = _highlight(code, words[0]) if words else None
            cls = f"nba-code-block nba-lang-{lang} {LIVE_MARK}" if lang else f"nba-code-block {LIVE_MARK}"
            return f'<pre class="{cls}"><code>{shown if shown is not None else shown_html(code)}</code></pre>\n'

    return mistune.create_markdown(escape=True, renderer=Renderer(escape=True),
                                   plugins=["strikethrough", "table", "url"])


def _highlight(code: str, lang: str) -> str | None:
    """`code` as HTML spans with `hl-*` classes (render.css colours them), or None: no Pygments, or a
    language it does not know. The spans carry classes only; the sanitizer still sees all of it."""
    if not lang:
        return None
    try:
        from pygments import highlight
        from pygments.formatters import HtmlFormatter
        from pygments.lexers import get_lexer_by_name
        from pygments.util import ClassNotFound
    except ImportError:  # pragma: no cover - Pygments comes with IPython
        return None
    try:
        lexer = get_lexer_by_name(lang, stripnl=False)
    except ClassNotFound:
        return None
    return highlight(code, lexer, HtmlFormatter(nowrap=True, classprefix="hl-"))


def markdown_html(text: str, *, code_blocks: bool = True) -> str:
    """The model's Markdown as HTML: raw HTML in it is escaped, images become links that show their URL,
    and the result goes through `sanitize_html` (no script, no event handler, nothing remote).

    `code_blocks=False` (Markdown a tool wrote, not the model): its fenced blocks look the same but are not
    marked as the model's code (no Copy or Insert as cell buttons)."""
    render = _markdown()
    if render is None:  # pragma: no cover
        return "".join(f"<p>{_esc(p)}</p>" for p in text.split("\n\n") if p.strip())
    return sanitize.sanitize_html(render(sanitize.visible(text, prose=True)[0]), wrap=False, code_blocks=code_blocks)
