"""Pages the site gathers from elsewhere, so nobody lists them by hand:

- the tutorials are the notebooks in `notebooks/`, each a page `tutorials/<name>.md` written from the notebook
  as it is saved (its Markdown cells as Markdown, its code cells as code blocks), with the notebook itself
  beside it to download. The notebooks are saved without outputs, and the build executes nothing (no kernel
  starts); the test suite executes every notebook headless (`tests/jupyter/test_notebooks.py`), and
  `./dev quickstart` runs the first one. Written as Markdown, a tutorial's links and headings are checked by
  the strict build like every other page's.
- every `docs/notes/*.md` (short notes that come with a change) joins the "Notes" section of the menu, in
  the order of their names.
"""

from __future__ import annotations

import json
from pathlib import Path

from mkdocs.structure.files import File

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = ROOT / "notebooks"
NOTES = ROOT / "docs" / "notes"


def on_config(config):
    notes = [f"notes/{p.name}" for p in sorted(NOTES.glob("*.md")) if p.name != "index.md"]
    for entry in config["nav"] or []:
        if isinstance(entry, dict) and "Notes" in entry:
            entry["Notes"] = ["notes/index.md", *notes]
    return config


def _source(cell: dict) -> str:
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else source


def notebook_markdown(path: Path) -> str:
    """A notebook as a page: Markdown cells as they are, code cells as Python code blocks, a line after the
    title saying where the notebook is and how to run it."""
    notebook = json.loads(path.read_text(encoding="utf-8"))
    parts = []
    for cell in notebook["cells"]:
        source = _source(cell).strip("\n")
        if cell["cell_type"] == "markdown":
            parts.append(source)
        elif cell["cell_type"] == "code" and source.strip():
            fence = "```"
            while fence in source:
                fence += "`"
            parts.append(f"{fence}python\n{source}\n{fence}")
    note = (f'!!! note "A notebook"\n    This page is `notebooks/{path.name}` as it is saved, without outputs: '
            f"[download it]({path.name}), or run it with `./dev lab notebooks/{path.name}` to see its live views.")
    if parts and parts[0].startswith("# "):
        title, _, rest = parts[0].partition("\n")
        parts[0:1] = [title, note, rest.strip("\n")] if rest.strip() else [title, note]
    else:
        parts.insert(0, note)
    return "\n\n".join(p for p in parts if p) + "\n"


def on_files(files, config):
    for notebook in sorted(NOTEBOOKS.glob("*.ipynb")):
        files.append(File.generated(config, f"tutorials/{notebook.stem}.md", content=notebook_markdown(notebook)))
        files.append(File.generated(config, f"tutorials/{notebook.name}", abs_src_path=str(notebook)))
    return files
