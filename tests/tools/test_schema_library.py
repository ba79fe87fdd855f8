"""`import_jsonschema()`: jsonschema imported without building `rfc3987_syntax`'s parsers, with the same
format checks (in a fresh process: the point is what a process's first import does)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest

pytestmark = pytest.mark.skipif(importlib.util.find_spec("rfc3987_syntax") is None,
                                reason="rfc3987_syntax is not installed here (jsonschema's import is cheap then)")

CHECKS = """
fc = jsonschema.Draft202012Validator.FORMAT_CHECKER
print([fc.conforms(v, f) for v, f in [("http://example.org/ö", "iri"), ("a b", "iri"), ("../x", "iri-reference"),
                                      ("http://x y", "iri-reference"), ("http://a/", "uri")]])
"""


def _run(code: str) -> list[str]:
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    return out.stdout.splitlines()


def test_the_parsers_are_not_built_at_import_and_the_checks_answer_as_jsonschema_alone_does() -> None:
    ours = _run(
        "import sys\nfrom nbagent.tools.schema_library import import_jsonschema\njsonschema = import_jsonschema()\n"
        "print('rfc3987_syntax' in sys.modules, 'rfc3987_syntax.syntax_helpers' in sys.modules)\n" + CHECKS
        + "print('rfc3987_syntax.syntax_helpers' in sys.modules)\n"
        "import rfc3987_syntax\nprint(rfc3987_syntax.__file__ is not None, hasattr(rfc3987_syntax, 'syntax_parser'))\n")
    assert ours[0] == "False False", "the stand-in is gone and the parsers were not built by the import"
    assert ours[1] == "[True, False, True, False, True]"  # what `import jsonschema` alone answers (jsonschema 4.26)
    assert ours[2] == "True", "the first IRI check imported the real module"
    assert ours[3] == "True True", "a later import gets the real module"


def test_nbformat_after_it_and_a_plain_import_after_it_are_the_real_modules() -> None:
    out = _run(
        "import sys\nfrom nbagent.tools.schema_library import import_jsonschema\nimport_jsonschema()\n"
        "import nbformat, jsonschema\nnb = nbformat.v4.new_notebook()\nnbformat.validate(nb)\n"
        "print(jsonschema is import_jsonschema(), 'rfc3987_syntax.syntax_helpers' in sys.modules)\n")
    assert out == ["True False"]


def test_where_jsonschema_is_already_imported_it_is_that_module(monkeypatch: pytest.MonkeyPatch) -> None:
    from nbagent.tools.schema_library import import_jsonschema

    already = object()
    monkeypatch.setitem(sys.modules, "jsonschema", already)
    assert import_jsonschema() is already
