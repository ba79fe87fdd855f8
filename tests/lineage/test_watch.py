"""A watch around one run of code: what it assigned, rebound, changed in place, deleted and read."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from nbagent.lineage import NamespaceWatch, StateChange, _fingerprint, fingerprint


def run(ns: dict, code: str, **options) -> StateChange:
    watch = NamespaceWatch(ns, code, **options)
    error = None
    try:
        exec(code, ns)
    except Exception as exc:  # the code's own failure: the watch still says what it changed
        error = exc
    return watch.finish(error)


@pytest.fixture
def ns() -> dict:
    return {"__name__": "__main__", "df": pd.DataFrame({"a": [1.0, None, 3.0]}), "items": [1, 2], "cfg": {"k": 1},
            "arr": np.zeros(4), "n": 1}


def test_assigned_rebound_deleted(ns):
    change = run(ns, "new = 1\ndf = df.dropna()\ndel items")
    assert change.assigned == ("new",) and change.rebound == ("df",) and change.deleted == ("items",)
    assert change.mutated == () and change.read == ("df",) and change.ok


@pytest.mark.parametrize("code, name", [
    ("df['b'] = 2", "df"), ("items.append(3)", "items"), ("cfg['k'] = 2", "cfg"), ("arr[1] = 5", "arr"),
    ("df.fillna(0, inplace=True)", "df"), ("items.sort(reverse=True)", "items"),
])
def test_in_place_changes_of_the_common_containers(ns, code, name):
    change = run(ns, code)
    assert change.mutated == (name,) and change.rebound == () and change.exact


def test_a_change_made_inside_a_function_of_the_notebook(ns):
    exec("def grow(x):\n    items.append(x)\n    return len(items)\n", ns)
    change = run(ns, "size = grow(3)")
    assert change.mutated == ("items",)  # followed through the function's globals
    assert change.read == ("grow", "items")


def test_looking_changes_nothing(ns):
    change = run(ns, "print(df.describe())\nitems[0]\ncfg.get('k')")
    assert not change.changed_anything and change.read == ("df", "items", "cfg")


def test_a_failing_run_says_what_it_changed_before_it_failed(ns):
    change = run(ns, "items.append(9)\ndf['c'] = df.missing")
    assert not change.ok and change.mutated == ("items",)


def test_hidden_names_and_underscores_are_not_reported(ns):
    change = run(ns, "Out = {}\n_tmp = 3\nx = 1", hidden={"Out"})
    assert change.assigned == ("x",)


def test_a_setting_a_value_to_itself_is_no_change(ns):
    assert not run(ns, "cfg['k'] = cfg['k']").changed_anything  # watched whole: the same content


def test_big_values_are_sampled_and_the_codes_own_statements_decide(ns, monkeypatch):
    monkeypatch.setattr(_fingerprint, "WHOLE_BYTES", 1024)
    ns["big"] = pd.DataFrame({"a": np.arange(10_000, dtype=float)})
    watch = NamespaceWatch(ns, "big.iloc[5003, 0] = -1.0")
    assert not watch.prints["big"].exact
    exec("big.iloc[5003, 0] = -1.0", ns)
    change = watch.finish()
    assert change.mutated == ("big",) and not change.exact  # the sample misses row 5003; the statement says it
    # the same change made where neither the sample nor the syntax sees it is missed, and `exact` says so
    exec("def touch():\n    big.iloc[5005, 0] = -2.0\n", ns)
    change = run(ns, "touch()")
    assert change.mutated == () and change.exact is False


def test_whole_values_within_the_budget_are_exact():
    frame = pd.DataFrame({"a": range(1000), "b": ["x"] * 1000})
    before = fingerprint(frame)
    frame.iloc[500, 1] = "y"
    after = fingerprint(frame)
    assert before.exact and after.exact and before.digest != after.digest
    assert fingerprint(3) is None and fingerprint("text") is None and fingerprint((1, "a")) is None


def test_an_object_that_learns_in_place():
    class Model:
        def fit(self, data):
            self.coef_ = sum(data)

    model = Model()
    ns = {"__name__": "__main__", "model": model, "data": [1, 2]}
    change = run(ns, "model.fit(data)")
    assert change.mutated == ("model",) and not change.exact


def test_opaque_code_watches_every_container(ns):
    change = run(ns, "globals()['items'].append(5)")
    assert change.mutated == ("items",)


def test_round_trip_through_json(ns):
    change = run(ns, "items.append(1)\nz = df")
    back = StateChange.from_json(change.to_json(), code=change.code)
    assert (back.assigned, back.mutated, back.read, back.ok) == (change.assigned, change.mutated, change.read, True)
    forged = StateChange.from_json({"assigned": ["ok_name", "x; import os", 3], "ok": "yes", "tool": None})
    assert forged.assigned == ("ok_name",) and forged.tool == "python"
