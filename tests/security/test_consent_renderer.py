"""Every consent view uses one renderer (SECURITY.md invariant 4; `nbagent.safety.shown`).

The mechanism, in one sentence: every value nbagent shows a person (and so every value a consent surface
shows) reaches the page or the terminal through `nbagent.safety.shown` (`shown` for text, `shown_html` for
HTML), which shows every character of the one list of hidden characters (nbagent/safety/hidden.json, from
which the page's list is made too) as `⟨U+XXXX NAME⟩`, escapes markup and never cuts the value.

Checked three ways, none of them a hand list that a new surface could stay off:
- no module of nbagent but the renderer and the sanitizer escapes HTML itself (every module is scanned);
- the consent surfaces are discovered from the code (a module whose strings ask for a decision or that makes
  grant labels), each must have a case here, and each case draws its surface with hostile values;
- no page module but the generated list holds a list of hidden characters of its own.
"""

from __future__ import annotations

import ast
import asyncio
import functools
import json
import re
from pathlib import Path
from types import SimpleNamespace

import pytest

import nbagent

PACKAGE = Path(nbagent.__file__).resolve().parent
FRONTEND = PACKAGE.parent / "frontend" / "src"
RENDERER = {"safety/shown.py", "safety/sanitize.py"}

RLO = "\u202e"
HOSTILE = f"rm -rf ~{RLO}gpj.txt<b onmouseover=alert(1)>x</b>\u200b"
TAIL = "END-OF-VALUE"
LONG = "a" * 5000 + TAIL


@functools.cache
def _modules() -> dict[str, ast.Module]:
    """Every module of the package, parsed once per test process (the trees are only read)."""
    return {p.relative_to(PACKAGE).as_posix(): ast.parse(p.read_text(encoding="utf-8"))
            for p in sorted(PACKAGE.rglob("*.py"))}


def _escapes_html_itself(tree: ast.Module) -> list[int]:
    """Lines where a module escapes HTML without the renderer (`html.escape`, `from html import escape`,
    markupsafe or saxutils' escape)."""
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr == "escape" and getattr(node.value, "id", "") in (
                "html", "markupsafe", "saxutils"):
            lines.append(node.lineno)
        if isinstance(node, ast.ImportFrom) and node.module in ("html", "markupsafe", "xml.sax.saxutils") and any(
                a.name == "escape" for a in node.names):
            lines.append(node.lineno)
    return lines


def test_no_module_but_the_renderer_escapes_html_itself():
    found = {path: lines for path, tree in _modules().items()
             if path not in RENDERER and (lines := _escapes_html_itself(tree))}
    assert found == {}, f"these escape HTML without nbagent.safety.shown (hidden characters would pass raw): {found}"


# -- the consent surfaces, discovered -------------------------------------------------------------------
_ASKS = re.compile(r"Needs your approval|needs approval \(|data-nba-digest|data-nba-consent|Always allow|Approve all|"
                   r"Trust these|Look closely", re.I)


def _docstrings(tree: ast.Module) -> set[int]:
    return {id(node.value) for node in ast.walk(tree) if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)}


@functools.cache
@functools.cache
def consent_surfaces() -> frozenset[str]:
    """Modules that draw a consent: a string of theirs (not a docstring) asks for a decision or binds one, or
    they make grant labels (what an "Always allow" button says). Found once per test process."""
    found = set()
    for path, tree in _modules().items():
        docs = _docstrings(tree)
        asks = any(isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs
                   and _ASKS.search(n.value) for n in ast.walk(tree))
        labels = any(isinstance(n, ast.Call) and getattr(n.func, "id", None) == "GrantLabel" for n in ast.walk(tree))
        if asks or labels:
            found.add(path)
    return frozenset(found)


def _check_text(text: str, *, whole: bool = True) -> None:
    assert RLO not in text and "\u200b" not in text, "a hidden character reached the person raw"
    assert "⟨U+202E" in text and "⟨U+200B" in text, "a hidden character was removed instead of shown"
    if whole:
        assert TAIL in text, "the value was cut"


def _check_html(markup: str, *, whole: bool = True) -> None:
    _check_text(markup, whole=whole)
    assert "<b onmouseover" not in markup and "&lt;b onmouseover" in markup, "markup was not escaped"


def _request(**extra):
    args = {"command": HOSTILE, "long": LONG}
    return SimpleNamespace(call=SimpleNamespace(id="call_1"), name=f"shell{RLO}\u200b", arguments=args,
                           reason=f"runs {HOSTILE}", **extra)


def _label():
    from nbagent.calls.grants import GrantLabel

    return GrantLabel(f"shell {HOSTILE} {LONG}", f"shell: exactly {HOSTILE} {LONG}", HOSTILE, "command")


