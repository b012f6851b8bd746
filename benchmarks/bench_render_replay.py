"""The render side of chapter 17's and chapter 12's widget moves, replayed (issue 38, draw36): the calls of
``charts.render_plan`` that bench_figure_parts.py's walk makes (each model, then each other control to a new
setting and back), recorded once, then replayed ``--rounds`` times on the widget's kept figure: the render,
the draw on the widget's canvas and the PNG (``dashboard.encode_png``), each timed in CPU ms
(``time.process_time``). No plan() search is timed (the walk's tables are given), so the render side is
measured without the planner's noise.

    PYTHONPATH=src .venv/bin/python benchmarks/bench_render_replay.py [17] [12] [--rounds N] [--base REV]

With ``--base REV`` (a commit, e.g. main): A/B in ONE process, as benchmarks/bench_widget_ab.py does: REV's
``src`` and ``data`` (``git archive``) imported as ``llmsizing_base``, the widgets' canvas modules shared;
each side walks its own widget, then the replay alternates the sides call by call (the order swapped each
round), so the load of a shared machine falls on both alike. Prints each side's medians, the median over
the calls of each call's paired ratio (this / base) per part and for the render side, and whether every
replayed figure's pixels (a SHA-1 of the RGBA buffer) and summary are the same on both sides. The PNG's
ratio is a control: its code is the same on both sides unless ``encode_png`` changed. Does not assert.

Measured (draw36, 2026-12-03, branch draw36 against main 96db8823, which differs from the branch's base only
in serving; one process, 15:57-15:59 UTC, load 0.9-2.4 on 2 cores shared with other sessions; CPU ms,
medians of the calls, base -> branch, and the median paired ratio): ``--rounds 3``: chapter 17 (61 calls)
render 9.55 -> 8.07 (0.867), draw 12.67 -> 13.08 (1.000), PNG 2.93 -> 3.20 (0.991, the control), render
side 26.10 -> 24.33 (0.942); chapter 12 (41 calls) render 8.44 -> 7.99 (0.890), draw 1.031, PNG 0.989, side
25.45 -> 25.54 (0.956). ``--rounds 4``: chapter 17 render 10.00 -> 8.62 (0.869), draw 0.988, PNG 1.016,
side 27.07 -> 26.25 (0.942); chapter 12 render 11.07 -> 9.40 (0.854), draw 0.996, PNG 1.004, side 32.57 ->
30.34 (0.963). Every figure's pixels and summary the same on both sides. The render is 13-15% shorter (the
gpu column factorized once, the chosen row read off the arrays, _log_axis without set_ticks); the draw
takes over the ticks' creation that set_ticks did in the render, so the render side gains ~4-6%.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_ch12_models import MODELS, STEPS  # noqa: E402
from bench_ch17_models import CONTROL_MOVES, moe_models  # noqa: E402
from bench_figure_parts import walk  # noqa: E402

PARTS = ("render", "draw", "png")
#: The widgets' canvas modules, shared by both sides (they patch matplotlib's classes once per process).
SHARED = ("widgets.pixels", "widgets.canvas")


def recorded(package: str, chapter: str) -> list:
    """The (args, kwargs) of every ``charts.render_plan`` call of ``package``'s widget walked."""
    charts = importlib.import_module(f"{package}.charts")
    widgets = importlib.import_module(f"{package}.widgets")
    real, got = charts.render_plan, []

    def record(*a, **k):
        got.append((a, dict(k)))
        return real(*a, **k)

    charts.render_plan = record
    try:
        if chapter == "17":
            walk(widgets.long_context_widget("llama-3-8b", speculate=False), moe_models(), CONTROL_MOVES)
        else:
            walk(widgets.planner_widget(), MODELS, STEPS)
    finally:
        charts.render_plan = real
    return got


