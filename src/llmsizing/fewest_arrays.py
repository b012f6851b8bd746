"""The smallest data-parallel degree of many expert-parallel layouts at once, for
:func:`~llmsizing.fewest_gpus.min_gpus` (chapter 8, "3D layouts"; chapter 18; issue 35).

No formula of its own. :func:`~llmsizing.fewest_gpus.min_gpus` weighs a mixture of experts' layouts one at a
time: for each ``(tp, pp, ZeRO stage, ep)`` two :func:`~llmsizing.memory.training_memory` calls, at ``dp = a``
and ``2 a`` (``a``: :func:`~llmsizing.moe_layouts.dp_unit`), from which the smallest ``dp`` is solved
(:func:`~llmsizing.fewest_gpus._smallest_dp`). DeepSeek-V2's 60 layers and 160 experts make ~450 such layouts,
and chapter 10's chart asks it up to three times a move. Here the layouts of one ``(tp, pp, ZeRO stage)`` that
differ in ``ep`` (and so in ``dp``) are weighed in one :func:`~llmsizing.memory._search_pieces` call per
``dp`` multiple on :class:`~llmsizing.moe_arrays.EpLayouts`, which gives each layout's pieces bit for bit as
its own call does (the planner's prefetch, :mod:`llmsizing.moe_prefetch`, relies on the same), and the same
solve runs on each layout's pieces in Python floats: the same ``dp``, or the same refusal
(``tests/test_fewest_arrays.py`` compares every layout of several models with ``_smallest_dp``).
"""

from __future__ import annotations

import functools
import math

import numpy as np

from .memory import _search_pieces
from .moe_arrays import EpLayouts
from .precision import RECIPES

#: min_gpus' keywords that :func:`~llmsizing.memory._search_pieces` takes: with any other (``mtp_depth``,
#: ``capacity_factor``) a layout is weighed by its own calls.
_TAKEN = frozenset(("batch", "seq", "grad_accum", "precision", "optimizer", "attention", "recompute", "stack",
                    "optimizer_impl"))


def supports(model, kw: dict, offload: str) -> bool:
    """Whether :func:`smallest_dps` weighs these layouts: a mixture of experts without offloading, neither an
    autocast recipe nor an optimizer step other than ``foreach`` (what
    :class:`~llmsizing.moe_arrays.EpLayouts` takes, as the planner's prefetch asks), and no keyword beyond
    :data:`_TAKEN`."""
    return (model.is_moe and offload == "none" and set(kw) <= _TAKEN
            and not RECIPES[kw.get("precision", "bf16-mixed")].autocast
            and kw.get("optimizer_impl", "foreach") == "foreach")


def smallest_dps(model, groups, stages, kw: dict, room: float, kept: dict) -> list:
    """:func:`~llmsizing.fewest_gpus._smallest_dp` of each layout ``(ep, a)`` of each group ``(base, calls)``
    of ``groups`` (``a``: its :func:`~llmsizing.moe_layouts.dp_unit`; ``base`` a checked layout of the group,
    the others differing from it in ``ep`` and ``dp`` only), on the pipeline ``stages``, with ``room`` the
    bytes a piece may take (``_smallest_dp``'s): per group, each layout's smallest ``dp``, a multiple of
    ``a``, or ``None``. Each piece is ``fixed + sharded / dp``, read off ``dp = a`` and ``2 a`` (one
    :class:`~llmsizing.moe_arrays.EpLayouts` per group for both, ZeRO-0's first only; the groups' pieces in
    one table). ``kept``: what the calls of one :func:`~llmsizing.fewest_gpus.min_gpus` share (the
    activations' rows)."""
    ep_dps = [[(ep, a) for ep, a in calls] + ([] if base.zero == 0 else [(ep, 2 * a) for ep, a in calls])
              for base, calls in groups]
    out = []
    for (base, calls), got in zip(groups, _pieces(model, groups, ep_dps, stages, kw, kept)):
        one, two = got[:len(calls)], None if base.zero == 0 else got[len(calls):]
        dps = []
        for j, (_, a) in enumerate(calls):
            t1s = one[j]
            if two is None:
                dps.append(a if all(v <= room for v in t1s) else None)
                continue
            dp = 1
            for t1, t2 in zip(t1s, two[j]):          # (_smallest_dp's arithmetic, in Python floats)
                fixed, sharded = 2 * t2 - t1, 2 * a * (t1 - t2)
                if t1 <= room:
                    continue
                if fixed >= room or sharded <= 0:
                    dp = None
                    break
                dp = max(dp, math.ceil(sharded / (room - fixed) - 1e-9))
            dps.append(None if dp is None else dp if a == 1 else a * math.ceil(dp / a))
        out.append(dps)
    return out


