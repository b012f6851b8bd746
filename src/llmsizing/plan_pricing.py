"""The planner's vectorised arithmetic (Part III, "How many GPUs do you need?"), split out of
:mod:`llmsizing.planner` (issue 23's partial recomputation would have pushed it past 800 lines): the memory
coefficients that give a layout's per-GPU total for every micro-batch and ``dp`` at once
(:func:`_memory_coefficients`, :func:`_cp_coefficients`, :func:`_partial_coefficients`,
:func:`_least_recompute_layers`), and the step times of all candidate plans at once (:func:`_price`; each
GPU's kept between searches, :func:`kept_price`). No formula of its own: every number is read off
:func:`~llmsizing.memory.training_memory`, :func:`~llmsizing.layouts.step_time` and
:func:`~llmsizing.comm.communication`, and
``tests/test_planner_speed.py`` checks whole searches against one direct call per plan. The terms per
(GPU, tp, cp, micro-batch) come from the step model's pieces in :mod:`llmsizing.plan_terms`; the planner's
pipeline split, the stages it weighs and the terms per (``pp``, recomputation) of each stage that can be the
slowest from :mod:`llmsizing.plan_stage_terms` (session 24), whose names stay importable from here.
:mod:`llmsizing.planner` re-exports these names.
"""

from __future__ import annotations

import collections
import hashlib

import numpy as np

from .comm import communication
from .kernels import compute_seconds
from .memory import (FIXED_OVERHEAD_BYTES, FRAGMENTATION, _search_pieces, peak_room_bytes,  # noqa: F401
                     stage_params, total_with_allowance_bytes, training_memory)
from .moe_layouts import dp_unit
from .moe_time import (comm_sm_share, load_skew as _skew, moe_extra_seconds, routed_expert_flops_per_token,
                       routing_bytes_per_token, shared_expert_params)
from .parallel import kept_parallel
from .pointwise import pointwise_seconds
# the data-parallel slots and links live in plan_dp; their names stay importable from here
from .plan_dualpipe import dualpipe_parts
from .plan_dp import (_DP_SLOTS, _dp_calls, _dp_exposed, _dp_slot, _kept_runs, _megatron_calls,  # noqa: F401
                      _row_links)
from .plan_terms import _group_columns, _groups, dp_link_rows, layer_terms, tp_backward_exposed_s
# a mixture of experts' collectives and all-to-alls, and plan()'s MTP and capacity options, live in plan_moe
from .plan_moe import (has_options, moe_all_to_all_s, moe_dp_collectives, option_pieces,  # noqa: F401
                       stage_moe_layer_counts)
# the planner's pipeline split, the stages a search weighs and their time terms live in plan_stage_terms
from .plan_stage_terms import (ACCOUNTED, _heavy_stages, _piece_layout, chunk_top,  # noqa: F401
                               pipeline_degrees, pipeline_split, search_stages, stage_sums, stage_terms)
from .precision import compute_dtype


def _pieces(model, kw: dict, tp: int, pp: int, zero: int, m: int, cp: int, cp_comm: str, ep: int,
            expert_tp: bool, *, batch: int, dp: int, v: int = 1) -> np.ndarray:
    """The bytes of every piece (:func:`~llmsizing.memory.step_phases`) of the stages a search weighs, stage
    by stage, as one :func:`~llmsizing.memory.training_memory` call gives them
    (:func:`~llmsizing.memory._search_pieces`), at the layout and stages of :func:`_piece_layout`; ``v``
    interleaved model chunks per stage (a dense model's only: ``virtual_stages``, issue 34); ``plan()``'s MTP
    module or token dropping in ``kw``: :func:`llmsizing.plan_moe.option_pieces`."""
    par, stages = _piece_layout(model, tp, pp, zero, cp, cp_comm, ep, expert_tp, dp, v)
    pieces = option_pieces if has_options(kw) else _search_pieces
    return np.array(pieces(model, par, stages, batch=batch, grad_accum=m, **kw), dtype=float)


def _memory_coefficients(model, kw: dict, tp: int, pp: int, zero: int, m: int, cp: int = 1,
                         cp_comm: str = "p2p", base=None, ep: int = 1, expert_tp: bool = False, v: int = 1):
    """``(fixed, per_micro, sharded)`` arrays, one entry per (stage, phase piece), such that a GPU's peak
    piece is ``fixed + micro x per_micro + sharded / dp`` (read off three evaluations).

    With ``cp`` context parallelism and ``base``, the coefficients of the same layout at ``cp = 1``, one
    evaluation is enough: the model states do not depend on ``cp`` except through ZeRO's divisor ``dp x cp``
    (``fixed`` is the same, ``sharded`` falls to ``sharded / cp``), so only ``per_micro`` (the activations of
    ``seq / cp`` tokens and the K, V buffers) is read off ``micro = dp = 1``.
    ``tests/test_context_parallel.py`` checks this against the three evaluations.

    A mixture of experts with expert parallelism ``ep`` (issue 24): the routed experts' ZeRO shards are taken
    over the ``edp = tp x cp x dp / (etp x ep)`` expert-data-parallel GPUs, which for a given layout is
    proportional to ``dp``, so a piece is still ``fixed + micro x per_micro + sharded / dp``; it is read off
    ``dp = a`` and ``2 a``, ``a`` the smallest ``dp`` the layout allows
    (:func:`llmsizing.moe_layouts.dp_unit`; 1 for a dense model), and the stages weighed are
    :func:`llmsizing.moe_layouts.heavy_stages`. ``tests/test_planner_moe.py`` checks rows against direct
    calls.

    With ``v`` interleaved model chunks per stage (issue 34) only the micro-batches in flight move (more of
    them on the first stages: :func:`~llmsizing.parallel.pipeline_in_flight`), which scale the activations:
    ``base`` may be the same layout's coefficients without interleaving, and one evaluation reads
    ``per_micro`` (``tests/test_planner_vp.py`` checks this against three evaluations)."""
    a = dp_unit(tp, cp, ep, expert_tp) if model.is_moe else 1

    def pieces(batch, dp):
        return _pieces(model, kw, tp, pp, zero, m, cp, cp_comm, ep, expert_tp, batch=batch, dp=dp, v=v)

    # (at cp = 1: the same layout with another recomputation, _partial_coefficients)
    if base is not None:
        fixed, _, sharded = base
        sharded = sharded / cp
        return fixed, pieces(1, a) - fixed - sharded / a, sharded
    b1d1, b2d1 = pieces(1, a), pieces(2, a)
    b1d2 = pieces(1, 2 * a) if zero else b1d1
    per_micro = b2d1 - b1d1
    sharded = 2 * a * (b1d1 - b1d2)
    fixed = b1d1 - per_micro - sharded / a
    return fixed, per_micro, sharded


