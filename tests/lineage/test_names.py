"""What code does with names, from its syntax alone."""

from __future__ import annotations

import pytest

from nbagent.lineage import code_names


def test_reading_before_binding_counts_binding_first_does_not():
    names = code_names("df = df.dropna()\nprint(df.shape)\ntotal = 0\ntotal = total + 1\n")
    assert names.binds == ("df", "total")
    assert names.reads == ("df", "print")  # `total` is this code's own by then


def test_reads_are_in_the_order_first_read():
    assert code_names("c = b + a\nd = a + e").reads == ("b", "a", "e")


def test_functions_read_their_free_names_when_defined_but_not_their_own():
    names = code_names("def helper(frame, k=DEFAULT):\n    import math\n    local = frame.x * SCALE\n"
                       "    return math.floor(local) + later\nlater = 1\n")
    assert names.binds == ("helper", "later")
    assert names.reads == ("DEFAULT", "SCALE")  # `later` is bound by this code; math, local, frame are the function's


def test_comprehensions_lambdas_and_classes():
    names = code_names("xs = [f(v) for v in data if v > cut]\nkey = lambda r: r[col]\n"
                       "class Model(Base):\n    size = WIDTH\n    def go(self):\n        return self.size * SPEED\n")
    assert names.reads == ("f", "data", "cut", "col", "Base", "WIDTH", "SPEED")
    assert names.binds == ("xs", "key", "Model")


@pytest.mark.parametrize("code, name", [
    ("df['x'] = 1", "df"),
    ("df.loc[df.a > 0, 'b'] = 0", "df"),
    ("cfg.value = 3", "cfg"),
    ("items.append(4)", "items"),
    ("d.update(other)", "d"),
    ("frame.drop(columns=['a'], inplace=True)", "frame"),
    ("del store['k']", "store"),
    ("counts += [1]", "counts"),
    ("model.fit(X, y)", "model"),
    ("arr[0, :] = 0", "arr"),
])
def test_in_place_changes(code, name):
    names = code_names(code)
    assert name in names.mutates and name in names.reads


def test_calls_that_only_look_change_nothing():
    names = code_names("print(df.describe())\ndf.head()\nlen(items)\nframe.drop(columns=['a'])")
    assert names.mutates == () and names.binds == ()


def test_imports_deletes_and_targets():
    names = code_names("import numpy as np, os.path\nfrom math import pi as PI\nfor i, (a, b) in pairs: pass\n"
                       "with open(p) as fh: pass\nif (n := len(xs)) > 1: pass\ndel old\ntry:\n    1/0\n"
                       "except Exception as err:\n    pass\n")
    assert names.binds == ("np", "os", "PI", "i", "a", "b", "fh", "n", "err")
    assert names.deletes == ("old",)
    assert names.reads == ("pairs", "open", "p", "len", "xs", "Exception")


@pytest.mark.parametrize("code", ["globals()['x'] = 1", "exec('x = 1')", "vars()['y'] = 2", "from os import *",
                                  "get_ipython().run_line_magic('time', 'x = 1')", "setattr(cfg, 'a', 1)"])
def test_code_that_reaches_names_unseen_is_opaque(code):
    assert code_names(code).opaque


def test_code_that_does_not_parse():
    names = code_names("def (:")
    assert names.syntax_error and names.opaque and names.binds == ()
