"""The documentation site builds, with warnings as errors, and says what the code says.

- The site (`mkdocs.yml`, `docs/`) builds with `mkdocs build --strict` into a temporary folder: a warning, a
  link to a missing page, an anchor that is not there, a page left out of the menu each fail the build.
- The `%agent` options page says what `%agent?` shows in a real IPython shell: the same usage, description
  and options, each with the same value and help (the page is written at build time from the magic's parser
  by `docs/hooks/agent_options.py`; this compares the result with the text a person sees).
- Every public name of the package's faces (`nbagent`, `nbagent.toolbox`, `nbagent.jupyter`, `nbagent.mcp`,
  `nbagent.sessions` and each wing's `__init__.py`) has its entry in the API pages, with its docstring.
- The README's links lead to files that exist, and its links into `docs/` to pages the site built (and to
  anchors those pages have).
"""

from __future__ import annotations

import fcntl
import functools
import html
import importlib
import inspect
import json
import os
import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

FACES = ("nbagent", "nbagent.toolbox", "nbagent.jupyter", "nbagent.mcp", "nbagent.sessions", "nbagent.safety",
         "nbagent.tools", "nbagent.budget", "nbagent.lineage", "nbagent.calls", "nbagent.providers", "nbagent.render",
         "nbagent.batch", "nbagent.agent")
"""The modules whose `__all__` is public API: the package and each wing's face."""

pytestmark = pytest.mark.timeout(600)  # one build of the whole site, shared by the tests of this module


def _env(**extra: str) -> dict[str, str]:
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1", **extra)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [env.get("PYTHONPATH")])])
    return env


reads_the_site = pytest.mark.slow
"""A test of the built site: in the full lane (the build is ~20 s of CPU); the fast lane keeps this module's tests
without it (the options read from both sides, the README's size, a note in the menu)."""


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site, built once with `mkdocs build --strict` (what `./dev docs` runs). Once for the whole run: with
    workers (`-n`), the first to ask builds it into the folder they share, under a lock the others wait on, and
    each reads its outcome (the build is ~20 s of CPU; xdist's own grouping of tests does not work with this
    pytest)."""
    base = tmp_path_factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    out, outcome = shared / "docs-site", shared / "docs-site.json"
    with open(shared / "docs-site.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not outcome.exists():
            done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file",
                                   str(ROOT / "mkdocs.yml"), "--site-dir", str(out)],
                                  check=False, cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=540)
            outcome.write_text(json.dumps({"code": done.returncode, "log": done.stdout + done.stderr}))
    built = json.loads(outcome.read_text())
    assert built["code"] == 0, f"mkdocs build --strict failed:\n{built['log']}"
    assert "WARNING" not in built["log"], built["log"]
    return out


def page(site: Path, src: str) -> Path:
    """The built HTML of the page whose source is `docs/<src>`."""
    stem = src.removesuffix(".md").removesuffix(".ipynb")
    built = site / "index.html" if stem == "index" else site / stem.removesuffix("/index") / "index.html"
    assert built.exists(), f"docs/{src} was not built ({built})"
    return built


class _Blocks(HTMLParser):
    """The article's block elements (headings, paragraphs, code blocks, cells) in order, as (tag, attributes,
    text), leaving out the menus and the headings' permalinks."""

    BLOCKS = frozenset({"h1", "h2", "h3", "h4", "p", "pre", "li", "td", "th"})
    VOID = frozenset({"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track",
                      "wbr"})

    def __init__(self) -> None:
        super().__init__()
        self.blocks: list[tuple[str, dict[str, str], str]] = []
        self._article = 0  # the depth of the open <article>, 0 outside it
        self._depth = 0
        self._current: tuple[str, dict[str, str], list[str], int] | None = None
        self._skip = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in self.VOID:
            return
        self._depth += 1
        attributes = {k: v or "" for k, v in attrs}
        if tag == "article" and not self._article:
            self._article = self._depth
        elif not self._article:
            return
        elif self._current is None and tag in self.BLOCKS:
            self._current = (tag, attributes, [], self._depth)
        elif self._current is not None and tag == "a" and "headerlink" in attributes.get("class", ""):
            self._skip = self._depth

    def handle_endtag(self, tag: str) -> None:
        if tag in self.VOID:
            return
        if self._skip == self._depth:
            self._skip = 0
        if self._current is not None and self._current[3] == self._depth:
            name, attributes, parts, _ = self._current
            self.blocks.append((name, attributes, "".join(parts)))
            self._current = None
        if self._article == self._depth:
            self._article = 0
        self._depth -= 1

    def handle_data(self, data: str) -> None:
        if self._current is not None and not self._skip:
            self._current[2].append(data)


