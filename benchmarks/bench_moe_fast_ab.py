"""Paired CPU time of chapter 17's widget moving to each mixture of experts, with moefast35's changes on
(``new``: :func:`llmsizing.kernels.rates` reads ``_kept_gemm_efficiencies``; the search's MoE layout check
``plan_candidates.moe_layout_passes`` is kept per (tp, ZeRO stage, ep); the chart's per-GPU fronts,
``plan_rank._pareto`` without an order, sort through ``_lex_orders``) and toggled off in the same process
(``base``: ``layer_gemm_efficiencies`` on every ask, ``check_layout`` at every (tp, pp, ZeRO stage, ep),
np.lexsort: the paths tests/test_moe_fast_checks.py compares with), rounds alternating base-new and
new-base (as bench_moe_states_ab). Each round: kept results cleared (bench_planner.kept), a new widget on a
dense model, then each MoE model in turn at the widget's defaults (as bench_ch17_models).

    PYTHONPATH=src:tests .venv/bin/python benchmarks/bench_moe_fast_ab.py [--rounds N]

Prints per model the median CPU ms per move of each side and the median of the paired ratios new / base.

Measured 2026-12-01 14:38-14:40 UTC (branch moefast35; 2 cores shared with other sessions, load 1.4-2.5),
--rounds 30, median CPU ms per model move, base -> new (median paired ratio): Mixtral 86 -> 84 (0.970),
Qwen3-30B-A3B 146 -> 141 (0.972), Qwen3-235B 66 -> 65 (0.981), DeepSeek-V2 131 -> 123 (0.954), DeepSeek-V3
59 -> 58 (1.008), gpt-oss-120b 117 -> 114 (0.986), Scout 99 -> 93 (0.949), granite 1B 134 -> 125 (0.952),
granite 3B 90 -> 84 (0.948), OLMoE 104 -> 98 (0.961); all 300 moves 105 -> 96.
"""

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
from test_moe_fast_checks import _old_check, _old_pareto, _old_rates  # noqa: E402

from llmsizing import kernels, planner  # noqa: E402
from llmsizing.widgets import long_context_widget  # noqa: E402

NEW = dict(rates=kernels._kept_gemm_efficiencies, check=planner.moe_layout_passes, pareto=planner._pareto)
BASE = dict(rates=_old_rates, check=_old_check, pareto=_old_pareto)


def _use(side: dict) -> None:
    kernels._kept_gemm_efficiencies = side["rates"]
    planner.moe_layout_passes = side["check"]
    planner._pareto = side["pareto"]           # (the chart's per-GPU fronts import it from there)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=20)
    args = ap.parse_args()
    models = bench_ch17_models.moe_models()
    got = {(m, side): [] for m in models for side in ("base", "new")}
    try:
        for r in range(args.rounds):
            for side in (("base", "new") if r % 2 == 0 else ("new", "base")):
                _use(NEW if side == "new" else BASE)
                for kept in bench_planner.kept():
                    kept.cache_clear()
                w = long_context_widget("llama-3-8b")
                for m in models:
                    c0 = time.process_time()
                    w.controls["model"].value = m
                    got[m, side].append(time.process_time() - c0)
    finally:
        _use(NEW)
    print(f"{'model':24s} {'base ms':>8s} {'new ms':>7s} {'new/base':>9s}")
    for m in models:
        b, n = got[m, "base"], got[m, "new"]
        ratio = statistics.median([y / x for x, y in zip(b, n)])
        print(f"{m:24s} {statistics.median(b) * 1e3:8.0f} {statistics.median(n) * 1e3:7.0f} {ratio:9.3f}")
    base, new = ([x for m in models for x in got[m, side]] for side in ("base", "new"))
    print(f"{'all':24s} {statistics.median(base) * 1e3:8.0f} {statistics.median(new) * 1e3:7.0f}")


if __name__ == "__main__":
    main()
