"""Fingerprints of values: did a value change in place (cheap, bounded), and is it the same in another kernel.

`fingerprint(value)` is for telling, within one process, whether an object changed between two moments: a
digest of its content for the common containers (lists, tuples, dicts, sets, NumPy arrays, pandas frames,
series and indexes), computed whole up to `WHOLE_BYTES` and from a spread sample beyond (then `exact` is
False: a change between the sampled rows can be missed), and a shallow digest of an object's attributes
otherwise (a model's `fit` adds attributes). Immutable values (numbers, strings, tuples of them) get None:
they cannot change in place.

`signature(value)` is for comparing a value with its counterpart in another process (the fresh kernel of a
rerun): its type, its shape and a content hash that does not depend on the process (the whole content of
frames and arrays, the bytecode of functions and classes, the value itself for small plain values, the
pickle otherwise). `same(a, b)` compares two signatures.

pandas and NumPy are used only when the value is theirs (nothing is imported for other values).
"""

from __future__ import annotations

import hashlib
import math
import pickle
import sys
import types
from dataclasses import dataclass
from typing import Any

__all__ = ["WHOLE_BYTES", "Print", "fingerprint", "same", "signature"]

WHOLE_BYTES = 16 * 1024 * 1024
"""Bytes of a frame or array hashed whole when watching for changes; larger ones are sampled."""
WHOLE_ITEMS = 5000
"""Items of a list, tuple, set or dict looked at whole when watching for changes; larger ones are sampled."""
_SMALL_REPR = 2000
"""A plain value whose text form is at most this long is compared by value in a signature."""
_PICKLE_LIMIT = 256 * 1024 * 1024
_IMMUTABLE = (type(None), bool, int, float, complex, str, bytes, range, type(Ellipsis))


@dataclass(frozen=True, slots=True)
class Print:
    """A fingerprint: `digest` of what was looked at, and whether that was the whole value (`exact`)."""

    digest: bytes
    exact: bool


class _Hasher:
    __slots__ = ("budget", "exact", "h")

    def __init__(self, budget: int) -> None:
        self.h = hashlib.sha256()
        self.exact = True
        self.budget = budget

    def add(self, data: Any) -> None:
        if isinstance(data, str):
            data = data.encode("utf-8", "surrogatepass")
        self.h.update(data)
        self.h.update(b"\x00")


def _module(value: Any) -> str:
    return type(value).__module__.partition(".")[0]


def is_immutable(value: Any) -> bool:
    """A value that cannot change in place (a tuple only when what it holds cannot either)."""
    if isinstance(value, _IMMUTABLE):
        return True
    if isinstance(value, (tuple, frozenset)):
        return len(value) <= 64 and all(isinstance(v, _IMMUTABLE) for v in value)
    return False


def fingerprint(value: Any, budget: int | None = None) -> Print | None:
    """A bounded digest of `value`'s content, to tell whether it changed in place (None: it cannot). `budget`:
    bytes looked at whole (default `WHOLE_BYTES`)."""
    if is_immutable(value) or isinstance(value, (types.ModuleType, types.FunctionType, types.BuiltinFunctionType,
                                                 type, types.MethodType)):
        return None
    budget = WHOLE_BYTES if budget is None else budget
    h = _Hasher(budget)
    try:
        _feed(h, value, depth=0)
    except Exception:  # a value that fails while being looked at: identity only, never exact
        h = _Hasher(budget)
        h.add(f"{type(value).__qualname__}:{id(value)}")
        h.exact = False
    return Print(h.h.digest(), h.exact)


def _text(value: Any) -> str | bytes:
    """A plain value's text by its builtin type's own method (a subclass's overrides are not called)."""
    if isinstance(value, str):
        return str.__str__(value)
    if isinstance(value, bytes):
        return bytes.__bytes__(value)
    for base in (bool, int, float, complex):
        if isinstance(value, base):
            return base.__repr__(value)
    return repr(value)  # None, Ellipsis, a range: builtin types, which cannot be subclassed


