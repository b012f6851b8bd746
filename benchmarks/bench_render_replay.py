"""The render side of chapter 17's and chapter 12's widget moves, replayed (issue 38, draw36): the calls of
``charts.render_plan`` that bench_figure_parts.py's walk makes (each model, then each other control to a new
setting and back), recorded once, then replayed ``--rounds`` times on the widget's kept figure: the render,
the draw on the widget's canvas and the PNG (``dashboard.encode_png``), each timed in CPU ms
(``time.process_time``). No plan() search is timed (the walk's tables are given), so the render side is
measured without the planner's noise.

    PYTHONPATH=src .venv/bin/python benchmarks/bench_render_replay.py [17] [12] [--rounds N]
    .venv/bin/python benchmarks/bench_render_replay.py --base /work/main [--pairs 3] [--rounds N]

With ``--base`` (another checkout): A/B, one process per side and pair, this tree and ``--base`` in turn (odd
pairs this tree first), each with its own ``src`` on ``PYTHONPATH`` and this tree's walk; prints each side's
medians, the paired ratio (this / base) of each call's median, per pair, and whether every replayed figure's
pixels (a SHA-1 of the RGBA buffer) and summary are the same on both sides. Does not assert.

Measured (draw36, 2026-12-03, branch draw36 against main 96db8823, which differs from the branch's base
a9d92b3b in serving only; 3 pairs, --rounds 4, load 2.2-2.9 on 2 cores shared with other sessions): see
/work/notes/s36/draw36.md for the medians; every one of the 102 figures the same pixels and summary on both
sides.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
PARTS = ("render", "draw", "png")


def child(chapters, rounds: int) -> dict:
    """Record the walk's render_plan calls, replay them; {chapter: {part: [median s per call]}, digests}."""
    sys.path.insert(0, str(HERE))
    import matplotlib

    matplotlib.use("Agg")
    from bench_ch12_models import MODELS, STEPS
    from bench_ch17_models import CONTROL_MOVES, moe_models
    from bench_figure_parts import walk

    import numpy as np

    from llmsizing import charts
    from llmsizing.widgets import dashboard, long_context_widget, planner_widget

    real = charts.render_plan
    out: dict = {}
    for ch in chapters:
        got: list = []

        def record(*a, **k):
            got.append((a, dict(k)))
            return real(*a, **k)

        charts.render_plan = record
        try:
            if ch == "17":
                walk(long_context_widget("llama-3-8b", speculate=False), moe_models(), CONTROL_MOVES)
            else:
                walk(planner_widget(), MODELS, STEPS)
        finally:
            charts.render_plan = real
        times = {p: [[] for _ in got] for p in PARTS}
        digests = []
        for r in range(rounds + 1):                     # (the first round warms the kept texts: not timed)
            for i, (a, k) in enumerate(got):
                c0 = time.process_time()
                view = real(*a, **k)
                c1 = time.process_time()
                view.figure.canvas.draw()
                c2 = time.process_time()
                dashboard.encode_png(view.figure.canvas.buffer_rgba())
                c3 = time.process_time()
                if r:
                    for p, t in zip(PARTS, (c1 - c0, c2 - c1, c3 - c2)):
                        times[p][i].append(t)
                if r == rounds:
                    px = np.asarray(view.figure.canvas.buffer_rgba())
                    digests.append(hashlib.sha1(px.tobytes() + view.summary.encode()).hexdigest())
        out[ch] = {"calls": len(got), "digests": digests,
                   **{p: [statistics.median(ts) for ts in times[p]] for p in PARTS}}
    return out


def show(name: str, rec: dict) -> None:
    for ch, r in rec.items():
        whole = [sum(r[p][i] for p in PARTS) for i in range(r["calls"])]
        print(f"  {name:5s} chapter {ch}: {r['calls']} calls, median CPU ms "
              + ", ".join(f"{p} {1e3 * statistics.median(r[p]):.2f}" for p in PARTS)
              + f"; render side {1e3 * statistics.median(whole):.2f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("chapters", nargs="*", help="17, 12 or both (the default)")
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--base", type=Path, help="another checkout: A/B against it, a process per side and pair")
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    chapters = a.chapters or ["17", "12"]
    if not set(chapters) <= {"17", "12"}:
        ap.error(f"chapters must be 17 or 12, got {chapters}")
    if a.child:
        print(json.dumps(child(chapters, a.rounds)))
        return
    if a.base is None:
        show("this", child(chapters, a.rounds))
        return
    sides = [("this", HERE.parent), ("base", a.base.resolve())]
    runs: dict = {}
    for p in range(1, a.pairs + 1):
        for name, tree in (sides if p % 2 else sides[::-1]):
            env = {**os.environ, "PYTHONPATH": str(tree / "src")}
            load = os.getloadavg()[0]
            res = subprocess.run([sys.executable, __file__, *chapters, "--rounds", str(a.rounds), "--child"],
                                 env=env, capture_output=True, text=True, check=True, cwd=str(tree))
            runs[p, name] = json.loads(res.stdout.strip().splitlines()[-1])
            print(f"pair {p}, {name} ({tree}), load {load:.2f} -> {os.getloadavg()[0]:.2f}")
            show(name, runs[p, name])
    print("paired ratio this / base, median over the calls of each call's ratio (render side: all three):")
    for ch in chapters:
        for p in range(1, a.pairs + 1):
            t, b = runs[p, "this"][ch], runs[p, "base"][ch]
            cells = []
            for part in (*PARTS, "side"):
                if part == "side":
                    x = [sum(t[q][i] for q in PARTS) / sum(b[q][i] for q in PARTS) for i in range(t["calls"])]
                else:
                    x = [t[part][i] / b[part][i] for i in range(t["calls"]) if b[part][i] > 0]
                cells.append(f"{part} {statistics.median(x):.3f}")
            same = t["digests"] == b["digests"]
            print(f"  chapter {ch}, pair {p}: " + ", ".join(cells)
                  + f"; pixels and summaries the same: {same}")


if __name__ == "__main__":
    main()
