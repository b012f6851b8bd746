"""The planner's pipeline stages (Part III, "How many GPUs do you need?"), split out of
:mod:`llmsizing.plan_pricing` (session 24: it had reached the 600-line limit): how the planner splits a
model's layers over ``pp`` stages (Megatron-LM's even split, or one that counts the embedding and the loss as
a layer's place each, :func:`pipeline_split`; Dubey et al. 2024, Sec. 3.3.2), the pipeline degrees it searches
(:func:`pipeline_degrees`), the stages whose memory it weighs (:func:`search_stages`, a mixture of experts'
:func:`_heavy_stages`, both in the layout of :func:`_piece_layout`), the largest model chunk
(:func:`chunk_top`), and the time terms per (``pp``, recomputation) of each stage that can be the slowest
(:func:`stage_terms`). No formula of its own: every number is the library's own call
(:mod:`llmsizing.flops`, :mod:`llmsizing.moe`, :mod:`llmsizing.pointwise`) at the planner's split, and
``tests/test_planner_speed.py`` checks whole searches against one :func:`~llmsizing.layouts.step_time` per
plan. :mod:`llmsizing.plan_pricing` (and :mod:`llmsizing.planner`) re-export these names.
"""

from __future__ import annotations

import functools

import numpy as np

from .flops import stage_attention_flops_per_token, stage_flops_per_token, training_flops_per_token
from .layouts import _divisors
from .moe import moe_stage_flops
from .moe_layouts import heavy_stages
from .parallel import (ACCOUNTED, kept_parallel, layers_per_stage, pipeline_split, stage_chunks,  # noqa: F401
                       uneven_split)
from .pipeline_schedule import pipelined_zero_fields
from .plan_moe import stage_moe_layer_counts
from .pointwise import stage_candidates, stage_pointwise_bytes_per_token

def pipeline_degrees(model, max_pp: int, accounted: bool = False, dualpipe: bool = False) -> list[int]:
    """The pipeline degrees the planner searches (at most ``max_pp``): the divisors of the layers
    (Megatron-LM's even split), and for a dense model (a mixture of experts with ``accounted``: moeapi42)
    those of ``layers + 2`` up to the layers (:func:`pipeline_split`). ``dualpipe`` (dual48): the even ones
    of them from 2 up (DualPipe's ranks hold two stages each), and every other even ``pp`` that divides
    neither the layers nor the layers plus two and has an uneven split
    (:func:`~llmsizing.parallel.uneven_split`: DeepSeek-V3's 61 layers on 16 stages)."""
    even = set(_divisors(model.layers, max_pp))
    plus2 = {d for d in _divisors(model.layers + 2, max_pp) if 2 <= d <= model.layers}
    if not model.is_moe or accounted:
        even |= plus2
    if not dualpipe:
        return sorted(even)
    uneven = {p_ for p_ in range(2, min(max_pp, model.layers) + 1, 2)
              if model.layers % p_ and p_ not in plus2 and uneven_split(model.layers, p_) is not None}
    return sorted(p_ for p_ in even | uneven if p_ % 2 == 0)


def search_stages(model, pp: int) -> tuple[int, ...]:
    """The pipeline stages a dense search weighs: the first and the last, and with an accounted split
    (:func:`pipeline_split`) the second, the first of the full middle stages, which holds the most
    micro-batches in flight among them (:func:`~llmsizing.parallel.pipeline_in_flight`)."""
    return (0, pp - 1) if not pipeline_split(model, pp) else tuple(sorted({0, min(1, pp - 1), pp - 1}))


def chunk_top(model, pp: int, v: int = 1) -> int:
    """The layers of the largest model chunk of the planner's split over ``pp`` stages of ``v`` chunks (the
    most ``recompute_layers`` may take: :func:`~llmsizing.parallel.check_recompute_layers`)."""
    par = kept_parallel(pp=pp, **({} if v == 1 else {"virtual_stages": v}), **pipeline_split(model, pp))
    return max(max(c) for c in stage_chunks(model.layers, par))


