"""Pages the site gathers from elsewhere, so nobody lists them by hand:

- the tutorials are the notebooks in `notebooks/`, added as `tutorials/<name>.ipynb` and rendered by
  mkdocs-jupyter as they are saved. The build executes nothing (no kernel starts); the test suite executes
  every notebook headless (`tests/jupyter/test_notebooks.py`), and `./dev quickstart` runs the first one.
- every `docs/notes/*.md` (short notes that come with a change) joins the "Notes" section of the menu, in
  the order of their names.
"""

from __future__ import annotations

from pathlib import Path

from mkdocs.plugins import CombinedEvent, event_priority
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


def _tutorials() -> dict[str, Path]:
    return {f"tutorials/{notebook.name}": notebook for notebook in sorted(NOTEBOOKS.glob("*.ipynb"))}


@event_priority(100)  # before mkdocs-jupyter's own on_files, which turns .ipynb files into pages
def _add_tutorials(files, config):
    for src_uri, notebook in _tutorials().items():
        files.append(File.generated(config, src_uri, abs_src_path=str(notebook)))
    return files


@event_priority(-100)  # after it: its page wrapper computes the source path from a docs folder the file is not in
def _point_at_notebooks(files, config):
    tutorials = _tutorials()
    for file in files:
        if file.src_uri in tutorials:
            file.__dict__["abs_src_path"] = str(tutorials[file.src_uri])
    return files


on_files = CombinedEvent(_add_tutorials, _point_at_notebooks)
