"""The per-(GPU, tp, cp, micro-batch, ep, recomputation) terms of the planner's pricing
(:func:`llmsizing.plan_pricing._price`; Part III, "How many GPUs do you need?"): the kernels' rates and one
micro-batch's tensor- and context-parallel communication, total and exposed, of all the layers, read off the
step model's own pieces (:func:`~llmsizing.comm.communication`, :func:`~llmsizing.layouts.exposed_by_group`,
:func:`~llmsizing.layouts._cp_attention_s`, :func:`~llmsizing.kernels.rates`), the ones
:func:`~llmsizing.layouts.step_time` calls. Issue 35: a whole ``step_time`` per key also worked out the
compute, the bubble and the MFU range, which the pricing forms itself on arrays; the tp and cp entries of
:func:`exposed_by_group` do not depend on the compute (tensor parallelism sits on the critical path, the
ring's hops hide behind the attention core only), so they are the same numbers, bit for bit
(``tests/test_planner_speed.py`` compares whole searches with the reference).
"""

from __future__ import annotations

import functools
import math
import warnings
from dataclasses import replace

import numpy as np

from ._validate import MAX_MEANINGFUL
from .collectives import DP_SLOTS
from .comm import communication, dp_bucket_params, dp_collectives, group_network
from .hardware import dense_tflops
from .hardware import kernel_efficiency as default_efficiency
from .kernels import rates
from .exposure import tp_backward_async_s
from .layouts import _cp_attention_s, exposed_by_group
from .memory import stage_params
from .moe import _split
from .network import group_link, latency_steps, wire_factor
from .parallel import OP_SAC_MODES, kept_parallel, layers_per_stage
from .pipeline_schedule import grad_reduces
from .precision import DTYPE_BYTES, RECIPES
from .grad_buckets import megatron_calls_of


def layer_terms(model, gpu_list, keys, *, seq: int, eff, precision: str, dtype: str, node_of: dict,
                cp_comm: str, rcs) -> tuple[np.ndarray, dict]:
    """For each key ``(GPU index, tp, cp, micro-batch, ep, recomputation index)`` of ``keys``: the Linear
    layers' and the attention core's rates (FLOP/s) and, for one micro-batch without a pipeline (``dp = 1``,
    ``grad_accum = 1``; they do not depend on ``ep``), the tensor- and context-parallel communication
    exposed and in full, as a row ``(gemm rate, tp exposed, cp exposed, tp, cp, attention rate, tp dgrad-
    async, tp wgrad-async)`` (the last two: :func:`~llmsizing.exposure.tp_backward_async_s`, what the
    column-parallel backward can hide behind its dgrad and wgrad GEMMs, plan44); and each
    GPU's dense peak (FLOP/s) by index. ``eff`` is the kernel efficiency (``None``: the GPU generation's, as
    :func:`~llmsizing.layouts.step_time` takes it).

    Each key's row is its own (the GPUs priced together give each its own call's floats:
    :func:`_link_terms`), so rows are kept per (model, context, efficiency, recipe, dtype, K/V exchange,
    recomputations) and GPU with its node (:func:`_kept_layer_rows`, issue 38: chapter 12's widget moving its
    global batch or GPU limit priced the same keys again, ~1.5 ms a search); only the keys not kept yet are
    priced (:func:`_layer_terms`)."""
    try:
        own = _gpu_rows(_kept_layer_rows(model, seq, eff, precision, dtype, cp_comm, tuple(rcs)), gpu_list,
                        node_of)
        got = [own[k[0]].get(tuple(k[1:])) for k in keys]
    except TypeError:                                 # (an unhashable argument: priced, not kept)
        return _layer_terms(model, gpu_list, keys, seq=seq, eff=eff, precision=precision, dtype=dtype,
                            node_of=node_of, cp_comm=cp_comm, rcs=rcs)
    todo = [i for i, row in enumerate(got) if row is None]
    peak_of: dict = {}
    if todo:
        rows, peak_of = _layer_terms(model, gpu_list, [keys[i] for i in todo], seq=seq, eff=eff,
                                     precision=precision, dtype=dtype, node_of=node_of, cp_comm=cp_comm,
                                     rcs=rcs)
        for i, row in zip(todo, rows.tolist()):          # (tuples of floats: the collector untracks them)
            got[i] = own[keys[i][0]][tuple(keys[i][1:])] = tuple(row)
        if len(todo) == len(keys):                  # (none kept: the rows as made)
            return rows, peak_of
    for g_ in dict.fromkeys(k[0] for k in keys):        # (each GPU's peak, as _layer_terms gives it)
        if g_ not in peak_of:
            peak_of[g_] = dense_tflops(gpu_list[g_], dtype) * 1e12
    return np.array(got, dtype=float).reshape(-1, 8), peak_of


