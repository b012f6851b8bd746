"""Training a mixture of experts: expert parallelism's memory and its all-to-all (issue 24).

What is here, and which hooks call it (every other module only calls into this one):

* **Where the experts live** (:func:`stage_split`). ``Parallel(ep=...)`` splits each MoE layer's routed experts
  over ``ep`` GPUs the layout already has: expert parallelism adds no GPUs. Megatron-Core lays a second rank grid
  over the same world for the MoE layers (``megatron/core/parallel_state.py``, ``initialize_model_parallel``: the
  expert rank generator ``etp x ep x edp x pp``, ``expert_tensor_parallel_size`` defaulting to
  ``tensor_model_parallel_size``, ``expert_data_parallel_size = world_size // (etp x ep x pp)``, a
  ``RuntimeError`` unless it divides), so ``ep`` must divide ``tp x cp x dp / etp``; DeepSpeed-MoE likewise
  carves its expert groups out of the data-parallel ranks (``deepspeed/utils/groups.py``). Each GPU holds
  ``experts / ep`` experts of every MoE layer of its pipeline stage (Megatron-LM asserts ``num_experts %
  expert_model_parallel_size == 0``). The routed experts are not split by tensor parallelism unless
  ``Parallel(expert_tp=True)``: the default ``etp = 1`` is Megatron-LM's ``--expert-tensor-parallel-size 1``
  (DeepSeek-V3's choice, and the usual one for fine-grained experts); Megatron-LM's own default, the flag left
  unset, is ``etp = tp``, which ``expert_tp=True`` gives. The expert grid puts the ``etp`` ranks next to each other,
  then ``ep`` (``etp`` apart), then ``edp``: with ``etp = 1`` and ``tp = 8`` the eight GPUs of a node form an ``ep``
  group. With ``tp > 1``, ``ep > 1`` needs sequence parallelism (Megatron-Core's ``TransformerConfig``). The router
  and the shared experts are dense layers: the router is replicated over ``tp`` (it is tiny), the shared experts
  are split like a dense MLP.
* **Model states** (:func:`moe_model_states`): the non-expert parameters as a dense model's (ZeRO over
  ``dp x cp``), the routed experts' weights, gradients and optimizer states divided by ``ep x etp``, their ZeRO/
  distributed-optimizer shard taken over the ``edp = tp x cp x dp / (etp x ep)`` expert-data-parallel GPUs
  (Megatron-Core's ``get_expert_data_parallel_group``: the expert parameters' gradient buffers and
  distributed-optimizer shards live there).
* **Activations** (:func:`moe_layer_terms`, :func:`moe_activation_memory`): what one MoE layer saves for its
  backward with Megatron-Core's all-to-all token dispatcher (``megatron/core/transformer/moe/
  token_dispatcher.py``, ``MoEAlltoAllTokenDispatcher``; ``moe_utils.permute``/``unpermute``; ``router.py``;
  ``experts.py``'s ``GroupedMLP``/``TEGroupedMLP``): the router's input and its fp32 logits and scores
  (``tokens x experts``), the top-k probabilities and the routing map, the tokens each expert receives (its
  grouped GEMM's input, ``tokens x k x hidden`` on average per GPU: every GPU sends ``tokens x k`` rows and, under
  uniform routing, receives as many), each expert's intermediate (the activation function's input and output),
  the experts' outputs that the combine weights by the router's probabilities (``tokens x k x hidden``), and the
  shared experts' MLP activations. Dropless by default (Megatron-Core's ``--moe-expert-capacity-factor None``);
  with a capacity factor ``c`` and padding each GPU's experts hold ``c x tokens x k`` rows.
* **The all-to-all** (:func:`ep_all_to_all`): per MoE layer and micro-batch, the dispatch and the combine in the
  forward and their two conjugates in the backward (4; 6 with full recomputation, which repeats the forward's),
  each sending ``tokens x k x hidden x bytes x (ep - 1) / ep`` per GPU under uniform routing (GShard's and
  Megatron's accounting; ``measurements.moe_all_to_all_table`` checks it against a gloo measurement), priced by
  :func:`llmsizing.serve_moe.all_to_all_s` (serving's all-to-all on the network model, checked against DeepEP's
  published latencies) with the ``ep`` group placed like Megatron-Core's expert grid (``ep`` ranks ``etp``
  apart), across nodes when ``ep x etp`` exceeds a scale-up domain. DeepSeek-V3's node-limited routing (each
  token to at most ``M = 4`` nodes, sent once per node over InfiniBand and forwarded over NVLink; DeepSeek-AI
  2024, arXiv 2412.19437, Sec. 2.1.2 and 3.2.2) caps the inter-node bytes: ``max_nodes``.
  The all-to-all is exposed by default (it sits between the router and the experts). DeepSeek's DualPipe (Sec.
  3.2.1) hides it by running one micro-batch's forward chunk against another's backward chunk, so that each
  chunk's all-to-all overlaps the other's computation: ``ep_overlap`` (0 to 1) is the share hidden.

The FLOPs of a mixture of experts are those of its active parameters (:mod:`llmsizing.flops`); grouped GEMMs of
small experts run below a dense GEMM's efficiency, which the step time does not model (it uses the dense kernel
efficiency: an optimistic assumption, stated where DeepSeek-V3's numbers are compared). Load imbalance (the
busiest expert's GPU receives more than ``tokens x k``) is not modelled: the gloo measurement shows a skewed
router's busiest rank at 1.2-2.1x the uniform bytes. Chapter 18 (:func:`llmsizing.dist_compare.compare_all_to_all`).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, replace

from ._validate import check_bool, check_choice, check_int, check_number
from .activations import ActivationMemory as _ActivationMemory
from .model import Model
from .parallel import Parallel, layers_per_stage

#: The dtype of the forward dispatch all-to-all by recipe: DeepSeek-V3 quantises the activations to FP8 before the
#: dispatch (1 byte per element plus one fp32 scale per 128 elements) and combines in BF16 (Sec. 3.3.4,
#: "Low-Precision Communication"); every other recipe sends its working dtype both ways.
FP8_DISPATCH_BYTES = 1.0 + 4 / 128


def check_ep(model, par: Parallel) -> None:
    """Refuse an expert-parallel layout that cannot run ``model``: ``ep > 1`` needs a mixture of experts whose
    routed experts ``ep`` divides (Megatron-Core's ``MoELayer`` asserts ``num_moe_experts %
    expert_model_parallel_size == 0``), and ``expert_tp=True`` needs the expert width divisible by ``tp``."""
    if par.ep == 1 and not par.expert_tp:
        return
    if model is None:
        return
    if not model.is_moe:
        what = f"ep={par.ep}" if par.ep > 1 else "expert_tp=True"
        raise ValueError(f"{what} splits routed experts, but {model.name!r} is dense (experts=0)")
    if model.experts % par.ep:
        raise ValueError(f"ep={par.ep} must divide the routed experts ({model.experts}) of {model.name!r}: each "
                         "expert-parallel rank holds experts / ep whole experts")
    fe = model.expert_ffn_hidden or model.ffn_hidden
    if par.expert_tp and fe % par.tp:
        raise ValueError(f"expert_tp=True: tp={par.tp} must divide the expert width ({fe})")


def _require_moe(model: Model, what: str) -> Model:
    if not model.is_moe:
        raise ValueError(f"{what}: {model.name!r} is dense (experts=0); give a mixture of experts")
    return model


def expert_data_parallel(par: Parallel) -> int:
    """The expert-data-parallel size :attr:`~llmsizing.parallel.Parallel.edp`, ``tp x cp x dp / (etp x ep)``: the
    GPUs that hold the same experts and over which their gradients are reduced and their optimizer states
    sharded (Megatron-Core's expert data-parallel group)."""
    return par.edp


@functools.lru_cache(maxsize=64)
def dense_twin(model: Model) -> Model:
    """``model`` with its MoE fields cleared: every layer a dense block with the ``ffn_hidden`` MLP. Used to reuse
    the dense activation formulas for the parts a MoE layer shares with a dense one (norms, attention)."""
    return replace(model, experts=0, experts_per_token=0, expert_ffn_hidden=None, shared_experts=0,
                   shared_expert_ffn_hidden=None, shared_expert_gate=False, router_bias=False, moe_layers=None,
                   name=f"{model.name} (dense twin)")


def _moe_indices(model: Model) -> frozenset:
    if model.moe_layers is None:
        return frozenset(range(model.layers))
    return frozenset(model.moe_layers)


def stage_moe_layers(model: Model, par: Parallel) -> tuple[int, ...]:
    """How many MoE layers each pipeline stage holds (its layers in order; Megatron's even split or
    ``stage_layers``). DeepSeek-V3's three dense layers all sit on the first stage."""
    moe, out, start = _moe_indices(model), [], 0
    for n in layers_per_stage(model.layers, par):
        out.append(sum(1 for i in range(start, start + n) if i in moe))
        start += n
    return tuple(out)


@functools.lru_cache(maxsize=256)
def _split(model: Model, tp: int, pp: int, stage_layers, ep: int, expert_tp: bool) -> tuple:
    from .memory import _tp_share, edge_params

    par = Parallel(pp=pp, stage_layers=stage_layers)
    moe_mlp = {n for _, n, _ in model._moe_mlp_tensors()}
    common = lin_common = 0.0                  # attention + norms of every layer
    for _, n, s in model.layer_tensors("moe"):
        if n not in moe_mlp:
            x = math.prod(s) * _tp_share("layers." + n, model, tp)
            common += x
            lin_common += x if len(s) >= 2 else 0.0
    d_mlp = d_lin = 0.0
    for _, n, s in model._mlp_tensors("", model.ffn_hidden):
        x = math.prod(s) * _tp_share("layers." + n, model, tp)
        d_mlp += x
        d_lin += x if len(s) >= 2 else 0.0
    m_dense = m_lin = ex = ex_lin = 0.0
    etp = tp if expert_tp else 1
    for _, n, s in model._moe_mlp_tensors():
        if n.startswith("experts."):
            x = math.prod(s) / (ep * etp)
            ex += x
            ex_lin += x if len(s) >= 2 else 0.0
        elif n.startswith(("router.", "shared_expert_gate.")):
            m_dense += math.prod(s)                                    # replicated over tp
        else:                                                          # shared experts: a dense MLP
            x = math.prod(s) * _tp_share("layers." + n, model, tp)
            m_dense += x
            m_lin += x if len(s) >= 2 else 0.0
    edge = edge_params(model, tp, pp)
    out = []
    n_moe_by_stage = stage_moe_layers(model, par)
    for i, n in enumerate(layers_per_stage(model.layers, par)):
        k = n_moe_by_stage[i]
        dense = n * common + (n - k) * d_mlp + k * m_dense
        dense += (edge["first"] if i == 0 else 0.0) + (edge["last"] if i == pp - 1 else 0.0)
        lin = n * lin_common + (n - k) * d_lin + k * m_lin
        out.append((dense, k * ex, lin, k * ex_lin, n))
    return tuple(out)


def stage_split(model: Model, parallel: Parallel) -> list[dict]:
    """Per pipeline stage, the parameters one GPU holds: ``dense`` (embedding, attention, norms, dense MLPs, the
    router and the shared experts, split by ``tp`` as :func:`~llmsizing.memory.stage_params` splits a dense
    model), ``experts`` (the routed experts of the stage's MoE layers, ``experts / ep`` of each, divided by ``tp``
    only with ``expert_tp``), ``dense_linear`` and ``experts_linear`` (their matrices, which an FP8 recipe copies),
    ``layers``."""
    rows = _split(model, parallel.tp, parallel.pp, parallel.stage_layers, parallel.ep, parallel.expert_tp)
    return [dict(zip(("dense", "experts", "dense_linear", "experts_linear", "layers"), r)) for r in rows]


def gpu_params(model: Model, parallel: Parallel) -> list[float]:
    """Parameters on one GPU of each stage (dense + routed experts): :func:`~llmsizing.memory.stage_params` for a
    mixture of experts."""
    return [r["dense"] + r["experts"] for r in stage_split(model, parallel)]


def moe_model_states(model: Model, elements: float, precision: str, optimizer: str, par: Parallel, stage: int):
    """The model states of one GPU of pipeline stage ``stage`` (a :class:`~llmsizing.memory.ModelStates`): the
    dense part with the dense rules (ZeRO over ``dp x cp``), the routed experts with ZeRO over the ``edp``
    expert-data-parallel GPUs (:func:`expert_data_parallel`). ``elements`` is the whole model's optimizer-state
    count (:func:`~llmsizing.memory.optimizer_state_elements`), split in proportion to the parameters."""
    from .memory import ModelStates, _states

    row = stage_split(model, par)[stage]
    n_exp = model.routed_expert_params
    n_dense = model.n_params - n_exp
    dense = _states(n_dense, elements * n_dense / model.n_params, precision, optimizer, par,
                    on_rank=row["dense"], linear=(row["dense_linear"], row["layers"]))
    epar = Parallel(dp=expert_data_parallel(par), zero=par.zero, offload=par.offload,
                    reshard_after_forward=par.reshard_after_forward)
    ex = _states(n_exp, elements * n_exp / model.n_params, precision, optimizer, epar,
                 on_rank=row["experts"], linear=(row["experts_linear"], 0))
    return ModelStates(model.n_params, precision, optimizer,
                       dense.weights_bytes + ex.weights_bytes, dense.gradients_bytes + ex.gradients_bytes,
                       dense.master_bytes + ex.master_bytes,
                       dense.optimizer_state_bytes + ex.optimizer_state_bytes, par,
                       dense.host_bytes + ex.host_bytes, dense.fp8_weights_bytes + ex.fp8_weights_bytes,
                       dense.fp8_meta_bytes + ex.fp8_meta_bytes)


def foreach_temporary_bytes(model: Model, state_bytes: float, par: Parallel) -> float:
    """:func:`~llmsizing.memory.optimizer_temporaries_bytes`'s ``foreach`` temporary (one state-sized buffer, the
    ``sqrt`` of every second moment at once) for a mixture of experts: the most loaded stage's parameters with
    ZeRO >= 1 sharding the dense part over ``dp x cp`` and the routed experts over ``edp``."""
    shard = par.zero >= 1
    return state_bytes * max(r["dense"] / (par.dp_cp if shard else 1) + r["experts"] /
                             (expert_data_parallel(par) if shard else 1) for r in stage_split(model, par))


def largest_tensor(model: Model, par: Parallel) -> float:
    """The largest parameter tensor on one GPU, times ``tp`` (the ``for-loop`` optimizer path's temporaries divide
    by ``tp``): a stacked routed-expert tensor holds ``experts / ep`` experts (``/ tp`` with ``expert_tp``)."""
    out = 0.0
    for _, n, s, _ in model.tensors():
        x = math.prod(s)
        if n.startswith("layers.experts."):
            x *= par.tp / (par.ep * (par.tp if par.expert_tp else 1))
        out = max(out, x)
    return out


# ----------------------------------------------------------------------------- activations
def moe_layer_terms(model: Model | str, *, batch: int, seq: int, dtype: str = "bf16", tp: int = 1,
                    sp: bool = False, fp8: str | None = None, capacity_factor: float | None = None,
                    expert_tp: bool = False) -> dict[str, float]:
    """Bytes one MoE layer's MLP part saves for its backward on one GPU, by piece (``seq`` is this GPU's tokens
    of each sequence, i.e. already divided by ``cp``). ``T = batch x seq`` tokens (``/ tp`` with sequence
    parallelism), ``E`` routed experts, top-``k``, hidden ``h``, expert width ``f_e``, shared width
    ``f_s = shared_experts x shared width``; ``p`` the working dtype's bytes, FP8 recipes as
    :func:`~llmsizing.activations.layer_terms` (``q_in`` for a Linear input, ``mlp_f`` per intermediate element):

    * ``router``: its input ``p T h`` (the norm output, which the shared experts' first Linear also reads: counted
      once unless FP8 saves a separate FP8 copy) + fp32 logits and scores ``8 T E`` (the softmax or sigmoid saves
      its output; Megatron-Core's router keeps logits in fp32, ``--moe-router-dtype fp32``) + the routing map
      ``T E`` (bool) + the top-k probabilities ``4 T k``;
    * ``dispatch``: the rows each GPU's experts receive, ``R = T k`` (dropless) or ``c T k`` (capacity factor
      ``c`` with padding), saved as the grouped GEMM's input: ``q_in R h``; with ``expert_tp`` the dispatcher
      also all-gathers the rows of the ``tp`` ranks of an expert-tensor-parallel group (Megatron-Core's
      ``MoEAlltoAllTokenDispatcher`` with ``etp > 1``), so ``R = tp T k`` there;
    * ``experts``: the experts' intermediate, ``mlp_f R f_e`` (``f_e / tp`` with ``expert_tp``);
    * ``combine``: the experts' outputs before they are weighted by the router's probabilities (the probability
      gradient needs them), ``p R h``;
    * ``shared``: the shared experts' intermediate ``mlp_f T f_s / tp`` (+ their FP8 input copy).

    The all-to-all's send and receive buffers are transient (freed once the grouped GEMM has its input) and not
    counted. Exact for the tensors listed; what Megatron-Core's fused permute kernels keep beyond them (index
    maps, ``T k`` int32) is left out (under 1% of a layer at hidden sizes above 1,000)."""
    from .activations import _fp8_saved
    from .precision import DTYPE_BYTES

    from .activations import ACTIVATION_DTYPES, _check_fp8, _int_or_array
    from .catalog import resolve_model

    model = _require_moe(resolve_model(model, moe=True), "moe_layer_terms")
    batch, seq = _int_or_array("batch", batch), _int_or_array("seq", seq)
    check_choice("dtype", dtype, ACTIVATION_DTYPES)
    tp, sp, expert_tp = check_int("tp", tp), check_bool("sp", sp), check_bool("expert_tp", expert_tp)
    fp8 = _check_fp8(fp8, "fused", False)
    capacity_factor = check_capacity_factor(capacity_factor)
    p = DTYPE_BYTES[dtype]
    q_in, _q_out, mlp_f = _fp8_saved(fp8, p, "flash", model.gated_mlp)
    r = tp if sp else 1
    etp = tp if expert_tp else 1
    t = batch * seq / r
    e, k, h = model.experts, model.experts_per_token, model.hidden
    fe = model.expert_ffn_hidden or model.ffn_hidden
    rows = t * k * etp * (1.0 if capacity_factor is None else capacity_factor)
    out = {"router": p * t * h + 8 * t * e + 1 * t * e + 4 * t * k,
           "dispatch": q_in * rows * h,
           "experts": mlp_f * rows * fe / etp,
           "combine": p * rows * h,
           "shared": 0.0}
    if model.shared_experts:
        fs = model.shared_experts * (model.shared_expert_ffn_hidden or fe)
        out["shared"] = mlp_f * t * fs / tp + (q_in * t * h if q_in != p else 0.0)
    return out


@dataclass(frozen=True)
class MoEActivationMemory(_ActivationMemory):
    """:class:`~llmsizing.activations.ActivationMemory` of a mixture of experts: ``per_layer_bytes`` is the mean
    over its layers; ``moe_delta_bytes`` is what a MoE layer keeps beyond a dense one (0 with full recomputation,
    which keeps only each layer's input) and ``moe_layers`` the MoE layers' indices, so that a pipeline stage
    counts its own mix (:func:`stage_offset_bytes`)."""

    moe_delta_bytes: float = 0.0
    moe_layers: tuple = ()


def moe_activation_memory(model: Model, *, capacity_factor: float | None = None, expert_tp: bool = False, **kw):
    """:func:`~llmsizing.activations.activation_memory` for a mixture of experts: the dense twin's
    (:func:`dense_twin`: norms, attention, embedding, logits), with each MoE layer's dense MLP term replaced by
    :func:`moe_layer_terms` (the difference goes into the ``"mlp"`` component). Full recomputation keeps only the
    layer inputs, and the rebuilt layer is a MoE one; selective recomputation keeps the MoE part (it reruns only
    the attention core)."""
    from .activations import activation_memory, layer_terms

    if kw.get("stack", "fused") != "fused" or kw.get("autocast"):
        raise ValueError(f"stack={kw.get('stack')!r}, autocast={kw.get('autocast')!r}: a mixture of experts' "
                         "activations are modelled for stack='fused' without autocast (Megatron-Core's token "
                         "dispatcher) only")
    twin = dense_twin(model)
    base = activation_memory(twin, **kw)
    cp = kw.get("cp", 1)
    seq = kw["seq"] // cp
    lt = {k: v for k, v in kw.items() if k in ("batch", "dtype", "attention", "dropout", "tp", "sp", "mask_bytes",
                                               "stack", "autocast", "fp8")}
    dense_mlp = layer_terms(twin, seq=seq, **lt)["mlp"]
    terms = moe_layer_terms(model, batch=kw["batch"], seq=seq, dtype=kw.get("dtype", "bf16"), tp=kw.get("tp", 1),
                            sp=kw.get("sp", False), fp8=kw.get("fp8"), capacity_factor=capacity_factor,
                            expert_tp=expert_tp)
    delta = sum(terms.values()) - dense_mlp
    n_moe, L = model.n_moe_layers, model.layers
    bd = dict(base.breakdown)
    if kw.get("recompute", "none") == "full":
        # the layer rebuilt in the backward: the larger of a dense and a MoE layer (a MoE one if all are)
        add = delta if model.n_dense_layers == 0 else max(delta, 0.0)
        per_layer = base.per_layer_bytes
    else:
        add = n_moe * delta
        per_layer = base.per_layer_bytes + add / L
    bd["mlp"] = bd.get("mlp", 0.0) + add
    return MoEActivationMemory(per_layer, base.layers_bytes + add, base.embedding_bytes, base.logits_bytes, bd,
                               base.layer_count, moe_delta_bytes=0.0 if kw.get("recompute") == "full" else delta,
                               moe_layers=tuple(sorted(_moe_indices(model))))


def stage_offset_bytes(acts, par: Parallel, stage: int) -> float:
    """What one micro-batch of pipeline stage ``stage`` keeps beyond ``layers x per_layer_bytes`` (the mean over
    the model's layers): ``(k - n x n_moe / L) x delta`` for a stage of ``n`` layers of which ``k`` are MoE layers,
    ``delta`` a MoE layer's bytes minus a dense layer's (:class:`MoEActivationMemory`); 0 for a dense model.
    DeepSeek-V3's first stage holds its three dense layers and one MoE layer."""
    if not isinstance(acts, MoEActivationMemory) or not acts.moe_delta_bytes:
        return 0.0
    moe, start = set(acts.moe_layers), 0
    sizes = layers_per_stage(acts.layer_count, par)
    start = sum(sizes[:stage])
    k = sum(1 for i in range(start, start + sizes[stage]) if i in moe)
    return (k - sizes[stage] * len(moe) / acts.layer_count) * acts.moe_delta_bytes


def moe_block_terms(model: Model, *, capacity_factor: float | None = None, **kw) -> dict[str, float]:
    """What one MoE layer saves, by :func:`~llmsizing.activations.layer_terms`'s components: the dense twin's
    norms, attention and masks, and under ``"mlp"`` the sum of :func:`moe_layer_terms` (``kw`` are
    ``layer_terms``'s arguments; the ``"fused"`` stack only)."""
    from .activations import layer_terms

    if kw.get("stack", "fused") != "fused" or kw.get("autocast") or kw.get("selective"):
        raise ValueError("a mixture of experts' layer is modelled for stack='fused', autocast=False and without "
                         "selective=True (Megatron-Core's token dispatcher)")
    t = layer_terms(dense_twin(model), **kw)
    t["mlp"] = sum(moe_layer_terms(model, batch=kw["batch"], seq=kw["seq"], dtype=kw.get("dtype", "bf16"),
                                   tp=kw.get("tp", 1), sp=kw.get("sp", False), fp8=kw.get("fp8"),
                                   capacity_factor=capacity_factor).values())
    return t


# ----------------------------------------------------------------------------- the all-to-all
def all_to_all_bytes(tokens: float, top_k: int, hidden: int, bytes_per_element: float, ep: int) -> float:
    """Bytes one GPU sends in one dispatch (or combine) all-to-all under uniform routing:
    ``tokens x k x hidden x bytes x (ep - 1) / ep`` (each of a token's ``k`` copies lands on another GPU with
    probability ``(ep - 1) / ep``; dropless top-k, experts spread evenly over the ``ep`` GPUs)."""
    tokens = check_number("tokens", tokens)
    k = check_int("top_k", top_k)
    h = check_int("hidden", hidden)
    b = check_number("bytes_per_element", bytes_per_element, minimum=0.0)
    ep = check_int("ep", ep)
    return tokens * k * h * b * (ep - 1) / ep


def inter_node_share(top_k: int, ep: int, gpus_per_node: int, max_nodes: int | None = None) -> float:
    """The bytes that cross the network per byte of ``tokens x k x hidden x bytes``, with the ``ep`` GPUs in
    groups of ``gpus_per_node`` per node (``n = ep / gpus_per_node`` nodes; 0 when ``ep`` fits in a node).

    Without node limit: ``(ep - g) / ep`` of a token's ``k`` copies go to another node. With DeepSeek-V3's
    node-limited routing (``max_nodes = M``; Sec. 2.1.2) a token goes to at most ``M`` nodes and is sent once per
    node over InfiniBand, then forwarded to the right GPUs over NVLink (Sec. 3.2.2): ``min(k, M, n) x (n - 1) /
    n`` copies cross the network (its chosen nodes taken as uniform over the ``n``, its own among them with
    probability ``M / n``), i.e. ``min(k, M, n) / k x (n - 1) / n`` per byte of the formula. An approximation:
    routing is not uniform, and a token whose ``k`` experts sit on fewer than ``M`` nodes sends fewer copies."""
    k, ep, g = check_int("top_k", top_k), check_int("ep", ep), check_int("gpus_per_node", gpus_per_node)
    m = None if max_nodes is None else check_int("max_nodes", max_nodes)
    if ep <= g:
        return 0.0
    n = ep / g
    if m is None:
        return (ep - g) / ep
    return min(k, m, n) / k * (n - 1) / n


def ep_all_to_all(model: Model, par: Parallel, *, batch: int, seq: int, gpu, node, grad_accum: int,
                  precision: str, recompute: str, max_nodes: int | None = None) -> list:
    """The expert-parallel all-to-alls of one step on the GPU of the stage with the most MoE layers, as
    :class:`~llmsizing.comm.Collective` rows (group ``"ep"``): per MoE layer and micro-batch the forward dispatch
    (in FP8 with ``fp8-deepseek``: :data:`FP8_DISPATCH_BYTES`), the forward combine, and the backward's two
    (the gradients of the combine's output sent back along the dispatch's routes, and of the dispatch's), in the
    working dtype; full recomputation repeats the forward's two. Each sends :func:`all_to_all_bytes` and takes
    :func:`llmsizing.serve_moe.all_to_all_s` of its ``tokens x k x hidden`` buffer, the model serving uses (within
    0.90-0.99x of DeepEP's published H800 latencies at EP 16-256), with DeepSeek's node limit ``max_nodes`` and the
    ``ep`` ranks ``etp`` apart: inside a scale-up domain over NVLink; across domains the cross-node share over the
    GPU's own NIC and the rest over NVLink, concurrently. A row's ``bandwidth_gbps`` is the effective one (bytes
    sent / that time, latency included), its ``latency_s`` 0."""
    from .comm import Collective
    from .precision import DTYPE_BYTES, RECIPES
    from .serve_moe import all_to_all_s

    if par.ep == 1 or not model.is_moe:
        return []
    recipe = RECIPES[precision]
    act_b = 2.0 if recipe.autocast else DTYPE_BYTES[recipe.weights]
    disp_b = FP8_DISPATCH_BYTES if precision == "fp8-deepseek" else act_b
    tokens = batch * (seq // par.cp) / (par.tp if par.sp else 1)
    k, h, ep = model.experts_per_token, model.hidden, par.ep
    calls = max(stage_moe_layers(model, par)) * grad_accum
    fwd = 2 if recompute == "full" else 1
    across = ep * par.etp > node.scaleup_domain_gpus
    out = []
    for name, b, n_calls in (("EP all-to-all dispatch (forward)", disp_b, calls * fwd),
                             ("EP all-to-all combine (forward)", act_b, calls * fwd),
                             ("EP all-to-all dispatch and combine (backward)", act_b, 2 * calls)):
        one = all_to_all_bytes(tokens, k, h, b, ep)
        t = all_to_all_s(tokens * k * h * b, ep, gpu, node, top_k=k, max_nodes=max_nodes, stride=par.etp)
        out.append(Collective(name, "ep", ep, "network" if across else gpu.link, n_calls, one, n_calls * one,
                              one / t / 1e9, 0.0))
    return out


def moe_stage_flops(model: Model, par: Parallel, *, seq: int, recompute: str,
                    recompute_layers: int | None = None) -> tuple[float, ...]:
    """Training FLOPs per token of each pipeline stage of a mixture of experts (all its tensor-parallel ranks),
    splitting :func:`~llmsizing.flops.training_flops_per_token` (active parameters) by the stage's dense and
    MoE layers: a dense layer costs ``2 x`` its parameters forward, a MoE layer ``2 x`` its active ones (attention
    and the shared experts, ``k`` of its ``E`` experts, the router), plus each layer's attention core; the LM head
    on the last stage. Recomputation as in :mod:`llmsizing.flops`."""
    from .flops import RECOMPUTE, attention_flops_per_token, training_flops_per_token

    check_choice("recompute", recompute, RECOMPUTE)
    if recompute_layers is not None:
        raise ValueError(f"recompute_layers={recompute_layers!r}: partial recomputation of a mixture of experts is "
                         "not modelled (use recompute='none', 'selective' or 'full')")
    total = training_flops_per_token(model, seq=seq, recompute=recompute)
    att = attention_flops_per_token(model, seq=seq) / model.layers
    moe_mlp = {n for _, n, _ in model._moe_mlp_tensors()}
    common = sum(math.prod(s) for _, n, s in model.layer_tensors("moe") if n not in moe_mlp)
    dense_mlp = sum(math.prod(s) for _, _, s in model._mlp_tensors("", model.ffn_hidden))
    moe_active = 0.0
    for _, n, s in model._moe_mlp_tensors():
        x = math.prod(s)
        moe_active += x * model.experts_per_token / model.experts if n.startswith("experts.") else x

    def layer(params):
        fwd = 2 * params + att
        return 3 * fwd + {"none": 0.0, "selective": att, "full": fwd}[recompute]

    d, m = layer(common + dense_mlp), layer(common + moe_active)
    out, moe_by_stage = [], stage_moe_layers(model, par)
    for n, k in zip(layers_per_stage(model.layers, par), moe_by_stage):
        out.append((n - k) * d + k * m)
    out[-1] += total - sum(out)                     # the LM head
    return tuple(out)


def check_capacity_factor(capacity_factor):
    """``None`` (dropless) or a capacity factor from 1 to 64 (Megatron-Core's ``--moe-expert-capacity-factor``)."""
    if capacity_factor is None:
        return None
    return check_number("capacity_factor", capacity_factor, minimum=1.0, maximum=64.0)


# ----------------------------------------------------------------------------- DeepSeek-V3 (issue 24's done-when)
#: DeepSeek-V3's pre-training layout (DeepSeek-AI 2024, arXiv 2412.19437, Sec. 3.2-3.3): 2,048 H800s, 16-way
#: pipeline parallelism (DualPipe), 64-way expert parallelism over 8 nodes, ZeRO-1 data parallelism, no tensor
#: parallelism, FP8 training; a batch of 15,360 sequences of 4K tokens (Sec. 4.2) is 120 per data-parallel rank.
DEEPSEEK_V3_LAYOUT = Parallel(pp=16, dp=128, ep=64, zero=1)
DEEPSEEK_V3_MICRO_BATCHES = 15360 // 128
#: Its node-limited routing: each token to at most 4 nodes (Sec. 2.1.2, 3.2.2).
DEEPSEEK_V3_MAX_NODES = 4
#: A split of DeepSeek-V3's 61 layers over its 16 pipeline stages that unloads the chunks DualPipe puts on one
#: rank with the embedding, the output head and the MTP module: one layer fewer in the first and in the last
#: chunk. Not published (the report gives no split); :func:`deepseek_v3_check` shows Megatron's even split too.
DEEPSEEK_V3_BALANCED_SPLIT = (3,) + (4,) * 14 + (2,)


#: What DeepSeek-V3 keeps per micro-batch in the model's last pipeline chunk for its multi-token-prediction (MTP)
#: module (Sec. 2.2): one MTP depth, a MoE block with its own projection ``M`` (``2h x h``) and two RMSNorms; the
#: embedding and the output head are the main model's, on the same pipeline rank (Sec. 3.2.3).
DEEPSEEK_V3_MTP_DEPTH = 1


def deepseek_layer_bytes(model: Model, *, moe: bool = True, probs_in_swiglu: bool = True) -> dict[str, float]:
    """Bytes one layer of a multi-head-latent-attention mixture of experts saves for its backward **per token**
    under DeepSeek-V3's memory recipe (DeepSeek-AI 2024, arXiv:2412.19437; ``moe=False``: one of its first dense
    layers), by tensor. No tensor or sequence parallelism (DeepSeek ran none), uniform routing, dropless.

    * ``residuals``: the inputs of the layer's two RMSNorms in BF16, ``2 x 2h``. Sec. 3.2.3 "Recomputation of
      RMSNorm and MLA Up-Projection": every RMSNorm is recomputed in the backward, so its *output* is not kept
      (nor the FP8 copy a following Linear would cache of it: the QKV down-projections', the router's, the shared
      expert's and the dispatched tokens' source), only its input, the residual stream, which is needed anyway.
    * ``mla_latents``: the compressed query and key-value latents before their RMSNorms and the rope key, in
      BF16: ``2 (q_lora_rank + kv_lora_rank + qk_rope_head_dim)``. MLA's up-projections are recomputed (Sec.
      3.2.3), so the per-head queries, keys and values (``heads x (2 x 192 + 128)`` numbers, what a dense layer's
      flash attention keeps) are rebuilt from these in the backward.
    * ``attention_output``: the output projection's input, ``heads x v_head_dim`` in E5M6 with a 1 x 128 tile
      scale (1.5 + 4/128 bytes; Sec. 3.3.3 (1)), which the attention's backward reads too (kept once), and the
      flash kernel's fp32 log-sum-exp per head (``4 x heads``).
    * MoE layers: ``router``, the fp32 logits and scores, the routing map and the fp32 top-k weights (``9 E +
      4 k``, :func:`moe_layer_terms`'s router without its input, which is recomputed); ``dispatch``, the tokens
      the experts receive, ``k x h`` in FP8 with tile scales (Sec. 3.3.3 "Low-Precision Communication": quantised
      before the dispatch, the experts' up-projection input); ``experts`` and ``shared``, each expert's SwiGLU
      input (``2 x`` its width) in FP8 with its output recomputed (Sec. 3.3.3 (2)). ``combine``: with
      ``probs_in_swiglu`` (default) nothing: the router's weights multiply the SwiGLU output before the
      down-projection (which is linear, so the sum is the same), and the weights' gradient needs only that
      recomputed output (Megatron-Core's ``TEGroupedMLP`` does this with ``weighted_bias_swiglu_impl``,
      ``megatron/core/fusions/fused_bias_swiglu.py``, and its FP8 input store); with ``probs_in_swiglu=False``
      the experts' BF16 outputs, ``2 k h``, kept for the combine's weighting (:func:`moe_layer_terms`'s rule). The
      report does not say which DeepSeek did.
    * dense layers: ``mlp``, the SwiGLU's two BF16 inputs and the down-projection's FP8 input (``4 f + f x (1
      + 4/128)``): Sec. 3.3.3 (2) caches the SwiGLU input in FP8 only "in MoE".

    EMA of the parameters lives in CPU memory (Sec. 3.2.3) and costs the GPU nothing; BF16 optimizer moments and
    FP32 master weights and gradients (Sec. 3.3.3) are the ``fp8-deepseek`` recipe's (:mod:`llmsizing.precision`).
    Used by :func:`deepseek_memory`."""
    from .precision import FP8_SCHEMES

    if not (model.is_moe and model.is_mla):
        raise ValueError(f"deepseek_layer_bytes: {model.name!r} is not a mixture of experts with multi-head latent "
                         "attention (DeepSeek-V2/V3's recipe needs both)")
    check_bool("moe", moe)
    check_bool("probs_in_swiglu", probs_in_swiglu)
    sch = FP8_SCHEMES["fp8-deepseek"]
    f8, p = sch.input_bytes, 2.0
    h, a, e, k = model.hidden, model.heads, model.experts, model.experts_per_token
    out = {"residuals": 2 * p * h,
           "mla_latents": p * ((model.q_lora_rank or 0) + model.kv_lora_rank + model.qk_rope_head_dim),
           "attention_output": sch.attn_out_bytes * a * model.v_head_dim + 4.0 * a}
    if not moe:
        f = model.ffn_hidden
        return out | {"mlp": 2 * p * f + f8 * f}
    fe = model.expert_ffn_hidden or model.ffn_hidden
    fs = model.shared_experts * (model.shared_expert_ffn_hidden or fe)
    return out | {"router": 9.0 * e + 4.0 * k, "dispatch": f8 * k * h, "experts": f8 * 2 * fe * k,
                  "shared": f8 * 2 * fs, "combine": 0.0 if probs_in_swiglu else p * k * h}


def deepseek_rebuilt_bytes(model: Model) -> float:
    """Bytes per token one MoE layer rebuilds during its own backward under DeepSeek-V3's recipe (alive for that
    layer only): its two RMSNorm outputs in BF16, the per-head queries, keys and values MLA's up-projections
    recompute (BF16, ``heads x (2 (nope + rope) + v)``), and the routed and shared experts' SwiGLU outputs (BF16)."""
    fe = model.expert_ffn_hidden or model.ffn_hidden
    fs = model.shared_experts * (model.shared_expert_ffn_hidden or fe)
    d_qk = model.qk_nope_head_dim + model.qk_rope_head_dim
    return 2.0 * (2 * model.hidden + model.heads * (2 * d_qk + model.v_head_dim)
                  + model.experts_per_token * fe + fs)


@dataclass(frozen=True)
class DeepSeekMemory:
    """:func:`deepseek_memory`'s result: ``ranks``, one dict per pipeline rank of the first half (DualPipe's
    ranks ``i`` and ``pp - 1 - i`` hold the same two chunks), with its ``chunks``, micro-batches in flight of
    each, model states, activations, peak (bytes) and ``total`` (peak + overhead allowance); ``rank`` is the most
    loaded one, :attr:`total_bytes` its total."""

    ranks: tuple
    rank: int
    schedule: str

    @property
    def total_bytes(self) -> float:
        return self.ranks[self.rank]["total"]

    @property
    def table(self):
        """A DataFrame, one row per rank, in GiB."""
        import pandas as pd

        from .units import GiB

        cols = ("states", "activations", "peak", "total")
        df = pd.DataFrame([{"rank": r["rank"], "chunks": r["chunks"], "in flight": r["in_flight"],
                            **{c + " GiB": r[c] / GiB for c in cols}} for r in self.ranks])
        return df.set_index("rank")


def deepseek_memory(model: Model | str = "deepseek-v3", parallel: Parallel | None = None, *, batch: int = 1,
                    seq: int = 4096, grad_accum: int | None = None, schedule: str = "dualpipe",
                    probs_in_swiglu: bool = True, mtp_depth: int = DEEPSEEK_V3_MTP_DEPTH,
                    overhead_bytes: float | None = None) -> DeepSeekMemory:
    """Per-GPU training memory of a DeepSeek-V2/V3-style model run as DeepSeek ran V3 (arXiv:2412.19437,
    Sec. 3.2.3 and 3.3.3): ``precision="fp8-deepseek"`` (FP8 Linear weights, FP32 master weights and gradients,
    BF16 AdamW moments), activations as :func:`deepseek_layer_bytes` (RMSNorms and MLA up-projections recomputed,
    FP8/E5M6 caches), EMA on the CPU, and the MTP module (``mtp_depth`` MoE blocks with their ``2h x h``
    projections and two norms) in the last pipeline chunk, sharing the embedding and head.

    ``schedule="dualpipe"`` (Sec. 3.2.1, Table 2; ``deepseek-ai/DualPipe``): pipeline rank ``i`` holds chunks
    ``i`` and ``pp - 1 - i`` (two copies of the parameters: the embedding and the output head on the same
    rank), their weights, gradients and optimizer states each as :func:`moe_model_states` gives them on their own
    stage (each copy accumulates its own FP32 gradient; a chunk's optimizer shard is counted on both ranks that hold
    it, an upper bound: sharding it over the pair would save half of the optimizer bytes, 1.8 GiB on rank 0); DualPipe's schedule (``dualpipe.py``'s ``step``, rank ``i < pp/2``: ``2 (pp/2 - i - 1) + i + 1``
    forward chunks of phase 0 (chunk ``i``) and ``i + 1`` of phase 1 (chunk ``pp - 1 - i``) before the first
    backward, then each forward chunk overlapped with a backward one) holds at most ``pp - i`` micro-batches of
    chunk ``i`` and ``i + 1`` of chunk ``pp - 1 - i`` at once: ``pp + 1``, the report's Table 2. ``schedule="1f1b"``: one chunk per rank, ``min(pp - i,
    grad_accum)`` in flight (:func:`~llmsizing.parallel.pipeline_in_flight`). The layers are split as ``parallel``
    says (``stage_layers``, else Megatron's even split); the MTP block joins the last chunk.

    The peak and its phases are :func:`~llmsizing.memory.step_phases`': the kept activations, one MoE layer
    rebuilt (:func:`deepseek_rebuilt_bytes`) plus :data:`~llmsizing.memory.LAYER_WORKING_SET` of it in its
    backward, the loss's temporaries on the rank with the output head (one head at a time), the overhead allowance
    of :func:`~llmsizing.memory.default_overhead_bytes`. ``parallel`` defaults to :data:`DEEPSEEK_V3_LAYOUT`,
    ``grad_accum`` to :data:`DEEPSEEK_V3_MICRO_BATCHES` (DualPipe needs at least ``2 pp`` micro-batches)."""
    from .catalog import resolve_model
    from .memory import (LAYER_WORKING_SET, LOSS_BACKWARD_BYTES_PER_LOGIT, ModelStates, _states,
                         default_overhead_bytes, optimizer_state_elements, step_phases)
    from .activations import ActivationMemory
    from .parallel import pipeline_in_flight

    model = resolve_model(model, moe=True)
    par = DEEPSEEK_V3_LAYOUT if parallel is None else parallel
    if not isinstance(par, Parallel):
        raise TypeError(f"parallel must be a Parallel, got {type(par).__name__}")
    batch, seq = check_int("batch", batch), check_int("seq", seq)
    m = check_int("grad_accum", DEEPSEEK_V3_MICRO_BATCHES if grad_accum is None else grad_accum)
    schedule = check_choice("schedule", schedule, ("dualpipe", "1f1b"))
    depth = check_int("mtp_depth", mtp_depth, minimum=0, maximum=8)
    check_bool("probs_in_swiglu", probs_in_swiglu)
    if overhead_bytes is not None:
        overhead_bytes = check_number("overhead_bytes", overhead_bytes)
    if par.tp > 1 or par.cp > 1 or par.virtual_stages > 1:
        raise ValueError(f"deepseek_memory models DeepSeek-V3's layout: no tensor, context or interleaved pipeline "
                         f"parallelism (got tp={par.tp}, cp={par.cp}, virtual_stages={par.virtual_stages})")
    check_ep(model, par)
    pp = par.pp
    if schedule == "dualpipe" and (pp % 2 or m < 2 * pp):
        raise ValueError(f"schedule='dualpipe' needs an even pp (got {pp}) and grad_accum >= 2 pp "
                         f"(got {m}): DualPipe's own assertions")
    t = batch * seq
    moe_b = sum(deepseek_layer_bytes(model, probs_in_swiglu=probs_in_swiglu).values()) * t
    dense_b = sum(deepseek_layer_bytes(model, moe=False).values()) * t
    # the main model's split, the MTP block(s) appended to the last chunk as MoE layers
    split = list(layers_per_stage(model.layers, par))
    split[-1] += depth
    moe_idx = sorted(_moe_indices(model)) + list(range(model.layers, model.layers + depth))
    ext = replace(model, layers=model.layers + depth, moe_layers=tuple(moe_idx),
                  name=f"{model.name} (+{depth} MTP)") if depth else model
    epar = replace(par, stage_layers=tuple(split))
    elements = optimizer_state_elements(ext, "adamw")
    h = model.hidden
    proj = depth * (2 * h * h + 2 * h)                 # MTP: projection M and its two RMSNorms (Sec. 2.2)
    per_chunk, start = [], 0
    moe_set = set(moe_idx)
    for i, n in enumerate(split):
        k = sum(1 for j in range(start, start + n) if j in moe_set)
        start += n
        acts = k * moe_b + (n - k) * dense_b
        st = moe_model_states(ext, elements, "fp8-deepseek", "adamw", epar, i)
        emb = logits = 0.0
        if i == 0:
            emb = 8.0 * t                                           # int64 token ids
        if i == pp - 1:
            # main and MTP heads: the final norm's input and fp32 log-probabilities per head (the library's
            # logits rule), and the MTP block's second input, the next token's embedding (BF16)
            logits = (1 + depth) * (2.0 * h + 4.0 * model.vocab) * t + depth * 2.0 * h * t
            if depth:
                st = _add_states(st, _states(proj, 2 * proj, "fp8-deepseek", "adamw", par, on_rank=proj,
                                             linear=(2 * h * h * depth, 0)), ModelStates)
        per_chunk.append(dict(acts=acts, emb=emb, logits=logits, states=st, moe=k))
    rebuilt = deepseek_rebuilt_bytes(model) * t
    loss = LOSS_BACKWARD_BYTES_PER_LOGIT["fused"] * t * model.vocab
    ranks = []
    own = range(pp // 2) if schedule == "dualpipe" else range(pp)
    for i in own:
        if schedule == "dualpipe":
            a, b = per_chunk[i], per_chunk[pp - 1 - i]
            na, nb = float(pp - i), float(i + 1)
            chunks, flight = (i, pp - 1 - i), (na, nb)
            states = _add_states(a["states"], b["states"], ModelStates)
            kept = na * a["acts"] + nb * b["acts"]
            emb, logits = na * a["emb"] + nb * b["emb"], na * a["logits"] + nb * b["logits"]
            has_head = True if i == 0 else False
        else:
            a = per_chunk[i]
            na = pipeline_in_flight(pp, m)[i]
            chunks, flight = (i,), (na,)
            states, kept = a["states"], na * a["acts"]
            emb, logits, has_head = na * a["emb"], a["logits"], i == pp - 1
        acts = ActivationMemory(kept, kept + rebuilt, emb, logits, {"layers": kept + rebuilt, "embedding": emb,
                                                                     "logits": logits}, 1)
        phases = step_phases(states, acts, grad_accum=m, autocast_bytes=0.0, loss_bytes=loss if has_head else 0.0,
                             optimizer_bytes=states.optimizer_state_bytes / 2,   # foreach: one moment's size
                             layer_working_bytes=LAYER_WORKING_SET * moe_b, head_grad_bytes=0.0)
        peak = max(sum(v.values()) for v in phases.values())
        over = default_overhead_bytes(peak) if overhead_bytes is None else overhead_bytes
        ranks.append({"rank": i, "chunks": chunks, "in_flight": flight, "states": states.total_bytes,
                      "activations": acts.total_bytes, "peak": peak, "total": peak + over,
                      "states_detail": states})
    top = max(range(len(ranks)), key=lambda r: (ranks[r]["total"], -r))
    return DeepSeekMemory(tuple(ranks), top, schedule)


def _add_states(a, b, cls):
    """Two :class:`~llmsizing.memory.ModelStates` on one GPU (DualPipe's two chunks, or a chunk and the MTP
    projection), field by field."""
    return cls(a.n_params, a.precision, a.optimizer, a.weights_bytes + b.weights_bytes,
               a.gradients_bytes + b.gradients_bytes, a.master_bytes + b.master_bytes,
               a.optimizer_state_bytes + b.optimizer_state_bytes, a.parallel, a.host_bytes + b.host_bytes,
               a.fp8_weights_bytes + b.fp8_weights_bytes, a.fp8_meta_bytes + b.fp8_meta_bytes)


def deepseek_v3_check(*, gpu_memory_gib: float = 80.0) -> dict:
    """DeepSeek-V3's published pre-training run against the library (issue 24's done-when), as named numbers a
    chapter can glue: the per-GPU peak of :func:`~llmsizing.memory.training_memory` (``GiB`` at the most loaded
    stage) with no, selective and full recomputation, at micro-batches of one 4K sequence on
    :data:`DEEPSEEK_V3_LAYOUT` with ``precision="fp8-deepseek"``; the step of
    :func:`~llmsizing.layouts.step_time` with node-limited routing (:data:`DEEPSEEK_V3_MAX_NODES`) and the
    all-to-all exposed (``ep_overlap=0``) or hidden by DualPipe (``ep_overlap=1``): its MFU and the pre-training's
    GPU-hours (tokens and GPU-hours from ``data/published_stages.csv``) with the calibrated band of Hopper FP8
    runs (:func:`~llmsizing.time_cost.mfu_range_factors` applied to the MFU).

    DeepSeek's own memory recipe is :func:`deepseek_memory` (DualPipe's two chunks per rank and ``pp + 1``
    micro-batches, recomputed RMSNorms and MLA up-projections, FP8/E5M6 caches, the MTP module):
    ``memory_gib_deepseek_even`` with Megatron's even split of the layers, ``..._balanced`` with
    :data:`DEEPSEEK_V3_BALANCED_SPLIT`, ``..._combine`` with the balanced split and the experts' outputs kept for
    the combine (``probs_in_swiglu=False``), ``memory_gib_deepseek_1f1b`` the balanced split under 1F1B; each with
    ``fits_``, the most loaded ``rank_``, its ``states_gib_`` and ``activations_gib_`` and ``in_flight_``.

    What the step time does not model, and which way it leans: DualPipe's schedule (a smaller bubble; 1F1B's is
    used), the multi-token-prediction module (about 2% more FLOPs), grouped-GEMM efficiency and load imbalance
    (the dense kernel efficiency is used)."""
    from .catalog import get_model
    from .layouts import step_time
    from .memory import training_memory
    from .stages import published_stages
    from .time_cost import mfu_range_factors
    from .units import GiB

    gpu_memory_gib = check_number("gpu_memory_gib", gpu_memory_gib)
    m, par = get_model("deepseek-v3"), DEEPSEEK_V3_LAYOUT
    ds = published_stages()
    row = ds[(ds["run"] == "DeepSeek-V3") & (ds["phase"] == "pre-training")].iloc[0]
    tokens, published = float(row["tokens"]), float(row["phase_gpu_hours"])
    kw = dict(batch=1, seq=int(row["seq"]), grad_accum=DEEPSEEK_V3_MICRO_BATCHES, precision="fp8-deepseek")
    out = {"gpus": par.gpus, "tokens": tokens, "published_gpu_hours": published}
    for rc in ("none", "selective", "full"):
        r = training_memory(m, parallel=par, recompute=rc, **kw)
        out[f"memory_gib_{rc}"] = r.total_bytes / GiB
        out[f"fits_{rc}"] = r.total_bytes / GiB <= gpu_memory_gib
    out["states_gib"] = training_memory(m, parallel=par, recompute="full", **kw).states.total_bytes / GiB
    # DeepSeek's own recipe (deepseek_memory): DualPipe, recomputed RMSNorms and MLA up-projections, FP8 caches
    balanced = replace(par, stage_layers=DEEPSEEK_V3_BALANCED_SPLIT)
    for tag, p_, swiglu in (("even", par, True), ("balanced", balanced, True), ("combine", balanced, False)):
        r = deepseek_memory(m, p_, seq=kw["seq"], grad_accum=kw["grad_accum"], probs_in_swiglu=swiglu)
        top = r.ranks[r.rank]
        out[f"memory_gib_deepseek_{tag}"] = r.total_bytes / GiB
        out[f"fits_deepseek_{tag}"] = r.total_bytes / GiB <= gpu_memory_gib
        out[f"rank_deepseek_{tag}"] = r.rank
        out[f"states_gib_deepseek_{tag}"] = top["states"] / GiB
        out[f"activations_gib_deepseek_{tag}"] = top["activations"] / GiB
        out[f"in_flight_deepseek_{tag}"] = top["in_flight"]
    out["memory_gib_deepseek_1f1b"] = deepseek_memory(m, balanced, seq=kw["seq"], grad_accum=kw["grad_accum"],
                                                      schedule="1f1b").total_bytes / GiB
    low, high = mfu_range_factors("H800", "fp8")
    for tag, overlap in (("exposed", 0.0), ("dualpipe", 1.0)):
        st = step_time(m, "H800", par, ep_overlap=overlap, max_nodes=DEEPSEEK_V3_MAX_NODES, **kw)
        hours = tokens / st.tokens * st.step_s * par.gpus / 3600
        out[f"step_s_{tag}"] = st.step_s
        out[f"mfu_{tag}"] = st.mfu
        out[f"gpu_hours_{tag}"] = hours
        out[f"gpu_hours_{tag}_low"] = hours / high            # the band's fastest end
        out[f"gpu_hours_{tag}_high"] = hours / low
        out[f"inside_{tag}"] = hours / high <= published <= hours / low
        out[f"ratio_{tag}"] = published / hours
        if tag == "exposed":
            out["compute_s"], out["bubble_s"] = st.compute_s, st.bubble_s
            out["all_to_all_s"] = st.comm_by_group_s["ep"]
    return out


__all__ = ["check_ep", "expert_data_parallel", "dense_twin", "stage_moe_layers", "stage_split", "gpu_params",
           "moe_model_states", "moe_layer_terms", "moe_block_terms", "moe_activation_memory", "MoEActivationMemory",
           "stage_offset_bytes", "all_to_all_bytes",
           "inter_node_share", "ep_all_to_all", "moe_stage_flops", "FP8_DISPATCH_BYTES", "deepseek_v3_check",
           "DEEPSEEK_V3_LAYOUT", "DEEPSEEK_V3_BALANCED_SPLIT", "deepseek_layer_bytes", "deepseek_rebuilt_bytes",
           "deepseek_memory", "DeepSeekMemory"]
