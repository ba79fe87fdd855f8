"""What reaches the page is inert: the one sanitizer for HTML, and the one neutraliser for text.

Reads: HTML and text that someone else wrote. A result's `_repr_html_()` (a library's repr over data from
a file, a web page or an MCP server: a pandas Styler does not escape its cells), a details object's
`link_html()`, the model's Markdown, tool names, arguments, error text and output. Any of them may be
hostile: the model may be prompt-injected, the data may carry markup or terminal escapes.

What could happen: script in the Jupyter page (it can drive the kernel: run code, click Approve), a
remote load that sends data out when the view or the saved notebook is opened (`<img src>`, CSS `url()`,
`@import`), a form or an overlay that imitates the approval buttons, a meta refresh or `<base>` that
redirects; in a terminal, escape sequences that rewrite the screen or set its title, and bidi controls
that make text read differently from what runs.

What stops it:

- `sanitize_html(markup)`: nh3 (the Rust ammonia allowlist sanitizer) with a small allowlist: tables,
  text, lists, `details`, links (http, https, mailto, and in-page `#` anchors only; they open in a new
  tab, with no referrer) and images whose `src` is an inline `data:image/...` (nothing remote, nothing
  relative). No script, no event handler, no form, frame, object, SVG or MathML, no `meta`, `base` or
  `link`. `id`s are prefixed (`nba-u-`) so they cannot clobber the page's; class names of the page's own
  parts (`nba-`, `jp-`, `lm-`, `p-`, `widget-`, `jupyter-`) are dropped. Inline styles and `<style>`
  sheets keep only safe properties (colours, fonts, alignment, borders, padding, sizes; never
  `position`, `z-index`, `transform`, negative margins or any CSS function but colours and gradients:
  so no `url()`, `image-set()` or `expression()`), at-rules (`@import`, `@font-face`, `@media`) are
  dropped, and every selector is scoped to the fragment's own wrapper (a `<style>` keeps no attribute, so
  each is one the scoping sees). What a DataFrame or a Styler needs to look right stays. pandas' own table
  markup is read without nh3 when all of it is of one strict form that a browser parses into just the tree
  it spells (`_PANDAS`: tables, rows, cells with plain text, a few attributes with plain values); the same
  filters apply to it, and anything else at all goes through nh3.
- Limits before the parser (`nesting.LIMITS`: size, depth, formatting elements open, attributes on a tag),
  measured in one linear pass (`nesting.measure`): markup past one is not parsed (nested deep, it costs
  html5ever quadratic time at every draw) but shown escaped as text, with a note saying which limit.
- `markdown_html(text)` in `nbagent.render.markdown` renders the model's Markdown with raw HTML escaped
  and images turned into links that show their URL, then passes it through `sanitize_html` with
  `code_blocks=True`: the one caller for which a `<pre>` keeps the marker of the model's code blocks
  (`nba-code-block`, `nba-lang-LANG`), which the frontend part gives Copy and Insert as cell buttons.
  Everyone else's HTML (a result's `_repr_html_()`, `link_html()`, a tool's Markdown) loses those
  classes as every other class of the page's own, so it cannot make its content look like the model's
  code or get a button that puts it into a cell.
- `terminal_safe(text)`: for text that goes to a terminal or a log (`print(run)`, `str(record)`, the
  headless runner, the text view): terminal escape sequences (CSI, OSC, DCS and the rest) are removed, and
  every other control character (C0, DEL, C1, but newline and tab) and every bidi or invisible character is
  shown as a visible `⟨U+XXXX⟩`.
- `visible(text) -> (shown, warnings)`: for text a person approves: nothing removed, every control, bidi
  and invisible character shown as `⟨U+XXXX NAME⟩`, and one warning per kind found, to show beside it.

  Both live in `hidden` (the one source of hidden characters) and are imported here too.

No IPython here, and nothing from nbagent: every layer may use this module.
"""

from __future__ import annotations

import functools
import html
import re
import zlib
from typing import Any

from .hidden import has_hidden_characters, terminal_safe, visible
from .nesting import LIMITS, measure, past_limits

