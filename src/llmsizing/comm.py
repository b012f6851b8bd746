"""Communication per training step: which collectives a layout runs, how many bytes each GPU sends, over
which link, and how long that takes (chapters 7 and 8; measured against ``torch.distributed`` in chapter 9).

Sources:

* ring collectives (NCCL's algorithms; Patarasuk & Yuan 2009): an all-reduce of ``S`` bytes over ``N`` GPUs
  sends ``2 (N - 1) / N x S`` bytes from every GPU, a reduce-scatter or an all-gather ``(N - 1) / N x S``
  (``S`` is the full, unsharded buffer);
* data parallelism and ZeRO (Rajbhandari et al. 2020, Sec. 7): DDP all-reduces the gradients once per step
  (``2 Psi``); ZeRO-1/2 reduce-scatter the gradients and all-gather the updated weights (the same ``2 Psi``);
  ZeRO-3/FSDP all-gathers the weights again in the forward and the backward (``3 Psi``, 1.5x DDP);
* tensor parallelism (Shoeybi et al. 2019, Sec. 3): two all-reduces of the ``b s h`` activations per layer in
  the forward and two in the backward; with sequence parallelism (Korthikanti et al. 2022, Sec. 4.2.2) each
  becomes an all-gather plus a reduce-scatter of the same volume; full recomputation reruns the forward's;
* pipeline parallelism (Narayanan et al. 2021): one ``b s h`` activation sent forward and one gradient sent
  back per micro-batch and stage boundary (divided by ``tp`` with Megatron-LM's scatter/gather
  optimisation, here when ``sp`` is on), ``v`` times as many with ``v`` interleaved chunks;
* context parallelism (Liu et al. 2023, ring attention; Transformer Engine's ``context_parallel.py``; Dubey et
  al. 2024, Sec. 3.3.2): per layer and micro-batch, each rank's K, V chunk travels ``cp - 1`` hops of a ring
  in the forward and K, V with their gradients ``cp - 1`` hops in the backward (``"p2p"``), or K, V are
  all-gathered in the forward and again in the backward and their gradients reduce-scattered
  (``"all_gather"``): ``3 (cp - 1)`` chunks either way. The gradients are then reduced over ``dp x cp`` GPUs.

Placement follows Megatron-LM's rank order (tensor-parallel ranks adjacent, then context-parallel, then
data-parallel, then pipeline), and each group's link, achievable bandwidth and latency come from the network
model of :mod:`llmsizing.network` (nodes in ``data/nodes.csv``; a group that spans nodes shares the node's
NICs with the other groups in it). A collective costs ``steps x alpha + bytes / bandwidth``.
:class:`Communication` reports every collective in full; what hides behind compute is
:func:`~llmsizing.layouts.step_time`'s business, group by group. The data-parallel schedule (DDP's and
ZeRO's collectives, their buckets and FSDP units) and ZeRO-Offload's host traffic are
:mod:`llmsizing.zero_traffic`'s; their names are importable from here too.
"""

from __future__ import annotations

from dataclasses import dataclass

from ._validate import (MAX_MEANINGFUL, check_bool, check_choice, check_fraction, check_int, check_number,
                        renamed)
from .all_to_all import check_dispatcher, node_limit, ulysses_collectives
from .catalog import MIN_GPU_SPEED, get_gpu, resolve_model
from .flops import stage_attention_flops_per_token, stage_flops_per_token
from .hardware import kernel_efficiency as default_efficiency
from .kernels import compute_seconds, rates
from .model import Model
from .moe import expert_data_parallel, stage_split
# ring_bytes: comm's since chapter 7, now network's (still importable from here)
from .network import (LATENCY_MODELS, Collective, GroupLink, Node, _call_latency_s, get_node, group_link,
                      latency_steps, link_wire_factor, ring_bytes)  # noqa: F401
from .parallel import (OP_SAC_MODES, OP_SAC_SDPA_SAVED, RECOMPUTE_MODES, Parallel, check_recompute_layers,
                       layers_per_stage, recomputed_layers, resolve_parallel)
from .pipeline_schedule import dualpipe_rank_mean, grad_reduces
from .precision import DTYPE_BYTES, RECIPES, check_recipe
from .zero_traffic import (CPU_ADAM_BYTES_PER_PARAM, DP_BUCKET_MIN_PARAMS,  # noqa: F401
                           DP_BUCKET_PARAMS_PER_RANK, FSDP_ROOT_UNITS, FSDP_UNIT_LAYERS, GPUS_PER_HOST,
                           HOST_LINK_GBPS, HOST_MEMORY_GBPS, OffloadTime, dp_bucket_params, dp_calls,
                           dp_collectives, dp_schedule, fsdp_root_params, megatron_buckets, offload_time)

#: Columns of :meth:`Communication.to_frame`.
COMM_COLUMNS = ("collective", "group", "group_size", "link", "calls", "message_bytes", "bytes_per_gpu",
                "bandwidth_gbps", "latency_s", "time_s")


@dataclass(frozen=True)
class Communication:
    """Every collective of one training step on the most loaded GPU (:func:`communication`)."""

    collectives: tuple
    parallel: Parallel
    node: Node | None = None

    @property
    def bytes_per_gpu(self) -> float:
        return sum(c.bytes_per_gpu for c in self.collectives)

    @property
    def time_s(self) -> float:
        """Total time with no overlap (an upper bound on what communication adds to a step)."""
        return sum(c.time_s for c in self.collectives)

    def by_group(self) -> dict[str, float]:
        """Seconds per step by parallel group (``"dp"``, ``"tp"``, ``"pp"``)."""
        out: dict[str, float] = {}
        for c in self.collectives:
            out[c.group] = out.get(c.group, 0.0) + c.time_s
        return out

    def to_frame(self):
        import pandas as pd

        rows = [{k: getattr(c, k) for k in COMM_COLUMNS} for c in self.collectives]
        return pd.DataFrame(rows, columns=list(COMM_COLUMNS)).set_index("collective")


