"""Model states (weights, gradients, optimizer) and the total training footprint per GPU.

``model_states`` is taught in chapter 2 ("Bytes per parameter"); ``training_memory`` in chapter 4
("Activation memory"). Sources are listed in :mod:`llmsizing.precision` and :mod:`llmsizing.activations`.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field, replace

from ._validate import MAX_MEANINGFUL, check_choice, check_fraction, check_int, check_number, check_sequence
from . import moe as _moe
from .catalog import resolve_model
from .model import Model
from .parallel import Parallel, layers_per_stage, resolve_parallel
from .precision import DTYPE_BYTES, OPTIMIZERS, RECIPES, check_recipe
from .units import GiB

#: A fixed allowance for what no formula here models: the CUDA context and kernels (~0.3-0.6 GiB with
#: lazy module loading), cuBLAS/cuDNN workspaces and NCCL communication buffers. An allowance, not a
#: measurement; pass ``overhead_bytes=`` to use your own figure.
FIXED_OVERHEAD_BYTES = 1 * GiB

#: Allocator fragmentation as a fraction of the modelled tensors: a guess with no published source, which no
#: verdict of the book rests on (chapter 3; issue 26). Pass ``overhead_bytes=`` to use your own figure.
FRAGMENTATION = 0.08


def default_overhead_bytes(tensor_bytes: float) -> float:
    """The book's default allowance: :data:`FIXED_OVERHEAD_BYTES` + :data:`FRAGMENTATION` x modelled tensors."""
    return FIXED_OVERHEAD_BYTES + FRAGMENTATION * tensor_bytes


def _frame(rows: dict[str, float], n_params: int):
    import pandas as pd

    df = pd.DataFrame({"bytes": pd.Series(rows, dtype="float64")})
    df["GiB"] = df["bytes"] / GiB
    df["bytes/param"] = df["bytes"] / n_params
    df.index.name = "component"
    return df


