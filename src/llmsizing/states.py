"""Model states per GPU (chapter 2, "Bytes per parameter"; chapter 7 for ZeRO): the weights, gradients and
optimizer states one GPU holds under a layout, the allowances for what no formula models, and the share of GPU
memory a plan may fill. A mixture of experts' split of the same states is :mod:`llmsizing.moe`'s; the public
:func:`~llmsizing.gpu_states.model_states` picks one of them. Sources are listed in
:mod:`llmsizing.precision`.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

from ._validate import check_choice, check_int, check_number
from .catalog import resolve_model
from .model import Model
from .parallel import Parallel, layers_per_stage, resolve_parallel
from .precision import DTYPE_BYTES, OPTIMIZERS, RECIPES, check_recipe
from .units import GiB


#: A fixed allowance for what no formula here models: the CUDA context and kernels (~0.3-0.6 GiB with
#: lazy module loading), cuBLAS/cuDNN workspaces and NCCL communication buffers. An allowance, not a
#: measurement; pass ``overhead_bytes=`` to use your own figure.
FIXED_OVERHEAD_BYTES = 1 * GiB


#: Allocator fragmentation as a fraction of the modelled tensors: a guess (issue 26), not fitted. The
#: published pairs (issue 34: ``data/allocator_fragmentation.csv``,
#: :func:`llmsizing.allocator_fragmentation.measured_fragmentation`) do not support it: PyTorch's caching
#: allocator with its default settings reserved 4-88% over the peak of active tensors (median 27%, 40 runs
#: from 5 sources: torchtitan, llama-recipes, GMLake's DeepSpeed/FSDP baselines, Giles Thomas's DeepSpeed
#: sweeps; 4 of them under 8%), and 9-50% over the peak of allocated ones (3 runs, 2 sources). With
#: ``expandable_segments:True``, which torchtitan has set since 2024-10, the one source that published it
#: (Giles Thomas's sweeps, each sweep also run without it) reserved 8-31% over the active peak
#: (median 17%, 15 runs; 1 of them under 8%): less than the default, still more than 8%
#: (:func:`~llmsizing.allocator_fragmentation.fragmentation_allowance` gives the value per setting). One
#: source, one stack (Hugging Face + DeepSpeed, fp16) is too narrow to change the book's default, so the
#: value stays as it was. Chapter 3's verdicts do not rest on it; chapter 4b names a fit that does
#: (Llama-3-8B at 8K tokens, Hugging Face stack in bf16-mixed, on an H100), and so does Llama 3 405B's 8K
#: layout without recomputation on 8,192 GPUs (it fits only without the allowance; on 16,384 GPUs it leaves
#: about 10% of its tensors, above the allowance and below the published median: chapter 8,
#: :func:`fragmentation_room`). Pass ``overhead_bytes=`` to use your own figure.
FRAGMENTATION = 0.08


def default_overhead_bytes(tensor_bytes: float) -> float:
    """The book's default allowance: :data:`FIXED_OVERHEAD_BYTES` + :data:`FRAGMENTATION` x modelled
    tensors."""
    return FIXED_OVERHEAD_BYTES + FRAGMENTATION * tensor_bytes


def total_with_allowance_bytes(peak_bytes):
    """What a step whose modelled peak is ``peak_bytes`` (a number or a NumPy array) needs with the book's
    default allowance on it (:func:`default_overhead_bytes`): ``FIXED_OVERHEAD_BYTES + (1 + FRAGMENTATION) x
    peak``, the rule the planner's arrays and the fewest-GPU searches test a layout's fit with (chapter 3; the
    one place it is written, session 25). Equal to ``peak + default_overhead_bytes(peak)`` but for the last
    bits of the float sum, which :attr:`~llmsizing.footprint.TrainingMemory.total_bytes` adds that way."""
    return FIXED_OVERHEAD_BYTES + (1 + FRAGMENTATION) * peak_bytes


def peak_room_bytes(limit_bytes):
    """The largest modelled peak whose :func:`total_with_allowance_bytes` stays within ``limit_bytes`` (a
    number or a NumPy array): ``(limit - FIXED_OVERHEAD_BYTES) / (1 + FRAGMENTATION)``, the inverse of the
    allowance rule (chapter 3; :func:`~llmsizing.memory.activation_room_bytes`, the planner's recomputation
    and the fewest-GPU searches)."""
    return (limit_bytes - FIXED_OVERHEAD_BYTES) / (1 + FRAGMENTATION)


def fragmentation_room(limit_bytes: float, peak_bytes: float) -> float:
    """The fragmentation a memory limit leaves room for above a modelled peak: the fraction ``f`` with
    ``FIXED_OVERHEAD_BYTES + (1 + f) x peak_bytes = limit_bytes``, i.e. ``(limit - FIXED_OVERHEAD_BYTES) /
    peak - 1`` (negative if even ``f = 0`` does not fit). To set against :data:`FRAGMENTATION` and the
    published pairs of :func:`~llmsizing.allocator_fragmentation.measured_fragmentation` (chapters 5 and 8:
    a run that trained left at least this much). ValueError for a peak that is not positive."""
    limit = check_number("limit_bytes", limit_bytes)
    peak = check_number("peak_bytes", peak_bytes, allow_equal=False)
    return (limit - FIXED_OVERHEAD_BYTES) / peak - 1


def _frame(rows: dict[str, float], n_params: int):
    import pandas as pd

    df = pd.DataFrame({"bytes": pd.Series(rows, dtype="float64")})
    df["GiB"] = df["bytes"] / GiB
    df["bytes/param"] = df["bytes"] / n_params
    df.index.name = "component"
    return df


@dataclass(frozen=True)
class ModelStates:
    """Bytes of the model states on one GPU. ``optimizer_bytes`` includes the fp32 master copy
    (``master_bytes``) and the optimizer's own buffers (``optimizer_state_bytes``). With an ``offload`` layout
    (:data:`~llmsizing.parallel.OFFLOADS`) the offloaded bytes are not on the GPU: ``host_bytes`` is what this
    GPU's share costs in the host's memory (multiply by the GPUs per node for a node's RAM).

    An FP8 recipe (:data:`~llmsizing.precision.FP8_SCHEMES`) adds ``fp8_weights_bytes``, the FP8 copies of the
    Linear weights that Transformer Engine caches (DeepSeek-V3: one block-scaled copy), and
    ``fp8_meta_bytes``, its scaling state (amax histories and scales: kilobytes per layer). Both are in
    :attr:`total_bytes`."""

    n_params: int
    precision: str
    optimizer: str
    weights_bytes: float
    gradients_bytes: float
    master_bytes: float
    optimizer_state_bytes: float
    parallel: Parallel = Parallel()
    host_bytes: float = 0.0
    fp8_weights_bytes: float = 0.0
    fp8_meta_bytes: float = 0.0

    @property
    def optimizer_bytes(self) -> float:
        return self.master_bytes + self.optimizer_state_bytes

    @property
    def working_weights_bytes(self) -> float:
        """The weights the step computes with: :attr:`weights_bytes` plus an FP8 recipe's weight copies and
        scaling state (what :func:`step_phases` counts as alive under "weights")."""
        return self.weights_bytes + self.fp8_weights_bytes + self.fp8_meta_bytes

    @property
    def total_bytes(self) -> float:
        return self.working_weights_bytes + self.gradients_bytes + self.optimizer_bytes

    @property
    def bytes_per_param(self) -> float:
        """Bytes on this GPU divided by the model's parameter count: the familiar 16 (bf16-mixed AdamW) on one
        GPU; with ``parallel`` it is the most loaded GPU's share (a little over 8 with ``Parallel(tp=2)``: the
        norms are replicated)."""
        return self.total_bytes / self.n_params

    def to_frame(self):
        """A DataFrame with one row per component (weights, gradients, master copy, optimizer states, total;
        with an FP8 recipe also its FP8 weight copies and scaling state)."""
        rows = {"weights": self.weights_bytes, "gradients": self.gradients_bytes,
                "master copy": self.master_bytes, "optimizer states": self.optimizer_state_bytes}
        if RECIPES[self.precision].fp8:
            rows |= {"FP8 weight copies": self.fp8_weights_bytes, "FP8 scaling state": self.fp8_meta_bytes}
        return _frame({**rows, "total": self.total_bytes}, self.n_params)


def muon_matrix_params(model: Model | str) -> int:
    """Parameters Muon orthogonalises, the "hidden matrices": every tensor of two or more dimensions in the
    blocks (attention, MLP, experts' stacks, routers), not the embedding, learned positions or LM head, which
    stay on AdamW with the vectors (Jordan et al. 2024, "Muon: An optimizer for hidden layers in neural
    networks"; its reference ``Muon`` takes ``p.ndim >= 2`` hidden parameters). Chapter 2."""
    model = resolve_model(model, moe=True)
    return sum(math.prod(s) * k for kind, _, s, k in model.tensors()
               if len(s) >= 2 and kind not in ("embedding", "position", "lm_head"))


def optimizer_state_elements(model: Model | str, optimizer: str) -> float:
    """How many numbers the optimizer keeps (before choosing their dtype).

    Adafactor's factored second moment keeps ``r + c`` numbers per ``r x c`` matrix and the full vector for
    1-D tensors (Shazeer & Stern 2018, Alg. 4), so it is computed tensor by tensor from :meth:`Model.tensors`,
    with a model's :attr:`~llmsizing.model.Model.fused_qkv` query, key and value weights as the one matrix
    its module holds (GPT-2's ``c_attn``, 768 x 2,304: ``768 + 2,304`` numbers, not ``3 x (768 + 768)``).
    Muon keeps one buffer for each hidden matrix (the blocks' tensors of two or more dimensions) and AdamW's
    two for the embedding, the positions, the LM head and every vector (Jordan et al. 2024).
    """
    model = resolve_model(model, moe=True)
    opt = OPTIMIZERS[check_choice("optimizer", optimizer, OPTIMIZERS)]
    n = opt.states * model.n_params
    if opt.matrix_states is not None:   # Muon: the hidden matrices (experts' stacks too) keep fewer buffers
        n -= (opt.states - opt.matrix_states) * muon_matrix_params(model)
    if opt.factored:
        n += _factored_elements(model)
    return n


#: The weights a :attr:`~llmsizing.model.Model.fused_qkv` model holds as rows of one matrix.
_QKV_WEIGHTS = ("layers.q_proj.weight", "layers.k_proj.weight", "layers.v_proj.weight")


def _factored_elements(model: Model) -> int:
    """Adafactor's second moment: ``r + c`` per ``r x c`` matrix, the whole of any other tensor; fused q, k, v
    weights (same input width, same layers) count as one matrix of their rows together."""
    fused = {}
    n = 0
    for _, name, s, k in model.tensors():
        if model.fused_qkv and name in _QKV_WEIGHTS and len(s) == 2:
            fused.setdefault((s[1], k), []).append(s[0])
        else:
            n += (s[0] + s[1] if len(s) == 2 else math.prod(s)) * k
    return n + sum((sum(rows) + cols) * k for (cols, k), rows in fused.items())


@functools.lru_cache(maxsize=64)
def _kept_state_elements(model: Model, optimizer: str) -> float:
    """:func:`optimizer_state_elements` kept per ``(model, optimizer)`` (issue 35: a planner's search asks for
    it on every model-states side it works out, a few hundred times)."""
    return optimizer_state_elements(model, optimizer)


def model_states_for_params(n_params: int, *, precision: str = "bf16-mixed", optimizer: str = "adamw",
                            parallel: Parallel | None = None) -> ModelStates:
    """:func:`model_states` for a bare parameter count, when there is no architecture to build (for example
    "a 10B model" in an article). Same recipes, same ZeRO rules.

    Only for optimizers whose state is elementwise (everything but Adafactor, whose factored moment depends on
    the tensor shapes, and Muon, which treats the hidden matrices apart: build a
    :class:`~llmsizing.model.Model` for them). With an FP8 recipe every parameter is
    counted as a Linear weight with an FP8 copy (an upper bound: the embeddings and norms have none; the
    blocks' matrices are 87% of Llama 3 8B) and the scaling state is left out (no layer count). Taught in
    chapter 2.
    """
    n = check_int("n_params", n_params)
    check_recipe("precision", precision)
    opt = OPTIMIZERS[check_choice("optimizer", optimizer, OPTIMIZERS)]
    if opt.shape_dependent:
        why = "factored" if opt.factored else "hidden matrices apart"
        raise ValueError(f"optimizer={optimizer!r} has a state that depends on the tensor shapes ({why}): "
                         "use model_states with a Model")
    return _states(n, opt.states * n, precision, optimizer, resolve_parallel(parallel))


def _tp_share(name: str, model: Model, tp: int) -> float:
    """The fraction of one parameter tensor that each tensor-parallel rank holds (Megatron-LM's layout,
    Shoeybi et al. 2019): column-parallel matrices and their biases (q, k, v, gate, up) and row-parallel
    matrices (o, down) are split; row-parallel biases, norms and learned positions are replicated; the
    embedding and the LM head are split along the vocabulary. K and V are split by KV head, at least one head
    per rank (replicated beyond ``kv_heads``, as vLLM does)."""
    if tp == 1:
        return 1.0
    if any(k in name for k in ("norm", "embed_positions")) or name.endswith(("o_proj.bias",
                                                                             "down_proj.bias")):
        return 1.0
    if "k_proj" in name or "v_proj" in name:
        return max(model.kv_heads / tp, 1) / model.kv_heads
    return 1.0 / tp


def edge_params(model: Model, tp: int, pp: int) -> dict[str, float]:
    """Parameters outside the transformer layers per tensor-parallel rank: ``"first"`` (the embeddings, on the
    first pipeline stage) and ``"last"`` (final norm, untied LM head, and with ``pp > 1`` the output layer's
    copy of a tied embedding, on the last stage). Shared by :func:`stage_params` and :mod:`llmsizing.moe`."""
    return dict(_kept_edge_params(model, tp, pp))


@functools.lru_cache(maxsize=512)
def _kept_edge_params(model: Model, tp: int, pp: int) -> tuple:
    """:func:`edge_params` as kept ``(key, value)`` pairs (issue 35: a search asks for each ``(tp, pp)`` once
    per ``ep`` and per kept split, each time walking the model's tensors)."""
    edge = {"first": 0.0, "last": 0.0}
    for name, shape in _edge_tensors(model):
        n = math.prod(shape) * _tp_share(name, model, tp)
        if name.startswith("embed_"):
            edge["first"] += n
            if name == "embed_tokens.weight" and model.tied_embeddings and pp > 1:
                edge["last"] += n
        else:
            edge["last"] += n
    return tuple(edge.items())


@functools.lru_cache(maxsize=64)
def _edge_tensors(model: Model) -> tuple:
    """The ``(name, shape)`` of the model's tensors outside the transformer layers, in
    :meth:`~llmsizing.model.Model.tensors`' order, kept per model (issue 35: :func:`_kept_edge_params` walked
    every tensor of the model once per ``(tp, pp)`` of a search)."""
    return tuple((name, shape) for _, name, shape, _k in model.tensors() if not name.startswith("layers."))


@functools.lru_cache(maxsize=256)
def _stage_params(model: Model, tp: int, pp: int, stage_layers: tuple | None = None) -> tuple[float, ...]:
    """:func:`stage_params` for a resolved model and layout, kept: the planner asks for the same few thousand
    times in one search."""
    per_layer = _layer_params(model, tp)[0]
    edge = edge_params(model, tp, pp)
    out = []
    for i, layers in enumerate(layers_per_stage(model.layers, Parallel(pp=pp, stage_layers=stage_layers))):
        n = layers * per_layer
        n += (edge["first"] if i == 0 else 0.0) + (edge["last"] if i == pp - 1 else 0.0)
        out.append(n)
    return tuple(out)


@functools.lru_cache(maxsize=256)
def _layer_params(model: Model, tp: int) -> tuple[float, float]:
    """One transformer layer's parameters on one tensor-parallel rank (:func:`_tp_share`), all of them and
    its Linear weight elements alone (the 2-D tensors), kept per ``(model, tp)``: :func:`_stage_params` and
    :func:`_stage_linear` read them for each ``pp`` and split of a search (issue 38: a planner search's ~40
    layouts walked the layer's tensors again each, ~2 ms of chapter 12's model pick). The same sums, in the
    same order."""
    tensors = [(n, s) for _, n, s in model.layer_tensors()]
    return (sum(math.prod(s) * _tp_share("layers." + n, model, tp) for n, s in tensors),
            sum(math.prod(s) * _tp_share("layers." + n, model, tp) for n, s in tensors if len(s) == 2))


@functools.lru_cache(maxsize=256)
def _stage_linear(model: Model, tp: int, pp: int,
                  stage_layers: tuple | None = None) -> tuple[tuple[float, int], ...]:
    """Per pipeline stage: ``(Linear weight elements on one GPU, layers)``, the blocks' matrices that an FP8
    recipe casts to FP8 (QKV, output projection, gate/up, down, split by :func:`_tp_share`). The embedding and
    the LM head stay 16-bit: Megatron-LM's ``output_layer`` is its own ``ColumnParallelLinear``, not a
    Transformer Engine module."""
    per_layer = _layer_params(model, tp)[1]
    layers = layers_per_stage(model.layers, Parallel(pp=pp, stage_layers=stage_layers))
    return tuple((k * per_layer, k) for k in layers)


def _states(n: int, elements: float, precision: str, optimizer: str, par: Parallel,
            on_rank: float | None = None, linear: tuple[float, int] | None = None) -> ModelStates:
    """The recipe and ZeRO arithmetic shared by :func:`model_states` and :func:`model_states_for_params`:
    ``n`` parameters, ``elements`` optimizer-state numbers, ``on_rank`` the parameters one GPU holds before
    ZeRO (default: the even split ``n / (tp * pp)``, for a bare parameter count), ``linear`` the Linear weight
    elements and layers on this GPU (:func:`_stage_linear`; default: every parameter, no layers)."""
    recipe, opt = RECIPES[precision], OPTIMIZERS[optimizer]
    weights = n * DTYPE_BYTES[recipe.weights]
    grads = n * DTYPE_BYTES[recipe.grads]
    # the optimizer's own fp32 gradient copy (DeepSpeed ZeRO-1/2) belongs to the optimizer's partition
    extra = n * DTYPE_BYTES[recipe.extra_grads] if recipe.extra_grads else 0.0
    master = n * DTYPE_BYTES[recipe.master] if recipe.master else 0.0
    if opt.dtype:  # quantised states: 1 byte each + one fp32 constant per block
        states = elements * (DTYPE_BYTES[opt.dtype] + 4 / opt.block)
    else:
        states = elements * DTYPE_BYTES[recipe.states]
    share = (on_rank / n) if on_rank is not None else 1 / (par.tp * par.pp)
    weights, grads, extra, master, states = (weights * share, grads * share, extra * share, master * share,
                                             states * share)
    dp = par.dp_cp        # ZeRO shards over the data- and context-parallel ranks (Megatron-LM, torchtitan)
    scheme = recipe.scheme
    fp8_w = fp8_meta = 0.0
    if scheme is not None:
        lin, n_layers = linear if linear is not None else (n * share, 0)
        fp8_w = scheme.weight_copy_bytes * lin
        fp8_meta = scheme.meta_bytes_per_layer * n_layers
        if par.zero >= 3 and par.reshard_after_forward is not False:   # remade per gathered unit, as weights
            fp8_w = fp8_w / dp
    if par.zero >= 1:
        master, states, extra = master / dp, states / dp, extra / dp
    if par.zero >= 2:
        grads = grads / dp
    # (FSDP2 without resharding keeps them gathered; torch's default, None, keeps the root only: a gathered
    # unit of its own, memory._zero3_gathered)
    if par.zero >= 3 and par.reshard_after_forward is not False:
        weights = weights / dp
    host = 0.0
    if par.offload != "none":
        # ZeRO-Offload: the optimizer's partition lives (and steps, with CPU Adam) in host memory, with an
        # fp32 copy of the gradient partition when the recipe's gradients are 16-bit (DeepSpeed keeps one for
        # CPU Adam)
        fp32_grads = 0.0
        if not extra and DTYPE_BYTES[recipe.grads] < 4:
            fp32_grads = 4.0 * n * share / (dp if par.zero >= 1 else 1)
        host = master + states + extra + fp32_grads
        master = states = extra = 0.0
        if par.zero >= 2:
            # ZeRO-2/3 offload reduces each gradient bucket straight into that host fp32 partition: no
            # gradient shard stays on the GPU (DeepSpeed's estimate_zero2/zero3_model_states_mem_needs count
            # no gradient bytes on the GPU with cpu_offload, and 16 bytes per parameter on the host)
            grads = 0.0
        if par.offload == "optimizer+params":     # ZeRO-Infinity's offload_param: the weight shard too
            host += weights
            weights = 0.0
    return ModelStates(n, precision, optimizer, weights, grads + extra, master, states, par, host, fp8_w,
                       fp8_meta)


#: The share of a GPU's memory a plan may fill with :attr:`~llmsizing.memory.TrainingMemory.total_bytes`
#: (which already includes the book's overhead allowance). The other 10% is headroom for what the estimate
#: misses: chapter 5 measures the peak within about 5%, and the allowance itself is not a measurement.
USABLE_FRACTION = 0.9