def ring_collective(name: str, group: str, n: int, kind: str, message: float, calls: int, gl,
                    slot: str | None = None, *, protocols: bool = False,
                    latency: str = "flat") -> "Collective":
    """One collective of ``calls`` calls of a ``message``-byte buffer over ``n`` GPUs on the link ``gl``
    (:class:`~llmsizing.network.GroupLink`): :func:`~llmsizing.network.link_wire_factor` bytes per call at its
    bandwidth (a flat ring's, or hierarchical for a group with several GPUs per node: issue 34), and
    :func:`~llmsizing.network.latency_steps` latencies per call. ``slot``: a data-parallel collective's window
    (:data:`~llmsizing.collectives.DP_SLOTS`, from :func:`~llmsizing.zero_traffic.dp_collectives`).

    ``protocols=True`` (issue 34, phys47; default ``False``, the single alpha-beta line every training range
    was measured with): each call on the cheaper of the link class's two fitted lines, NCCL's LL protocol
    (the latency ``alpha_s``, the bandwidth ``small_bandwidth_gbps``) or LL128/Simple (``large_alpha_s``, the
    full bandwidth), as :func:`~llmsizing.network.collective_time_s` prices serving's (the same seconds a
    call); a link class without a fitted log keeps the single line. Pre-registered measurement (phys47,
    ``tools/physics_ab.py``): on ``training-layout`` and ``moe-layout`` by their nested
    leave-one-source-out checks, every fitted parameter refit in fold; adopt only if the out-of-source
    coverage stays >= 75% and the median width does not grow. Measured (phys47, 2026-12-05,
    ``tools/physics_ab.py``): training-layout 87.4% -> 86.5%, width 1.529 -> 1.570 (FP8 75% -> 62.5%);
    moe-layout width 1.95 -> 7.88, all of it OLMoE (ZeRO-3 over 256 GPUs: 3 x 68 calls a step of 255 ring
    steps at the network log's LL128/Simple 29.6 us instead of 4.4 us, +1.3 s on a 0.67 s step): not adopted.
    The network's two lines are one two-node log's (16 ranks), extrapolated over ``n - 1`` steps; NCCL's
    tuner charges the network's latency on the inter-node steps only (``src/graph/tuning.cc``:
    ``nInterSteps = nNodes - 1`` for a ring all-gather, the other steps at the intra-node latency). On the
    scale-up links alone (the network kept on the single line; not pre-registered): width 1.529 -> 1.529,
    coverage 87.4% -> 85.6%, moe-layout width 1.95 -> 1.98.

    ``latency="nccl"`` (issue 34, net47; default ``"flat"``, today's): a ring leaving the node priced as
    NCCL's tuner does (``network._call_latency_s``, :mod:`llmsizing.nccl_steps`), on both lines."""
    protocols = check_bool("protocols", protocols)
    if check_choice("latency", latency, LATENCY_MODELS) == "nccl":
        return _ring_collective_nccl(name, group, n, kind, message, calls, gl, slot, protocols)
    f, steps = link_wire_factor(kind, n, gl), latency_steps(kind, n, gl.across)
    bw, alpha = gl.bandwidth_gbps, gl.alpha_s
    if protocols and gl.small_bandwidth_gbps is not None and gl.large_alpha_s is not None:
        ll = steps * alpha + f * message / (gl.small_bandwidth_gbps * 1e9)
        simple = steps * gl.large_alpha_s + f * message / (bw * 1e9)
        bw, alpha = (gl.small_bandwidth_gbps, alpha) if ll < simple else (bw, gl.large_alpha_s)
    return Collective(name, group, n, gl.link, calls, message, calls * (f * message), bw,
                      calls * steps * alpha, slot)


def _ring_collective_nccl(name, group, n, kind, message, calls, gl, slot, protocols):
    f, bw = link_wire_factor(kind, n, gl), gl.bandwidth_gbps
    lat = _call_latency_s(kind, n, gl, False, "nccl")
    if protocols and gl.small_bandwidth_gbps is not None and gl.large_alpha_s is not None:
        ll = lat + f * message / (gl.small_bandwidth_gbps * 1e9)
        big = _call_latency_s(kind, n, gl, True, "nccl")
        if big + f * message / (bw * 1e9) <= ll:
            lat = big
        else:
            bw = gl.small_bandwidth_gbps
    return Collective(name, group, n, gl.link, calls, message, calls * (f * message), bw, calls * lat, slot)


GROUP_STRIDES = ("tp", "cp", "dp", "pp")


