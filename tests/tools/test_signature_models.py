"""A tool's parameter model is made once for each signature (`nbagent.tools.schemas._MODELS`), and sharing it
never changes what a tool accepts, its defaults, or the schema another tool sends. (No `from __future__ import
annotations` here: the tools' annotations are objects, so each signature resolves and can be a key.)"""

from typing import Literal

import pydantic
import pytest

from nbagent import tool, toolbox
from nbagent.tools import schemas


def test_every_tool_of_the_toolbox_is_built_once(tmp_path):
    """Each set the toolbox makes (every `%agent` run makes one) reuses the models of the last: a parameter type
    made anew in each call of a factory (`Annotated[int, Field(...)]` written in the tool's signature) would
    make every set build its models again (21 ms a set, measured, against 5)."""
    first = toolbox.all(tmp_path)
    second = toolbox.all(tmp_path)
    assert [t.name for t in first] == list(toolbox.TOOL_NAMES)
    for a, b in zip(first, second, strict=True):
        if a._model is not None:
            assert b._model is a._model, f"{a.name}: its parameter model is built again for every set"
        assert b.parameters == a.parameters
        assert b.parameters is not a.parameters


def test_defaults_that_compare_equal_are_not_confused():
    @tool(name="flag")
    def as_int(x: int = 0) -> int:
        return x

    @tool(name="flag")
    def as_bool(x: int = False) -> int:  # type: ignore[assignment]
        return x

    assert as_int.validate({})["x"] is not False
    assert as_bool.validate({})["x"] is False
    assert as_int._model is not as_bool._model

    @tool(name="sign")
    def positive(x: float = 0.0) -> float:
        return x

    @tool(name="sign")
    def negative(x: float = -0.0) -> float:
        return x

    assert str(positive.validate({})["x"]) == "0.0" and str(negative.validate({})["x"]) == "-0.0"

    def literal(value):
        @tool(name="lit")
        def lit(x: Literal[value] = value) -> object:  # type: ignore[valid-type]
            return x

        return lit

    zero, false = literal(0), literal(False)
    assert zero._model is not false._model
    assert zero.validate({"x": 0})["x"] == 0
    assert false.validate({"x": False})["x"] is False


def test_a_schema_changed_by_one_tool_does_not_change_another():
    def make():
        @tool(name="same")
        def same(a: int, b: str = "x") -> str:
            """Same.

            Args:
                a: the number.
            """
            return b * a

        return same

    one, two = make(), make()
    assert one._model is two._model
    one.parameters["properties"]["a"]["description"] = "changed"
    one.parameters["required"].append("b")
    assert two.parameters["properties"]["a"]["description"] == "the number."
    assert two.parameters["required"] == ["a"]
    assert make().parameters["properties"]["a"]["description"] == "the number."


def test_other_descriptions_names_and_types_make_other_models():
    class Point(pydantic.BaseModel):
        x: int

    def with_point():
        class Point(pydantic.BaseModel):  # another class of the same name
            y: str

        return Point

    other_point = with_point()

    @tool(name="p")
    def p1(point: Point) -> str:
        return "p"

    @tool(name="p")
    def p2(point: other_point) -> str:  # type: ignore[valid-type]
        return "p"

    @tool(name="q")
    def q(point: Point) -> str:
        """Q.

        Args:
            point: where.
        """
        return "q"

    assert p1._model is not p2._model
    assert p1.validate({"point": {"x": 1}})["point"].x == 1
    with pytest.raises(schemas.ArgumentsError):
        p2.validate({"point": {"x": 1}})
    assert q._model is not p1._model
    assert q.parameters["properties"]["point"].get("description") == "where."


def test_mutable_and_field_defaults_are_built_anew_and_keep_their_values():
    def make(default):
        @tool(name="lists")
        def lists(items: list[int] = default) -> int:  # noqa: B006 - the point of the test
            return len(items)

        return lists

    a, b = make([1]), make([1, 2])
    assert a._model is not b._model
    assert a.validate({})["items"] == [1]
    assert b.validate({})["items"] == [1, 2]

    def field(limit):
        @tool(name="limited")
        def limited(n: int = pydantic.Field(1, le=limit)) -> int:
            return n

        return limited

    five, ten = field(5), field(10)
    with pytest.raises(schemas.ArgumentsError):
        five.validate({"n": 7})
    assert ten.validate({"n": 7})["n"] == 7


def test_annotations_left_unresolved_are_never_keys():
    """Where `typing.get_type_hints` fails, annotations stay as written: a string may name another type in
    another module, so such a signature is never a key."""
    def late(a: "Later", b: int) -> int:  # noqa: F821 - a name defined nowhere
        return 1

    fields, _, _, spec = schemas._signature_fields(late, "late", {}, None)
    assert spec is None and set(fields) == {"a", "b"}
    assert schemas._cache_key("late", spec) is None


def test_the_kept_models_are_bounded(monkeypatch):
    monkeypatch.setattr(schemas, "_MODELS", {})
    monkeypatch.setattr(schemas, "_MODELS_KEPT", 8)
    made = []
    for i in range(20):
        made.append(tool(name=f"t{i}")(lambda a: a))
        assert len(schemas._MODELS) <= 8
    assert made[-1]._model is tool(name="t19")(lambda a: a)._model  # the newest is kept
    assert made[0]._model is not tool(name="t0")(lambda a: a)._model  # the oldest went


def test_tools_made_in_many_threads_at_the_bound(monkeypatch):
    """Threads (a cluster worker's, a notebook's) making tools at once while the oldest models go."""
    import threading

    monkeypatch.setattr(schemas, "_MODELS", {})
    monkeypatch.setattr(schemas, "_MODELS_KEPT", 4)
    errors: list[BaseException] = []

    def make(offset: int) -> None:
        try:
            for i in range(60):
                made = tool(name=f"n{(offset + i) % 12}")(lambda a: a)
                assert made.validate({"a": 1})["a"] == 1
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=make, args=(k,)) for k in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert len(schemas._MODELS) <= 4 + len(threads)  # a thread may add between another's check and its own add
