"""The default instructions of notebook runs: bounded, current, and cheap to compute."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from nbagent import tool
from nbagent.jupyter.session.instructions import notebook_instructions, summarise_value, summarise_variables


class Explosive:
    def __repr__(self):  # a summary never calls repr on arbitrary objects
        raise AssertionError("repr was called")


def test_values_are_summarised_in_one_short_line():
    df = pd.DataFrame({"region": ["a"], "revenue": [1.5]})
    text = summarise_value(df)
    assert text.startswith("pandas DataFrame, 1 rows × 2 columns: region (") and text.endswith("revenue (float64)")
    assert summarise_value(3) == "int = 3" and summarise_value(None) == "NoneType = None"
    assert summarise_value("x" * 100).startswith("str of 100 characters: 'xxxxx")
    assert summarise_value({"a": 1}) == "dict of 1 item (keys: 'a')"
    assert summarise_value(Explosive()).endswith("Explosive")

    def load(path: str, limit: int = 10) -> list:
        """Load rows from a file."""

    assert summarise_value(load) == "function(path: str, limit: int = 10) -> list: Load rows from a file."


def test_the_summary_is_bounded_and_skips_hidden_private_and_module_names():
    ns = {f"v{i}": i for i in range(1000)}
    ns.update({"_private": 1, "In": [], "hidden": 2, "math": math, "m": math, "zz": Explosive()})
    text = summarise_variables(ns, hidden={"hidden"}, limit=40)
    lines = text.splitlines()
    assert lines[0] == "(961 older variables not listed)"
    assert len(lines) == 1 + 40 + 1 and len(text) < 4000
    assert "- zz: " in text and "_private" not in text and "hidden" not in text and "- In" not in text
    assert lines[-1] == "Imported modules: math, m (math)"


def test_names_imported_from_elsewhere_are_not_listed_as_the_users_variables():
    from nbagent import load_model

    def mine() -> None:
        """Made in the notebook."""

    mine.__module__ = "__main__"
    text = summarise_variables({"load_model": load_model, "tool": tool, "Path": Path, "mine": mine, "n": 1})
    assert "- mine: function() -> None: Made in the notebook." in text and "- n: int = 1" in text
    assert "- load_model" not in text and "- tool" not in text and "- Path" not in text
    assert text.splitlines()[-1] == "Imported names: load_model (nbagent), tool (nbagent), Path (pathlib)"


def test_instructions_name_the_kernel_workspace_tools_and_variables(tmp_path: Path):
    @tool
    def plot(column: str) -> None:
        """Plot a column of the data."""

    text = notebook_instructions(workspace=tmp_path, tools=[plot], namespace={"df": [1, 2]})
    assert "live Jupyter notebook" in text and str(tmp_path) in text
    assert "- plot: Plot a column of the data." in text
    assert "- df: list of 2 items" in text
    empty = notebook_instructions(workspace=tmp_path, tools=[], namespace={})
    assert "(none: answer from what you know" in empty and "(none yet)" in empty