def _piece_layout(model, tp: int, pp: int, zero: int, cp: int, cp_comm: str, ep: int, expert_tp: bool,
                  dp: int, v: int = 1) -> tuple:
    """The layout and the stages :func:`_pieces` weighs (and :mod:`llmsizing.dense_arrays`' calls on arrays:
    one place): for a dense model :func:`search_stages` of the split :func:`pipeline_split` with ``v``
    interleaved chunks per stage, for a mixture of experts the first and the last stage and
    :func:`llmsizing.moe_layouts.heavy_stages` (which depend on ``pp`` only). The layout comes from
    :func:`~llmsizing.parallel.kept_parallel` (the search builds the same ones again and again)."""
    if model.is_moe:
        return (kept_parallel(tp=tp, pp=pp, dp=dp, zero=zero, sp=tp > 1, cp=cp, cp_comm=cp_comm, ep=ep,
                              expert_tp=expert_tp, **pipeline_split(model, pp)), _heavy_stages(model, pp))
    more = {} if v == 1 else {"virtual_stages": v}      # (v = 1: the same kept layouts as before)
    return (kept_parallel(tp=tp, pp=pp, dp=dp, zero=zero, sp=tp > 1, cp=cp, cp_comm=cp_comm, **more,
                          **pipeline_split(model, pp), **pipelined_zero_fields(zero, pp)),
            search_stages(model, pp))


@functools.lru_cache(maxsize=256)
def _heavy_stages(model, pp: int) -> tuple[int, ...]:
    """:func:`~llmsizing.moe_layouts.heavy_stages` of the search's layouts with ``pp`` stages (Megatron's even
    split: nothing else of the layout moves them), kept (issue 35: asked on every call of :func:`_pieces`)."""
    return heavy_stages(model, kept_parallel(pp=pp, **pipeline_split(model, pp)))


def stage_terms(model, keys, rcs, *, seq: int, mtp_depth: int = 0) -> np.ndarray:
    """The terms of the stages that can be the slowest, per key ``(pp, recomputation)`` of ``keys`` (the
    recomputation an index into ``rcs``), for :func:`~llmsizing.plan_pricing._price`: an array (key, candidate
    stage, piece) whose pieces are a stage's FLOPs per token, the most loaded stage's layers over the model's,
    the forward's share of the hardware FLOPs (recomputation is backward), its attention FLOPs (full and
    causal), its MoE layers (:func:`llmsizing.plan_moe.stage_moe_layer_counts`, ``mtp_depth`` MTP modules on
    the last stage), its memory-bound bytes per token (:mod:`llmsizing.pointwise`) and its own layers over the
    model's (the windows of Megatron's backward TP overlap, plan44), each from the library's
    own call at the planner's split (:func:`pipeline_split`). The candidate stages of a ``pp`` are
    :func:`~llmsizing.pointwise.stage_candidates` over the union of every recomputation's stages, so a key's
    rows do not depend on the other keys asked with it; a shorter list is padded with its first stage (a
    repeat cannot change the largest time). Moved out of ``_price`` unchanged (session 24);
    ``tests/test_planner_speed.py`` checks whole searches against one :func:`~llmsizing.layouts.step_time` per
    plan."""
    per, cand = {}, {}
    for p_ in sorted({int(k[0]) for k in keys}):   # (every rc of each pp: see _pp_terms)
        rows, cand[p_] = _pp_terms(model, p_, tuple(rcs), int(seq), int(mtp_depth))
        per.update(((p_, r_), v) for r_, v in enumerate(rows))
    c_max = max(len(c) for c in cand.values())
    return np.stack([per[int(k[0]), int(k[1])][cand[int(k[0])] + cand[int(k[0])][:1]
                                               * (c_max - len(cand[int(k[0])]))] for k in keys])


