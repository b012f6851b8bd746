"""Paired CPU time of chapter 17's widget moving to each mixture of experts, with moe21's change to the memory
fit's coefficient table on (``new``: :func:`llmsizing.plan_tables.table_totals` holds its tables piece by
candidate, so that each candidate's maximum over its ~27 pieces reduces down contiguous columns, and numbers
the candidates' coefficient ids by marking them in a table instead of sorting them) and off in the same
process (``base``: :func:`table_totals_rows` below, table_totals as it stood before moe21, a row per
candidate, ``max(axis=1)`` and ``np.unique``), rounds alternating base-new and new-base
(benchmarks/ab_rounds.py; each round as bench_ch17_models: kept results cleared, a new widget on a dense
model, then each MoE model in turn at the widget's defaults).

    PYTHONPATH=src:tests .venv/bin/python benchmarks/bench_moe21_ab.py [--rounds N]

Prints per model the median CPU ms per move of each side and the median of the paired ratios new / base.

MEASURED
"""

from __future__ import annotations

import sys
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



def main() -> None:
    from llmsizing import plan_memory

    new, base = plan_memory.table_totals, table_totals_rows

    def use(side) -> None:
        plan_memory.table_totals = side

    ab_rounds.run(__doc__.split("\n\n")[0], use, new, base)


if __name__ == "__main__":
    main()