#: The most (GPU, node) pairs one kept key of :func:`_kept_layer_rows` or :func:`_kept_dp_rows` holds rows
#: for (the catalogue's GPUs, a few times over). A GPU or node made anew
#: (:func:`~llmsizing.catalog.use_prices`, a GPU or node built by hand) is another pair: beyond this many,
#: the key's rows are dropped and priced again, so a long-running kernel's kept rows stay bounded (review29a).
KEPT_GPU_NODES = 128


def _gpu_rows(kept: dict, gpu_list, node_of: dict) -> list[dict]:
    """The dicts of ``kept`` (a kept key's rows by (GPU, node)) for each GPU of ``gpu_list``, made where
    missing; ``kept`` emptied first when the new pairs would take it past :data:`KEPT_GPU_NODES`."""
    pairs = [(g, node_of[g.name]) for g in gpu_list]
    new = {p for p in pairs if p not in kept}
    if new and len(kept) + len(new) > KEPT_GPU_NODES:
        kept.clear()
    return [kept.setdefault(p, {}) for p in pairs]


#: How many (model, context, efficiency, recipe, dtype, K/V exchange, recomputations) :func:`_kept_layer_rows`
#: keeps rows for (as many as plan_memory's SEARCH_MEMORIES_KEPT, for the same warm-up).
LAYER_ROWS_KEPT = 32


@functools.lru_cache(maxsize=LAYER_ROWS_KEPT)
def _kept_layer_rows(model, seq: int, eff, precision: str, dtype: str, cp_comm: str, rcs: tuple) -> dict:
    """The dicts of :func:`layer_terms`' rows, one per (GPU, its node), by the rest of the key ``(tp, cp,
    micro-batch, ep, recomputation index)``: ``(gemm rate, tp exposed, cp exposed, tp, cp, attention rate,
    tp dgrad-async, tp wgrad-async)``
    as :func:`_layer_terms` made them."""
    return {}