def case_grants(monkeypatch, tmp_path):
    from nbagent.calls.grants import label_for

    for kind in ("command", "code", "path", "pattern"):
        label = label_for(SimpleNamespace(name=f"tool{RLO}\u200b"), HOSTILE + LONG, kind)
        _check_text(label.short, whole=kind != "code")  # code's short label counts lines; its full shows all
        _check_text(label.full)


def case_approval_panel(monkeypatch, tmp_path):
    W = pytest.importorskip("ipywidgets")
    from nbagent.jupyter.live import approval_panel

    monkeypatch.setattr(approval_panel, "grant_label", lambda request: _label())
    panel = approval_panel.ApprovalPanel(lambda: None, lambda reason: None, lambda: None)
    panel.render(W.VBox(), SimpleNamespace(request=_request(), digest="d" * 16), "run_1")
    _check_html(panel._text.value, whole=False)
    _check_text(panel.buttons["always"].description)
    _check_text(panel.buttons["always"].tooltip)


def case_batch_view(monkeypatch, tmp_path):
    pytest.importorskip("ipywidgets")
    from nbagent.jupyter.live.batch_view import BatchView

    view = SimpleNamespace(batch=SimpleNamespace(results=[SimpleNamespace(label=HOSTILE)], id="b1"),
                           digest=lambda pending: "d" * 16, _hand=lambda *a: None)
    pending = SimpleNamespace(index=0, request=_request(), grant=_label())
    row = BatchView._approval_row(view, pending)
    question, buttons = row.children
    _check_html(question.value)
    assert "Look closely" in question.value
    like = [b for b in buttons.children if "nba-always" in b._dom_classes]
    assert like, "the batch's Approve all button is missing"
    _check_text(like[0].description)
    _check_text(like[0].tooltip)


def case_text_view(monkeypatch, tmp_path):
    from nbagent.jupyter.live import text

    asked = []
    monkeypatch.setattr("builtins.input", lambda prompt: asked.append(prompt) or "n")
    monkeypatch.setattr(text, "grant_label", lambda request: _label())
    asyncio.run(text.TextView.ask(SimpleNamespace(), _request()))
    _check_text(asked[0])


def case_trust_prompt(monkeypatch, tmp_path):
    pytest.importorskip("ipywidgets")
    from nbagent.jupyter.session.consent import TrustPrompt
    from nbagent.mcp import workspace_configs

    (tmp_path / ".mcp.json").write_text(json.dumps({"mcpServers": {
        "srv": {"command": "python", "args": [HOSTILE, LONG], "env": {"X": "1"}},
        "web": {"url": f"https://example.com/{HOSTILE}{LONG}"}}}))
    prompt = TrustPrompt(workspace_configs(tmp_path)[0])
    _check_html(prompt.text.value)


def case_call_row(monkeypatch, tmp_path):
    from nbagent.render.calls import call_inner_html

    markup = call_inner_html(None, name=f"shell{RLO}\u200b", partial=_request().arguments, waiting=True)
    _check_html(markup)
    assert "Look closely" in markup


CASES = {
    "calls/grants.py": case_grants,
    "jupyter/live/approval_panel.py": case_approval_panel,
    "jupyter/live/batch_view.py": case_batch_view,
    "jupyter/live/text.py": case_text_view,
    "jupyter/session/consent.py": case_trust_prompt,
    "render/calls.py": case_call_row,
    # draws no values: it records a decision taken elsewhere ("always allowed in the notebook")
    "jupyter/live/call_row.py": None,
    "render/base.py": None,  # the status word "needs approval"
}


def test_every_consent_surface_found_in_the_code_has_a_case():
    missing = consent_surfaces() - set(CASES)
    assert not missing, f"consent surfaces with no case here (add one that draws it with hostile values): {missing}"


@pytest.mark.parametrize("surface", sorted(path for path, case in CASES.items() if case is not None))
def test_every_consent_surface_shows_values_through_the_one_renderer(surface, monkeypatch, tmp_path):
    assert surface in consent_surfaces(), f"{surface} no longer draws a consent: take it off CASES"
    CASES[surface](monkeypatch, tmp_path)


def test_no_page_module_keeps_a_list_of_hidden_characters_of_its_own():
    own = [p.relative_to(FRONTEND).as_posix() for p in FRONTEND.rglob("*.ts")
           if p.name not in ("hidden.ts",) and not p.name.endswith(".test.ts")
           and re.search(r"\\u(?:200[b-f]|202[a-e]|206[0-9]|feff)", p.read_text(encoding="utf-8"), re.I)]
    assert own == [], f"these page modules list hidden characters themselves (use src/shown.ts): {own}"
    for module in ("panel/diff.ts", "panel/review.ts", "panel/decisions.ts", "codeblocks.ts"):
        assert "from '../shown'" in (FRONTEND / module).read_text() or "from './shown'" in (FRONTEND / module).read_text()