def _pieces(model, groups, ep_dps, stages, kw: dict, kept: dict) -> list:
    """:func:`_pieces_of`, each group's kept per ``(model, kw)`` by its pipeline ``stages``, layout ``base``
    and ``(ep, dp)`` (all its pieces read; fit39: :func:`~llmsizing.time_cost.cost_by_gpu` over the catalogue
    weighs 546 groups of DeepSeek-V3, 66 of them distinct, one :func:`~llmsizing.fewest_gpus.min_gpus` per
    GPU type). A group's pieces are its own whichever groups are weighed beside it (row by row), so those
    not kept are weighed together as before. Read-only lists: the caller reads them. An unhashable keyword:
    weighed, not kept."""
    try:
        store = _kept_pieces(model, tuple(sorted(kw.items())))
        keys = [(tuple(stages), base, tuple(ep_dp)) for (base, _), ep_dp in zip(groups, ep_dps)]
        todo = [i for i, key in enumerate(keys) if key not in store]
    except TypeError:
        return _pieces_of(model, groups, ep_dps, stages, kw, kept)
    if todo:
        got = _pieces_of(model, [groups[i] for i in todo], [ep_dps[i] for i in todo], stages, kw, kept)
        store.update((keys[i], x) for i, x in zip(todo, got))
    return [store[key] for key in keys]


#: How many (model, keywords) :func:`_kept_pieces` keeps groups for.
PIECES_KEPT = 16


@functools.lru_cache(maxsize=PIECES_KEPT)
def _kept_pieces(model, kw_items: tuple) -> dict:
    """The dict of :func:`_pieces`' kept groups of ``model`` with the keywords ``kw_items`` (sorted items)."""
    return {}


def _pieces_of(model, groups, ep_dps, stages, kw: dict, kept: dict) -> list:
    """Each group's layouts' pieces, stage by stage (:func:`~llmsizing.memory._search_pieces`' order), as
    lists of Python floats (the same values: NumPy's float64 entries): on the planner's arrays
    (:func:`llmsizing.moe_prefetch._columns`, bit for bit ``_search_pieces``'), else one
    ``_search_pieces`` per group."""
    from .dense_arrays import supports as arrays_take
    from .moe_prefetch import _columns
    from .plan_pricing import _heavy_stages

    pars = [EpLayouts.over(base, ep_dp) for (base, _), ep_dp in zip(groups, ep_dps)]
    pp = groups[0][0].pp
    got = [None] * len(groups)
    if kw["batch"] == 1 and arrays_take(model, kw) and tuple(stages) == tuple(sorted(set(
            _heavy_stages(model, pp)))):
        jobs = [((base.tp, pp, base.zero, kw["grad_accum"]), None, ep_dp, None, p)
                for (base, _), ep_dp, p in zip(groups, ep_dps, pars)]
        got = [None if x is None else x.tolist() for x in _columns(model, kw, jobs, kept)]
    for i, p in enumerate(pars):
        if got[i] is None:
            one = _search_pieces(model, p, stages, **kw)
            got[i] = np.array(np.broadcast_arrays(*one), dtype=float).T.tolist()
    return got
