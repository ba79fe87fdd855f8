"""Tools: `@tool`, the `Tool` object, and the schema the model sees.

A tool is declared once, in Python: its signature (through pydantic) or a raw JSON Schema is the single
source for the schema sent to the model, the validation of what comes back, and the call itself.

    @tool
    def add(a: int, b: int) -> int:
        '''Add two integers.'''
        return a + b

The decorated function stays callable as before (`add(2, 3)`); the runtime calls it with validated
arguments only, never with raw model output.
"""

from __future__ import annotations

import fnmatch
import inspect
import os
import re
import sys
from typing import TYPE_CHECKING, Any, Callable, Literal

from ..context import ToolContext
from ..safety import protected
from .docstrings import parse_docstring
from .schemas import (
    Arguments, ArgumentsError, ToolDefinitionError, _check_raw_schema, _format_jsonschema_errors,
    _format_pydantic_errors, _json_type, _raw_call_shape, _raw_errors, _raw_validator, signature_schema,
)

if TYPE_CHECKING:  # pragma: no cover
    import pydantic

__all__ = ["Arguments", "ArgumentsError", "Tool", "ToolDefinitionError", "as_tool", "parse_docstring", "tool"]

ExecutionMode = Literal["parallel", "sequential"]
CAPABILITIES = ("read", "write", "execute", "other")
_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_.\-]{0,127}$")


