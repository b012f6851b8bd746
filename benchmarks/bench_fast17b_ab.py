"""Paired A/B of chapter 17's moves after a mixture of experts' pick, in one process (issue 35, fast17b): the
branch's kept rows and shortcuts on (new) and off (base: the data-parallel and unit-link rows worked out at
each search, the priced blocks' SHA-1 over the columns as they are, the point
cloud's first point per pixel and each GPU type's front from sorts). Rounds alternate base and new; each round
clears every kept result (benchmarks/bench_planner.kept) and builds a new widget (speculate=False), then moves
the model to each of the four slowest mixtures of experts and the other controls as bench_ch17_models.py
--controls does. Prints the median CPU ms of each move base -> new with the median paired ratio, and
plan_pricing.kept_price's CPU ms within the moves. Does not assert (timings are not tests).

    PYTHONPATH=src .venv/bin/python benchmarks/bench_fast17b_ab.py ROUNDS [MODEL ...]

Measured 2026-12-01 23:43 UTC (load 2.4-2.6 on 2 cores shared with other sessions), 6 rounds: median paired
ratio 0.894 over 120 moves; to 32K 0.85-0.96, 8M tokens 0.79-0.87, all-gather 0.83-0.94, two GPU types
0.93-0.96, 4,096 GPUs 0.92-0.99 (the numbers and bench_ch17_models.py's process-level pairs are in that
benchmark's docstring). After merging main d5b9461 (its new stage loop; fast17b's kept stage rows dropped),
23:52 UTC, load 1.1-1.9, 6 rounds: 0.943 over 120 moves; to 32K 0.95-0.98, 8M tokens 0.90-0.94, all-gather
0.93-0.95, two GPU types 0.93-1.01, 4,096 GPUs 0.90-0.95."""

from __future__ import annotations

import hashlib
import statistics
import sys
import time
from pathlib import Path

import matplotlib
import numpy as np

matplotlib.use("Agg")
sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_planner  # noqa: E402

from llmsizing import plan_moe, plan_pricing, plan_rank, planner  # noqa: E402
from llmsizing.charts import time_money_plan  # noqa: E402
from llmsizing.widgets import long_context_widget  # noqa: E402

MOVES = (("seq", 32768), ("batch_tokens", 2**23), ("cp_comm", "all_gather"), ("gpus", ("H100 SXM", "B200")),
         ("max_gpus", 4096))
SLOWEST = ("qwen3-30b-a3b", "deepseek-v2", "granite-3.0-1b-a400m", "gpt-oss-120b")


def _old_digest(cols: dict) -> bytes:                       # (main's: every column's bytes as they are)
    h = hashlib.sha1()
    for k in sorted(cols):
        a = np.ascontiguousarray(cols[k])
        h.update(f"{k}:{a.dtype.str}:{a.shape};".encode())
        h.update(a.data)
    return h.digest()


def _old_first(x, y):                                       # (main's: a sort of the pixels' codes)
    return np.unique((x << 31) + y, return_index=True)[1]


_new_pareto = plan_rank._pareto


def _old_pareto(days, cost, memory, order=None):            # (main's: every row sorted)
    if order is None:
        ok = np.isfinite(days) & np.isfinite(cost)
        d, c = np.where(ok, days, np.inf), np.where(ok, cost, np.inf)
        order = plan_rank._lex_orders((np.asarray(memory), c, d))[0]
    return _new_pareto(days, cost, memory, order=order)


def _unit_rows(model, keys, part, **kw):
    return plan_moe.dp_unit_rows(model, keys, part, dp_calls=plan_moe._dp_calls,
                                 **kw)


NEW = (plan_moe._kept_key_rows, plan_moe.kept_unit_rows, plan_pricing._digest,
       time_money_plan._first_of_each, _new_pareto)
BASE = (plan_moe._key_rows, _unit_rows, _old_digest, _old_first,
        _old_pareto)


def _use(side) -> None:
    (plan_moe._kept_key_rows, plan_moe.kept_unit_rows, plan_pricing._digest,
     time_money_plan._first_of_each, planner._pareto) = side


def main() -> None:
    rounds, models = int(sys.argv[1]), sys.argv[2:] or list(SLOWEST)
    real_kp, kp, res = planner.kept_price, [0.0], {}

    def timed_kp(*a, **k):
        c0 = time.process_time()
        try:
            return real_kp(*a, **k)
        finally:
            kp[0] += time.process_time() - c0

    planner.kept_price = timed_kp
    try:
        for r in range(rounds):
            for side in (("base", "new") if r % 2 else ("new", "base")):
                _use(NEW)
                for kept in bench_planner.kept():
                    kept.cache_clear()
                _use(NEW if side == "new" else BASE)
                w = long_context_widget("llama-3-8b", speculate=False)
                for m in models:
                    w.controls["model"].value = m
                    defaults = {c: w.controls[c].value for c, _ in MOVES}
                    for c, v in MOVES:
                        kp[0] = 0.0
                        c0 = time.process_time()
                        w.controls[c].value = v
                        res.setdefault((side, m, c), []).append(time.process_time() - c0)
                        res.setdefault(("kp " + side, m, c), []).append(kp[0])
                    for c, _ in MOVES[::-1]:
                        w.controls[c].value = defaults[c]
    finally:
        _use(NEW)
        planner.kept_price = real_kp
    med = statistics.median
    print(f"{'model':22s}" + "".join(f"{c:>22s}" for c, _ in MOVES))
    for m in models:
        row = f"{m[:22]:22s}"
        for c, _ in MOVES:
            b, n = res["base", m, c], res["new", m, c]
            row += f"  {med(b) * 1e3:5.0f}->{med(n) * 1e3:4.0f} ({med([y / x for x, y in zip(b, n)]):.2f})"
        print(row)
        print(f"{'  kept_price':22s}" + "".join(
            f"  {med(res['kp base', m, c]) * 1e3:5.1f}->{med(res['kp new', m, c]) * 1e3:4.1f}        "
            for c, _ in MOVES))
    ratios = [y / x for m in models for c, _ in MOVES for x, y in zip(res["base", m, c], res["new", m, c])]
    print(f"median paired ratio, all moves: {med(ratios):.3f} ({len(ratios)} pairs)")


if __name__ == "__main__":
    main()
