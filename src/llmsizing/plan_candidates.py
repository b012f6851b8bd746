"""The planner's candidate plans of a layout (Part III, "How many GPUs do you need?"), split out of
:mod:`llmsizing.plan_memory` (issue 34: interleaved pipelines pushed it past 600 lines): every
(context-parallel degree, micro-batch, ``dp``) a search's layouts may take (:func:`_pair_table`), and the rows
one layout keeps, with the accumulation classes its memory depends on (:func:`_candidates`). NumPy only; no
formula of the model.
:mod:`llmsizing.plan_memory` re-exports these names.
"""

from __future__ import annotations

import functools

import numpy as np

from ._validate import check_int
from .layouts import _divisors
from .parallel import check_layout


def _pair_table(cps, divisors: dict, global_batch: int) -> dict:
    """Every (context-parallel degree, micro-batch, ``dp``) a search's layouts may take, in the search's order
    (``cp``, then micro-batch, then ``dp``), as columns: ``block`` (the index of the (cp, micro-batch) pair),
    ``cp``, ``micro``, ``dp``, ``m`` (micro-batches per step). ``divisors`` holds the divisors of
    ``global_batch // micro`` for each micro-batch, in order; a micro-batch that does not divide
    ``global_batch`` has none. :func:`_candidates` keeps the rows a layout allows."""
    block, cp_, b_, dp_ = [], [], [], []
    for k, (cp, b) in enumerate((cp, b) for cp in cps for b in divisors):
        if global_batch % b:
            continue
        ds = divisors[b]
        block += [k] * len(ds)
        cp_ += [cp] * len(ds)
        b_ += [b] * len(ds)
        dp_ += ds
    block, cp_, b_, dp_ = (np.array(x, dtype=np.int64) for x in (block, cp_, b_, dp_))
    return dict(block=block, cp=cp_, micro=b_, dp=dp_, m=global_batch // (b_ * dp_))


def _candidates(tp: int, pp: int, ep: int, *, table: dict, units, max_gpus, v: int = 1):
    """The candidate plans of the layouts with ``(tp, pp, ep)`` (any ZeRO stage) as columns, in the search's
    order (context-parallel degree, micro-batch, ``dp``), or None if there is none: the rows of ``table``
    (:func:`_pair_table`) with ``m >= pp`` micro-batches per step, ``tp x cp x pp x dp`` at most
    ``max_gpus``, and for a mixture of experts ``dp`` a multiple of ``units`` (each row's
    :func:`~llmsizing.moe_layouts.dp_unit`: ``ep`` divides ``tp x cp x dp / etp``,
    :class:`~llmsizing.parallel.Parallel`); and ``group`` (an index into ``pairs``, the distinct (cp,
    accumulation class) pairs). With ``v > 1`` interleaved chunks per stage (issue 34), ``m`` a multiple of
    ``pp``, as Megatron-LM's interleaved schedule requires (its micro-batch groups of ``pp``,
    ``microbatch_group_size_per_vp_stage``)."""
    cp_, dp_ = table["cp"], table["dp"]
    keep = table["m"] >= pp
    if v > 1:
        keep &= table["m"] % pp == 0
    if max_gpus is not None:
        keep &= tp * cp_ * pp * dp_ <= max_gpus
    if units is not None:
        keep &= dp_ % units == 0
    rows = np.flatnonzero(keep)
    if not len(rows):
        return None
    cp_, b_, dp_, m = cp_[rows], table["micro"][rows], dp_[rows], table["m"][rows]
    # memory depends on grad_accum only through "more than one micro-batch" (the gradients are then alive in
    # the forward) and the micro-batches in flight, which saturate at pp: two classes at most (interleaved:
    # the whole step in flight on the first stage at m = pp, and from 2 pp on the warm-up's own count)
    cls = np.where(m > 1, max(2, pp), 1) if v == 1 else np.where(m > pp, 2 * pp, pp)
    # the distinct (cp, accumulation class) pairs, numbered in the order they first appear
    if len(rows) <= _FEW_ROWS:             # (a dict's numbering: no NumPy calls on a few dozen rows)
        pairs: dict = {}
        group = np.array([pairs.setdefault(k, len(pairs)) for k in zip(cp_.tolist(), cls.tolist())],
                         dtype=np.int64)
    else:
        _, first, at = np.unique(cp_ * (2 * pp + 1) + cls, return_index=True, return_inverse=True)
        order = np.argsort(first)
        number = np.empty(len(first), dtype=np.int64)
        number[order] = np.arange(len(first))
        group = number[at.reshape(-1)]
        pairs = {(int(cp_[f]), int(cls[f])): None for f in first[order].tolist()}
    return dict(block=table["block"][rows], cp=cp_, micro=b_.astype(float), dp=dp_, m=m, group=group,
                pairs=tuple(pairs), dpf=dp_.astype(float))


#: Up to this many rows :func:`_candidates` numbers its (cp, accumulation class) pairs with a dict, beyond it
#: with ``np.unique``: the same numbers (first appearance), ~6 us sooner on the ~50 rows of a chapter 17
#: layout (issue 35: a MoE model move builds ~250 such tables).
_FEW_ROWS = 256


#: The interleaved model chunks per pipeline stage the planner tries by default (``virtual_stages=None``):
#: every count that splits a stage's layers into equal chunks (:func:`stage_chunk_options`), 1 (plain
#: 1F1B) included. No count wins everywhere (issue 34, vp38): the bubble ``(pp - 1) / (v m)`` (Narayanan et
#: al. 2021, Sec. 2.2) falls with ``v`` and the sends exposed in the fill and drain stay ``2 (pp - 1)``
#: (:func:`~llmsizing.layouts.exposed_by_group`), but every chunk after the first reduces its gradients in a
#: call of its own (Megatron-Core's bucket layout, :func:`~llmsizing.grad_buckets.megatron_calls_of`), so
#: the gradient reduction's calls grow with ``v``; where it shows, an intermediate count is the fastest
#: (chapter 11's H100 pipeline: 20 chunks a stage beat 40). The fewest chunks give partial recomputation
#: (``--recompute-num-layers`` per virtual stage) its finest steps, and memory moves with ``v`` too: the
#: search prices every count, and :func:`~llmsizing.plan_rank.interleaving_winners` lists those that win.
VIRTUAL_STAGES = None

#: The most interleaved chunks per stage the planner searches: 64 (Llama 3 405B ran 8; a chunk per layer of
#: a 126-layer model on two stages is 63). It bounds the schedule's bookkeeping for a model of thousands of
#: layers per stage.
MAX_VIRTUAL_STAGES = 64


def stage_chunk_options(stage_layers: int, virtual_stages=None) -> tuple[int, ...]:
    """The interleaved model chunks per stage the planner searches for a pipeline stage of ``stage_layers``
    layers (Megatron-LM's even split; issue 34): ``1`` and, from ``virtual_stages`` (default
    :data:`VIRTUAL_STAGES`: every divisor above 1, at most :data:`MAX_VIRTUAL_STAGES`; vp38), those above 1
    that divide the stage's layers into equal chunks, as Megatron-LM's interleaved schedule builds them. A
    stage of 9 layers: ``(1, 3, 9)``; of 20: ``(1, 2, 4, 5, 10, 20)``; of 7: ``(1, 7)``; of 1: ``(1,)``.
    Kept per (``stage_layers``, ``virtual_stages``) where both hash (issue 35: a search asks once per layout,
    ~600 times, of a few stage sizes; its answer depends on no model)."""
    if type(stage_layers) is int and (virtual_stages is None or type(virtual_stages) is tuple
                                      and all(type(v) is int for v in virtual_stages)):
        return _kept_chunk_options(stage_layers, virtual_stages)
    return _chunk_options(stage_layers, virtual_stages)           # (any other type: checked as given)


def _chunk_options(stage_layers: int, virtual_stages=None) -> tuple[int, ...]:
    n = check_int("stage_layers", stage_layers)
    ds = [d for d in _divisors(n, MAX_VIRTUAL_STAGES) if d > 1]
    if virtual_stages is None:
        return (1,) + tuple(ds)
    return (1,) + tuple(v for v in sorted(set(virtual_stages)) if 1 < v <= MAX_VIRTUAL_STAGES and n % v == 0)


#: :func:`stage_chunk_options`' answers (tuples) for Python ints, kept.
_kept_chunk_options = functools.lru_cache(maxsize=1024)(_chunk_options)


def state_chunks(zero: int, pp: int, v: int) -> int:
    """The interleaved chunks per stage a layout's model states depend on: ``v`` for ZeRO-3 under a pipeline
    (:data:`~llmsizing.parallel.PIPELINED_FSDP`: the largest chunk's whole gradient is held until its run's
    reduce-scatter, :func:`~llmsizing.memory.zero3_gathered_bytes`), else 1 (the states are those without
    interleaving)."""
    return v if zero == 3 and pp > 1 else 1


def state_key(tp: int, pp: int, zero: int, ep: int, c: int, v: int = 1) -> tuple:
    """The key of :meth:`~llmsizing.plan_memory.SearchMemory.states`' entry: ``(tp, pp, zero, ep, c)``, and
    ``v`` (the chunks of :func:`state_chunks`) when it is above 1."""
    return (tp, pp, zero, ep, c) if v == 1 else (tp, pp, zero, ep, c, v)


def moe_layout_passes(kept: dict, model, *, tp: int, pp: int, zero: int, ep: int, expert_tp: bool) -> bool:
    """Whether :func:`~llmsizing.parallel.check_layout` lets a search's MoE layout ``(tp, pp, zero, ep)``
    (with ``sp = tp > 1``) run (False: refused), for a ``(tp, pp)`` that ``check_layout(model, tp=tp, pp=pp)``
    let through. Kept in ``kept`` (one dict per search) per ``(tp, zero, ep, expert_tp)``: past that check no
    rule of ``check_layout`` reads ``pp`` (``pp <= layers`` is that check's; ``virtual_stages``,
    ``stage_layers``, ``account_for_*`` are at their defaults), so the first ``pp``'s verdict is every
    ``pp``'s (issue 35, moefast35: ~520 calls per Qwen3-30B-A3B search, ~60 distinct)."""
    key = (tp, zero, ep, expert_tp)
    if key not in kept:
        try:
            check_layout(model, tp=tp, pp=pp, zero=zero, sp=tp > 1, ep=ep, expert_tp=expert_tp)
            kept[key] = True
        except ValueError:
            kept[key] = False
    return kept[key]
