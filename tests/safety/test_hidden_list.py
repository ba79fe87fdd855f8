"""The one list of hidden characters (nbagent/safety/hidden.json): the kernel's `visible` shows exactly what it
holds, and the page's list is made from it (frontend/src/hidden.ts, checked by frontend/src/hidden.test.ts)."""

from __future__ import annotations

import json
import re
from importlib import resources
from pathlib import Path

from nbagent.safety.sanitize import has_hidden_characters, visible

SOURCE = json.loads(resources.files("nbagent.safety").joinpath("hidden.json").read_text(encoding="utf-8"))
FRONTEND = Path(__file__).resolve().parents[2] / "frontend" / "src" / "hidden.ts"


def _code_points() -> set[int]:
    out: set[int] = set()
    for spans in SOURCE["kinds"].values():
        for span in spans:
            first, _, last = span.partition("-")
            out.update(range(int(first, 16), int(last or first, 16) + 1))
    return out


def test_the_kernel_shows_exactly_the_characters_of_the_list():
    listed = _code_points()
    for cp in range(0x110000):
        if 0xD800 <= cp <= 0xDFFF or cp == 0x0D:
            continue
        assert has_hidden_characters(chr(cp)) == (cp in listed), hex(cp)
    assert visible("a\u202eb")[0] == "a⟨U+202E RIGHT-TO-LEFT OVERRIDE⟩b"


def test_prose_keeps_only_the_kinds_the_list_says():
    for kind, spans in SOURCE["kinds"].items():
        ch = chr(int(spans[0].partition("-")[0], 16))
        kept = visible(f"a{ch}b", prose=True)[0] == f"a{ch}b"
        assert kept == (kind in SOURCE["prose_keeps"]), kind


def test_the_page_list_is_generated_from_the_same_file():
    made = FRONTEND.read_text(encoding="utf-8")
    assert "generated from nbagent/safety/hidden.json" in made
    for kind, spans in SOURCE["kinds"].items():
        line = re.search(rf"^  {kind}: '([^']*)',$", made, re.M)
        assert line is not None, kind
        for span in spans:
            for end in span.split("-"):
                n = int(end, 16)
                assert (f"\\u{{{n:x}}}" if n > 0xFFFF else f"\\u{n:04x}") in line.group(1), (kind, end)