# --------------------------------------------------------------------------------------------------
# The Tool
# --------------------------------------------------------------------------------------------------
class Tool:
    """A tool the model can call: `Tool(fn, **options)`, or `@tool(**options)` (the same options).

    Args:
        fn: the function (sync or async) the tool calls with the validated arguments; a parameter
            annotated `ToolContext` (or named `ctx`) gets the call's context.
        name: what the model sees and calls (default: the function's name).
        description: what the model reads to decide whether to call it (default: the docstring).
        json_schema: a raw JSON Schema for the parameters, sent unchanged; the function then receives the
            validated arguments as keyword arguments. Its root must be an object schema.
        strict: ask the provider for strict argument validation.
        namespace: group related tools; the model sees `namespace__name`.
        namespace_description: what the group is for (shown by tool search).
        defer_loading: keep the schema out of requests until the model finds it with `search_tools`.
        execution_mode: `parallel` (default) or `sequential` (its whole batch then runs in order).
        read_only: only reads: auto-allowed by the permission pipeline, kept in read-only sessions.
        destructive: may destroy data (shown in the view, and a hint for approvals).
        capability: `read`, `write`, `execute` or `other`, for capability modes (derived by default).
        edits_files: edits files in the workspace (allowed by the `acceptEdits` mode); or `f(args) -> bool`
            deciding per call. `acceptEdits` allows a call only when it is known what it writes (`writes`).
        describe_activity: `f(args) -> str`, a short label while running ("Reading data.csv").
        describe_completed_activity: `f(args, result) -> str`, the label once done.
        prepare_arguments: `f(arguments) -> arguments`, run on the parsed arguments (after the repair
            ladder) before they are validated.
        timeout: per-call limit in seconds.
        sort_key: where the tool sorts in the request (default: its name).
        permission_subject: the parameter (or `f(args) -> str`) that rule patterns like `name(pat*)` match.
        rule_matcher: `f(pattern, args) -> bool`, a tool's own rule matching (overrides permission_subject);
            it may also take the call's context (`f(pattern, args, ctx)`) and the rule's `action`
            keyword ("allow", "ask", "deny", "grant"), to match deny rules more broadly than allow rules.
            `nbagent.tools.paths.path_rule_matcher` matches workspace paths with `**` globs.
        read_only_call: `f(args) -> bool` (or `f(args, ctx)`), whether one call only reads (auto-allowed).
        suggest_grant: `f(args) -> pattern` (or `f(args, ctx)`), the scope of an "always allow" for a call
            like this one.
        writes: `f(args) -> paths` (or `f(args, ctx)`): the files this call writes (relative to the
            workspace, absolute, or `nbagent.safety.protected.Target`), or None when it cannot tell. Each is
            judged by kind (`nbagent.safety.protected.write_reason`: hidden, inside an environment or
            package tree, executable, loaded as configuration): such a write always asks, whatever the mode
            or grant; only an allow rule the person wrote allows it. Default, for a tool that `edits_files`:
            its permission subject (the path it is about).
        protected_write: `f(args) -> str | None` (or `f(args, ctx)`): more reasons of the tool's own why a
            call writes configuration that can run programs (asked after `writes`).
    """

    def __init__(
        self,
        fn: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        json_schema: dict[str, Any] | None = None,
        strict: bool | None = None,
        namespace: str | None = None,
        namespace_description: str | None = None,
        defer_loading: bool = False,
        execution_mode: ExecutionMode = "parallel",
        read_only: bool = False,
        destructive: bool = False,
        capability: str | None = None,
        edits_files: bool | Callable[..., bool] = False,
        describe_activity: Callable[[Arguments], str] | None = None,
        describe_completed_activity: Callable[[Arguments, Any], str] | None = None,
        prepare_arguments: Callable[[Any], Any] | None = None,
        timeout: float | None = None,
        sort_key: str | None = None,
        permission_subject: str | Callable[[Arguments], str | None] | None = None,
        rule_matcher: Callable[..., bool] | None = None,
        read_only_call: Callable[..., bool] | None = None,
        suggest_grant: Callable[..., str | None] | None = None,
        writes: Callable[..., Any] | None = None,
        protected_write: Callable[..., str | None] | None = None,
        _localns: dict[str, Any] | None = None,
    ) -> None:
        if not callable(fn):
            raise ToolDefinitionError(f"a tool needs a callable, got {type(fn).__name__}")
        base_name = name or getattr(fn, "__name__", None)
        if not base_name or not _NAME_RE.match(base_name):
            raise ToolDefinitionError(
                f"tool name {base_name!r} is not valid: use letters, digits, '_', '-' or '.', starting with a letter"
            )
        if namespace is not None and not re.match(r"^[A-Za-z][A-Za-z0-9_\-]{0,63}$", namespace):
            raise ToolDefinitionError(f"namespace {namespace!r} is not valid: use letters, digits, '_' or '-'")
        if execution_mode not in ("parallel", "sequential"):
            raise ToolDefinitionError(f"execution_mode must be 'parallel' or 'sequential', not {execution_mode!r}")
        if timeout is not None and not (isinstance(timeout, (int, float)) and timeout > 0):
            raise ToolDefinitionError(f"timeout must be a positive number of seconds, not {timeout!r}")
        if capability is None:
            capability = "read" if read_only else "write" if edits_files else "execute"
        if capability not in CAPABILITIES:
            raise ToolDefinitionError(f"capability must be one of {CAPABILITIES}, not {capability!r}")

        self.fn = fn
        self.base_name = base_name
        self.namespace = namespace
        self.namespace_description = namespace_description
        self.name = f"{namespace}__{base_name}" if namespace else base_name
        """The name the model sees and calls (`namespace__name` when the tool has a namespace)."""
        doc_description, param_docs = parse_docstring(inspect.getdoc(fn))
        self.description = description if description is not None else doc_description
        self.strict = strict
        self.defer_loading = defer_loading
        self.execution_mode: ExecutionMode = execution_mode
        self.read_only = read_only
        self.destructive = destructive
        self.capability = capability
        self.edits_files = edits_files
        """True (or `f(args[, ctx]) -> bool` deciding per call) when the tool edits files in the workspace."""
        self.describe_activity = describe_activity
        self.describe_completed_activity = describe_completed_activity
        self.prepare_arguments = prepare_arguments
        self.timeout = float(timeout) if timeout is not None else None
        self.sort_key = sort_key
        self.rule_matcher = rule_matcher
        self.read_only_call = read_only_call
        self.suggest_grant = suggest_grant
        self._rule_matcher = _flexible(rule_matcher, 2) if rule_matcher is not None else None
        self._read_only_call = _flexible(read_only_call, 1) if read_only_call is not None else None
        self._suggest_grant = _flexible(suggest_grant, 1) if suggest_grant is not None else None
        self._edits_files = _flexible(edits_files, 1) if callable(edits_files) else None
        self.protected_write = protected_write
        self._protected_write = _flexible(protected_write, 1) if protected_write is not None else None
        self.writes = writes
        self._writes = _flexible(writes, 1) if writes is not None else None
        self.is_async = inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(getattr(fn, "__call__", None))

        self._model: type[pydantic.BaseModel] | None = None
        self._validator: Any = None
        sig_fn = fn
        if json_schema is not None:
            self.parameters = _check_raw_schema(self.name, json_schema)
            self._validator = _raw_validator(self.name, self.parameters)
            self.ctx_param, self._positional_only, self._accepts = _raw_call_shape(fn)
        else:
            model, self.ctx_param, self._positional_only, schema = signature_schema(sig_fn, self.name, param_docs,
                                                                                      _localns)
            self._model = model
            self._validate_model = model.__pydantic_validator__.validate_python
            if schema.get("type") != "object":  # pragma: no cover - create_model always makes objects
                raise ToolDefinitionError(f"tool {self.name!r}: the parameters schema must be an object")
            schema.setdefault("properties", {})
            self.parameters = schema
            self._accepts = None

        if isinstance(permission_subject, str):
            key = permission_subject
            if key not in self.parameters.get("properties", {}):
                raise ToolDefinitionError(f"tool {self.name!r}: permission_subject {key!r} is not one of its parameters")
            self.permission_subject: Callable[[Arguments], str | None] | None = lambda args: _as_subject(args.get(key))
        elif permission_subject is not None:
            self.permission_subject = permission_subject
        else:
            self.permission_subject = _default_subject(self.parameters)
        self.__doc__ = getattr(fn, "__doc__", None)
        self.__name__ = self.name
        self.__wrapped__ = fn

    # -- calling it as a plain function ---------------------------------------------------------------
    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.fn(*args, **kwargs)

    def __repr__(self) -> str:
        flags = [f for f, on in (("read_only", self.read_only), ("destructive", self.destructive),
                                 ("sequential", self.execution_mode == "sequential"),
                                 ("deferred", self.defer_loading)) if on]
        props = ", ".join(self.parameters.get("properties", {}))
        return f"<Tool {self.name}({props}){' ' + ' '.join(flags) if flags else ''}>"

    # -- validation -----------------------------------------------------------------------------------
    def validate(self, data: dict[str, Any]) -> Arguments:
        """Validate parsed arguments; raise `ArgumentsError` with a message for the model."""
        if not isinstance(data, dict):
            raise ArgumentsError(f"arguments must be a JSON object, got {_json_type(data)}")
        if self._model is not None:
            try:
                model = self._validate_model(data)
            except _validation_error() as exc:  # (evaluated only when something was raised)
                raise ArgumentsError(_format_pydantic_errors(exc)) from None
            return Arguments(model.__dict__)
        errors = _raw_errors(self._validator, data)
        if errors:
            raise ArgumentsError(_format_jsonschema_errors(errors))
        return Arguments(data)

    # -- calling it from the runtime -------------------------------------------------------------------
    def invoke(self, args: Arguments, ctx: ToolContext | None) -> Any:
        """Call the function with validated arguments (returns a coroutine for async tools)."""
        if self._accepts is not None and self._accepts is not True:
            kwargs = {k: v for k, v in args.items() if k in self._accepts}
        else:
            kwargs = dict(args)
        if self.ctx_param is not None:
            kwargs[self.ctx_param] = ctx
        if self._positional_only:
            positional = [kwargs.pop(n) for n in self._positional_only if n in kwargs]
            return self.fn(*positional, **kwargs)
        return self.fn(**kwargs)

    def activity(self, args: Arguments | None) -> str:
        """The short label shown while the call runs ("Reading data.csv")."""
        if self.describe_activity is not None and args is not None:
            try:
                label = self.describe_activity(args)
                if label:
                    return str(label)
            except Exception:
                pass
        return f"Calling {self.name}"

    def completed_activity(self, args: Arguments | None, result: Any) -> str | None:
        """The label that replaces the activity when the call is done."""
        if self.describe_completed_activity is not None and args is not None:
            try:
                label = self.describe_completed_activity(args, result)
                if label:
                    return str(label)
            except Exception:
                pass
        return None

    # -- permissions ----------------------------------------------------------------------------------
    # The permission hooks (`rule_matcher`, `read_only_call`, `suggest_grant`, a callable `edits_files`) are
    # called with the arguments; those that declare more parameters also get the call's `ToolContext`
    # (a third positional parameter, or one named `ctx`) and, for `rule_matcher`, the rule's `action`
    # ("allow", "ask", "deny" or "grant": a parameter named `action`), so a tool can match an allow rule
    # strictly and a deny rule broadly.
    def matches_pattern(self, pattern: str, args: Arguments, ctx: ToolContext | None = None,
                        *, action: str = "allow") -> bool:
        """Whether a rule's argument pattern (`shell(git status*)`) covers these arguments.

        Without a `rule_matcher`, the pattern is an `fnmatch` glob over the tool's permission subject (its
        `permission_subject`, by default its first required string parameter).
        """
        if self._rule_matcher is not None:
            return bool(self._rule_matcher(pattern, args, ctx=ctx, action=action))
        subject = self.permission_subject(args) if self.permission_subject else None
        return subject is not None and fnmatch.fnmatchcase(subject, pattern)

    async def unavailable(self) -> str | None:
        """Why the tool cannot run now (None: it can). Checked before permission is asked, so a call that
        cannot run fails first, without asking anyone (an MCP server that does not start, say)."""
        return None

    def is_read_only_call(self, args: Arguments, ctx: ToolContext | None = None) -> bool:
        """Whether this particular call only reads (auto-allowed by the permission pipeline)."""
        if self.read_only:
            return True
        if self._read_only_call is not None:
            try:
                return bool(self._read_only_call(args, ctx=ctx))
            except Exception:
                return False
        return False

    def is_edit_call(self, args: Arguments, ctx: ToolContext | None = None) -> bool:
        """Whether this call edits files in the workspace (what the `acceptEdits` mode allows): it says so,
        and it is known what it writes (`written_paths`), so that `protected_write_reason` judged it."""
        if self._edits_files is not None:
            try:
                edits = bool(self._edits_files(args, ctx=ctx))
            except Exception:
                return False
        else:
            edits = bool(self.edits_files)
        return edits and self.written_paths(args, ctx) is not None

    def written_paths(self, args: Arguments, ctx: ToolContext | None = None) -> list[Any] | None:
        """The files this call writes (`writes`; for a tool that edits files, by default its permission
        subject), or None when that cannot be told (or the tool writes no files it knows of)."""
        if self._writes is not None:
            try:
                found = self._writes(args, ctx=ctx)
            except Exception:
                return None
            return None if found is None else [p for p in found if p is not None]
        if not self.edits_files or self.permission_subject is None:
            return None
        try:
            subject = self.permission_subject(args)
        except Exception:
            return None
        return [subject] if isinstance(subject, str) and subject else None

    def protected_write_reason(self, args: Arguments, ctx: ToolContext | None = None) -> str | None:
        """Why this call writes something that can run programs, told by kind (`nbagent.safety.protected.
        write_reason` over `written_paths`), then by the tool's own `protected_write`; None when it does not.
        Such a call always asks. A check that fails counts as a yes (fails closed)."""
        try:
            paths = self.written_paths(args, ctx)
            if paths:
                root = getattr(getattr(ctx, "constraints", None), "workspace", None)
                reason = protected.write_reason(paths, os.fspath(root) if root is not None else None)
                if reason:
                    return reason
            if self._protected_write is not None:
                reason = self._protected_write(args, ctx=ctx)
                if reason:
                    return str(reason)
        except Exception as exc:
            return f"it could not be checked whether this writes configuration that can run programs ({exc})"
        return None

    def suggested_scope(self, args: Arguments, ctx: ToolContext | None = None) -> str | None:
        """The argument pattern an "always allow" of this call would cover (None: the whole tool; "": none
        could be made, so nothing is granted).

        A suggester that fails on these arguments (which the model wrote) suggests nothing: never the whole tool."""
        if self._suggest_grant is None:
            return None
        try:
            suggested = self._suggest_grant(args, ctx=ctx)
        except Exception:
            return ""
        return suggested if suggested is None or isinstance(suggested, str) else ""

    def spec(self) -> dict[str, Any]:
        """The provider-neutral definition: name, description, parameters (and strict when set)."""
        out: dict[str, Any] = {"name": self.name, "description": self.description, "parameters": self.parameters}
        if self.strict is not None:
            out["strict"] = self.strict
        return out


