"""Bounded text forms of Python values, for the model: never megabytes, whatever the value.

`text_form` is what the model reads for a value (a DataFrame as pandas prints it with limited rows and
columns, an array with numpy's summarisation, containers through `reprlib`, anything else through its
repr, cut); `summary` is one line for a listing (type, shape, length); `inspect_text` a closer look at one
value (dtypes, head, signature, docstring). `image_of` is the picture of a value the model should see
(a matplotlib figure or axes, or anything with `_repr_png_`). None of these import pandas, numpy or
matplotlib: values are recognised by their type's module and name.

Secrets: every text here is redacted before it is cut or truncated (a key split by a cut is no longer
whole, and redaction matches whole keys or pieces of six characters or more), and `credential_holder`
says whether a value is or holds a credential by its content (`nbagent.safety.gate.value_problem`:
`os.environ`, a secret-bearing string, a table whose cells hold one, an object or mapping with an
`api_key`, `token`, `password`... field): `inspect_variable` asks before showing one.
"""

from __future__ import annotations

import inspect
import io
import reprlib
import sys
import types
from typing import Any

from ..safety.gate import piece_problem, value_problem
from ..safety.secrets import redact

__all__ = ["credential_holder", "cut", "image_of", "inspect_text", "is_figure", "summary", "text_form", "type_name"]

MAX_TEXT = 8_000


def cut(text: str, limit: int, *, what: str = "characters") -> str:
    """`text` kept to about `limit` characters: its head and tail, with a note of how much was cut."""
    if len(text) <= limit:
        return text
    text = redact(text)  # before cutting: a secret cut in two would no longer be recognised
    if len(text) <= limit:
        return text
    head = int(limit * 0.7)
    tail = limit - head
    return f"{text[:head]}\n[... {len(text) - limit:,} {what} cut ...]\n{text[-tail:] if tail else ''}"


def type_name(value: Any) -> str:
    """`DataFrame`, `ndarray`, `list`, `mymodule.Thing`."""
    cls = type(value)
    module = cls.__module__ or ""
    if module in ("builtins",) or module.startswith(("pandas", "numpy", "matplotlib", "polars")):
        return cls.__qualname__
    return f"{module}.{cls.__qualname__}" if module and module != "__main__" else cls.__qualname__


def _is(value: Any, module_prefix: str, *names: str) -> bool:
    for cls in type(value).__mro__:
        if (cls.__module__ or "").startswith(module_prefix) and cls.__name__ in names:
            return True
    return False


def is_dataframe(value: Any) -> bool:
    return _is(value, "pandas", "DataFrame")


def is_series(value: Any) -> bool:
    return _is(value, "pandas", "Series")


def is_ndarray(value: Any) -> bool:
    return _is(value, "numpy", "ndarray")


def is_figure(value: Any) -> bool:
    return _is(value, "matplotlib", "Figure") and hasattr(value, "savefig")


def is_axes(value: Any) -> bool:
    return _is(value, "matplotlib", "Axes", "_AxesBase") and hasattr(value, "get_figure")


