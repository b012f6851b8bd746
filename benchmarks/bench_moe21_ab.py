"""Paired CPU time of chapter 17's widget moving to each mixture of experts, with moe21's change to the memory
fit's coefficient table on (``new``: :func:`llmsizing.plan_tables.table_totals` holds its tables piece by
candidate, so that each candidate's maximum over its ~10 pieces reduces down contiguous columns, numbers the
candidates' coefficient ids by marking them in a table instead of sorting them, and a search's
recomputations share its state tables and its pairs' keys, plan_memory.fitting_plans) and off in the same
process (``base``: :func:`table_totals_rows` below, table_totals as it stood before moe21, a row per
candidate, ``max(axis=1)`` and ``np.unique``, each recomputation reading its states itself, and the pairs'
keys made once per recomputation, :func:`_table_totals_before`), rounds alternating base-new and new-base
(benchmarks/ab_rounds.py; each round as bench_ch17_models: kept results cleared, a new widget on a dense
model, then each MoE model in turn at the widget's defaults).

    PYTHONPATH=src:tests .venv/bin/python benchmarks/bench_moe21_ab.py [--rounds N] [--plan]

Prints per model the median CPU ms per move of each side and the median of the paired ratios new / base.
``--plan``: plan() alone instead of the widget's move (the search of each MoE model at the widget's defaults
after a dense model's, kept results cleared before each), where the change acts: the render and the PNG
draw, ~30 ms a move, scatter more than the change under load.

Measured 2026-12-01 (branch moe21, base main 057d2ec; 2 cores shared with other sessions, load 3.2-3.7),
median CPU ms, base -> new (median paired ratio new / base):

* the widget's model moves, --rounds 20 (17:07-17:08 UTC): Mixtral 88 -> 83 (0.947), Qwen3-30B-A3B
  143 -> 130 (0.921), Qwen3-235B 69 -> 66 (0.947), DeepSeek-V2 130 -> 119 (0.945), DeepSeek-V3 61 -> 63
  (0.993), gpt-oss-120b 115 -> 109 (0.940), Scout 100 -> 93 (0.915), granite 1B 124 -> 123 (0.980), granite
  3B 86 -> 79 (0.933), OLMoE 99 -> 100 (0.985); all 200 moves 104 -> 98.
* plan() alone, --plan --rounds 16 (17:08-17:09 UTC): Mixtral 59.2 -> 47.7 (0.845), Qwen3-30B-A3B
  108.2 -> 97.7 (0.894), Qwen3-235B 43.6 -> 40.0 (0.906), DeepSeek-V2 101.7 -> 94.4 (0.923), DeepSeek-V3
  37.0 -> 33.6 (0.910), gpt-oss-120b 88.8 -> 81.9 (0.908), Scout 71.7 -> 66.0 (0.907), granite 1B
  91.0 -> 79.3 (0.880), granite 3B 62.2 -> 52.2 (0.850), OLMoE 71.0 -> 62.0 (0.875).

(plan_kept_candidates' kept unit survivors, the branch's last change, is on in both sides.) Issue 35's bar
(100 ms a model move) is still not met for Qwen3-30B-A3B and DeepSeek-V2: see bench_ch17_models' docstring.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import ab_rounds  # noqa: E402

from llmsizing.memory import FIXED_OVERHEAD_BYTES, FRAGMENTATION  # noqa: E402
from llmsizing.plan_tables import (  # noqa: E402
    C, CP, EP, PP, TP, V, ZERO, _tuples, first_seen, padded, stored_states)


def table_totals_rows(memory, keys, rc, coef_id, rows, micro, dpf, limits, margin, kept=None):
    """llmsizing.plan_tables.table_totals as it stood before moe21 (main 057d2ec): a row per candidate, and
    every recomputation reads its entries itself (``kept`` not read)."""
    ids, at = np.unique(coef_id[rows], return_inverse=True)
    at = at.reshape(-1)
    k = keys[ids]                                                   # each pair asked: its key
    sv = np.where((k[:, ZERO] == 3) & (k[:, PP] > 1), k[:, V], 1)  # plan_candidates.state_chunks
    lay6 = k[:, [TP, PP, ZERO, EP, C, V]]
    firsts, _ = first_seen(lay6)
    memory.prefetch(_tuples(lay6, firsts), rc)
    st = np.concatenate([k[:, [TP, PP, ZERO, EP, C]], sv[:, None]], axis=1)
    firsts, state_at = first_seen(st)
    # (the kept ones read directly, a mixture of experts' A + B / ep ones on rows; an autocast recipe's: one
    # SearchMemory per recomputation, each made by states)
    st_list = stored_states(memory, _tuples(st, firsts), rc)
    fixed, sharded = (padded([s[i] for s in st_list], -np.inf if i == 0 else 0.0) for i in (0, 1))
    rows_state = state_at[at]
    cp = k[:, CP].astype(float)[at]
    fixed, sharded = fixed[rows_state], sharded[rows_state] / cp[:, None] / dpf[rows][:, None]
    # the floor (micro-batch 0: fixed + 0 + sharded / dp, the same values; pieces are finite, -inf the pads
    # of fixed)
    floor = (fixed + sharded).max(axis=1)
    live = ~(floor > limits.max() * (1 + margin))              # (beyond the largest limit: beyond every one)
    need = np.zeros(len(ids), dtype=bool)
    need[at[live]] = True
    later = k[need & (k[:, CP] > 1)][:, [TP, PP, C, V]]            # (each distinct key once, in order)
    memory.prefetch_cp(_tuples(later, first_seen(later)[0]), rc)
    mk = k[:, [TP, PP, C, CP, V]].copy()
    mk[~need, 3] = 1
    firsts, micro_at = first_seen(mk)
    per_micro = padded([memory.per_micro(tp, pp, rc, c, cp, v) for tp, pp, c, cp, v in _tuples(mk, firsts)],
                       0.0)
    # _total_bytes' sum on the rows read (``sharded / dp`` shared with the floor); the others keep their floor
    peak, micro_at = floor.copy(), micro_at[at]
    if not live.all():
        live = np.flatnonzero(live)
        fixed, sharded, micro_at, rows = fixed[live], sharded[live], micro_at[live], rows[live]
    peak[live] = (fixed + micro[rows][:, None] * per_micro[micro_at] + sharded).max(axis=1)
    return tuple(FIXED_OVERHEAD_BYTES + (1 + FRAGMENTATION) * x for x in (peak, floor))



def _table_totals_before(memory, parts, rc, coef_id, lay, pair_of, rows, micro, dpf, limits, kept=None):
    """llmsizing.plan_memory._table_totals as it stood before moe21: the pairs' keys made on every call."""
    from llmsizing import plan_memory

    return plan_memory.table_totals(memory, plan_memory.pair_keys(parts), rc, coef_id, rows, micro, dpf,
                                    limits, plan_memory.FLOOR_MARGIN)


