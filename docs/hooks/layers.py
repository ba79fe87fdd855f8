"""The architecture page's tables of layers, read from the code when the site is built.

The line `<!-- layers: CONTRACT -->` becomes a table of that import-linter contract's layers
(`[tool.importlinter]` in `pyproject.toml`, the contracts `tests/test_layers.py` checks), top to bottom:
each module or wing of the layer, what it holds (the first paragraph of its docstring) and its rule (the
paragraph of its docstring that starts "The rule:"). Nothing is copied by hand, so the page says what the
contracts and the wings' faces say.
"""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MARKER = re.compile(r"<!-- layers: (\w+) -->")


def _contracts() -> dict[str, dict]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    return {c["id"]: c for c in config["contracts"]}


def _docstring(module: str) -> str:
    path = ROOT.joinpath(*module.split("."))
    source = path / "__init__.py" if path.is_dir() else path.with_suffix(".py")
    return ast.get_docstring(ast.parse(source.read_text())) or ""


def _paragraphs(text: str) -> list[str]:
    return [" ".join(p.split()) for p in re.split(r"\n\s*\n", text) if p.strip()]


def _cell(text: str) -> str:
    return text.replace("|", r"\|")


def layers_table(contract_id: str) -> str:
    contract = _contracts()[contract_id]
    container = contract["containers"][0]
    rows = [f"| layer (top first) | `{container}.` | what it holds | its rule |", "|---|---|---|---|"]
    for number, layer in enumerate(contract["layers"], start=1):
        independent = "|" in layer
        for name in re.split(r"\s*[|:]\s*", layer.strip()):
            doc = _paragraphs(_docstring(f"{container}.{name}"))
            holds = doc[0] if doc else ""
            rule = next((p for p in doc if p.startswith("The rule:")), "")
            kind = "folder" if ROOT.joinpath(*container.split("."), name).is_dir() else "module"
            note = " (independent of the others in its layer)" if independent else ""
            rule = rule.removeprefix("The rule:").strip() or "the contract's: only the layers below it"
            shown = f"`{name}/`" if kind == "folder" else f"`{name}`"
            rows.append(f"| {number} | {shown}{note} | {_cell(holds)} | {_cell(rule)} |")
    return "\n".join(rows)


def on_page_markdown(markdown: str, page, config, files) -> str:
    return MARKER.sub(lambda m: layers_table(m.group(1)), markdown)