def group_network(parallel: Parallel, gpu, *, node=None, gpus_per_node: int | None = None,
                  inter_node_gbps: float | None = None, _groups: tuple | None = None) -> dict[str, GroupLink]:
    """Each parallel group's link (:class:`~llmsizing.network.GroupLink`: achievable bandwidth, latency,
    whether it leaves the node). Megatron-LM's order puts the ``tp`` ranks of a group next to each other, then
    ``cp`` (``tp`` apart), then ``dp`` (``tp x cp`` apart), then ``pp`` (``tp x cp x dp`` apart);
    :func:`~llmsizing.network.group_link` does the rest. The ``"dp"`` link is that of the ``dp x cp`` GPUs
    that reduce the gradients together (``tp`` apart; the ``dp`` ranks alone without context parallelism); the
    ``"cp"`` key is there only when ``cp > 1``.
    ``node`` is a name in ``data/nodes.csv`` (default: the GPU's); ``gpus_per_node`` and ``inter_node_gbps``
    override it (:func:`~llmsizing.network.get_node`). ``_groups``: only these keys (the planner's)."""
    par = resolve_parallel(parallel)
    g = get_gpu(gpu)
    nd = get_node(node, g, gpus_per_node=gpus_per_node, inter_node_gbps=inter_node_gbps)
    # (size, stride) of each group; expert parallelism: Megatron-Core's expert grid etp-ep-edp-pp
    groups = {"tp": (par.tp, 1), "dp": (par.dp_cp, par.tp), "pp": (par.pp, par.tp * par.dp_cp),
              "cp": (par.cp, par.tp), "ep": (par.ep, par.etp)}
    return {k: group_link(g, nd, size=n, stride=stride) for k, (n, stride) in groups.items()
            if (k in ("tp", "dp", "pp") or n > 1) and (_groups is None or k in _groups)}


def group_links(parallel: Parallel, gpu, *, gpus_per_node: int | None = None,
                inter_node_gbps: float | None = None, node=None) -> dict[str, tuple[str, float]]:
    """Which link each parallel group rides on and the one-way bandwidth per GPU it reaches, GB/s:
    ``{"tp": (link, gbps), "dp": ..., "pp": ...}`` (:func:`group_network` without the latency). A group inside
    a node rides the GPU's own link; one that spans nodes shows ``"network"``, at ``k`` NICs' worth per GPU
    for ``k`` of its GPUs per node."""
    return {k: (v.link, v.bandwidth_gbps) for k, v in
            group_network(parallel, gpu, node=node, gpus_per_node=gpus_per_node,
                          inter_node_gbps=inter_node_gbps).items()}


def experts_apart_of(ep, etp, tp):
    """:func:`experts_apart`'s rule on plain values, ``ep > 1 or etp != tp``, written with ``|`` and ``!=``
    so that it reads ints (a bool) or arrays of layouts (an array of bools, the planner's
    :mod:`llmsizing.plan_moe`): one rule in one place (review24b M3)."""
    return (ep > 1) | (etp != tp)


def experts_apart(parallel: Parallel) -> bool:
    """Whether a mixture of experts' routed experts reduce their gradients (and gather their ZeRO shards) in
    collectives of their own, over the expert-data-parallel group, rather than in the dense parameters' own:
    Megatron-Core gives them a buffer of their own (``is_expert_parallel``) "when expert-parallelism > 1,
    expert-tensor-parallelism != tensor-parallelism" (``group_params_for_buffers``,
    megatron/core/distributed/param_and_grad_buffer.py); without either, both are one group of ranks and one
    buffer, so one collective per bucket (and FSDP's unit of a block gathers its experts with its attention;
    torchtitan wraps the experts apart only when they are sharded over ep > 1).

    This is Megatron-Core's rule, applied whatever the stack. DeepSpeed-MoE differs: its ``Experts``
    constructor (deepspeed/moe/experts.py) sets ``param.allreduce = False`` and an expert ``group_name`` on
    every expert parameter whatever ``ep``, so it reduces its experts apart even at ``ep = 1``. The bytes are
    the same either way (at ``ep = 1`` with ``etp = tp`` the expert-data-parallel group is the dense one);
    only the calls differ, one more set of them (the experts' buckets, under ZeRO-3 their units) and their
    latency steps, which this rule leaves out for a DeepSpeed run at ``ep = 1``: a small share of the step
    where buckets are large (the Phi-3.5-MoE and Granite rows barely moved when the rule came in, exp24,
    Dec 2026), more under ZeRO-3's per-unit calls (OLMoE's one-sequence micro-batches against its dense twin,
    tests/test_moe_kernel_evidence.py). Read off the layout, never the model's name
    (:func:`experts_apart_of`)."""
    return bool(experts_apart_of(parallel.ep, parallel.etp, parallel.tp))


