"""Where the CPU of one new-setting move ("step") of chapter 12's and 17's planner widgets goes (issue 38;
wid33), in process (``time.process_time``), split by wrapping what a move calls:

* ``plan`` (``planner.plan`` and ``plans_within``: the search or its cut, with the answer frame);
* the render (``charts.render_plan``) and, inside it, each top-level piece it calls (exclusive: a piece
  called inside another wrapped piece counts in the outer one): the chosen plan's ``training_memory`` and
  ``step_time``, ``figure_axes`` (the kept axes emptied), ``_plan_groups``, ``_line``, ``_fast_hbars``,
  ``_step_time_bars``, ``_log_axis``, ``_kept_legend``, ``plan_notes`` and matplotlib's ``axvline``,
  ``text``, ``set_title``, ``set_xlabel``/``set_ylabel``, ``set_xlim``/``set_ylim``, ``add_line`` called
  from the render itself; ``render: rest`` is the render less these;
* ``draw`` (the widget canvas's ``FigureCanvasAgg.draw``), ``encode`` (``dashboard.encode_png``),
  ``summary_html`` and ``show`` (``Dashboard._show``: here without a kernel, so no message is serialised);
* ``update (all)``: the whole move as the dashboard runs it.

The walk: each model (a pick, timed apart), then each other control to a new setting (a step, timed) and
back (a kept answer, not timed), as benchmarks/bench_figure_parts.py walks them; no speculation
(``speculate=False``, as on Voila). Chapter 17's widget is built warm, as the book builds it.

    PYTHONPATH=src .venv/bin/python benchmarks/split_widget_move.py [17] [12] [--rounds N]

Prints per chapter the median and mean CPU ms of each part over the steps (each part's median is taken on
its own, so the medians need not add up; the means do). Does not assert (timings are not tests).

Measured 2026-12-03 07:59-08:01 UTC (main b90918cc, 2 cores shared with other sessions, load 4.3-4.5),
median CPU ms, chapter 17 (30 steps | 5 picks) and chapter 12 (32 steps | 8 picks):

    part                 ch17 step   ch17 pick   ch12 step   ch12 pick
    update (all)              69.5        96.7        68.1       107.6
    plan                      33.8        64.8        16.1        62.7
    render (all)              15.4        13.8        18.2        19.2
    draw                      18.3        17.4        19.0        18.7
    encode                     3.6         3.0         3.4         3.1
    summary_html, show         0.4         0.4         0.5         0.4

Inside the render (ch17 | ch12 steps): figure_axes (the kept axes emptied) 2.5 | 2.4, _plan_groups 2.4 |
3.5, _step_time_bars 1.8 | 1.5, _line 1.0 | 1.6, axvline 1.0 | 1.6, _fast_hbars 0.8 | 0.8, training_memory
and step_time 0.8 | 0.7, _log_axis 0.7 | 0.7, add_line 0.4 | 0.5, each other call < 0.4; the render's own
lines 2.6 | 2.9. A run at load ~2 (07:52 UTC) gave the same shape: ch17 steps update 66, plan 29-32, draw
17-20, render 15-18, encode 4; ch12 steps update 66, plan 18, draw 22, render 20, encode 4.

After wid33 (render_plan keeps the panels' artists on a widget's figure and updates them in place): run as
main, branch, main, branch (main as ``git archive`` on PYTHONPATH; 08:27-08:29 UTC, load 1.0-1.6), medians of
the steps: render ch17 13.0, 13.7 -> 8.2, 9.8 ms; ch12 18.2, 15.5 -> 8.4, 10.5 ms; draw unchanged (15.5-20
either side); encode 3.2-3.9 either side; plan as noisy as ever (ch17 29-36). The paired comparison of
whole moves: benchmarks/bench_widget_ab.py's docstring.
"""
from __future__ import annotations

import argparse
import collections
import statistics
import sys
import time
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_ch12_models import MODELS, STEPS  # noqa: E402
from bench_ch17_models import CONTROL_MOVES  # noqa: E402

