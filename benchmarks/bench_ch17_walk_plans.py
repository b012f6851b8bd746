"""plan()'s share of chapter 17's participant walk (bench_ch17_participant_walk.py's moves), and its tables
kept for a bit-for-bit comparison between two trees (issues 35, 38; plan42).

Builds chapter 17's widget as the book does (``warm=True``, no speculation), makes the walk's moves and
records every ``planner.plan`` / ``plans_within`` call a move makes: its CPU (``time.process_time``) and the
table it returns. ``--save FILE`` pickles the tables (in call order, with their arguments); ``--check FILE``
compares this tree's tables with a saved run's by ``pandas.testing.assert_frame_equal`` with no tolerance
(``check_exact=True``) and says which differ. ``--repeats N`` runs the walk N times, each in a fresh process,
and prints the median over the runs of each run's median plan() CPU per step, and the median and mean over
the steps of each step's least CPU over the runs (the machine's other work adds to a step's CPU time; the
least over runs is what it adds least to); ``--base SRC`` alternates those runs with another tree's
``src/`` (an A/B at the same load).

    PYTHONPATH=src .venv/bin/python benchmarks/bench_ch17_walk_plans.py [--models 5] [--repeats 5]
        [--base OTHER/src] [--save FILE | --check FILE]

Does not assert (timings are not tests); ``--check`` exits 1 when a table differs.

Measured 2026-12-04 13:57-13:59 UTC (plan42, 2 cores shared with other sessions, load 4.5-5.0), ``--repeats 8
--base`` main ef937550's src (a git archive), ``--models 5`` (25 steps), plan() CPU ms per step:

    tree          median of the runs' medians   each step's least over 8 runs: median / mean
    ef937550      42.0                          37.2 / 36.4
    plan42        39.0                          35.5 / 33.6

so ~3 ms (7-8%) less a step, within the noise of a single control at that load; the 46 tables of the walk
(``--check``) are the same, bit for bit. What is left of a step's ~35 ms: the memory fit of a new context or
K/V exchange (dense_arrays / moe_prefetch entries, one Python call per new layout), the GPUs' link terms
(plan_terms._link_terms, one communication() per group) and NumPy over 15,000-48,000 plans (pricing, the
frame, its sort by cost).
"""
from __future__ import annotations

import argparse
import json
import os
import pickle
import statistics
import subprocess
import sys
import time
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_ch17_participant_walk import STEPS, walk  # noqa: E402


def one_run(models: int) -> tuple[list, list]:
    """One walk in this process: ``(calls, steps)``; ``calls`` the plan() calls ``(move, name, args, kw,
    table or error)``, ``steps`` each step's ``(control, plan CPU ms)``."""
    import llmsizing.planner as planner
    from llmsizing.widgets import long_context_widget

    calls: list = []
    spent = [0.0]
    move = ["build"]

    def wrap(name):
        real = getattr(planner, name)

        def timed(*a, **k):
            c0 = time.process_time()
            try:
                out = real(*a, **k)
            except ValueError as e:
                spent[0] += time.process_time() - c0
                calls.append((move[0], name, a[1:] if name == "plans_within" else a, k, f"ValueError: {e}"))
                raise
            spent[0] += time.process_time() - c0
            calls.append((move[0], name, a[1:] if name == "plans_within" else a, k, out))
            return out
        setattr(planner, name, timed)

    wrap("plan")
    wrap("plans_within")
    w = long_context_widget("llama-3.1-405b", speculate=False)
    steps = []
    for i, (kind, control, value) in enumerate(walk(w, models)):
        move[0] = f"{i}:{kind}:{control}={value}"
        spent[0] = 0.0
        w.controls[control].value = value
        if kind == "step":
            steps.append((control, spent[0] * 1e3))
    return calls, steps


def compare(saved: list, calls: list) -> int:
    """The number of tables of ``calls`` that differ from ``saved``'s (printed)."""
    import pandas as pd

    bad = 0
    if len(saved) != len(calls):
        print(f"{len(saved)} calls saved, {len(calls)} now")
        return 1
    for (m0, n0, a0, k0, t0), (m1, n1, a1, k1, t1) in zip(saved, calls):
        if (m0, n0, repr(a0), repr(k0)) != (m1, n1, repr(a1), repr(k1)):
            print("different call:", m0, m1)
            bad += 1
            continue
        try:
            if isinstance(t0, str) or isinstance(t1, str):
                assert t0 == t1, (t0, t1)
            else:
                pd.testing.assert_frame_equal(t0, t1, check_exact=True)
                assert t0.attrs.keys() == t1.attrs.keys(), "attrs"
                assert repr(t0.attrs) == repr(t1.attrs), "attrs differ"
        except AssertionError as e:
            bad += 1
            print(f"DIFFERS {m0} {n0}: {str(e)[:400]}")
    print(f"{len(calls)} tables compared, {bad} differ")
    return bad


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", type=int, default=5)
    ap.add_argument("--repeats", type=int, default=1, help="walks, each in a fresh process")
    ap.add_argument("--save", help="pickle the walk's tables to this file")
    ap.add_argument("--check", help="compare the walk's tables with this file's")
    ap.add_argument("--base", help="another tree's src/ (e.g. a git archive of the base commit): its walks "
                    "alternate with this tree's, and both are printed")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        calls, steps = one_run(args.models)
        print(json.dumps(steps))
        return
    if args.save or args.check:
        calls, steps = one_run(args.models)
        if args.save:
            Path(args.save).write_bytes(pickle.dumps(calls))
            print(f"{len(calls)} tables saved to {args.save}")
        if args.check:
            sys.exit(1 if compare(pickle.loads(Path(args.check).read_bytes()), calls) else 0)
        return
    here = str(Path(__file__).resolve().parents[1] / "src")
    trees = {"this": here, **({"base": str(Path(args.base).resolve())} if args.base else {})}
    runs: dict = {name: [] for name in trees}
    for _ in range(args.repeats):
        for name, src in trees.items():         # (alternated: the machine's load falls on both alike)
            env = {**os.environ, "PYTHONPATH": src}
            out = subprocess.run([sys.executable, __file__, "--child", "--models", str(args.models)],
                                 capture_output=True, text=True, check=True, env=env)
            steps = json.loads(out.stdout.strip().splitlines()[-1])
            runs[name].append(steps)
            print(f"{name} run: plan() CPU per step, median {statistics.median(s[1] for s in steps):.1f} ms, "
                  f"mean {statistics.mean(s[1] for s in steps):.1f} ms", flush=True)
    for name, per_run in runs.items():
        # (each step's least CPU over the runs: what the machine's other work added to it, mostly gone)
        least = [min(r[i][1] for r in per_run) for i in range(len(per_run[0]))]
        print(f"{name}: median of {len(per_run)} runs' medians "
              f"{statistics.median(statistics.median(s[1] for s in r) for r in per_run):.1f} ms; each step's "
              f"least over the runs: median {statistics.median(least):.1f}, "
              f"mean {statistics.mean(least):.1f} "
              "ms; by control (each run's median):")
        for c, _ in STEPS:
            print(f"  {c:12s} " + " ".join(f"{statistics.median(s[1] for s in r if s[0] == c):6.1f}"
                                            for r in per_run)
                  + f"   least: {statistics.median(x for x, s in zip(least, per_run[0]) if s[0] == c):6.1f}")
    print(os.popen("uptime").read().strip())


if __name__ == "__main__":
    main()