def blocks(path: Path) -> list[tuple[str, dict[str, str], str]]:
    parser = _Blocks()
    parser.feed(path.read_text())
    return parser.blocks


def squeeze(text: str) -> str:
    """Text without whitespace: help text wraps to the terminal's width (and breaks after hyphens)."""
    return re.sub(r"\s+", "", text)


def as_shown(help_text: str) -> str:
    """Help text as a page shows it: its `code` marks are Markdown, drawn as code without the backticks."""
    return squeeze(help_text.replace("`", ""))


# --------------------------------------------------------------------------------------------------
# The site builds
# --------------------------------------------------------------------------------------------------
@reads_the_site
def test_the_site_builds_strict_with_every_page(site: Path) -> None:
    import yaml  # mkdocs' own dependency

    class Loader(yaml.SafeLoader):
        pass

    Loader.add_multi_constructor("", lambda loader, suffix, node: None)  # `!!python/name:` tags, unused here
    config = yaml.load((ROOT / "mkdocs.yml").read_text(), Loader=Loader)

    def sources(nav: object) -> list[str]:
        if isinstance(nav, str):
            return [nav]
        if isinstance(nav, list):
            return [s for item in nav for s in sources(item)]
        if isinstance(nav, dict):
            return [s for value in nav.values() for s in sources(value)]
        return []

    for src in sources(config["nav"]):
        page(site, src)
    for notebook in sorted((ROOT / "notebooks").glob("*.ipynb")):  # the tutorials are the notebooks
        built = page(site, f"tutorials/{notebook.stem}.md")
        assert (site / "tutorials" / notebook.name).read_bytes() == notebook.read_bytes()  # there to download
        text = html.unescape(re.sub(r"<[^>]+>", "", built.read_text()))
        cells = json.loads(notebook.read_text())["cells"]
        for cell in cells:  # every cell is on the page, code and words
            source = "".join(cell["source"])
            for line in source.splitlines():
                if cell["cell_type"] == "code" and line.strip():
                    assert line.strip() in text, f"{notebook.name}: {line!r} is not on its page"


# --------------------------------------------------------------------------------------------------
# The %agent options page is what %agent? shows
# --------------------------------------------------------------------------------------------------
_SHOW_HELP = """
from IPython.testing.globalipapp import start_ipython
shell = start_ipython()
shell.run_line_magic("load_ext", "nbagent")
print("=====")
print(shell.object_inspect_mime("%agent")["text/plain"])
"""


