"""Model states (weights, gradients, optimizer) and the total training footprint per GPU.

``model_states`` is taught in chapter 2 ("Bytes per parameter"); ``training_memory`` in chapter 4
("Activation memory"). Sources are listed in :mod:`llmsizing.precision` and :mod:`llmsizing.activations`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ._validate import MAX_MEANINGFUL, check_choice, check_int, check_number, check_sequence
from .catalog import resolve_model
from .model import Model
from .parallel import Parallel, resolve_parallel
from .precision import DTYPE_BYTES, OPTIMIZERS, RECIPES
from .units import GiB

#: A fixed allowance for what no formula here models: the CUDA context and kernels (~0.3-0.6 GiB with
#: lazy module loading), cuBLAS/cuDNN workspaces and NCCL communication buffers. An allowance, not a
#: measurement; pass ``overhead_bytes=`` to use your own figure.
FIXED_OVERHEAD_BYTES = 1 * GiB

#: Allocator fragmentation as a fraction of the modelled tensors (PyTorch's caching allocator typically
#: reserves a few per cent to ~10% more than it hands out). Also an allowance.
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
    (``master_bytes``) and the optimizer's own buffers (``optimizer_state_bytes``)."""

    n_params: int
    precision: str
    optimizer: str
    weights_bytes: float
    gradients_bytes: float
    master_bytes: float
    optimizer_state_bytes: float
    parallel: Parallel = Parallel()

    @property
    def optimizer_bytes(self) -> float:
        return self.master_bytes + self.optimizer_state_bytes

    @property
    def total_bytes(self) -> float:
        return self.weights_bytes + self.gradients_bytes + self.optimizer_bytes

    @property
    def bytes_per_param(self) -> float:
        """Bytes on this GPU divided by the model's parameter count: the familiar 16 (bf16-mixed AdamW) on one
        GPU; with ``parallel`` it is the per-GPU share (e.g. 8 with ``Parallel(tp=2)``)."""
        return self.total_bytes / self.n_params

    def to_frame(self):
        """A DataFrame with one row per component (weights, gradients, master copy, optimizer states, total)."""
        return _frame({"weights": self.weights_bytes, "gradients": self.gradients_bytes,
                       "master copy": self.master_bytes, "optimizer states": self.optimizer_state_bytes,
                       "total": self.total_bytes}, self.n_params)


