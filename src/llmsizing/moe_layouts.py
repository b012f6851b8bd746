"""Which expert-parallel layouts a search tries (issue 24; chapter 18): the helpers :func:`~llmsizing.planner.plan`
and :func:`~llmsizing.layouts.min_gpus` share to search ``ep`` for a mixture of experts, and the parts of the
planner's vectorised pricing (:func:`~llmsizing.planner._price`) that only a mixture of experts has. The
arithmetic of expert parallelism itself (memory, the all-to-all, FLOPs) is in :mod:`llmsizing.moe`; these only
call it (and :mod:`llmsizing.comm`) once per piece many plans share."""

from __future__ import annotations

import math

import numpy as np

from ._validate import check_int
from .model import Model
from .moe import stage_moe_layers
from .parallel import Parallel

#: Node-limited routing by catalogue model: each token's experts on at most this many nodes. DeepSeek-V3's
#: ``config.json`` has ``n_group = 8`` and ``topk_group = 4`` (DeepSeek-AI 2024, arXiv 2412.19437, Sec. 2.1.2:
#: "M = 4"). The other catalogue models route over all experts (no limit).
NODE_LIMITED_ROUTING = {"deepseek-v3": 4}


def route_max_nodes(model: Model) -> int | None:
    """The node limit of ``model``'s routing (:data:`NODE_LIMITED_ROUTING`), or ``None`` (no limit): what the
    planner passes to :func:`ep_all_to_all` when it is not told (``max_nodes="model"``)."""
    return NODE_LIMITED_ROUTING.get(model.name)


def ep_candidates(model: Model, ep_degrees=None) -> tuple[int, ...]:
    """The expert-parallel degrees a search tries: ``(1,)`` for a dense model; for a mixture of experts every
    divisor of its routed experts (each rank holds whole experts: Megatron-Core asserts ``num_moe_experts %
    expert_model_parallel_size == 0``), or the given ``ep_degrees``, each of which must divide them (a
    ``ValueError`` naming ``ep_degrees`` otherwise)."""
    from ._validate import check_sequence

    if ep_degrees is None:
        if not model.is_moe:
            return (1,)
        e = model.experts
        return tuple(d for d in range(1, e + 1) if e % d == 0)
    eps = sorted({check_int("ep_degrees[i]", d) for d in check_sequence("ep_degrees", ep_degrees,
                                                                         example="(1, 8, 64)")})
    for d in eps:
        if d > 1 and not model.is_moe:
            raise ValueError(f"ep_degrees holds ep={d}, but {model.name!r} is dense (experts=0): expert "
                             "parallelism splits routed experts")
        if model.is_moe and model.experts % d:
            raise ValueError(f"ep_degrees holds ep={d}, which does not divide the {model.experts} routed experts "
                             f"of {model.name!r}: each expert-parallel rank holds experts / ep whole experts")
    return tuple(eps)


def dp_unit(tp: int, cp: int, ep: int, expert_tp: bool = False) -> int:
    """The smallest data-parallel degree a layout with ``ep`` can have, every valid ``dp`` being a multiple of
    it: ``ep`` must divide ``tp x cp x dp / etp`` (:class:`~llmsizing.parallel.Parallel`), so ``dp`` is a
    multiple of ``etp x ep / gcd(etp x ep, tp x cp)``. 1 without expert parallelism; ``ep`` with ``tp = cp = 1``
    (the expert-parallel group inside the data-parallel one, as DeepSpeed-MoE places it)."""
    etp = tp if expert_tp else 1
    return etp * ep // math.gcd(etp * ep, tp * cp)


def heavy_stages(model: Model, par: Parallel) -> tuple[int, ...]:
    """The pipeline stages of which one is the most loaded GPU, for a search that evaluates only some: the first
    (embedding, most micro-batches in flight) and the last (LM head, logits), as for a dense model, and for a
    mixture of experts also the first stage of each count of MoE layers (of stages holding the same MoE layers
    the earliest has the most micro-batches in flight; DeepSeek-V3's first stage holds its dense layers, so the
    second may outweigh it). ``tests/test_planner_moe.py`` checks it against every stage."""
    out = {0, par.pp - 1}
    if model.is_moe:
        seen = set()
        for i, k in enumerate(stage_moe_layers(model, par)):
            if k not in seen:
                seen.add(k)
                out.add(i)
    return tuple(sorted(out))



