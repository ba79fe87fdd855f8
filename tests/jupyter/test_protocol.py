"""The comm protocols are written once (nbagent/jupyter/{notebook,panel}/protocol.json): the kernel checks what
the page sends against them, the page's TypeScript types are generated from them (test_frontend.py runs the
check), and the kernel's own messages are checked against them wherever the tests play the page
(protocols.py: the fake notebook, the panel's page in panel/test_comm.py and security/test_panel_comm.py).

Here: the schemas are sound, every op the kernel sends or answers has its shape and none is left over, and
the panel's gate (`check`) says of a message what the schema says, in words."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import jsonschema
import pytest

from nbagent.jupyter.panel.hub import PanelHub, check
from nbagent.jupyter.panel.prompts import KINDS
from nbagent.jupyter.protocol import ROOMS, definition, problem, request_ops, schema

PACKAGE = Path(__file__).resolve().parents[2] / "nbagent" / "jupyter"


@pytest.mark.parametrize("room", ROOMS)
def test_each_schema_is_a_valid_json_schema_whose_refs_resolve(room):
    whole = schema(room)
    jsonschema.Draft202012Validator.check_schema(whole)
    refs = set(re.findall(r'"\$ref": "#/\$defs/([A-Za-z]+)"', (PACKAGE / room / "protocol.json").read_text()))
    assert refs and refs <= set(whole["$defs"]), refs - set(whole["$defs"])


def _notebook_ops_sent() -> set[str]:
    """Every op the kernel's code asks the page for: `<frontend>.request("op", ...)` calls, read from the source."""
    ops = set()
    for path in (PACKAGE / "notebook").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "request"
                    and not (isinstance(node.func.value, ast.Name) and node.func.value.id == "shared")  # the
                    # server's shared document (document_link.py), not the page
                    and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
                ops.add(node.args[0].value)
    return ops


def test_every_op_the_kernel_asks_the_page_is_in_the_notebook_protocol_and_none_is_left_over():
    sent = _notebook_ops_sent() | {"hello"}  # the hello is written out in comm.py
    assert {"read", "insert", "edit", "delete", "run", "snapshot"} <= sent  # the scan finds them
    assert set(request_ops("notebook", "KernelRequest")) == sent
    assert set(definition("notebook", "Results")["properties"]) == sent


def test_every_op_the_panel_answers_is_in_the_panel_protocol_and_none_is_left_over():
    answered = {name.removeprefix("_op_") for name in vars(PanelHub) if name.startswith("_op_")}
    assert set(request_ops("panel", "PageRequest")) == answered
    assert set(definition("panel", "Results")["properties"]) == answered


def test_the_kinds_of_start_are_the_prompt_and_the_kinds_a_cell_prompt_makes():
    # plan: a plan-first prompt; follow: "Run this plan" with the plan as the person edited it
    assert set(definition("panel", "StartKind")["enum"]) == {"prompt", "plan", "follow", *KINDS}


GOOD = [
    {"id": 1, "op": "state"},
    {"id": 2, "op": "start", "prompt": "hi"},
    {"id": 3, "op": "start", "prompt": "", "kind": "fix", "cell": {"id": "c1", "source": "1/0", "outputs": [
        {"output_type": "error", "ename": "ZeroDivisionError", "evalue": "division by zero", "traceback": ["..."]}]}},
    {"id": 4, "op": "start", "prompt": "go", "model": None, "new": True, "resume": "20261203-132242-6bda93"},
    {"id": 5, "op": "decide", "run": "r1", "call": "c1", "digest": "ab" * 32, "choice": "always", "reason": ""},
    {"id": 6, "op": "stop", "run": "r1"},
    {"id": 7, "op": "undone", "run": "r1", "call": "c1"},
]
BAD = [
    ([], "JSON object"), ({"op": "state"}, "integer id"), ({"id": True, "op": "state"}, "integer id"),
    ({"id": 1, "op": "eval"}, "unknown request 'eval'"), ({"id": 1, "op": "_stored"}, "unknown request"),
    ({"id": 1, "op": "state", "code": "x"}, "state: unknown fields ['code']"),
    ({"id": 1, "op": "start"}, "start: prompt is missing"),
    ({"id": 1, "op": "start", "prompt": "x", "new": "yes"}, "start: new has the wrong type"),
    ({"id": 1, "op": "start", "prompt": "x" * 100_001}, "start: prompt is too long"),
    ({"id": 1, "op": "start", "prompt": "x", "kind": "shell"}, "start: kind must be one of prompt, ask, fix, explain, plan, follow"),
    ({"id": 1, "op": "start", "prompt": "", "kind": "fix"}, "start: cell is missing (this kind needs it)"),
    ({"id": 1, "op": "start", "prompt": "", "kind": "fix", "cell": None}, "start: cell has the wrong type"),
    ({"id": 1, "op": "start", "prompt": "", "kind": "fix", "cell": {"id": 5}}, "start: cell.id has the wrong type"),
    ({"id": 1, "op": "start", "prompt": "", "kind": "ask", "cell": {"id": "c", "outputs": [{}] * 101}},
     "start: cell.outputs is too long"),
    ({"id": 1, "op": "decide", "run": "r", "call": "c", "digest": "d", "choice": "yes"},
     "decide: choice must be one of approve, deny, always"),
    ({"id": 1, "op": "decide", "run": "r", "call": "c", "choice": "approve"}, "decide: digest is missing"),
    ({"id": 1, "op": "decide", "run": "r", "call": "c", "digest": "d", "choice": "approve", "reason": 1},
     "decide: reason has the wrong type"),
]


