"""DualPipe in the planner's search (Part III, "How many GPUs do you need?"; chapter 18; issue 35, dual48):
``plan(schedule="dualpipe")`` searches the layouts DeepSeek's DualPipe can run and prices each as
:func:`~llmsizing.layouts.step_time` and :func:`~llmsizing.memory.training_memory` price it with
``schedule="dualpipe"``. No formula of its own:

* the layouts: an even ``pp`` of at least 2 (each rank holds stages ``i`` and ``pp - 1 - i``), an even number
  of micro-batches of at least ``2 pp``, no interleaved chunks (DeepSeek-V3 report, arXiv:2412.19437,
  Sec. 3.2.1; ``deepseek-ai/DualPipe``'s ``dualpipe.py`` asserts ``num_chunks % 2 == 0`` and
  ``num_chunks >= num_ranks * 2``, ``num_ranks % 2 == 0``): :func:`dualpipe_rows`, the pipeline degrees of
  :func:`~llmsizing.plan_stage_terms.pipeline_degrees` (uneven first and last stages where ``pp`` divides
  neither the layers nor the layers plus two, :func:`~llmsizing.parallel.uneven_split`); partial
  recomputation is not searched (``training_memory`` refuses it with DualPipe);
* the memory: each rank's two stages (:mod:`llmsizing.memory_dualpipe`), read off
  :func:`llmsizing.plan_moe.option_pieces`;
* the step: every rank's compute the mean of its two stages' terms
  (:func:`~llmsizing.comm.step_compute_time_s` with ``schedule="dualpipe"``), the bubble DualPipe's fixed
  order laid out on each row's stage times (:func:`~llmsizing.pipeline_schedule.dualpipe_makespan`, no closed
  form): :func:`dualpipe_makespans` runs the same operations on arrays of rows, a level of blocks at a time,
  one pass per ``(pp, m)``, each value the scalar one's bit for bit. Its cost grows with ``m`` (a pass per
  level of blocks, about ``m + pp`` of them) and with the ``(pp, m)`` a search holds (each laid out once,
  :func:`_program`, kept): ``benchmarks/README.md``.

``tests/test_plan_dualpipe.py`` re-prices every row with ``step_time`` and ``training_memory``.
"""

from __future__ import annotations

import functools

import numpy as np

from .pipeline_schedule import _dualpipe_blocks
from .plan_stage_terms import _pp_terms


#: How many DualPipe programs (:func:`_program`, one per ``(pp, m)``, 28 bytes a block: ~12 MB for the ~90 of
#: DeepSeek-V3's search at 15,360 sequences) are kept: they depend on no model, GPU or time, so a second
#: search (another model, GPU type or recipe) lays out only the ``(pp, m)`` it adds.
PROGRAMS_KEPT = 128


def dualpipe_rows(cols: dict, totals: np.ndarray) -> tuple:
    """The candidate plans (the fit's columns ``cols`` and their ``totals``) DualPipe can run: an even
    ``pp`` of at least 2 and an even number of micro-batches ``m`` of at least ``2 pp`` (``dualpipe.py``'s
    assertions), ``recompute_layers`` none; ``(None, None)`` if none is left."""
    pp, m = cols["pp"], cols["m"]
    keep = np.flatnonzero((pp >= 2) & (pp % 2 == 0) & (m >= 2 * pp) & (m % 2 == 0))
    if not len(keep):
        return None, None
    out = {k: v[keep] for k, v in cols.items()}
    # (no partial recomputation with DualPipe: a dense model's "full" recomputes every layer, recompute_layers
    # <NA> as a mixture of experts' rows, which training_memory(schedule="dualpipe") takes)
    out["rl"] = np.full(len(keep), -1, dtype=cols["rl"].dtype)
    return out, totals[keep]