__all__ = [
    "CSS_PROPERTIES",
    "ID_PREFIX",
    "clean_css_declarations",
    "clean_stylesheet",
    "has_hidden_characters",
    "image_data_url",
    "sanitize_html",
    "terminal_safe",
    "visible",
]

# --------------------------------------------------------------------------------------------------
# HTML
# --------------------------------------------------------------------------------------------------
TAGS = frozenset({
    "a", "abbr", "b", "blockquote", "br", "caption", "cite", "code", "col", "colgroup", "dd", "del", "details",
    "dfn", "div", "dl", "dt", "em", "figcaption", "figure", "h1", "h2", "h3", "h4", "h5", "h6", "hr", "i", "img",
    "ins", "kbd", "li", "mark", "ol", "p", "pre", "q", "s", "samp", "small", "span", "strike", "strong", "style",
    "sub", "summary", "sup", "table", "tbody", "td", "tfoot", "th", "thead", "time", "tr", "tt", "u", "ul", "var",
})
"""Elements kept (their attributes filtered). Anything else is dropped, keeping its text."""

DROPPED_WITH_CONTENT = frozenset({
    "script", "svg", "math", "noscript", "template", "iframe", "frame", "frameset", "object", "embed", "applet",
    "textarea", "select", "option", "xmp", "noembed", "noframes", "title", "head", "plaintext", "canvas",
    "audio", "video", "picture", "source", "portal",
})
"""Elements removed with everything inside them (their text means nothing as text, or is code)."""

_COMMON = {"class", "title", "id", "style", "align", "valign", "lang"}
ATTRIBUTES = {
    "*": _COMMON,
    "a": {"href"},
    "img": {"src", "alt", "width", "height"},
    "td": {"colspan", "rowspan", "headers", "scope", "nowrap"},
    "th": {"colspan", "rowspan", "headers", "scope", "nowrap"},
    "table": {"border", "cellpadding", "cellspacing", "summary", "width"},
    "col": {"span", "width"},
    "colgroup": {"span", "width"},
    "ol": {"start", "type", "reversed"},
    "li": {"value"},
    "details": {"open"},
    "time": {"datetime"},
}
ID_PREFIX = "nba-u-"
"""Put before every `id` of sanitized HTML (and before `#id` in its style sheets): no clobbering of the page."""
_KEPT_CLASSES = frozenset({"nba-cell-link", "nba-md-image", "nba-pre", "nba-code", "nba-diff", "nba-diff-add",
                           "nba-diff-del", "nba-diff-at"})
"""Classes of the page's own kept all the same: they only style text (a link, a block of code, a diff's
lines), so the notebook tools' results (cell diffs) look as the rest of the view does."""
_PAGE_CLASSES = ("nba", "jp-", "lm-", "p-", "widget-", "jupyter-", "jupyter_", "mathjax", "tex2jax")
_CODE_BLOCK_CLASS = re.compile(r"^nba-code-block$|^nba-lang-[a-z0-9_+#-]{1,32}$|^nba-live-[0-9a-f]{24}$")
"""The marker of the model's code blocks (on a `pre`), kept only with `sanitize_html(code_blocks=True)`."""

_IMAGE_URL = re.compile(r"^data:image/(?:png|jpeg|jpg|gif|webp|bmp);base64,[A-Za-z0-9+/=\s]*$", re.I)
_HREF = re.compile(r"^(?:https?://|mailto:|#)", re.I)
_STYLE_ELEMENT = re.compile(r"<style\b[^>]*>(.*?)</style>", re.S)
_TABLE_GAPS = re.compile(r">\s+(?=</?(?:table|thead|tbody|tfoot|tr|td|th)[\s>])")