def test_the_panel_gate_takes_what_the_schema_takes_and_says_why_it_refuses_the_rest():
    whole = jsonschema.Draft202012Validator({**schema("panel"), "$ref": "#/$defs/PageRequest"})
    for message in GOOD:
        assert check(message) is None, message
        assert whole.is_valid(message)
    for message, why in BAD:
        assert check(message) == why if why.startswith(("start", "state", "decide")) else why in check(message)
        assert not whole.is_valid(message), message


def test_problem_says_where_in_a_nested_message():
    reply = {"id": 1, "ok": True, "result": {"cell": {"id": "a", "index": "0", "cell_type": "code", "source": "",
                                                       "nbagent": None}, "status": "ok"}}
    assert problem("notebook", "PageReply", reply) is not None
    assert problem("notebook", "RunResult", reply["result"]) == "cell.index has the wrong type"


# -- the kernel's check (protocol_check.py) against jsonschema, the reference ---------------------------------
def _example(spec: dict, whole: dict) -> object:
    """A message the definition takes: required fields filled, the first branch of a union."""
    if "$ref" in spec:
        return _example(whole["$defs"][spec["$ref"].rsplit("/", 1)[1]], whole)
    if "const" in spec or "enum" in spec:
        return spec.get("const", (spec.get("enum") or [None])[0])
    if "anyOf" in spec or "oneOf" in spec:
        return _example((spec.get("anyOf") or spec["oneOf"])[0], whole)
    kind = spec.get("type")
    kind = kind[0] if isinstance(kind, list) else kind
    if kind == "object":
        out = {k: _example(spec["properties"].get(k, {}), whole) for k in spec.get("required", [])}
        if "if" in spec:  # the condition's fields too, and what it then needs
            for k, v in spec["if"].get("properties", {}).items():
                out[k] = _example(v, whole)
            for k in spec["then"].get("required", []):
                out[k] = _example(spec["then"]["properties"][k], whole)
        return out
    return {"array": [], "string": "x" * spec.get("minLength", 1), "integer": spec.get("minimum", 1),
            "number": 1.5, "boolean": True, "null": None}.get(kind, "x")


WRONG = [None, True, 0, -1, 1.0, 2.5, "", "x", "nope", "x" * 300_000, [], [{}] * 101, {}, {"x": 1}]


def _messages(spec: dict, whole: dict) -> list:
    """The example and its mutations: each field dropped, set to each wrong value, an unknown field added."""
    good = _example(spec, whole)
    out = [good, *WRONG]
    if isinstance(good, dict):
        out.append({**good, "smuggled": 1})
        resolved = spec
        while "$ref" in resolved:
            resolved = whole["$defs"][resolved["$ref"].rsplit("/", 1)[1]]
        for name in {*good, *resolved.get("properties", {})}:
            out.append({k: v for k, v in good.items() if k != name})
            out += [{**good, name: value} for value in WRONG]
            if "kind" in good:  # each kind, with and without its cell
                out += [{**good, "kind": kind} for kind in definition("panel", "StartKind")["enum"]]
    return out


@pytest.mark.parametrize("room", ROOMS)
def test_the_kernels_check_says_what_jsonschema_says_word_for_word(room):
    from nbagent.jupyter import protocol
    from nbagent.jupyter.protocol_check import Check

    whole = schema(room)
    checked = 0
    for name, spec in whole["$defs"].items():
        ours = Check({**whole, "$ref": f"#/$defs/{name}"})
        reference = jsonschema.Draft202012Validator({**whole, "$ref": f"#/$defs/{name}"})
        for message in _messages(spec, whole):
            mine, theirs = list(ours.iter_errors(message)), list(reference.iter_errors(message))
            assert bool(mine) == bool(theirs), (name, str(message)[:200])
            if theirs:
                words = [protocol._words(protocol._pick(e), spec) for e in (mine, theirs)]
                assert words[0] == words[1], (name, str(message)[:200])
            checked += 1
    assert checked > 1000


def test_a_keyword_the_check_does_not_know_is_refused_not_skipped():
    from nbagent.jupyter.protocol_check import Check, SchemaError

    with pytest.raises(SchemaError, match="uniqueItems"):
        Check({"$defs": {"A": {"type": "array", "uniqueItems": True}}, "$ref": "#/$defs/A"})
    assert not Check({"type": "array", "maxItems": 1}).is_valid([1, 2])


def test_the_kernel_checks_the_page_without_importing_jsonschema():
    import subprocess
    import sys

    code = ("import sys; from nbagent.jupyter.panel.hub import check; "
            "assert check({'id': 1, 'op': 'start', 'prompt': 1}) == 'start: prompt has the wrong type'; "
            "print('jsonschema' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          cwd=PACKAGE.parents[1])
    assert done.returncode == 0 and done.stdout.strip() == "False", done.stdout + done.stderr
