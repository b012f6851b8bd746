"""Paired CPU time of chapter 17's widget moving to each mixture of experts, with moestates35's changes on
(``new``) and toggled off in the same process (``base``: one ``memory._search_pieces`` per (tp, pp, ZeRO
stage, accumulation class) group, each ``A + B / ep`` entry made by ``SearchMemory.states`` one at a time,
``stage_chunk_options`` worked out on every ask; the paths tests/test_moe_prefetch.py compares with), rounds
alternating base-new and new-base. Each round: kept results cleared (bench_planner.kept), a new widget on a
dense model, then each MoE model in turn at the widget's defaults (as bench_ch17_models). In one process the
two sides share the load of a shared machine, which runs of two checkouts one after the other do not.

    PYTHONPATH=src:tests .venv/bin/python benchmarks/bench_moe_states_ab.py [--rounds N]

Prints per model the median CPU ms per move of each side and the median of the paired ratios new / base.

Measured 2026-12-01 14:19-14:21 UTC (branch moestates35; 2 cores shared with other sessions, load 3.2-4.1),
--rounds 30, median CPU ms per model move, base -> new (median paired ratio): Mixtral 88 -> 84 (0.967),
Qwen3-30B-A3B 149 -> 145 (0.982), Qwen3-235B 67 -> 66 (0.982), DeepSeek-V2 129 -> 127 (0.963), DeepSeek-V3
60 -> 60 (0.979), gpt-oss-120b 118 -> 117 (0.982), Scout 99 -> 96 (0.985), granite 1B 130 -> 131 (0.989),
granite 3B 88 -> 91 (1.009), OLMoE 102 -> 102 (1.005); all 300 moves 103 -> 100. About 2% a move: the
groups' pieces are summed on arrays now, but each group's model states (moe.moe_model_states,
foreach_temporary_bytes through memory._state_side) are still worked out group by group.
"""

from __future__ import annotations

import argparse
import functools
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
from test_moe_prefetch import _reference_stored_states  # noqa: E402

from llmsizing import moe_prefetch, plan_candidates, plan_memory, plan_tables, planner  # noqa: E402
from llmsizing.widgets import long_context_widget  # noqa: E402

NEW = dict(prefetch=moe_prefetch.prefetch_states, stored=plan_tables.stored_states,
           chunks=plan_candidates.stage_chunk_options)
BASE = dict(prefetch=functools.partial(moe_prefetch.prefetch_states, batched=False),
            stored=_reference_stored_states, chunks=plan_candidates._chunk_options)


def _use(side: dict) -> None:
    plan_memory.prefetch_states = side["prefetch"]
    plan_tables.stored_states = side["stored"]
    planner.stage_chunk_options = side["chunks"]


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