CSS_PROPERTIES = frozenset({
    "color", "background-color", "background", "background-image", "opacity",
    "font", "font-family", "font-size", "font-style", "font-weight", "font-variant", "font-variant-numeric",
    "text-align", "text-decoration", "text-decoration-line", "text-decoration-color", "text-decoration-style",
    "text-transform", "text-indent", "text-overflow", "vertical-align", "white-space", "word-break",
    "word-wrap", "overflow-wrap", "line-height", "letter-spacing", "word-spacing",
    "border", "border-top", "border-right", "border-bottom", "border-left", "border-color", "border-style",
    "border-width", "border-radius", "border-collapse", "border-spacing", "border-top-color",
    "border-right-color", "border-bottom-color", "border-left-color", "border-top-style", "border-right-style",
    "border-bottom-style", "border-left-style", "border-top-width", "border-right-width",
    "border-bottom-width", "border-left-width", "outline", "outline-color", "outline-style", "outline-width",
    "padding", "padding-top", "padding-right", "padding-bottom", "padding-left",
    "margin", "margin-top", "margin-right", "margin-bottom", "margin-left",
    "width", "min-width", "max-width", "height", "min-height", "max-height",
    "display", "visibility", "overflow", "overflow-x", "overflow-y", "table-layout", "caption-side",
    "empty-cells", "list-style-type", "list-style-position", "float", "clear", "box-sizing",
})
"""CSS properties kept, in `style` attributes and style sheets alike (their values filtered too).

Left out on purpose: `position`, `top`/`left`/..., `z-index`, `transform`, `filter`, `clip-path`, `mask`,
`content`, `cursor`, `pointer-events`, `animation`, `transition`, `direction`/`unicode-bidi`: what lets a
fragment cover or imitate the rest of the page, load something, or reorder text."""
_CSS_FUNCTIONS = frozenset({"rgb", "rgba", "hsl", "hsla", "linear-gradient", "repeating-linear-gradient"})
_CSS_FUNCTION = re.compile(r"([A-Za-z_-][\w-]*)\s*\(")
_CSS_BAD = re.compile(r"[\\<>@{}]|/\*|javascript:|expression|-moz-binding|behavior", re.I)
_DISPLAY = frozenset({"none", "inline", "block", "inline-block", "table", "table-cell", "table-row",
                      "table-header-group", "table-row-group", "table-column", "list-item", "flow-root"})
_SELECTOR_OK = re.compile(r"^[\w\s.#:>+~*()\[\]=\"',|^$-]+$")
_SELECTOR_ID = re.compile(r"#(-?[A-Za-z_][\w-]*)")


def _clean_value(prop: str, value: str) -> str | None:
    value = value.strip()
    if not value or _CSS_BAD.search(value):
        return None
    if any(name.lower() not in _CSS_FUNCTIONS for name in _CSS_FUNCTION.findall(value)):
        return None  # url(), image-set(), var(), attr(), env(), element(), ...: nothing that loads or reads
    if prop.startswith("margin") and "-" in value:
        return None  # a negative margin moves the fragment over the page around it
    if prop == "display" and value.lower().replace("!important", "").strip() not in _DISPLAY:
        return None
    return value


def clean_css_declarations(text: str) -> str:
    """The safe part of a list of CSS declarations (`color: red; position: fixed` -> `color: red`)."""
    return _declarations_cached(text) if len(text) <= _CACHED_CSS else _declarations(text)


_CACHED_CSS = 2000
"""CSS up to this long is filtered once per distinct string (a table repeats its cells' styles)."""


def _declarations(text: str) -> str:
    out = []
    for part in text.split(";"):
        prop, colon, value = part.partition(":")
        prop = prop.strip().lower()
        if not colon or prop not in CSS_PROPERTIES:
            continue
        cleaned = _clean_value(prop, value)
        if cleaned is not None:
            out.append(f"{prop}: {cleaned}")
    return "; ".join(out)


_declarations_cached = functools.lru_cache(maxsize=1024)(_declarations)


def _scope_selector(selector: str) -> str | None:
    selector = selector.strip()
    if not selector or not _SELECTOR_OK.match(selector):
        return None
    return _SELECTOR_ID.sub(lambda m: "#" + ID_PREFIX + m.group(1), selector)


def clean_stylesheet(css: str, scope: str) -> str:
    """A style sheet reduced to plain rules whose selectors all start with `.scope` and whose declarations
    are safe (see `clean_css_declarations`). At-rules (`@import`, `@font-face`, `@media`, ...) are dropped
    whole, and so is any rule that cannot be read plainly (escapes, nested braces)."""
    rules = _sheet_rules_cached(css) if len(css) <= _CACHED_CSS else _sheet_rules(css)
    return "\n".join(f"{', '.join(f'.{scope} {s}' for s in selectors)} {{ {declarations} }}"
                     for selectors, declarations in rules)


