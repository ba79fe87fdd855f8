"""Program options read as GNU `getopt_long` reads them, so the read-only classifier sees what a program sees.

A long option may be any unique prefix of its name (unless the program says otherwise), `--opt=value` or
`--opt value`; short options bundle (`-rf`) and take attached values (`-n5`); options may come anywhere
until `--`. An option a table does not list, or an ambiguous prefix, is an answer of its own: the string
`getopt` returns says which, and the command is then not read-only.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

__all__ = ["Options", "ParsedOptions", "getopt"]


class Options:
    """One program's options.

    `short`: letters, each followed by `:` (takes a value), `@` (takes a path) or `?` (an optional value,
    attached only). `long`: names separated by spaces, each ending with `=` (takes a value), `=@` (a
    path) or `?` (an optional value, after `=` only). `aliases`: short letter -> long name, so checks name
    one option once. `abbreviations`: long options may be shortened to a unique prefix (getopt_long).
    """

    def __init__(self, short: str = "", long: str = "", aliases: Mapping[str, str] | None = None, *,
                 gnu: bool = True, abbreviations: bool = True) -> None:
        self.short: dict[str, str] = {}
        i = 0
        while i < len(short):
            letter = short[i]
            kind = short[i + 1] if i + 1 < len(short) and short[i + 1] in ":@?" else ""
            self.short[letter] = kind
            i += 2 if kind else 1
        self.long: dict[str, str] = {}
        for token in (long + (" help version" if gnu else "")).split():
            if token.endswith("=@"):
                self.long[token[:-2]] = "@"
            elif token.endswith("="):
                self.long[token[:-1]] = ":"
            elif token.endswith("?"):
                self.long[token[:-1]] = "?"
            else:
                self.long[token] = ""
        self.aliases = dict(aliases or {})
        self.abbreviations = abbreviations

    def canonical(self, name: str) -> str:
        return self.aliases.get(name, name)

    def resolve_long(self, given: str) -> str | None:
        """The long option `--given` stands for (exact, else a unique prefix); None if unknown or ambiguous."""
        if given in self.long:
            return given
        if not self.abbreviations or not given:
            return None
        candidates = [name for name in self.long if name.startswith(given)]
        if len({self.canonical(c) for c in candidates}) == 1:
            return candidates[0]
        return None


@dataclass(slots=True)
class ParsedOptions:
    options: list[tuple[str, str | None, str]] = field(default_factory=list)
    """(canonical name, value, kind) in order; kind is "", ":", "@" or "?"."""
    positional: list[str] = field(default_factory=list)

    def has(self, *names: str) -> bool:
        return any(o[0] in names for o in self.options)

    def values(self, name: str) -> list[str]:
        return [v for n, v, _ in self.options if n == name and v is not None]


def getopt(opts: Options, args: list[str]) -> ParsedOptions | str:
    """Split `args` as GNU getopt_long would (options anywhere until `--`); a string says what is unknown."""
    out = ParsedOptions()
    k = 0
    while k < len(args):
        a = args[k]
        k += 1
        if a == "--":
            out.positional.extend(args[k:])
            break
        if a.startswith("--"):
            given, eq, value = a[2:].partition("=")
            name = opts.resolve_long(given)
            if name is None:
                return f"--{given} is not an option it knows (or is ambiguous)"
            kind = opts.long[name]
            if kind == "" and eq:
                return f"--{name} takes no value"
            if kind in (":", "@") and not eq:
                if k >= len(args):
                    return f"--{name} needs a value"
                value, k = args[k], k + 1
                eq = "="
            out.options.append((opts.canonical(name), value if eq else None, kind))
        elif a.startswith("-") and a != "-":
            j = 1
            while j < len(a):
                letter = a[j]
                if letter not in opts.short:
                    return f"-{letter} is not an option it knows"
                kind = opts.short[letter]
                if kind == "":
                    out.options.append((opts.canonical(letter), None, kind))
                    j += 1
                    continue
                rest = a[j + 1 :]
                if kind == "?":
                    out.options.append((opts.canonical(letter), rest or None, kind))
                elif rest:
                    out.options.append((opts.canonical(letter), rest, kind))
                elif k < len(args):
                    out.options.append((opts.canonical(letter), args[k], kind))
                    k += 1
                else:
                    return f"-{letter} needs a value"
                break
        else:
            out.positional.append(a)
    return out