def _flexible(fn: Callable[..., Any], positional: int) -> Callable[..., Any]:
    """Adapt a permission hook to be called as `f(*positional_args, ctx=..., action=...)`.

    The hook gets `ctx` when it declares a parameter named `ctx` or one positional parameter more than
    `positional`, and `action` when it declares a parameter named `action` (or `**kwargs`).
    """
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return lambda *a, ctx=None, action=None: fn(*a)
    names = {p.name for p in params}
    var_kw = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params)
    var_pos = any(p.kind is inspect.Parameter.VAR_POSITIONAL for p in params)
    pos = [p for p in params if p.kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
           and p.name not in ("ctx", "action")]
    ctx_by_name = "ctx" in names
    ctx_by_position = not ctx_by_name and (len(pos) > positional or var_pos)
    action_by_name = "action" in names or var_kw

    def call(*a: Any, ctx: Any = None, action: Any = None) -> Any:
        kwargs: dict[str, Any] = {}
        if ctx_by_name:
            kwargs["ctx"] = ctx
        if action_by_name:
            kwargs["action"] = action
        if ctx_by_position:
            return fn(*a, ctx, **kwargs)
        return fn(*a, **kwargs)

    return call


def _as_subject(value: Any) -> str | None:
    return None if value is None else str(value)


