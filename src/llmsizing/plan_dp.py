"""The planner's data-parallel collectives on arrays (Part III, "How many GPUs do you need?"), split out of
:mod:`llmsizing.plan_pricing` (issue 34: interleaved pipelines pushed it past 600 lines): the slots
:func:`~llmsizing.plan_pricing._price` keeps the collectives of :func:`~llmsizing.comm.communication` in
(:data:`_DP_SLOTS`), their calls per pass (:func:`_dp_calls`, :func:`~llmsizing.comm.dp_calls` on arrays),
what :func:`~llmsizing.layouts.exposed_by_group` leaves exposed of them (:func:`_dp_exposed`) and each row's
group link (:func:`_row_links`). No formula of its own; :mod:`llmsizing.plan_pricing` re-exports these names
and ``tests/test_planner_speed.py`` checks searches priced with them against one ``step_time`` per plan.
"""

from __future__ import annotations

import numpy as np

from .comm import DP_BUCKET_MIN_PARAMS, DP_BUCKET_PARAMS_PER_RANK, FSDP_UNIT_LAYERS
from .network import group_link
from .plan_terms import _group_columns, _per

#: The data-parallel collectives of :func:`~llmsizing.comm.communication`, in the slots :func:`_price` keeps
#: them in, with whether each runs every micro-batch (ZeRO-2's gradient reduce-scatter, ZeRO-3's gathers and
#: reduce-scatter) or once per step, and the window it hides behind
#: (:func:`~llmsizing.layouts.exposed_by_group`): ZeRO-3's forward gathers behind each forward; its backward
#: gathers and reduce-scatters, together, behind each backward; the ZeRO-1/2 weight all-gather behind the next
#: step's first forward; ZeRO-2's reduce-scatter behind each backward; DDP's and ZeRO-1's gradients behind the
#: last backward.
_DP_SLOTS = ("ZeRO-3 forward gather", "ZeRO-3 backward", "weight all-gather", "ZeRO-2 reduce-scatter",
             "gradients")


def _dp_slot(name: str) -> int:
    """The :data:`_DP_SLOTS` index of the data-parallel collective called ``name`` (the tests of
    :func:`~llmsizing.layouts.exposed_by_group`, in its order)."""
    if "all-gather (forward)" in name:
        return 0
    if name.startswith("ZeRO-3"):
        return 1
    if "weight all-gather" in name:
        return 2
    if name.startswith("ZeRO-2 gradient"):
        return 3
    return 4


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


def _dp_calls(zero, on_rank, layers, dpcp) -> np.ndarray:
    """Calls per pass of each :data:`_DP_SLOTS` slot, one row per plan (:func:`~llmsizing.comm.dp_calls`):
    ZeRO-3's slots one per FSDP unit of the stage's ``layers``, the others one per gradient bucket of the
    ``on_rank`` parameters (:func:`~llmsizing.comm.dp_bucket_params` of ``dp x cp``)."""
    units = np.ceil(np.round(layers) / FSDP_UNIT_LAYERS)
    bucket = np.maximum(DP_BUCKET_MIN_PARAMS, DP_BUCKET_PARAMS_PER_RANK * dpcp)
    buckets = np.maximum(1.0, np.ceil(on_rank / bucket))
    out = np.repeat(buckets[:, None], len(_DP_SLOTS), axis=1)
    z3 = zero == 3
    out[z3, 0] = out[z3, 1] = units[z3]
    return out


def _dp_exposed(call, fwd, bwd, mf):
    """The exposed seconds of the data-parallel collectives ``call`` (one call's seconds per :data:`_DP_SLOTS`
    slot, one row per plan), by :func:`~llmsizing.layouts.exposed_by_group`'s rules."""
    return (mf * np.maximum(0.0, call[:, 0] - fwd) + mf * np.maximum(0.0, call[:, 1] - bwd)
            + np.maximum(0.0, call[:, 2] - fwd) + mf * np.maximum(0.0, call[:, 3] - bwd)
            + np.maximum(0.0, call[:, 4] - bwd))
