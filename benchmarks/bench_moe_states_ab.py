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

import functools
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

import ab_rounds  # noqa: E402
from test_moe_prefetch import _reference_stored_states  # noqa: E402

from llmsizing import moe_prefetch, plan_candidates, plan_memory, plan_tables, planner  # noqa: E402

NEW = dict(prefetch=moe_prefetch.prefetch_states, stored=plan_tables.stored_states,
           chunks=plan_candidates.stage_chunk_options)
BASE = dict(prefetch=functools.partial(moe_prefetch.prefetch_states, batched=False),
            stored=_reference_stored_states, chunks=plan_candidates._chunk_options)


def _use(side: dict) -> None:
    plan_memory.prefetch_states = side["prefetch"]
    plan_tables.stored_states = side["stored"]
    planner.stage_chunk_options = side["chunks"]


def main() -> None:
    ab_rounds.run(__doc__.split("\n\n")[0], _use, NEW, BASE)


if __name__ == "__main__":
    main()