def communication(model: Model | str, parallel: Parallel | None = None, *, batch: int, seq: int, gpu,
                  gpus_per_node: int | None = None, inter_node_gbps: float | None = None,
                  precision: str = "bf16-mixed", grad_accum: int = 1, recompute: str = "none",
                  node=None, recompute_layers: int | None = None, max_nodes: int | str | None = None,
                  _groups: tuple | None = None, _links: dict | None = None,
                  dispatcher: str = "alltoall", protocols: bool = False) -> Communication:
    """The collectives of one training step, per GPU, for the most loaded pipeline stage.

    ``batch`` is the micro-batch (sequences), ``grad_accum`` the micro-batches per step (a pipeline's
    micro-batches), ``precision`` a recipe of :data:`~llmsizing.precision.RECIPES`: gradients are reduced in
    the recipe's gradient dtype, weights gathered in its weight dtype, activations sent in its working dtype
    (16-bit for the mixed recipes). The links come from ``node`` (default: the GPU's node in
    ``data/nodes.csv``; ``gpus_per_node`` and ``inter_node_gbps``, one way per GPU, override it: see
    :func:`group_network`).

    Per step:

    * DP, ``zero=0``: one all-reduce of this GPU's gradients (DDP buckets them and reduces once per step,
      skipping the accumulation steps);
    * ``zero=1``: one reduce-scatter of the gradients + one all-gather of the updated weights;
    * ``zero=2``: the gradients are reduce-scattered after every micro-batch (the full gradient is never
      kept), then one all-gather of the weights;
    * ``zero=3``: per micro-batch, an all-gather of the weights in the forward and again in the backward (the
      forward's only with ``reshard_after_forward=False``, once per step with a pipeline; all but the root
      unit's with ``None``, torch's default), and a
      reduce-scatter of the gradients, each one call per layer of the stage and one for the root unit
      (:data:`~llmsizing.zero_traffic.FSDP_UNIT_LAYERS`, :data:`~llmsizing.zero_traffic.FSDP_ROOT_UNITS`);
    * DDP's and ZeRO-1/2's collectives run one call per gradient bucket of Megatron-Core's layout
      (:func:`~llmsizing.zero_traffic.megatron_buckets`: buckets of
      :func:`~llmsizing.zero_traffic.dp_bucket_params` closed at parameter ends, on pipeline rank 0): every
      call, here as for TP and CP, pays its own latency;
    * TP: per micro-batch and layer, 2 all-reduces of ``b s h`` activations in the forward and 2 in the
      backward (2 more with full recomputation); with ``sp`` all-gathers and reduce-scatters instead (same
      bytes, twice the calls), plus 2 all-gathers per layer in the backward where Megatron-LM gathers each
      column-parallel layer's input again for its weight gradient (``tensor_parallel/layers.py``);
    * PP: per micro-batch, the activation sent to the next stage and the gradient sent back (``v`` times
      each with interleaving), counted for a middle stage (it both sends and receives);
    * CP (``parallel.cp > 1``), per micro-batch and layer, in chunks ``c = b (s / cp) 2 kv_heads_per_rank
      head_dim`` of the working dtype: ``"p2p"`` sends ``cp - 1`` chunks of K, V in the forward (again in the
      recomputed forward) and ``cp - 1`` of K, V with dK, dV in the backward (Transformer Engine sends K, V on
      the first hop, both on the middle ones, dK, dV on the last: ``2 (cp - 1)`` chunks); ``"all_gather"``
      gathers ``cp x c`` in the forward and the backward and reduce-scatters dK, dV; ``"a2a"`` (Ulysses)
      runs 2 all-to-alls forward and 2 backward (:func:`~llmsizing.all_to_all.ulysses_collectives`). The
      data-parallel collectives run over ``dp x cp`` GPUs, and every activation above is of ``s / cp`` tokens.
    * EP (``parallel.ep > 1``, a mixture of experts): per MoE layer and micro-batch the dispatch and combine
      all-to-alls, forward and backward, with DeepSeek-V3's node limit ``max_nodes`` and the token
      ``dispatcher`` (``"alltoall"`` or ``"deepep"``: :func:`llmsizing.moe.ep_all_to_all`); the routed
      experts' gradients are reduced, and their ZeRO shards
      gathered, over the ``edp = tp x cp x dp / (etp x ep)`` expert-data-parallel GPUs (rows marked
      "(experts)"), the rest over ``dp x cp``, when they have buffers of their own (:func:`experts_apart`);
      otherwise with the rest, one collective.

    The embedding's and loss's small tensor-parallel all-reduces are left out (one ``b s h`` each way per
    micro-batch against ``4 L`` of them). With partial recomputation (``recompute_layers``, see
    :func:`~llmsizing.memory.training_memory`) only the recomputed layers of the stage run their forward's
    TP and CP collectives again. Taught in chapters 7 and 8; measured in chapter 9. ``_groups``: the groups
    whose collectives to build (default all; the planner asks for a few, issue 35), each the same rows;
    ``_links``: their links (default :func:`group_network`'s; the planner's hold arrays of links).
    ``protocols``: the DP, TP and CP collectives by NCCL protocol (:func:`ring_collective`; default
    ``False``, the single line); the pipeline's and the ring attention's send/recv and the all-to-alls keep
    the single line."""
    from .memory import stage_params

    model = resolve_model(model, moe=True)
    batch, seq = check_int("batch", batch), check_int("seq", seq)
    par = resolve_parallel(parallel, model, seq=seq)
    m = check_int("grad_accum", grad_accum)
    protocols = check_bool("protocols", protocols)
    recipe = RECIPES[check_recipe("precision", precision)]
    check_choice("recompute", recompute, RECOMPUTE_MODES)
    if recompute in OP_SAC_MODES:
        from .op_sac import _check_op_sac_tp

        _check_op_sac_tp(model, recompute, par.tp, par.sp)
    n_rc = check_recompute_layers(recompute, recompute_layers, model.layers, par)
    max_nodes, dispatcher = node_limit(max_nodes), check_dispatcher(dispatcher).name
    nd = get_node(node, get_gpu(gpu), gpus_per_node=gpus_per_node, inter_node_gbps=inter_node_gbps)
    links = _links or group_network(par, gpu, node=nd, _groups=_groups)
    w_b, g_b = DTYPE_BYTES[recipe.weights], DTYPE_BYTES[recipe.grads]
    act_b = 2.0 if recipe.autocast else DTYPE_BYTES[recipe.weights]
    want = (lambda group: True) if _groups is None else _groups.__contains__
    reduced = (par.dp_cp > 1 or model.is_moe) and want("dp")     # (a dense model's dp x cp = 1: nothing)
    on_rank = max(stage_params(model, par)) if reduced else 0.0
    dp_parts = [("", par.dp_cp, on_rank, None, None)] if reduced else []
    if model.is_moe and reduced and experts_apart(par):   # ---- mixture of experts: expert gradients over edp
        split = stage_split(model, par)
        i = max(range(par.pp), key=lambda j: split[j]["dense"] + split[j]["experts"])
        edp = expert_data_parallel(par)
        dp_parts = [("", par.dp_cp, split[i]["dense"], None, "dense"),
                    (" (experts)", edp, split[i]["experts"],
                     group_link(get_gpu(gpu), nd, size=edp, stride=par.etp * par.ep), "experts")]
    out = []

    def too_large(name, message, calls=1):  # the error names what the caller gave, not an internal buffer
        source = (f"the model's {on_rank:.4g} parameters on one GPU" if name.startswith(("DP", "ZeRO"))
                  else f"batch x seq = {batch:,} x {seq:,} tokens of hidden size {model.hidden:,}")
        return ValueError(f"{name}: {calls:,} message(s) of {message:.4g} bytes per step ({source}) are "
                          f"beyond {MAX_MEANINGFUL:,} bytes")

    def add(name, group, n, kind, message, calls, gl=None, slot=None):
        if n == 1 or calls == 0 or not want(group):
            return
        if message * calls > MAX_MEANINGFUL:   # per step: bucketed and per-layer calls split one volume
            raise too_large(name, message, calls)
        out.append(ring_collective(name, group, n, kind, message, calls, gl or links[group], slot,
                                   protocols=protocols))

    stages = layers_per_stage(model.layers, par)
    most = max(range(par.pp), key=lambda i: stages[i])      # the most loaded stage (the first of the largest)
    layers = stages[most]
    # torch's default keeps FSDP's root unit (reshard_after_forward=None): its parameters, for the backward
    root = fsdp_root_params(model, par.tp) if par.reshard_after_forward is None and par.zero == 3 else None
    for tag, dp, on_rank, gl, part in dp_parts:               # gradients are reduced over dp x cp
        bucket = dp_bucket_params(par.dp_cp)   # Megatron-Core's buckets, laid out; the experts' buffer takes
        # the dense group's size too (DistributedDataParallel sets one bucket_size from dp x cp for both)
        k = megatron_buckets(model, par, part=part, bucket_params=bucket) if par.zero < 3 else None
        for name, kind, message, calls, slot in dp_collectives(
                par.zero, on_rank, w_b, g_b, m, par.reshard_after_forward, layers=layers,
                pipelined=par.pp > 1, grad_reduces=grad_reduces(par, m), bucket_params=bucket,
                root_params=root if not tag else 0.0, buckets=k):          # (the root: no expert's)
            add(name + tag, "dp", dp, kind, message, calls, gl, slot)       # (its window: data, M5)

    local = seq // par.cp                                     # this GPU's tokens of each sequence
    act = act_b * batch * local * model.hidden                # one b x s x h activation (s / cp tokens)
    # forward passes of the stage's layers: once, and again for each recomputed layer
    fwd_layers = (layers + recomputed_layers(model.layers, par, n_rc)[most] if n_rc is not None
                  else layers * (2 if recompute == "full" else 1))
    # torchtitan's op SAC (op_sac.OP_SAC_TP_SOURCE) reruns what its policy does not save: with sp the two
    # all-gathers (the backward's 4 above count them: Megatron-LM's weight-gradient re-gathers; the saved
    # reduce-scatters are not rerun), without sp wo's all-reduce (w2's output is the block's last, not rerun
    # by the checkpoint's early stop); its ring reruns only where SDPA's output is not saved; Ulysses'
    # all-to-alls rerun (SDPA's backward needs the gathered Q, K, V and wo's rerun the gathered output)
    tp_fwd, cp_fwd, a2a_fwd = fwd_layers, fwd_layers, fwd_layers
    if recompute in OP_SAC_MODES:
        tp_fwd = layers if par.sp else layers * 3 / 2
        cp_fwd = layers * (1 if OP_SAC_SDPA_SAVED[recompute] else 2)
        a2a_fwd = 2 * layers
    if par.sp:
        add("SP all-gather (forward)", "tp", par.tp, "all-gather", act, 2 * fwd_layers * m)
        add("SP reduce-scatter (forward)", "tp", par.tp, "reduce-scatter", act, 2 * fwd_layers * m)
        # the backward's conjugates (2 + 2), plus Megatron-LM's re-gather of each column-parallel layer's
        # input for its weight gradient (the forward's gathered input is not kept, to save memory)
        add("SP all-gather (backward)", "tp", par.tp, "all-gather", act, 4 * layers * m)
        add("SP reduce-scatter (backward)", "tp", par.tp, "reduce-scatter", act, 2 * layers * m)
    else:
        add("TP all-reduce (forward)", "tp", par.tp, "all-reduce", act, round(2 * tp_fwd * m))
        add("TP all-reduce (backward)", "tp", par.tp, "all-reduce", act, 2 * layers * m)

    if par.cp > 1 and want("cp"):
        cp, gl = par.cp, links["cp"]
        # one rank's K, V
        chunk = act_b * batch * local * 2 * max(model.kv_heads / par.tp, 1) * model.head_dim
        if par.cp_comm == "p2p":
            hops = (cp - 1) * layers * m
            for name, message, calls in (("CP ring send/recv K,V (forward)", chunk,
                                          (cp - 1) * cp_fwd * m),
                                         ("CP ring send/recv K,V and dK,dV (backward)", 2 * chunk, hops)):
                if message > MAX_MEANINGFUL:
                    raise too_large(name, message)
                out.append(Collective(name, "cp", cp, gl.link, calls, message, calls * message,
                                      gl.bandwidth_gbps, calls * gl.alpha_s))
        elif par.cp_comm == "a2a":                          # Ulysses (llmsizing.all_to_all)
            out += ulysses_collectives(model, par, batch=batch, seq=seq, gpu=get_gpu(gpu), node=nd,
                                       fwd_layers=a2a_fwd, layers=layers, grad_accum=m, act_bytes=act_b)
        else:
            add("CP K,V all-gather (forward)", "cp", cp, "all-gather", cp * chunk, cp_fwd * m)
            add("CP K,V all-gather (backward)", "cp", cp, "all-gather", cp * chunk, layers * m)
            add("CP dK,dV reduce-scatter (backward)", "cp", cp, "reduce-scatter", cp * chunk, layers * m)

    if par.pp > 1 and want("pp"):
        gl = links["pp"]
        p2p = act / (par.tp if par.sp else 1)
        if p2p > MAX_MEANINGFUL:
            raise too_large("PP send/recv", p2p)
        calls = 2 * m * par.virtual_stages                   # one activation out, one gradient back
        out.append(Collective("PP send/recv (activations and their gradients)", "pp", 2, gl.link, calls, p2p,
                              calls * p2p, gl.bandwidth_gbps, calls * gl.alpha_s))
    if par.ep > 1 and want("ep"):             # ---- expert parallelism's all-to-all (llmsizing.moe)
        from .moe import ep_all_to_all

        out += ep_all_to_all(model, par, batch=batch, seq=seq, gpu=get_gpu(gpu), node=nd, grad_accum=m,
                             precision=precision, recompute=recompute, max_nodes=max_nodes,
                             dispatcher=dispatcher)
    return Communication(tuple(out), par, nd)