@functools.lru_cache(maxsize=PROGRAMS_KEPT)
def _program(p: int, m: int) -> tuple:
    """DualPipe's operations on ``p`` ranks and ``m`` micro-batches as the scalar layout
    (:func:`~llmsizing.pipeline_schedule._dualpipe`) runs them, grouped in levels: a block (a rank's
    operations run back to back, :func:`~llmsizing.pipeline_schedule._dualpipe_blocks`) is one level after the
    rank's previous block and after every block whose operation it waits for, so the blocks of a level wait
    for none of each other. Returns ``(table, bounds, slots)``: ``table`` seven rows over the blocks, level by
    level (``bounds`` each level's columns): the three slots whose ends it waits for (its rank's previous
    block's last, and the ends of the operations it needs; the zero slot ``n = 2 pp m`` where there are
    fewer), and for each of its (at most two) operations the row of its length (``3 x stage + kind``: a
    forward, a backward, half a backward; the zero row ``3 pp`` for none) and the slot its end is kept in.
    The slots ``0 .. n - 1`` are the ends of ``(forward or backward, direction, stage, micro-batch)``, those
    above ``n`` the deferred weight gradients'. Kept (:data:`PROGRAMS_KEPT`)."""
    h = m // 2                          # micro-batches per direction: an end's slot is (kind, d, stage, j)
    n = 4 * p * h                       # (F: (d p + s) h + j; B: ((2 + d) p + s) h + j)
    parts = [_rank_blocks(p, m, r, h, n) for r in range(p)]
    rank = np.concatenate([np.full(len(x[0]), r) for r, x in enumerate(parts)])
    at = np.concatenate([np.arange(len(x[0])) for x in parts])          # a block's place on its rank
    d0, d1, k0, w0, k1, w1 = (np.concatenate([x[c] for x in parts]) for c in range(6))
    # every operation's end gets a slot (a deferred weight gradient one of its own, after the zero slot n), a
    # block of one operation its second "operation" (zero long) on the same slot, and each block waits for
    # its rank's previous block's last end (the zero slot for a rank's first): the rank's own order as a wait
    first0, first1 = w0 == n + 1, (w1 == n + 1) & (k1 != 3 * p)
    w0, w1 = w0.copy(), w1.copy()
    w0[first0] = n + 1 + np.arange(first0.sum())
    w1[first1] = n + 1 + first0.sum() + np.arange(first1.sum())
    single = k1 == 3 * p
    w1[single] = w0[single]
    slots = int(n + 1 + first0.sum() + first1.sum())
    prev = np.where(at == 0, n, np.roll(w1, 1))
    # each block's level: one after the rank's previous block and after the blocks it waits for (the longest
    # path to it). From the lower bound ``at``, each pass lifts a block over the blocks it waits for and
    # carries that along its rank (a running maximum per rank); the levels only rise, and stop at the longest
    # paths: a few passes (pp / 2 for DualPipe), whatever m
    made = np.full(slots, -1)                       # the block that ends each slot (-1: none)
    made[w0], made[w1] = np.arange(len(rank)), np.arange(len(rank))
    m0, m1 = made[d0], made[d1]
    big = 4 * (len(rank) + 1)                       # (keeps the running maximum within each rank)
    level = at.copy()
    for _ in range(len(rank) + 1):
        wait = np.maximum(np.where(m0 >= 0, level[m0], -1), np.where(m1 >= 0, level[m1], -1))
        lifted = at + np.maximum.accumulate(np.maximum(wait + 1 - at, 0) + rank * big) - rank * big
        if np.array_equal(lifted, level):
            break
        level = lifted
    else:                                           # (a cycle: cannot happen for DualPipe's phases)
        raise RuntimeError(f"the dualpipe schedule deadlocked (pp={p}, micro_batches={m})")
    order = np.argsort(level, kind="stable")
    table = np.array([prev, d0, d1, k0, w0, k1, w1], dtype=np.int64)[:, order].astype(np.int32)
    level = level[order]
    cuts = np.flatnonzero(np.diff(level)) + 1
    bounds = tuple(zip([0, *cuts.tolist()], [*cuts.tolist(), len(level)]))
    table.setflags(write=False)
    return table, bounds, slots


#: :func:`_dualpipe_blocks`' operation kinds as codes: forward, backward, a backward whose weight gradient is
#: deferred, the deferred weight gradient.
_KINDS = {"F": 0, "B": 1, "Bz": 2, "W": 3}


def _rank_blocks(p: int, m: int, r: int, h: int, n: int) -> tuple:
    """Rank ``r``'s blocks (:func:`~llmsizing.pipeline_schedule._dualpipe_blocks`, in order) as
    :func:`_program`'s columns: the two slots each waits for, and each of its two operations' length row and
    slot (the zero slot ``n``, the zero row ``3 p`` and the discarded slot ``n + 1`` where there is none). A
    deferred weight gradient takes the micro-batch of the rank's earliest backward still waiting for one
    (first in, first out, as the reference's queue)."""
    blocks = _dualpipe_blocks(p, m, r)
    size = np.fromiter(map(len, blocks), dtype=np.int64, count=len(blocks))
    kind, d, j = zip(*(op for blk in blocks for op in blk))
    kind = np.fromiter(map(_KINDS.__getitem__, kind), dtype=np.int64, count=len(kind))
    d = np.array([x or 0 for x in d], dtype=np.int64)
    j = np.array([x or 0 for x in j], dtype=np.int64)
    w, z = np.flatnonzero(kind == 3), np.flatnonzero(kind == 2)
    d[w], j[w] = d[z[:len(w)]], j[z[:len(w)]]       # (the k-th weight gradient: the k-th deferred backward)
    s = np.where(d == 0, r, p - 1 - r)
    fwd = kind == 0
    slot = np.where(fwd, (d * p + s) * h + j, ((2 + d) * p + s) * h + j)
    slot[w] = n + 1
    row = 3 * s + np.minimum(kind, 2)
    wait = np.where(fwd, np.where(s > 0, (d * p + s - 1) * h + j, n),
                    np.where(s < p - 1, ((2 + d) * p + s + 1) * h + j, (d * p + s) * h + j))
    wait[w] = n
    first = np.cumsum(size) - size                  # each block's first operation; the second where two
    two = size == 2
    second = np.where(two, first + 1, first)
    return (wait[first], np.where(two, wait[second], n), row[first], slot[first],
            np.where(two, row[second], 3 * p), np.where(two, slot[second], n + 1))