def stage_sums(model, keys, rcs, *, seq: int, mtp_depth: int = 0) -> np.ndarray:
    """Every stage's terms of :func:`stage_terms` summed over all the ``pp`` stages, per key ``(pp,
    recomputation)``: an array (key, piece) whose FLOPs, attention FLOPs, MoE layers and memory-bound bytes
    price the sum of all the stages' seconds in one go (each time is linear in them:
    :func:`~llmsizing.kernels.compute_seconds`, :func:`~llmsizing.pointwise.pointwise_seconds`,
    :func:`~llmsizing.moe_time.moe_extra_seconds`), which 1F1B's fill and drain need
    (:func:`~llmsizing.moe_time.schedule_bubble`'s ``stage_times``; session 39, issue 35). The layers' and the
    forward's shares (pieces 1 and 2) are not sums: unused."""
    per = {}
    for p_ in sorted({int(k[0]) for k in keys}):
        rows, _ = _pp_terms(model, p_, tuple(rcs), int(seq), int(mtp_depth))
        per.update(((p_, r_), v.sum(axis=0)) for r_, v in enumerate(rows))
    return np.stack([per[int(k[0]), int(k[1])] for k in keys])


#: How many (model, pp, recomputations, sequence, MTP depth) sets of stage terms :func:`_pp_terms` keeps.
PP_TERMS_KEPT = 256


@functools.lru_cache(maxsize=PP_TERMS_KEPT)
def _kept_pointwise(model, p_: int, rc: str, mtp_depth: int) -> tuple:
    """:func:`~llmsizing.pointwise.stage_pointwise_bytes_per_token` of the planner's split over ``p_`` stages
    with recomputation ``rc``, kept: bytes per token read neither the context nor the micro-batch, so chapter
    12's widget moving its sequence asked for the same ones again (issue 38: ~1 ms of a search's
    :func:`_pp_terms`). Its own call's tuple."""
    par = kept_parallel(pp=p_, **pipeline_split(model, p_))
    return stage_pointwise_bytes_per_token(model, par, recompute=rc, mtp_depth=mtp_depth)


@functools.lru_cache(maxsize=PP_TERMS_KEPT)
def _pp_terms(model, p_: int, rcs: tuple, seq: int, mtp_depth: int) -> tuple[tuple, list]:
    """``(rows, candidates)`` of :func:`stage_terms` for one ``pp``: per recomputation of ``rcs`` (in order)
    the array (stage, piece) of every stage's terms, and the stages that can be the slowest over the union of
    every recomputation's rows. Kept (issue 38): a search prices each GPU type apart (plan_pricing._price),
    and none of these terms depends on the GPU, so a search of four GPU types asked them four times. A pure
    function of its arguments (each array built by the same calls as before, read-only), so what is kept
    never depends on what was asked before."""
    moe = model.is_moe
    rows = []
    for rc in rcs:
        par = kept_parallel(pp=p_, **pipeline_split(model, p_))
        flops = (moe_stage_flops(model, par, seq=seq, recompute=rc, mtp_depth=mtp_depth) if moe else
                 stage_flops_per_token(model, par, seq=seq, recompute=rc))
        one = np.ones(len(flops))
        v = np.column_stack((flops, max(layers_per_stage(model.layers, par)) / model.layers * one,
                             training_flops_per_token(model, seq=seq) / 3 * one
                             / training_flops_per_token(model, seq=seq, recompute=rc),
                             stage_attention_flops_per_token(model, par, seq=seq, recompute=rc),
                             stage_attention_flops_per_token(model, par, seq=seq, recompute=rc, causal=True),
                             stage_moe_layer_counts(model, par, mtp_depth) if moe else 0 * one,
                             _kept_pointwise(model, p_, rc, mtp_depth if moe else 0),
                             np.array(layers_per_stage(model.layers, par), dtype=float) / model.layers))
        v.setflags(write=False)
        rows.append(v)
    # (the union over every recomputation of the pp's: a row's own slowest stage is among them, and the
    # set, so the result, does not depend on the other rows priced with it)
    cand = sorted({i for v in rows for i in stage_candidates(np.column_stack((v[:, 0] - v[:, 3], v[:, 4:])))})
    return tuple(rows), cand
