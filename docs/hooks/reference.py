"""The wings' API page renders each wing's face (`::: nbagent.<wing>`), minus the names the package's own face
(`nbagent`) already documents: those are the same objects, with their entries on `api/nbagent.md`, so the
page links them instead of rendering them a second time (which also keeps the build quick).
"""

from __future__ import annotations

import importlib
import inspect
import json
import re

PAGE = "api/wings.md"
BLOCK = re.compile(r"^::: (nbagent\.\w+)[ \t]*$", re.MULTILINE)


def documented_above(face: str) -> list[str]:
    """The names of `face.__all__` that are classes or functions `nbagent` re-exports (the very same objects)."""
    import nbagent

    module = importlib.import_module(face)
    return [n for n in module.__all__ if n in nbagent.__all__ and getattr(nbagent, n) is getattr(module, n)
            and (inspect.isclass(getattr(module, n)) or inspect.isfunction(getattr(module, n)))]


def _block(match: re.Match[str]) -> str:
    face = match.group(1)
    module = importlib.import_module(face)
    above = documented_above(face)
    members = [n for n in module.__all__ if n not in above]
    out = f"::: {face}\n    options:\n      members: {json.dumps(members)}\n"
    if above:
        links = ", ".join(f"[`{n}`](nbagent.md#nbagent.{n})" for n in above)
        out += f"\nAlso public in `{face}`, with their entries on the [`nbagent`](nbagent.md) page: {links}.\n"
    return out


def on_page_markdown(markdown: str, page, config, files) -> str:
    if page.file.src_uri != PAGE:
        return markdown
    return BLOCK.sub(_block, markdown)
