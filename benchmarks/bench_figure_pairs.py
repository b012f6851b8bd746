"""Figure work of a widget move, paired piece by piece in one process (issues 35, 38; fig29): chapter 12's
planner widget and chapter 17's long-context widget walked as benchmarks/bench_figure_parts.py walks them,
and at each move, old and new alternating (twice each, the order swapped from move to move):

* the figure drawn again with ``BASE``'s ``_PointCloud.draw`` and with this checkout's, and with
  matplotlib's ``Bbox.union`` and with the widgets' canvas's (``widgets/canvas.py``, which
  benchmarks/bench_widget_ab.py shares between its sides and so cannot compare): CPU and whether the
  pixels are equal;
* ``BASE``'s and this checkout's ``_plan_groups`` (kept groups cleared), ``_groups_key`` and ``_front_rows``
  on the move's table: CPU and whether the results are equal.

    PYTHONPATH=src .venv/bin/python benchmarks/bench_figure_pairs.py [BASE] [--chapters 12 17]

``BASE`` (a commit, default main): its ``src/llmsizing/charts/time_money_plan.py`` and ``plan_groups.py``
run in this checkout's package. Prints per chapter and piece the median CPU ms base -> new and the median of
the paired ratios. Does not assert (timings are not tests); a pixel or result that differs is printed.

Measured 2026-12-02 14:17-14:18 UTC (branch fig29 against 31b21ae2, load 3.4 -> 4.1), medians base -> new,
paired ratio, chapter 12 | 17: _plan_groups 5.17 -> 4.08 ms, 0.737 | 3.69 -> 2.88, 0.779; _groups_key 0.707 |
0.714; _front_rows 0.362 | 0.342; redraw with the cloud's draw 0.986 | 0.981, with the union 0.948 | 0.941;
every pixel and result equal.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
import types
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.transforms as mtransforms  # noqa: E402
import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
UNION = mtransforms.BboxBase.__dict__["union"]         # matplotlib's (before the canvas replaces it)

from bench_ch12_models import MODELS, STEPS  # noqa: E402
from bench_ch17_models import CONTROL_MOVES, moe_models  # noqa: E402
from bench_figure_parts import walk  # noqa: E402

from llmsizing import charts  # noqa: E402
from llmsizing.charts import plan_groups, time_money_plan  # noqa: E402
from llmsizing.widgets import dashboard, long_context_widget, planner_widget  # noqa: E402


def base_module(base: str, name: str):
    """``BASE``'s ``src/llmsizing/charts/NAME.py`` as a module of this checkout's package."""
    src = subprocess.run(["git", "-C", str(ROOT), "show", f"{base}:src/llmsizing/charts/{name}.py"],
                         capture_output=True, text=True, check=True).stdout
    mod = types.ModuleType(f"llmsizing.charts._base_{name}")
    mod.__package__ = "llmsizing.charts"
    exec(compile(src, f"{base}:{name}", "exec"), mod.__dict__)
    return mod


def rebound_draw(draw, cls):
    """``draw`` (a method using ``super()``, maybe wrapped by ``allow_rasterization``) bound to ``cls``."""
    from matplotlib.artist import allow_rasterization

    inner = getattr(draw, "__wrapped__", draw)
    if inner.__code__.co_freevars != ("__class__",):
        raise SystemExit("the base's _PointCloud.draw is not a plain method: cannot pair it")
    return allow_rasterization(types.FunctionType(inner.__code__, inner.__globals__, inner.__name__,
                                                  inner.__defaults__, (types.CellType(cls),)))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("base", nargs="?", default="main")
    ap.add_argument("--chapters", nargs="*", default=["12", "17"])
    args = ap.parse_args()
    old_plan, old_groups = base_module(args.base, "time_money_plan"), base_module(args.base, "plan_groups")
    cloud = time_money_plan._PointCloud
    draws = {"cloud": (rebound_draw(old_plan._PointCloud.draw, cloud), cloud.draw)}
    times: dict = {}
    unequal: list = []
    move = [0]
    real_png, real_render = dashboard._figure_png, charts.render_plan

    def pair(piece, old, new, same):
        out = {}
        for side, f in ((("old", old), ("new", new)) if move[0] % 2 else (("new", new), ("old", old))) * 2:
            c0 = time.process_time()
            got = f()
            times.setdefault(piece, {"old": [], "new": []})[side].append(time.process_time() - c0)
            out.setdefault(side, got)
        if not same(out["old"], out["new"]):
            unequal.append((piece, move[0]))

    def render(*a, **k):
        table = k.get("plans")
        if table is not None:
            bare = plan_groups._bare(table)
            front = np.flatnonzero(bare["pareto"].to_numpy(dtype=bool))

            def groups(mod):
                mod._PLAN_GROUPS_KEPT.clear()
                return repr(mod._plan_groups(bare))

            pair("_plan_groups", lambda: groups(old_groups), lambda: groups(plan_groups), str.__eq__)
            pair("_groups_key", lambda: old_groups._groups_key(bare), lambda: plan_groups._groups_key(bare),
                 lambda x, y: x == y)
            pair("_front_rows", lambda: repr(list(old_groups._front_rows(bare, front))),
                 lambda: repr(list(plan_groups._front_rows(bare, front))), str.__eq__)
        return real_render(*a, **k)

    def png(view):
        out = real_png(view)
        canvas = view.figure.canvas
        union = mtransforms.BboxBase.__dict__["union"]

        def drawn(cloud_draw=None, bbox_union=None):
            cloud.draw = cloud_draw or draws["cloud"][1]
            mtransforms.BboxBase.union = bbox_union or union
            try:
                canvas.draw()
            finally:
                cloud.draw, mtransforms.BboxBase.union = draws["cloud"][1], union
            return np.asarray(canvas.buffer_rgba()).copy()

        pair("redraw: _PointCloud.draw", lambda: drawn(cloud_draw=draws["cloud"][0]), drawn, np.array_equal)
        pair("redraw: Bbox.union", lambda: drawn(bbox_union=UNION), drawn, np.array_equal)
        move[0] += 1
        return out

    dashboard._figure_png, charts.render_plan = png, render
    load = [Path("/proc/loadavg").read_text().split()[0]]
    try:
        for ch in args.chapters:
            times.clear()
            if ch == "12":
                walk(planner_widget(), MODELS, STEPS)
            else:
                walk(long_context_widget("llama-3-8b", speculate=False), moe_models(), CONTROL_MOVES)
            for piece, t in times.items():
                ratios = [b / a for a, b in zip(t["old"], t["new"]) if a > 0]
                print(f"chapter {ch} {piece:26s} {len(ratios):4d} paired: CPU ms "
                      f"{statistics.median(t['old']) * 1e3:7.3f} -> {statistics.median(t['new']) * 1e3:7.3f}"
                      f", ratio {statistics.median(ratios):.3f}")
    finally:
        dashboard._figure_png, charts.render_plan = real_png, real_render
    load.append(Path("/proc/loadavg").read_text().split()[0])
    print(f"base {args.base}; unequal (piece, move): {unequal or 'none'}; load average (1 min) before and "
          f"after: {', '.join(load)}")


if __name__ == "__main__":
    main()