def _layer_terms(model, gpu_list, keys, *, seq: int, eff, precision: str, dtype: str, node_of: dict,
                 cp_comm: str, rcs) -> tuple[np.ndarray, dict]:
    """:func:`layer_terms` of ``keys``, each priced (its docstring)."""
    out = []
    peak_of: dict = {}
    eps_of: dict = {}          # the ep degrees of each (GPU, tp, cp, micro): one rates call for them all
    for g_, t_, c_, b_, e_, _ in keys:
        eps_of.setdefault((g_, t_, c_, b_), {})[e_] = None
    rates_of: dict = {}        # (they do not depend on the recomputation)
    for (g_, t_, c_, b_), eps in eps_of.items():
        g = gpu_list[g_]
        if g_ not in peak_of:
            peak_of[g_] = (dense_tflops(g, dtype) * 1e12,
                           default_efficiency(g, dtype) if eff is None else eff)
        eps = tuple(eps)
        gemm, attention = rates(model, g, tp=t_, cp=c_, batch=b_, seq=seq, dtype=dtype,
                                kernel_efficiency=peak_of[g_][1], ep=eps)
        rates_of.update({(g_, t_, c_, b_, x): (r, attention) for x, r in zip(eps, gemm)})
    max_nodes = "model"
    # one per (GPU, tp, cp, micro, rc): the communication does not depend on ep, and tp's and cp's read the
    # recomputation only by what it reruns (comm.communication, _cp_attention_s: _rerun_class), so a
    # recomputation shares the first of its class's terms (same_rc), one that is not op SAC where the class
    # has one (the rows of "none" added for partial recomputation's pieces, _price, review30a)
    first = sorted(range(len(rcs)), key=lambda j: rcs[j] in OP_SAC_MODES)      # (stable: in order otherwise)
    same_rc = [next(j for j in first if _rerun_class(rcs[j]) == _rerun_class(r)) for r in rcs]
    comm_of = _link_terms(model, gpu_list, keys, seq=seq, precision=precision, dtype=dtype, node_of=node_of,
                          cp_comm=cp_comm, rcs=rcs, max_nodes=max_nodes, rates_of=rates_of, same_rc=same_rc)
    shared: dict = {}          # the rest (no tp nor cp group; Ulysses' all-to-all): per (tp, cp, micro, rc)
    for g_, t_, c_, b_, e_, r_ in keys:
        g = gpu_list[g_]
        if (g_, t_, c_, b_, r_) not in comm_of:
            key = (g_ if c_ > 1 else None, t_, c_, b_, same_rc[r_])      # (without tp and cp nothing is sent)
            if key not in shared:
                par = kept_parallel(tp=t_, sp=t_ > 1, cp=c_, cp_comm=cp_comm)
                comm = communication(
                    model, par, batch=b_, seq=seq, gpu=g, precision=precision, grad_accum=1,
                    recompute=rcs[key[4]], node=node_of[g.name], max_nodes=max_nodes, _groups=("tp", "cp"))
                cp_att = _cp_attention_s(model, g, comm.parallel, batch=b_, seq=seq, grad_accum=1,
                                         recompute=rcs[key[4]], dtype=dtype, eff=peak_of[g_][1],
                                         rate=rates_of[g_, t_, c_, b_, e_][1])    # (its attention rate)
                # (tp and cp exposure do not depend on the compute's windows: any compute_s gives the same)
                exposed = exposed_by_group(comm, 0.0, grad_accum=1, fwd_share=1.0, cp_attention_s=cp_att)
                by = comm.by_group()
                shared[key] = (exposed["tp"], exposed.get("cp", 0.0), by.get("tp", 0.0), by.get("cp", 0.0),
                               *tp_backward_async_s(comm))
            comm_of[g_, t_, c_, b_, r_] = shared[key]
        gemm_rate, attention_rate = rates_of[g_, t_, c_, b_, e_]
        terms = comm_of[g_, t_, c_, b_, r_]
        out.append((gemm_rate, *terms[:4], attention_rate, *terms[4:]))
    return np.array(out, dtype=float).reshape(-1, 8), {g_: v[0] for g_, v in peak_of.items()}


