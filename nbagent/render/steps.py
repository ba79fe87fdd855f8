"""Which step of an approved plan a run is on, as the model says it.

A plan-first run's plan is a numbered list the person edited and approved; the run that carries it out is
asked (panel/prompts.py `follow_prompt`) to say, before each step, "Step N of M: ...". The step shown is the
last such line in what the model wrote in this run, named by the approved plan's own step N when the plan has
one. Nothing is inferred from the calls: a model that declares no step shows none, and the indicator is the
model's word, labelled as such ("nbagent says"), never a measure of progress.

What it reads: the model's text (untrusted): only a number pair and a short line are taken, and whoever draws
them escapes them (`step_html`) or writes them as text (the panel).
"""

from __future__ import annotations

import re
from typing import Any, Iterable

from .base import _esc

__all__ = ["MAX_STEP_TEXT", "declared_step", "plan_steps", "run_step", "step_html", "step_text"]

MAX_STEP_TEXT = 160
_ITEM = re.compile(r"^\s*(\d{1,3})[.)]\s+(\S.*)$")
_STEP = re.compile(r"\bstep\s+(\d{1,3})\s*(?:of|/)\s*(\d{1,3})\b", re.IGNORECASE)


def plan_steps(plan: str) -> list[str]:
    """The steps of a numbered plan ("1. ...", "2) ..."), in order; an unnumbered line continues the step
    before it (its first line only is kept)."""
    steps: list[str] = []
    for line in plan.splitlines():
        found = _ITEM.match(line)
        if found:
            steps.append(found.group(2).strip()[:MAX_STEP_TEXT])
    return steps


def declared_step(texts: Iterable[str]) -> tuple[int, int, str] | None:
    """The last "Step N of M: ..." in these texts (oldest first): (N, M, the rest of its line)."""
    last = None
    for text in texts:
        text = text or ""
        found = list(_STEP.finditer(text))
        for i, match in enumerate(found):
            n, m = int(match.group(1)), int(match.group(2))
            if 1 <= n <= m:  # its words: the rest of its line, up to the next step declared on it
                end = found[i + 1].start() if i + 1 < len(found) else len(text)
                words = text[match.end():end].split("\n", 1)[0].lstrip(" :.-\u2013\u2014").strip()
                last = (n, m, words[:MAX_STEP_TEXT])
    return last


def run_step(run: Any, steps: list[str] | None) -> dict[str, Any] | None:
    """The step a plan-following run is on, as its model declared it: {"n", "of", "text", "planned"} (`text`:
    the approved plan's step N, else the model's words; `planned`: how many steps the approved plan has), or
    None when the model declared none yet."""
    shown = getattr(run, "timeline", None)  # the responses as they came (one whose calls still run included)
    if shown is None:
        shown = getattr(run, "new_messages", ())
    texts = [str(getattr(m, "text", "") or "") for m in list(shown or ()) if getattr(m, "kind", "") == "assistant"]
    found = declared_step(texts)
    if found is None:
        return None
    n, m, said = found
    planned = len(steps or [])
    text = steps[n - 1] if steps and n <= len(steps) else said
    return {"n": n, "of": m, "text": text, "planned": planned}


def step_text(step: dict[str, Any]) -> str:
    """"Step 2 of 4: Divide by max(count, 1)" (and when the model counts other steps than the plan has, so)."""
    line = f"Step {step['n']} of {step['of']}"
    if step.get("text"):
        line += f": {step['text']}"
    if step.get("planned") and step["planned"] != step["of"]:
        line += f" (the approved plan has {step['planned']})"
    return line


def step_html(step: dict[str, Any] | None) -> str:
    """The live view's chip for it (empty when no step was declared)."""
    if not step:
        return ""
    line = step_text(step)
    return (f'<span class="nba-chip nba-step" title="{_esc("the step nbagent says it is on, of the plan you approved")}">'
            f'{_esc(line)}</span>')
