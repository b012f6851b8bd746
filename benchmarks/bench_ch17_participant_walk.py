"""tests/browser/measure_participant.py's walk of chapter 17's widget replayed in one process, no browser and
no kernel (issue 38, speed41): the kernel-free CPU of the moves the participant makes, so that the
participant's painted times can be split into what the widget's Python costs and what the kernel, the
transport and the browser add.

The moves are measure_participant.participant's, in its order: a model pick (mixtures of experts and dense
models in turn, bench_kernel_moves.MOE; the dense ones in the drop-down's order, taken 7 apart), then every
other control one step and back: the context 128K -> 256K, a second GPU type (A10, the multi-select's first
option not chosen), tokens per batch 16M -> 8M, max GPUs 16,384 -> 8,192, the K/V exchange ring -> all-gather.
The widget is built as the book builds it (``warm=True``), without speculation (as on Voila). Each move's CPU
(``time.process_time``) is split by wrapping ``planner.plan``/``plans_within`` (``plan``),
``charts.render_plan`` (``render``), the widget canvas's ``draw`` and ``dashboard.encode_png`` (``encode``).

    PYTHONPATH=src .venv/bin/python benchmarks/bench_ch17_participant_walk.py [--models N]
    PYTHONPATH=src .venv/bin/python benchmarks/bench_ch17_participant_walk.py [--models N] --repeats R
        [--base OTHER/src]

Prints the median, mean and 90th percentile (:func:`p90`) of the CPU ms per kind of move (pick, step, back),
the parts' medians, and each control's steps (median and 90th percentile of the step and of its plan()).
With ``--repeats R`` the walk runs R times, each in a fresh process, alternated with another tree's
``src/`` (``--base``: an A/B at the same load), and the same figures are printed of each move's least CPU
over the R walks (what the machine's other work added to a move, mostly gone; lc47). Does not assert
(timings are not tests).

Measured 2026-12-04 (speed41, main 72ccaa7d, 2 cores, little other work on the machine; load 0.5-1.3),
``--models 5`` (the participant's first five models: 25 steps), alternated with ``bench_kernel_moves.py 17
--rounds 5`` (the same moves sent as comm messages to a kernel started as Voila starts one), medians of the
steps, CPU ms:

    in process (this script)  63.2, 61.9  (plan 38.8 / 35.5, render 7.5 / 7.2, draw 14.1 / 13.3, encode 3.5)
    kernel, comm messages     70.0, 75.8  (plan 39.4 / 39.0, render 10.1 / 10.7, png 18.4 / 20.3, around 4)

(The kernel's ``png`` is ``dashboard._figure_png``, the canvas's draw and the encode: compare it with this
script's draw + encode, 17.6 / 16.8, not with the encode alone; draw42.)

So a step costs the kernel ~8-13 ms more than the same Python alone: ~4 ms around the dashboard (message
handling, its threads), the rest in the render and the PNG (the kernel's ``render`` is the dashboard's
``_draw`` less plan() and the PNG, so it holds the summary and the widget's look-ups too, ~1 ms); plan() is
the same. The same 25 steps in a participant's Voila runs the same hour (measure_participant, 8 runs, load
0.15-2.1): kernel CPU median 122, 91, 91, 84, 83, 68, 106, 85 ms, painted 172, 148, 128, 124, 117, 104, 148,
128 ms (the kernel's CPU is read from /proc while Chromium, its harness and Voila share the two cores with
it). By control, in process (--models 5, medians): the context 76, a second GPU type 80, tokens per batch 66,
max GPUs 36 (a cut of the kept search: render, draw and PNG alone), the K/V exchange 89 ms.
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_kernel_moves import MOE  # noqa: E402

#: The steps of measure_participant's walk of chapter 17, in the page's order of the controls (the GPU types'
#: step adds the first option not chosen: A10).
STEPS = (("seq", 262144), ("gpus", None), ("batch_tokens", 2**23), ("max_gpus", 8192),
         ("cp_comm", "all_gather"))


def walk(w, models: int):
    """The participant's moves on widget ``w``: ``(kind, control, value)``, ``models`` model picks."""
    options = list(w.controls["model"].options)
    start = w.controls["model"].value
    others = [o for o in options if o != start and o not in MOE]
    others = [others[(j * 7) % len(others)] for j in range(len(others))]
    moe = [o for o in MOE if o in options and o != start]
    picks = [x for pair in zip(moe, others) for x in pair] + moe[len(others):] + others[len(moe):]
    gpu_options = list(w.controls["gpus"].options)
    for m in picks[:models]:
        yield "pick", "model", m
        before = {c: w.controls[c].value for c, _ in STEPS}
        for c, value in STEPS:
            if c == "gpus":
                extra = next(g for g in gpu_options if g not in before["gpus"])
                value = tuple(g for g in gpu_options if g in before["gpus"] or g == extra)
            yield "step", c, value
            yield "back", c, before[c]


