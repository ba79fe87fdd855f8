"""How much work markup would make a browser's parser do, measured in one pass before anyone parses it.

Reads: HTML someone else wrote (a result's `_repr_html_()`, the model's Markdown), on its way to the
sanitizer (`sanitize.sanitize_html`, nh3: the html5ever parser) at every draw of a view.

What could happen: html5ever's tree builder looks through the stack of open elements for each tag (is a
`p` in scope, where is the `li` to close), so markup nested N deep costs it N² (16,000 `<ul>` in a row:
seconds, at every draw); a tag with thousands of attributes, and formatting elements that are re-opened
after every block (`<b id=1>...<b id=N></div>x`), are quadratic too.

What stops it: `measure(markup)` walks the markup once, as the HTML tokenizer reads it (comments, bogus
comments, quoted attribute values, raw-text elements), and counts what the tree builder would hold at once:
elements opened and not yet closed, formatting elements among them, attributes on one tag. It errs on the
side of counting more, never less: an element is closed only by its own end tag while it is the innermost
one the walk has open (the parser also closes elements implicitly, and ignores end tags the walk might
take: so the parser's stack is never deeper than the walk's count, but for the few elements it adds itself:
`html`, `body`, a table's `tbody` and `tr`). Raw text (`script`, `style`, `textarea`, `title`...) and
`plaintext` ("the rest is text") are taken only where the tokenizer surely reads HTML: inside `svg` or
`math` (foreign content, tracked per open element until its end tag) they are ordinary elements that hold
elements, so `<svg><plaintext>` then 24,000 `<div>` is counted 24,002 deep; an HTML integration point
(`foreignObject`, `desc`, `title` in svg; `annotation-xml` with an HTML encoding in math) returns to HTML
rules, unless the walk has passed an end tag it did not take inside foreign content (the parser may then
have closed the integration point), after which it reads every tag (it counts more, never less). `sanitize_html` hands nh3 only markup within `LIMITS`; past them, the markup is shown escaped, as
text, with a note saying which limit it passed. Within them, the parser's work is linear in the size (each
tag costs at most the depth limit), and so is this walk (`Shape.steps`: one step per tag or comment).

No IPython here, and nothing from nbagent.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["LIMITS", "Limits", "Shape", "measure", "past_limits"]


@dataclass(frozen=True, slots=True)
class Limits:
    chars: int = 2_000_000
    """Markup longer than this is not parsed at all."""
    depth: int = 128
    """Elements open at once (a DataFrame's table: 6; the model's Markdown: rarely 10)."""
    formatting: int = 32
    """Formatting elements (`b`, `i`, `a`, `font`...) open at once: the parser re-opens each after a block."""
    attributes: int = 256
    """Attributes on one tag."""


LIMITS = Limits()


@dataclass(slots=True)
class Shape:
    """What `measure` found."""

    depth: int = 0
    formatting: int = 0
    attributes: int = 0
    steps: int = 0
    """Tags, comments and raw-text runs walked: at most one per `<` of the markup."""


_VOID = frozenset({"area", "base", "basefont", "bgsound", "br", "col", "embed", "frame", "hr", "image", "img",
                   "input", "keygen", "link", "meta", "param", "source", "track", "wbr"})
_FORMATTING = frozenset({"a", "b", "big", "code", "em", "font", "i", "nobr", "s", "small", "strike", "strong",
                         "tt", "u"})
_RAW_TEXT = frozenset({"script", "style", "xmp", "iframe", "noembed", "noframes", "textarea", "title"})
# one attribute (or the tag's end) as the tokenizer reads it: whitespace and `/` between attributes; a name
# (its first character may be `=`); after `=`, a value in double or single quotes (to EOF when unclosed) or bare
_ATTRIBUTE = (r"""[\t\n\f\r /]*+(?:(>)|[^\t\n\f\r />][^\t\n\f\r />=]*+[\t\n\f\r ]*+"""
              r"""(?:=[\t\n\f\r ]*+(?:"[^"]*+"?|'[^']*+'?|[^\t\n\f\r >]*+))?)""")
_ONE_ATTRIBUTE = re.compile(_ATTRIBUTE)
# one token that matters, as the tokenizer reads it: a start or end tag (to its `>`, or the markup's end:
# unfinished, it is counted all the same), a comment (`<!-->` and `<!--->` are empty ones), a bogus comment
# (`<!DOCTYPE`, `<![CDATA[`, `<?`, `</` and no letter: to the next `>`); a `<` before anything else is text
_TOKEN = re.compile(r"<(?:(/?)([A-Za-z][^\t\n\f\r />]*+)(?:" + _ATTRIBUTE.replace("(>)|", "(?!>)", 1)
                    + r")*+[\t\n\f\r /]*+(?:>|\Z)|!--(?:-?>|.*?(?:--!?>|\Z))|[!?/][^>]*+(?:>|\Z))", re.S)
_raw_ends: dict[str, re.Pattern[str]] = {}


def _attributes(markup: str, at: int) -> int:
    """How many attributes the tag whose name ends at `at` has."""
    count = 0
    while True:
        m = _ONE_ATTRIBUTE.match(markup, at)
        if m is None or m.end() == at or m.group(1):
            return count
        at = m.end()
        count += 1


def _raw_end(name: str) -> re.Pattern[str]:
    pattern = _raw_ends.get(name)
    if pattern is None:
        pattern = _raw_ends[name] = re.compile(rf"</{name}[\t\n\f\r />]", re.I)
    return pattern


def measure(markup: str, limits: Limits | None = None) -> Shape:
    """The most elements, formatting elements and attributes `markup` holds at once (see the module
    docstring); the walk stops as soon as one passes `limits` (when given)."""
    shape = Shape()
    limit = limits or LIMITS
    stack: list[str] = []
    modes: list[str] = []  # for each open element: the rules its content is read by ("html", "svg", "math")
    formatting = 0
    unsure = False  # an end tag the walk did not take inside foreign content: the parser's stack may differ
    at: int | None = 0
    while at is not None:
        start, at = at, None
        for m in _TOKEN.finditer(markup, start):
            shape.steps += 1
            name = m.group(2)
            if name is None:
                continue  # a comment
            name = name.lower()
            mode = modes[-1] if modes else "html"
            if m.group(1):  # an end tag
                if stack and stack[-1] == name:
                    stack.pop()
                    modes.pop()
                    formatting -= name in _FORMATTING
                elif "svg" in modes or "math" in modes:
                    unsure = True
                continue
            if m.end() - m.start() > 2 * limit.attributes:  # shorter, it cannot hold that many
                shape.attributes = max(shape.attributes, _attributes(markup, m.end(2)))
            if name not in _VOID:
                stack.append(name)
                modes.append(_content_mode(mode, name, m.group(0)))
                formatting += name in _FORMATTING
                if len(stack) > shape.depth:
                    shape.depth = len(stack)
                if formatting > shape.formatting:
                    shape.formatting = formatting
            if limits is not None and past_limits(shape, limits):
                return shape
            # raw text and plaintext only where the tokenizer surely reads HTML: in svg and math these are
            # ordinary elements that hold elements, so where the walk is unsure it reads on (counts more)
            if mode == "html" and not unsure and (name in _RAW_TEXT or name == "plaintext"):
                if name == "plaintext":
                    return shape  # the rest is text
                end = _raw_end(name).search(markup, m.end())
                if end is not None:  # else the rest is its text
                    at = end.start()
                break
    return shape


_SVG_INTEGRATION = frozenset({"foreignobject", "desc", "title"})
_HTML_ANNOTATION = re.compile(r"""[\t\n\f\r /]encoding[\t\n\f\r ]*=[\t\n\f\r ]*["']?"""
                              r"""(?:text/html|application/xhtml\+xml)["'\t\n\f\r />]""", re.I)


def _content_mode(mode: str, name: str, tag: str) -> str:
    """The rules an element's content is read by: `svg` and `math` start foreign content (anywhere); their
    HTML integration points (`foreignObject`, `desc`, `title` in svg; `annotation-xml` with an HTML encoding
    in math) return to HTML; everything else reads as its parent does. MathML's text integration points
    (`mi`, `mtext`...) are left foreign: the walk then reads on through what HTML would take as raw text,
    which only counts more. An element the parser moves out of foreign content (`<svg><div>`) stays foreign
    in the walk, which again only counts more."""
    if name in ("svg", "math"):
        return name
    if mode == "svg" and name in _SVG_INTEGRATION:
        return "html"
    if mode == "math" and name == "annotation-xml" and _HTML_ANNOTATION.search(tag):
        return "html"
    return mode


def past_limits(shape: Shape, limits: Limits = LIMITS) -> str | None:
    """Which limit `shape` passes, in words for the person, or None."""
    if shape.depth > limits.depth:
        return f"it nests elements more than {limits.depth} deep"
    if shape.formatting > limits.formatting:
        return f"it holds more than {limits.formatting} formatting elements open at once"
    if shape.attributes > limits.attributes:
        return f"a tag has more than {limits.attributes} attributes"
    return None