def _sheet_rules(css: str) -> tuple[tuple[tuple[str, ...], str], ...]:
    # the rules kept, without their scope: each sheet is read once (a DataFrame's repr always has the same)
    css = re.sub(r"/\*.*?(?:\*/|$)", " ", css, flags=re.S)
    if "\\" in css or "<" in css:
        return ()  # escapes spell anything (`u\72l(`); nothing a table's styling needs
    rules = []
    i, n = 0, len(css)
    while i < n:
        brace = css.find("{", i)
        if brace == -1:
            break
        head = css[i:brace]
        semi = head.find(";")
        if "@" in head[: semi if semi != -1 else len(head)] and semi != -1:
            i += semi + 1  # `@import ...;`, `@charset ...;`
            continue
        # the rule's body: to the matching brace (nested blocks are skipped, and dropped)
        depth, j = 1, brace + 1
        while j < n and depth:
            if css[j] == "{":
                depth += 1
            elif css[j] == "}":
                depth -= 1
            j += 1
        body = css[brace + 1 : j - 1]
        i = j
        if "@" in head or "{" in body:
            continue
        selectors = [_scope_selector(s) for s in head.split(",")]
        if not selectors or any(s is None for s in selectors):
            continue
        declarations = clean_css_declarations(body)
        if declarations:
            rules.append((tuple(selectors), declarations))  # type: ignore[arg-type]
    return tuple(rules)


_sheet_rules_cached = functools.lru_cache(maxsize=256)(_sheet_rules)


def image_data_url(value: str) -> bool:
    """Whether `value` is an inline raster image (`data:image/png;base64,...`): the only `src` an image keeps."""
    return bool(_IMAGE_URL.match(value.strip()))


def _attribute_filter(tag: str, attr: str, value: str, code_blocks: bool = False) -> str | None:
    if tag == "style":
        return None  # a sheet is a bare `<style>`: one with attributes would escape its scoping below
    if attr == "href":
        return value if _HREF.match(value.strip()) else None
    if attr == "src":
        return value if image_data_url(value) else None
    if attr == "style":
        return clean_css_declarations(value) or None
    if attr == "class":
        marks = code_blocks and tag == "pre"
        return _classes_cached(value, marks) if len(value) <= _CACHED_CSS else _classes(value, marks)
    return value


def _classes(value: str, marks: bool) -> str | None:
    kept = [c for c in value.split() if c in _KEPT_CLASSES or not c.lower().startswith(_PAGE_CLASSES)
            or (marks and _CODE_BLOCK_CLASS.match(c))]
    return " ".join(kept) or None


_classes_cached = functools.lru_cache(maxsize=1024)(_classes)


def _code_block_filter(tag: str, attr: str, value: str) -> str | None:
    return _attribute_filter(tag, attr, value, code_blocks=True)


_cleaners: dict[bool, Any] = {}


def _nh3(code_blocks: bool = False) -> Any:
    cleaner = _cleaners.get(code_blocks)
    if cleaner is None:
        import nh3

        cleaner = _cleaners[code_blocks] = nh3.Cleaner(
            tags=set(TAGS), clean_content_tags=set(DROPPED_WITH_CONTENT), attributes={k: set(v) for k, v in ATTRIBUTES.items()},
            attribute_filter=_code_block_filter if code_blocks else _attribute_filter, strip_comments=True,
            link_rel="noopener noreferrer nofollow", url_schemes={"http", "https", "mailto", "data"},
            url_relative="pass_through", id_prefix=ID_PREFIX, set_tag_attribute_values={"a": {"target": "_blank"}},
        )
    return cleaner