@functools.cache
def agent_help() -> str:
    """What `%agent?` shows, from a real IPython shell with the extension loaded (a process of its own)."""
    done = subprocess.run([sys.executable, "-c", _SHOW_HELP], check=False, cwd=ROOT, env=_env(COLUMNS="80"),
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    text = done.stdout.split("=====\n", 1)[1]
    assert text.startswith("Docstring:"), text[:200]
    return text.removeprefix("Docstring:").rsplit("\nFile:", 1)[0]


def parse_help(text: str) -> tuple[str, str, dict[str, tuple[list[str], str, str]]]:
    """`%agent?` as (usage, description, {first name: (names, value, help)})."""
    head, options = text.split("\noptions:\n", 1)
    head = head.strip().removeprefix("::").strip()
    usage, description = head.split("\n\n", 1)
    entries: list[list[str]] = []
    for line in options.splitlines():
        if re.match(r"^  -", line):
            invocation, _, help_text = line[2:].partition("  ")
            entries.append([invocation.strip(), help_text.strip()])
        elif line.strip():
            entries[-1][1] += "\n" + line.strip()
    parsed = {}
    for invocation, help_text in entries:
        forms = [form.split(" ", 1) for form in invocation.split(", ")]
        names = [form[0] for form in forms]
        value = forms[0][1] if len(forms[0]) > 1 else ""
        value = value[1:-1] if value.startswith("<") and value.endswith(">") else value
        parsed[names[0]] = (names, value, help_text)
    return usage, description, parsed


def parse_page(path: Path) -> tuple[str, str, dict[str, tuple[list[str], str, str]]]:
    """The options page as (usage, description, {first name: (names, value, help)})."""
    found = blocks(path)
    start = next(i for i, b in enumerate(found) if b[0] == "pre" and b[2].startswith("%agent ["))
    end = next(i for i, b in enumerate(found) if b[0] == "h2" and b[2].strip() == "Options")
    usage = found[start][2]
    description = "\n".join(text for _, _, text in found[start + 1:end])
    parsed = {}
    for i, (tag, attributes, text) in enumerate(found):
        if tag == "h3" and "agent-option" in attributes.get("class", ""):
            words = text.split()  # "--tools, -t NAME,...": the names, then the value
            names = [w.rstrip(",") for w in words if w.startswith("-")]
            value = " ".join(w for w in words if not w.startswith("-"))
            help_text = found[i + 1][2] if i + 1 < len(found) and found[i + 1][0] == "p" else ""
            parsed[names[0]] = (names, value, help_text)
    return usage, description, parsed


@reads_the_site
def test_the_options_page_is_what_agent_help_shows(site: Path) -> None:
    usage, description, options = parse_help(agent_help())
    page_usage, page_description, page_options = parse_page(page(site, "notebook/options.md"))

    assert squeeze(page_usage) == squeeze(usage)
    # the docstring's reST literal blocks ("Examples::" and an indented block) are Markdown code blocks there
    assert squeeze(page_description) == as_shown(description).replace("::", ":")
    assert list(page_options) == list(options), "the page lists other options than %agent?"
    for name, (names, value, help_text) in options.items():
        page_names, page_value, page_help = page_options[name]
        assert page_names == names, name
        assert page_value == value, name
        assert squeeze(page_help) == as_shown(help_text), name


def test_the_options_are_parsed_from_both_sides() -> None:
    """The comparison above reads each side for real (a parse that found nothing would compare nothing)."""
    usage, description, options = parse_help(agent_help())
    assert usage.startswith("%agent [--model SPEC_OR_NAME]")
    assert "Ask an LLM agent" in description
    assert options["--model"][:2] == (["--model", "-m"], "SPEC_OR_NAME")
    assert options["--resume"][1] == "[ID]" and options["--wait"][:2] == (["--wait", "-w"], "")
    assert len(options) >= 19


@reads_the_site
def test_the_settings_page_lists_every_setting(site: Path) -> None:
    from nbagent.jupyter.config import NBAgent

    rows = {text.split()[0]: text for tag, _, text in blocks(page(site, "notebook/settings.md")) if tag == "td"
            and text.startswith("NBAgent.")}
    for name, trait in NBAgent.class_traits(config=True).items():
        assert f"NBAgent.{name}" in rows, name
    text = page(site, "notebook/settings.md").read_text()
    for name, trait in NBAgent.class_traits(config=True).items():
        assert as_shown(trait.help) in squeeze(html.unescape(re.sub(r"<[^>]+>", "", text))), name


# --------------------------------------------------------------------------------------------------
# The API pages render every public name with its docstring
# --------------------------------------------------------------------------------------------------
def _first_words(doc: str) -> str:
    """The start of a docstring's first paragraph, as the page shows it (Markdown marks gone)."""
    first = re.split(r"\n\s*\n", inspect.cleandoc(doc), maxsplit=1)[0]
    parts = re.split(r"(`[^`]*`)", first)  # code is shown as written; elsewhere links and emphasis are marks
    first = "".join(p[1:-1] if p.startswith("`") else re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", p).replace("*", "")
                    for p in parts)
    return " ".join(first.split()[:8])


@reads_the_site
def test_every_public_name_has_its_reference_entry(site: Path) -> None:
    import nbagent

    api = {path: path.read_text() for path in (site / "api").rglob("index.html")}
    texts = {path: squeeze(html.unescape(re.sub(r"<[^>]+>", "", text))) for path, text in api.items()}
    missing, undocumented = [], []
    checked = 0
    for face in FACES:
        module = importlib.import_module(face)
        for name in module.__all__:
            obj = getattr(module, name)
            anchor = f'id="{face}.{name}"'
            same = face != "nbagent" and getattr(nbagent, name, None) is obj
            if same and (inspect.isclass(obj) or inspect.isfunction(obj)):
                anchor = f'id="nbagent.{name}"'  # the same object as the package's: one entry, on the nbagent page
            where = [path for path, text in api.items() if anchor in text]
            if not where:
                missing.append(f"{face}.{name}")
                continue
            doc = obj.__doc__ if inspect.isclass(obj) or inspect.isfunction(obj) else None
            if not doc or doc.startswith(f"{obj.__name__}("):  # none, or a dataclass's generated signature
                continue
            checked += 1
            if squeeze(_first_words(doc)) not in texts[where[0]]:
                undocumented.append(f"{face}.{name}: {_first_words(doc)!r}")
    assert missing == [], f"public names with no entry in docs/api/: {missing}"
    assert undocumented == [], f"entries whose docstring is not on the page: {undocumented}"
    assert checked > 100  # the docstrings really were compared


# --------------------------------------------------------------------------------------------------
# The README's links
# --------------------------------------------------------------------------------------------------
@reads_the_site
def test_the_readme_links_lead_to_real_pages(site: Path) -> None:
    readme = (ROOT / "README.md").read_text()
    links = re.findall(r"\]\(([^)\s]+)\)", readme)
    assert len(links) > 10
    docs_pages = 0
    for link in links:
        if re.match(r"^[a-z]+:", link):
            continue
        target, _, anchor = link.partition("#")
        assert (ROOT / target).exists(), f"README links to {link}, which is not in the repository"
        if target.startswith("docs/") and target.endswith(".md"):
            built = page(site, target.removeprefix("docs/"))
            docs_pages += 1
            if anchor:
                assert f'id="{anchor}"' in built.read_text(), f"README links to {link}: no such anchor"
    assert docs_pages > 10


def test_the_readme_stays_a_front_door() -> None:
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 80
    assert 'pip install "nbagent[jupyter]"' in readme and "%load_ext nbagent" in readme
    assert "./dev quickstart" in readme and "./dev test" in readme
    assert "](docs/live-view.png)" in readme


# --------------------------------------------------------------------------------------------------
# Notes join the menu by themselves
# --------------------------------------------------------------------------------------------------
def test_a_note_joins_the_menu(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sys.path.insert(0, str(ROOT / "docs" / "hooks"))
    try:
        pages = importlib.import_module("pages")
    finally:
        sys.path.remove(str(ROOT / "docs" / "hooks"))
    for name in ("index.md", "b-topic.md", "a-topic.md"):
        (tmp_path / name).write_text("# x\n")
    monkeypatch.setattr(pages, "NOTES", tmp_path)
    config = {"nav": [{"Home": "index.md"}, {"Notes": ["notes/index.md"]}]}
    assert pages.on_config(config)["nav"][1] == {"Notes": ["notes/index.md", "notes/a-topic.md", "notes/b-topic.md"]}
