"""The coefficient table of the planner's memory fit (Part III, "How many GPUs do you need?"; chapter 17's
widget, issue 35): :func:`table_totals` gives the per-GPU totals of many candidate plans of a search at once,
from the entries of a :class:`~llmsizing.plan_memory.SearchMemory` each (layout, (cp, accumulation class))
pair asks for. Moved out of :mod:`llmsizing.plan_memory` (whose ``_table_totals`` calls it) when its
bookkeeping went onto arrays (moe17): a mixture of experts' search at long context asks for ~10,000 such
pairs per recomputation (Qwen3-30B-A3B at 128K: 674 layouts), and a Python loop over them, three times, was
most of a move of chapter 17's widget.

No formula here: which entries the pairs ask for, in which order (the first asked first, as the loop asked
them, so every entry is made by the same calls in the same order), and ``_total_bytes``' sum on a table of
them. ``tests/test_plan_tables.py`` compares it with the loop it replaces, entry by entry and search by
search.
"""

from __future__ import annotations

import functools

import numpy as np

from .memory import total_with_allowance_bytes
from .moe_layouts import dp_unit
from .moe_prefetch import stored_states
from .plan_candidates import _candidates
from .plan_pricing import _least_recompute_layers, _one_layer_coefficients, _total_bytes
from .plan_stage_terms import chunk_top
from .plan_kept_candidates import (  # noqa: F401 (re-exported)
    CANDIDATES_KEPT, SameRows, _read_only, kept_pair_table, kept_surviving, unit_survivors)

#: The columns of a pair's key: its layout's ``(tp, pp, zero, ep, v)``, then its ``(cp, c)``.
TP, PP, ZERO, EP, V, CP, C = range(7)


@functools.lru_cache(maxsize=CANDIDATES_KEPT)
def kept_candidates(cps: tuple, micros: tuple, global_batch: int, max_gpus, pp: int, tp_pp, units,
                    interleaved: bool):
    """:func:`~llmsizing.plan_candidates._candidates` of the layouts with ``pp`` stages, ``tp x pp = tp_pp``
    (None without ``max_gpus``), each ``cp``'s :func:`~llmsizing.moe_layouts.dp_unit` ``units`` (a tuple
    over ``cps``, None for a dense model) and interleaving or not, in a search of ``cps``, ``micros``,
    ``global_batch`` and ``max_gpus``: all it reads of a layout, so that every layout sharing these shares
    the (read-only) columns. Kept between searches (issue 35, moe17): the candidates depend on neither the
    model nor its memory, and chapter 17's widget moving its model searches the same ones again. Units that
    keep the same rows share one table (:func:`~llmsizing.plan_kept_candidates.kept_surviving`, moe4)."""
    survivors = unit_survivors(cps, micros, global_batch, units)
    if survivors is not False:
        rows = None if survivors is None else SameRows(units, survivors)
        return kept_surviving(cps, micros, global_batch, max_gpus, pp, tp_pp, rows, interleaved)
    table, cp_at = kept_pair_table(cps, micros, global_batch)
    unit = np.array(units)[cp_at]
    tp = 1 if tp_pp is None else tp_pp // pp
    got = _candidates(tp, pp, 1, table=table, units=unit, max_gpus=max_gpus, v=2 if interleaved else 1)
    return None if got is None else _read_only(got)


#: How many searches' candidate structures :func:`search_structure` keeps (plan36: chapter 17's moves of its
#: K/V exchange and of a second GPU type of the same scale-up domain weigh the candidates of the search
#: before; ~0.5-4 MB each, a mixture of experts' ~40,000 candidates the most).
STRUCTURES_KEPT = 4