def _link_terms(model, gpu_list, keys, *, seq: int, precision: str, dtype: str, node_of: dict, cp_comm: str,
                rcs, max_nodes, rates_of: dict, same_rc) -> dict:
    """:func:`layer_terms`' communication terms ``(tp exposed, cp exposed, tp, cp, tp dgrad-async, tp
    wgrad-async)`` of its keys with a tp
    or cp group (Ulysses' all-to-all aside), by (GPU, tp, cp, micro-batch, recomputation): one
    :func:`~llmsizing.comm.communication`, :func:`~llmsizing.layouts._cp_attention_s` and
    :func:`~llmsizing.layouts.exposed_by_group` per (tp, cp, micro-batch, recomputation, whether the tp and
    the cp group leave the scale-up domain) for all the GPUs at once: their distinct tp and cp links'
    bandwidths and latencies, and with cp their attention rates (the ring hides behind the attention), as
    arrays (issue 35: 213 calls for Llama 4 Scout over the catalogue, 946 for Llama 3.1 405B at 128K). The
    step model's own arithmetic element by element: each GPU's numbers are those of its own call, bit for
    bit (``tests/test_planner_speed.py``). ``same_rc``: the recomputation whose terms each one's are."""
    same_of: dict = {}         # the tp and cp links of each (GPU, tp, cp)
    groups: dict = {}          # (tp, cp, micro, rc, leaving) -> {(tp link, cp link, rate): [(GPU, rc)]}
    for g_, t_, c_, b_, e_, r_ in keys:
        if t_ == 1 and c_ == 1 or c_ > 1 and cp_comm == "a2a":
            continue
        if (g_, t_, c_) not in same_of:
            g = gpu_list[g_]
            par = kept_parallel(tp=t_, sp=t_ > 1, cp=c_, cp_comm=cp_comm)
            links = group_network(par, g, node=node_of[g.name], _groups=("tp", "cp"))
            same_of[g_, t_, c_] = (links["tp"], links.get("cp"))
        tl, cl = same_of[g_, t_, c_]
        member = (tl, cl, rates_of[g_, t_, c_, b_, e_][1] if c_ > 1 else None)
        # (leaving, and the GPUs per domain that set a hierarchical collective's bytes: wire_factor)
        group = (t_, c_, b_, same_rc[r_], tl.across, cl and cl.across, _per(tl), cl and _per(cl))
        at = groups.setdefault(group, {}).setdefault(member, {})
        at[g_, r_] = None
    out = {}
    for (t_, c_, b_, r_, *_), at in groups.items():
        members, g_ = list(at), next(iter(next(iter(at.values()))))[0]
        g = gpu_list[g_]
        names = ("tp", "cp")[:2 if c_ > 1 else 1]
        if len(members) == 1:     # (one GPU's links: its own call's floats, the same operations)
            links, rate = {k: members[0][i] for i, k in enumerate(names)}, members[0][2]
        else:
            links = {k: replace(members[0][i], alpha_s=np.array([m[i].alpha_s for m in members]),
                                bandwidth_gbps=np.array([m[i].bandwidth_gbps for m in members]))
                     for i, k in enumerate(names)}
            rate = np.array([m[2] for m in members])
        par = kept_parallel(tp=t_, sp=t_ > 1, cp=c_, cp_comm=cp_comm)
        comm = communication(model, par, batch=b_, seq=seq, gpu=g, precision=precision, grad_accum=1,
                             recompute=rcs[r_], node=node_of[g.name], max_nodes=max_nodes,
                             _groups=("tp", "cp"), _links=links)
        cp_att = (0.0, 0.0) if c_ == 1 else _cp_attention_s(
            model, g, comm.parallel, batch=b_, seq=seq, grad_accum=1, recompute=rcs[r_], dtype=dtype,
            eff=0.5, rate=rate)                                    # (eff: only for a rate not given)
        # (tp and cp exposure do not depend on the compute's windows: any compute_s gives the same)
        exposed = exposed_by_group(comm, 0.0, grad_accum=1, fwd_share=1.0, cp_attention_s=cp_att)
        by = comm.by_group()
        n = len(members)          # (a term that is one number for all: the same number n times)
        terms = (exposed["tp"], exposed.get("cp", 0.0), by.get("tp", 0.0), by.get("cp", 0.0),
                 *tp_backward_async_s(comm))
        cols = [(x.tolist() if np.shape(x) == (n,) else np.broadcast_to(x, n).tolist()) if np.ndim(x)
                else [x] * n for x in terms]
        for i, m in enumerate(members):
            for gpu, r in at[m]:
                out[gpu, t_, c_, b_, r] = tuple(c[i] for c in cols)
    return out