def step_compute_time_s(model: Model | str, parallel: Parallel | None = None, *, batch: int, seq: int, gpu,
                        grad_accum: int = 1, recompute: str = "none", kernel_efficiency: float | None = None,
                        dtype: str = "bf16", mfu: float | None = None,
                        recompute_layers: int | None = None, attention_kernel: str | None = None,
                        mtp_depth: int = 0, comm_sms: int = 0, load_skew: float | None = None,
                        schedule: str = "1f1b", attention_seq: int | None = None) -> float:
    """Seconds of computing per step on a GPU of the slowest pipeline stage (the one whose GEMMs, attention,
    memory-bound and MoE kernels take longest together, not the one with the most FLOPs): its training FLOPs
    (:func:`~llmsizing.flops.stage_flops_per_token`, recomputation included: hardware FLOPs) for
    ``batch x seq x grad_accum`` tokens, over its ``tp x cp`` GPUs, as kernels run them
    (:mod:`llmsizing.kernels`, issue 34): the Linear layers at the dense peak in ``dtype`` (``"bf16"``,
    ``"fp16"`` or ``"fp8"``; ``"bf16"`` on a GPU without BF16, the V100, is its FP16 rate:
    :func:`~llmsizing.hardware.dense_tflops`) x ``kernel_efficiency`` x their shape's GEMM efficiency
    (:func:`~llmsizing.kernels.layer_gemm_efficiency`); the attention core
    (:func:`~llmsizing.flops.stage_attention_flops_per_token`) as causal kernels compute it, half the score
    matrix, at the attention kernels' efficiency (:func:`~llmsizing.kernels.attention_efficiency`) of the
    BF16 peak under FP8 recipes (which quantise the Linear layers only); ``attention_kernel`` names the
    attention kernel (:func:`~llmsizing.kernels.attention_kernels`; default the GPU generation's).

    ``kernel_efficiency`` defaults to the calibrated value of the GPU's generation
    (:func:`~llmsizing.hardware.kernel_efficiency`): the scale of the GEMM-shape curve, what a step loses
    besides the GEMMs' shape and the memory-bound kernels it prices apart (launches, what is not counted).
    The norms, residual adds, activation, rotary embedding and loss are priced on HBM bandwidth by their bytes
    (:mod:`llmsizing.pointwise`, issue 35). It is what the kernels reach while they run,
    not the run's MFU: the bubble and the exposed communication come on top
    (:func:`~llmsizing.layouts.step_time`), and the MFU is what is left
    (:attr:`~llmsizing.layouts.StepTime.mfu`). ``mfu=`` is the old name of ``kernel_efficiency``
    (deprecated).
    ``recompute_layers``: partial recomputation (:func:`~llmsizing.memory.training_memory`). A mixture of
    experts computes its active FLOPs on each stage's dense and MoE layers
    (:func:`llmsizing.moe.moe_stage_flops`, with ``mtp_depth`` multi-token-prediction modules on the last
    stage), its grouped expert GEMMs at their rows' shape, and adds its routing kernels on HBM bandwidth and
    the routed work the load skew puts on the slowest rank (:mod:`llmsizing.moe_time`; ``load_skew`` default
    :func:`~llmsizing.moe_time.load_skew` of the model's routing and ``ep``). ``comm_sms`` SMs kept by
    communication kernels (DeepSeek-V3: 20 of 132) slow all of it by ``1 / (1 - share)``; with
    ``schedule="dualpipe"`` a rank's work is the mean of the two stages it holds (issue 35).
    ``attention_seq`` (default ``seq``): the length whose attention a token pays, when a ``seq``-token row
    packs shorter sequences under a document mask (varlen FlashAttention's ``cu_seqlens``, RL trainers'
    packing: :func:`llmsizing.rl_trainer.packed_attention_seq`); the GEMMs keep the row's tokens. Every
    stage's seconds: :func:`stage_compute_times_s` (this is their largest)."""
    return max(stage_compute_times_s(
        model, parallel, batch=batch, seq=seq, gpu=gpu, grad_accum=grad_accum, recompute=recompute,
        kernel_efficiency=kernel_efficiency, dtype=dtype, mfu=mfu, recompute_layers=recompute_layers,
        attention_kernel=attention_kernel, mtp_depth=mtp_depth, comm_sms=comm_sms, load_skew=load_skew,
        schedule=schedule, attention_seq=attention_seq))