# ----------------------------------------------------------------------------- the planner's pricing of them
def moe_ep_coefficients(model, kw: dict, tp: int, pp: int, zero: int, m: int, ep: int, eps, expert_tp: bool,
                        cache: dict, key: tuple):
    """:func:`~llmsizing.planner._memory_coefficients` of a mixture of experts (``cp = 1``) at expert-parallel
    degree ``ep``, from those at the first two degrees of ``eps`` (kept in ``cache`` under
    ``key`` with ``ep`` replaced): every piece is ``A + B / ep``. The routed experts' weights (and, without
    ZeRO, their gradients and states) on a GPU are ``1 / ep`` of them; their ZeRO shards, over
    ``edp = tp x dp / (etp x ep)`` GPUs, are ``experts / (ep x etp x edp) = experts / (tp x dp)`` whatever
    ``ep``; nothing else depends on it (the activations: each GPU receives ``tokens x k`` rows under uniform
    routing; :func:`llmsizing.moe.foreach_temporary_bytes` shards like the states). Used for ZeRO-0 (any ``pp``) and
    ZeRO-1 without a pipeline only: with ZeRO-2 the LM head's gradient of a single micro-batch is counted as the
    gradients per parameter (sharded, not divided by ``ep``) times the head, a ratio not of that form; with ZeRO-1
    and a pipeline the sharded ``foreach`` temporary is split in proportion to each stage's parameters (unsharded,
    without ZeRO, it is each stage's own); another optimizer implementation's temporary is the largest tensor, a
    maximum. ZeRO-3 has ``ep = 1`` only.
    ``tests/test_planner_moe.py`` checks whole searches against direct calls."""
    from .plan_pricing import _memory_coefficients

    e1, e2 = eps[0], eps[1]
    base = []
    for e in (e1, e2):
        k = key[:3] + (e,) + key[4:]
        if k not in cache:
            cache[k] = _memory_coefficients(model, kw, tp, pp, zero, m, ep=e, expert_tp=expert_tp)
        base.append(cache[k])
    w = (1 / ep - 1 / e1) / (1 / e1 - 1 / e2)
    return tuple(c1 + (c1 - c2) * w for c1, c2 in zip(*base))


def moe_dp_collectives(model, gpu_list, cols, dpcp, fwd, bwd, mf, *, seq, precision, node_of, expert_tp):
    """A mixture of experts' data-parallel collectives for the planner's pricing
    (:func:`~llmsizing.planner._price`): ``(exposed, total)`` seconds per plan,
    the dense part over ``dp x cp`` (``tp`` apart) and the routed experts' over ``edp`` (``etp x ep`` apart),
    each exposed on its own. Each part's collectives (:func:`~llmsizing.comm.dp_schedule`, priced by
    :func:`~llmsizing.comm.ring_collective` as :func:`~llmsizing.comm.communication` prices them) are worked out
    once per (its group's link, tp, ZeRO stage, group size, ep), for one stage's parameters without a pipeline,
    and scaled below to the most loaded stage's."""
    from .comm import dp_schedule, ring_collective
    from .moe import _split
    from .network import group_link
    from .plan_pricing import _DP_SLOTS, _dp_exposed, _dp_slot, _groups
    from .precision import DTYPE_BYTES, RECIPES

    recipe = RECIPES[precision]
    w_b, g_b = DTYPE_BYTES[recipe.weights], DTYPE_BYTES[recipe.grads]
    gi, tp, pp, zero, ep = (cols[k] for k in ("gpu", "tp", "pp", "zero", "ep"))
    etp = tp if expert_tp else np.ones_like(tp)
    edp = tp * dpcp // (etp * ep)
    n_slots = len(_DP_SLOTS)
    links: dict = {}
    per_byte = np.zeros((len(gi), 2 * n_slots))                  # dense slots, then the experts' slots
    traffic = np.zeros((len(gi), 2 * n_slots))
    latency = np.zeros((len(gi), 2 * n_slots))
    for part, columns in ((0, (gi, tp, zero, dpcp, np.ones_like(ep))), (1, (gi, tp, zero, edp, ep))):
        keys, idx = _groups(*columns)
        rows = np.zeros((len(keys), 3, n_slots))
        seen: dict = {}
        for k, (g_, t_, z_, n_, e_) in enumerate(keys):
            if n_ == 1:
                continue
            g = gpu_list[g_]
            stride = t_ if part == 0 else (t_ if expert_tp else 1) * e_
            if (g_, n_, stride) not in links:
                links[g_, n_, stride] = group_link(g, node_of[g.name], size=n_, stride=stride)
            gl = links[g_, n_, stride]
            same = seen.setdefault((gl, t_, z_, n_, e_), k)
            if same != k:
                rows[k] = rows[same]
                continue
            on_rank = _split(model, t_, 1, None, e_, expert_tp)[0][part]
            for name, kind, message, _ in dp_schedule(z_, on_rank, w_b, g_b, 1):
                c = ring_collective(name, "dp", n_, kind, message, 1, gl)
                j = _dp_slot(c.collective)
                rows[k, 0, j] += c.bytes_per_gpu / c.calls
                rows[k, 1, j] = 1 / (c.bandwidth_gbps * 1e9)
                rows[k, 2, j] += c.latency_s / c.calls
        cut = slice(part * n_slots, (part + 1) * n_slots)
        traffic[:, cut], per_byte[:, cut], latency[:, cut] = rows[idx, 0], rows[idx, 1], rows[idx, 2]
    # the most loaded stage's dense and expert parameters, relative to one stage's (the messages scale)
    held_keys, held_idx = _groups(tp, pp, ep)
    share = np.zeros((len(held_keys), 2))
    for k, (t_, p_, e_) in enumerate(held_keys):
        rows, one = _split(model, t_, p_, None, e_, expert_tp), _split(model, t_, 1, None, e_, expert_tp)[0]
        i = max(range(p_), key=lambda j: rows[j][0] + rows[j][1])
        share[k] = (rows[i][0] / one[0], rows[i][1] / one[1])
    share = share[held_idx]
    dense, experts = (share[:, part, None] * traffic[:, cut] * per_byte[:, cut] + latency[:, cut]
                      for part, cut in ((0, slice(0, n_slots)), (1, slice(n_slots, 2 * n_slots))))
    # each collective is exposed on its own, but ZeRO-3's backward gathers and reduce-scatters hide together
    # behind each backward (exposed_by_group): the two parts' slot 1 is one window
    both = np.zeros_like(dense)
    both[:, 1] = dense[:, 1] + experts[:, 1]
    dense[:, 1] = experts[:, 1] = 0.0
    exposed = _dp_exposed(dense, fwd, bwd, mf) + _dp_exposed(experts, fwd, bwd, mf) + _dp_exposed(both, fwd, bwd, mf)
    total = sum(mf * (c[:, 0] + c[:, 1] + c[:, 3]) + c[:, 2] + c[:, 4] for c in (dense, experts, both))
    return exposed, total