_READERS: tuple[tuple[type, Any], ...] = (
    (dict, lambda v: list(dict.items(v))), (list, list.copy), (tuple, lambda v: list(tuple.__iter__(v))),
    (set, lambda v: list(set.__iter__(v))), (frozenset, lambda v: list(frozenset.__iter__(v))),
    (bytearray, lambda v: [bytes(bytearray.copy(v))]),
)


def _items(value: Any) -> list[Any] | None:
    """The items of a builtin container (of a subclass too), read by the builtin type's own methods; None for
    anything else. A dict gives its (key, value) pairs."""
    for base, read in _READERS:
        if isinstance(value, base):
            return read(value)
    if type(value).__module__ == "collections" and type(value).__name__ == "deque":
        return list(value)
    return None


def _feed(h: _Hasher, value: Any, depth: int) -> None:
    module = _module(value)
    if isinstance(value, _IMMUTABLE):
        text = _text(value)
        if len(text) > 4096:
            h.budget -= len(text)
            if h.budget < 0:
                h.exact = False
                text = text[:2048] + text[-2048:]
        h.add(text)
        return
    h.add(type(value).__qualname__)
    if module == "numpy" and hasattr(value, "dtype") and hasattr(value, "shape"):
        _feed_array(h, value)
        return
    if module == "pandas":
        _feed_pandas(h, value)
        return
    if depth >= 3:
        h.add(str(id(value)))  # deep enough: who it is, not what it holds
        h.exact = False
        return
    if type(value) in (list, tuple, dict, set, frozenset) and _plain_items(value):
        text = repr(value)  # plain values only: the builtin repr, no code of anyone's, at C speed
        if len(text) <= h.budget:
            h.budget -= len(text)
            h.add(text)
            return
    items = _items(value)
    if items is not None:
        h.add(str(len(items)))
        pairs = isinstance(value, dict)
        for item in _sample(h, items):
            if pairs:
                _feed(h, item[0], depth + 1)
                _feed(h, item[1], depth + 1)
            else:
                _feed(h, item, depth + 1)
        return
    try:  # an object of any other kind: what its attributes hold, shallowly (its own __getattr__ is not called)
        attributes = object.__getattribute__(value, "__dict__")
    except Exception:
        attributes = None
    h.exact = False
    h.add(str(id(value)))
    if isinstance(attributes, dict):
        for k in sorted(attributes)[:200]:
            h.add(k)
            v = attributes[k]
            if is_immutable(v) or (depth < 1 and _module(v) in ("numpy", "pandas")):
                _feed(h, v, depth + 1)
            else:
                h.add(f"{type(v).__qualname__}:{id(v)}")


_PLAIN = frozenset({type(None), bool, int, float, complex, str, bytes})


def _plain_items(value: Any) -> bool:
    """A small container of plain values only (numbers, strings, None)."""
    if len(value) > WHOLE_ITEMS:
        return False
    if type(value) is dict:
        return set(map(type, value)) <= _PLAIN and set(map(type, value.values())) <= _PLAIN
    return set(map(type, value)) <= _PLAIN