def plan_only(rounds: int, new, base, use) -> None:
    """``--plan``: CPU time of plan() alone, chapter 17's search of each MoE model at the widget's defaults
    after a dense model's (kept results cleared before each), the sides alternating as ab_rounds does."""
    import bench_planner

    from llmsizing import planner
    from llmsizing.widgets.long_context import LONG_CONTEXT_MAX_GPUS, LONG_CONTEXT_TOKENS

    kw = dict(tokens=LONG_CONTEXT_TOKENS, gpus=("H100 SXM",), seq=131072, global_batch=2**24 // 131072,
              max_gpus=max(LONG_CONTEXT_MAX_GPUS), cp_comm="p2p")

    def move(_, m):
        for kept in bench_planner.kept():
            kept.cache_clear()
        planner.plan("llama-3-8b", **kw)             # (untimed: the dense model a reader leaves warm)
        c0 = time.process_time()
        planner.plan(m, **kw)
        return time.process_time() - c0

    ab_rounds.report(ab_rounds.alternate(rounds, use, new, base, lambda: None, move),
                     "model: plan() alone", 1)


def main() -> None:
    from llmsizing import plan_memory

    new = (plan_memory.table_totals, plan_memory._table_totals)
    base = (table_totals_rows, _table_totals_before)

    def use(side) -> None:
        plan_memory.table_totals, plan_memory._table_totals = side

    if "--plan" in sys.argv:
        sys.argv.remove("--plan")
        rounds = int(sys.argv[sys.argv.index("--rounds") + 1]) if "--rounds" in sys.argv else 20
        plan_only(rounds, new, base, use)
        return
    ab_rounds.run(__doc__.split("\n\n")[0], use, new, base)


if __name__ == "__main__":
    main()