def search_structure(model, layouts, domain: tuple, cps: tuple, micros: tuple, global_batch: int, max_gpus,
                     counts, expert_tp: bool, per_recompute: bool, candidates=None):
    """What :func:`~llmsizing.plan_memory.fitting_plans` reads of its layouts and candidates before it weighs
    any of them (none of it reads the memory, the GPUs' limits or the recomputations): a dict of ``parts``
    (each layout with a candidate: its key, the GPUs of ``domain``, their scale-up domains, that hold it, its
    :func:`kept_candidates`), ``lay`` (each candidate's part), ``cat`` (the candidates' columns), ``pair_of``,
    ``coef_id``, ``on2d`` (GPU x candidate), ``stage_layers``, ``even``, ``keys`` (the parts' keys, int64),
    ``plain`` (per part: no interleaving, no ZeRO-2/3 under a pipeline), ``seg`` (each candidate's segment)
    and ``pair_keys`` (:func:`pair_keys`); None where no layout has a candidate. ``per_recompute``: the
    memory is an autocast recipe's (its interleaved plans recompute no partial stage). ``candidates``: the
    function giving a layout's candidates (:func:`kept_candidates` by default; the tests put others in
    ``plan_memory``'s). Kept for the last :data:`STRUCTURES_KEPT` arguments (plan36; the function among
    them), read-only; unhashable arguments: made, not kept."""
    args = (model, tuple(layouts), tuple(domain), tuple(cps), tuple(micros), global_batch, max_gpus, counts,
            expert_tp, per_recompute, kept_candidates if candidates is None else candidates)
    try:
        hash(args)
    except TypeError:
        return _structure(*args)
    return _kept_structure(*args)


@functools.lru_cache(maxsize=STRUCTURES_KEPT)
def _kept_structure(*args):
    return _structure(*args)


def _structure(model, layouts, domain, cps, micros, global_batch, max_gpus, counts, expert_tp, per_recompute,
               candidates):
    """:func:`search_structure`, made (the loop and arrays ``fitting_plans`` made itself before plan36)."""
    domain = np.array(domain)
    cands, parts, n_lay, on_of, units = {}, [], [], {}, {}
    for tp, pp, zero, ep, v in layouts:
        if tp not in on_of:
            on_of[tp] = on if (on := domain % tp == 0).any() else None    # tp inside the scale-up domain
        on = on_of[tp]
        if on is None or counts is not None and all(n % (tp * pp) for n in counts):
            continue                              # (no count of counts is tp x pp x cp x dp)
        # _candidates reads (tp, pp, ep) only as pp, tp x pp (max_gpus) and each cp's dp_unit: layouts that
        # share these share its (read-only) columns
        if (tp, ep) not in units:
            units[tp, ep] = tuple(dp_unit(tp, cp, ep, expert_tp) for cp in cps) if model.is_moe else None
        key = (pp, None if max_gpus is None else tp * pp, units[tp, ep], v > 1)
        if key not in cands:                      # (kept between searches: kept_candidates)
            cands[key] = candidates(cps, micros, global_batch, max_gpus, *key)
        cand = cands[key]
        if cand is not None:
            parts.append(((tp, pp, zero, ep, v), on, cand))
            n_lay.append(len(cand["dp"]))
    if not parts:
        return None
    lay = np.repeat(np.arange(len(parts)), n_lay)                   # each candidate's layout
    cat = {k: np.concatenate([c[k] for _, _, c in parts]) for k in ("block", "cp", "micro", "dp", "m", "dpf")}
    # a candidate's coefficients: one per (layout, its (cp, accumulation class) pair)
    pair_of = np.concatenate([c["group"] for _, _, c in parts])
    first_pair = np.concatenate([[0], np.cumsum([len(c["pairs"]) for _, _, c in parts])[:-1]])
    coef_id = first_pair[lay] + pair_of
    on2d = np.stack([on for _, on, _ in parts], axis=1)[:, lay]      # (GPU, candidate)
    # (the layers partial recomputation counts in: a model chunk's, the stage's without interleaving; it is
    # searched on even splits only, where every chunk has them)
    top = {pv: chunk_top(model, *pv) for pv in dict.fromkeys((key[1], key[4]) for key, _, _ in parts)}
    stage_layers = np.array([top[key[1], key[4]] for key, _, _ in parts])[lay]
    even = np.array([model.layers % key[1] == 0 for key, _, _ in parts])[lay]
    # (an autocast recipe's states depend on which layers are rerun, so on the chunks too: interleaved plans
    # recompute all of a chunk's layers or none there, as their states are read at one chunk per stage)
    if per_recompute:
        even &= np.array([key[4] == 1 for key, _, _ in parts])[lay]
    keys = np.array([key for key, _, _ in parts], dtype=np.int64)
    plain = np.array([key[4] == 1 and not (key[2] >= 2 and key[1] > 1) for key, _, _ in parts])
    seg = np.concatenate([[0], np.cumsum((np.diff(lay) != 0) | (np.diff(cat["block"]) != 0))])
    out = dict(lay=lay, pair_of=pair_of, coef_id=coef_id, on2d=on2d, stage_layers=stage_layers, even=even,
               keys=keys, plain=plain, seg=seg, pair_keys=pair_keys(parts))
    for a in (*out.values(), *cat.values()):
        a.flags.writeable = False
    return dict(out, parts=tuple(parts), cat=cat)


