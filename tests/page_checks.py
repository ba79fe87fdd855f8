"""What a page would do: the active parts of an HTML string, read with a real HTML parser.

`active(markup)` lists everything in `markup` that runs, loads, submits or redirects: script elements,
event-handler attributes, `javascript:` and non-image `data:` URLs, remote or relative `src`/`srcset`/
`background`/`poster`/`action`, `url()` and `@import` in CSS, `meta`, `base`, `link`, forms, frames, objects,
embeds, SVG and MathML. A sanitizer's output must give `[]`; the same attack without the sanitizer must not.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser

_ACTIVE_TAGS = {"script", "iframe", "frame", "frameset", "object", "embed", "applet", "form", "input", "button",
                "textarea", "select", "meta", "base", "link", "svg", "math", "portal", "audio", "video",
                "source", "template", "noscript"}
_URL_ATTRS = {"src", "srcset", "background", "poster", "action", "formaction", "data", "xlink:href", "lowsrc",
              "dynsrc", "ping", "cite", "longdesc", "manifest", "codebase"}
_CSS_LOAD = re.compile(r"url\s*\(|\\[0-9a-f]|@import|image-set\s*\(|expression\s*\(|-moz-binding|behavior\s*:", re.I)
_INLINE_IMAGE = re.compile(r"^data:image/(png|jpeg|gif|webp|bmp);base64,", re.I)
_OVERLAY = re.compile(r"position\s*:\s*(fixed|absolute|sticky)|z-index", re.I)


class _Reader(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.found: list[str] = []
        self._in_style = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in _ACTIVE_TAGS:
            self.found.append(f"<{tag}>")
        self._in_style = tag == "style"
        for name, value in attrs:
            value = (value or "").strip()
            low = re.sub(r"[\s\x00-\x1f]", "", value).lower()
            if name.startswith("on"):
                self.found.append(f"{tag} {name}=")
            elif name == "href" and (low.startswith(("javascript:", "vbscript:", "data:"))):
                self.found.append(f"{tag} href={value[:30]}")
            elif name in _URL_ATTRS and value and not (name == "src" and _INLINE_IMAGE.match(value)):
                self.found.append(f"{tag} {name}={value[:40]}")
            elif name == "style" and (_CSS_LOAD.search(value) or _OVERLAY.search(value)):
                self.found.append(f"{tag} style={value[:40]}")
            elif name == "http-equiv":
                self.found.append(f"{tag} http-equiv")

    handle_startendtag = handle_starttag

    def handle_endtag(self, tag: str) -> None:
        if tag == "style":
            self._in_style = False

    def handle_data(self, data: str) -> None:
        if self._in_style and (_CSS_LOAD.search(data) or _OVERLAY.search(data)):
            self.found.append(f"<style> {data.strip()[:40]}")


def active(markup: str) -> list[str]:
    """Everything in `markup` that would run, load, submit or redirect (empty: inert)."""
    reader = _Reader()
    reader.feed(markup)
    reader.close()
    return reader.found
