"""Paired A/B rounds of chapter 17's widget moving to each mixture of experts, shared by the ``bench_moe*_ab``
scripts: each script swaps its change's functions in (``new``) and out (``base``) with its own ``use``, and
this runs both sides in one process in alternating rounds (base-new, then new-base), so both see the same
machine load. Each round: the planner's kept results cleared (:func:`bench_planner.kept`, plus the script's
``extra_caches``), a new widget on a dense model, then each MoE model in turn at the widget's defaults (as
bench_ch17_models). Prints per model the median CPU ms per move of each side and the median paired ratio."""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

import bench_ch17_models  # noqa: E402
import bench_planner  # noqa: E402


def alternate(rounds: int, use, new, base, start_round, move, *, extra_caches=(),
              clear_on_new: bool = False):
    """CPU seconds per model move of each side over ``rounds`` alternating rounds (base-new, then new-base):
    ``(model, side) -> [seconds]``. Before each side's round the kept results are cleared (with the new side
    installed if ``clear_on_new``), ``start_round()`` gives the round's state and ``move(state, model)`` is
    the timed move (or returns the CPU seconds of the part of it to count)."""
    models = bench_ch17_models.moe_models()
    got = {(m, side): [] for m in models for side in ("base", "new")}
    try:
        for r in range(rounds):
            for side in (("base", "new") if r % 2 == 0 else ("new", "base")):
                use(new if clear_on_new or side == "new" else base)
                for kept in (*bench_planner.kept(), *extra_caches):
                    kept.cache_clear()
                use(new if side == "new" else base)
                state = start_round()
                for m in models:
                    c0 = time.process_time()
                    timed = move(state, m)               # (a move that times its own part returns it)
                    got[m, side].append(time.process_time() - c0 if timed is None else timed)
    finally:
        use(new)
    return got


def report(got, title: str = "model", digits: int = 0) -> None:
    """Per model the median ms of each side and the median paired ratio new / base, then all moves."""
    models = list(dict.fromkeys(m for m, _ in got))
    print(f"{title:24s} {'base ms':>8s} {'new ms':>7s} {'new/base':>9s}")
    for m in models:
        b, n = got[m, "base"], got[m, "new"]
        ratio = statistics.median([y / x for x, y in zip(b, n)])
        print(f"{m:24s} {statistics.median(b) * 1e3:8.{digits}f} {statistics.median(n) * 1e3:7.{digits}f} "
              f"{ratio:9.3f}")
    b_all, n_all = ([x for m in models for x in got[m, side]] for side in ("base", "new"))
    b_ms, n_ms = statistics.median(b_all) * 1e3, statistics.median(n_all) * 1e3
    print(f"{'all':24s} {b_ms:8.{digits}f} {n_ms:7.{digits}f}")


def run(description: str, use, new, base, *, extra_caches=(), clear_on_new: bool = False) -> None:
    """Parse ``--rounds``, time both sides moving chapter 17's widget and print the table. ``use(side)``
    installs a side; ``clear_on_new``: clear the kept results with the new side installed (when
    :func:`bench_planner.kept` reads caches that only the new side has), then install the side timed."""
    from llmsizing.widgets import long_context_widget

    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--rounds", type=int, default=20)
    args = ap.parse_args()

    def move(w, m):
        w.controls["model"].value = m

    report(alternate(args.rounds, use, new, base, lambda: long_context_widget("llama-3-8b"), move,
                     extra_caches=extra_caches, clear_on_new=clear_on_new))
