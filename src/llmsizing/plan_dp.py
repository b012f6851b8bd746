"""The planner's data-parallel collectives on arrays (Part III, "How many GPUs do you need?"), split out of
:mod:`llmsizing.plan_pricing` (issue 34: interleaved pipelines pushed it past 600 lines): the slots
:func:`~llmsizing.plan_pricing._price` keeps the collectives of :func:`~llmsizing.comm.communication` in
(:data:`_DP_SLOTS`), their calls per pass (:func:`_dp_calls`, :func:`~llmsizing.zero_traffic.dp_calls` on
arrays), what :func:`~llmsizing.layouts.exposed_by_group` leaves exposed of them (:func:`_dp_exposed`) and
each row's group link (:func:`_row_links`). No formula of its own; :mod:`llmsizing.plan_pricing` re-exports
these names and ``tests/test_planner_speed.py`` checks searches priced with them against one ``step_time`` per
plan.
"""

from __future__ import annotations

import functools

import numpy as np

from .comm import DP_BUCKET_MIN_PARAMS, DP_BUCKET_PARAMS_PER_RANK, FSDP_ROOT_UNITS, FSDP_UNIT_LAYERS
from .exposure import DP_SLOTS, dp_slot, dp_window_exposed_s
from .network import group_link
from .plan_terms import _group_columns, _groups, _per
from .grad_buckets import megatron_calls_of

#: The data-parallel collectives of :func:`~llmsizing.comm.communication`, in the slots :func:`_price` keeps
#: them in, and the window each hides behind: :data:`llmsizing.exposure.DP_SLOTS` (the one table).
_DP_SLOTS = DP_SLOTS
#: The :data:`_DP_SLOTS` index of a data-parallel collective's name: :func:`llmsizing.exposure.dp_slot`,
#: deprecated (review24c M5: the pricing reads each collective's own slot, :mod:`llmsizing.plan_terms`).
_dp_slot = dp_slot


