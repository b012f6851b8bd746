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

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

import ab_rounds  # noqa: E402
from test_moe_fast_checks import _old_check, _old_pareto, _old_rates  # noqa: E402

from llmsizing import kernels, planner  # noqa: E402

NEW = dict(rates=kernels._kept_gemm_efficiencies, check=planner.moe_layout_passes, pareto=planner._pareto)
BASE = dict(rates=_old_rates, check=_old_check, pareto=_old_pareto)


def _use(side: dict) -> None:
    kernels._kept_gemm_efficiencies = side["rates"]
    planner.moe_layout_passes = side["check"]
    planner._pareto = side["pareto"]           # (the chart's per-GPU fronts import it from there)


def main() -> None:
    ab_rounds.run(__doc__.split("\n\n")[0], _use, NEW, BASE)


if __name__ == "__main__":
    main()