class _RedactingRepr(reprlib.Repr):
    """reprlib, redacting strings and reprs before it shortens them (it keeps their two ends)."""

    def repr_str(self, x: str, level: int) -> str:
        return super().repr_str(redact(x), level)

    def repr_instance(self, x: Any, level: int) -> str:
        try:
            text = redact(repr(x))
        except Exception:
            return super().repr_instance(x, level)
        if len(text) > self.maxother:
            i = max(0, (self.maxother - 3) // 2)
            text = text[:i] + "..." + text[len(text) - (self.maxother - 3 - i):]
        return text


_repr = _RedactingRepr()
_repr.maxlevel = 4
_repr.maxlist = _repr.maxtuple = _repr.maxset = _repr.maxfrozenset = _repr.maxdeque = 40
_repr.maxdict = 30
_repr.maxstring = 2000
_repr.maxother = 2000
_repr.maxlong = 200


def text_form(value: Any, limit: int = MAX_TEXT) -> str:
    """What the model reads for a value: faithful, bounded to about `limit` characters."""
    try:
        if is_dataframe(value) or is_series(value):
            return cut(redact(_pandas_text(value)), limit)
        if is_ndarray(value):
            return cut(_numpy_text(value), limit)
        if is_figure(value):
            return figure_text(value)
        if is_axes(value):
            return f"<Axes{_title(value)} in {figure_text(value.get_figure())}>"
        if isinstance(value, str):
            return cut(repr(redact(value)), limit)
        if type(value) in (list, tuple, dict, set, frozenset):
            text = _repr.repr(value)
            shown = _repr.maxdict if isinstance(value, dict) else _repr.maxlist
            return cut(text, limit) + (f"  [{len(value):,} items]" if len(value) > shown else "")
        return cut(redact(repr(value)), limit)
    except Exception as exc:  # a repr that fails must not fail the call
        return f"<{type_name(value)} object; its repr raised {type(exc).__name__}: {exc}>"


def _pandas_text(value: Any) -> str:
    import pandas as pd  # already imported: the value is a pandas object

    with pd.option_context("display.max_rows", 30, "display.min_rows", 20, "display.max_columns", 20,
                           "display.width", 160, "display.max_colwidth", 60, "display.show_dimensions", "truncate"):
        return repr(value)


def _numpy_text(value: Any) -> str:
    import numpy as np

    with np.printoptions(threshold=200, edgeitems=4, linewidth=120, precision=6):
        text = repr(value)
    if value.size > 200:
        text += f"\n[shape {value.shape}, dtype {value.dtype}]"
    return text


def _title(ax: Any) -> str:
    try:
        title = ax.get_title()
    except Exception:
        return ""
    return f" {title!r}" if title else ""


def figure_text(fig: Any) -> str:
    """`<Figure 640x480 px with 2 Axes: 'Sales', 'Costs'>`."""
    try:
        w, h = (fig.get_size_inches() * fig.dpi).round().astype(int)
        axes = fig.get_axes()
        titles = [a.get_title() for a in axes if a.get_title()]
        sup = getattr(fig, "_suptitle", None)
        label = f": {sup.get_text()!r}" if sup is not None and sup.get_text() else ""
        names = f" ({', '.join(repr(t) for t in titles[:6])})" if titles else ""
        return f"<Figure {w}x{h} px with {len(axes)} Axes{names}{label}>"
    except Exception:
        return "<Figure>"


def image_of(value: Any) -> bytes | None:
    """PNG bytes of a value the model should see as a picture (None for anything else)."""
    try:
        if is_axes(value):
            value = value.get_figure()
        if is_figure(value):
            buf = io.BytesIO()
            value.savefig(buf, format="png", bbox_inches="tight")
            return buf.getvalue()
        if isinstance(value, type):
            return None
        repr_png = getattr(type(value), "_repr_png_", None)
        if repr_png is not None:
            data = value._repr_png_()
            if isinstance(data, tuple):
                data = data[0]
            if isinstance(data, str):
                import base64

                data = base64.b64decode(data)
            return data if isinstance(data, (bytes, bytearray)) and data[:8] == b"\x89PNG\r\n\x1a\n" else None
    except Exception:
        return None
    return None


# --------------------------------------------------------------------------------------------------
# Listing and inspecting
# --------------------------------------------------------------------------------------------------
def summary(value: Any) -> str:
    """One short line about a value: its shape, length or signature, never its contents at length."""
    try:
        if is_dataframe(value):
            cols = list(value.columns[:8])
            more = f", ... {len(value.columns) - 8} more" if len(value.columns) > 8 else ""
            return f"{value.shape[0]:,} rows x {value.shape[1]:,} columns: {', '.join(map(str, cols))}{more}"
        if is_series(value):
            return f"{len(value):,} values, dtype {value.dtype}" + (f", name {value.name!r}" if value.name is not None else "")
        if is_ndarray(value):
            return f"shape {value.shape}, dtype {value.dtype}"
        if is_figure(value):
            return figure_text(value)
        if isinstance(value, str) and len(value) >= 2 and piece_problem(value):
            return f"{len(value):,} characters (not shown: it could be a slice of a credential)"
        if isinstance(value, (str, bytes)):
            shown = redact(value)[:80] if isinstance(value, str) else value[:80]
            return f"{len(value):,} {'characters' if isinstance(value, str) else 'bytes'}: " + cut(repr(shown), 90)
        if isinstance(value, (bool, int, float, complex)) or value is None:
            return cut(repr(value), 80)
        if isinstance(value, (types.FunctionType, types.BuiltinFunctionType, types.MethodType)):
            return f"{getattr(value, '__name__', '?')}{_signature(value)}"
        if isinstance(value, type):
            return f"class {value.__qualname__}"
        if isinstance(value, types.ModuleType):
            return f"module {value.__name__}"
        if hasattr(value, "__len__") and not isinstance(value, type):
            try:
                return f"{len(value):,} items"
            except Exception:
                pass
        return cut(redact(repr(value)), 80).replace("\n", " ")
    except Exception as exc:
        return f"<its repr raised {type(exc).__name__}>"


def _signature(fn: Any) -> str:
    try:
        return str(inspect.signature(fn))
    except (TypeError, ValueError):
        return "(...)"


def inspect_text(name: str, value: Any, limit: int = 6_000) -> str:
    """A closer, still bounded, look at one value."""
    lines = [f"{name}: {type_name(value)}"]
    try:
        if is_dataframe(value):
            lines.append(f"shape: {value.shape[0]:,} rows x {value.shape[1]:,} columns")
            try:
                lines.append(f"memory: {_size(int(value.memory_usage(deep=False).sum()))}")
            except Exception:
                pass
            dtypes = [f"  {col!s}: {dtype}" for col, dtype in list(value.dtypes.items())[:60]]
            if len(value.columns) > 60:
                dtypes.append(f"  ... {len(value.columns) - 60} more columns")
            lines.append("columns:")
            lines.extend(dtypes)
            try:
                nulls = value.isna().sum()
                with_nulls = [f"{c}: {int(n):,}" for c, n in nulls.items() if n][:30]
                if with_nulls:
                    lines.append("missing values: " + ", ".join(with_nulls))
            except Exception:
                pass
            lines.append("head:")
            lines.append(_pandas_text(value.head(5)))
        elif is_series(value):
            lines.append(f"length: {len(value):,}, dtype: {value.dtype}, name: {value.name!r}")
            lines.append("head:")
            lines.append(_pandas_text(value.head(10)))
        elif is_ndarray(value):
            lines.append(f"shape: {value.shape}, dtype: {value.dtype}, size: {value.size:,} ({_size(value.nbytes)})")
            lines.append(_numpy_text(value))
        elif is_figure(value):
            lines.append(figure_text(value))
        elif isinstance(value, (types.FunctionType, types.BuiltinFunctionType, types.MethodType, type)):
            lines.append(f"signature: {getattr(value, '__name__', name)}{_signature(value)}")
            doc = inspect.getdoc(value)
            if doc:
                lines.append("doc: " + cut(doc, 1500))
            try:
                source_file = inspect.getsourcefile(value)
                if source_file:
                    lines.append(f"defined in: {source_file}")
            except (TypeError, OSError):
                pass
        elif isinstance(value, types.ModuleType):
            lines.append(f"file: {getattr(value, '__file__', None)}")
            public = [n for n in dir(value) if not n.startswith("_")]
            lines.append(f"{len(public)} public names: {', '.join(public[:60])}" + (" ..." if len(public) > 60 else ""))
        elif isinstance(value, dict):
            lines.append(f"length: {len(value):,}")
            keys = list(value.keys())[:50]
            lines.append("keys: " + cut(redact(", ".join(repr(k) for k in keys)), 2000) + (" ..." if len(value) > 50 else ""))
            lines.append("value: " + text_form(value, 3000))
        elif isinstance(value, (list, tuple, set, frozenset)):
            lines.append(f"length: {len(value):,}")
            kinds: dict[str, int] = {}
            for item in list(value)[:1000] if not isinstance(value, (set, frozenset)) else list(value)[:1000]:
                kinds[type_name(item)] = kinds.get(type_name(item), 0) + 1
            lines.append("item types (first 1,000): " + ", ".join(f"{k} x{v}" for k, v in kinds.items()))
            lines.append("value: " + text_form(value, 3000))
        elif isinstance(value, (str, bytes)):
            lines.append(f"length: {len(value):,}")
            lines.append("value: " + cut(repr(redact(value) if isinstance(value, str) else value), 3000))
        else:
            lines.append("value: " + text_form(value, 3000))
            public = [n for n in dir(value) if not n.startswith("_")][:60]
            if public:
                lines.append("attributes: " + ", ".join(public))
        size = _sizeof(value)
        if size is not None and not is_dataframe(value) and not is_ndarray(value):
            lines.append(f"size: {_size(size)} (shallow)")
    except Exception as exc:
        lines.append(f"(could not inspect further: {type(exc).__name__}: {exc})")
    return cut(redact("\n".join(lines)), limit)


def _sizeof(value: Any) -> int | None:
    try:
        return sys.getsizeof(value)
    except Exception:
        return None


def _size(n: int) -> str:
    size = float(n)
    for unit in ("bytes", "KB", "MB", "GB"):
        if size < 1024 or unit == "GB":
            return f"{size:,.0f} {unit}" if unit == "bytes" else f"{size:,.1f} {unit}"
        size /= 1024
    return f"{n} bytes"  # pragma: no cover


# --------------------------------------------------------------------------------------------------
# Credential holders
# --------------------------------------------------------------------------------------------------
def credential_holder(value: Any, name: str = "") -> str | None:
    """Why `value` is or holds a credential (or content withheld from the model), or None: the secret
    gate's judgement of a live value by its content (`nbagent.safety.gate.value_problem`)."""
    return value_problem(value, name)