def stage_compute_times_s(model: Model | str, parallel: Parallel | None = None, *, batch: int, seq: int, gpu,
                          grad_accum: int = 1, recompute: str = "none",
                          kernel_efficiency: float | None = None, dtype: str = "bf16",
                          mfu: float | None = None,
                          recompute_layers: int | None = None, attention_kernel: str | None = None,
                          mtp_depth: int = 0, comm_sms: int = 0, load_skew: float | None = None,
                          schedule: str = "1f1b", attention_seq: int | None = None) -> tuple:
    """Every pipeline stage's seconds of computing per step on one of its GPUs, first stage first (with
    ``schedule="dualpipe"`` every rank's), as :func:`step_compute_time_s` prices the slowest of them (the same
    arguments; its value is their ``max``). The 1F1B fill and drain run through each stage once at that
    stage's own speed (:func:`~llmsizing.pipeline_schedule.unbalanced_1f1b_makespan`; phi39, issue 35)."""
    model = resolve_model(model, moe=True)
    batch, seq, m = check_int("batch", batch), check_int("seq", seq), check_int("grad_accum", grad_accum)
    par = resolve_parallel(parallel, model, seq=seq)
    eff = renamed("kernel_efficiency", kernel_efficiency, "mfu", mfu)
    g = get_gpu(gpu)
    dtype = check_choice("dtype", dtype, ("bf16", "fp16", "fp8", "fp4"))
    eff = default_efficiency(g, dtype) if eff is None else check_fraction("kernel_efficiency", eff)
    # each of the tp x cp GPUs of a stage does 1 / (tp cp) of its work: with causal load balancing every
    # context-parallel rank gets the same share of the attention (two chunks, one early, one late)
    att = seq if attention_seq is None else check_int("attention_seq", attention_seq, maximum=seq)
    kw = dict(seq=att, recompute=recompute, recompute_layers=recompute_layers)   # seq: attention only
    if model.is_moe:                         # ---- mixture of experts: active FLOPs per stage (llmsizing.moe)
        from .moe import moe_stage_flops

        stages = moe_stage_flops(model, par, mtp_depth=mtp_depth, **kw)
    else:
        stages = stage_flops_per_token(model, par, **kw)
    full = stage_attention_flops_per_token(model, par, **kw)
    causal = stage_attention_flops_per_token(model, par, causal=True, **kw)
    if check_choice("schedule", schedule, ("1f1b", "zb1p", "dualpipe")) == "dualpipe":
        # DualPipe: rank i holds stages i and pp-1-i and runs half the micro-batches through each
        # (deepseek-ai/DualPipe; arXiv:2412.19437 Sec. 3.2.1), so a rank's work is the pair's mean
        stages, full, causal = (dualpipe_rank_mean(x) for x in (stages, full, causal))
    per_gpu = batch * seq * m / (par.tp * par.cp)
    # the Linear layers at the shape's GEMM efficiency x the calibrated scale; the attention core as causal
    # kernels run it (half the score matrix, at the attention kernels' efficiency, in BF16 under FP8 recipes)
    gemm_rate, attention_rate = rates(model, g, tp=par.tp, cp=par.cp, batch=batch, seq=seq, dtype=dtype,
                                      kernel_efficiency=eff, attention_kernel=attention_kernel, ep=par.ep)
    if att != seq:                           # packed rows: the attention kernel at its sequences' length
        attention_rate = rates(model, g, tp=par.tp, cp=par.cp, batch=1, seq=att, dtype=dtype,
                               kernel_efficiency=eff, attention_kernel=attention_kernel, ep=par.ep)[1]
    hbm = g.memory_bandwidth_gbps * 1e9
    # ---- the memory-bound kernels of every layer (norms, residual adds, activation, rotary, loss) on HBM
    from .pointwise import pointwise_seconds, stage_pointwise_bytes_per_token

    pw = stage_pointwise_bytes_per_token(model, par, recompute=recompute, recompute_layers=recompute_layers,
                                         mtp_depth=mtp_depth if model.is_moe else 0)
    if schedule == "dualpipe":
        pw = dualpipe_rank_mean(pw)
    # every stage's time, GEMMs, attention and memory-bound kernels together: the slowest stage is the one
    # whose sum is largest (the last stage's loss over a large vocabulary can outweigh a middle stage's extra
    # layer: review22 M6), not the one with the most FLOPs
    per_stage = [compute_seconds(stages[i], full[i], causal[i], per_gpu, gemm_rate, attention_rate)
                 + pointwise_seconds(pw[i], per_gpu, hbm) for i in range(len(stages))]
    if model.is_moe:                         # ---- the MoE layers' routing and imbalance (llmsizing.moe_time)
        from .moe import stage_moe_layers
        from .moe_time import moe_extra_seconds, routed_expert_flops_per_token, routing_bytes_per_token
        from .moe_time import load_skew as _skew

        skew = _skew(model, par.ep) if load_skew is None else check_number("load_skew", load_skew,
                                                                           minimum=1.0, maximum=64.0)
        moe_layers = stage_moe_layers(model, par)[:-1] + (stage_moe_layers(model, par)[-1] + mtp_depth,)
        if schedule == "dualpipe":
            moe_layers = dualpipe_rank_mean(moe_layers)
        route_bytes = routing_bytes_per_token(model, recompute=recompute)
        expert_flops = routed_expert_flops_per_token(model, recompute=recompute)
        per_stage = [t + moe_extra_seconds(moe_layers[i], per_gpu, route_bytes=route_bytes,
                                           hbm_bytes_per_s=hbm, skew=skew, expert_flops=expert_flops,
                                           gemm_rate=gemm_rate) for i, t in enumerate(per_stage)]
    if comm_sms:
        from .moe_time import comm_sm_share

        per_stage = [t / (1.0 - comm_sm_share(g, comm_sms)) for t in per_stage]
    return tuple(per_stage)