def _sample(h: _Hasher, items: list[Any]) -> list[Any]:
    if len(items) <= WHOLE_ITEMS:
        return items
    h.exact = False
    step = max(1, len(items) // WHOLE_ITEMS)
    return items[:500] + items[500:-500:step] + items[-500:]


def _feed_array(h: _Hasher, a: Any) -> None:
    import numpy as np

    h.add(f"{a.dtype.str}{a.shape}")
    if a.dtype.hasobject:
        flat = list(a.reshape(-1)) if a.size <= WHOLE_ITEMS else list(a.reshape(-1)[:: max(1, a.size // WHOLE_ITEMS)])
        if a.size > WHOLE_ITEMS:
            h.exact = False
        for v in flat:
            _feed(h, v, 2)
        return
    if a.nbytes > h.budget:
        h.exact = False
        flat = a.reshape(-1)
        a = flat[:: max(1, int(math.ceil(a.nbytes / max(1, h.budget))))]
    h.budget -= a.nbytes
    h.add(np.ascontiguousarray(a).view(np.uint8).data)


def _feed_pandas(h: _Hasher, obj: Any) -> None:
    """A frame, series or index: its columns, dtypes and shape, then each column's data (numeric columns as
    their bytes, others through pandas' own hashing), every `step`-th row when it is over the budget."""
    import pandas as pd

    if isinstance(obj, pd.DataFrame):
        h.add(repr(list(obj.columns)) + repr([str(t) for t in obj.dtypes]) + str(obj.shape))
        columns = [column for _, column in obj.items()]
    elif isinstance(obj, pd.Series):
        h.add(f"{obj.dtype}{obj.shape}{obj.name!r}")
        columns = [obj]
    elif isinstance(obj, pd.Index):
        h.add(f"{obj.dtype}{obj.shape}{obj.name!r}")
        columns = []
    else:
        h.add(f"{id(obj)}")
        h.exact = False
        return
    index = obj if isinstance(obj, pd.Index) else obj.index
    size = sum(_column_bytes(c) for c in columns) + (0 if isinstance(index, pd.RangeIndex) else _column_bytes(index))
    step = 1
    if size > h.budget and len(obj) > 1:
        h.exact = False
        step = max(1, int(math.ceil(size / max(1, h.budget))))
    h.budget -= size // step
    if isinstance(index, pd.RangeIndex):
        h.add(f"range({index.start}, {index.stop}, {index.step})")
    else:
        _feed_column(h, index, step)
    for column in columns:
        _feed_column(h, column, step)


def _column_bytes(column: Any) -> int:
    try:
        return int(column.memory_usage(deep=False)) if hasattr(column, "memory_usage") else int(column.nbytes)
    except Exception:
        return 8 * len(column)


def _feed_column(h: _Hasher, column: Any, step: int) -> None:
    import numpy as np
    import pandas as pd

    dtype = column.dtype
    if isinstance(dtype, np.dtype) and dtype.kind in "biufcmM":
        data = column.to_numpy(copy=False)
        if step > 1:
            data = data[::step]
        h.add(np.ascontiguousarray(data).view(np.uint8).data)
        return
    part = column[::step] if step > 1 else column
    try:
        if isinstance(part, pd.Index):
            hashed = pd.util.hash_pandas_object(part)
        else:
            hashed = pd.util.hash_pandas_object(part, index=False)
    except TypeError:  # unhashable cells (lists in a column): their text, bounded
        h.add(repr(list(part[:200])))
        h.exact = False
        return
    h.add(np.asarray(hashed).tobytes())


# --------------------------------------------------------------------------------------------------
# Signatures: the same value in another process
# --------------------------------------------------------------------------------------------------
def signature(value: Any) -> dict[str, Any]:
    """What `same` compares across processes: `type`, `shape` (or length), `hash`, and `value` (the text of
    a small plain value), with `how` the hash was made: content, code, value, pickle, or type (not hashed)."""
    out: dict[str, Any] = {"type": f"{type(value).__module__}.{type(value).__qualname__}", "shape": _shape(value),
                           "hash": None, "value": None, "how": "type"}
    module = _module(value)
    try:
        if module == "pandas" or (module == "numpy" and hasattr(value, "dtype")):
            if module == "numpy" and getattr(value.dtype, "hasobject", False):
                raise _UsePickle
            h = _Hasher(sys.maxsize)
            _feed(h, value, 0)
            if not h.exact:
                raise _UsePickle
            out.update(hash=h.h.hexdigest(), how="content")
        elif isinstance(value, types.ModuleType):
            out.update(value=value.__name__, hash=_hex(value.__name__), how="value")
        elif isinstance(value, (types.FunctionType, type)):
            out.update(hash=_code_hash(value), how="code")
        else:
            text = _plain(value)
            if text is not None and len(text) <= _SMALL_REPR:
                out.update(value=text, hash=_hex(text), how="value")
            else:
                raise _UsePickle
    except _UsePickle:
        try:
            data = pickle.dumps(value, protocol=5)
        except Exception:
            return out
        if len(data) <= _PICKLE_LIMIT:
            out.update(hash=_hex(data), how="pickle")
    except Exception:
        return out
    return out


class _UsePickle(Exception):
    pass


def _hex(data: str | bytes) -> str:
    if isinstance(data, str):
        data = data.encode("utf-8", "surrogatepass")
    return hashlib.sha256(data).hexdigest()


def _shape(value: Any) -> list[int] | None:
    shape = getattr(value, "shape", None)
    if isinstance(shape, tuple) and all(isinstance(n, int) for n in shape):
        return list(shape)
    if isinstance(value, (list, tuple, dict, set, frozenset, str, bytes)):
        return [len(value)]
    return None


def _plain(value: Any, depth: int = 0) -> str | None:
    """A text form that is the same in every process for plain values (None: not a plain value). Sets are
    sorted (their order depends on the process's string hashing)."""
    if isinstance(value, (type(None), bool, int, float, complex, str, bytes)):
        return repr(value)
    if depth > 4:
        return None
    if isinstance(value, (list, tuple)):
        parts = [_plain(v, depth + 1) for v in value]
        if any(p is None for p in parts):
            return None
        inner = ", ".join(parts)  # type: ignore[arg-type]
        return f"[{inner}]" if isinstance(value, list) else f"({inner}{',' if len(parts) == 1 else ''})"
    if isinstance(value, (set, frozenset)):
        parts = [_plain(v, depth + 1) for v in value]
        if any(p is None for p in parts):
            return None
        return f"{type(value).__name__}({{{', '.join(sorted(parts))}}})"  # type: ignore[arg-type]
    if isinstance(value, dict):
        pairs = [(_plain(k, depth + 1), _plain(v, depth + 1)) for k, v in value.items()]
        if any(k is None or v is None for k, v in pairs):
            return None
        return "{" + ", ".join(f"{k}: {v}" for k, v in pairs) + "}"
    return None


def _code_hash(obj: Any) -> str:
    """A hash of what a function or class does: bytecode, constants, names and defaults (not where it was
    defined: a function made by the agent and the same code in a cell hash alike)."""
    h = hashlib.sha256()

    def code(c: types.CodeType) -> None:
        h.update(c.co_code)
        h.update(repr((c.co_names, c.co_varnames, c.co_freevars, c.co_cellvars, c.co_argcount,
                       c.co_kwonlyargcount, c.co_flags)).encode())
        for const in c.co_consts:
            if isinstance(const, types.CodeType):
                code(const)
            else:
                h.update(repr(const).encode("utf-8", "surrogatepass"))

    def function(f: Any) -> None:
        code(f.__code__)
        h.update(repr(f.__defaults__).encode("utf-8", "surrogatepass"))
        h.update(repr(sorted((f.__kwdefaults__ or {}).items())).encode("utf-8", "surrogatepass"))

    if isinstance(obj, type):
        h.update(obj.__qualname__.encode())
        for name, member in sorted(vars(obj).items()):
            if name in ("__dict__", "__weakref__", "__module__", "__doc__"):
                continue
            h.update(name.encode())
            target = getattr(member, "__func__", member)
            if isinstance(target, types.FunctionType):
                function(target)
            elif _plain(member) is not None:
                h.update(_plain(member).encode("utf-8", "surrogatepass"))  # type: ignore[union-attr]
    else:
        function(obj)
    return h.hexdigest()


def same(a: dict[str, Any] | None, b: dict[str, Any] | None) -> tuple[bool, str]:
    """Whether two signatures describe the same value, and if not, what differs (in words)."""
    if a is None or b is None:
        return False, "missing"
    if a.get("type") != b.get("type"):
        return False, f"type {b.get('type')} instead of {a.get('type')}"
    if a.get("shape") != b.get("shape"):
        return False, f"shape {_shape_text(b.get('shape'))} instead of {_shape_text(a.get('shape'))}"
    if a.get("hash") and b.get("hash") and a.get("how") == b.get("how"):
        if a["hash"] != b["hash"]:
            what = {"code": "its code", "value": "its value", "content": "its content"}.get(a["how"], "its content")
            return False, f"{what} differs"
        return True, {"code": "same code", "value": "same value", "content": "same content hash",
                      "pickle": "same pickle"}.get(a["how"], "same")
    return True, "same type and shape (its content cannot be compared)"


def _shape_text(shape: Any) -> str:
    return " x ".join(str(n) for n in shape) if isinstance(shape, list) else "none"
