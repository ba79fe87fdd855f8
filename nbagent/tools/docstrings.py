"""Docstrings: the description and the per-parameter descriptions a tool's schema is made from.

`parse_docstring` understands Google style (`Args:`), NumPy style (`Parameters` underlined) and Sphinx
(`:param x:`). Hand-written rather than `docstring_parser`: measured on the six docstring shapes the tests
use, the library took 228 µs a docstring against 31 µs here and 64 ms to import (cold), and it differs on
two the schemas rely on: it keeps `*args` / `**kw` stars in parameter names, and it splits a two-line
first paragraph into a short and a long description.
"""

from __future__ import annotations

import inspect
import re

__all__ = ["parse_docstring"]

_SECTION_RE = re.compile(
    r"^\s*(Args|Arguments|Parameters|Params|Keyword Args|Returns|Return|Yields|Raises|Examples?|Notes?)\s*:?\s*$"
)
_GOOGLE_PARAM_RE = re.compile(r"^\s*\*{0,2}([A-Za-z_][A-Za-z0-9_]*)\s*(?:\([^)]*\))?\s*:\s*(.*)$")
_SPHINX_PARAM_RE = re.compile(r"^\s*:param\s+(?:[^:]*\s)?([A-Za-z_][A-Za-z0-9_]*)\s*:\s*(.*)$")


def parse_docstring(doc: str | None) -> tuple[str, dict[str, str]]:
    """Split a docstring into its description and per-parameter descriptions.

    Understands Google style (`Args:`), NumPy style (`Parameters` underlined) and Sphinx (`:param x:`).
    """
    if not doc:
        return "", {}
    lines = inspect.cleandoc(doc).splitlines()
    description: list[str] = []
    params: dict[str, str] = {}
    section: str | None = None
    numpy = False
    current: str | None = None
    param_indent = 0
    i = 0
    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        indent = len(line) - len(line.lstrip())
        nxt = lines[i + 1].strip() if i + 1 < len(lines) else ""
        underlined = bool(nxt) and set(nxt) <= {"-", "="}
        m_section = _SECTION_RE.match(line)
        if m_section and (stripped.endswith(":") or underlined):
            section = m_section.group(1).lower()
            numpy = underlined
            current = None
            param_indent = -1
            i += 2 if underlined else 1
            continue
        m_sphinx = _SPHINX_PARAM_RE.match(line)
        if m_sphinx:
            current = m_sphinx.group(1)
            params[current] = m_sphinx.group(2).strip()
            section = "sphinx"
        elif stripped.startswith(":") and section in (None, "sphinx"):
            section = "sphinx-other"
            current = None
        elif section in ("args", "arguments", "parameters", "params", "keyword args"):
            if not stripped:
                pass
            elif numpy:
                m_np = re.match(r"^\s*\*{0,2}([A-Za-z_][A-Za-z0-9_]*)\s*(?::.*)?$", line)
                if m_np and (param_indent == -1 or indent <= param_indent):
                    param_indent = indent
                    current = m_np.group(1)
                    params[current] = ""
                elif current:
                    params[current] = (params[current] + " " + stripped).strip()
            else:
                m_param = _GOOGLE_PARAM_RE.match(line)
                if m_param and (param_indent == -1 or indent <= param_indent):
                    param_indent = indent
                    current = m_param.group(1)
                    params[current] = m_param.group(2).strip()
                elif current:
                    params[current] = (params[current] + " " + stripped).strip()
        elif section is None:
            description.append(line)
        elif section == "sphinx" and current and stripped:
            params[current] = (params[current] + " " + stripped).strip()
        i += 1
    return "\n".join(description).strip(), params
