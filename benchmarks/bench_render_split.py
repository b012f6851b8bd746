"""Where a planner widget's move goes (issue 38, render34): each move of a participant's walk
(benchmarks/bench_widget_ab.py ``--participant``: a model pick, then every other control one step and back)
split into the planner's search (``planner.plan``), the figure's update (``charts.render_plan``), its draw on
the widget's canvas and PNG encoding (``widgets.dashboard._figure_png``, of it ``encode_png``) and the
summary's HTML (``summary_html``), in CPU ms (``time.process_time``) and the whole move's wall ms, medians by
move kind (a pick or another move; on a mixture of experts or a dense model, from the catalogue's
``is_moe``). Only moves to a setting not drawn before in the round count. One checkout, no A/B: this says
which part to work on; benchmarks/bench_widget_ab.py proves a change.

    PYTHONPATH=src .venv/bin/python benchmarks/bench_render_split.py [--widget long_context_widget]
        [--rounds N] [--picks N] [--profile FILE] [--by-control]

``--by-control`` (fast35): the moves by control instead (each control's step, on a mixture of experts or a
dense model; ``model`` is the pick), with the planner's search split further: ``search`` (``planner._search``:
what a new setting searches), of it ``fit`` (the memory fit, ``planner.fitting_plans``) and ``price``
(``planner.kept_price``), and ``answer`` (``planner.answer_frame``: days, cost, ranges, the front).

``--profile FILE``: also a cProfile of the render side alone (render_plan, _figure_png, summary_html), dumped
to FILE (read it with ``pstats``). Each round builds the widget anew with every kept search cleared and
freezes the build's objects (``gc.freeze``, as a page's first draw does). Does not assert.

Measured (render34, 2026-12-03, main 689d1d77, chapter 17's widget, 4 rounds of 10 picks, load 1.2-1.4;
CPU ms medians; wall of the whole move in brackets): other moves on a dense model 63.2 (64.2) = plan 25.8 +
render_plan 10.1 + draw and PNG 22.0 (of it PNG 3.6) + summary 0.3; other moves on a MoE 80.6 (81.3) = 46.1
+ 10.4 + 22.3 (3.7) + 0.3; dense picks 105.3 (107.0) = 66.4 + 8.1 + 24.6 (3.8) + 0.3; MoE picks (warm: no
search) 36.5 (36.9) = 0 + 10.9 + 24.8 (3.9) + 0.3. The render side is 33-36 ms of every kind of move; the
rest of a move (the dashboard's own work) ~0.8 ms. ``--profile`` slows the render side by about a fifth
(cProfile's own cost): read its shares, not its times. See /work/notes/s34/render34.md.
"""

from __future__ import annotations

import argparse
import collections
import cProfile
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import matplotlib  # noqa: E402

matplotlib.use("Agg")

import bench_widget_ab as B  # noqa: E402

import llmsizing.charts as charts  # noqa: E402
import llmsizing.planner as planner  # noqa: E402
import llmsizing.widgets as widgets  # noqa: E402
import llmsizing.widgets.dashboard as dashboard  # noqa: E402
from llmsizing.catalog import get_model  # noqa: E402

#: The parts timed, in the order printed: (label, module, name where the widgets look it up).
PARTS = (("plan", planner, "plan"), ("render_plan", charts, "render_plan"),
         ("draw+png", dashboard, "_figure_png"), ("png", dashboard, "encode_png"),
         ("summary", dashboard, "summary_html"))
#: The parts whose sum is the render side (all after the plan is known).
RENDER = ("render_plan", "draw+png", "summary")
#: ``--by-control``: the planner's parts timed as well (inside ``plan``).
PLAN_PARTS = (("search", planner, "_search"), ("fit", planner, "fitting_plans"),
              ("price", planner, "kept_price"), ("answer", planner, "answer_frame"))

NOW: collections.defaultdict = collections.defaultdict(float)        # CPU s per part in the current move
PROFILE: list = []


def _wrap(label: str, module, name: str) -> None:
    real = getattr(module, name)
    profiled = label in RENDER

    def timed(*a, **k):
        c0 = time.process_time()
        if profiled and PROFILE:
            PROFILE[0].enable()
        try:
            return real(*a, **k)
        finally:
            if profiled and PROFILE:
                PROFILE[0].disable()
            NOW[label] += time.process_time() - c0

    if hasattr(real, "cache_clear"):            # (the kept searches are cleared through it each round)
        timed.cache_clear = real.cache_clear
    setattr(module, name, timed)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--widget", default="long_context_widget")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--picks", type=int, default=10)
    ap.add_argument("--profile", default=None, metavar="FILE")
    ap.add_argument("--by-control", action="store_true",
                    help="by control (and MoE or dense), with the planner's search, fit, price and answer")
    args = ap.parse_args()
    if args.profile:
        PROFILE.append(cProfile.Profile())
    parts = PARTS + (PLAN_PARTS if args.by_control else ())
    names = B.kept_names()                       # (found by the functions themselves: before they are wrapped)
    for label, module, name in parts:
        _wrap(label, module, name)
    B.FREEZE.append(True)
    rows: dict = collections.defaultdict(list)
    real_move = B._timed_move

    def move(board, seen, got, label, ctrl, target):
        NOW.clear()
        n = len(got)
        real_move(board, seen, got, label, ctrl, target)
        if len(got) > n:                                   # (a setting not drawn before: timed)
            cpu, _, wall = got[label]
            what = label[1] if args.by_control else "pick" if label[1] == "model" else "other"
            kind = what + (" moe" if get_model(label[4]).is_moe else " dense")
            rows[kind].append((cpu, wall, dict(NOW)))

    B._timed_move = move
    print(f"load before: {os.getloadavg()[0]:.2f}")
    for _ in range(args.rounds):
        B.clear("llmsizing", names)
        B.participant_round(widgets, args.widget, args.picks, None)
    print(f"load after: {os.getloadavg()[0]:.2f}")

    def med(xs) -> float:
        return 1000 * statistics.median(xs)

    labels = [p[0] for p in parts]
    print(f"{args.widget}, CPU ms medians of the moves (wall: the whole move's)")
    print(f"{'kind':18s} {'n':>4s} {'move':>7s} {'wall':>7s} " + " ".join(f"{x:>11s}" for x in labels)
          + f" {'render side':>11s}")
    every = [r for kind in sorted(rows) for r in rows[kind]]
    for kind, rs in [*sorted(rows.items()), ("all", every)]:
        cells = [med([r[2].get(x, 0.0) for r in rs]) for x in labels]
        side = med([sum(r[2].get(x, 0.0) for x in RENDER) for r in rs])
        print(f"{kind:18s} {len(rs):4d} {med([r[0] for r in rs]):7.1f} {med([r[1] for r in rs]):7.1f} "
              + " ".join(f"{c:11.1f}" for c in cells) + f" {side:11.1f}")
    rest = [r[0] - sum(r[2].get(x, 0.0) for x in ("plan", *RENDER)) for r in every]
    print(f"rest of a move (the dashboard's own work), median {med(rest):.1f} ms")
    if PROFILE:
        PROFILE[0].dump_stats(args.profile)
        print(f"render side's profile: {args.profile}")


if __name__ == "__main__":
    main()