def sanitize_html(markup: str, *, wrap: bool = True, scope: str | None = None, code_blocks: bool = False) -> str:
    """HTML someone else wrote, made inert: what the allowlist keeps, wrapped in `<div class="nba-safe SCOPE">`.

    `scope` names the wrapper's own class, the one its style sheets are confined to; by default one derived
    from the markup (the same markup gives the same HTML: a saved notebook does not change on a re-render).
    `wrap=False` (for a piece that goes inline: a link, Markdown) leaves the wrapper out, and with it every
    style sheet. Never raises for odd input: what cannot be read plainly is dropped. `code_blocks=True` is
    for the model's Markdown as `nbagent.render.markdown` writes it, and nothing else: a `<pre>` keeps the
    classes that mark it as the model's code (`nba-code-block`, `nba-lang-LANG`).

    The last 64 results (of markup up to `CACHED_CHARS`) are kept: a view draws the same result several
    times (its row when the call ends, the whole view when the run ends, the static form a notebook saves).
    """
    if not isinstance(markup, str):
        markup = str(markup)
    if len(markup) > CACHED_CHARS:
        return _sanitize(markup, wrap, scope, code_blocks)
    return _cached(markup, wrap, scope, code_blocks)


CACHED_CHARS = 100_000
"""Markup longer than this is sanitized anew each time."""


# A pandas table's own markup, read exactly: what `DataFrame._repr_html_` and a Styler write over plain
# cells. Markup that is all of this grammar (matched whole by one regular expression whose quantifiers
# never give back what they took: linear time) is parsed by a browser into just the tree it spells: every
# element is closed where it is opened, only where HTML allows it (cells in rows in a table's sections;
# text, and inline text elements, in cells), so nothing is moved, closed early or left open, and there is
# no comment, entity-decoded attribute or raw `<`. What the allowlist would change in it is done directly
# (ids prefixed, inline styles and sheets filtered as usual); class names of the page's own, `"` in text,
# any other element or attribute, anything else at all: the markup goes through nh3 instead. Measured
# (`bench/sanitize.py`, a busy machine): a 30x6 DataFrame 0.09 ms against nh3's 0.6, its Styler 0.26
# against 1.4.
_WS = r"[ \t\n]*+"
_TEXT = r"[^<\"\x00-\x08\x0b-\x1f\x7f\ud800-\udfff]*+"
_CLASS = "(?!(?i:" + "|".join(map(re.escape, _PAGE_CLASSES)) + "))[A-Za-z0-9_-]++"
_ATTR = (r' id="[A-Za-z0-9_-]++"| class="' + _CLASS + "(?: " + _CLASS + r')*+"'
         r'| style="[^"=<>&\\@{}\x00-\x1f\ud800-\udfff]*+"| valign="(?:top|middle|bottom)"')
_ATTRS = f"(?:{_ATTR})*+ ?>"  # what `ATTRIBUTES` allows every element; a table or a cell some more
_TABLE_ATTRS = f'(?:{_ATTR}| border="[0-9]{{1,4}}+")*+ ?>'
_CELL_ATTRS = f'(?:{_ATTR}| (?:colspan|rowspan)="[0-9]{{1,4}}+")*+ ?>'
_INLINE = "|".join(f"<{t}{_ATTRS}{_TEXT}</{t}>" for t in ("b", "i", "em", "strong", "code", "span"))
_CELL_TEXT = f"{_TEXT}(?:(?:{_INLINE}){_TEXT})*+"
_ROW = f"<tr{_ATTRS}(?:{_WS}(?:<th{_CELL_ATTRS}{_CELL_TEXT}</th>|<td{_CELL_ATTRS}{_CELL_TEXT}</td>))*+{_WS}</tr>"
_SECTIONS = "|".join(f"<{t}{_ATTRS}(?:{_WS}{_ROW})*+{_WS}</{t}>" for t in ("thead", "tbody", "tfoot"))
_TABLE = (f"<table{_TABLE_ATTRS}{_WS}(?:<caption{_ATTRS}{_CELL_TEXT}</caption>{_WS})?+"
          f"(?:(?:{_SECTIONS}){_WS})*+</table>")
_SHEET = r'<style(?: scoped| type="text/css")?+>[^<"]*+</style>'
_BLOCK = f"{_SHEET}|{_TABLE}|<p{_ATTRS}{_CELL_TEXT}</p>"
_PANDAS = f"(?:{_WS}(?:<div{_ATTRS}(?:{_WS}(?:{_BLOCK}))*+{_WS}</div>|{_BLOCK}))*+{_WS}"


