"""Where the figure's CPU of a widget move goes (issues 35, 38): chapter 17's ``long_context_widget`` and
chapter 12's ``planner_widget`` walked as bench_ch17_models.py --controls and bench_ch12_models.py --steps
walk them (each model, then each other control to a new setting and back), every move timed in three parts:
the render (``charts.render_plan``, the plans given by the widget's cache where it holds them), the draw
(``figure.canvas.draw()`` on the widget's own canvas) and the PNG encode (``dashboard.encode_png``); and the
draw split by the artists it draws (each axes' children, by type; ``--artists``).

    PYTHONPATH=src .venv/bin/python benchmarks/bench_figure_parts.py [17] [12] [--artists]

Prints, per chapter, the median CPU ms (``time.process_time``) of each part over the moves that drew, and with
``--artists`` the mean CPU ms per move of each axes and of its children by type. Does not assert (timings are
not tests).

Measured 2026-12-02 (main 30d8d28, 06:32-06:36 UTC, load 1.6-2.3 on 2 cores shared with other sessions):
chapter 17, 61 moves: render 12-13, draw 13, encode 2.7-2.8 ms (sum 29); chapter 12, 41 moves: render 12-17,
draw 13-17, encode 2.9-3.1 (sum 28-37). The draw's largest parts (--artists): the planner's legend 2.2-2.7
(drawn afresh at nearly every move: what lies under it, the point cloud and the fronts, changes with the table
and shows through its frame, so its kept pixels match at ~1 move in 4); the point cloud 1.7-1.8; each of the
six axes (ticks and labels) 0.7-1.2, 6 in all; the titles and other texts 0.2-0.3 each. Branch speed26b
(a legend drawn afresh checks its region's edges only) against main, alternated, three pairs 06:39-06:40 UTC
(load 2.2-2.7): the planner's legend 2.49-3.16 -> 2.27-2.41 ms a move (chapter 17), 3.06-3.77 -> 2.96-2.98
(chapter 12); the sums moved by more than that from run to run (29-39 ms).
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
from bench_ch17_models import CONTROL_MOVES, moe_models  # noqa: E402

from llmsizing import charts  # noqa: E402
from llmsizing.widgets import dashboard, long_context_widget, planner_widget  # noqa: E402


def walk(w, models, moves) -> None:
    """Each model, then each other control to its new setting (timed) and back (kept answers: no draw)."""
    for m in models:
        w.controls["model"].value = m
        defaults = {c: w.controls[c].value for c, _ in moves}
        for c, value in moves:
            w.controls[c].value = value
        for c, _ in moves[::-1]:
            w.controls[c].value = defaults[c]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("chapters", nargs="*", help="17, 12 or both (the default)")
    ap.add_argument("--artists", action="store_true", help="also split the draw by axes and artist type")
    args = ap.parse_args()
    if not set(args.chapters) <= {"17", "12"}:
        ap.error(f"chapters must be 17 or 12, got {args.chapters}")
    import matplotlib.axes._base as axes_base

    parts: dict = {"render": [], "draw": [], "encode": []}
    by_artist: collections.Counter = collections.Counter()
    real_render, real_png, real_list = charts.render_plan, dashboard._figure_png, axes_base.mimage.\
        _draw_list_compositing_images

    def render(*a, **k):
        c0 = time.process_time()
        try:
            return real_render(*a, **k)
        finally:
            parts["render"].append(time.process_time() - c0)

    def png(view):
        c0 = time.process_time()
        view.figure.canvas.draw()
        c1 = time.process_time()
        out = dashboard.encode_png(view.figure.canvas.buffer_rgba())
        parts["draw"].append(c1 - c0)
        parts["encode"].append(time.process_time() - c1)
        return out

    def each_artist(renderer, parent, artists, suppress_composite=None):
        if type(parent).__name__ != "Axes":
            return real_list(renderer, parent, artists, suppress_composite)
        place = parent.get_figure(root=True).axes.index(parent)
        for a in artists:
            c0 = time.process_time()
            real_list(renderer, parent, [a], suppress_composite)
            by_artist[f"axes {place}: {type(a).__name__}"] += time.process_time() - c0

    charts.render_plan, dashboard._figure_png = render, png
    if args.artists:
        axes_base.mimage._draw_list_compositing_images = each_artist
    try:
        for ch in args.chapters or ["17", "12"]:
            for v in parts.values():
                v.clear()
            by_artist.clear()
            if ch == "17":
                walk(long_context_widget("llama-3-8b", speculate=False), moe_models(), CONTROL_MOVES)
            else:
                walk(planner_widget(), MODELS, STEPS)
            n = min(len(v) for v in parts.values())
            total = [sum(parts[k][i] for k in parts) for i in range(n)]
            print(f"chapter {ch}: {n} moves drawn; median CPU ms "
                  + ", ".join(f"{k} {statistics.median(v) * 1e3:.1f}" for k, v in parts.items())
                  + f"; sum {statistics.median(total) * 1e3:.1f}")
            for k, v in sorted(by_artist.items(), key=lambda kv: -kv[1]):
                if v / n >= 1e-4:
                    print(f"    {k:36s} {v / n * 1e3:6.2f} ms a move")
    finally:
        charts.render_plan, dashboard._figure_png = real_render, real_png
        axes_base.mimage._draw_list_compositing_images = real_list


if __name__ == "__main__":
    main()
