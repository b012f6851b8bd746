"""Paired A/B of chapter 17's moves after a mixture of experts' pick, in one process (issues 35 and 38,
fast17c): the branch's changes on (new) and off (base: the memory fit of all GPU types at once,
plan_memory.fitting_plans). Rounds alternate base and new; each round
clears every kept result (benchmarks/bench_planner.kept) and builds a new widget (speculate=False), then moves
the model to each of the four slowest mixtures of experts and the other controls as bench_ch17_models.py
--controls does. Prints the median CPU ms of each move base -> new with the median paired ratio. Does not
assert (timings are not tests).

    PYTHONPATH=src .venv/bin/python benchmarks/bench_fast17c_ab.py ROUNDS [MODEL ...]

Measured 2026-12-02 01:55 UTC (load 1.9 on 2 cores shared with other sessions), 6 rounds, median CPU ms base
-> new (median paired ratio):

    model                       to 32K        8M tokens      all-gather      H100+B200     4,096 GPUs
    qwen3-30b-a3b            116->112 (0.95) 84->85 (1.03) 86->86 (1.10) 117->106 (0.92) 48->49 (1.10)
    deepseek-v2              112->112 (1.06) 74->78 (0.99) 86->89 (1.02) 101->102 (1.05) 39->39 (0.99)
    granite-3.0-1b-a400m     100-> 93 (0.95) 72->68 (1.01) 77->81 (1.07) 106-> 93 (0.91) 51->47 (1.02)
    gpt-oss-120b             106->101 (0.99) 75->71 (0.98) 80->80 (1.00) 111-> 91 (0.79) 43->43 (0.96)
    median paired ratio, all 120 moves: 0.999; moves over 100 ms (median): base 8, new 5 of 20

Only the move to two GPU types is meant to change (the others are new searches either way, their ratios the
noise at this load); at load ~6 (01:40 UTC) the same run gave 1.045 over all moves, every ratio within
0.89-1.26, the noise of that load (a move that searches nothing, to 4,096 GPUs, 1.02-1.21).
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_planner  # noqa: E402

from llmsizing import plan_fits, plan_memory, planner  # noqa: E402
from llmsizing.widgets import long_context_widget  # noqa: E402

MOVES = (("seq", 32768), ("batch_tokens", 2**23), ("cp_comm", "all_gather"), ("gpus", ("H100 SXM", "B200")),
         ("max_gpus", 4096))
SLOWEST = ("qwen3-30b-a3b", "deepseek-v2", "granite-3.0-1b-a400m", "gpt-oss-120b")


NEW = plan_fits.fitting_plans
BASE = plan_memory.fitting_plans


def _use(side) -> None:
    planner.fitting_plans = side


def main() -> None:
    rounds, models = int(sys.argv[1]), sys.argv[2:] or list(SLOWEST)
    res: dict = {}
    try:
        for r in range(rounds):
            for side in (("base", "new") if r % 2 else ("new", "base")):
                for kept in bench_planner.kept():
                    kept.cache_clear()
                _use(NEW if side == "new" else BASE)
                w = long_context_widget("llama-3-8b", speculate=False)
                for m in models:
                    c0 = time.process_time()
                    w.controls["model"].value = m
                    res.setdefault((side, m, "model"), []).append(time.process_time() - c0)
                    defaults = {c: w.controls[c].value for c, _ in MOVES}
                    for c, v in MOVES:
                        c0 = time.process_time()
                        w.controls[c].value = v
                        res.setdefault((side, m, c), []).append(time.process_time() - c0)
                    for c, _ in MOVES[::-1]:
                        w.controls[c].value = defaults[c]
    finally:
        _use(NEW)
    med = statistics.median
    names = [c for c, _ in MOVES]
    print(f"{'model':22s}" + "".join(f"{c:>20s}" for c in names))
    for m in models:
        row = f"{m[:22]:22s}"
        for c in names:
            b, n = res["base", m, c], res["new", m, c]
            row += f"  {med(b) * 1e3:4.0f}->{med(n) * 1e3:4.0f} ({med([y / x for x, y in zip(b, n)]):.2f})"
        print(row)
    ratios = [y / x for m in models for c in names for x, y in zip(res["base", m, c], res["new", m, c])]
    print(f"median paired ratio, all moves: {med(ratios):.3f} ({len(ratios)} pairs)")
    over = {s: sum(med(res[s, m, c]) > 0.1 for m in models for c in names) for s in ("base", "new")}
    print(f"moves over 100 ms (median): base {over['base']}, new {over['new']} of {len(models) * len(names)}")


if __name__ == "__main__":
    main()
