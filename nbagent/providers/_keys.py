"""API keys as the providers hold them: loaded and checked (`clean_key`), kept in a `Secret` whose repr
hides them, and the header names that may carry one (`credential_header`: their values are secrets too).

A key comes from the environment or `api_key=`; a key pasted with a trailing newline is stripped, one with
whitespace, control characters or non-ASCII inside is refused with an error that names where it came
from and never shows it. How keys are sent, and kept out of errors and records, is `_http`.
"""

from __future__ import annotations

import re
from typing import Any

from ..errors import AuthenticationError

__all__ = ["Secret", "clean_key", "credential_header"]


class Secret:
    """An API key: `value` gives it; repr and str never do."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    @property
    def value(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return "Secret('***')"

    __str__ = __repr__

    def __bool__(self) -> bool:
        return bool(self._value)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and other._value == self._value

    def __hash__(self) -> int:
        return hash(self._value)

    def __reduce__(self) -> Any:  # never pickled into notebooks' stores or logs
        raise TypeError("an API key is not picklable")

    def __copy__(self) -> Secret:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> Secret:
        return self


def clean_key(value: str, where: str, provider: str | None = None) -> str:
    """An API key as loaded from `where` (a variable's name, or `api_key=`): surrounding whitespace (a
    trailing newline from a file or a shell) removed; a key with whitespace or control characters inside,
    or characters outside ASCII, refused with an error naming `where` (and never showing the key)."""
    key = value.strip()
    bad = next((c for c in key if not 0x21 <= ord(c) <= 0x7E), None)
    if bad is not None:
        what = ("whitespace or a control character" if bad.isspace() or ord(bad) < 0x20 or ord(bad) == 0x7F
                else "a character outside ASCII")
        raise AuthenticationError(
            f"the API key in {where} is not valid: it holds {what} inside it (at position "
            f"{key.index(bad) + 1} of {len(key)}); copy the key again", provider=provider)
    return key


_CREDENTIAL_HEADER = re.compile(r"auth|key|token|secret|cookie|password", re.I)


def credential_header(name: str) -> bool:
    """Whether a header with this name may carry a credential (its value is then treated as a secret)."""
    return _CREDENTIAL_HEADER.search(name) is not None
