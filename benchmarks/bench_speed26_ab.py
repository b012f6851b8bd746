"""speed26: a mixture of experts' data-parallel rows of a new model (``plan_moe._kept_key_rows``, nothing
kept) on chapter 12's four GPU types, main's one ``_key_rows`` call per GPU type against this branch's one
call for all, in one process on the very arguments chapter 12's picks pass (recorded from ``plan()`` at the
widget's defaults), alternated call by call, and the two answers compared bit for bit.

    PYTHONPATH=src .venv/bin/python benchmarks/bench_speed26_ab.py [--rounds N] [--picks N]

Prints per model the median CPU ms (``time.process_time``) of each and whether every row is the same. With
``--picks N``: also N rounds of whole picks of chapter 12's widget (benchmarks/bench_ch12_models.py's, each
on a new widget with the planner's kept results cleared, not timed), each mixture of experts picked with
main's function and with this branch's in turn (the order swapped every round), so that the two are paired
move by move in one process (other sessions' load moves both alike). Does not assert (timings are not
tests). Main's function is main's text (``git show main:src/llmsizing/
plan_moe.py``), run in this module's namespace.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_ch12_models import MODELS  # noqa: E402

from llmsizing import plan_moe, planner  # noqa: E402

GPUS = ("H100 SXM", "H200", "B200", "A100 80GB")


def _main_function():
    """main's ``_kept_key_rows``, defined in ``plan_moe``'s namespace."""
    root = Path(__file__).resolve().parent.parent
    text = subprocess.run(["git", "show", "main:src/llmsizing/plan_moe.py"], cwd=root, check=True,
                          capture_output=True, text=True).stdout
    start = text.index("def _kept_key_rows(")
    body = text[start:text.index("\ndef ", start + 1)]
    space = dict(vars(plan_moe))
    exec(body, space)
    return space["_kept_key_rows"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=21)
    ap.add_argument("--picks", type=int, default=0)
    args = ap.parse_args()
    old, new = _main_function(), plan_moe._kept_key_rows
    calls = {}

    def record(*a):
        calls.setdefault(model, a)
        return new(*a)

    plan_moe._kept_key_rows = record
    try:
        for model in MODELS:
            planner.plan(model, tokens=1e12, gpus=GPUS, seq=8192, global_batch=512, max_gpus=4096)
    finally:
        plan_moe._kept_key_rows = new
    print(f"{'model':16s} {'keys':>6s} {'main':>6s} {'new':>6s}  same")
    for model, a in calls.items():
        times = {"main": [], "new": []}
        same = True
        for _ in range(args.rounds):
            got = {}
            for name, f in (("main", old), ("new", new)):
                plan_moe._kept_dp_rows.cache_clear()
                plan_moe._kept_units.clear()
                c0 = time.process_time()
                got[name] = f(*a)
                times[name].append(time.process_time() - c0)
            same &= all(np.array_equal(x, y) for x, y in zip(got["main"], got["new"]))
        print(f"{model:16s} {len(a[5]):6d} {statistics.median(times['main'])*1e3:6.2f} "
              f"{statistics.median(times['new'])*1e3:6.2f}  {same}")
    if args.picks:
        _picks(old, new, [m for m in calls], args.picks)


def _picks(old, new, models, rounds: int) -> None:
    """Whole picks of chapter 12's widget, main's function and this branch's in turn (module docstring)."""
    import matplotlib

    matplotlib.use("Agg")
    import bench_planner

    from llmsizing.widgets import planner_widget

    times = {(m, k): [] for m in models for k in ("main", "new")}
    for r in range(rounds):
        for m in models:
            for name in (("main", "new") if r % 2 == 0 else ("new", "main")):
                plan_moe._kept_key_rows = old if name == "main" else new
                try:
                    for kept in bench_planner.kept():
                        kept.cache_clear()
                    w = planner_widget()
                    c0 = time.process_time()
                    w.controls["model"].value = m
                    times[m, name].append(time.process_time() - c0)
                finally:
                    plan_moe._kept_key_rows = new
    print(f"\nwhole picks, {rounds} rounds: {'model':16s} {'main':>6s} {'new':>6s}  (median CPU ms)")
    for m in models:
        print(f"{'':26s}{m:16s} {statistics.median(times[m, 'main'])*1e3:6.1f} "
              f"{statistics.median(times[m, 'new'])*1e3:6.1f}")
    diffs = [a - b for m in models for a, b in zip(times[m, "main"], times[m, "new"])]
    print(f"paired difference main - new: median {statistics.median(diffs)*1e3:.1f} ms over {len(diffs)}")


if __name__ == "__main__":
    main()