def one(package: str, call) -> tuple:
    """One replayed call: (render s, draw s, PNG s, digest of the pixels and the summary)."""
    import numpy as np

    charts = sys.modules[f"{package}.charts"]
    encode = sys.modules[f"{package}.widgets.dashboard"].encode_png
    a, k = call
    c0 = time.process_time()
    view = charts.render_plan(*a, **k)
    c1 = time.process_time()
    view.figure.canvas.draw()
    c2 = time.process_time()
    encode(view.figure.canvas.buffer_rgba())
    c3 = time.process_time()
    px = np.asarray(view.figure.canvas.buffer_rgba())
    return c1 - c0, c2 - c1, c3 - c2, hashlib.sha1(px.tobytes() + view.summary.encode()).hexdigest()


def show(name: str, chapter: str, times: dict) -> None:
    whole = [sum(times[p][i] for p in PARTS) for i in range(len(times["render"]))]
    print(f"  {name:5s} chapter {chapter}: {len(whole)} calls, median CPU ms "
          + ", ".join(f"{p} {1e3 * statistics.median(times[p]):.2f}" for p in PARTS)
          + f"; render side {1e3 * statistics.median(whole):.2f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("chapters", nargs="*", help="17, 12 or both (the default)")
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--base", default=None, help="a commit: A/B against it in this process")
    a = ap.parse_args()
    chapters = a.chapters or ["17", "12"]
    if not set(chapters) <= {"17", "12"}:
        ap.error(f"chapters must be 17 or 12, got {chapters}")
    sides = ["llmsizing"]
    tmp = None
    if a.base:
        tmp = Path(tempfile.mkdtemp(prefix="render_replay_"))
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", a.base, "src", "data"],
                                 capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", str(tmp)], input=archive, check=True)
        (tmp / "src" / "llmsizing").rename(tmp / "src" / "llmsizing_base")
        sys.path.insert(0, str(tmp / "src"))
        for m in SHARED:
            sys.modules[f"llmsizing_base.{m}"] = importlib.import_module(f"llmsizing.{m}")
        sides = ["llmsizing_base", "llmsizing"]
    try:
        import os

        print(f"load before: {os.getloadavg()[0]:.2f}")
        for ch in chapters:
            calls = {pkg: recorded(pkg, ch) for pkg in sides}
            n = len(calls["llmsizing"])
            if any(len(c) != n for c in calls.values()):
                print(f"chapter {ch}: the sides' walks drew {[len(c) for c in calls.values()]} figures")
                continue
            times = {pkg: {p: [[] for _ in range(n)] for p in PARTS} for pkg in sides}
            digests = {pkg: [None] * n for pkg in sides}
            for r in range(a.rounds + 1):           # (the first round warms the kept texts: not timed)
                for i in range(n):
                    for pkg in (sides if (r + i) % 2 else sides[::-1]):
                        *t, digest = one(pkg, calls[pkg][i])
                        digests[pkg][i] = digest
                        if r:
                            for p, x in zip(PARTS, t):
                                times[pkg][p][i].append(x)
            med = {pkg: {p: [statistics.median(x) for x in times[pkg][p]] for p in PARTS} for pkg in sides}
            for pkg in sides:
                show("base" if pkg == "llmsizing_base" else "this", ch, med[pkg])
            if len(sides) == 2:
                t, b = med["llmsizing"], med["llmsizing_base"]
                cells = [f"{p} {statistics.median(t[p][i] / b[p][i] for i in range(n)):.3f}" for p in PARTS]
                side = statistics.median(sum(t[p][i] for p in PARTS) / sum(b[p][i] for p in PARTS)
                                         for i in range(n))
                same = digests["llmsizing"] == digests["llmsizing_base"]
                print(f"  chapter {ch}, paired ratio this / base (median over the calls): " + ", ".join(cells)
                      + f", render side {side:.3f}; pixels and summaries the same: {same}")
        print(f"load after: {os.getloadavg()[0]:.2f}")
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