def tp_backward_exposed_s(model, tp, cp, micro, ep, L, per_layer, layers, *, seq: int) -> np.ndarray:
    """The tensor-parallel seconds per step each row of :func:`~llmsizing.plan_pricing._price` waits for
    when Megatron-LM's column-parallel backward hides its re-gathers behind the dgrad GEMMs and the dgrad's
    reduction behind the wgrad GEMMs: :func:`~llmsizing.layouts.step_time`'s ``tp_backward_overlap=True``
    as arrays (plan44). ``L``: :func:`layer_terms`' rows (columns 1, 6, 7: exposed, dgrad- and
    wgrad-async of one micro-batch over all the layers), ``per_layer`` their scale to the step (the most
    loaded stage's share x ``m``), ``layers`` the slowest stage's layers x ``m`` (the windows':
    :func:`~llmsizing.layouts.tp_backward_windows_s`, each GEMM's dgrad and wgrad its forward's FLOPs)."""
    from .kernels import layer_gemms

    keys, idx = _groups(tp, cp, micro, ep)
    gemms = [layer_gemms(model, tp=int(t_), tokens=max(1, int(b_) * seq // int(c_)), ep=int(e_))
             for t_, c_, b_, e_ in keys]
    flops = np.array([2.0 * (math.prod(g[0]) + math.prod(g[2])) for g in gemms]).take(idx)
    window = flops * layers / L[:, 0]
    dgrad, wgrad = L[:, 6] * per_layer, L[:, 7] * per_layer
    rest = L[:, 1] * per_layer - dgrad - wgrad
    return np.where(tp > 1, rest + np.maximum(dgrad - window, 0.0) + np.maximum(wgrad - window, 0.0),
                    L[:, 1] * per_layer)


def _per(link) -> int:
    """The GPUs per domain that set the bytes of a collective on ``link`` (a
    :class:`~llmsizing.network.GroupLink`): :func:`~llmsizing.network.link_wire_factor`'s."""
    return link.per_domain if link.across else 1


def dp_link_rows(model, gpu_list, keys, *, seq: int, precision: str, node_of: dict, slot_of=None,
                 n_slots: int) -> tuple:
    """A dense model's data-parallel collectives for the planner's pricing
    (:func:`~llmsizing.plan_pricing._price`) per key ``(GPU index, tp, ZeRO stage, dp x cp)`` of ``keys``,
    without a pipeline: ``(seconds per byte of a call's traffic, bytes of a pass, latency of one call)``,
    each an array of a row per key and a column per slot (:data:`~llmsizing.collectives.DP_SLOTS`: each
    collective's own, from :func:`~llmsizing.zero_traffic.dp_collectives`; ``slot_of``, a function of its
    name, is deprecated, review24c M5). Keys with ``dp x cp = 1`` send nothing. A fifth entry, true,
    is ZeRO-3 under a pipeline (:data:`~llmsizing.parallel.PIPELINED_FSDP`): the weights gathered once and
    kept, the gradients reduce-scattered once per pass, a pass being one run of a chunk's backwards.

    :func:`~llmsizing.comm.communication`'s data-parallel rows without its call (issue 32: one per key was
    ~15% of a long-context search's pricing): the collectives of :func:`~llmsizing.zero_traffic.dp_schedule`
    once per (tp, ZeRO stage, dp x cp), each priced as :func:`~llmsizing.comm.ring_collective` prices it on
    the key's own :func:`~llmsizing.network.group_link`, the same operations on the same floats in the same
    order (``tests/test_planner_speed.py``, ``tests/test_plan_terms.py``). A message beyond
    :data:`~llmsizing._validate.MAX_MEANINGFUL` goes through :func:`~llmsizing.comm.communication`, which
    raises its own error.

    Each key's rows are its own (the same floats whichever keys are priced beside it), read neither the
    context nor the micro-batch: kept per (model, recipe, slots) and key with its GPU and node
    (:func:`_kept_dp_rows`, issue 38: chapter 12's widget moving its sequence or global batch priced the
    same keys again, ~2-3 ms a search); only the keys not kept yet are priced."""
    _slot_of_deprecated(slot_of)
    try:                                              # (each GPU's rows, by the rest of the key)
        kept = None if slot_of is not None else _kept_dp_rows(model, precision, n_slots)
        own = None if kept is None else _gpu_rows(kept, gpu_list, node_of)
    except TypeError:                                 # (an unhashable argument: priced, not kept)
        own = None
    got = [None] * len(keys) if own is None else [own[k[0]].get(tuple(k[1:])) for k in keys]
    todo = [i for i, row in enumerate(got) if row is None]
    if todo:
        new = _dp_link_rows(model, gpu_list, [keys[i] for i in todo], seq=seq, precision=precision,
                            node_of=node_of, slot_of=slot_of, n_slots=n_slots)
        for i, row in zip(todo, zip(*new)):              # (tuples of floats: the collector untracks them)
            got[i] = row = tuple(map(tuple, row))
            if own is not None:
                own[keys[i][0]][tuple(keys[i][1:])] = row
    return tuple(np.array([row[x] for row in got]).reshape(len(keys), n_slots) for x in range(3))


#: How many (model, recipe, slots) :func:`_kept_dp_rows` keeps rows for.
DP_ROWS_KEPT = 16


@functools.lru_cache(maxsize=DP_ROWS_KEPT)
def _kept_dp_rows(model, precision: str, n_slots: int) -> dict:
    """The dicts of :func:`dp_link_rows`' rows of ``model`` with the recipe ``precision`` and ``n_slots``
    slots, one per (GPU, its node), by the rest of the key ``(tp, ZeRO stage, dp x cp, ZeRO-3 under a
    pipeline)``: ``(seconds per byte, bytes of a pass, latency of one call)``, each a tuple of a float per
    slot, as :func:`_dp_link_rows` made them."""
    return {}


def _dp_link_rows(model, gpu_list, keys, *, seq: int, precision: str, node_of: dict, slot_of=None,
                  n_slots: int) -> tuple:
    """:func:`dp_link_rows`' rows of ``keys``, each priced (its docstring), as three lists (seconds per byte,
    bytes of a pass, latency of one call) of a list per key and a float per slot."""
    per_byte, traffic, latency = ([[0.0] * n_slots for _ in keys] for _ in range(3))
    recipe = RECIPES[precision]
    w_b, g_b = DTYPE_BYTES[recipe.weights], DTYPE_BYTES[recipe.grads]
    by_tp: dict = {}            # tp -> (its layout without dp, a GPU's parameters, the stage's layers)
    sched: dict = {}            # (tp, zero, dp x cp, per domain) -> [(slot, kind, bytes of a pass, calls)]
    for k, (g_, t_, z_, d_, *kept) in enumerate(keys):
        if d_ <= 1:
            continue
        kept = bool(kept and kept[0])           # ZeRO-3 under a pipeline (PIPELINED_FSDP): a pass is a run
        g = gpu_list[g_]
        gl = group_link(g, node_of[g.name], size=d_, stride=t_)
        p_ = _per(gl)
        if (t_, z_, d_, p_, kept) not in sched:
            if t_ not in by_tp:
                # (what communication reads of the layout but zero and dp: neither moves these)
                par = kept_parallel(tp=t_, pp=1, sp=t_ > 1)
                by_tp[t_] = (par, max(stage_params(model, par)), layers_per_stage(model.layers, par)[0])
            par, on_rank, layers = by_tp[t_]
            rows = []
            for name, kind, message, calls, slot in dp_collectives(
                    z_, on_rank, w_b, g_b, 1, par.reshard_after_forward and not kept, layers=layers,
                    pipelined=kept, grad_reduces=grad_reduces(par, 1), bucket_params=dp_bucket_params(d_),
                    buckets=megatron_calls_of(model, t_, 1, 1, z_, dp_bucket_params(d_)) if z_ < 3 else None):
                if calls == 0:
                    continue
                if message * calls > MAX_MEANINGFUL:        # (communication's own error)
                    communication(model, kept_parallel(tp=t_, pp=1, dp=d_, zero=z_, sp=t_ > 1), batch=1,
                                  seq=seq, gpu=g, precision=precision, node=node_of[g.name], _groups=("dp",))
                rows.append((slot_of(name) if slot_of else DP_SLOTS.index(slot), kind,
                             calls * (_kept_wire_factor(kind, d_, p_) * message), calls))
            sched[t_, z_, d_, p_, kept] = rows
        bw, alpha, across = gl.bandwidth_gbps, gl.alpha_s, gl.across
        tr, pb, lat = traffic[k], per_byte[k], latency[k]
        for s, kind, n_bytes, calls in sched[t_, z_, d_, p_, kept]:
            tr[s] += n_bytes
            pb[s] = 1 / (bw * 1e9)
            lat[s] += calls * _kept_latency_steps(kind, d_, across) * alpha / calls
    return per_byte, traffic, latency


def _slot_of_deprecated(slot_of) -> None:
    """Warn for a ``slot_of`` (review24c M5: a collective's window is its own ``slot``, not a function of its
    name); the pricing still uses it, as before, for one release."""
    if slot_of is not None:
        warnings.warn("slot_of= (a collective's window from its name) goes in the next release: each "
                      "collective of zero_traffic.dp_collectives carries its own slot", DeprecationWarning,
                      stacklevel=3)


def dp_unit_rows(model, keys, part: int, *, w_b: float, g_b: float, expert_tp: bool, n_slots: int,
                 slot_of=None, dp_calls) -> np.ndarray:
    """Each key ``(tp, ZeRO stage, group size n, ep, leaving the scale-up domain, the GPUs per domain that set
    its bytes: 1 for a flat ring, :func:`_per`)``'s data-parallel collectives of one stage without a pipeline,
    on a unit link (bandwidth 1, latency 1 per step), as ``(bytes of a pass, latency steps of one
    call)`` per slot (:data:`~llmsizing.collectives.DP_SLOTS`, each collective's own; ``slot_of`` is
    deprecated, as for :func:`dp_link_rows`): the dense
    parameters (``part`` 0) or the routed experts' (1) of :func:`llmsizing.moe.stage_split`. What one
    :func:`~llmsizing.zero_traffic.dp_schedule` and one :func:`~llmsizing.comm.ring_collective` per collective
    and key give, on arrays of keys: the schedule's collectives are read once per ZeRO stage,
    :func:`~llmsizing.network.wire_factor` once per (kind, n, GPUs per domain) and
    :func:`~llmsizing.network.latency_steps` once per (kind, n, leaving) (bytes are linear in the message, so
    its value at 1 byte times the message is the same float), the calls per pass from ``dp_calls``
    (:func:`~llmsizing.plan_pricing._dp_calls`, :func:`~llmsizing.zero_traffic.dp_calls` on arrays). Keys with
    ``n = 1`` send nothing. Issue 35 (DeepSeek-V3 over the catalogue: 1,700 keys)."""
    _slot_of_deprecated(slot_of)
    rows = np.zeros((len(keys), 2, n_slots))
    if not len(keys):
        return rows
    t, z, n, e, x, p = (np.array(c, dtype=np.int64) for c in zip(*keys))
    te = list(zip(t.tolist(), e.tolist()))
    on = {k: _split(model, k[0], 1, None, k[1], expert_tp)[0][part] for k in set(te)}
    on_rank = np.array([on[k] for k in te])
    calls = dp_calls(z, on_rank, np.full(len(keys), model.layers), n)[:, 0]      # k of dp_schedule
    w, g = on_rank * w_b / calls, on_rank * g_b / calls
    base = int(p.max()) + 1
    for zero in set(z.tolist()):
        live = np.flatnonzero((z == zero) & (n > 1))
        if not len(live):
            continue
        # (the distinct (n, GPUs per domain) and (n, leaving) of the stage's rows: for all its collectives)
        nz, xz = n[live], x[live]
        ns, at_n = np.unique(nz * base + p[live], return_inverse=True)
        nx, at_x = np.unique(2 * nz + xz, return_inverse=True)
        ns, nx, at_n, at_x = ns.tolist(), nx.tolist(), at_n.reshape(-1), at_x.reshape(-1)
        # the schedule's collectives (name, kind, message, calls, window): one call of weights (1) or
        # gradients (2)
        for name, kind, probe, _, slot in dp_collectives(zero, 1.0, 1.0, 2.0, 1):   # (one call per pass)
            f = np.array([_kept_wire_factor(kind, v // base, v % base) for v in ns])[at_n]
            s = np.array([_kept_latency_steps(kind, v // 2, bool(v % 2)) for v in nx], dtype=float)[at_x]
            message = (w if probe == 1.0 else g)[live]
            c = calls[live]
            j = slot_of(name) if slot_of else DP_SLOTS.index(slot)
            rows[live, 0, j] += c * (f * message)
            rows[live, 1, j] += c * s * 1.0 / c
    return rows


#: :func:`~llmsizing.network.wire_factor` and :func:`~llmsizing.network.latency_steps` (functions of their
#: arguments alone), kept for :func:`dp_unit_rows`' Python ints, bools and kinds: a search asks the same few
#: dozen (kind, n, GPUs per domain or leaving) once per ZeRO stage, part and collective (issue 35, moe4).
_kept_wire_factor = functools.lru_cache(maxsize=1024)(wire_factor)
_kept_latency_steps = functools.lru_cache(maxsize=1024)(latency_steps)


def _groups(*columns):
    """The distinct rows of integer ``columns`` (each an array, or a list of tuples' worth) as a list of
    tuples, and for each row the index of its group: ``np.unique(..., axis=0, return_inverse=True)`` on one
    packed key, which sorts plain integers instead of records."""
    cols, first, inverse = _group_columns(*columns)
    return list(map(tuple, np.stack(cols, axis=1).tolist())), inverse


def _group_columns(*columns):
    """:func:`_groups` as arrays: each column's values on the distinct rows (in :func:`_groups`' order), the
    first row of each group, and each row's group."""
    cols = [np.asarray(c, dtype=np.int64) for c in columns]
    # each column as its values' ranks among its distinct values (from a table of the values, no sort: a
    # column of ep or dp x cp degrees up to 256 or 65,536 holds a few distinct ones), so that the packed key
    # stays dense; ranks keep the values' order, so the groups come in np.unique's order all the same
    codes, dims = [], []
    for c in cols:
        top = int(c.max()) + 1
        if top > 64 and top <= 4 * len(c) + 65536:
            present = np.zeros(top, dtype=bool)
            present[c] = True
            rank = np.cumsum(present) - 1
            c, top = rank[c], int(rank[-1]) + 1
        codes.append(c)
        dims.append(top)
    key = np.ravel_multi_index(codes, dims)
    n, size = len(key), int(np.prod(dims, dtype=object))
    if size > 4 * n + 1024:                # (a sparse key: sort it)
        _, first, inverse = np.unique(key, return_index=True, return_inverse=True)
        return [c[first] for c in cols], first, inverse.reshape(-1)
    # np.unique's answer from a table of every possible key, without sorting (issue 35: ~0.2 ms instead of
    # 3-6 ms for 43k rows): each key's first row, the keys present in increasing order, their rank
    at = np.full(size, n, dtype=np.intp)
    np.minimum.at(at, key, np.arange(n, dtype=np.intp))
    present = at < n
    first = at[present]
    return [c[first] for c in cols], first, (np.cumsum(present) - 1)[key]


def _rerun_class(rc: str) -> str:
    """Which of the forward's TP and CP collectives and ring attention ``rc`` reruns: ``"full"`` all of them,
    ``"none"`` and ``"selective"`` none; torchtitan's op SAC modes each their own (comm.communication: its
    Ulysses all-to-alls, and without SDPA's output its ring)."""
    if rc in OP_SAC_MODES:
        return rc
    return "full" if rc == "full" else "none"
