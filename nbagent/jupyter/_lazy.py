"""A room's face whose names load on first use, so that importing one module of the room does not import
the widgets of all of them (ipywidgets is imported only when a run is first shown)."""

from __future__ import annotations

import importlib
from typing import Any, Callable


def lazy_names(package: str, names: dict[str, str]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """`__getattr__` and `__dir__` for `package`, where `names` maps each public name to its module."""

    def __getattr__(name: str) -> Any:
        module = names.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(f"{package}.{module}"), name)

    def __dir__() -> list[str]:
        return sorted(names)

    return __getattr__, __dir__