@functools.cache
def _pandas_grammar() -> re.Pattern[str]:
    """`_PANDAS` compiled at its first use, not at import: compiling its 45,000 characters is ~0.3 s of CPU
    (measured with `python -X importtime`: half of `import nbagent`), which every process that imports
    nbagent (a kernel, a Dask worker, a tool's subprocess) would pay whether or not it shows a table."""
    return re.compile(_PANDAS)

_PANDAS_STYLE = re.compile(r' style="([^"]*)"')


def _pandas_table(markup: str) -> str | None:
    """`markup` sanitized without nh3 when it is a table in pandas' regular form (see `_PANDAS`), else None.
    Its sheets are left for `_sanitize` to filter, each a bare `<style>` as nh3's are."""
    if not markup.lstrip().startswith(("<div", "<style", "<table")) or _pandas_grammar().fullmatch(markup) is None:
        return None
    # no `"` in text or sheets, and none in a value: ` id="`, ` style="` are where attributes start
    cleaned = markup.replace(' id="', ' id="' + ID_PREFIX) if ' id="' in markup else markup
    if ' style="' in cleaned:
        def inline(m: re.Match[str]) -> str:
            css = clean_css_declarations(m.group(1))
            return f' style="{css}"' if css else ""

        cleaned = _PANDAS_STYLE.sub(inline, cleaned)
    if "<style " in cleaned:  # no `<` in text: every `<style` is a sheet's tag
        cleaned = cleaned.replace("<style scoped>", "<style>").replace('<style type="text/css">', "<style>")
    return cleaned


def _sanitize(markup: str, wrap: bool = True, scope: str | None = None, code_blocks: bool = False) -> str:
    if len(markup) > LIMITS.chars:
        return _as_text(markup, f"it is longer than {LIMITS.chars:,} characters", wrap)
    cleaned = _pandas_table(markup)
    if cleaned is None:
        # before the parser: markup deeper or wider than `nesting.LIMITS` would cost it quadratic time (a
        # shorter piece cannot pass them: fewer tags than the depth, fewer characters than attributes need)
        if markup.count("<") > LIMITS.depth or len(markup) > 2 * LIMITS.attributes:
            why = past_limits(measure(markup, LIMITS), LIMITS)
            if why is not None:
                return _as_text(markup, why, wrap)
        # the indentation between a table's own tags shows nothing, and is a quarter of a DataFrame's repr:
        # nh3 reads it faster without (measured: 0.58 -> 0.41 ms for a 30x6 DataFrame)
        cleaned = _nh3(code_blocks).clean(_TABLE_GAPS.sub(">", markup))
    if not wrap:
        return _STYLE_ELEMENT.sub("", cleaned) if "<style" in cleaned else cleaned
    if "<style" in cleaned:  # nh3's output escapes `<` in attribute values: each `<style>` is an element
        scope = scope or f"nba-safe-{zlib.crc32(markup.encode('utf-8', 'surrogatepass')):08x}"

        def sheet(m: re.Match[str]) -> str:
            css = clean_stylesheet(m.group(1), scope)
            return f"<style>{css}</style>" if css else ""

        cleaned = _STYLE_ELEMENT.sub(sheet, cleaned)
    cls = f"nba-safe {scope}" if scope else "nba-safe"
    return f'<div class="{cls}">{cleaned}</div>'


_cached = functools.lru_cache(maxsize=64)(_sanitize)

SHOWN_AS_TEXT_CHARS = 200_000
"""Of markup shown as text (past a limit), this much is shown; the note says how much more there is."""


def _as_text(markup: str, why: str, wrap: bool) -> str:
    """Markup past a limit of `nesting.LIMITS`: not parsed, shown escaped as text, with a note saying why."""
    text = markup[:SHOWN_AS_TEXT_CHARS]
    more = len(markup) - len(text)
    cut = f" (its first {len(text):,} characters; {more:,} more are not shown)" if more else ""
    note = f"Not drawn as HTML: {why}, more than nbagent parses. Its markup is shown as text{cut}."
    body = f"<p><em>{html.escape(note)}</em></p><pre>{html.escape(visible(text)[0])}</pre>"
    return f'<div class="nba-safe">{body}</div>' if wrap else body