# ----------------------------------------------------------------------------- model states
@dataclass(frozen=True)
class ModelStates:
    """Bytes of the model states on one GPU. ``optimizer_bytes`` includes the fp32 master copy
    (``master_bytes``) and the optimizer's own buffers (``optimizer_state_bytes``). With an ``offload`` layout
    (:data:`~llmsizing.parallel.OFFLOADS`) the offloaded bytes are not on the GPU: ``host_bytes`` is what this
    GPU's share costs in the host's memory (multiply by the GPUs per node for a node's RAM).

    An FP8 recipe (:data:`~llmsizing.precision.FP8_SCHEMES`) adds ``fp8_weights_bytes``, the FP8 copies of the
    Linear weights that Transformer Engine caches (DeepSeek-V3: one block-scaled copy), and ``fp8_meta_bytes``,
    its scaling state (amax histories and scales: kilobytes per layer). Both are in :attr:`total_bytes`."""

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
        GPU; with ``parallel`` it is the most loaded GPU's share (a little over 8 with ``Parallel(tp=2)``: the norms
        are replicated)."""
        return self.total_bytes / self.n_params

    def to_frame(self):
        """A DataFrame with one row per component (weights, gradients, master copy, optimizer states, total;
        with an FP8 recipe also its FP8 weight copies and scaling state)."""
        rows = {"weights": self.weights_bytes, "gradients": self.gradients_bytes,
                "master copy": self.master_bytes, "optimizer states": self.optimizer_state_bytes}
        if RECIPES[self.precision].fp8:
            rows |= {"FP8 weight copies": self.fp8_weights_bytes, "FP8 scaling state": self.fp8_meta_bytes}
        return _frame({**rows, "total": self.total_bytes}, self.n_params)


def optimizer_state_elements(model: Model | str, optimizer: str) -> float:
    """How many numbers the optimizer keeps (before choosing their dtype).

    Adafactor's factored second moment keeps ``r + c`` numbers per ``r x c`` matrix and the full vector for
    1-D tensors (Shazeer & Stern 2018, Alg. 4), so it is computed tensor by tensor from :meth:`Model.tensors`.
    """
    model = resolve_model(model, moe=True)
    opt = OPTIMIZERS[check_choice("optimizer", optimizer, OPTIMIZERS)]
    n = opt.states * model.n_params
    if opt.factored:
        n += sum((s[0] + s[1] if len(s) == 2 else math.prod(s)) * k for _, _, s, k in model.tensors())
    return n


def model_states(model: Model | str, *, precision: str = "bf16-mixed", optimizer: str = "adamw",
                 parallel: Parallel | None = None) -> ModelStates:
    """Bytes of weights, gradients and optimizer states (master copy included) for training ``model``.

    ``precision`` is a recipe from :data:`llmsizing.precision.RECIPES` (``bf16-mixed``: 2 + 2 + 12 = 16 bytes
    per parameter with AdamW), ``optimizer`` one of :data:`llmsizing.precision.OPTIMIZERS`.

    With ``parallel``, bytes are per GPU, for the most loaded GPU: :func:`stage_params` splits the model exactly
    over ``tp`` (vocabulary-parallel embedding and LM head, replicated norms and row-parallel biases) and ``pp``
    (the first stage holds the embedding, the last the LM head), then ZeRO stage 1 shards the optimizer bytes
    over ``dp`` (with a recipe's extra fp32 gradient copy, which DeepSpeed keeps only for the GPU's own
    partition), stage 2 also the gradients, stage 3 also the weights (ZeRO paper, Fig. 1); with context
    parallelism ZeRO shards over ``dp x cp`` (:attr:`~llmsizing.parallel.Parallel.dp_cp`). Adafactor's factored
    state is scaled by the same share (an approximation). A mixture of experts: :func:`llmsizing.moe.moe_model_states`
    (experts / ep, their ZeRO over Parallel.edp). Taught in chapter 2; the exact split in Part II."""
    model = resolve_model(model, moe=True)
    check_recipe("precision", precision)
    elements = optimizer_state_elements(model, optimizer)
    par = resolve_parallel(parallel, model)
    on_stage = stage_params(model, par) if par.tp * par.pp > 1 or model.is_moe else [float(model.n_params)]
    i = max(range(len(on_stage)), key=lambda k: (on_stage[k], -k))
    return _moe.moe_model_states(model, elements, precision, optimizer, par, i) if model.is_moe else _states(
        model.n_params, elements, precision, optimizer, par, on_rank=on_stage[i],
        linear=_stage_linear(model, par.tp, par.pp, par.stage_layers)[i])


def model_states_for_params(n_params: int, *, precision: str = "bf16-mixed", optimizer: str = "adamw",
                            parallel: Parallel | None = None) -> ModelStates:
    """:func:`model_states` for a bare parameter count, when there is no architecture to build (for example
    "a 10B model" in an article). Same recipes, same ZeRO rules.

    Only for optimizers whose state is elementwise (everything but Adafactor, whose factored moment depends on
    the tensor shapes: build a :class:`~llmsizing.model.Model` for it). With an FP8 recipe every parameter is
    counted as a Linear weight with an FP8 copy (an upper bound: the embeddings and norms have none; the blocks'
    matrices are 87% of Llama 3 8B) and the scaling state is left out (no layer count). Taught in chapter 2.
    """
    n = check_int("n_params", n_params)
    check_recipe("precision", precision)
    opt = OPTIMIZERS[check_choice("optimizer", optimizer, OPTIMIZERS)]
    if opt.factored:
        raise ValueError(f"optimizer={optimizer!r} has a factored state that depends on the tensor shapes: "
                         "use model_states with a Model")
    return _states(n, opt.states * n, precision, optimizer, resolve_parallel(parallel))


def _tp_share(name: str, model: Model, tp: int) -> float:
    """The fraction of one parameter tensor that each tensor-parallel rank holds (Megatron-LM's layout,
    Shoeybi et al. 2019): column-parallel matrices and their biases (q, k, v, gate, up) and row-parallel
    matrices (o, down) are split; row-parallel biases, norms and learned positions are replicated; the
    embedding and the LM head are split along the vocabulary. K and V are split by KV head, at least one head per
    rank (replicated beyond ``kv_heads``, as vLLM does)."""
    if tp == 1:
        return 1.0
    if any(k in name for k in ("norm", "embed_positions")) or name.endswith(("o_proj.bias", "down_proj.bias")):
        return 1.0
    if "k_proj" in name or "v_proj" in name:
        return max(model.kv_heads / tp, 1) / model.kv_heads
    return 1.0 / tp


def stage_params(model: Model | str, parallel: Parallel | None = None) -> list[float]:
    """Parameters held by one GPU of each pipeline stage (per tensor-parallel rank), exactly: layers split as
    evenly as possible (the first stages take the remainder), the first stage also holds the embedding (and
    learned positions), the last the final norm and the LM head, or with tied embeddings and ``pp > 1`` a copy of
    the embedding for the output layer (Megatron-LM keeps one and all-reduces its gradient). Tensor parallelism
    splits each tensor as :func:`_tp_share` says. The vocabulary is not padded (Megatron-LM pads it to a
    multiple of 128 x tp; pass a padded ``vocab`` to compare on its convention). Taught in Part II."""
    model = resolve_model(model, moe=True)
    par = resolve_parallel(parallel, model)
    return list(_moe.gpu_params(model, par) if model.is_moe else _stage_params(model, par.tp, par.pp, par.stage_layers))


def edge_params(model: Model, tp: int, pp: int) -> dict[str, float]:
    """Parameters outside the transformer layers per tensor-parallel rank: ``"first"`` (the embeddings, on the
    first pipeline stage) and ``"last"`` (final norm, untied LM head, and with ``pp > 1`` the output layer's
    copy of a tied embedding, on the last stage). Shared by :func:`stage_params` and :mod:`llmsizing.moe`."""
    edge = {"first": 0.0, "last": 0.0}
    for _, name, shape, _k in model.tensors():
        if name.startswith("layers."):
            continue
        n = math.prod(shape) * _tp_share(name, model, tp)
        if name.startswith("embed_"):
            edge["first"] += n
            if name == "embed_tokens.weight" and model.tied_embeddings and pp > 1:
                edge["last"] += n
        else:
            edge["last"] += n
    return edge


@functools.lru_cache(maxsize=256)
def _stage_params(model: Model, tp: int, pp: int, stage_layers: tuple | None = None) -> tuple[float, ...]:
    """:func:`stage_params` for a resolved model and layout, kept: the planner asks for the same few thousand
    times in one search."""
    per_layer = sum(math.prod(s) * _tp_share("layers." + n, model, tp) for _, n, s in model.layer_tensors())
    edge = edge_params(model, tp, pp)
    out = []
    for i, layers in enumerate(layers_per_stage(model.layers, Parallel(pp=pp, stage_layers=stage_layers))):
        n = layers * per_layer
        n += (edge["first"] if i == 0 else 0.0) + (edge["last"] if i == pp - 1 else 0.0)
        out.append(n)
    return tuple(out)


@functools.lru_cache(maxsize=256)
def _stage_linear(model: Model, tp: int, pp: int, stage_layers: tuple | None = None) -> tuple[tuple[float, int], ...]:
    """Per pipeline stage: ``(Linear weight elements on one GPU, layers)``, the blocks' matrices that an FP8
    recipe casts to FP8 (QKV, output projection, gate/up, down, split by :func:`_tp_share`). The embedding and
    the LM head stay 16-bit: Megatron-LM's ``output_layer`` is its own ``ColumnParallelLinear``, not a
    Transformer Engine module."""
    per_layer = sum(math.prod(s) * _tp_share("layers." + n, model, tp)
                    for _, n, s in model.layer_tensors() if len(s) == 2)
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
    weights, grads, extra, master, states = (x * share for x in (weights, grads, extra, master, states))
    dp = par.dp_cp        # ZeRO shards over the data- and context-parallel ranks (Megatron-LM, torchtitan)
    scheme = recipe.scheme
    fp8_w = fp8_meta = 0.0
    if scheme is not None:
        lin, n_layers = linear if linear is not None else (n * share, 0)
        fp8_w = scheme.weight_copy_bytes * lin
        fp8_meta = scheme.meta_bytes_per_layer * n_layers
        if par.zero >= 3 and par.reshard_after_forward:   # remade per gathered unit, like the weights
            fp8_w = fp8_w / dp
    if par.zero >= 1:
        master, states, extra = master / dp, states / dp, extra / dp
    if par.zero >= 2:
        grads = grads / dp
    if par.zero >= 3 and par.reshard_after_forward:     # (FSDP2 without resharding keeps them gathered)
        weights = weights / dp
    host = 0.0
    if par.offload != "none":
        # ZeRO-Offload: the optimizer's partition lives (and steps, with CPU Adam) in host memory, with an fp32
        # copy of the gradient partition when the recipe's gradients are 16-bit (DeepSpeed keeps one for CPU Adam)
        fp32_grads = 0.0
        if not extra and DTYPE_BYTES[recipe.grads] < 4:
            fp32_grads = 4.0 * n * share / (dp if par.zero >= 1 else 1)
        host = master + states + extra + fp32_grads
        master = states = extra = 0.0
        if par.zero >= 2:
            # ZeRO-2/3 offload reduces each gradient bucket straight into that host fp32 partition: no gradient
            # shard stays on the GPU (DeepSpeed's estimate_zero2/zero3_model_states_mem_needs count no
            # gradient bytes on the GPU with cpu_offload, and 16 bytes per parameter on the host)
            grads = 0.0
        if par.offload == "optimizer+params":     # ZeRO-Infinity's offload_param: the weight shard too
            host += weights
            weights = 0.0
    return ModelStates(n, precision, optimizer, weights, grads + extra, master, states, par, host, fp8_w, fp8_meta)


def bytes_per_param_table(model: Model | str, *, precisions=None, optimizers=None):
    """Bytes per parameter of the model states for every ``precision`` x ``optimizer`` pair (a DataFrame,
    recipes as rows, optimizers as columns), each computed by :func:`model_states` on one GPU.

    Most entries do not depend on the model (bf16-mixed + AdamW is 16 for every model). Two do a little:
    Adafactor's factored moment depends on the tensor shapes, and 8-bit optimizers add one fp32 constant per
    block of 2048 (Dettmers et al. 2022). Defaults: every recipe and optimizer. Taught in chapter 2.
    """
    import pandas as pd

    model = resolve_model(model)
    precisions = (list(RECIPES) if precisions is None else
                  [check_recipe("precision", p)
                   for p in check_sequence("precisions", precisions, example="['bf16-mixed', 'fp32']")])
    optimizers = (list(OPTIMIZERS) if optimizers is None else
                  [check_choice("optimizer", o, OPTIMIZERS)
                   for o in check_sequence("optimizers", optimizers, example="['adamw', 'adamw-8bit']")])
    rows = {p: {o: model_states(model, precision=p, optimizer=o).bytes_per_param for o in optimizers}
            for p in precisions}
    df = pd.DataFrame.from_dict(rows, orient="index")[optimizers]
    df.index.name = "recipe"
    return df


def min_gpus_for_bytes(n_bytes: float, gpu, *, usable_fraction: float | None = None) -> int:
    """The smallest number of ``gpu`` (a catalogue name or :class:`~llmsizing.catalog.GPU`) whose usable memory,
    added up, holds ``n_bytes``: ``ceil(n_bytes / (usable_fraction x capacity))``. A lower bound that assumes the
    bytes shard perfectly (ZeRO-3/FSDP for model states, or tensor parallelism). ``usable_fraction`` (0 < f <= 1)
    reserves part of each GPU for what you are not counting; ``None`` is the planner's
    :data:`~llmsizing.layouts.USABLE_FRACTION` (0.9), so Parts I and II count the fewest GPUs alike (issue 26; it was
    1 here until then). Pass 1.0 for bytes that carry their own allowance (:func:`~llmsizing.inference.inference_memory`). Chapter 2."""
    from .catalog import get_gpu
    from .layouts import USABLE_FRACTION

    n_bytes = check_number("n_bytes", n_bytes)
    frac = check_fraction("usable_fraction", USABLE_FRACTION if usable_fraction is None else usable_fraction)
    g = get_gpu(gpu)
    cap = frac * g.memory_bytes
    if n_bytes / cap > MAX_MEANINGFUL:
        raise ValueError(f"usable_fraction={frac:g} leaves too little of each {g.name} to count GPUs for "
                         f"{n_bytes:g} bytes (more than {MAX_MEANINGFUL:,} GPUs)")
    n = math.ceil(n_bytes / cap)
    if n > 1 and n_bytes <= (n - 1) * cap:  # the quotient rounded up by floating-point noise
        n -= 1
    return n


# ----------------------------------------------------------------------------- the peak of a step
#: PyTorch's three AdamW implementations (its own names): ``foreach`` (its default on CUDA) applies each update
#: to the whole parameter group at once, ``for-loop`` one tensor at a time, ``fused`` in one kernel.
OPTIMIZER_IMPLS = ("foreach", "for-loop", "fused")

#: The phases of one training step, in order (:attr:`TrainingMemory.phases`).
PHASES = ("forward", "loss backward", "backward", "optimizer step")


def optimizer_temporaries_bytes(model: Model | str, *, precision: str = "bf16-mixed", optimizer: str = "adamw",
                                optimizer_impl: str = "foreach", parallel: Parallel | None = None) -> float:
    """Bytes the optimizer step allocates on top of the model states, per GPU (chapter 4, "The peak of a step").

    PyTorch's Adam/AdamW (``torch/optim/adamw.py``, ``_multi_tensor_adamw`` / ``_single_tensor_adamw``): the
    update divides by ``sqrt(v) + eps``. The ``foreach`` path computes ``torch._foreach_sqrt`` of every second
    moment of the group at once, a temporary the size of the whole state buffer (4 bytes per parameter in fp32);
    the ``for-loop`` path builds the same denominator one tensor at a time (two temporaries of the largest
    tensor alive together); ``fused`` does it inside the kernel (nothing). Optimizers other than Adam/AdamW are
    counted with no temporaries (an approximation: their updates are in place except for small scalars).
    Measured in ``data/step_measurements.csv`` (chapter 5).
    """
    model = resolve_model(model, moe=True)
    impl = check_choice("optimizer_impl", optimizer_impl, OPTIMIZER_IMPLS)
    check_recipe("precision", precision)
    check_choice("optimizer", optimizer, OPTIMIZERS)
    par = resolve_parallel(parallel, model)
    if optimizer not in ("adam", "adamw") or impl == "fused":
        return 0.0
    recipe = RECIPES[precision]
    state = DTYPE_BYTES[recipe.states]
    shard = par.tp * par.pp * (par.dp_cp if par.zero >= 1 else 1)
    if impl == "foreach":
        return (_moe.foreach_temporary_bytes(model, state, par) if model.is_moe else model.n_params * state / shard)
    largest = _moe.largest_tensor(model, par) if model.is_moe else max(math.prod(s) for _, _, s, _ in model.tensors())
    return 2 * largest * state / par.tp          # the largest tensor, split by tensor parallelism


def autocast_copies_bytes(model: Model | str, *, parallel: Parallel | None = None) -> float:
    """Bytes of the 16-bit weight copies ``torch.autocast`` keeps during a step (recipe ``"bf16-amp"``).

    Autocast casts every fp32 weight that enters a matrix multiply to bf16 once per forward and caches the
    copy (``torch/csrc/autograd/autocast_mode.cpp``, the weight-cast cache); the linear layers then save the
    copy for their backward, so it lives until that layer's backward is done. That is 2 bytes per
    matrix-multiply weight and bias (not the embedding lookup, nor the norms' gains), about 2 bytes per
    parameter. Per GPU: divided by ``tp * pp``. Measured in ``data/step_measurements.csv`` (chapter 5).
    """
    model = resolve_model(model)
    par = resolve_parallel(parallel, model)
    parts = model.param_breakdown()
    matmul = parts["attention"] + parts["mlp"] + (parts["embedding"] if model.tied_embeddings else parts["lm_head"])
    return 2.0 * matmul / (par.tp * par.pp)


@dataclass(frozen=True)
class TrainingMemory:
    """The memory of one training step on one GPU, phase by phase (chapter 4, "The peak of a step").

    ``phases_bytes`` holds the largest live bytes of each phase in :data:`PHASES`, at steady state (the
    optimizer states already exist; the gradients were freed by ``zero_grad(set_to_none=True)``):
    ``peak_bytes`` is the largest of them and ``total_bytes`` adds the overhead allowance to it. Gradient
    accumulation multiplies the global batch, not the activations.

    With pipeline parallelism the result is the most loaded GPU's (``stage`` is its pipeline stage; ties go to
    the earlier stage): ``stages`` holds one row per stage (params, micro-batches in flight, states,
    activations, peak, total, host bytes) and :attr:`stage_table` shows them. ``in_flight`` is how many
    micro-batches of this stage's layers are alive at its peak (:func:`~llmsizing.parallel.pipeline_in_flight`),
    ``gathered_bytes`` ZeRO-3's gathered unit (:func:`zero3_gathered_bytes`) and :attr:`host_bytes` the
    host memory an ``offload`` layout costs per GPU.

    Changed in the "peak of a step" revision: ``total_bytes`` used to be model states + activations +
    allowance; it is now the peak of the phases + allowance, which is never less than the activations
    alive at the end of the forward plus the states that exist then. Every field and property of the old
    result is still there.
    """

    states: ModelStates
    activations: "ActivationMemory"  # noqa: F821
    overhead_bytes: float
    micro_batch: int
    grad_accum: int
    seq: int
    flops_per_token: float
    pieces: dict = field(default_factory=dict)
    stack: str = "fused"
    optimizer_impl: str = "foreach"
    autocast_copies_bytes: float = 0.0
    loss_temporaries_bytes: float = 0.0
    optimizer_temporaries_bytes: float = 0.0
    stage: int = 0
    in_flight: float = 1.0
    gathered_bytes: float = 0.0
    stages: tuple = ()

    @property
    def weights_bytes(self) -> float:
        return self.states.weights_bytes

    @property
    def gradients_bytes(self) -> float:
        return self.states.gradients_bytes

    @property
    def optimizer_bytes(self) -> float:
        return self.states.optimizer_bytes

    @property
    def activations_bytes(self) -> float:
        return self.activations.total_bytes

    @property
    def pieces_bytes(self) -> dict[str, float]:
        """The bytes of each piece of :func:`step_phases` (the backward's two ends apart)."""
        return {k: sum(v.values()) for k, v in self.pieces.items()}

    @property
    def phase_parts(self) -> dict[str, dict[str, float]]:
        """What is alive at the peak of each phase in :data:`PHASES`, by part (:data:`STEP_PARTS`)."""
        p, b = self.pieces, self.pieces_bytes
        back = "backward (start)" if b["backward (start)"] >= b["backward (end)"] else "backward (end)"
        out = {"forward": p["forward"], "loss backward": p["loss backward"], "backward": p[back],
               "optimizer step": p["optimizer step"]}
        return {k: {part: v.get(part, 0.0) for part in STEP_PARTS} for k, v in out.items()}

    @property
    def phases_bytes(self) -> dict[str, float]:
        """The largest live bytes of each phase in :data:`PHASES` (:func:`step_phases`)."""
        return {k: sum(v.values()) for k, v in self.phase_parts.items()}

    @property
    def peak_bytes(self) -> float:
        """The largest phase of the step, without the overhead allowance."""
        return max(self.phases_bytes.values())

    @property
    def peak_phase(self) -> str:
        """Which phase holds the peak (the first one, if two are equal)."""
        return max(PHASES, key=lambda p: (self.phases_bytes[p], -PHASES.index(p)))

    @property
    def total_bytes(self) -> float:
        """The peak of the step plus the overhead allowance: what must fit in the GPU's memory."""
        return self.peak_bytes + self.overhead_bytes

    @property
    def host_bytes(self) -> float:
        """Host (CPU) memory this GPU's offloaded states take (0 without ``offload``)."""
        return self.states.host_bytes

    @property
    def stage_table(self):
        """A DataFrame, one row per pipeline stage (bytes, and ``total GiB``); one row without a pipeline."""
        import pandas as pd

        df = pd.DataFrame(list(self.stages)).set_index("stage")
        df["total GiB"] = df["total"] / GiB
        return df

    @property
    def global_batch(self) -> int:
        """Sequences per optimizer step: micro-batch x accumulation steps x data-parallel replicas."""
        return self.micro_batch * self.grad_accum * self.states.parallel.dp

    @property
    def tokens_per_step(self) -> int:
        return self.global_batch * self.seq

    @property
    def phases(self):
        """A DataFrame, one row per phase: what is alive at its peak by part (bytes, :data:`STEP_PARTS`), the
        phase's ``bytes`` and ``GiB``."""
        import pandas as pd

        df = pd.DataFrame(self.phase_parts).T.astype("float64")
        df["bytes"] = df.sum(axis=1)
        df["GiB"] = df["bytes"] / GiB
        df.index.name = "phase"
        return df

    def to_frame(self):
        return _frame({"weights": self.weights_bytes, "gradients": self.gradients_bytes,
                       "optimizer": self.optimizer_bytes, "activations": self.activations_bytes,
                       "peak": self.peak_bytes, "overhead": self.overhead_bytes, "total": self.total_bytes},
                      self.states.n_params)


def step_phases(states: ModelStates, acts, *, grad_accum: int, autocast_bytes: float, loss_bytes: float,
                optimizer_bytes: float, layer_working_bytes: float, head_grad_bytes: float,
                head_copy_bytes: float = 0.0, embedding_grad_bytes: float = 0.0,
                gathered_bytes: float = 0.0, cp_buffers_bytes: tuple = (0.0, 0.0)) -> dict[str, float]:
    """The live bytes of each phase of one step (see :class:`TrainingMemory`), from its parts.

    * forward: weights + optimizer states + activations + autocast copies (+ gradients from the previous
      micro-batch when accumulating);
    * loss backward: the forward's bytes + the loss's temporaries (the fp32 gradient of the logits and its
      companions, ``loss_bytes``);
    * backward: the loss's and the LM head's tensors are gone; the layers' activations are freed layer by
      layer while that layer's gradients appear, so the live bytes move linearly from (the layers'
      activations + the LM head's gradients) to (the embedding's activations + all gradients); the larger
      end, plus one layer's backward working set. With tied embeddings the embedding's backward writes a
      dense gradient of the shared matrix and adds it to the LM head's: two more copies at the end
      (``embedding_grad_bytes``, measured). The LM head's autocast copy (``head_copy_bytes``) is gone;
    * optimizer step: weights + gradients + optimizer states + the optimizer's temporaries (the activations
      and autocast copies are gone);
    * with ZeRO-3, the weights and gradient of the unit being computed are gathered in full
      (``gathered_bytes``, :func:`zero3_gathered_bytes`) during the forward and backward;
    * with context parallelism, one layer's attention holds the K and V it exchanges
      (``cp_buffers_bytes``, forward and backward: :func:`~llmsizing.activations.cp_attention_buffers_bytes`)
      on top of the forward's activations and of the backward's working set.

    Against the measured Hugging Face steps (chapter 5) the forward and the loss backward are within -1% / +5%
    and the optimizer step exact; the backward is the least exact phase, -4% to +9% (its working set is a fitted
    half layer, :data:`LAYER_WORKING_SET`), and it rarely holds the peak.

    Returns five pieces, each a dict of what is alive (keys of :data:`STEP_PARTS`) and each linear in the
    micro-batch: the two ends of the backward are kept apart (``"backward (start)"``, ``"backward (end)"``),
    which is what lets :func:`max_micro_batch` stay exact.
    """
    W, G, O = states.working_weights_bytes, states.gradients_bytes, states.optimizer_bytes
    # what the forward leaves alive; with recomputation, the layer rebuilt during the backward comes on top
    # only in the backward (activation_memory reports the backward peak, rebuilt layer included)
    kept = acts.total_bytes - acts.rebuilt_bytes
    A, A_emb = kept, acts.embedding_bytes
    g_fwd = G if grad_accum > 1 else 0.0
    cp_fwd, cp_bwd = cp_buffers_bytes
    forward = {"weights": W, "optimizer states": O, "gradients": g_fwd, "activations": A,
               "autocast copies": autocast_bytes, "temporaries": gathered_bytes + cp_fwd}
    return {
        "forward": forward,
        "loss backward": {**forward, "temporaries": loss_bytes + gathered_bytes},
        "backward (start)": {**forward, "activations": A - acts.logits_bytes + acts.rebuilt_bytes,
                             "autocast copies": autocast_bytes - head_copy_bytes,
                             "gradients": G if grad_accum > 1 else head_grad_bytes,
                             "temporaries": layer_working_bytes + gathered_bytes + cp_bwd},
        "backward (end)": {"weights": W, "optimizer states": O, "gradients": G + embedding_grad_bytes,
                           "activations": A_emb, "temporaries": layer_working_bytes + gathered_bytes + cp_bwd},
        "optimizer step": {"weights": W, "optimizer states": O, "gradients": G, "temporaries": optimizer_bytes},
    }


#: What :func:`step_phases` reports as alive in each phase.
STEP_PARTS = ("weights", "optimizer states", "gradients", "activations", "autocast copies", "temporaries")


#: Bytes per logit (per ``batch x seq x vocab / tp`` element) that the loss's backward allocates on top of
#: what the forward left alive: ``nll_loss``'s backward writes an fp32 gradient of the log-probabilities
#: (4 bytes) and ``log_softmax``'s backward an fp32 gradient of the logits (4 more) while the first is still
#: alive. Measured at exactly 8.0 for every configuration of ``data/step_measurements.csv``, both stacks and
#: every precision (chapter 5). Fused or chunked cross-entropy kernels (Megatron's vocab-parallel one writes
#: the gradient in place of its saved softmax; Liger-Kernel's never materialises the logits) allocate less.
LOSS_BACKWARD_BYTES_PER_LOGIT = {"fused": 8.0, "hf": 8.0}

#: One layer's backward working set, as a multiple of what that layer saved for backward (the gradients of
#: its inputs and intermediate results coexist with the saved tensors they are computed from). Fitted to the
#: start of the backward in ``data/step_measurements.csv``: 0.04 to 0.63 of a layer (more with eager
#: attention and long sequences), so 0.5.
LAYER_WORKING_SET = 0.5


def training_memory(model: Model | str, *, batch: int, seq: int, precision: str = "bf16-mixed",
                    optimizer: str = "adamw", attention: str = "flash", recompute: str = "none",
                    dropout: bool = False, grad_accum: int = 1, parallel: Parallel | None = None,
                    overhead_bytes: float | None = None, stack: str = "fused",
                    optimizer_impl: str = "foreach", _all_stages: bool = False, _stages=None,
                    recompute_layers: int | None = None, attention_mask: bool = False) -> TrainingMemory:
    """Per-GPU memory of one training step: the peak over its phases (:func:`step_phases`) + an overhead
    allowance (:func:`default_overhead_bytes` of the peak, unless ``overhead_bytes`` is given).

    The parts: :func:`model_states`; :func:`~llmsizing.activations.activation_memory` of one micro-batch of
    ``batch`` sequences of ``seq`` tokens, on the software ``stack`` (``"fused"``: Megatron-style kernels;
    ``"hf"``: Hugging Face ``transformers`` modules as they are); the loss's temporaries
    (:data:`LOSS_BACKWARD_BYTES_PER_LOGIT`); the optimizer's temporaries (:func:`optimizer_temporaries_bytes`,
    ``optimizer_impl`` one of :data:`OPTIMIZER_IMPLS`); and with ``precision="bf16-amp"`` (fp32 weights, grads
    and AdamW states under ``torch.autocast(bf16)``, what the Hugging Face Trainer's ``bf16=True`` runs) the
    cached 16-bit weight copies (:func:`autocast_copies_bytes`).

    Activations are saved in the recipe's working dtype (fp32 for ``fp32``, 16-bit for the mixed recipes,
    autocast's mix for ``bf16-amp``); an FP8 recipe (``fp8-mixed``, ``fp8-deepseek``) saves its Linear inputs
    in FP8 (:func:`~llmsizing.activations.layer_terms` with ``fp8=``, ``stack="fused"`` only) and keeps its
    FP8 weight copies alive with the weights (:class:`ModelStates`). ``grad_accum`` changes the global batch
    (``batch * grad_accum * dp``),
    and from the second micro-batch on the gradients are alive during the forward. With ``parallel``, the
    result is per GPU, for the most loaded one: each pipeline stage gets its own parameters
    (:func:`stage_params`), its own activations (1F1B keeps up to ``pp`` micro-batches in flight on the first
    stage, more when interleaved; the logits and the loss live on the last stage), ZeRO-3's gathered unit,
    and ``offload`` moves states to the host; the pipeline's micro-batches are the ``grad_accum`` steps.
    ``flops_per_token`` is
    the compute one token costs, including recomputation (:func:`~llmsizing.flops.training_flops_per_token`).
    With context parallelism (``parallel.cp``) each GPU holds the activations, logits and loss temporaries of
    ``seq / cp`` tokens (``seq`` a multiple of ``2 cp``, flash attention), ZeRO shards over ``dp x cp``, and one
    layer's attention holds the K and V it exchanges
    (:func:`~llmsizing.activations.cp_attention_buffers_bytes`, by ``parallel.cp_comm``).
    ``recompute_layers=N`` with ``recompute="full"`` (``None``: every layer) recomputes the first ``N`` layers of
    each model chunk only, Megatron-LM's ``--recompute-method block`` (:func:`~llmsizing.activations.stage_activations`).
    ``attention_mask=True`` (``stack="hf"``): a padded batch, on which Hugging Face's SDPA path keeps K and V at
    the query heads' width and a copy of the mask per layer (:func:`~llmsizing.activations.masked_sdpa_extra_bytes`).
    Taught in chapter 4; checked against measured steps in chapter 5; context parallelism and partial
    recomputation in "Long context".
    """
    from .activations import STACKS, activation_memory, cp_attention_buffers_bytes, layer_terms, stage_activations
    from .flops import _partial_flops_per_token, training_flops_per_token
    from .parallel import check_recompute_layers, pipeline_in_flight, recomputed_layers

    model = resolve_model(model, moe=True)
    batch, seq = check_int("batch", batch), check_int("seq", seq)
    grad_accum = check_int("grad_accum", grad_accum)
    stack = check_choice("stack", stack, STACKS)
    impl = check_choice("optimizer_impl", optimizer_impl, OPTIMIZER_IMPLS)
    check_recipe("precision", precision)
    par = resolve_parallel(parallel, model, seq=seq)
    recipe = RECIPES[precision]
    amp = recipe.autocast
    act_dtype = "bf16" if amp else recipe.weights     # autocast: bf16 matmuls (fp32 parts via autocast=True)
    fp8 = recipe.fp8
    act_kw = dict(batch=batch, seq=seq, dtype=act_dtype, attention=attention, dropout=dropout, tp=par.tp,
                  sp=par.sp, stack=stack, autocast=amp, fp8=fp8, cp=par.cp, expert_tp=par.expert_tp, attention_mask=attention_mask)
    acts = activation_memory(model, recompute=recompute, **act_kw)
    n_rc = check_recompute_layers(recompute, recompute_layers, model.layers, par)
    plain = None if n_rc is None else activation_memory(model, recompute="none", **act_kw)
    local = seq // par.cp                              # this GPU's tokens of each sequence
    cp_buffers = cp_attention_buffers_bytes(model, batch=batch, seq=seq, tp=par.tp, cp=par.cp,
                                            cp_comm=par.cp_comm, dtype=act_dtype)
    copies = autocast_copies_bytes(model, parallel=par) if amp else 0.0
    loss = LOSS_BACKWARD_BYTES_PER_LOGIT[stack] * batch * local * model.vocab / par.tp
    opt_tmp = optimizer_temporaries_bytes(model, precision=precision, optimizer=optimizer, optimizer_impl=impl,
                                          parallel=par)
    parts = model.param_breakdown()
    head = parts["embedding"] if model.tied_embeddings else parts["lm_head"]
    head_copy = 2.0 * head / (par.tp * par.pp) if amp else 0.0    # the LM head's share of the copies
    working = LAYER_WORKING_SET * sum(layer_terms(model, batch=batch, seq=local, dtype=act_dtype,
                                                  attention=attention, dropout=dropout, tp=par.tp,
                                                  sp=par.sp, stack=stack, autocast=amp, fp8=fp8, attention_mask=attention_mask).values())
    gathered = zero3_gathered_bytes(model, precision=precision, parallel=par)
    flops = (training_flops_per_token(model, seq=seq, recompute=recompute) if n_rc is None else
             _partial_flops_per_token(model, seq, sum(recomputed_layers(model.layers, par, n_rc)), False))
    elements = optimizer_state_elements(model, optimizer)
    on_stage = stage_params(model, par) if par.tp * par.pp > 1 or model.is_moe else [float(model.n_params)]
    in_flight = pipeline_in_flight(par.pp, grad_accum, par.virtual_stages)
    if overhead_bytes is not None:
        overhead_bytes = check_number("overhead_bytes", overhead_bytes)

    results = []
    # _stages: only these pipeline stages (the planner asks for the first and the last: with Megatron's even
    # split, the first holds the most micro-batches in flight and the embedding, the last the logits and head,
    # so one of them is the most loaded; tests/test_planner.py checks this against every stage)
    for i in (range(par.pp) if _stages is None else sorted(set(_stages))):
        first, last = i == 0, i == par.pp - 1
        states = (_moe.moe_model_states(model, elements, precision, optimizer, par, i) if model.is_moe else
                  _states(model.n_params, elements, precision, optimizer, par, on_rank=on_stage[i],
                          linear=_stage_linear(model, par.tp, par.pp, par.stage_layers)[i]))
        grad_per_param = states.gradients_bytes / on_stage[i]
        head_grads = grad_per_param * head / par.tp if last else 0.0
        stage_acts = stage_activations(acts, model, par, i, in_flight[i], plain=plain, recompute_layers=n_rc)
        stage_opt = opt_tmp * on_stage[i] / max(on_stage) if impl == "foreach" else opt_tmp
        if par.offload != "none":
            stage_opt = 0.0                   # the optimizer steps on the host (DeepSpeed's CPU Adam)
        phases = step_phases(states, stage_acts, grad_accum=grad_accum, autocast_bytes=copies,
                             loss_bytes=loss if last else 0.0, optimizer_bytes=stage_opt,
                             layer_working_bytes=working, head_grad_bytes=head_grads,
                             head_copy_bytes=head_copy if last else 0.0,
                             embedding_grad_bytes=2 * head_grads if model.tied_embeddings and par.pp == 1 else 0.0,
                             gathered_bytes=gathered, cp_buffers_bytes=cp_buffers)
        if overhead_bytes is None:   # of the peak: the largest piece
            overhead = default_overhead_bytes(max(sum(v.values()) for v in phases.values()))
        else:
            overhead = overhead_bytes
        results.append(TrainingMemory(states, stage_acts, overhead, batch, grad_accum, seq, flops, phases, stack,
                                      impl, copies, loss if last else 0.0, stage_opt, i, in_flight[i], gathered))
    if _all_stages and _stages is not None:
        return results         # (the searches read only the pieces of the stages they ask for: no stage table)
    rows = tuple(_stage_row(r, on_stage[r.stage]) for r in results)
    results = [replace(r, stages=rows) for r in results]
    if _all_stages:
        return results
    return max(results, key=lambda r: (r.total_bytes, -r.stage))


def _stage_row(r: "TrainingMemory", params: float) -> dict:
    return {"stage": r.stage, "params": params, "micro-batches in flight": r.in_flight,
            "weights": r.weights_bytes, "gradients": r.gradients_bytes, "optimizer": r.optimizer_bytes,
            "activations": r.activations_bytes, "peak": r.peak_bytes, "peak phase": r.peak_phase,
            "total": r.total_bytes, "host": r.states.host_bytes}


def zero3_gathered_bytes(model: Model | str, *, precision: str = "bf16-mixed",
                         parallel: Parallel | None = None) -> float:
    """Bytes ZeRO-3/FSDP gathers on each GPU while it computes: one unit's full weights and, in the backward,
    its full gradient before the reduce-scatter (0 unless ``parallel.zero == 3``).

    The unit is the largest of one transformer block (FSDP wraps each block) and the embedding or LM head
    matrix, split by tensor parallelism. DeepSpeed's ``estimate_zero3_model_states_mem_needs`` counts
    ``4 x largest_layer_params`` (a 16-bit weight and gradient of the largest single module); the same
    16-bit recipe gives the same bytes here when that module is the embedding or LM head and outweighs a
    block (Llama 3), and more when a block is larger (GPT-3 175B: a block is 2.9x its embedding). FSDP2 also
    prefetches the next block's weights during the forward by default, which this leaves out (chapter 9 measures
    it). Taught in chapter 7.
    """
    model = resolve_model(model, moe=True)
    check_recipe("precision", precision)
    par = resolve_parallel(parallel, model)
    if par.zero < 3:
        return 0.0
    recipe = RECIPES[precision]
    block = sum(math.prod(s) * _tp_share("layers." + n, model, par.tp) for _, n, s in model.layer_tensors())
    matrix = model.vocab * model.hidden / par.tp
    return (DTYPE_BYTES[recipe.weights] + DTYPE_BYTES[recipe.grads]) * max(block, matrix)


# ----------------------------------------------------------------------------- largest micro-batch
def max_micro_batch(model: Model | str, gpu, seq, *, precision: str = "bf16-mixed", optimizer: str = "adamw",
                    attention: str = "flash", recompute: str = "none", dropout: bool = False,
                    parallel: Parallel | None = None, overhead_bytes: float | None = None,
                    stack: str = "fused", optimizer_impl: str = "foreach", grad_accum: int = 1,
                    recompute_layers: int | None = None, attention_mask: bool = False):
    """The largest micro-batch (sequences) whose :func:`training_memory` (``attention_mask`` too) fits ``gpu``, for one
    sequence length ``seq`` (an int; returns an int) or many (a 1-D array of ints; returns an int array).

    0 means not even one sequence fits (the model states alone may already be too large). ``grad_accum`` is
    the number of micro-batches per step (with pipeline parallelism it sets how many are in flight, and from
    two on the gradients are alive during the forward). Exact, not a
    search: activation memory is linear in the micro-batch (Korthikanti et al. 2022, Sec. 4: every saved
    tensor has a factor ``b``) and the default overhead allowance is linear in the bytes it covers. The
    peak is the largest of a few pieces (:func:`step_phases`), each ``A(s) + b * B(s)`` with ``A``, ``B``
    quadratics in ``s``: the peak fits iff every piece fits. The pieces are read off six calls of
    :func:`training_memory`, which makes the sweep over sequence lengths a NumPy expression (no loop) that
    agrees with :func:`training_memory` by construction (``recompute_layers`` too: partial recomputation is linear
    in the micro-batch as well). Taught in chapter 4. A mixture of experts (``parallel`` with ``ep``) too: chapter 18.
    """
    import numpy as np

    from .catalog import get_gpu

    model = resolve_model(model, moe=True)
    capacity = get_gpu(gpu).memory_bytes
    seqs = np.asarray(seq)
    if seqs.ndim > 1 or seqs.size == 0 or seqs.dtype.kind not in "iu":
        raise TypeError(f"seq must be an integer or a 1-D array of integers, got {seq!r}")
    if (seqs < 1).any() or (seqs > MAX_MEANINGFUL).any():
        bad = seqs.min() if (seqs < 1).any() else seqs.max()
        raise ValueError(f"seq must be >= 1 and <= {MAX_MEANINGFUL:,}, got {bad:,}")
    kw = dict(precision=precision, optimizer=optimizer, attention=attention, recompute=recompute,
              dropout=dropout, parallel=parallel, overhead_bytes=overhead_bytes, stack=stack,
              optimizer_impl=optimizer_impl, grad_accum=grad_accum, recompute_layers=recompute_layers, attention_mask=attention_mask)
    cp = resolve_parallel(parallel).cp
    if cp > 1 and (seqs % (2 * cp)).any():
        bad = int(seqs[seqs % (2 * cp) != 0].flat[0])
        resolve_parallel(parallel, seq=bad)               # raises, naming seq and the rule
    # three sequence lengths the layout accepts (a multiple of 2 cp with context parallelism)
    points = np.array([1024.0, 2048.0, 3072.0]) * (1 if cp == 1 else 2 * cp // math.gcd(1024, 2 * cp))
    # every pipeline stage's pieces: the most loaded stage may change with the micro-batch
    runs = [[training_memory(model, batch=b, seq=int(s), _all_stages=True, **kw) for s in points] for b in (1, 2)]
    if overhead_bytes is None:   # total = FIXED + (1 + FRAGMENTATION) x peak
        limit = (capacity - FIXED_OVERHEAD_BYTES) / (1 + FRAGMENTATION)
    else:
        limit = capacity - runs[0][0][0].overhead_bytes
    s = seqs.astype(float)
    b = np.full(s.shape, np.inf)
    pieces = [(i, k) for i, r in enumerate(runs[0][0]) for k in r.pieces_bytes]
    for i, piece in pieces:   # the peak fits iff every piece of every stage fits
        tot = np.array([[r[i].pieces_bytes[piece] for r in row] for row in runs])
        per_seq = np.polyval(np.polyfit(points, tot[1] - tot[0], 2), s)           # B(s): one more sequence
        fixed = np.polyval(np.polyfit(points, tot[0] - (tot[1] - tot[0]), 2), s)  # A(s): at b = 0
        room = limit - fixed
        grows = per_seq > 0.5                      # a piece that does not grow with b (the optimizer step)
        with np.errstate(divide="ignore", invalid="ignore"):
            # round before flooring so that an exact fit is not lost to floating-point noise
            fit = np.where(grows, np.floor(np.round(room / np.where(grows, per_seq, 1.0), 6)),
                           np.where(room >= 0, np.inf, -1.0))
        b = np.minimum(b, fit)
    b = np.maximum(b, 0).astype(np.int64)
    return int(b) if seqs.ndim == 0 else b