def pair_keys(parts) -> np.ndarray:
    """One row per (layout, pair) of ``parts`` (``fitting_plans``' ``(layout key, GPUs, candidates)``), in
    the order of the coefficient ids (the layouts in order, each one's pairs in order): ``(tp, pp, zero, ep,
    v, cp, c)``."""
    n = [len(cand["pairs"]) for _, _, cand in parts]
    lays = np.repeat(np.array([key for key, _, _ in parts], dtype=np.int64).reshape(len(parts), 5), n, axis=0)
    pairs = np.array([p for _, _, cand in parts for p in cand["pairs"]], dtype=np.int64).reshape(-1, 2)
    return np.concatenate([lays, pairs], axis=1)


def first_seen(cols: np.ndarray):
    """The distinct rows of the integer table ``cols`` (rows x columns) in the order they first appear:
    ``(firsts, number)``, the row index where each first appears and each row's number among them (0 for
    the first to appear), as a dict's ``setdefault(row, len(dict))`` over the rows numbers them."""
    if not len(cols):
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    lo = cols.min(axis=0)
    span = (cols.max(axis=0) - lo + 1).tolist()
    if np.prod([float(s) for s in span]) < 2.0 ** 62:             # one int64 code per row
        code = np.zeros(len(cols), dtype=np.int64)
        for j, s in enumerate(span):
            code = code * s + (cols[:, j] - lo[j])
        _, first, at = np.unique(code, return_index=True, return_inverse=True)
    else:
        _, first, at = np.unique(cols, axis=0, return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")
    number = np.empty(len(first), dtype=np.int64)
    number[order] = np.arange(len(first))
    return first[order], number[at.reshape(-1)]


def _tuples(cols: np.ndarray, rows) -> list:
    """The rows ``rows`` of the integer table ``cols`` as tuples of Python ints."""
    return list(map(tuple, cols[rows].tolist()))


def table_totals(memory, keys, rc, coef_id, rows, micro, dpf, limits, margin, kept: dict | None = None):
    """:func:`~llmsizing.plan_pricing._total_bytes` of the candidates ``rows`` (of any layouts) with
    recomputation ``rc``, and their floors (micro-batch 0), from one table of their coefficients
    (:meth:`~llmsizing.plan_memory.SearchMemory.coefficients`, a row per (layout, pair) asked for; pieces a
    layout lacks padded with ``-inf``, which no peak takes). ``keys``: :func:`pair_keys` of the search's
    layouts, ``coef_id`` each candidate's row there. The pairs are asked for in the order of their ids, and
    the entries in the order they are first asked for: the layouts' model states that take one call each at
    once (:meth:`~llmsizing.plan_memory.SearchMemory.prefetch`, each distinct layout once), ``fixed`` and
    ``sharded`` per layout (:meth:`~llmsizing.plan_memory.SearchMemory.states`), ``per_micro`` per pair; the
    table is stacked from the distinct ones, ``sharded / cp`` on each candidate's column (the same quotient
    entry by entry, and ``x / 1 = x``), a block of candidates at a time (:func:`_blocks`). A row whose floor
    exceeds every GPU's entry of ``limits`` (by more than the relative ``margin``) keeps its floor as total
    (fitting_plans drops it unread): its ``per_micro`` is read at ``cp = 1`` (the calls made before, so its
    ``cp > 1`` is not asked for, two calls).

    ``kept``: a dict one search's recomputations share: when its model states are the same for all of them
    (``kept["share_states"]``; not an autocast recipe's) the first call keeps there its state tables and each
    pair's row in them, and a later call, whose pairs are among the first's (each recomputation weighs only
    candidates the lighter ones left without a plan), reads them instead of reading the entries again (they
    are all made by then: nothing is asked of ``memory`` that the read would have asked; moe21)."""
    ids, at = _distinct_ids(coef_id[rows], len(keys))
    k = keys[ids]                                                   # each pair asked: its key
    sv = np.where((k[:, ZERO] == 3) & (k[:, PP] > 1), k[:, V], 1)  # plan_candidates.state_chunks
    lay6 = k[:, [TP, PP, ZERO, EP, C, V]]
    firsts, _ = first_seen(lay6)
    memory.prefetch(_tuples(lay6, firsts), rc)
    # (a later recomputation: its pairs' states all kept; not so where the first weighed fewer layouts, as op
    # SAC's, which skips tp and cp > 1 (plan_memory.fitting_plans): those pairs are read here; review30a)
    if kept and "fixed" in kept and (kept["pair_state"][ids] >= 0).all():
        fixed, sharded = kept["fixed"], kept["sharded"]
        state_at = kept["pair_state"][ids]
    else:
        st = np.concatenate([k[:, [TP, PP, ZERO, EP, C]], sv[:, None]], axis=1)
        firsts, state_at = first_seen(st)
        # (the kept ones read directly, a mixture of experts' A + B / ep ones on rows; an autocast recipe's:
        # one SearchMemory per recomputation, each made by states)
        st_list = stored_states(memory, _tuples(st, firsts), rc)
        # (the tables are held piece by row, (piece, candidate): the same entries and elementwise operations,
        # and each candidate's maximum over its pieces a reduction down contiguous columns, ~10x faster than
        # along its row; moe21)
        fixed, sharded = (_by_piece(padded([s[i] for s in st_list], -np.inf if i == 0 else 0.0))
                          for i in (0, 1))
        if kept and kept.get("share_states") and "fixed" not in kept:
            pair_state = np.full(len(keys), -1, dtype=np.int64)
            pair_state[ids] = state_at
            kept.update(fixed=fixed, sharded=sharded, pair_state=pair_state)
    rows_state = state_at[at]
    cp = k[:, CP].astype(float)[at]
    div = dpf[rows]
    # the floor (micro-batch 0: fixed + 0 + sharded / dp, the same values; pieces are finite, -inf the pads
    # of fixed), a block of candidates at a time (:func:`_blocks`)
    floor = np.empty(len(rows))
    for j in _blocks(len(rows), len(fixed)):
        s = rows_state[j]
        floor[j] = (fixed.take(s, axis=1) + sharded.take(s, axis=1) / cp[j] / div[j]).max(axis=0)
    live = ~(floor > limits.max() * (1 + margin))              # (beyond the largest limit: beyond every one)
    if kept is not None:                 # (which rows' totals are weighed: plan_memory's kept totals)
        kept["live"] = live
    need = np.zeros(len(ids), dtype=bool)
    need[at[live]] = True
    later = k[need & (k[:, CP] > 1)][:, [TP, PP, C, V]]            # (each distinct key once, in order)
    memory.prefetch_cp(_tuples(later, first_seen(later)[0]), rc)
    mk = k[:, [TP, PP, C, CP, V]].copy()
    mk[~need, 3] = 1
    firsts, micro_at = first_seen(mk)
    per_micro = _by_piece(micro_rows(memory, rc, _tuples(mk, firsts), len(fixed)))
    # _total_bytes' sum on the rows read (``sharded / dp`` worked out as for the floor: the same floats); the
    # others keep their floor
    peak, micro_at = floor.copy(), micro_at[at]
    live = np.flatnonzero(live)
    for j in _blocks(len(live), len(fixed)):
        i = live[j]
        s = rows_state[i]
        peak[i] = (fixed.take(s, axis=1) + micro[rows[i]] * per_micro.take(micro_at[i], axis=1)
                   + sharded.take(s, axis=1) / cp[i] / div[i]).max(axis=0)
    return tuple(total_with_allowance_bytes(x) for x in (peak, floor))


#: About how many entries (pieces x candidates) :func:`table_totals` works on at once: its tables are made
#: and summed a block of candidates at a time, so that each block's temporaries stay in the processor's
#: cache (moefast34: the same elementwise operations on the same floats, each candidate's own column, ~2.5x
#: faster than on the whole (pieces, candidates) tables of a mixture of experts' ~40,000 candidates).
BLOCK_ENTRIES = 2**16


def _blocks(n: int, width: int):
    """Slices of ``range(n)`` of about :data:`BLOCK_ENTRIES` entries each for tables ``width`` pieces tall."""
    step = max(BLOCK_ENTRIES // max(width, 1), 256)
    return [slice(i, min(i + step, n)) for i in range(0, n, step)]


def _distinct_ids(ids: np.ndarray, n: int) -> tuple:
    """``np.unique(ids, return_inverse=True)`` of integers ``ids`` in ``[0, n)``: the distinct ones in
    increasing order and each entry's position among them, by marking them in a table of ``n`` (no sort:
    ~0.2 ms instead of ~1.2 ms for the ~40,000 candidates of a Qwen3-30B-A3B search; moe21)."""
    seen = np.zeros(n, dtype=bool)
    seen[ids] = True
    return np.flatnonzero(seen), (np.cumsum(seen) - 1)[ids]


def _by_piece(table: np.ndarray) -> np.ndarray:
    """``table`` (a row per entry, a column per piece) as a C-contiguous (piece, entry) table."""
    return np.ascontiguousarray(table.T)


def micro_rows(memory, rc: str, keys: list, width: int) -> np.ndarray:
    """``padded([memory.per_micro(tp, pp, rc, c, cp, v) for tp, pp, c, cp, v in keys], 0.0, width)`` from a
    table of the entries kept on ``memory`` per ``rc`` (fit39: a search asks again for the entries of the
    one before it, ~300 a recomputation, each one call and a row of a new table): the entries it lacks are
    asked for in the order of ``keys`` (those it holds were asked before, so asking again would only read
    them) and added as rows, pads ``0.0``; the rows of ``keys`` taken, as wide as the widest of them or
    ``width``. Any other memory (no ``__dict__``): asked as written above."""
    store = getattr(memory, "__dict__", None)
    if store is None:
        return padded([memory.per_micro(tp, pp, rc, c, cp, v) for tp, pp, c, cp, v in keys], 0.0, width)
    index, table, lens = store.setdefault("_micro_rows", {}).get(rc, ({}, np.zeros((0, 0)), np.zeros(0, int)))
    rows = [index.get(k) for k in keys]
    if None in rows:
        new = [k for k, r in zip(keys, rows) if r is None]
        got = [memory.per_micro(tp, pp, rc, c, cp, v) for tp, pp, c, cp, v in new]
        block = padded(got, 0.0, table.shape[1])
        if block.shape[1] > table.shape[1]:
            table = np.concatenate([table, np.zeros((len(table), block.shape[1] - table.shape[1]))], axis=1)
        index.update((k, len(table) + i) for i, k in enumerate(new))
        table = np.concatenate([table, block])
        lens = np.concatenate([lens, [len(x) for x in got]])
        store["_micro_rows"][rc] = (index, table, lens)
        rows = [index[k] for k in keys]
    wide = max(width, int(lens[rows].max())) if rows else width
    out = table[rows, :wide]
    if out.shape[1] < wide:
        out = np.concatenate([out, np.zeros((len(out), wide - out.shape[1]))], axis=1)
    return out


def padded(arrays: list, pad: float, width: int = 0) -> np.ndarray:
    """``arrays`` (1-D) as the rows of one table as wide as the widest (or ``width`` if wider), the others'
    missing pieces ``pad``."""
    lens = list(map(len, arrays))
    width = max(width, *lens)
    if min(lens) == width:
        return np.array(arrays)
    tab = np.full((len(arrays), width), pad)
    for k, x in enumerate(arrays):
        tab[k, :len(x)] = x
    return tab


def least_fit(memory, keys, rows, *, coef_id, micro, dpf, stage_layers, limits, on):
    """:func:`~llmsizing.plan_memory._least` (partial recomputation of the candidates ``rows``: per GPU and
    candidate the fewest layers per stage that fit, and the totals there) with its coefficients gathered on
    tables (fit39): ``keys`` the search's :func:`pair_keys`. The (layout, pair)s' coefficients with every
    layer recomputed are :meth:`~llmsizing.plan_memory.SearchMemory.coefficients`' ``(fixed, per_micro,
    sharded / cp)``, made of the distinct ``states`` and ``per_micro`` entries, each asked once, in the order
    its first (layout, pair) asked ``coefficients`` for it (the same calls on ``memory`` in the same order: a
    repeated ask reads a kept entry); rows of one table a width of the pieces, taken by index instead of one
    array a (layout, pair) stacked (the same floats; ``x / cp`` as there, and ``x / 1`` is ``x``). The
    one-layer coefficients as :func:`~llmsizing.plan_memory._one_layers` makes them. ``_least`` keeps its
    loop for any other memory; ``tests/test_least_tables.py`` compares the two."""
    ids, at = _distinct_ids(coef_id[rows], len(keys))
    k = keys[ids]                                                  # (tp, pp, zero, ep, v, cp, c)
    layers_k = np.zeros(len(ids), dtype=np.asarray(stage_layers).dtype)
    layers_k[at] = stage_layers[rows]                              # (a pair's layers: its layout's)
    tl = _tuples(k, slice(None))
    # (each distinct layout once, in the order first asked: prefetch and prefetch_cp number them so)
    lay6 = k[:, [TP, PP, ZERO, EP, C, V]]
    memory.prefetch(_tuples(lay6, first_seen(lay6)[0]), "full")
    later = k[k[:, CP] > 1][:, [TP, PP, C, V]]
    memory.prefetch_cp(_tuples(later, first_seen(later)[0]), "full")
    sv = np.where((k[:, ZERO] == 3) & (k[:, PP] > 1), k[:, V], 1)  # plan_candidates.state_chunks
    s_first, s_at = first_seen(np.concatenate([k[:, [TP, PP, ZERO, EP, C]], sv[:, None]], axis=1))
    m_first, m_at = first_seen(k[:, [TP, PP, C, CP, V]])
    states, micros = [None] * len(s_first), [None] * len(m_first)
    # (coefficients asks states, then per_micro: each distinct entry asked where it was first asked)
    for i, kind, j in sorted([(i, 0, j) for j, i in enumerate(s_first.tolist())]
                             + [(i, 1, j) for j, i in enumerate(m_first.tolist())]):
        tp, pp, zero, ep, v, cp, c = tl[i]
        if kind == 0:
            states[j] = memory.states(tp, pp, zero, ep, c, "full", v)
        else:
            micros[j] = memory.per_micro(tp, pp, "full", c, cp, v)
    fixed_k, sharded_k = _rows_of([s[0] for s in states], s_at), _rows_of([s[1] for s in states], s_at)
    micro_k = _rows_of(micros, m_at)
    cp_k = k[:, CP]
    width = np.array([len(s[0]) for s in states])[s_at]
    b, dp, layers = micro[rows], dpf[rows], stage_layers[rows]
    n, t = np.zeros((len(limits), len(rows)), dtype=np.int64), np.full((len(limits), len(rows)), np.inf)
    for w in np.unique(width).tolist():                       # (pieces: 5 per stage weighed, 1 or 2 stages)
        kid = np.flatnonzero(width == w)
        full = [fixed_k[w][kid], micro_k[w][kid], sharded_k[w][kid] / cp_k[kid][:, None]]
        cols = np.flatnonzero(width[at] == w)
        pos = np.searchsorted(kid, at[cols])
        tab = [x[pos] for x in full]
        can = (_total_bytes(tab, b[cols], dp[cols])[None, :] <= limits[:, None]) & on[:, cols]
        some = np.zeros(len(ids), dtype=bool)
        some[at[cols][can.any(axis=0)]] = True
        ones = _one_rows(memory, tl, layers_k, kid, some[kid], full, _one_layer_coefficients)
        if can.any():                              # (else not even every layer recomputed fits)
            n[:, cols], t[:, cols] = _least_recompute_layers([x[pos] for x in ones], tab, layers[cols],
                                                             b[cols], dp[cols], limits, can=can)
    return n, t


def _rows_of(arrays: list, at: np.ndarray) -> dict:
    """Per width of ``arrays``: a table of each entry's array (``at``: each entry's index into ``arrays``;
    rows of entries of another width left as they come, unread)."""
    out = {}
    widths = np.array([len(x) for x in arrays])
    for w in np.unique(widths).tolist():
        these = np.flatnonzero(widths == w)
        row = np.zeros(len(arrays), dtype=np.int64)
        row[these] = np.arange(len(these))
        out[w] = np.stack([arrays[j] for j in these.tolist()])[row[at]]
    return out


def _one_rows(memory, tl, layers_k, kid, some, full, one_layer) -> list:
    """The one-layer coefficients of the (layout, pair)s ``kid`` (rows of ``full``, their coefficients with
    every layer recomputed) where ``some``, the others' left as ``full``'s (unread): those without
    recomputation known (``per_micro`` at ``rc = "none"``) from ``full`` on rows (``one_layer``), the others
    off :meth:`~llmsizing.plan_memory.SearchMemory.coefficients` (``"full1"``), as ``_one_layers`` makes
    them, in its order of asks."""
    ones = [x.copy() for x in full]
    todo = kid[some]
    if not len(todo):
        return ones
    sub = [tl[i] for i in todo.tolist()]
    firsts, at = first_seen(np.array([(tp, pp, c, v) for tp, pp, zero, ep, v, cp, c in sub], dtype=np.int64))
    is_known = np.array([(tp, pp, "none", c) + ((v,) if v > 1 else ()) in memory._micro
                         for tp, pp, zero, ep, v, cp, c in (sub[i] for i in firsts.tolist())], dtype=bool)[at]
    rows = np.flatnonzero(some)
    for r, key in zip(rows[~is_known].tolist(), (x for x, y in zip(sub, is_known) if not y)):
        tp, pp, zero, ep, v, cp, c = key
        got = memory.coefficients(tp, pp, zero, ep, "full1", c, cp, v)
        for j in range(3):
            ones[j][r] = got[j]
    known = rows[is_known]
    if len(known):
        # (coefficients at rc "none": its states are full's, kept; each distinct per_micro asked in order)
        ks = [x for x, y in zip(sub, is_known) if y]
        m_first, m_at = first_seen(np.array([(tp, pp, c, cp, v) for tp, pp, zero, ep, v, cp, c in ks],
                                            dtype=np.int64))
        none = np.stack([memory.per_micro(tp, pp, "none", c, cp, v)
                         for tp, pp, zero, ep, v, cp, c in (ks[i] for i in m_first.tolist())])[m_at]
        ones[1][known] = one_layer((None, none, None), [x[known] for x in full], layers_k[kid[known]])[1]
    return ones