# =========================================================================== chapter 7: when DP stops scaling
def busy_fraction(compute_s: float, comm_s: float, overlap: float = 1.0) -> float:
    """The fraction of a step the GPU spends computing: ``compute_s / step``, where the step is the compute
    plus whatever communication is *not* hidden behind it, one share ``overlap`` (0 to 1) hidden
    (:func:`exposed_share_s`; 1: ``max(compute_s, comm_s)``, 0: ``compute_s + comm_s``), as ``step_time``'s
    ``overlap=``. Without it, ``step_time``'s per-collective windows are the book's answer (DDP's all-reduce
    hides only behind the last micro-batch's backward), and a share of 1 is an upper bound. Chapter 7."""
    c = check_number("compute_s", compute_s, allow_equal=False)
    t = check_number("comm_s", comm_s)
    return c / (c + exposed_share_s(t, c, check_number("overlap", overlap, maximum=1.0)))


def exposed_share_s(comm_s: float, busy_s: float, overlap: float) -> float:
    """The communication a step waits for when a share ``overlap`` of ``comm_s`` hides behind ``busy_s``
    (hidden time cannot exceed it); the one formula of :func:`busy_fraction` and ``step_time(overlap=)``."""
    return max((1.0 - overlap) * comm_s, comm_s - busy_s)


