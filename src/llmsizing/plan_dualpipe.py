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
* the step: every rank's compute the mean of its two stages' terms (:func:`~llmsizing.comm.step_compute_time_s`
  with ``schedule="dualpipe"``), the bubble DualPipe's fixed order laid out on each row's stage times
  (:func:`~llmsizing.pipeline_schedule.dualpipe_makespan`, no closed form): :func:`dualpipe_makespans` runs
  the same operations on arrays of rows, one pass per ``(pp, m)``, each value the scalar one's bit for bit.

``tests/test_plan_dualpipe.py`` re-prices every row with ``step_time`` and ``training_memory``.
"""

from __future__ import annotations

import functools

import numpy as np

from .pipeline_schedule import _dualpipe_blocks


def dualpipe_rows(cols: dict, totals: np.ndarray) -> tuple:
    """The candidate plans (the fit's columns ``cols`` and their ``totals``) DualPipe can run: an even
    ``pp`` of at least 2 and an even number of micro-batches ``m`` of at least ``2 pp`` (``dualpipe.py``'s
    assertions); ``(None, None)`` if none is left."""
    pp, m = cols["pp"], cols["m"]
    keep = np.flatnonzero((pp >= 2) & (pp % 2 == 0) & (m >= 2 * pp) & (m % 2 == 0))
    if not len(keep):
        return None, None
    if len(keep) == len(pp):
        return cols, totals
    return {k: v[keep] for k, v in cols.items()}, totals[keep]


@functools.lru_cache(maxsize=256)
def _program(p: int, m: int) -> tuple:
    """DualPipe's operations on ``p`` ranks and ``m`` micro-batches as the scalar layout
    (:func:`~llmsizing.pipeline_schedule._dualpipe`) runs them, in an order it could run them: per block
    ``(rank, the finished operations it waits for, its operations)``, each operation ``(length, stage, slot)``
    with length 0 a forward, 1 a backward, 2 half a backward (a deferred weight gradient and the backward
    before it), ``slot`` where its end is kept for the operations that wait for it (-1: none)."""
    blocks = [_dualpipe_blocks(p, m, r) for r in range(p)]
    slots: dict = {}
    pos, later, out = [0] * p, [[] for _ in range(p)], []

    def stage(r, d):
        return r if d == 0 else p - 1 - r

    def deps(r, op):
        kind, d, j = op
        if kind == "W":
            return []
        s = stage(r, d)
        if kind == "F":
            return [("F", d, s - 1, j)] if s > 0 else []
        return [("B", d, s + 1, j)] if s < p - 1 else [("F", d, s, j)]

    while any(pos[r] < len(blocks[r]) for r in range(p)):
        progress = False
        for r in range(p):
            if pos[r] == len(blocks[r]):
                continue
            need = [x for op in blocks[r][pos[r]] for x in deps(r, op)]
            if not all(x in slots for x in need):
                continue
            ops = []
            for kind, d, j in blocks[r][pos[r]]:
                if kind == "W":
                    d, j = later[r].pop(0)
                slot = -1
                if kind != "W":
                    slot = slots.setdefault(("F" if kind == "F" else "B", d, stage(r, d), j), len(slots))
                if kind == "Bz":
                    later[r].append((d, j))
                ops.append((0 if kind == "F" else 1 if kind == "B" else 2, stage(r, d), slot))
            out.append((r, tuple(slots[x] for x in need), tuple(ops)))
            pos[r], progress = pos[r] + 1, True
        if not progress:                                   # (as the scalar layout's guard)
            raise RuntimeError(f"the dualpipe schedule deadlocked (pp={p}, micro_batches={m})")
    return tuple(out), len(slots)


def dualpipe_makespans(stage_times: np.ndarray, m: int) -> np.ndarray:
    """:func:`~llmsizing.pipeline_schedule.dualpipe_makespan` of each row of ``stage_times`` (rows, ``pp``
    stages' seconds) with ``m`` micro-batches: the same operations on arrays (forward a third of a stage's
    time over its largest, backward two thirds, a deferred weight gradient half the backward; each start the
    largest end it waits for), so each value is the scalar one's bit for bit."""
    t = np.asarray(stage_times, dtype=float)
    top = t.max(axis=1)
    ratios = t / top[:, None]
    lengths = (ratios / 3, 2 * ratios / 3, (2 * ratios / 3) / 2)
    length = [[lengths[k][:, s] for s in range(t.shape[1])] for k in range(3)]
    program, n_slots = _program(t.shape[1], m)
    zero = np.zeros(len(t))
    free, done = [zero] * t.shape[1], [zero] * n_slots
    for r, need, ops in program:
        at = free[r]
        for x in need:
            at = np.maximum(at, done[x])
        for k, s, slot in ops:
            at = at + length[k][s]
            if slot >= 0:
                done[slot] = at
        free[r] = at
    return top * functools.reduce(np.maximum, free)


def dualpipe_parts(model, pp: np.ndarray, ri: np.ndarray, rcs, mf: np.ndarray, seconds, *, seq: int,
                   mtp_depth: int = 0) -> tuple:
    """``(compute, busy, top_layers)`` per row of :func:`~llmsizing.plan_pricing._price` under DualPipe:
    the slowest rank's seconds (each rank's terms the mean of its two stages',
    :func:`~llmsizing.pipeline_schedule.dualpipe_rank_mean`, then ``seconds``: the pricing's own expression
    of a stage's seconds from its terms, ``seconds(terms, rows)``), compute plus the bubble
    (:func:`dualpipe_busy`) and the most loaded stage's layers over the model's (the TP backward's windows),
    from every stage's terms (:func:`~llmsizing.plan_stage_terms._pp_terms`, at the planner's split)."""
    from .plan_stage_terms import _pp_terms

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