def _row_links(gpu_list, node_of, gi, size, stride):
    """Each row's :func:`~llmsizing.network.group_link` (its GPU, ``size`` GPUs ``stride`` apart) as
    arrays: bandwidth (GB/s), latency per step (s), whether the group leaves the scale-up domain, and the GPUs
    per domain that set its collectives' bytes (1 inside a domain: :func:`~llmsizing.network.wire_factor`).
    One call per (GPU, the group's GPUs per domain, leaving or not, its domains), on the first row with them:
    group_link sees ``size`` and ``stride`` only through those (``tests/test_planner_speed.py`` checks every
    row)."""
    domain = np.array([node_of[g.name].scaleup_domain_gpus for g in gpu_list])[gi]
    across = size * stride > domain
    per_domain = np.where(across, np.minimum(size, np.maximum(1, domain // stride)), size)
    nodes = np.where(across, -(-size // per_domain), 1)       # (a hierarchical group's bandwidth: its nodes)
    (g_of, *_), first, idx = _group_columns(gi, per_domain, across, nodes)
    links = [group_link(gpu_list[g_], node_of[gpu_list[g_].name], size=int(size[f]), stride=int(stride[f]))
             for g_, f in zip(g_of.tolist(), first.tolist())]
    return (np.array([gl.bandwidth_gbps for gl in links])[idx], np.array([gl.alpha_s for gl in links])[idx],
            np.array([gl.across for gl in links])[idx], np.array([_per(gl) for gl in links])[idx])


def _megatron_calls(model, tp, pp, zero, dpcp, vp=None, ep=None, etp=None, part=None,
                    need=None) -> np.ndarray:
    """:func:`~llmsizing.zero_traffic.megatron_buckets` per plan on arrays (one walk per distinct key, each
    kept: :func:`~llmsizing.zero_traffic.megatron_calls_of`), the buckets of
    :func:`~llmsizing.zero_traffic.dp_bucket_params` of ``dpcp``; ``vp``, ``ep``, ``etp`` default to 1. Only
    the rows of ``need`` (default: ZeRO below 3, which has buckets) are walked, the others get 1. A key is
    what the walk reads: the bucket, not ``dpcp`` (every ``dpcp`` up to 40 has the 40M one), no ``ep`` or
    ``etp`` for the dense part and no ``tp`` for the routed experts'."""
    n = len(tp)
    out = np.ones(n)
    rows = np.flatnonzero(np.asarray(zero) < 3 if need is None else need)
    if not len(rows):
        return out
    ones = np.ones(len(rows), dtype=np.int64)
    vp, ep, etp = (ones if c is None else np.asarray(c)[rows] for c in (vp, ep, etp))
    if part == "dense":
        ep = etp = ones
    tp_r = ones if part == "experts" else np.asarray(tp)[rows]
    bucket = np.maximum(DP_BUCKET_MIN_PARAMS, DP_BUCKET_PARAMS_PER_RANK * np.asarray(dpcp)[rows])
    z_r = np.minimum(np.asarray(zero)[rows], 1)
    cols = [np.asarray(c, dtype=np.int64) for c in (tp_r, np.asarray(pp)[rows], z_r, bucket, vp, ep, etp)]
    keys, idx = _groups(*cols)
    calls = np.array([megatron_calls_of(model, t, p, v, z, float(b), e, et, part)
                      for t, p, z, b, v, e, et in keys], dtype=float)
    out[rows] = calls[idx]
    return out


def _dp_calls(zero, on_rank, layers, dpcp, pp=None, buckets=None) -> np.ndarray:
    """Calls per pass of each :data:`_DP_SLOTS` slot, one row per plan
    (:func:`~llmsizing.zero_traffic.dp_calls`): ZeRO-3's slots one per FSDP unit of the stage's ``layers``
    and the root's, the others one per gradient bucket of the ``on_rank`` parameters
    (:func:`~llmsizing.zero_traffic.dp_bucket_params` of ``dp x cp``). ``pp`` (None: no pipeline): the
    root unit is counted only where ``pp`` is 1, as ``dp_calls(pipelined=pp > 1)``. ``buckets`` (per plan:
    :func:`_megatron_calls`, Megatron-Core's layout) replaces the one-per-bucket-of-parameters count where
    given, as ``dp_calls(buckets=)``."""
    root = FSDP_ROOT_UNITS if pp is None else np.where(np.asarray(pp) > 1, 0, FSDP_ROOT_UNITS)
    units = np.ceil(np.round(layers) / FSDP_UNIT_LAYERS) + root
    bucket = np.maximum(DP_BUCKET_MIN_PARAMS, DP_BUCKET_PARAMS_PER_RANK * dpcp)
    buckets = np.maximum(1.0, np.ceil(on_rank / bucket)) if buckets is None else np.asarray(buckets, float)
    out = np.repeat(buckets[:, None], len(_DP_SLOTS), axis=1)
    z3 = zero == 3
    out[z3, 0] = out[z3, 1] = units[z3]
    return out


def _dp_exposed(call, fwd, bwd, mf, slot1=None):
    """The exposed seconds of the data-parallel collectives ``call`` of one link (one call's seconds per
    :data:`_DP_SLOTS` slot, one row per plan): :func:`~llmsizing.exposure.dp_window_exposed_s`, the rule
    :func:`~llmsizing.layouts.exposed_by_group` applies; ``slot1``, if given, the exposed seconds of ZeRO-3's
    backward slot (under a pipeline: :func:`_run_exposed`)."""
    return dp_window_exposed_s(call.T, fwd, bwd, mf, slot1)


@functools.lru_cache(maxsize=512)
def _run_window_table(pp: int, m: int, v: int, units: int) -> tuple:
    """The windows of :func:`~llmsizing.pipeline_schedule.reduce_scatter_windows` with ``per_run`` (one
    reduce-scatter per FSDP unit and run of a chunk's backwards: ZeRO-3 under a pipeline,
    :data:`~llmsizing.parallel.PIPELINED_FSDP`) on every stage, on arrays, all stages in one table
    ``(counts, whole, n_f, n_b, calls, starts)``: each stage's distinct windows once (in order, stage
    ``i``'s from ``starts[i]``) with how many calls have it and ``calls`` the stage's calls, per window; a
    window is ``bwd + fwd x n_f + bwd x n_b`` (one unit's forward ``fwd`` and backward ``bwd``) where
    ``whole``, else 0 (after the step's last backward). The same schedule
    (:func:`~llmsizing.pipeline_schedule._order`) and run ends, counted with prefix sums over all stages at
    once instead of a scan per call (``tests/test_planner_zero_pp.py`` checks them against it)."""
    if v == 1:     # (one run per stage, ended by the step's last backward: its window 0, then the units')
        k = 1 + (units > 1)
        win = (np.array([1.0, units - 1.0])[:k], np.array([False, True])[:k], np.zeros(k), np.zeros(k))
        return (*(np.tile(x, pp) for x in win), np.full(pp * k, float(units)), np.arange(pp) * k)
    per_chunk = np.array([units // v + (c < units % v) for c in range(v)])
    total, n = m * v, 2 * m * v
    stage = np.arange(pp)[:, None]
    n_b = np.arange(total)
    if v > 1:
        warm = np.minimum(2 * (pp - stage - 1) + (v - 1) * pp, total)
        f_chunk, b_chunk = (n_b // pp) % v, v - 1 - (n_b // pp) % v
    else:
        warm = np.minimum(pp - stage - 1, total)
        f_chunk = b_chunk = np.zeros(total, dtype=np.int64)
    j = np.arange(n)[None, :]                                  # (warm-up forwards, 1F1B pairs, cool-down)
    kind = (j >= warm) & ((j >= n - warm) | ((j - warm) % 2 == 1))
    chunk = np.where(kind, b_chunk[np.cumsum(kind, axis=1) - 1], f_chunk[np.cumsum(~kind, axis=1) - 1])
    bwd_at = np.nonzero(kind)[1].reshape(pp, total)           # (B in backward order on every stage)
    ends = np.append(b_chunk[1:] != b_chunk[:-1], True)        # (_run_ends: the next backward's chunk moves)
    issue = bwd_at[:, ends]
    w = per_chunk[chunk]
    zero = np.zeros((pp, 1), dtype=w.dtype)
    c_f = np.concatenate([zero, np.cumsum(np.where(kind, 0, w), axis=1)], axis=1)
    c_b = np.concatenate([zero, np.cumsum(np.where(kind, w, 0), axis=1)], axis=1)
    rows = np.arange(pp)[:, None]
    nf = np.zeros(issue.shape, dtype=np.int64)
    nb = np.zeros(issue.shape, dtype=np.int64)
    nf[:, :-1] = c_f[rows, issue[:, 1:]] - c_f[rows, issue[:, :-1] + 1]
    nb[:, :-1] = c_b[rows, issue[:, 1:]] - c_b[rows, issue[:, :-1] + 1]
    base = 2 * int(w.sum(axis=1).max()) + 1         # (each window as one integer: whole, n_f, n_b)
    whole_col = np.ones(issue.shape, dtype=np.int64)
    whole_col[:, -1] = 0
    code = np.sort((whole_col * base + nf) * base + nb, axis=1)
    new = np.ones(code.shape, dtype=bool)
    new[:, 1:] = code[:, 1:] != code[:, :-1]
    first = np.flatnonzero(new)
    counts = np.diff(np.append(first, code.size))
    code, per_stage = code[new], new.sum(axis=1)
    unit_calls = int((per_chunk[b_chunk[ends]] - 1).sum())     # (a unit's window: the next unit's backward)
    if unit_calls:                                 # (after each stage's own windows)
        at = np.cumsum(per_stage)
        code, counts = np.insert(code, at, base * base), np.insert(counts, at, unit_calls)
        per_stage = per_stage + 1
    starts = np.concatenate([[0], np.cumsum(per_stage)[:-1]])
    calls = np.repeat(np.add.reduceat(counts, starts), per_stage).astype(float)
    return (counts.astype(float), code >= base * base, ((code // base) % base).astype(float),
            (code % base).astype(float), calls, starts)


def _run_windows(pp: int, m: int, v: int, units: int) -> tuple:
    """:func:`_run_window_table` per stage: ``(counts, whole, n_f, n_b)`` each."""
    counts, whole, nf, nb, _, starts = _run_window_table(pp, m, v, units)
    return tuple(zip(*(np.split(a, starts[1:]) for a in (counts, whole, nf, nb))))


def _run_exposed(pp, m, vp, units, fwd, bwd, traffic) -> np.ndarray:
    """The seconds of ZeRO-3's gradient reduce-scatters under a pipeline
    (:data:`~llmsizing.parallel.PIPELINED_FSDP`) the step waits for, one row per plan:
    :func:`~llmsizing.pipeline_schedule.zero3_exposed_s` with ``per_run`` on arrays (``traffic`` the step's
    reduce-scatter seconds; ``fwd`` and ``bwd`` one micro-batch's forward and backward on the stage,
    ``units`` FSDP units on it): each call against its window (:func:`_run_window_table`, all stages at
    once), on the stage that waits longest."""
    out = np.zeros(len(pp))
    (p_of, m_of, v_of, u_of), _, idx = _group_columns(pp, m, vp, units)
    for g, key in enumerate(zip(p_of.tolist(), m_of.tolist(), v_of.tolist(), u_of.tolist())):
        at = np.flatnonzero(idx == g)
        counts, whole, nf, nb, calls, starts = _run_window_table(*key)
        f_u, b_u = (fwd[at] / key[3])[:, None], (bwd[at] / key[3])[:, None]
        x = np.where(whole, b_u + f_u * nf + b_u * nb, 0.0)
        wait = counts * np.maximum(0.0, traffic[at][:, None] / calls - x)
        ends = np.append(starts[1:], len(counts)).tolist()
        stages = 1 if key[2] == 1 else len(starts)                  # (without interleaving, all alike)
        out[at] = np.max([np.ascontiguousarray(wait[:, a:b]).sum(axis=1)     # (each stage's own sum, as
                          for a, b in zip(starts.tolist()[:stages], ends)], axis=0)   # alone: the same float)
    return out


def _kept_runs(kept, pp, m, vp, units, call, fwd, bwd) -> tuple:
    """ZeRO-3's backward slot per plan: its passes per step (one per micro-batch; under a pipeline,
    ``kept``, one per run of a chunk's backwards, :func:`~llmsizing.pipeline_schedule.grad_reduces`:
    ``m / pp`` with interleaving, one without) and, if any plan is ``kept``, its exposed seconds
    (:func:`_run_exposed` for those, ``m`` calls against each backward for the others; else None).
    ``call``: one pass's seconds."""
    mf = m.astype(float)
    runs = np.where(kept, np.where(vp > 1, mf / np.maximum(pp, 1), 1.0), mf)
    if not kept.any():
        return runs, None
    on = np.flatnonzero(kept)
    slot1 = mf * np.maximum(0.0, call - bwd)
    slot1[on] = _run_exposed(pp[on], m[on], vp[on], units[on].astype(np.int64), fwd[on], bwd[on],
                             runs[on] * call[on])
    return runs, slot1