def p90(xs) -> float:
    """The 90th percentile of ``xs`` by nearest rank, as tools/participant_stats.py takes it of the painted
    steps (tools/load_test.nearest_rank, whose module this one does not import: the ceil(0.9 n)-th smallest,
    in integers)."""
    xs = sorted(xs)
    return xs[max(0, -(-9 * len(xs) // 10) - 1)]


def one_walk(models: int) -> dict:
    """The walk of ``models`` model picks in this process: per kind of move, ``[(control, CPU ms, {part: CPU
    ms})]``."""
    import llmsizing.planner as planner
    from llmsizing import charts
    from llmsizing.widgets import dashboard, long_context_widget

    parts: dict = collections.defaultdict(float)

    def wrap(owner, name, part):
        real = getattr(owner, name)

        def timed(*a, **k):
            c0 = time.process_time()
            try:
                return real(*a, **k)
            finally:
                parts[part] += time.process_time() - c0
        setattr(owner, name, timed)

    wrap(planner, "plan", "plan")
    wrap(planner, "plans_within", "plan")
    wrap(charts, "render_plan", "render")
    wrap(dashboard, "encode_png", "encode")
    w = long_context_widget("llama-3.1-405b", speculate=False)
    wrap(type(w.figure.canvas), "draw", "draw")
    moves: dict = collections.defaultdict(list)
    for kind, control, value in walk(w, models):
        parts.clear()
        c0 = time.process_time()
        w.controls[control].value = value
        total = (time.process_time() - c0) * 1e3
        moves[kind].append((control, total, {k: v * 1e3 for k, v in parts.items()}))
    return moves


def report(moves: dict, models: int) -> None:
    """Print one walk's (or each step's least over walks') medians, means and 90th percentiles."""
    print(f"chapter 17, the participant's walk, {models} models; CPU ms, median / mean")
    for kind, xs in moves.items():
        line = (f"  {kind:5s} n={len(xs):3d} {statistics.median(x[1] for x in xs):7.1f} "
                f"{statistics.mean(x[1] for x in xs):7.1f} p90 {p90(x[1] for x in xs):7.1f}  medians:")
        for p in ("plan", "render", "draw", "encode"):
            line += f" {p} {statistics.median(x[2].get(p, 0.0) for x in xs):.1f}"
        print(line)
    for c, _ in STEPS:
        xs = [x for x in moves["step"] if x[0] == c]
        plans = [x[2].get("plan", 0.0) for x in xs]
        print(f"  step {c:12s} median {statistics.median(x[1] for x in xs):6.1f} (p90 "
              f"{p90(x[1] for x in xs):6.1f}), plan {statistics.median(plans):6.1f} (p90 {p90(plans):6.1f})")


def least(walks: list) -> dict:
    """Each move's least CPU over ``walks`` (the same moves in the same order), its parts from that walk."""
    return {kind: [min((w[kind][i] for w in walks), key=lambda x: x[1]) for i in range(len(xs))]
            for kind, xs in walks[0].items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", type=int, default=5, help="model picks (each then five steps and backs)")
    ap.add_argument("--repeats", type=int, default=0, help="walks, each in a fresh process (0: one, here)")
    ap.add_argument("--base", help="another tree's src/: its walks alternate with this tree's (an A/B at the "
                    "same load), with --repeats")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(one_walk(args.models)))
        return
    if not args.repeats:
        report(one_walk(args.models), args.models)
        return
    trees = {"this": str(Path(__file__).resolve().parents[1] / "src"),
             **({"base": str(Path(args.base).resolve())} if args.base else {})}
    walks: dict = {name: [] for name in trees}
    for i in range(args.repeats):
        for name, src in trees.items():       # (alternated: the machine's load falls on both alike)
            load = Path("/proc/loadavg").read_text().split()[0] if Path("/proc/loadavg").exists() else "?"
            out = subprocess.run([sys.executable, __file__, "--child", "--models", str(args.models)],
                                 capture_output=True, text=True, check=True,
                                 env={**os.environ, "PYTHONPATH": src})
            walks[name].append(json.loads(out.stdout.strip().splitlines()[-1]))
            steps = [x[1] for x in walks[name][-1]["step"]]
            print(f"{name} walk {i + 1} (load {load}): steps median {statistics.median(steps):.1f}, "
                  f"p90 {p90(steps):.1f} ms", flush=True)
    for name, got in walks.items():
        print(f"{name} ({trees[name]}): each move's least CPU over {len(got)} walks")
        report(least(got), args.models)


if __name__ == "__main__":
    main()
