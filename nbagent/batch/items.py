"""The pieces of a batch that are plain data and rules: one item's result, an approval waiting in the
batch, how an item's prompt is made from it, and which failures are worth another attempt.

Reads: the inputs (the person's data, rendered into the prompt with `str.format`: a template that names a
key the item lacks is a clear error for that item, never an exception for the batch).
"""

from __future__ import annotations

import asyncio
import dataclasses
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

from ..decisions import Decision
from ..errors import AuthenticationError, ConfigurationError
from ..messages import Usage

__all__ = ["ItemResult", "PendingApproval", "jsonable", "render_prompt", "rows", "type_name", "worth_retrying"]

_NOT_RETRIED = (AuthenticationError, ConfigurationError)


@dataclass
class ItemResult:
    """One input's outcome. `status`: done, failed, cancelled (stopped while it ran) or pending (not run)."""

    index: int
    input: Any
    output: Any = None
    status: str = "pending"
    error: str | None = None
    usage: Usage = field(default_factory=Usage)
    cost: float | None = None
    attempts: int = 0
    key: str = ""
    label: Any = None
    """The input's label: its DataFrame index, else its position."""
    run: Any = field(default=None, repr=False)
    """The item's last `AgentRun` in this kernel (None for items taken from the store or a cluster)."""
    elapsed: float | None = None

    @property
    def tokens(self) -> int:
        return self.usage.input_tokens + self.usage.output_tokens


@dataclass
class PendingApproval:
    """A call of one item waiting for a person: `approve()`, `approve(all_like_this=True)` or `deny()`.

    "All like this" grants what `nbagent.calls.grants.batch_grant` says: for a file, its folder (the other items
    write their own files there), exactly as `label` says; call these on the batch's loop."""

    index: int
    request: Any
    future: asyncio.Future = field(repr=False)

    @property
    def grant(self) -> Any:
        """What "Approve all calls like this" grants (a `GrantLabel`; None: this call can only be approved once)."""
        from ..calls.grants import batch_grant

        return batch_grant(self.request)

    @property
    def label(self) -> str:
        """What "Approve all calls like this" grants, in words: exactly what `approve(all_like_this=True)` grants."""
        grant = self.grant
        return grant.short if grant is not None else f"{self.request.name} (approved once: no grant)"

    def approve(self, all_like_this: bool = False) -> None:
        """Approve this call; with `all_like_this`, grant exactly what `label` says (`grant_scope` of the one
        grant code single calls use). A call that can only be approved once is approved once, whatever asks."""
        if self.future.done():
            return
        from ..calls.grants import grant_scope

        grant = self.grant if all_like_this else None
        scope = grant_scope(grant) if grant is not None else None
        if scope is None:
            why = f"; allowed once: {self.request.name} is asked each time (no grant)" if all_like_this else ""
            self.future.set_result(Decision(True, reason="approved in the batch" + why))
            return
        self.future.set_result(Decision(True, remember=True, scope=scope,
                                        reason=f"approved in the batch: all calls like {self.label}"))

    def deny(self, reason: str = "denied by the user") -> None:
        if not self.future.done():
            self.future.set_result(Decision(False, reason=reason or "denied by the user"))


def rows(inputs: Any) -> tuple[list[Any], list[Any]]:
    """The items and their labels: a DataFrame gives one dict per row (labels: its index)."""
    if hasattr(inputs, "to_dict") and hasattr(inputs, "columns") and hasattr(inputs, "index"):
        return list(inputs.to_dict("records")), list(inputs.index)
    if isinstance(inputs, (str, bytes)) or not isinstance(inputs, Iterable):
        raise ConfigurationError(f"map() takes an iterable of inputs or a DataFrame, not {type(inputs).__name__}")
    items = list(inputs)
    return items, list(range(len(items)))


def render_prompt(prompt: str | Callable[[Any], Any], item: Any) -> Any:
    """The prompt of one item: the template filled from it (`{col}` a key of a dict, `{item}` the item)."""
    if callable(prompt):
        return prompt(item)
    values = dict(item) if isinstance(item, dict) else {}
    values.setdefault("item", item)
    try:
        return prompt.format_map(values)
    except KeyError as exc:
        raise ConfigurationError(f"the prompt names {{{exc.args[0]}}}, which this item does not have "
                                 f"(it has: {', '.join(map(str, values))})") from None
    except (IndexError, ValueError) as exc:
        raise ConfigurationError(f"the prompt is not a valid str.format template: {exc}") from None


def type_name(output_type: Any) -> str | None:
    if output_type is None:
        return None
    schema = getattr(output_type, "model_json_schema", None)
    try:
        return repr(schema()) if callable(schema) else repr(output_type)
    except Exception:
        return repr(output_type)


def jsonable(value: Any) -> Any:
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return dump(mode="json")
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    return value



def worth_retrying(error: BaseException | None) -> bool:
    """An item is run again after a failure that another attempt may cure: not a refused key, a bad
    configuration, or a request the provider refused as such (a 4xx other than 408, 409 and 429)."""
    if isinstance(error, _NOT_RETRIED):
        return False
    status = getattr(error, "status", None)
    return not (isinstance(status, int) and 400 <= status < 500 and status not in (408, 409, 429))
