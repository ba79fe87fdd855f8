"""What a piece of code does with the names of the namespace it runs in, read from its syntax tree.

`code_names(source)` walks the top-level statements in the order they run and says which names the code
binds (assignments, `def`, `class`, `import`, `for` and `with` targets, `:=`), deletes, changes in place
by its own statements (`x[k] = v`, `x.attr = v`, `x += ...`, `x.append(...)`, `inplace=True`), and reads
before binding them itself (in the order of first reading; the free names of the functions and lambdas
it defines count as read, since calling them reads them). `opaque` says the code reaches names in ways the
tree does not show (`globals()`, `exec`, `eval`, `vars()`, `import *`, IPython's magics): whoever uses the
result then watches every name instead.

The tree is the code as written; nothing here runs it.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

__all__ = ["MUTATING_METHODS", "CodeNames", "code_names"]

MUTATING_METHODS = frozenset({
    # list, dict, set, bytearray, deque
    "append", "appendleft", "extend", "extendleft", "insert", "remove", "pop", "popleft", "popitem", "clear",
    "update", "setdefault", "sort", "reverse", "add", "discard", "difference_update", "intersection_update",
    "symmetric_difference_update", "rotate",
    # numpy arrays, in place
    "fill", "resize", "put", "itemset", "setflags", "partition",
    # estimators and models that learn in place (scikit-learn, statsmodels, torch modules)
    "fit", "partial_fit", "set_params", "load_state_dict",
})
"""Methods that change their object in place: a statement `x.method(...)` counts as changing `x`."""

_OPAQUE_CALLS = frozenset({"globals", "vars", "locals", "exec", "eval", "get_ipython", "setattr", "delattr",
                           "__import__"})


@dataclass(frozen=True)
class CodeNames:
    """What one piece of code does with the namespace's names, as its syntax shows."""

    binds: tuple[str, ...] = ()
    """Top-level names it binds (assigns, defines, imports), in order."""
    deletes: tuple[str, ...] = ()
    """Top-level names it deletes (`del x`)."""
    reads: tuple[str, ...] = ()
    """Names it reads before binding them itself, in the order first read."""
    mutates: tuple[str, ...] = ()
    """Names its own statements change in place (`x[k] = v`, `x.append(...)`, `x.drop(..., inplace=True)`)."""
    opaque: bool = False
    """It reaches names in ways the syntax does not show (`globals()`, `exec`, magics): watch them all."""
    syntax_error: bool = False
    """It did not parse (it cannot have run either)."""