def _default_subject(parameters: dict[str, Any]) -> Callable[[Arguments], str | None] | None:
    """Rules like `get_weather(Par*)` match the tool's first required string parameter."""
    props = parameters.get("properties", {})
    for key in parameters.get("required", []):
        if isinstance(props.get(key), dict) and props[key].get("type") == "string":
            return lambda args, key=key: _as_subject(args.get(key))
    return None


def _validation_error() -> type[Exception]:
    from pydantic_core import ValidationError

    return ValidationError


def tool(fn: Callable[..., Any] | None = None, /, **options: Any) -> Any:
    """Make a function a tool. Use as `@tool`, `@tool(...)`, or `tool(name=..., json_schema=...)(fn)`.

    The options are `Tool`'s, stated and documented once there (`help(Tool)`): name, description,
    json_schema, strict, namespace, execution_mode, read_only, timeout, describe_activity, ...
    An unknown option is a `TypeError` when the tool is defined.
    """
    unknown = set(options) - _OPTIONS
    if unknown:
        raise TypeError(f"tool() got unknown option(s) {', '.join(sorted(unknown))}; the options are: "
                        f"{', '.join(sorted(_OPTIONS))}")
    # Names local to the defining scope (a class defined in a function, say) resolve string annotations.
    caller = sys._getframe(1)
    localns = dict(caller.f_locals) if caller.f_locals is not caller.f_globals else None
    if fn is None:
        return lambda f: Tool(f.fn if isinstance(f, Tool) else f, **options, _localns=localns)
    if isinstance(fn, Tool):
        fn = fn.fn
    return Tool(fn, **options, _localns=localns)


_OPTIONS = frozenset(p for p in inspect.signature(Tool.__init__).parameters if p not in ("self", "fn", "_localns"))
tool.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
    [inspect.Parameter("fn", inspect.Parameter.POSITIONAL_ONLY, default=None)]
    + [p for name, p in inspect.signature(Tool.__init__).parameters.items() if name in _OPTIONS],
    return_annotation=Any,
)


def as_tool(obj: Any) -> Tool:
    """A `Tool` as is; a plain function made into one."""
    if isinstance(obj, Tool):
        return obj
    if callable(obj):
        return Tool(obj)
    raise TypeError(f"not a tool or a function: {obj!r}")
