"""How a batch looks: one HTML block (the notebook's static rendering, also the live view's body) and text.

    batch_html(batch)   progress bar, counts, throughput, tokens per minute against the limit, cost so far
                        and projected, the latest items with their answers (each opens its run's view); a
                        structured answer (`output_type`) shows one column per field
    batch_text(batch)   the same as lines, for scripts and logs

Both take `stopped`: why the batch can no longer go on though it did not end (the kernel stopped), said in
place of its status.

Render reads a batch's public attributes only (`results`, `counts()`, `limiter`, `elapsed`, `cost`...) and
imports nothing above data. Items' inputs and outputs are untrusted text (a DataFrame's strings, the model's
answers): they are escaped, never rendered as markup.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from ..budget.pricing import format_cost
from ..reprs import short_line
from ..safety.shown import shown_html

__all__ = ["answer_fields", "batch_html", "batch_summary", "batch_text", "item_line"]

LATEST = 8
"""How many of the latest ended items the view lists."""
_COLOURS = {"done": "#15803d", "failed": "#b91c1c", "cancelled": "#a16207"}


def _esc(text: Any) -> str:
    return shown_html(text)


def batch_summary(batch: Any) -> dict[str, Any]:
    """The numbers of the view: counts, throughput, tokens per minute, cost so far and projected."""
    counts = batch.counts()
    total = len(batch.results)
    ended = counts["done"] + counts["failed"] + counts["cancelled"]
    elapsed = max(batch.elapsed, 1e-9)
    state = batch.limiter.state() if getattr(batch, "limiter", None) is not None else {}
    cost = batch.cost
    ran = [r for r in batch.results if r.status in ("done", "failed") and r.cost is not None]
    projected = None
    if cost is not None and ran:
        projected = cost + (cost / len(ran)) * (total - ended)
    return {"total": total, "ended": ended, **counts, "per_second": ended / elapsed if ended else 0.0,
            "tokens_per_minute": state.get("tokens_per_minute") or 0.0,
            "tokens_limit": state.get("tokens_per_minute_limit"), "requests_limit": state.get("requests_per_minute"),
            "rate_limited": state.get("rate_limited", 0), "cost": cost, "projected": projected,
            "elapsed": batch.elapsed}


def answer_fields(value: Any) -> dict[str, Any] | None:
    """A structured answer's fields, in their order (a pydantic model, a dataclass or a dict); None: not one."""
    if isinstance(value, dict):
        return value
    fields = getattr(type(value), "model_fields", None)
    if isinstance(fields, dict) and hasattr(value, "model_dump"):
        return {name: getattr(value, name, None) for name in fields}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
    return None


def _columns(results: list[Any]) -> list[str]:
    """The fields of the answers shown, in the order they first appear (no columns when an answer is not structured)."""
    names: list[str] = []
    for r in results:
        if r.status != "done":
            continue
        fields = answer_fields(r.output)
        if fields is None:
            return []
        names += [str(k) for k in fields if str(k) not in names]
    return names


def item_line(result: Any) -> str:
    """One ended item as text: its position, status and answer (or error); a structured answer as `field: value`."""
    what = result.output if result.status == "done" else (result.error or "")
    fields = answer_fields(what) if result.status == "done" else None
    if fields is not None:
        what = " · ".join(f"{k}: {v}" for k, v in fields.items())
    return f"#{result.label} {result.status}: {short_line(what, 90)}"


def _latest(batch: Any) -> list[Any]:
    ended = [r for r in batch.results if r.status in ("done", "failed", "cancelled") and r.elapsed is not None]
    ended += [r for r in batch.results if r.status in ("done", "failed") and r.elapsed is None]
    return ended[-LATEST:][::-1]