def dualpipe_makespans(stage_times: np.ndarray, m: int) -> np.ndarray:
    """:func:`~llmsizing.pipeline_schedule.dualpipe_makespan` of each row of ``stage_times`` (rows, ``pp``
    stages' seconds) with ``m`` micro-batches: the same operations on arrays, a level of blocks at a time
    (:func:`_program`; forward a third of a stage's time over its largest, backward two thirds, a deferred
    weight gradient half the backward; each block's start the largest end it waits for, a missing wait or
    operation an exact zero), so each value is the scalar one's bit for bit."""
    t = np.asarray(stage_times, dtype=float)
    top = t.max(axis=1)
    ratios = t / top[:, None]
    p, rows = t.shape[1], len(t)
    lengths = np.zeros((3 * p + 1, rows))
    lengths[0:3 * p:3], lengths[1:3 * p:3] = (ratios / 3).T, (2 * ratios / 3).T
    lengths[2:3 * p:3] = lengths[1:3 * p:3] / 2
    table, bounds, slots = _program(p, m)
    done = np.zeros((slots, rows))
    for a, b in bounds:                  # (a level: its blocks' three waits, then their two operations)
        at = done[table[0:3, a:b]].max(axis=0)
        at += lengths[table[3, a:b]]
        done[table[4, a:b]] = at
        at += lengths[table[5, a:b]]
        done[table[6, a:b]] = at
    return top * done.max(axis=0)        # (the last end: every operation's is kept)


def dualpipe_parts(model, pp: np.ndarray, ri: np.ndarray, rcs, mf: np.ndarray, seconds, *, seq: int,
                   mtp_depth: int = 0) -> tuple:
    """``(compute, busy, top_layers)`` per row of :func:`~llmsizing.plan_pricing._price` under DualPipe:
    the slowest rank's seconds (each rank's terms the mean of its two stages',
    :func:`~llmsizing.pipeline_schedule.dualpipe_rank_mean`, then ``seconds``: the pricing's own expression
    of a stage's seconds from its terms, ``seconds(terms, rows)``), compute plus the bubble
    (:func:`dualpipe_busy`) and the most loaded stage's layers over the model's (the TP backward's windows),
    from every stage's terms (:func:`~llmsizing.plan_stage_terms._pp_terms`, at the planner's split)."""
    n = len(pp)
    compute, busy, top_layers = np.empty(n), np.empty(n), np.empty(n)
    for p_ in np.unique(pp).tolist():
        on = np.flatnonzero(pp == p_)
        rows, _ = _pp_terms(model, int(p_), tuple(rcs), int(seq), int(mtp_depth))
        terms = np.stack(rows).take(ri[on], axis=0)                    # (row, stage, piece)
        stage_s = np.column_stack([seconds(terms[:, i], on) for i in range(p_)])
        ranks = (terms + terms[:, ::-1]) / 2                            # rank i: stages i and pp - 1 - i
        compute[on] = np.column_stack([seconds(ranks[:, i], on) for i in range(p_)]).max(axis=1)
        busy[on] = dualpipe_busy(compute[on], stage_s, (stage_s + stage_s[:, ::-1]) / 2, mf[on])
        top_layers[on] = terms[:, :, 7].max(axis=1)
    return compute, busy, top_layers


def dualpipe_busy(compute: np.ndarray, stage_s: np.ndarray, rank_s: np.ndarray, m: np.ndarray) -> np.ndarray:
    """Compute plus DualPipe's bubble, ``compute (1 + bubble)``, per row, as
    :func:`~llmsizing.layouts.step_time` forms it: ``compute`` the slowest rank's seconds, ``stage_s``
    (rows, ``pp``) every stage's (1F1B's), ``rank_s`` every rank's mean of its two stages' seconds (the
    bubble's ``top``), ``m`` the micro-batches; the bubble
    ``max(0, (makespan - m top) / (m top))`` (:func:`~llmsizing.moe_time.schedule_bubble`)."""
    top = rank_s.max(axis=1)
    bubble = np.zeros(len(compute))
    for m_ in np.unique(m).tolist():
        on = np.flatnonzero(m == m_)
        span = dualpipe_makespans(stage_s[on], int(m_))
        bubble[on] = np.maximum(0.0, (span - m_ * top[on]) / (m_ * top[on]))
    return compute + bubble * compute


__all__ = ["dualpipe_rows", "dualpipe_makespans", "dualpipe_parts", "dualpipe_busy"]