#: Chapter 17's walk: the widget's default model first, then dense models of several sizes.
MODELS17 = ("llama-3.1-405b", "llama-3-8b", "llama-2-70b", "mistral-7b", "qwen-72b", "gpt-39b")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("chapters", nargs="*", help="17, 12 or both (the default)")
    ap.add_argument("--rounds", type=int, default=1, help="walks per chapter (a new widget each)")
    args = ap.parse_args()
    if not set(args.chapters) <= {"17", "12"}:
        ap.error(f"chapters must be 17 or 12, got {args.chapters}")

    from matplotlib.axes import Axes
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    import llmsizing.charts.time_money_plan as tmp
    import llmsizing.layouts as layouts
    import llmsizing.memory as memory
    import llmsizing.planner as planner
    from llmsizing import charts
    from llmsizing.widgets import dashboard, long_context_widget, planner_widget

    parts: dict = collections.defaultdict(float)
    state = {"on": False, "depth": 0, "render": False}

    def wrap(owner, name, part, *, nested=True, in_render=False):
        real = getattr(owner, name)

        def timed(*a, **k):
            if (not state["on"] or (nested and state["depth"])
                    or (in_render and not state["render"])):
                return real(*a, **k)
            if nested:
                state["depth"] += 1
            c0 = time.process_time()
            try:
                return real(*a, **k)
            finally:
                parts[part] += time.process_time() - c0
                if nested:
                    state["depth"] -= 1
        setattr(owner, name, timed)

    wrap(planner, "plan", "plan")
    wrap(planner, "plans_within", "plan")
    wrap(layouts, "step_time", "render: training_memory, step_time")
    wrap(memory, "training_memory", "render: training_memory, step_time")
    for name in ("figure_axes", "_plan_groups", "_line", "_fast_hbars", "_step_time_bars", "_log_axis",
                 "_kept_legend", "plan_notes"):
        wrap(tmp, name, f"render: {name}")
    for name in ("axvline", "text", "set_title", "set_xlabel", "set_ylabel", "set_xlim", "set_ylim",
                 "add_line"):
        wrap(Axes, name, f"render: Axes.{name}", in_render=True)
    wrap(FigureCanvasAgg, "draw", "draw")
    wrap(dashboard, "encode_png", "encode")
    wrap(dashboard, "summary_html", "summary_html")
    wrap(dashboard.Dashboard, "_show", "show")
    real_render = charts.render_plan

    def render(*a, **k):
        if not state["on"]:
            return real_render(*a, **k)
        state["render"] = True
        c0 = time.process_time()
        try:
            return real_render(*a, **k)
        finally:
            parts["render (all)"] += time.process_time() - c0
            state["render"] = False
    charts.render_plan = render
    wrap(dashboard.Dashboard, "update", "update (all)", nested=False)

    def timed_move(w, control, value) -> dict:
        parts.clear()
        state["on"] = True
        try:
            w.controls[control].value = value
        finally:
            state["on"] = False
        move = dict(parts)
        inside = sum(v for k, v in move.items() if k.startswith("render: "))
        move["render: rest"] = move.get("render (all)", 0.0) - inside
        return move

    for ch in args.chapters or ["17", "12"]:
        per_move: list[dict] = []
        picks: list[dict] = []
        for _ in range(args.rounds):
            if ch == "17":
                w, models, moves = long_context_widget(MODELS17[0], speculate=False), MODELS17, CONTROL_MOVES
            else:
                w, models, moves = planner_widget(speculate=False), MODELS, STEPS
            for m in models:
                if m != w.controls["model"].value:
                    picks.append(timed_move(w, "model", m))
                defaults = {c: w.controls[c].value for c, _ in moves}
                for c, value in moves:
                    per_move.append(timed_move(w, c, value))
                for c, _ in moves[::-1]:
                    w.controls[c].value = defaults[c]
        for kind, moved in (("steps", per_move), ("model picks", picks)):
            keys = sorted({k for d in moved for k in d}, key=lambda k: (k.startswith("render: "),
                                                                        -sum(d.get(k, 0) for d in moved)))
            print(f"chapter {ch}: {len(moved)} {kind}; CPU ms, median / mean")
            for k in keys:
                xs = [d.get(k, 0.0) * 1e3 for d in moved]
                print(f"  {k:44s} {statistics.median(xs):7.2f} {statistics.mean(xs):7.2f}")


if __name__ == "__main__":
    main()