def gpu_with_link(gpu, link: str, one_way_gbps: float, link_class: str | None = None):
    """The catalogue's ``gpu`` with its node-mate link replaced by ``link`` (a label) at ``one_way_gbps``
    (decimal GB/s, one direction) of the class ``link_class`` (``"nvlink"``, ``"infinity-fabric"`` or
    ``"pcie"``, which sets its achievable fraction and latency: ``data/links.csv``): the same chip over
    NVLink, PCIe or a slower fabric, so that a comparison changes only the link: its default node is the
    catalogue row's box (GPUs a node, NICs) carrying this link, never capped by the row's figure
    (:func:`~llmsizing.network.get_node`; a node passed by name still caps it). Taught in chapter 7. Without
    ``link_class`` (the old call) the class is read off the label, with a :class:`DeprecationWarning`:
    behaviour comes from data, not from a name (issue 33)."""
    import warnings
    from dataclasses import replace

    from .catalog import GPU_LINK_CLASSES

    g = get_gpu(gpu)
    if not isinstance(link, str) or not link:
        raise TypeError(f"link must be a non-empty string naming the link, got {link!r}")
    bw = check_number("one_way_gbps", one_way_gbps, minimum=MIN_GPU_SPEED)
    if link_class is None:
        label = link.lower()
        link_class = next((c for k, c in (("no nvlink", "pcie"), ("nvlink", "nvlink"),
                                          ("infinity", "infinity-fabric"))
                           if k in label), "pcie")
        warnings.warn(f"gpu_with_link({link!r}) without link_class: taken as {link_class!r} from the label; "
                      "give link_class= ('nvlink', 'infinity-fabric' or 'pcie')", DeprecationWarning,
                      stacklevel=2)
    link_class = check_choice("link_class", link_class, GPU_LINK_CLASSES)
    return replace(g, link=link, link_bandwidth_gbps=bw, link_direction="one-way", link_class=link_class)


def dp_breakeven_tokens(model: Model | str, gpu, *, dp: int, zero: int, seq: int = 4096, grad_accum: int = 1,
                        precision: str = "bf16-mixed", mfu: float | None = None, window: float = 1.0,
                        gpus_per_node: int | None = None, inter_node_gbps: float | None = None,
                        kernel_efficiency: float | None = None, node=None) -> float:
    """Tokens per GPU per step above which the data-parallel (DDP or ZeRO) traffic of one step can hide behind
    its compute: the ``T`` where ``window x compute(T) = dp traffic`` (both from this module's own
    :func:`step_compute_time_s` and :func:`communication`, never a second formula).

    Compute grows with the tokens (``6 N T / (peak x mfu)`` plus attention); DDP's and ZeRO-1's traffic does
    not (one all-reduce, or reduce-scatter + all-gather, per step), so more tokens per GPU per step always
    hide it. ZeRO-2 reduce-scatters and ZeRO-3 gathers again for every micro-batch, so their traffic grows
    with ``grad_accum``: for them, read the result per micro-batch (divide by ``grad_accum``), and gradient
    accumulation does not help. ``window`` (0 < window <= 1) is the share of the compute the traffic may hide
    behind: 1 for the whole step, 2/3 for DDP's gradient all-reduce, which only overlaps the backward.
    Below the breakeven, the GPU waits (see :func:`busy_fraction`). Without the attention FLOPs the result is
    ``2 (dp - 1)/dp x 2 bytes x peak x efficiency / (6 x bandwidth)`` for DDP (plus the latency's share): it
    does not depend on the model's size. The network is :func:`group_network`'s (``node``, ``gpus_per_node``,
    ``inter_node_gbps``); ``kernel_efficiency`` defaults to the calibrated one (``mfu=`` is its old name).
    Taught in chapter 7."""
    model = resolve_model(model)
    par = Parallel(dp=check_int("dp", dp), zero=check_int("zero", zero, minimum=0, maximum=3))
    seq, m = check_int("seq", seq), check_int("grad_accum", grad_accum)
    w = check_fraction("window", window)
    eff = renamed("kernel_efficiency", kernel_efficiency, "mfu", mfu)
    comm = communication(model, par, batch=1, seq=seq, gpu=gpu, gpus_per_node=gpus_per_node, node=node,
                         inter_node_gbps=inter_node_gbps, precision=precision,
                         grad_accum=m).by_group().get("dp", 0.0)
    per_token = step_compute_time_s(model, par, batch=1, seq=seq, gpu=gpu, kernel_efficiency=eff) / seq
    return comm / (w * per_token)