def _cp_coefficients(model, kw: dict, tp: int, pp: int, zero: int, m: int, cps, cp_comm: str, base,
                     ep: int = 1, expert_tp: bool = False, micro_only: bool = False, v: int = 1) -> dict:
    """:func:`_memory_coefficients` for every context-parallel degree above 1 in ``cps``, from ``base`` (the
    layout at ``cp = 1``) and at most two evaluations: what one micro-batch adds is ``X / cp + Y`` in every
    piece, since the activations, the loss's temporaries and the ring's backward buffers are those of
    ``seq / cp`` tokens and the gathered (or all-received) K and V of the whole sequence do not depend on
    ``cp`` (:func:`~llmsizing.activations.cp_attention_buffers_bytes`). ``tests/test_context_parallel.py``
    checks the result against direct evaluations. ``micro_only``: ``{cp: per_micro}`` alone (what
    :class:`~llmsizing.plan_memory.SearchMemory` reads), every degree's in one division and one sum."""
    degrees = sorted(c for c in cps if c > 1)
    fixed, _, sharded = base
    if len(degrees) == 1:
        got = _memory_coefficients(model, kw, tp, pp, zero, m, degrees[0], cp_comm, base, ep, expert_tp, v)
        return {degrees[0]: got[1] if micro_only else got}
    c1, c2 = degrees[:2]
    p1 = _memory_coefficients(model, kw, tp, pp, zero, m, c1, cp_comm, base, ep, expert_tp, v)[1]
    p2 = _memory_coefficients(model, kw, tp, pp, zero, m, c2, cp_comm, base, ep, expert_tp, v)[1]
    y = (c2 * p2 - c1 * p1) / (c2 - c1)
    x = (p1 - y) * c1
    if micro_only:           # (x / c + y entry by entry: the same float operations on the same operands)
        return dict(zip(degrees, x / np.array(degrees, dtype=float)[:, None] + y))
    return {c: (fixed, x / c + y, sharded / c) for c in degrees}


def _total_bytes(coef, micro: np.ndarray, dp: np.ndarray) -> np.ndarray:
    """Per-GPU total (peak + the default allowance, as :func:`~llmsizing.memory.default_overhead_bytes`)
    for arrays of micro-batches and ``dp``: ``coef`` one layout's coefficients (1-D, one entry per piece) or
    one row of them per plan (2-D)."""
    fixed, per_micro, sharded = coef
    peak = (fixed + micro[:, None] * per_micro + sharded / dp[:, None]).max(axis=1)
    return total_with_allowance_bytes(peak)


def _partial_coefficients(model, kw: dict, tp: int, pp: int, zero: int, m: int, cps, cp_comm: str,
                          full) -> dict:
    """:func:`_memory_coefficients` of partial recomputation with one layer per stage recomputed
    (``recompute="full", recompute_layers=1``: the planner's stages are one model chunk each) for every
    context-parallel degree of ``cps`` (``{cp: coefficients}``), from ``full``, the coefficients at
    ``recompute="full"`` and ``cp = 1``: the
    model states, ``fixed`` and ``sharded``, do not depend on what is recomputed, so one evaluation reads
    ``per_micro`` at ``cp = 1`` and two more give every other degree (:func:`_cp_coefficients`).
    ``tests/test_planner_speed.py`` checks plans priced from them against direct calls."""
    kw = {**kw, "recompute": "full", "recompute_layers": 1}
    out = {1: _memory_coefficients(model, kw, tp, pp, zero, m, 1, cp_comm, full)}
    if any(c > 1 for c in cps):
        out.update(_cp_coefficients(model, kw, tp, pp, zero, m, cps, cp_comm, out[1]))
    return out


