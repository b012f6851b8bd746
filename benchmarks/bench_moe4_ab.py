"""Paired CPU time of chapter 17's widget moving to each mixture of experts, with moe4's change on (``new``:
``plan_tables.kept_candidates`` shares one table among the units that keep the same rows,
``plan_kept_candidates.kept_surviving``; ``plan_terms.dp_unit_rows`` reads kept wire factors and
latency steps) and off in the same process (``base``: a table per (layout, units)
key, built from the units, kept as before: tests/test_plan_tables.py's ``_direct_candidates`` behind its own
lru cache; and dp_unit_rows' wire_factor and latency_steps asked each time, as
network's own), rounds alternating base-new and new-base (as bench_moe_fast_ab). Each round: kept results
cleared (bench_planner.kept), a new widget on a dense model, then each MoE model in turn at the widget's
defaults (as bench_ch17_models).

    PYTHONPATH=src:tests .venv/bin/python benchmarks/bench_moe4_ab.py [--rounds N]

Prints per model the median CPU ms per move of each side and the median of the paired ratios new / base.

Measured 2026-12-01 15:00-15:01 UTC (branch moe4; 2 cores shared with other sessions, load 1.6-2.7),
--rounds 30, median CPU ms per model move, base -> new (median paired ratio): Mixtral 90 -> 88 (0.976),
Qwen3-30B-A3B 152 -> 148 (0.971), Qwen3-235B 67 -> 67 (0.991), DeepSeek-V2 137 -> 128 (0.931), DeepSeek-V3
61 -> 61 (0.987), gpt-oss-120b 118 -> 117 (0.983), Scout 99 -> 99 (0.998), granite 1B 130 -> 129 (1.003),
granite 3B 89 -> 90 (0.997), OLMoE 102 -> 103 (1.006); all 300 moves 103 -> 101.
"""

from __future__ import annotations

import functools
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

import ab_rounds  # noqa: E402
from test_plan_tables import _direct_candidates  # noqa: E402

from llmsizing import network, plan_memory, plan_tables, plan_terms  # noqa: E402

OLD_CANDIDATES = functools.lru_cache(maxsize=plan_tables.CANDIDATES_KEPT)(
    lambda *key: plan_tables._read_only(got) if (got := _direct_candidates(*key)) is not None else None)
NEW = (plan_tables.kept_candidates, plan_terms._kept_wire_factor, plan_terms._kept_latency_steps)
BASE = (OLD_CANDIDATES, network.wire_factor, network.latency_steps)


def _use(side: tuple) -> None:
    plan_memory.kept_candidates, plan_terms._kept_wire_factor, plan_terms._kept_latency_steps = side


def main() -> None:
    ab_rounds.run(__doc__.split("\n\n")[0], _use, NEW, BASE, extra_caches=(OLD_CANDIDATES,),
                  clear_on_new=True)


if __name__ == "__main__":
    main()
