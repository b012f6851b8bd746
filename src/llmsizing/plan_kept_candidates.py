"""The candidate columns the planner keeps between searches (Part III, "How many GPUs do you need?"; chapter
17's widget, issue 35), split out of :mod:`llmsizing.plan_tables`, which re-exports these names: a search's
pair table (:func:`kept_pair_table`) and the candidate columns of the layouts that keep the same rows of it
(:func:`kept_surviving`, keyed by :class:`SameRows`).

:func:`~llmsizing.plan_candidates._candidates` reads a mixture of experts' ``units`` (each ``cp``'s
:func:`~llmsizing.moe_layouts.dp_unit`) only through ``dp % unit == 0`` on the pair table's rows of that
``cp``. Two layouts whose units let the same ``dp`` values of each ``cp`` through therefore get the same
columns, whatever their units: DeepSeek-V2's 160 experts give units 5 and 10, which let no power of two
through, as do many others (issue 35, moe4: a DeepSeek-V2 search after Qwen3-30B-A3B's asked 324 new
(layout, units) keys of :func:`~llmsizing.plan_tables.kept_candidates`, 156 of them new by what they keep).
:func:`unit_survivors` is that key. No formula here; ``tests/test_moe4_candidates.py`` compares the columns
with those of the units themselves.
"""

from __future__ import annotations

import functools

import numpy as np

from .layouts import _divisors
from .plan_candidates import _candidates, _pair_table

#: How many candidate tables :func:`~llmsizing.plan_tables.kept_candidates` and :func:`kept_surviving` keep.
CANDIDATES_KEPT = 4096


@functools.lru_cache(maxsize=64)
def kept_pair_table(cps: tuple, micros: tuple, global_batch: int) -> tuple:
    """:func:`~llmsizing.plan_candidates._pair_table` of a search (its ``cps``, micro-batches and global
    batch) and each row's index into ``cps``, kept (read-only arrays): it depends on nothing else."""
    divisors = {b: _divisors(global_batch // b) if global_batch % b == 0 else [] for b in micros}
    table = _pair_table(cps, divisors, global_batch)
    cp_at = np.array([cps.index(c) for c in table["cp"].tolist()], dtype=np.int64)
    return _read_only(table), _read_only(cp_at)


def _read_only(x):
    """``x`` (an array, or a dict of arrays and tuples) with its arrays made read-only (they are shared)."""
    for v in x.values() if isinstance(x, dict) else (x,):
        if isinstance(v, np.ndarray):
            v.flags.writeable = False
    return x


@functools.lru_cache(maxsize=64)
def _dp_values(cps: tuple, micros: tuple, global_batch: int) -> tuple:
    """For each index of ``cps``, the distinct ``dp`` of :func:`kept_pair_table`'s rows whose ``cp`` index is
    it (none for a repeated ``cp``: its rows carry the first index), ascending."""
    table, cp_at = kept_pair_table(cps, micros, global_batch)
    dp = table["dp"]
    return tuple(tuple(sorted(set(dp[cp_at == i].tolist()))) for i in range(len(cps)))


def unit_survivors(cps: tuple, micros: tuple, global_batch: int, units):
    """What :func:`~llmsizing.plan_candidates._candidates` reads of ``units`` (a tuple of each ``cp``'s
    ``dp`` unit, or None for a dense model): for each index of ``cps``, the ``dp`` values of its rows of the
    pair table that its unit divides; None for None; False (no key: the units go as they are) unless
    ``units`` are positive Python ints, one per ``cp``."""
    if units is None:
        return None
    if (type(units) is not tuple or len(units) != len(cps)
            or not all(type(u) is int and u > 0 for u in units)):
        return False
    return _kept_survivors(cps, micros, global_batch, units)


@functools.lru_cache(maxsize=CANDIDATES_KEPT)
def _kept_survivors(cps: tuple, micros: tuple, global_batch: int, units: tuple) -> tuple:
    """:func:`unit_survivors` of checked ``units``, kept (moe21: a MoE search asks for the same units once per
    ``pp`` and ZeRO stage, ~5 us each)."""
    return tuple(tuple(d for d in ds if d % u == 0)
                 for ds, u in zip(_dp_values(cps, micros, global_batch), units))


class SameRows:
    """A layout's ``units`` (:func:`kept_surviving`' key), equal to any other units that let the same rows
    through (their :func:`unit_survivors`, ``survivors``) and hashed as those."""

    __slots__ = ("units", "survivors", "_hash")

    def __init__(self, units: tuple, survivors: tuple):
        self.units, self.survivors, self._hash = units, survivors, hash(survivors)

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other) -> bool:
        return isinstance(other, SameRows) and self.survivors == other.survivors


@functools.lru_cache(maxsize=CANDIDATES_KEPT)
def kept_surviving(cps: tuple, micros: tuple, global_batch: int, max_gpus, pp: int, tp_pp, rows,
                   interleaved: bool):
    """:func:`~llmsizing.plan_tables.kept_candidates`' columns, kept (read-only) per ``rows``: a
    :class:`SameRows` (or None for a dense model), so that units that let the same rows through share them.
    Built from the units of the first to ask, which keep exactly those rows (the ``dp % unit == 0`` of each
    row is what :func:`unit_survivors` lists), so the columns of any of them."""
    table, cp_at = kept_pair_table(cps, micros, global_batch)
    unit = None if rows is None else np.array(rows.units)[cp_at]
    tp = 1 if tp_pp is None else tp_pp // pp
    got = _candidates(tp, pp, 1, table=table, units=unit, max_gpus=max_gpus, v=2 if interleaved else 1)
    return None if got is None else _read_only(got)