def moe_all_to_all_s(model, gpu_list, cols, mf, *, seq, precision, node_of, cp_comm, rcs, expert_tp, max_nodes):
    """Seconds per plan of a mixture of experts' expert-parallel all-to-alls (:func:`llmsizing.moe.ep_all_to_all`)
    for :func:`~llmsizing.planner._price`: all the MoE layers' of one micro-batch without a pipeline, scaled by
    the most loaded stage's MoE layers over all of them, times the micro-batches."""
    from .moe import ep_all_to_all
    from .plan_pricing import _groups

    gi, tp, cp, pp, b, ep, ri = (cols[k] for k in ("gpu", "tp", "cp", "pp", "micro", "ep", "rc"))
    out = np.zeros(len(gi))
    on = np.flatnonzero(ep > 1)
    if not len(on):
        return out
    keys, idx = _groups(gi[on], tp[on], cp[on], b[on], ep[on])
    # the forward's two all-to-alls and the backward's, without recomputation; full recomputation repeats the
    # forward's (ep_all_to_all)
    fwd_bwd = np.array([[c.time_s for c in ep_all_to_all(
        model, Parallel(tp=t_, sp=t_ > 1, cp=c_, cp_comm=cp_comm, dp=e_, ep=e_, expert_tp=expert_tp), batch=b_,
        seq=seq, gpu=gpu_list[g_], node=node_of[gpu_list[g_].name], grad_accum=1, precision=precision,
        recompute="none", max_nodes=max_nodes)] for g_, t_, c_, b_, e_ in keys])
    full = np.array([r == "full" for r in rcs])[ri[on]]
    rows = fwd_bwd[idx]
    one = np.where(full, 2 * rows[:, 0] + 2 * rows[:, 1] + rows[:, 2], rows[:, 0] + rows[:, 1] + rows[:, 2])
    pp_keys, pp_idx = _groups(pp[on])
    most = np.array([max(stage_moe_layers(model, Parallel(pp=p_))) for (p_,) in pp_keys]) / model.n_moe_layers
    out[on] = one * most[pp_idx] * mf[on]
    return out


__all__ = ["NODE_LIMITED_ROUTING", "route_max_nodes", "ep_candidates", "dp_unit", "heavy_stages"]