def batch_text(batch: Any, *, stopped: str | None = None) -> str:
    s = batch_summary(batch)
    status = "stopped" if stopped else batch.status
    lines = [f"batch {batch.id} · {status} · {s['ended']}/{s['total']} items ({s['done']} done, "
             f"{s['running']} running, {s['waiting']} waiting for you, {s['failed']} failed)",
             f"{s['per_second']:.1f} items/s · {s['tokens_per_minute']:,.0f} tokens/min"
             + (f" of {s['tokens_limit']:,.0f}" if s["tokens_limit"] else "")
             + f" · {format_cost(s['cost'])}" + (f" (projected {format_cost(s['projected'])})" if s["projected"] else "")]
    if stopped:
        lines.append(f"stopped: {stopped}")
    elif batch.stop_reason:
        lines.append(f"stopped: {batch.stop_reason}")
    lines += [f"  {item_line(r)}" for r in _latest(batch)]
    return "\n".join(lines)


def batch_html(batch: Any, *, item_attrs: bool = False, stopped: str | None = None) -> str:
    """The batch as one HTML block. `item_attrs`: rows carry `data-item` (the live view opens them). `stopped`: why
    it can no longer go on (the kernel stopped), said in place of its status."""
    s = batch_summary(batch)
    share = s["ended"] / s["total"] if s["total"] else 1.0
    bar = (f'<div class="nbagent-batch-bar" style="background:#e5e7eb;height:8px;border-radius:4px">'
           f'<div style="width:{share * 100:.1f}%;background:#16a34a;height:8px;border-radius:4px"></div></div>')
    counts = " · ".join(f"{s[k]} {label}" for k, label in (("done", "done"), ("running", "running"),
                                                            ("waiting", "waiting for you"), ("failed", "failed")))
    tokens = f"{s['tokens_per_minute']:,.0f} tokens/min" + (f" of {s['tokens_limit']:,.0f}" if s["tokens_limit"] else "")
    cost = format_cost(s["cost"]) + (f" · projected {format_cost(s['projected'])}" if s["projected"] else "")
    # the cost is kept from the notebook's MathJax (dollar signs are money)
    cost = f'<span class="tex2jax_ignore mathjax_ignore">{_esc(cost)}</span>'
    status = "stopped" if stopped else batch.status
    head = (f'<div class="nbagent-batch-head"><b>batch {_esc(batch.id)}</b> · {_esc(status)} · '
            f'{s["ended"]}/{s["total"]} items · {_esc(counts)}</div>')
    stats = (f'<div class="nbagent-batch-stats">{s["per_second"]:.1f} items/s · {_esc(tokens)} · '
             f'{s["rate_limited"]} rate-limited · {cost}</div>')
    why = stopped or batch.stop_reason
    stop = (f'<div class="nbagent-batch-stop" style="color:#a16207">stopped: {_esc(why)}</div>' if why else "")
    latest = _latest(batch)
    columns = _columns(latest)
    cell = "padding:1px 10px 1px 0;text-align:left;vertical-align:top"
    rows = []
    if columns:
        heads = "".join(f'<th style="{cell};color:#6b7280;font-weight:600">{_esc(name)}</th>' for name in columns)
        rows.append(f'<tr><th style="{cell}"></th><th style="{cell}"></th>{heads}</tr>')
    for r in latest:
        attr = f' data-item="{r.index}" style="cursor:pointer"' if item_attrs and r.run is not None else ""
        colour = _COLOURS.get(r.status, "#6b7280")
        fields = answer_fields(r.output) if columns and r.status == "done" else None
        if fields is not None:
            answer = "".join(f'<td style="{cell}">{_esc(short_line(fields.get(name, ""), 80))}</td>' for name in columns)
        else:
            what = r.output if r.status == "done" else (r.error or "")
            span = f' colspan="{len(columns)}"' if columns else ""
            answer = f'<td style="{cell}"{span}>{_esc(short_line(what, 160))}</td>'
        rows.append(f'<tr{attr}><td style="{cell};color:#6b7280">#{_esc(r.label)}</td>'
                    f'<td style="{cell};color:{colour}">{_esc(r.status)}</td>{answer}</tr>')
    table = (f'<table class="nbagent-batch-items" style="border-collapse:collapse;margin-top:4px">{"".join(rows)}'
             '</table>') if latest else ""
    return (f'<div class="nbagent-batch" style="padding:6px 8px;border:1px solid #e5e7eb;border-radius:6px">'
            f'{head}{bar}{stats}{stop}{table}</div>')