@dataclass
class _Walk:
    bound: set[str] = field(default_factory=set)
    binds: list[str] = field(default_factory=list)
    deletes: list[str] = field(default_factory=list)
    reads: list[str] = field(default_factory=list)
    mutates: list[str] = field(default_factory=list)
    opaque: bool = False
    all_binds: frozenset[str] = frozenset()

    # -- recording -------------------------------------------------------------------------------------
    def read(self, name: str) -> None:
        if name not in self.bound and name not in self.reads:
            self.reads.append(name)

    def bind(self, name: str) -> None:
        self.bound.add(name)
        if name not in self.binds:
            self.binds.append(name)

    def mutate(self, name: str) -> None:
        self.read(name)
        if name not in self.mutates:
            self.mutates.append(name)

    # -- statements, in the order they run ---------------------------------------------------------------
    def body(self, statements: list[ast.stmt]) -> None:
        for statement in statements:
            self.stmt(statement)

    def stmt(self, s: ast.stmt) -> None:
        if isinstance(s, ast.Assign):
            self.expr(s.value)
            for target in s.targets:
                self.target(target)
        elif isinstance(s, ast.AugAssign):
            if isinstance(s.target, ast.Name):
                self.expr(s.value)
                self.mutate(s.target.id)  # `x += y` reads x, and changes a list in place
                self.bind(s.target.id)
            else:
                self.expr(s.value)
                self.target(s.target)
        elif isinstance(s, ast.AnnAssign):
            if s.value is not None:
                self.expr(s.value)
                self.target(s.target)
        elif isinstance(s, (ast.For, ast.AsyncFor)):
            self.expr(s.iter)
            self.target(s.target)
            self.body(s.body)
            self.body(s.orelse)
        elif isinstance(s, (ast.While, ast.If)):
            self.expr(s.test)
            self.body(s.body)
            self.body(s.orelse)
        elif isinstance(s, (ast.With, ast.AsyncWith)):
            for item in s.items:
                self.expr(item.context_expr)
                if item.optional_vars is not None:
                    self.target(item.optional_vars)
            self.body(s.body)
        elif isinstance(s, (ast.Try, getattr(ast, "TryStar", ast.Try))):
            self.body(s.body)
            for handler in s.handlers:
                if handler.type is not None:
                    self.expr(handler.type)
                if handler.name:
                    self.bind(handler.name)
                self.body(handler.body)
            self.body(s.orelse)
            self.body(s.finalbody)
        elif isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for node in [*s.decorator_list, *s.args.defaults, *(d for d in s.args.kw_defaults if d is not None)]:
                self.expr(node)
            self.free(s)
            self.bind(s.name)
        elif isinstance(s, ast.ClassDef):
            for node in [*s.decorator_list, *s.bases, *(k.value for k in s.keywords)]:
                self.expr(node)
            self.free(s)
            self.bind(s.name)
        elif isinstance(s, ast.Import):
            for alias in s.names:
                self.bind(alias.asname or alias.name.partition(".")[0])
        elif isinstance(s, ast.ImportFrom):
            for alias in s.names:
                if alias.name == "*":
                    self.opaque = True
                else:
                    self.bind(alias.asname or alias.name)
        elif isinstance(s, ast.Delete):
            for target in s.targets:
                if isinstance(target, ast.Name):
                    self.bound.discard(target.id)
                    if target.id not in self.deletes:
                        self.deletes.append(target.id)
                else:
                    self.target(target)
        elif isinstance(s, ast.Expr):
            self.expr(s.value)
        elif isinstance(s, ast.Match):
            self.expr(s.subject)
            for case in s.match_cases:
                for node in ast.walk(case.pattern):
                    if isinstance(node, (ast.MatchAs, ast.MatchStar)) and node.name:
                        self.bind(node.name)
                    elif isinstance(node, ast.MatchMapping) and node.rest:
                        self.bind(node.rest)
                    elif isinstance(node, ast.expr):
                        self.expr(node)
                if case.guard is not None:
                    self.expr(case.guard)
                self.body(case.body)
        elif isinstance(s, (ast.Global, ast.Nonlocal, ast.Pass, ast.Break, ast.Continue)):
            pass
        else:  # return, raise, assert and anything newer: read what they read
            for child in ast.iter_child_nodes(s):
                if isinstance(child, ast.expr):
                    self.expr(child)
                elif isinstance(child, ast.stmt):
                    self.stmt(child)

    def target(self, t: ast.expr) -> None:
        """An assignment target: a name is bound; `x[k]`, `x.a` change `x` in place (and read `k`)."""
        if isinstance(t, ast.Name):
            self.bind(t.id)
        elif isinstance(t, (ast.Tuple, ast.List)):
            for element in t.elts:
                self.target(element)
        elif isinstance(t, ast.Starred):
            self.target(t.value)
        elif isinstance(t, (ast.Subscript, ast.Attribute)):
            if isinstance(t, ast.Subscript):
                self.expr(t.slice)
            base = _base_name(t)
            if base is not None:
                self.mutate(base)
            else:
                self.expr(t.value)

    # -- expressions ----------------------------------------------------------------------------------------
    def expr(self, e: ast.expr) -> None:
        for node in _in_order(e):
            if isinstance(node, ast.Name):
                if isinstance(node.ctx, ast.Load):
                    self.read(node.id)
                elif isinstance(node.ctx, ast.Store):  # the target of :=
                    self.bind(node.id)
            elif isinstance(node, ast.Call):
                self.call(node)
            elif isinstance(node, (ast.Lambda, ast.GeneratorExp, ast.ListComp, ast.SetComp, ast.DictComp)):
                self.free(node)

    def call(self, node: ast.Call) -> None:
        func = node.func
        if isinstance(func, ast.Name) and func.id in _OPAQUE_CALLS:
            self.opaque = True
        if isinstance(func, ast.Attribute):
            base = _base_name(func.value)
            in_place = any(k.arg == "inplace" and isinstance(k.value, ast.Constant) and k.value.value is True
                           for k in node.keywords)
            if base is not None and (func.attr in MUTATING_METHODS or in_place):
                self.mutate(base)

    def free(self, node: ast.AST) -> None:
        """A function, class, lambda or comprehension: the names it reads from outside count as read now
        (unless this code binds them itself: then they are its own)."""
        for name in _free_names(node):
            if name not in self.all_binds:
                self.read(name)