def optimizer_state_elements(model: Model | str, optimizer: str) -> float:
    """How many numbers the optimizer keeps (before choosing their dtype).

    Adafactor's factored second moment keeps ``r + c`` numbers per ``r x c`` matrix and the full vector for
    1-D tensors (Shazeer & Stern 2018, Alg. 4), so it is computed tensor by tensor from :meth:`Model.tensors`.
    """
    model = resolve_model(model)
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

    With ``parallel``, bytes are per GPU: the model is split evenly over ``tp * pp`` GPUs, then ZeRO stage 1
    shards the optimizer bytes over ``dp`` (with a recipe's extra fp32 gradient copy, which DeepSpeed keeps
    only for the GPU's own partition), stage 2 also the gradients, stage 3 also the weights (ZeRO paper,
    Fig. 1). The even split is an approximation: norms replicated under TP add < 0.01% (2e-5 of Llama-2-70B);
    with pipeline parallelism the first and last stages also hold the embedding and LM head, e.g. 13% above
    the even share for Llama-3-8B at ``pp=4``. The parallelism chapters refine both. Taught in chapter 2.
    """
    model = resolve_model(model)
    check_choice("precision", precision, RECIPES)
    elements = optimizer_state_elements(model, optimizer)
    return _states(model.n_params, elements, precision, optimizer, resolve_parallel(parallel, model))


def model_states_for_params(n_params: int, *, precision: str = "bf16-mixed", optimizer: str = "adamw",
                            parallel: Parallel | None = None) -> ModelStates:
    """:func:`model_states` for a bare parameter count, when there is no architecture to build (for example
    "a 10B model" in an article). Same recipes, same ZeRO rules.

    Only for optimizers whose state is elementwise (everything but Adafactor, whose factored moment depends on
    the tensor shapes: build a :class:`~llmsizing.model.Model` for it). Taught in chapter 2.
    """
    n = check_int("n_params", n_params)
    check_choice("precision", precision, RECIPES)
    opt = OPTIMIZERS[check_choice("optimizer", optimizer, OPTIMIZERS)]
    if opt.factored:
        raise ValueError(f"optimizer={optimizer!r} has a factored state that depends on the tensor shapes: "
                         "use model_states with a Model")
    return _states(n, opt.states * n, precision, optimizer, resolve_parallel(parallel))


def _states(n: int, elements: float, precision: str, optimizer: str, par: Parallel) -> ModelStates:
    """The recipe and ZeRO arithmetic shared by :func:`model_states` and :func:`model_states_for_params`:
    ``n`` parameters, ``elements`` optimizer-state numbers."""
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
    split = par.tp * par.pp
    weights, grads, extra, master, states = (x / split for x in (weights, grads, extra, master, states))
    if par.zero >= 1:
        master, states, extra = master / par.dp, states / par.dp, extra / par.dp
    if par.zero >= 2:
        grads = grads / par.dp
    if par.zero >= 3:
        weights = weights / par.dp
    return ModelStates(n, precision, optimizer, weights, grads + extra, master, states, par)


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
                  [check_choice("precision", p, RECIPES)
                   for p in check_sequence("precisions", precisions, example="['bf16-mixed', 'fp32']")])
    optimizers = (list(OPTIMIZERS) if optimizers is None else
                  [check_choice("optimizer", o, OPTIMIZERS)
                   for o in check_sequence("optimizers", optimizers, example="['adamw', 'adamw-8bit']")])
    rows = {p: {o: model_states(model, precision=p, optimizer=o).bytes_per_param for o in optimizers}
            for p in precisions}
    df = pd.DataFrame.from_dict(rows, orient="index")[optimizers]
    df.index.name = "recipe"
    return df


def min_gpus_for_bytes(n_bytes: float, gpu, *, usable_fraction: float = 1.0) -> int:
    """The smallest number of ``gpu`` (a catalogue name or :class:`~llmsizing.catalog.GPU`) whose memory,
    added up, holds ``n_bytes``: ``ceil(n_bytes / (usable_fraction x capacity))``.

    This is a lower bound that assumes the bytes shard perfectly (ZeRO-3/FSDP for model states, or tensor
    parallelism): nothing replicated, nothing else on the GPU. ``usable_fraction`` (0 < f <= 1) reserves part of
    each GPU for what you are not counting (activations, CUDA context, fragmentation). Taught in chapter 2.
    """
    from .catalog import get_gpu

    n_bytes = check_number("n_bytes", n_bytes)
    frac = check_number("usable_fraction", usable_fraction, minimum=0.0, allow_equal=False, maximum=1.0)
    g = get_gpu(gpu)
    cap = frac * g.memory_bytes
    if n_bytes / cap > MAX_MEANINGFUL:
        raise ValueError(f"usable_fraction={frac:g} leaves too little of each {g.name} to count GPUs for "
                         f"{n_bytes:g} bytes (more than {MAX_MEANINGFUL:,} GPUs)")
    n = math.ceil(n_bytes / cap)
    if n > 1 and n_bytes <= (n - 1) * cap:  # the quotient rounded up by floating-point noise
        n -= 1
    return n


# ----------------------------------------------------------------------------- training total
@dataclass(frozen=True)
class TrainingMemory:
    """Peak bytes on one GPU during a training step: model states + activations of ONE micro-batch +
    an overhead allowance. Gradient accumulation multiplies the global batch, not the activations."""

    states: ModelStates
    activations: "ActivationMemory"  # noqa: F821
    overhead_bytes: float
    micro_batch: int
    grad_accum: int
    seq: int
    flops_per_token: float

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
    def total_bytes(self) -> float:
        return (self.weights_bytes + self.gradients_bytes + self.optimizer_bytes
                + self.activations_bytes + self.overhead_bytes)

    @property
    def global_batch(self) -> int:
        """Sequences per optimizer step: micro-batch x accumulation steps x data-parallel replicas."""
        return self.micro_batch * self.grad_accum * self.states.parallel.dp

    @property
    def tokens_per_step(self) -> int:
        return self.global_batch * self.seq

    def to_frame(self):
        return _frame({"weights": self.weights_bytes, "gradients": self.gradients_bytes,
                       "optimizer": self.optimizer_bytes, "activations": self.activations_bytes,
                       "overhead": self.overhead_bytes, "total": self.total_bytes}, self.states.n_params)


def training_memory(model: Model | str, *, batch: int, seq: int, precision: str = "bf16-mixed",
                    optimizer: str = "adamw", attention: str = "flash", recompute: str = "none",
                    dropout: bool = False, grad_accum: int = 1, parallel: Parallel | None = None,
                    overhead_bytes: float | None = None) -> TrainingMemory:
    """Per-GPU training footprint: :func:`model_states` + :func:`~llmsizing.activations.activation_memory`
    of one micro-batch of ``batch`` sequences of ``seq`` tokens + an overhead allowance
    (:func:`default_overhead_bytes` unless ``overhead_bytes`` is given).

    Activations are saved in the recipe's working dtype (fp32 for ``fp32``, else 16-bit). ``grad_accum``
    only changes the global batch (``batch * grad_accum * dp``). ``flops_per_token`` is the compute one token
    costs, including recomputation (about 6N, or 8N with full recomputation; see
    :func:`~llmsizing.flops.training_flops_per_token`). Taught in chapter 4.
    """
    from .activations import activation_memory
    from .flops import training_flops_per_token

    model = resolve_model(model)
    batch, seq = check_int("batch", batch), check_int("seq", seq)
    grad_accum = check_int("grad_accum", grad_accum)
    par = resolve_parallel(parallel, model)
    states = model_states(model, precision=precision, optimizer=optimizer, parallel=par)
    act_dtype = "fp32" if RECIPES[precision].weights == "fp32" else RECIPES[precision].weights
    acts = activation_memory(model, batch=batch, seq=seq, dtype=act_dtype, attention=attention,
                             dropout=dropout, recompute=recompute, tp=par.tp, sp=par.sp)
    if overhead_bytes is None:
        overhead = default_overhead_bytes(states.total_bytes + acts.total_bytes)
    else:
        overhead = check_number("overhead_bytes", overhead_bytes)
    flops = training_flops_per_token(model, seq=seq, recompute=recompute)
    return TrainingMemory(states, acts, overhead, batch, grad_accum, seq, flops)


# ----------------------------------------------------------------------------- largest micro-batch
def max_micro_batch(model: Model | str, gpu, seq, *, precision: str = "bf16-mixed", optimizer: str = "adamw",
                    attention: str = "flash", recompute: str = "none", dropout: bool = False,
                    parallel: Parallel | None = None, overhead_bytes: float | None = None):
    """The largest micro-batch (sequences) whose :func:`training_memory` fits ``gpu``'s memory, for one
    sequence length ``seq`` (an int; returns an int) or many (a 1-D array of ints; returns an int array).

    0 means not even one sequence fits (the model states alone may already be too large). Exact, not a
    search: activation memory is linear in the micro-batch (Korthikanti et al. 2022, Sec. 4: every saved
    tensor has a factor ``b``) and the default overhead allowance is linear in the bytes it covers, so the
    per-GPU total is ``A(s) + b * B(s)`` with ``A``, ``B`` quadratics in ``s``. They are read off six calls of
    :func:`training_memory`, which makes the sweep over sequence lengths a NumPy expression (no loop) that
    agrees with :func:`training_memory` by construction. Taught in chapter 4.
    """
    import numpy as np

    from .catalog import get_gpu

    model = resolve_model(model)
    capacity = get_gpu(gpu).memory_bytes
    seqs = np.asarray(seq)
    if seqs.ndim > 1 or seqs.size == 0 or seqs.dtype.kind not in "iu":
        raise TypeError(f"seq must be an integer or a 1-D array of integers, got {seq!r}")
    if (seqs < 1).any() or (seqs > MAX_MEANINGFUL).any():
        raise ValueError(f"seq must be >= 1 and <= {MAX_MEANINGFUL:,}, got {seqs.min() if (seqs < 1).any() else seqs.max():,}")
    kw = dict(precision=precision, optimizer=optimizer, attention=attention, recompute=recompute,
              dropout=dropout, parallel=parallel, overhead_bytes=overhead_bytes)
    points = np.array([1024.0, 2048.0, 3072.0])
    tot = np.array([[training_memory(model, batch=b, seq=int(s), **kw).total_bytes for s in points]
                    for b in (1, 2)])
    per_seq = np.polyfit(points, tot[1] - tot[0], 2)      # B(s): bytes one more sequence adds
    fixed = np.polyfit(points, tot[0] - (tot[1] - tot[0]), 2)  # A(s): bytes at b = 0
    s = seqs.astype(float)
    room = capacity - np.polyval(fixed, s)
    # round before flooring so that an exact fit is not lost to floating-point noise
    b = np.floor(np.round(room / np.polyval(per_seq, s), 6))
    b = np.maximum(b, 0).astype(np.int64)
    return int(b) if seqs.ndim == 0 else b
