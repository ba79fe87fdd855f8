"""What the page sanitizer adds to rendering a run's view.

    python bench/sanitize.py [--results 50] [--rounds 7] [--clock cpu|wall]

One finished run (ScriptedModel) with N tool calls: each returns a DataFrame (30 rows x 6 columns), every
fifth a pandas Styler with colours instead, and each turn's text is a paragraph of Markdown with a list, a
link and code. The whole view (`render.run_html`, what the live view's rows and the saved notebook are
made of) is rendered:

- without the sanitizer (replaced by the identity, in the same process);
- sanitized cold (`nbagent.safety.sanitize`'s nh3 pass on every result's HTML and every Markdown paragraph, its
  cache bypassed: the first time a view draws them);
- sanitized with its cache (a view drawing the same results again: the run's end, the saved form);
- with the alternative measured for comparison: each result's HTML put into a sandboxed frame
  (`<iframe sandbox="" srcdoc="...">`) instead of being cleaned.

Rounds alternate the variants; the median and the best of the rounds are reported, with the ratio to the unsanitized
rendering, and the ratio over a view's life (each result drawn three times, sanitized once). On a busy
machine those ratios swing by 10% from run to run, so the sanitizer's own time inside the cold renders is
reported too (each call timed, summed), as a share of the unsanitized render. Goal: sanitizing adds under
10% to a run view's render time.
"""

from __future__ import annotations

import argparse
import html
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import pandas as pd  # noqa: E402

from nbagent import Agent, AssistantMessage, ScriptedModel, ToolCall, ToolResult, render, tool
from nbagent.safety import sanitize  # noqa: E402

TEXT = ("Here is what I found in **the data** so far:\n\n- the `revenue` column has 3 gaps\n- see "
        "[the docs](https://pandas.pydata.org/docs/) for `fillna`\n\n```python\ndf.fillna(0)\n```\n")


def make_run(n: int):
    frames = [pd.DataFrame({f"col{j}": [f"value {i}-{j} <b>x</b>" if j % 2 else i * j for i in range(30)]
                            for j in range(6)}) for _ in range(n)]

    @tool(read_only=True)
    def load(i: int) -> ToolResult:
        """Load a table."""
        df = frames[i]
        details = df.style.highlight_max(color="lightgreen") if i % 5 == 4 else df
        return ToolResult(f"table {i}", details=details)

    turns = [AssistantMessage(text=TEXT, tool_calls=[ToolCall(name="load", arguments={"i": i})]) for i in range(n)]
    return Agent(model=ScriptedModel(turns + ["Done: " + TEXT]), tools=[load], max_turns=n + 5).run_sync("Load the tables")


CLOCK = time.process_time


def timed(fn, repeat: int) -> float:
    t0 = CLOCK()
    for _ in range(repeat):
        fn()
    return (CLOCK() - t0) / repeat


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--results", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--clock", choices=("cpu", "wall"), default="cpu",
                        help="process CPU time (default: steadier on a busy machine; nh3 runs on this thread) or wall")
    opts = parser.parse_args()
    global CLOCK
    CLOCK = time.process_time if opts.clock == "cpu" else time.perf_counter
    run = make_run(opts.results)
    real = sanitize.sanitize_html

    def identity(markup, **_):
        return markup

    def framed(markup, *, wrap=True, **kw):
        if not wrap:
            return real(markup, wrap=False, code_blocks=kw.get("code_blocks", False))  # Markdown and links are inline: a frame each is not an option
        return f'<iframe sandbox="" srcdoc="{html.escape(markup, quote=True)}" style="width:100%;border:0"></iframe>'

    def cold(markup, **kw):
        return sanitize._sanitize(markup, kw.get("wrap", True), kw.get("scope"), kw.get("code_blocks", False))

    spent = [0.0]

    def cold_timed(markup, **kw):
        t0 = CLOCK()
        try:
            return cold(markup, **kw)
        finally:
            spent[0] += CLOCK() - t0

    variants = {"without the sanitizer": identity, "sanitized, cold": cold, "sanitized, cached": real,
                "sandboxed frame": framed}
    times: dict[str, list[float]] = {k: [] for k in variants}
    own: list[float] = []
    render.run_html(run)  # warm up: imports, the Cleaner, pandas' templates
    for _ in range(opts.rounds):
        for name, fn in variants.items():
            sanitize.sanitize_html = fn
            try:
                times[name].append(timed(lambda: render.run_html(run), opts.repeat))
            finally:
                sanitize.sanitize_html = real
        sanitize.sanitize_html, spent[0] = cold_timed, 0.0
        try:
            timed(lambda: render.run_html(run), opts.repeat)
            own.append(spent[0] / opts.repeat)
        finally:
            sanitize.sanitize_html = real
    size = len(render.run_html(run))
    print(f"run view with {opts.results} results (DataFrames 30x6, every fifth a Styler) and {opts.results + 1} "
          f"Markdown paragraphs; {size:,} characters of HTML; median of {opts.rounds} rounds x {opts.repeat}; "
          f"{opts.clock} time")
    for label, pick in (("median", statistics.median), ("best round", min)):
        base = pick(times["without the sanitizer"])
        print(f" {label} of the rounds:")
        for name, values in times.items():
            value = pick(values)
            print(f"  {name:24s} {value * 1000:8.1f} ms   {value / base:5.3f}x   "
                  f"{(value - base) / opts.results * 1e6:+7.0f} µs per result")
        # a view's life: a result is drawn three times (its row as the call ends, the rows again as the run
        # ends, the static rendering that replaces the widgets); only the first sanitizes it
        life = (pick(times["sanitized, cold"]) + 2 * pick(times["sanitized, cached"])) / (3 * base)
        print(f"  a view's life (1 cold + 2 cached renders against 3 unsanitized): {life:5.3f}x")
    shares = sorted(value / base for value, base in zip(own, times["without the sanitizer"]))
    pandas_html = [c.result.details._repr_html_() for c in run.calls]
    short = sum(sanitize._pandas_table(h) is not None for h in pandas_html)
    print(f" the sanitizer's own time in a cold render (each call timed): median "
          f"{statistics.median(own) * 1000:.1f} ms, {statistics.median(shares):.1%} of the same round's "
          f"unsanitized render (rounds: {shares[0]:.1%} to {shares[-1]:.1%}); {short} of {len(pandas_html)} "
          "results' HTML read as pandas' regular markup, without nh3")
    # the sanitizer alone, on one result's HTML, for scale
    one = run.calls[0].result.details._repr_html_()
    styled = run.calls[4].result.details._repr_html_()
    print(f"  the sanitizer on one DataFrame's HTML ({len(one):,} chars): {timed(lambda: cold(one), 200) * 1e6:.0f} "
          f"µs; on one Styler's ({len(styled):,} chars): {timed(lambda: cold(styled), 200) * 1e6:.0f} µs (nh3 "
          f"alone: {timed(lambda: sanitize._nh3().clean(one), 200) * 1e6:.0f} and "
          f"{timed(lambda: sanitize._nh3().clean(styled), 200) * 1e6:.0f} µs); pandas' own _repr_html_: "
          f"{timed(lambda: run.calls[0].result.details._repr_html_(), 50) * 1e6:.0f} µs")


if __name__ == "__main__":
    main()