def _one_layer_coefficients(none, full, layers: int):
    """:func:`_partial_coefficients` at one context-parallel degree without evaluating anything, from the same
    layout's coefficients without recomputation (``none``) and with every layer recomputed (``full``), a stage
    of ``layers`` layers. Per micro-batch, a piece of a stage grows with the recomputed layers by the same
    bytes (their checkpoints replace their tensors, in every micro-batch in flight: :math:`1/L` of what
    ``full`` changes in the forward piece), and the start of the backward also holds the rebuilt layer's
    working set from the first recomputed layer on (what ``full`` adds there beyond the forward's change). The
    pieces are :func:`~llmsizing.memory.step_phases`' five per stage, in its order.
    ``tests/test_planner_speed.py`` checks plans built on them against direct calls. On rows (2-D, a row
    per layout, ``layers`` one per row): each row the same numbers as its own call."""
    fixed, per_micro, sharded = full
    shape = (*per_micro.shape[:-1], -1, 5)
    base = none[1].reshape(shape)
    change = per_micro.reshape(shape) - base
    rebuilt = np.zeros_like(change)
    rebuilt[..., 2] = change[..., 2] - change[..., 0]      # backward (start): the rebuilt layer on top
    if np.ndim(layers):
        layers = np.asarray(layers)[:, None, None]
    return fixed, (base + (change - rebuilt) / layers + rebuilt).reshape(per_micro.shape), sharded


def _least_recompute_layers(one, every, layers, micro, dps: np.ndarray, limits: np.ndarray, can=None):
    """The fewest layers per stage, ``n`` in ``1 .. layers``, that partial recomputation (Megatron-LM's block
    method, :func:`~llmsizing.parallel.recomputed_layers`) must rerun for the per-GPU total to fit each limit,
    for every GPU limit (rows, ``limits``) and ``dp`` (columns, ``dps``; ``micro`` one micro-batch or one per
    ``dp``) at once; and the totals at that ``n``.

    ``one`` and ``every`` are :func:`_memory_coefficients` with 1 and all ``layers`` of a stage recomputed
    (1-D; or 2-D, a row per column, ``layers`` one per column: many layouts at once). Every piece of the
    peak is affine in ``n`` between them (each recomputed layer keeps its input instead of its tensors,
    :func:`~llmsizing.activations.partial_recompute_activations`), so the peak fits iff every piece does and
    each piece gives a bound on ``n`` in closed form:
    ``n = 1 + max over pieces of ceil((P1 - limit) / (P1 - Pn) x (layers - 1))``. ``n`` is 0 where nothing
    fits, even every layer (the total there is ``inf``); the total at ``n = layers`` is :func:`_total_bytes`
    of ``every`` itself (full recomputation). ``can`` (limits x columns) leaves out the entries it is False
    for (0 and ``inf``)."""
    micro = np.broadcast_to(np.asarray(micro, dtype=float), dps.shape)      # (one, or one per dp)
    layers = np.broadcast_to(np.asarray(layers), dps.shape)                 # (one, or one per dp)
    total_every = _total_bytes(every, micro, dps)
    n = np.zeros((len(limits), len(dps)), dtype=np.int64)
    total = np.full(n.shape, np.inf)
    fits = total_every[None, :] <= limits[:, None]                 # where every layer recomputed fits
    can = fits if can is None else fits & can
    if not can.any():
        return n, total
    g, d = np.nonzero(can)

    def rows(c):                                                   # (plan, piece)
        return c[None, :] if c.ndim == 1 else c[d]

    f1, u1, s1 = (rows(c) for c in one)
    fl, ul, sl = (rows(c) for c in every)
    lay = layers[d]
    p1 = f1 + micro[d, None] * u1 + s1 / dps[d, None]              # at 1 layer
    pl = fl + micro[d, None] * ul + sl / dps[d, None]              # ... at every layer
    slope = (pl - p1) / (lay - 1)[:, None]                         # per extra layer (<= 0)
    over = p1 - peak_room_bytes(limits[g])[:, None]                 # above the peak allowed
    with np.errstate(divide="ignore", invalid="ignore"):
        need = np.where(over <= 0, 0.0, np.where(slope < 0, np.ceil(over / -slope - 1e-9), np.inf))
    k = np.minimum(1 + need.max(axis=1), lay)                         # (every layer fits: at most layers)
    t = total_with_allowance_bytes((p1 + (k - 1)[:, None] * slope).max(axis=1))
    edge = (k < lay) & (t > limits[g])                                # (a floating-point edge: one more)
    if edge.any():
        k = np.where(edge, k + 1, k)
        t = total_with_allowance_bytes((p1 + (k - 1)[:, None] * slope).max(axis=1))
    t = np.where(k == lay, total_every[d], t)
    n[g, d], total[g, d] = k.astype(np.int64), t
    return n, total