def _base_name(node: ast.expr) -> str | None:
    """`x` of `x`, `x.a.b`, `x[k].loc[j]` (None when the chain does not start at a name)."""
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef, ast.GeneratorExp, ast.ListComp,
           ast.SetComp, ast.DictComp)


def _in_order(e: ast.AST) -> list[ast.AST]:
    """The nodes of an expression in source order, not entering nested scopes (lambdas, comprehensions:
    `free` reads those) beyond the scope node itself."""
    out: list[ast.AST] = []
    stack = [e]
    while stack:
        node = stack.pop()
        out.append(node)
        if isinstance(node, _SCOPES) and node is not e:
            continue
        if isinstance(node, _SCOPES):
            continue
        stack.extend(reversed(list(ast.iter_child_nodes(node))))
    out.sort(key=lambda n: (getattr(n, "lineno", 0), getattr(n, "col_offset", 0)))
    return out


def _import_or_except_binds(node: ast.AST) -> list[str]:
    """The names an import (`import a.b` binds `a`; a star import, none that can be known) or an `except ... as`
    binds; none for any other node."""
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return [a.asname or a.name.partition(".")[0] for a in node.names if a.name != "*"]
    if isinstance(node, ast.ExceptHandler) and node.name:
        return [node.name]
    return []


def _free_names(scope: ast.AST) -> list[str]:
    """The names a function, class body, lambda or comprehension reads that it does not bind itself, in
    source order (nested scopes included, less what the enclosing ones bind)."""
    params: set[str] = set()
    if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
        a = scope.args
        params = {x.arg for x in [*a.posonlyargs, *a.args, *a.kwonlyargs]}
        params |= {x.arg for x in (a.vararg, a.kwarg) if x is not None}
    children: list[ast.AST]
    if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        children = list(scope.body)
    elif isinstance(scope, ast.Lambda):
        children = [scope.body]
    else:  # a comprehension: its element(s) and generators
        children = [g for g in scope.generators]
        children += [scope.key, scope.value] if isinstance(scope, ast.DictComp) else [scope.elt]  # type: ignore[attr-defined]
    local: set[str] = set(params)
    declared_global: set[str] = set()
    loads: list[tuple[int, int, str]] = []
    nested: list[ast.AST] = []
    stack = list(children)
    while stack:
        node = stack.pop()
        if isinstance(node, _SCOPES):
            nested.append(node)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                local.add(node.name)
                stack.extend(node.decorator_list)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                stack.extend(node.args.defaults)
            continue
        if isinstance(node, ast.Global):
            declared_global.update(node.names)
        elif isinstance(node, ast.Name):
            if isinstance(node.ctx, (ast.Store, ast.Del)):
                local.add(node.id)
            else:
                loads.append((node.lineno, node.col_offset, node.id))
        elif isinstance(node, ast.arg):
            local.add(node.arg)
        else:
            local.update(_import_or_except_binds(node))
        stack.extend(ast.iter_child_nodes(node))
    local -= declared_global
    for inner in nested:
        for name in _free_names(inner):
            loads.append((getattr(inner, "lineno", 0), getattr(inner, "col_offset", 0), name))
    out: list[str] = []
    for _, _, name in sorted(loads):
        if name not in local and name not in out:
            out.append(name)
    return out


def _top_level_binds(tree: ast.Module) -> set[str]:
    """Every name the module's own scope binds anywhere (not the names local to its functions)."""
    found: set[str] = set()
    stack: list[ast.AST] = list(tree.body)
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            found.add(node.name)
            continue
        if isinstance(node, _SCOPES):
            continue
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            found.add(node.id)
        else:
            found.update(_import_or_except_binds(node))
        stack.extend(ast.iter_child_nodes(node))
    return found


def code_names(source: str) -> CodeNames:
    """What `source` (plain Python: IPython's magics already turned into calls) does with the namespace."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return CodeNames(opaque=True, syntax_error=True)
    walk = _Walk(all_binds=frozenset(_top_level_binds(tree)))
    walk.body(tree.body)
    return CodeNames(tuple(walk.binds), tuple(walk.deletes), tuple(walk.reads), tuple(walk.mutates), walk.opaque)
