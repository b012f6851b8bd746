"""Training a mixture of experts: expert parallelism's memory and its all-to-all (issue 24).

What is here, and which hooks call it (every other module only calls into this one):

* **Where the experts live** (:func:`stage_split`). ``Parallel(ep=...)`` splits each MoE layer's routed
  experts over ``ep`` GPUs the layout already has: expert parallelism adds no GPUs. Megatron-Core lays a
  second rank grid over the same world for the MoE layers (``megatron/core/parallel_state.py``,
  ``initialize_model_parallel``: the expert rank generator ``etp x ep x edp x pp``,
  ``expert_tensor_parallel_size`` defaulting to ``tensor_model_parallel_size``,
  ``expert_data_parallel_size = world_size // (etp x ep x pp)``, a ``RuntimeError`` unless it divides), so
  ``ep`` must divide ``tp x cp x dp / etp``; DeepSpeed-MoE likewise carves its expert groups out of the
  data-parallel ranks (``deepspeed/utils/groups.py``). Each GPU holds ``experts / ep`` experts of every MoE
  layer of its pipeline stage (Megatron-LM asserts ``num_experts % expert_model_parallel_size == 0``). The
  routed experts are not split by tensor parallelism unless ``Parallel(expert_tp=True)``: the default
  ``etp = 1`` is Megatron-LM's ``--expert-tensor-parallel-size 1`` (DeepSeek-V3's choice, and the usual one
  for fine-grained experts); Megatron-LM's own default, the flag left unset, is ``etp = tp``, which
  ``expert_tp=True`` gives. The expert grid puts the ``etp`` ranks next to each other, then ``ep`` (``etp``
  apart), then ``edp``: with ``etp = 1`` and ``tp = 8`` the eight GPUs of a node form an ``ep`` group. With
  ``tp > 1``, ``ep > 1`` needs sequence parallelism (Megatron-Core's ``TransformerConfig``). The router and
  the shared experts are dense layers: the router is replicated over ``tp`` (it is tiny), the shared experts
  are split like a dense MLP.
* **Model states** (:func:`moe_model_states`): the non-expert parameters as a dense model's (ZeRO over
  ``dp x cp``), the routed experts' weights, gradients and optimizer states divided by ``ep x etp``, their
  ZeRO/ distributed-optimizer shard taken over the ``edp = tp x cp x dp / (etp x ep)`` expert-data-parallel
  GPUs (Megatron-Core's ``get_expert_data_parallel_group``: the expert parameters' gradient buffers and
  distributed-optimizer shards live there).
* **Activations** (:func:`moe_layer_terms`, :func:`moe_activation_memory`): what one MoE layer saves for its
  backward with Megatron-Core's all-to-all token dispatcher (``megatron/core/transformer/moe/
  token_dispatcher.py``, ``MoEAlltoAllTokenDispatcher``; ``moe_utils.permute``/``unpermute``; ``router.py``;
  ``experts.py``'s ``GroupedMLP``/``TEGroupedMLP``): the router's input and its fp32 logits and scores
  (``tokens x experts``), the top-k probabilities and the routing map, the tokens each expert receives (its
  grouped GEMM's input, ``tokens x k x hidden`` on average per GPU: every GPU sends ``tokens x k`` rows and,
  under uniform routing, receives as many), each expert's intermediate (the activation function's input and
  output), the experts' outputs that the combine weights by the router's probabilities
  (``tokens x k x hidden``), and the shared experts' MLP activations. Dropless by default (Megatron-Core's
  ``--moe-expert-capacity-factor None``); with a capacity factor ``c`` and padding each GPU's experts hold
  ``c x tokens x k`` rows.
* **The all-to-all** (:func:`ep_all_to_all`): per MoE layer and micro-batch, the dispatch and the combine in
  the forward and their two conjugates in the backward (4; 6 with full recomputation, which repeats the
  forward's), each sending ``tokens x k x hidden x bytes x (ep - 1) / ep`` per GPU under uniform routing
  (GShard's and Megatron's accounting; ``measurements.moe_all_to_all_table`` checks it against a gloo
  measurement), priced by :func:`llmsizing.all_to_all.all_to_all_s` (serving's all-to-all on the network
  model, checked against DeepEP's published latencies) with the ``ep`` group placed like Megatron-Core's
  expert grid (``ep`` ranks ``etp`` apart), across nodes when ``ep x etp`` exceeds a scale-up domain.
  DeepSeek-V3's node-limited routing (each token to at most ``M = 4`` nodes, sent once per node over
  InfiniBand and forwarded over NVLink; DeepSeek-AI 2024, arXiv 2412.19437, Sec. 2.1.2 and 3.2.2) caps the
  inter-node bytes: ``max_nodes``. The all-to-all is exposed by default (it sits between the router and the
  experts). DeepSeek's DualPipe (Sec. 3.2.1) hides it by running one micro-batch's forward chunk against
  another's backward chunk, so that each chunk's all-to-all overlaps the other's computation: ``ep_overlap``
  (0 to 1) is the share hidden, 1 for DualPipe and 0 by default, as Megatron-Core's own all-to-all overlap is
  off by default (:func:`llmsizing.layouts.step_time` says what it hides).

The FLOPs of a mixture of experts are those of its active parameters (:mod:`llmsizing.flops`); the time they
take beyond that, the grouped GEMMs of small experts, the routing kernels and the load imbalance (the busiest
expert's GPU receives more than ``tokens x k``: the gloo measurement shows a skewed router's busiest rank at
1.2-2.1x the uniform bytes, :func:`llmsizing.dist_compare.compare_all_to_all`), is priced in
:mod:`llmsizing.moe_time` (issue 35). Chapter 18.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, replace

import numpy as np

from ._compat import forward as _forward
from ._validate import check_bool, check_choice, check_int, check_number
from .act_terms import (ACTIVATION_DTYPES, _check_fp8, _fp8_saved, _int_or_array, dense_activation_memory,
                        dense_layer_terms)
from .act_terms import ActivationMemory as _ActivationMemory
from .all_to_all import all_to_all_bytes, all_to_all_s, inter_node_share  # noqa: F401 (issue 24's home)
from .all_to_all import (_across_shares, _all_to_all_bytes, _all_to_all_s, check_dispatcher, distinct_reached,
                         node_limit, route_max_nodes, route_max_ranks)
from .catalog import resolve_model
from .model import Model
from .moe_arrays import EpLayouts, frame_layers as _frame_layers  # noqa: F401 (EpLayouts: moe35n)
from .network import Collective
from .parallel import Parallel, check_ep, layers_per_stage  # noqa: F401 (check_ep: issue 24's home)
from .parallel import kept_parallel
from .precision import DTYPE_BYTES, RECIPES
from .states import ModelStates, _states, _tp_share, edge_params

#: Bytes per element of DeepSeek-V3's FP8 all-to-alls: it quantises the activations to FP8 before the forward
#: dispatch (1 byte per element plus one fp32 scale per 128 elements), and the activation gradients before the
#: experts' down-projections, which the combine's backward sends along the dispatch's routes; both combine
#: components (the forward combine and the dispatch's backward) stay in BF16 (Sec. 3.3.3, "Low-Precision
#: Communication"; :func:`ep_all_to_all`). Every other recipe sends its working dtype all four ways.
FP8_DISPATCH_BYTES = 1.0 + 4 / 128


def _require_moe(model: Model, what: str) -> Model:
    if not model.is_moe:
        raise ValueError(f"{what}: {model.name!r} is dense (experts=0); give a mixture of experts")
    return model


def expert_data_parallel(par: Parallel) -> int:
    """The expert-data-parallel size :attr:`~llmsizing.parallel.Parallel.edp`, ``tp x cp x dp / (etp x ep)``:
    the GPUs that hold the same experts and over which their gradients are reduced and their optimizer states
    sharded (Megatron-Core's expert data-parallel group)."""
    return par.edp


def _most(values, par):
    """``max(values)``; elementwise for :class:`~llmsizing.moe_arrays.EpLayouts` (the same value: NumPy's
    maximum is exact)."""
    return np.maximum.reduce(list(values)) if type(par) is EpLayouts else max(values)


@functools.lru_cache(maxsize=64)
def dense_twin(model: Model) -> Model:
    """``model`` with its MoE fields cleared: every layer a dense block with the ``ffn_hidden`` MLP (chapter
    18 builds its dense comparison from it). The memory path no longer needs it: the dense terms read no MoE
    field."""
    return replace(model, experts=0, experts_per_token=0, expert_ffn_hidden=None, shared_experts=0,
                   shared_expert_ffn_hidden=None, shared_expert_gate=False, router_bias=False,
                   moe_layers=None, expert_groups=0, expert_groups_per_token=0,
                   name=f"{model.name} (dense twin)")


def _moe_indices(model: Model) -> frozenset:
    if model.moe_layers is None:
        return frozenset(range(model.layers))
    return frozenset(model.moe_layers)


def stage_moe_layers(model: Model, par: Parallel) -> tuple[int, ...]:
    """How many MoE layers each pipeline stage holds (its layers in order; the library's even split or
    ``stage_layers``). DeepSeek-V3's three dense layers all sit on the first stage."""
    return _moe_layer_counts(model, layers_per_stage(model.layers, par))


@functools.lru_cache(maxsize=1024)
def _moe_layer_counts(model: Model, sizes: tuple) -> tuple[int, ...]:
    """:func:`stage_moe_layers` for stages of ``sizes`` layers, kept (the planner asks for each ``pp``
    often)."""
    moe, out, start = _moe_indices(model), [], 0
    for n in sizes:
        out.append(sum(1 for i in range(start, start + n) if i in moe))
        start += n
    return tuple(out)


@functools.lru_cache(maxsize=2048)
def _split(model: Model, tp: int, pp: int, stage_layers, ep: int, expert_tp: bool) -> tuple:
    common, lin_common, d_mlp, d_lin, m_dense, m_lin, ex, ex_lin = _layer_split(model, tp, ep, expert_tp)
    out, seen = [], {}          # (stages of equal layers, MoE layers and edges: one row, worked out once)
    for frame in _stage_frame(model, tp, pp, stage_layers):
        if frame not in seen:
            n, k, first, last = frame
            dense = n * common + (n - k) * d_mlp + k * m_dense
            dense += first + last
            lin = n * lin_common + (n - k) * d_lin + k * m_lin
            seen[frame] = (dense, k * ex, lin, k * ex_lin, n)
        out.append(seen[frame])
    return tuple(out)


@functools.lru_cache(maxsize=512)
def _stage_frame(model: Model, tp: int, pp: int, stage_layers) -> tuple:
    """What :func:`_split` reads of the pipeline alone, per stage: its layers, its MoE layers, and the
    parameters outside the layers it holds (:func:`~llmsizing.states.edge_params`: the first stage's and the
    last's, else 0.0). Kept: the same for every ``ep`` (issue 35: a search splits each ``(tp, pp)`` once per
    ``ep``)."""
    par = kept_parallel(pp=pp, stage_layers=stage_layers)
    edge = edge_params(model, tp, pp)
    return tuple((n, k, edge["first"] if i == 0 else 0.0, edge["last"] if i == pp - 1 else 0.0)
                 for i, (n, k) in enumerate(zip(layers_per_stage(model.layers, par),
                                                stage_moe_layers(model, par))))


@functools.lru_cache(maxsize=256)
def _layer_split(model: Model, tp: int, ep: int, expert_tp: bool) -> tuple:
    """What one GPU holds of one layer, for :func:`_split` (kept: the same for every ``pp``): attention and
    norms (``common``, its matrices ``lin_common``), a dense layer's MLP (``d_mlp``, ``d_lin``), a MoE layer's
    dense part, router and shared experts (``m_dense``, ``m_lin``), its routed experts (``ex``,
    ``ex_lin``)."""
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
    return common, lin_common, d_mlp, d_lin, m_dense, m_lin, ex, ex_lin


def stage_split(model: Model, parallel: Parallel) -> list[dict]:
    """Per pipeline stage, the parameters one GPU holds: ``dense`` (embedding, attention, norms, dense MLPs,
    the router and the shared experts, split by ``tp`` as :func:`~llmsizing.gpu_states.stage_params` splits a
    dense model), ``experts`` (the routed experts of the stage's MoE layers, ``experts / ep`` of each, divided
    by ``tp`` only with ``expert_tp``), ``dense_linear`` and ``experts_linear`` (their matrices, which an FP8
    recipe copies), ``layers``."""
    names = ("dense", "experts", "dense_linear", "experts_linear", "layers")
    return [dict(zip(names, r)) for r in _rows(model, parallel)]


def _rows(model: Model, par: Parallel) -> tuple:
    """:func:`stage_split`'s rows as the kept tuples ``(dense, experts, dense_linear, experts_linear,
    layers)``, without a dict per stage (the memory's hot path reads one stage, or all of them, per call).
    :class:`EpLayouts`: an array ``(stage, column, layout)``."""
    if type(par) is EpLayouts:
        if model not in par._kept:              # (one array per distinct ep, then one entry per layout)
            keys = [(t, p, _frame_layers(model, par), e, x) for t, p, _, e, x in par.split_keys()]
            distinct = list(dict.fromkeys(keys))
            rows = np.array([_split(model, *k) for k in distinct], dtype=float).transpose(1, 2, 0)
            par._kept[model] = rows[:, :, [distinct.index(k) for k in keys]]
        return par._kept[model]
    return _split(model, par.tp, par.pp, _frame_layers(model, par), par.ep, par.expert_tp)



def gpu_params(model: Model, parallel: Parallel) -> list[float]:
    """Parameters on one GPU of each stage (dense + routed experts):
    :func:`~llmsizing.gpu_states.stage_params` for a mixture of experts."""
    return [r[0] + r[1] for r in _rows(model, parallel)]


def moe_model_states(model: Model, elements: float, precision: str, optimizer: str, par: Parallel,
                     stage: int):
    """The model states of one GPU of pipeline stage ``stage`` (a :class:`~llmsizing.memory.ModelStates`): the
    dense part with the dense rules (ZeRO over ``dp x cp``), the routed experts with ZeRO over the ``edp``
    expert-data-parallel GPUs (:func:`expert_data_parallel`). ``elements`` is the whole model's
    optimizer-state count (:func:`~llmsizing.memory.optimizer_state_elements`), split in proportion to the
    parameters."""
    on_dense, on_experts, dense_linear, experts_linear, layers = _rows(model, par)[stage]
    n_exp = model.routed_expert_params
    n_dense = model.n_params - n_exp
    dense = _states(n_dense, elements * n_dense / model.n_params, precision, optimizer, par,
                    on_rank=on_dense, linear=(dense_linear, layers))
    epar = par.experts() if type(par) is EpLayouts else kept_parallel(
        dp=expert_data_parallel(par), zero=par.zero, offload=par.offload,
        reshard_after_forward=par.reshard_after_forward)
    ex = _states(n_exp, elements * n_exp / model.n_params, precision, optimizer, epar,
                 on_rank=on_experts, linear=(experts_linear, 0))
    return ModelStates(model.n_params, precision, optimizer,
                       dense.weights_bytes + ex.weights_bytes, dense.gradients_bytes + ex.gradients_bytes,
                       dense.master_bytes + ex.master_bytes,
                       dense.optimizer_state_bytes + ex.optimizer_state_bytes, par,
                       dense.host_bytes + ex.host_bytes, dense.fp8_weights_bytes + ex.fp8_weights_bytes,
                       dense.fp8_meta_bytes + ex.fp8_meta_bytes)


def foreach_temporary_bytes(model: Model, state_bytes: float, par: Parallel) -> float:
    """:func:`~llmsizing.memory.optimizer_temporaries_bytes`'s ``foreach`` temporary (one state-sized buffer,
    the ``sqrt`` of every second moment at once) for a mixture of experts: the most loaded stage's parameters
    with ZeRO >= 1 sharding the dense part over ``dp x cp`` and the routed experts over ``edp``."""
    shard = par.zero >= 1
    dense_over, experts_over = (par.dp_cp, expert_data_parallel(par)) if shard else (1, 1)
    if type(par) is EpLayouts:                 # (stage, layout): each entry as below, the max exact
        rows = _rows(model, par)
        return state_bytes * (rows[:, 0] / dense_over + rows[:, 1] / experts_over).max(axis=0)
    return state_bytes * _most((dense / dense_over + experts / experts_over     # (equal stages: one row)
                                for dense, experts, *_ in dict.fromkeys(_rows(model, par))), par)


def largest_tensor(model: Model, par: Parallel) -> float:
    """The largest parameter tensor on one GPU, times ``tp`` (the ``for-loop`` optimizer path's temporaries
    divide by ``tp``): a stacked routed-expert tensor holds ``experts / ep`` experts (``/ tp`` with
    ``expert_tp``)."""
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
    """Bytes one MoE layer's MLP part saves for its backward on one GPU, by piece (``seq`` is this GPU's
    tokens of each sequence, i.e. already divided by ``cp``). ``T = batch x seq`` tokens (``/ tp`` with
    sequence parallelism), ``E`` routed experts, top-``k``, hidden ``h``, expert width ``f_e``, shared width
    ``f_s = shared_experts x shared width``; ``p`` the working dtype's bytes, FP8 recipes as
    :func:`~llmsizing.activations.layer_terms` (``q_in`` for a Linear input, ``mlp_f`` per intermediate
    element):

    * ``router``: its input ``p T h`` (the norm output, which the shared experts' first Linear also reads:
      counted once unless FP8 saves a separate FP8 copy) + fp32 logits and scores ``8 T E`` (the softmax or
      sigmoid saves its output; Megatron-Core's router keeps logits in fp32, ``--moe-router-dtype fp32``) +
      the routing map ``T E`` (bool) + the top-k probabilities ``4 T k``;
    * ``dispatch``: the rows each GPU's experts receive, ``R = T k`` (dropless) or ``c T k`` (capacity factor
      ``c`` with padding), saved as the grouped GEMM's input: ``q_in R h``; with ``expert_tp`` the dispatcher
      also all-gathers the rows of the ``tp`` ranks of an expert-tensor-parallel group (Megatron-Core's
      ``MoEAlltoAllTokenDispatcher`` with ``etp > 1``), so ``R = tp T k`` there;
    * ``experts``: the experts' intermediate, ``mlp_f R f_e`` (``f_e / tp`` with ``expert_tp``);
    * ``combine``: the experts' outputs before they are weighted by the router's probabilities (the
      probability gradient needs them), ``p R h``;
    * ``shared``: the shared experts' intermediate ``mlp_f T f_s / tp`` (+ their FP8 input copy).

    The all-to-all's send and receive buffers are transient (freed once the grouped GEMM has its input) and
    not counted. Exact for the tensors listed; what Megatron-Core's fused permute kernels keep beyond them
    (index maps, ``T k`` int32) is left out (under 1% of a layer at hidden sizes above 1,000)."""
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
    """:class:`~llmsizing.activations.ActivationMemory` of a mixture of experts: ``per_layer_bytes`` is the
    mean over its layers; ``moe_delta_bytes`` is what a MoE layer keeps beyond a dense one (0 with full
    recomputation, which keeps only each layer's input) and ``moe_layers`` the MoE layers' indices, so that a
    pipeline stage counts its own mix (:func:`stage_offset_bytes`)."""

    moe_delta_bytes: float = 0.0
    moe_layers: tuple = ()


def moe_activation_memory(model: Model, *, capacity_factor: float | None = None, expert_tp: bool = False,
                          **kw):
    """:func:`~llmsizing.activations.activation_memory` for a mixture of experts: the dense terms of its
    layers (:func:`~llmsizing.act_terms.dense_activation_memory`: norms, attention, embedding, logits), with
    each MoE layer's dense MLP term replaced by :func:`moe_layer_terms` (the difference goes into the
    ``"mlp"`` component). Full recomputation keeps only the layer inputs, and the rebuilt layer is a MoE one;
    selective recomputation keeps the MoE part (it reruns only the attention core)."""
    if kw.get("stack", "fused") != "fused" or kw.get("autocast"):
        raise ValueError(f"stack={kw.get('stack')!r}, autocast={kw.get('autocast')!r}: a mixture of experts' "
                         "activations are modelled for stack='fused' without autocast (Megatron-Core's token "
                         "dispatcher) only")
    base = dense_activation_memory(model, **kw)      # norms, attention, embedding, logits: as a dense layer's
    cp = kw.get("cp", 1)
    seq = kw["seq"] // cp
    lt = {k: v for k, v in kw.items() if k in ("batch", "dtype", "attention", "dropout", "tp", "sp",
                                               "mask_bytes", "stack", "autocast", "fp8")}
    dense_mlp = dense_layer_terms(model, seq=seq, **lt)["mlp"]
    terms = moe_layer_terms(model, batch=kw["batch"], seq=seq, dtype=kw.get("dtype", "bf16"),
                            tp=kw.get("tp", 1), sp=kw.get("sp", False), fp8=kw.get("fp8"),
                            capacity_factor=capacity_factor, expert_tp=expert_tp)
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
    return MoEActivationMemory(per_layer, base.layers_bytes + add, base.embedding_bytes, base.logits_bytes,
                               bd, base.layer_count, base.recomputed,
                               moe_delta_bytes=0.0 if kw.get("recompute") == "full" else delta,
                               moe_layers=tuple(sorted(_moe_indices(model))))


def stage_offset_bytes(acts, par: Parallel, stage: int) -> float:
    """What one micro-batch of pipeline stage ``stage`` keeps beyond ``layers x per_layer_bytes`` (the mean
    over the model's layers): ``(k - n x n_moe / L) x delta`` for a stage of ``n`` layers of which ``k`` are
    MoE layers, ``delta`` a MoE layer's bytes minus a dense layer's (:class:`MoEActivationMemory`); 0 for a
    dense model. DeepSeek-V3's first stage holds its three dense layers and one MoE layer."""
    if not isinstance(acts, MoEActivationMemory) or not acts.moe_delta_bytes:
        return 0.0
    sizes = layers_per_stage(acts.layer_count, par)
    k, n_moe = _moe_in_stage(acts.moe_layers, sizes, stage)
    return (k - sizes[stage] * n_moe / acts.layer_count) * acts.moe_delta_bytes


@functools.lru_cache(maxsize=1024)
def _moe_in_stage(moe_layers: tuple, sizes: tuple, stage: int) -> tuple[int, int]:
    """How many of ``moe_layers`` (layer indices) stage ``stage`` of ``sizes`` layers holds, and how many
    distinct ones there are: kept for :func:`stage_offset_bytes` (issue 35: the planner asks per stage
    weighed of every pipeline its search builds)."""
    moe = set(moe_layers)
    start = sum(sizes[:stage])
    return sum(1 for i in range(start, start + sizes[stage]) if i in moe), len(moe)


def moe_block_terms(model: Model, *, capacity_factor: float | None = None, **kw) -> dict[str, float]:
    """What one MoE layer saves, by :func:`~llmsizing.activations.layer_terms`'s components: the dense layer's
    norms, attention and masks, and under ``"mlp"`` the sum of :func:`moe_layer_terms` (``kw`` are
    ``layer_terms``'s arguments; the ``"fused"`` stack only)."""
    if kw.get("stack", "fused") != "fused" or kw.get("autocast") or kw.get("selective"):
        raise ValueError("a mixture of experts' layer is modelled for stack='fused', autocast=False and "
                         "without selective=True (Megatron-Core's token dispatcher)")
    t = dense_layer_terms(model, **kw)
    t["mlp"] = sum(moe_layer_terms(model, batch=kw["batch"], seq=kw["seq"], dtype=kw.get("dtype", "bf16"),
                                   tp=kw.get("tp", 1), sp=kw.get("sp", False), fp8=kw.get("fp8"),
                                   capacity_factor=capacity_factor).values())
    return t


# ----------------------------------------------------------------------------- the all-to-all


def ep_all_to_all(model: Model, par: Parallel, *, batch: int, seq: int, gpu, node, grad_accum: int,
                  precision: str, recompute: str, max_nodes: int | str | None = None,
                  dispatcher: str = "alltoall", _tokens=None) -> list:
    """The expert-parallel all-to-alls of one step on the GPU of the stage with the most MoE layers, as
    :class:`~llmsizing.network.Collective` rows (group ``"ep"``): per MoE layer and micro-batch the forward
    dispatch (in FP8 with ``fp8-deepseek``: :data:`FP8_DISPATCH_BYTES`), the forward combine, and the
    backward's two: the combine's backward (the gradients of the combine's output sent back along the
    dispatch's routes; FP8 too with ``fp8-deepseek``, which quantises the activation gradient before the
    experts' down-projection, arXiv:2412.19437 Sec. 3.3.3) and the dispatch's backward (in the working dtype,
    as the forward combine); full recomputation repeats the forward's two. Each sends
    :func:`all_to_all_bytes` and takes :func:`llmsizing.all_to_all.all_to_all_s` of its
    ``tokens x k x hidden`` buffer, the model serving uses (within 0.90-0.99x of DeepEP's published H800
    low-latency kernels at EP 16-256), with DeepSeek's node limit ``max_nodes`` and the ``ep`` ranks ``etp``
    apart: inside a scale-up domain over NVLink; across domains the cross-node share over the GPU's own NIC
    and, concurrently, an NVLink leg: with a node limit DeepEP's forwarding, ``(domain - 1) / domain`` of the
    buffer (each copy forwarded by the node's receiving GPU; 0.95-0.99x of DeepEP's normal kernels at EP
    16-64, ``tests/test_deepep_forwarding.py``), without one the own node's ``(domain - 1) / ep``
    (:func:`llmsizing.all_to_all.all_to_all_s` says why). A row's bytes are what the GPU sends in it, as
    the time counts them; across domains both legs' (``all_to_all._across_shares``), which run at once, so
    its ``link`` names both (``"network + NVLink"``). Its ``bandwidth_gbps`` is the effective rate (those
    bytes / that time, latency included; across domains over both links together, so above either alone),
    its ``latency_s`` 0. ``_tokens``: a NumPy array of the tokens a GPU routes in place of the layout's
    (``batch``, ``tp``, ``cp`` then unread), the rows' numbers arrays of them, element by element the same
    arithmetic (issue 35: :func:`llmsizing.plan_moe.moe_all_to_all_s` prices every token count of a group of
    links at once).

    Group-limited routing inside one scale-up domain (issue 35): when the model's own groups
    (:func:`llmsizing.all_to_all.route_max_ranks`, its config's ``n_group`` / ``topk_group``) put a token's
    ``k`` experts on at most ``M < k`` of the ``ep`` GPUs, the token is sent once to each GPU it reaches, not
    once per expert: DeepSeek-V2's device-limited routing (arXiv:2405.04434, Sec. 2.2.2: a token's
    communication grows with the devices its experts cover; top-6 on at most ``M = 3`` of its 8 GPUs), so a
    GPU's buffer is ``tokens x M x hidden`` and ``(ep - 1) / ep`` of it leaves, the form
    :func:`inter_node_share` gives node-limited routing with one GPU a node (``min(k, M, ep) / k x
    (ep - 1) / ep`` of the ``k`` copies). An upper bound, as there: a token whose experts fall on fewer than
    ``M`` GPUs sends fewer copies. Across domains the node limit (``max_nodes``) prices the network share as
    before and the GPUs inside a node are not limited further. ``max_nodes="model"`` is the model's own
    routing for this layout: :func:`llmsizing.all_to_all.route_max_nodes` of ``ep`` ranks,
    ``domain / etp`` of them a node (issue 35: a group wider than a node reaches several).

    ``dispatcher`` (:data:`llmsizing.all_to_all.DISPATCHERS`): ``"alltoall"``, the default, all of the above
    (Megatron-Core's ``alltoall`` dispatcher, ``k`` copies a token, except where the group- or node-limited
    routing above already sends a token once per GPU or node it reaches, as DeepSeek's kernels do, whichever
    dispatcher is named); ``"deepep"`` (its ``flex`` dispatcher on
    DeepEP) a token once to each GPU it reaches, the model's ``experts`` drawn without replacement, and
    once to each node, forwarded (:func:`llmsizing.all_to_all.all_to_all_s`); a row's bytes are then the
    ones it sends, a token once a GPU (and across domains once a node on the network leg), as with a node
    limit (lows29: they were the ``k``-copy buffer's across domains, against a deduplicated time)."""
    if par.ep == 1 or not model.is_moe:
        return []
    disp = check_dispatcher(dispatcher)
    max_nodes = node_limit(max_nodes)
    if max_nodes == "model":
        max_nodes = route_max_nodes(model, par.ep, max(1, node.scaleup_domain_gpus // par.etp))
    recipe = RECIPES[precision]
    act_b = 2.0 if recipe.autocast else DTYPE_BYTES[recipe.weights]
    disp_b = FP8_DISPATCH_BYTES if precision == "fp8-deepseek" else act_b
    tokens = batch * (seq // par.cp) / (par.tp if par.sp else 1) if _tokens is None else _tokens
    k, h, ep = model.experts_per_token, model.hidden, par.ep
    calls = max(stage_moe_layers(model, par)) * grad_accum
    fwd = 2 if recompute == "full" else 1
    across = ep * par.etp > node.scaleup_domain_gpus
    ranks = None if across else route_max_ranks(model, ep)
    reach = 1.0                           # (the share of the k copies sent: deepep's distinct GPUs a token)
    d = max(1, node.scaleup_domain_gpus // par.etp)                  # (the group's GPUs a domain)
    if across:                            # both legs' bytes: deduplicated as the time counts them (lows29)
        share, near = _across_shares(ep, d, k, max_nodes, disp.once_per_gpu, model.experts / ep)
        reach = (share + (near if d > 1 else 0.0)) * ep / (ep - 1)
    elif disp.once_per_gpu:
        reach = (min(k, ranks) if ranks is not None and ranks < k
                 else distinct_reached(k, ep, model.experts / ep)) / k
    elif ranks is not None and ranks < k:   # device-limited routing inside one domain: once per GPU reached
        k = ranks
    out, seconds = [], {}     # (bytes and all_to_all_s per buffer: two kinds, one without FP8 dispatch)
    for name, b, n_calls in (("EP all-to-all dispatch (forward)", disp_b, calls * fwd),
                             ("EP all-to-all combine (forward)", act_b, calls * fwd),
                             ("EP all-to-all combine (backward)", disp_b, calls),
                             ("EP all-to-all dispatch (backward)", act_b, calls)):
        if b not in seconds:
            seconds[b] = ((all_to_all_bytes if _tokens is None else _all_to_all_bytes)(tokens, k, h, b, ep)
                          * reach,
                          _all_to_all_s(tokens * k * h * b, ep, gpu, node, k, max_nodes, par.etp, disp,
                                        model.experts, ranks))
        one, t = seconds[b]
        link = gpu.link if not across else "network" if d == 1 else f"network + {gpu.link}"
        out.append(Collective(name, "ep", ep, link, n_calls, one, n_calls * one, one / t / 1e9, 0.0))
    return out


def moe_layer_flops(model: Model, *, seq: int, recompute: str = "none") -> tuple[float, float]:
    """Training FLOPs per token of one dense layer and one MoE layer of ``model`` (:func:`moe_stage_flops`'s
    terms): ``3 x`` the forward (``2 x`` the layer's weights, active ones in a MoE layer, plus the attention
    core), plus what ``recompute`` reruns."""
    from .flops import RECOMPUTE, attention_flops_per_token

    check_choice("recompute", recompute, RECOMPUTE)
    att = attention_flops_per_token(model, seq=seq) / model.layers
    moe_mlp = {n for _, n, _ in model._moe_mlp_tensors()}
    common = sum(math.prod(s) * model.active_share(n) for _, n, s in model.layer_tensors("moe")  # attention
                 if n not in moe_mlp)                      # experts: k of E (Model.active_share)
    dense_mlp = sum(math.prod(s) for _, _, s in model._mlp_tensors("", model.ffn_hidden))
    moe_active = sum(math.prod(s) * model.active_share(n) for _, n, s in model._moe_mlp_tensors())

    def layer(params):
        fwd = 2 * params + att
        return 3 * fwd + {"none": 0.0, "selective": att, "full": fwd}[recompute]

    return layer(common + dense_mlp), layer(common + moe_active)


def moe_stage_flops(model: Model, par: Parallel, *, seq: int, recompute: str,
                    recompute_layers: int | None = None, mtp_depth: int = 0) -> tuple[float, ...]:
    """Training FLOPs per token of each pipeline stage of a mixture of experts (all its tensor-parallel
    ranks), splitting :func:`~llmsizing.flops.training_flops_per_token` (active parameters) by the stage's
    dense and MoE layers: a dense layer costs ``2 x`` its parameters forward, a MoE layer ``2 x`` its active
    ones (attention and the shared experts, ``k`` of its ``E`` experts, the router), plus each layer's
    attention core; the LM head on the last stage. Recomputation as in :mod:`llmsizing.flops`.
    ``mtp_depth`` multi-token-prediction modules (:func:`mtp_flops_per_token`) join the
    last stage, as DeepSeek-V3 places its MTP module with the output head (Sec. 3.2.1)."""
    from .flops import RECOMPUTE, training_flops_per_token

    check_choice("recompute", recompute, RECOMPUTE)
    if recompute_layers is not None:
        raise ValueError(f"recompute_layers={recompute_layers!r}: partial recomputation of a mixture of "
                         "experts is not modelled (use recompute='none', 'selective' or 'full')")
    total = training_flops_per_token(model, seq=seq, recompute=recompute)
    d, m = moe_layer_flops(model, seq=seq, recompute=recompute)
    out, moe_by_stage = [], stage_moe_layers(model, par)
    for n, k in zip(layers_per_stage(model.layers, par), moe_by_stage):
        out.append((n - k) * d + k * m)
    out[-1] += total - sum(out)                     # the LM head
    if check_int("mtp_depth", mtp_depth, minimum=0, maximum=8):
        out[-1] += mtp_flops_per_token(model, seq=seq, depth=mtp_depth, recompute=recompute)
    return tuple(out)


def mtp_flops_per_token(model: Model, *, seq: int, depth: int = 1, recompute: str = "none") -> float:
    """Training FLOPs per token of ``depth`` multi-token-prediction modules (DeepSeek-V3, arXiv:2412.19437
    Sec. 2.2, Fig. 3): each a MoE transformer block (:func:`moe_layer_flops`), its projection ``M`` from the
    concatenated ``2h`` to ``h`` and its own pass through the shared output head (``h x vocab``); the shared
    embedding is a lookup. Forward ``2 x`` weights, x 3 for training (the projection and the head sit outside
    the recomputed blocks)."""
    depth = check_int("depth", depth, minimum=0, maximum=8)
    h = model.hidden
    block = moe_layer_flops(model, seq=check_int("seq", seq), recompute=recompute)[1]
    return depth * (block + 3 * 2 * (2 * h * h + h * model.vocab))


def check_capacity_factor(capacity_factor):
    """``None`` (dropless) or a capacity factor from 1 to 64 (Megatron-Core's
    ``--moe-expert-capacity-factor``)."""
    if capacity_factor is None:
        return None
    return check_number("capacity_factor", capacity_factor, minimum=1.0, maximum=64.0)


# ------------------------------------------------------------------------- DeepSeek-V3 (issue 24's done-when)


__all__ = ["check_ep", "expert_data_parallel", "dense_twin", "stage_moe_layers", "stage_split", "gpu_params",
           "moe_model_states", "moe_layer_terms", "moe_block_terms", "moe_activation_memory",
           "MoEActivationMemory", "stage_offset_bytes", "all_to_all_bytes",
           "inter_node_share", "ep_all_to_all", "moe_stage_flops", "moe_layer_flops", "mtp_flops_per_token",
           "FP8_DISPATCH_BYTES"]

# DeepSeek-V3's own plan and check moved to llmsizing.deepseek (issue 32: it sits above the answers it
# checks).
__getattr__ = _forward(__name__, {name: "llmsizing.deepseek" for name in (
    "DEEPSEEK_V3_LAYOUT", "DEEPSEEK_V3_MICRO_BATCHES", "DEEPSEEK_V3_MAX_NODES", "DEEPSEEK_V3_BALANCED_SPLIT",
    "DEEPSEEK_V3_MTP_DEPTH", "deepseek_layer_bytes", "deepseek_rebuilt_bytes", "DeepSeekMemory",
    "deepseek_memory", "deepseek_v3_check")})