def _price(model, gpu_list, cols: dict, *, seq, eff, overlap, precision, node_of, cp_comm, rcs,
           expert_tp=False, max_nodes=None, ep_overlap=0.0, shared=False, mtp_depth=0, capacity_factor=None,
           dispatcher="alltoall", schedule="1f1b", comm_sms=0, load_skew=None, tp_backward=False):
    """Step times (s) and the GPUs' dense peaks (FLOP/s) of the candidate plans in ``cols`` (arrays ``gpu``,
    an index into ``gpu_list``, ``tp``, ``cp``, ``pp``, ``zero``, ``micro``, ``dp``, ``m``, ``rc``, an index
    into ``rcs``): what one :func:`~llmsizing.layouts.step_time` per candidate gives, with the library called
    once per piece many candidates share and NumPy doing the rest.

    A step is ``compute x (1 + bubble)`` plus each group's exposed communication
    (:func:`~llmsizing.layouts.exposed_by_group`). With ``m`` micro-batches per step:

    * the compute is :func:`~llmsizing.comm.step_compute_time_s`'s, formed in the same order (bit for bit):
      the largest time of the stages that can be the slowest (:func:`~llmsizing.pointwise.stage_candidates`:
      FLOPs, memory-bound bytes and MoE layers per ``pp`` and recomputation) at the kernel efficiency;
    * the tensor-parallel collectives and the context-parallel ring (and the attention it hides behind) scale
      with ``m`` and with the layers of the most loaded stage, and do not depend on ``dp`` or the ZeRO stage:
      the step model's communication per (GPU, tp, cp, micro-batch, recomputation) without a pipeline,
      ``dp = 1``, ``m = 1`` gives them for all the layers (:func:`llmsizing.plan_terms.layer_terms`), and
      a stage's share of the layers (:func:`~llmsizing.parallel.layers_per_stage`) scales them;
    * the pipeline's sends: their message (one :func:`~llmsizing.comm.communication` per (tp, cp,
      micro-batch)) on the link of ``pp`` GPUs ``tp x cp x dp`` apart (:func:`~llmsizing.network.group_link`),
      ``2 m v`` calls (``v`` interleaved chunks per stage, ``cols["vp"]``) of which the time of ``2 (pp - 1)``
      is exposed; the bubble is the other stages' summed time over ``v m`` (``(pp - 1) / (v m)`` of the
      compute for equal stages; :func:`~llmsizing.moe_time.schedule_bubble` with ``stage_times``);
    * the data-parallel collectives depend on (the group's link, tp, ZeRO stage, ``dp x cp``) and on the
      parameters a GPU holds: one :func:`~llmsizing.comm.communication` per key without a pipeline gives each
      collective's bytes and latency per call, the bytes scaled by the parameters of the most loaded stage
      (:func:`~llmsizing.gpu_states.stage_params`) for each ``pp``; exposed by :data:`_DP_SLOTS`' rules.

    A mixture of experts (issue 24; ``cols["ep"]``, ``expert_tp``, DeepSeek's node limit ``max_nodes``, the
    share ``ep_overlap`` of the all-to-all hidden) adds:

    * the compute of each stage's dense and MoE layers (:func:`llmsizing.moe.moe_stage_flops`, active FLOPs);
    * its data-parallel collectives in two parts on one link, added up per window as :func:`exposed_by_group`:
      the dense parameters over ``dp x cp`` and the routed experts over the ``edp`` expert-data-parallel GPUs
      (one :func:`~llmsizing.comm.communication` per (GPU, tp, ZeRO stage, ``dp x cp``, ep) without a
      pipeline, each part scaled by the most loaded stage's dense and expert parameters,
      :func:`llmsizing.moe.stage_split`);
    * the expert-parallel all-to-all (:func:`llmsizing.moe.ep_all_to_all`): one call per (GPU, tp, cp,
      micro-batch, ep, recomputation) without a pipeline gives all the MoE layers' for one micro-batch, scaled
      by the most loaded stage's MoE layers and ``m``; exposed but for what the shared experts beside each
      call hide with ``shared`` (:func:`llmsizing.moe_time.shared_overlap_rows_s`), then for ``ep_overlap``;
    * ``mtp_depth`` MTP modules on the last stage and the load skew capped at ``capacity_factor``, as
      ``step_time`` takes them (:mod:`llmsizing.plan_moe`).

    The recipe's ``schedule`` and ``comm_sms`` (moeapi42, issue 35; any model), as ``step_time`` prices them:
    ``comm_sms`` SMs kept by communication kernels slow every stage's compute (and the shared experts' window)
    by ``1 / (1 - share)`` of its GPU (:func:`~llmsizing.moe_time.comm_sm_share`); ``schedule="zb1p"`` makes
    the fill and drain a third of 1F1B's, ``(sum - max) / (3 m)`` (:func:`~llmsizing.moe_time.schedule_bubble`
    with ``stage_times``; plain pipelines only); ``schedule="dualpipe"`` (dual48) every rank's compute the
    mean of its two stages' terms and DualPipe's bubble laid out on each row's stage times
    (:func:`llmsizing.plan_dualpipe.dualpipe_parts`). ``load_skew`` (a mixture of experts): every row's skew,
    in place of the measured default.

    Equal to one ``step_time`` per candidate to floating-point rounding: ``tests/test_planner_speed.py``
    compares whole searches with the direct one (every ZeRO stage, both ``cp_comm``, a given ``overlap``,
    FP8, own node sizes, mixtures of experts with ``ep``) at 1e-9 relative."""

    moe = model.is_moe
    gi, tp, cp, pp, zero, b, dp, m, ri = (cols[k] for k in ("gpu", "tp", "cp", "pp", "zero", "micro", "dp",
                                                            "m", "rc"))
    vp = cols["vp"] if "vp" in cols else np.ones_like(pp)        # interleaved chunks per stage (issue 34)
    n = len(gi)
    mf = m.astype(float)
    # partial recomputation (cols["rl"] layers of each stage's, fewer than all, with "full"): every per-layer
    # piece below is affine in the layers whose forward runs twice, so such a row is "none" + x ("full" -
    # "none"), x the share of its stage's layers recomputed (the pieces of "none" are added for those rows)
    rl = cols.get("rl")
    part = np.zeros(n, dtype=bool)
    if rl is not None and "full" in rcs:
        # (partial recomputation is searched on even splits only, whose chunks are equal)
        part = (ri == list(rcs).index("full")) & (rl > 0) & (rl < model.layers // (pp * vp)) & (
            model.layers % pp == 0)
    pi = np.flatnonzero(part)
    rcs = tuple(rcs) + (() if "none" in rcs else ("none",))
    # (rl layers of each of the vp equal chunks: the share of the stage's layers)
    x = (rl[pi] / (model.layers // (pp[pi] * vp[pi])))[:, None] if len(pi) else np.zeros((0, 1))

    def plus_none(*arrays):      # the arrays, then their partial rows again with the "none" recomputation
        return [np.concatenate([a, a[pi]]) for a in arrays[:-1]] + [
            np.concatenate([arrays[-1], np.full(len(pi), rcs.index("none"))])]

    # per (GPU, tp, cp, micro-batch, ep, recomputation), from the step model's pieces without a pipeline
    # (plan_terms.layer_terms): the kernels' rates, and one micro-batch's exposed and total tp and cp
    # communication of all the layers (each a sum over layers: a stage's is the share of the layers it holds)
    epc = cols["ep"] if moe and "ep" in cols else np.ones(n, dtype=int)   # experts' GEMM rows grow with ep
    lay_keys, lay_idx = _groups(*plus_none(gi, tp, cp, b, epc, ri))
    dtype = compute_dtype(precision)
    lay, peak_of = layer_terms(model, gpu_list, lay_keys, seq=seq, eff=eff, precision=precision, dtype=dtype,
                               node_of=node_of, cp_comm=cp_comm, rcs=rcs)
    L = lay.take(lay_idx[:n], axis=0)          # (lay[...]: the same rows, take ~5x sooner; plan42)
    if len(pi):
        none = lay.take(lay_idx[n:], axis=0)
        L[pi] = none + x * (L[pi] - none)
    # per (pp, recomputation) and each stage that can be the slowest (plan_stage_terms.stage_terms: its FLOPs
    # per token, layers, forward's share, attention FLOPs, MoE layers and memory-bound bytes)
    stage_keys, stage_idx = _groups(*plus_none(pp, ri))
    stage = stage_terms(model, stage_keys, rcs, seq=seq, mtp_depth=mtp_depth)
    c_max = stage.shape[1]
    S = stage.take(stage_idx[:n], axis=0)                         # (row, candidate stage, piece)
    if len(pi):     # FLOPs: affine; the forward's share: its inverse is (the hardware FLOPs are)
        none, full = stage.take(stage_idx[n:], axis=0), S[pi]
        S[pi] = none + x[:, :, None] * (full - none)
        S[pi, :, 2] = 1 / (1 / none[:, :, 2] + x * (1 / full[:, :, 2] - 1 / none[:, :, 2]))
    # step_compute_time_s's own expression (kernels.compute_seconds): the Linear layers at the GEMM rate, the
    # attention core as causal kernels run it at the attention rate; the slowest candidate's time
    per_gpu = b * seq * m / (tp * cp)
    hbm = np.array([g.memory_bandwidth_gbps * 1e9 for g in gpu_list])[gi]
    compute = [compute_seconds(S[:, c, 0], S[:, c, 3], S[:, c, 4], per_gpu, L[:, 0], L[:, 5])
               + pointwise_seconds(S[:, c, 6], per_gpu, hbm) for c in range(c_max)]
    if moe:       # the MoE layers' routing kernels and load skew (step_compute_time_s, llmsizing.moe_time)
        rc_bytes = np.array([routing_bytes_per_token(model, recompute=r) for r in rcs])[ri]
        rc_flops = np.array([routed_expert_flops_per_token(model, recompute=r) for r in rcs])[ri]
        e_of, e_at = np.unique(epc, return_inverse=True)             # one load_skew per ep degree
        skew = np.array([_skew(model, e_, capacity_factor=capacity_factor) if load_skew is None else load_skew
                         for e_ in e_of.tolist()])[e_at.reshape(-1)]
        compute = [t + moe_extra_seconds(S[:, c, 5], per_gpu, route_bytes=rc_bytes, hbm_bytes_per_s=hbm,
                                         skew=skew, expert_flops=rc_flops, gemm_rate=L[:, 0])
                   for c, t in enumerate(compute)]
    slowest = np.argmax(compute, axis=0) if tp_backward else None   # (step_time's first slowest stage)
    compute, S = np.max(compute, axis=0), S[:, 0]   # (the layers' and forward's shares: every candidate's)
    # the SMs communication kernels keep: every stage slower by 1 / (1 - share) (comm.stage_compute_times_s)
    kept_sms = 1.0 - np.array([comm_sm_share(g_, comm_sms) for g_ in gpu_list])[gi] if comm_sms else None
    if comm_sms:
        compute = compute / kept_sms
    # + the bubble: 1F1B's fill and drain pass every other stage once at its own speed, (sum - max) / (v m)
    # (moe_time.schedule_bubble's stage_times, session 39); all stages' summed time from their summed terms
    sums = stage_sums(model, stage_keys, rcs, seq=seq, mtp_depth=mtp_depth)
    T = sums.take(stage_idx[:n], axis=0)
    if len(pi):                                  # (partial recomputation: affine, as the stages' terms)
        T[pi] = sums.take(stage_idx[n:], axis=0) + x * (T[pi] - sums.take(stage_idx[n:], axis=0))
    total = (compute_seconds(T[:, 0], T[:, 3], T[:, 4], per_gpu, L[:, 0], L[:, 5])
             + pointwise_seconds(T[:, 6], per_gpu, hbm))
    if moe:
        total = total + moe_extra_seconds(T[:, 5], per_gpu, route_bytes=rc_bytes, hbm_bytes_per_s=hbm,
                                          skew=skew, expert_flops=rc_flops, gemm_rate=L[:, 0])
    if comm_sms:
        total = total / kept_sms
    # 1F1B's fill and drain pass each other stage once (over v chunks); zero bubble's a third of that
    busy = compute + np.where(pp > 1, (total - compute) / ((3 if schedule == "zb1p" else vp) * mf), 0.0)
    if schedule == "dualpipe":   # (dual48: every rank the mean of its two stages, DualPipe's laid-out bubble)
        def seconds(terms, on):  # (a stage's or a rank's seconds from its terms, as above: the same order)
            t = (compute_seconds(terms[:, 0], terms[:, 3], terms[:, 4], per_gpu[on], L[on, 0], L[on, 5])
                 + pointwise_seconds(terms[:, 6], per_gpu[on], hbm[on]))
            if moe:
                t = t + moe_extra_seconds(terms[:, 5], per_gpu[on], route_bytes=rc_bytes[on],
                                          hbm_bytes_per_s=hbm[on], skew=skew[on], expert_flops=rc_flops[on],
                                          gemm_rate=L[on, 0])
            return t / kept_sms[on] if comm_sms else t

        compute, busy, top_layers = dualpipe_parts(model, pp, ri, rcs, mf, seconds, seq=seq,
                                                   mtp_depth=mtp_depth)
    one = compute / mf                                            # one micro-batch's compute (_window_s)
    fwd, bwd = one * S[:, 2], one * (1 - S[:, 2])
    per_layer = S[:, 1] * mf                                      # the stage's layers, m micro-batches
    tp_exposed, cp_exposed = L[:, 1] * per_layer, L[:, 2] * per_layer
    if tp_backward:     # Megatron's column-parallel backward (step_time's tp_backward_overlap, plan44)
        slow_layers = (stage[stage_idx[:n], slowest, 7] if schedule != "dualpipe" else top_layers)
        tp_exposed = tp_backward_exposed_s(model, tp, cp, b, epc, L, per_layer,
                                           slow_layers * model.layers * mf, seq=seq)

    # the pipeline's sends (one message per (tp, cp, micro-batch), from communication) on the link of pp GPUs
    # tp x cp x dp apart
    has_pp = pp > 1
    pp_all = np.zeros(n)
    if has_pp.any():
        on = np.flatnonzero(has_pp)
        # per (tp, cp, micro): the message depends on nothing else (the GPU and pp of its first plan)
        _, first, msg_idx = _group_columns(tp[on], cp[on], b[on])
        msg = np.array([[c.message_bytes for c in communication(
            model, kept_parallel(tp=t_, pp=p_, sp=t_ > 1, cp=c_, cp_comm=cp_comm), batch=b_, seq=seq,
            gpu=gpu_list[g_], precision=precision,
            node=node_of[gpu_list[g_].name], _groups=("pp",)).collectives if c.group == "pp"][0]
            for g_, t_, c_, p_, b_ in zip(*(x[on[first]].tolist() for x in (gi, tp, cp, pp, b)))])
        msg_of = msg[msg_idx]
        bw, alpha, *_ = _row_links(gpu_list, node_of, gi[on], pp[on], (tp * cp * dp)[on])
        bw = bw * 1e9
        calls = 2 * mf[has_pp] * vp[has_pp]                # (one activation out, one gradient back per chunk)
        pp_all[has_pp] = calls * msg_of / bw + calls * alpha
    pp_exposed = np.minimum(pp_all, 2 * (pp - 1) * (pp_all / (2 * mf * vp)))

    # the data-parallel collectives: bytes over bandwidth and latency of one call, per slot, no pipeline
    dpcp = dp * cp
    if moe:
        dp_exposed, dp_all = moe_dp_collectives(model, gpu_list, cols, dpcp, fwd, bwd, mf, seq=seq,
                                                precision=precision, node_of=node_of, expert_tp=expert_tp)
        # (shared: the shared experts' forward GEMMs beside each all-to-all, moe_time.shared_expert_window_s)
        win = None if not shared else np.stack([2 * f * (b * seq / (tp * cp)) / (
            L[:, 0] * (kept_sms if comm_sms else 1.0)) for f in shared_expert_params(model)], axis=1)
        ep_all = moe_all_to_all_s(model, gpu_list, cols, mf, seq=seq, precision=precision, node_of=node_of,
                                  cp_comm=cp_comm, rcs=rcs, expert_tp=expert_tp, max_nodes=max_nodes,
                                  window=win, dispatcher=dispatcher)
        ep_all, ep_left = ep_all if shared else (ep_all, ep_all)
        if overlap is None:
            step = busy + (dp_exposed + tp_exposed + pp_exposed + cp_exposed + ep_left * (1.0 - ep_overlap))
        else:
            comm_s = dp_all + per_layer * (L[:, 3] + L[:, 4]) + pp_all + ep_all
            step = busy + np.maximum((1.0 - overlap) * comm_s, comm_s - busy)
        peaks = np.array([peak_of.get(k, 0.0) for k in range(len(gpu_list))])
        return step, peaks[gi]
    kept = (zero == 3) & has_pp             # ZeRO-3 under a pipeline: PIPELINED_FSDP, a pass is a chunk's run
    dp_keys, dp_idx = _groups(gi, tp, zero, dpcp, kept)
    # seconds per byte of a call's traffic, bytes of a pass (all calls), the latency of one call, per slot
    per_byte, traffic, latency = dp_link_rows(model, gpu_list, dp_keys, seq=seq, precision=precision,
                                              node_of=node_of, n_slots=len(_DP_SLOTS))
    # the parameters of the most loaded stage, relative to the whole model on tp GPUs (the messages scale)
    held_keys, held_idx = _groups(tp, pp)
    held = np.array([(max(stage_params(model, kept_parallel(tp=t_, pp=p_, **pipeline_split(model, p_)))),
                      max(stage_params(model, kept_parallel(tp=t_)))) for t_, p_ in held_keys]).take(held_idx,
                                                                                                   axis=0)
    share = held[:, 0] / held[:, 1]
    calls = _dp_calls(zero, held[:, 0], S[:, 1] * model.layers, dpcp, pp,   # per pass, with their latencies
                      buckets=_megatron_calls(model, tp, pp, zero, dpcp, vp))   # (Megatron-Core's buckets)
    calls[kept, 2] = calls[kept, 1]                   # (the kept weights' gather: one call per FSDP unit)
    call = (share[:, None] * traffic.take(dp_idx, axis=0) * per_byte.take(dp_idx, axis=0)
            + calls * latency.take(dp_idx, axis=0))
    runs, slot1 = _kept_runs(kept, pp, m, vp, calls[:, 1], call[:, 1], fwd, bwd)
    dp_exposed = _dp_exposed(call, fwd, bwd, mf, slot1)
    if overlap is None:
        step = busy + (dp_exposed + tp_exposed + pp_exposed + cp_exposed)
    else:
        comm_s = (mf * (call[:, 0] + call[:, 3]) + runs * call[:, 1] + call[:, 2] + call[:, 4]
                  + per_layer * (L[:, 3] + L[:, 4]) + pp_all)
        step = busy + np.maximum((1.0 - overlap) * comm_s, comm_s - busy)
    peaks = np.array([peak_of.get(k, 0.0) for k in range(len(gpu_list))])
    return step, peaks[gi]


#: How many GPUs' priced blocks :func:`kept_price` keeps, and at most how many bytes of them (least recently
#: used dropped first; 16 bytes a candidate plan: ~0.4 MB for a mixture of experts' ~25,000 on one GPU).
#: plan42: 32 blocks (~5 MB) were the limit in chapter 17's widget, whose build alone keeps 19: from its
#: sixth model on, a move to a second GPU type priced the first one's block again; the bytes bound it now.
KEPT_PRICE_BLOCKS = 128
KEPT_PRICE_BYTES = 32 * 2**20


def _digest(cols: dict) -> bytes:
    """A SHA-1 of one GPU's candidate plans: their columns' names, dtypes, shapes and values. An integer
    column is hashed in the narrowest integer type that holds its values (named with it: the same values, a
    quarter to an eighth of the bytes; issue 35, ~5 ms of a 35,000-plan block's 7)."""
    h = hashlib.sha1()
    for k in sorted(cols):
        a = np.ascontiguousarray(cols[k])
        if a.dtype.kind in "iu" and a.size:
            lo, hi = int(a.min()), int(a.max())
            a = next((a.astype(t) for t in (np.int8, np.int16, np.int32)
                      if np.iinfo(t).min <= lo and hi <= np.iinfo(t).max), a)
        h.update(f"{k}:{cols[k].dtype.str}:{a.dtype.str}:{a.shape};".encode())
        h.update(a.data)
    return h.digest()


class _KeptBlocks(collections.OrderedDict):
    """:func:`kept_price`'s kept blocks, least recently used first, at most :data:`KEPT_PRICE_BLOCKS` of them
    and :data:`KEPT_PRICE_BYTES` in all (the last one kept whatever its size); with ``cache_clear`` as the
    library's other kept results have."""

    nbytes = 0

    def get_kept(self, key):
        got = self.get(key)
        if got is not None:
            self.move_to_end(key)
        return got

    def keep(self, key, value):
        if key in self:
            self.nbytes -= sum(a.nbytes for a in self.pop(key))
        self[key] = value
        self.nbytes += sum(a.nbytes for a in value)
        while len(self) > 1 and (len(self) > KEPT_PRICE_BLOCKS or self.nbytes > KEPT_PRICE_BYTES):
            self.nbytes -= sum(a.nbytes for a in self.popitem(last=False)[1])

    def cache_clear(self):
        self.clear()
        self.nbytes = 0


_kept_blocks = _KeptBlocks()


def kept_price(model, gpu_list, cols: dict, *, node_of: dict, **kw):
    """:func:`_price`, one GPU of ``gpu_list`` at a time, each GPU's step times and peaks kept for the last
    :data:`KEPT_PRICE_BLOCKS` (model, GPU, node, candidate plans, ``kw``) (issues 35 and 38: chapter 17's move
    from one GPU type to two prices the second alone, the first was priced by the pick's search). A plan's
    step time reads its own GPU's and its own columns' pieces only, so each GPU's block holds the same
    numbers, bit for bit, as a search of all of them (``tests/test_plan_kept_price.py``,
    ``tools/freeze_plans.py``). The kept arrays are read-only; the caller gets fresh ones, in the rows'
    order. The GPUs whose blocks are not kept are priced in one call (issue 38: chapter 12's model pick, four
    new GPU types; ~1-4 ms less than four calls), each block then kept alone."""
    try:
        frozen = tuple(sorted(kw.items()))
        hash((model, frozen, tuple(gpu_list), tuple(node_of[g.name] for g in gpu_list)))
    except TypeError:                       # (an unhashable argument: priced, not kept)
        return _price(model, gpu_list, cols, node_of=node_of, **kw)
    gi = cols["gpu"]
    step, peak = np.empty(len(gi)), np.empty(len(gi))
    new = []                                    # (GPU, its rows, its key, index) of blocks not kept
    for g, gpu in enumerate(gpu_list):
        at = None if len(gpu_list) == 1 else np.flatnonzero(gi == g)
        if at is not None and not len(at):
            continue
        sub = cols if at is None else {k: (np.zeros(len(at), dtype=v.dtype) if k == "gpu" else v[at])
                                       for k, v in cols.items()}
        key = (model, gpu, node_of[gpu.name], frozen, _digest(sub))
        got = _kept_blocks.get_kept(key)
        if got is None:
            new.append((gpu, at, key, g))
            continue
        if at is None:
            step[:], peak[:] = got
        else:
            step[at], peak[at] = got
    if len(new) > 1:        # (several new GPUs priced in one call, each block its own rows: the same bits)
        rows = np.sort(np.concatenate([at for _, at, _, _ in new]))   # (at: several GPUs, never None)
        index = np.full(len(gpu_list), -1, dtype=gi.dtype)
        index[[g for _, _, _, g in new]] = np.arange(len(new))
        both = {k: (index[v[rows]] if k == "gpu" else v[rows]) for k, v in cols.items()}
        s_, p_ = _price(model, [gpu for gpu, _, _, _ in new], both,
                        node_of={gpu.name: node_of[gpu.name] for gpu, _, _, _ in new}, **kw)
        step[rows], peak[rows] = s_, p_
        for gpu, at, key, _ in new:
            got = (step[at].copy(), peak[at].copy())
            for a in got:
                a.flags.writeable = False
            _kept_blocks.keep(key, got)
    elif new:
        gpu, at, key, _ = new[0]
        sub = cols if at is None else {k: (np.zeros(len(at), dtype=v.dtype) if k == "gpu" else v[at])
                                       for k, v in cols.items()}
        got = _price(model, [gpu], sub, node_of={gpu.name: node_of[gpu.name]}, **kw)
        for a in got:
            a.flags.writeable = False
        _kept_blocks.keep(key, got)
        if at is None:
            step[:], peak[:] = got
        else:
            step[at], peak[at] = got
    return step, peak


def moe_ep_coefficients(model, kw: dict, tp: int, pp: int, zero: int, m: int, ep: int, eps, expert_tp: bool,
                        cache: dict, key: tuple):
    """:func:`~llmsizing.planner._memory_coefficients` of a mixture of experts (``cp = 1``) at expert-parallel
    degree ``ep``, from those at the first two degrees of ``eps`` (kept in ``cache`` under
    ``key`` with ``ep`` replaced): every piece is ``A + B / ep``. The routed experts' weights (and, without
    ZeRO, their gradients and states) on a GPU are ``1 / ep`` of them; their ZeRO shards, over
    ``edp = tp x dp / (etp x ep)`` GPUs, are ``experts / (ep x etp x edp) = experts / (tp x dp)`` whatever
    ``ep``; nothing else depends on it (the activations: each GPU receives ``tokens x k`` rows under uniform
    routing; :func:`llmsizing.moe.foreach_temporary_bytes` shards like the states). Used for ZeRO-0 (any
    ``pp``), ZeRO-1 without a pipeline, and ZeRO-2 without a pipeline with more than one micro-batch and
    untied embeddings only (:meth:`llmsizing.plan_memory.SearchMemory._ep_affine`): with ZeRO-2 the LM head's
    gradient of a single micro-batch is counted as the gradients per parameter (sharded, not divided by
    ``ep``) times the head, a ratio not of that form (from the second micro-batch on every piece holds all
    the gradients instead, and a tied embedding's gradient adds that ratio again); with ZeRO-1 and a
    pipeline the sharded ``foreach`` temporary is split in proportion to each stage's parameters (unsharded,
    without ZeRO, it is each stage's own); another optimizer implementation's temporary is the largest
    tensor, a maximum. ZeRO-3 has ``ep = 1`` only.
    ``tests/test_planner_moe.py`` checks whole searches against direct calls."""

    e1, e2 = eps[0], eps[1]
    base = []
    for e in (e1, e2):
        k = key[:3] + (e,) + key[4:]
        if k not in cache:
            cache[k] = _memory_coefficients(model, kw, tp, pp, zero, m, ep=e, expert_tp=expert_tp)
        base.append(cache[k])
    return tuple(ep_affine(c1, c2, e1, e2, ep) for c1, c2 in zip(*base))


def ep_affine(at_e1, at_e2, e1: int, e2: int, ep: int):
    """``A + B / ep`` at ``ep``, from its values at ``e1`` and ``e2`` (:func:`moe_ep_coefficients`)."""
    w = (1 / ep - 1 / e1) / (1 / e1 - 1 / e2)
    return at_e1 + (at_e1 - at_e2) * w
