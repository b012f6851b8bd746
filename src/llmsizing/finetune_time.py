"""Fine-tuning time and cost, and LoRA/QLoRA over several GPUs (chapter 16, "Time and cost of a fine-tune").

The memory of a fine-tuning step is :mod:`llmsizing.finetune`'s; this module adds what the step costs in time
and money, and what splitting it over GPUs does to both.

**FLOPs per token.** Full fine-tuning is training: :func:`~llmsizing.flops.training_flops_per_token`, a
forward of ``2M`` (``M`` the weights that enter a matrix multiply, LM head included) plus the attention core,
and a backward of twice that: ``2M`` for the gradients of the activations and ``2M`` for those of the weights.
LoRA (Hu et al. 2021, Sec. 4.2: "we do not need to calculate the gradients or maintain the optimizer states
for most parameters") freezes the base, so the ``2M`` of weight gradients is not computed; the activations'
gradients still are, all the way down, because the adapters of every layer need them. The adapters add their
own, small, ``6 P`` (``P`` = :func:`~llmsizing.finetune.lora_params`: ``2 P`` forward, ``2 P`` for their
inputs' gradients and ``2 P`` for their weights'). So LoRA costs ``4M + 3 x attention + 6P`` per token against
full fine-tuning's ``6M + 3 x attention``: about two thirds. Recomputation adds what
:func:`~llmsizing.flops.training_flops_per_token` says it adds (full recomputation: a forward of the layers),
plus the adapters' forward again with full recomputation. Nothing here is a second formula: the base's terms
are read off :mod:`llmsizing.flops`.

**QLoRA's dequantisation** (Dettmers et al. 2023, Sec. 3: "we dequantize the storage data type to the
computation data type to perform the forward and backward pass"). bitsandbytes dequantises each nf4 block
matrix to bf16 before its matmul, in the forward and again in the backward (the input gradient needs the
weight), and once more in the forward that full recomputation reruns. Each dequantisation reads the nf4 bytes
(with their constants, :data:`~llmsizing.precision.DTYPE_BYTES`) and writes two bytes per weight: it is memory
traffic, so it is modelled **as time at a share of the GPU's HBM bandwidth** (``dequant_bandwidth_fraction``),
added to the arithmetic, not as a lower kernel efficiency. The slowdown is largest for small micro-batches
(the weights are dequantised per micro-batch, whatever its size).

**The fixed cost of a PEFT step.** HF Trainer with PEFT launches, per layer and micro-batch, the base matmuls
and each adapter's dropout, two small matmuls, scaling and sum (forward, recomputed forward, backward):
``layer_overhead_s`` of CPU time (LoRA, QLoRA). Launches are asynchronous (PyTorch, "CUDA semantics"): the
GPU runs earlier kernels meanwhile, so a micro-batch takes the **larger** of launches and GPU work
(arithmetic plus dequantisation), not their sum (the rule until ft34); per micro-batch, as the Trainer reads
each loss on the CPU (its NaN filter). Qwen-1.8B's LoRA steps (1.0, 1.0, 1.1 s at 256-1,024 tokens while the
arithmetic doubles) show that floor; no sum gives it.

**Calibration** (:func:`fit_finetune_constants`, ``tools/calibrate_finetune.py``,
``data/finetune_model.csv``). Both constants are fitted on every covered row of
``data/finetune_published.csv`` (not ``known_out``), as each leave-one-source-out fold of
:func:`finetune_loso_check` fits the other sources: ``layer_overhead_s`` on the LoRA rows, then
``dequant_bandwidth_fraction`` on the Q-LoRA rows. One share for all 4-bit kernels: most rows run GPTQ int4
with exllama off (Qwen's, optimum-benchmark's), the rest bitsandbytes or torchao, so the share leans to
GPTQ's, far below a decode step's. The range (issue 34) is an 80% prediction interval checked on sources the
fit never saw (:func:`finetune_loso_check`, :mod:`llmsizing.intervals`): the conformal
bounds of the out-of-source log residuals are :data:`RESIDUAL_RANGE`; ``data/intervals.csv`` holds their
measured coverage, width and source count. Sources: Qwen README (1.8B-72B, one A100 to two nodes), Answer.AI's
FSDP-QLoRA (nf4, four GPU types), torchtune's README (8B-405B, compiled), LLaMA-Factory's wiki (LLaMA2-7B
QLoRA, 1K-32K tokens), MLPerf's reference log (Llama-2-70B, ZeRO-3, 8K), HF optimum-benchmark (Llama-2 7B/13B,
256 tokens, batch 1-16), VectorLM (Llama-3-8B, FSDP on 1-4 A100s), universal-llm-trainer's README (8K tokens),
FlagPerf (Llama-2-7B, fp16, 512); NVIDIA's NeMo / Megatron-Bridge tables are kept out on purpose (issue 35).
Misses (``miss_reason``): faster, torchtune and optimum-benchmark's one-sample and 4-bit steps; slower,
Qwen-7B on two nodes and universal-llm-trainer (2.4-3.2x). Full fine-tuning rows are ``known_out``.

**Time and money.** A step processes ``batch x seq x grad_accum`` tokens on each of ``n`` GPUs; its time is
the larger of the launches and the arithmetic plus the dequantisation, plus the communication the step cannot
hide. The arithmetic is priced as a training step is (issue 34, round 4; :mod:`llmsizing.kernels`): the
Linear layers, adapters included, at the calibrated :func:`~llmsizing.hardware.kernel_efficiency` x the GEMM
efficiency of the micro-batch's shape (256 tokens: a thin GEMM), the attention core as causal kernels compute
it at the attention kernels' rate (a caller's ``kernel_efficiency``: one flat share). ``tokens x epochs`` take
``tokens x epochs / (tokens per step)`` steps; the GPU-hours and dollars follow
(:func:`~llmsizing.catalog.gpu_price`, the catalogue's on-demand price by default).

**Over several GPUs** (:data:`STRATEGIES`), all data-parallel:

* ``"ddp"``: every GPU holds the whole frozen base and the adapters (memory: :func:`finetune_memory` as on one
  GPU); after the backward the adapters' fp32 gradients are all-reduced once per step: tens of megabytes,
  hidden behind the last micro-batch's backward.
* ``"fsdp"``: the FSDP-QLoRA recipe (Answer.AI and Hugging Face, 2024: bitsandbytes' ``quant_storage`` lets
  FSDP shard the packed 4-bit weights) and FSDP with a bf16 base for LoRA: the base (in the method's storage
  format), the adapters and their optimizer states are sharded over the ``n`` GPUs; each unit (a block, the
  embedding, the LM head) is all-gathered for its forward and again for its backward, and the adapters'
  gradients are reduce-scattered every micro-batch. The gathers are prefetched behind the compute; what the
  compute cannot hide is added.
* ``"zero3"``: DeepSpeed ZeRO-3: the same arithmetic as ``"fsdp"`` (a sharded base, gathered unit by unit), as
  Hugging Face's PEFT guides run it for LoRA in bf16. The two differ in implementation (flat parameters,
  prefetch buckets), not in the bytes counted here.

The recipes side by side, with the range of their hours: :func:`llmsizing.finetune_strategies.strategy_table`.
Full fine-tuning over several GPUs is plain training: :func:`~llmsizing.finetune.finetune_memory` with
``Parallel(dp=n, zero=0 or 3)`` and :func:`~llmsizing.layouts.step_time` on the same layout.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ._compat import forward as _forward
from ._validate import check_choice, check_fraction, check_int, check_number
from .catalog import get_gpu, gpu_price, price_kind_of, resolve_model
from .finetune import ALL_LINEAR, METHODS, block_matrices, lora_params
from .finetune_sharded import (STRATEGIES, ShardedFinetuneMemory, _base_dtype, _largest,  # noqa: F401
                               finetune_memory_per_gpu, gathered_unit_bytes, max_batch_per_gpu, max_seq)
from .flops import RECOMPUTE, attention_flops_per_token, forward_flops_per_token, training_flops_per_token
from .hardware import dense_tflops
from .model import Model
from .precision import DTYPE_BYTES


#: FLOPs per adapter parameter and token: ``2`` forward, ``2`` for the gradient of its input, ``2`` for its
#: own.
ADAPTER_FLOPS_PER_PARAM = 6

#: The constants fitted on published fine-tuning steps (module docstring): ``data/finetune_model.csv``,
#: written by ``tools/calibrate_finetune.py`` from :func:`fit_finetune_constants`.
def _fitted_constants() -> dict:
    import csv

    from .catalog import DATA_DIR

    with open(DATA_DIR / "finetune_model.csv", newline="") as f:
        return {r["constant"]: float(r["value"]) for r in csv.DictReader(f)}


_FITTED = _fitted_constants()
#: The share of HBM bandwidth QLoRA's dequantisation reaches, fitted (module docstring: a GPTQ stand-in).
DEQUANT_BANDWIDTH_FRACTION = _FITTED["dequant_bandwidth_fraction"]
#: CPU seconds of a PEFT step's launches per layer and micro-batch (LoRA, QLoRA; overlap the GPU), fitted.
LAYER_OVERHEAD_S = _FITTED["layer_overhead_s"]
#: The 80% range of published/predicted step time: leave-one-source-out conformal bounds
#: (:func:`finetune_loso_check`), rounded outwards; measured coverage in ``data/intervals.csv``.
RESIDUAL_RANGE = (_FITTED["range_low"], _FITTED["range_high"])

#: Bytes per number of the adapters' gradients as DDP all-reduces them and FSDP reduce-scatters them: fp32, as
#: PEFT keeps the adapters on a 16-bit base (:mod:`llmsizing.finetune`).
ADAPTER_GRAD_BYTES = 4


# =========================================================================== FLOPs
@dataclass(frozen=True)
class FinetuneFlops:
    """FLOPs per token of one fine-tuning method (:func:`finetune_flops_per_token`). ``model_flops`` is what
    the method needs (the count an MFU divides), ``hardware_flops`` adds what recomputation reruns.
    ``weight_gradients_saved`` is the ``2M`` a frozen base does not compute (0 for full fine-tuning),
    ``adapter_flops`` the adapters' own ``6P`` (and their rerun forward with full recomputation)."""

    method: str
    forward: float
    weight_gradients_saved: float
    adapter_flops: float
    recompute_flops: float
    full_finetune: float

    @property
    def model_flops(self) -> float:
        return self.full_finetune - self.weight_gradients_saved + self.adapter_flops

    @property
    def hardware_flops(self) -> float:
        return self.model_flops + self.recompute_flops

    @property
    def ratio_to_full(self) -> float:
        """``model_flops`` over full fine-tuning's: about 2/3 for LoRA."""
        return self.model_flops / self.full_finetune


def finetune_flops_per_token(model: Model | str, *, method: str = "lora", seq: int, rank: int = 16,
                             targets=ALL_LINEAR, recompute: str = "none",
                             causal: bool = False) -> FinetuneFlops:
    """FLOPs per token of a fine-tuning step (module docstring): full fine-tuning is
    :func:`~llmsizing.flops.training_flops_per_token`; LoRA and QLoRA skip the frozen weights' gradients
    (``2M``, with ``M`` the matmul weights, LM head included) and add the adapters' ``6P`` (Hu et al. 2021).
    QLoRA's arithmetic is LoRA's (its dequantisation is memory traffic, :func:`dequant_bytes`)."""
    model = resolve_model(model)
    method = check_choice("method", method, METHODS)
    recompute = check_choice("recompute", recompute, RECOMPUTE)
    full = training_flops_per_token(model, seq=seq, causal=causal)
    rerun = training_flops_per_token(model, seq=seq, recompute=recompute, causal=causal) - full
    forward = forward_flops_per_token(model, seq=seq, causal=causal)
    if method == "full":
        return FinetuneFlops("full", forward, 0.0, 0.0, rerun, full)
    matmul_weights = (forward - attention_flops_per_token(model, seq=seq, causal=causal)) / 2
    p = lora_params(model, rank=rank, targets=targets)
    adapters = ADAPTER_FLOPS_PER_PARAM * p
    adapter_rerun = 2 * p if recompute == "full" else 0.0        # the adapters sit inside the rerun layers
    return FinetuneFlops(method, forward + 2 * p, 2 * matmul_weights, adapters, rerun + adapter_rerun, full)


def dequant_passes(recompute: str = "none") -> int:
    """How often QLoRA dequantises every block matrix per micro-batch: forward, backward, and the forward full
    recomputation reruns."""
    return 2 + (check_choice("recompute", recompute, RECOMPUTE) == "full")


def dequant_bytes(model: Model | str) -> float:
    """HBM bytes of dequantising every nf4 block matrix once: read its nf4 bytes (4.127 bits per weight with
    double quantisation) and write two bytes per weight (bf16)."""
    model = resolve_model(model)
    weights = model.layers * sum(d_out * d_in for d_out, d_in in block_matrices(model).values())
    return weights * (DTYPE_BYTES["nf4"] + DTYPE_BYTES["bf16"])


def adapter_checkpoint_bytes(model: Model | str, *, rank: int = 16, targets=ALL_LINEAR,
                             dtype: str = "fp32") -> float:
    """Bytes of a saved LoRA adapter (``adapter_model.safetensors``): its parameters
    (:func:`~llmsizing.finetune.lora_params`) in ``dtype``: fp32 as PEFT trains them on a 16-bit base, bf16 if
    cast before saving. A full fine-tune saves the whole model instead."""
    dtype = check_choice("dtype", dtype, ("fp32", "bf16", "fp16"))
    return lora_params(model, rank=rank, targets=targets) * DTYPE_BYTES[dtype]


# =========================================================================== memory over several GPUs


# =========================================================================== communication
@dataclass(frozen=True)
class FinetuneComm:
    """One step's communication on one GPU (:func:`finetune_communication`): each collective's seconds in full
    (``gather_forward_s`` and ``gather_backward_s`` per micro-batch, ``reduce_s`` per micro-batch for FSDP and
    per step for DDP) and the bytes each GPU sends per step."""

    strategy: str
    n_gpus: int
    gather_forward_s: float
    gather_backward_s: float
    reduce_s: float
    reduce_per_micro_batch: bool
    bytes_sent_per_step: float


def finetune_communication(model: Model | str, gpu, *, n_gpus: int, strategy: str = "ddp",
                           method: str = "lora", rank: int = 16, targets=ALL_LINEAR, grad_accum: int = 1,
                           node=None) -> FinetuneComm:
    """The collectives of a LoRA/QLoRA step over ``n_gpus`` on the network model
    (:func:`~llmsizing.network.collective_time_s` over the data-parallel group's
    :func:`~llmsizing.network.group_link`):

    * ``"ddp"``: one all-reduce of the adapters' fp32 gradients per step (``4 P`` bytes);
    * ``"fsdp"``/``"zero3"``: per micro-batch, an all-gather of the base in its storage format plus the
      adapters (fp32) for the forward and again for the backward, and a reduce-scatter of the adapters'
      gradients, one call per unit (the blocks, the embedding and the LM head: each call pays its latency).
    Bytes sent per GPU: those the times charge (:func:`~llmsizing.network.link_wire_factor`)."""
    from .inference import weights_bytes
    from .network import collective_time_s, get_node, group_link, link_wire_factor

    model = resolve_model(model)
    g = get_gpu(gpu)
    n = check_int("n_gpus", n_gpus, maximum=65536)
    strategy = check_choice("strategy", strategy, STRATEGIES)
    method = check_choice("method", method, METHODS)
    m = check_int("grad_accum", grad_accum)
    if method == "full":
        raise ValueError("method='full': full fine-tuning's communication is training's "
                         "(llmsizing.comm.communication with Parallel(dp=n, zero=...)); this is for "
                         "'lora'/'qlora'")
    grads = ADAPTER_GRAD_BYTES * lora_params(model, rank=rank, targets=targets)
    if n == 1:
        return FinetuneComm(strategy, 1, 0.0, 0.0, 0.0, strategy != "ddp", 0.0)
    link = group_link(g, get_node(node, g), size=n)
    if strategy == "ddp":
        t = collective_time_s("all-reduce", grads, n, link)
        return FinetuneComm("ddp", n, 0.0, 0.0, t, False, link_wire_factor("all-reduce", n, link) * grads)
    units = model.layers + (1 if model.tied_embeddings else 2)
    # the adapters (fp32) with their unit
    gathered = weights_bytes(model, _base_dtype(method)) + grads
    gather = units * collective_time_s("all-gather", gathered / units, n, link)
    reduce = units * collective_time_s("reduce-scatter", grads / units, n, link)
    sent = m * (2 * link_wire_factor("all-gather", n, link) * gathered + grads * link_wire_factor(
        "reduce-scatter", n, link))
    return FinetuneComm(strategy, n, gather, gather, reduce, True, sent)


# =========================================================================== time and cost
@dataclass(frozen=True)
class FinetuneTime:
    """Time and cost of a fine-tune (:func:`finetune_time`). Seconds are per optimizer step on one GPU:
    ``compute_s`` the arithmetic, ``dequant_s`` QLoRA's dequantisation, ``overhead_s`` the CPU time of a
    PEFT step's launches (``layer_overhead_s`` per layer and micro-batch), ``exposed_comm_s`` the
    communication the step waits for (``comm_s`` in full). ``step_s``: the larger of ``compute_s + dequant_s``
    and ``overhead_s`` (they overlap), plus ``exposed_comm_s``. ``tokens``: the dataset times the epochs."""

    model: str
    method: str
    gpu: str
    n_gpus: int
    strategy: str
    tokens: float
    seq: int
    batch: int
    grad_accum: int
    flops: FinetuneFlops
    kernel_efficiency: float
    compute_s: float
    dequant_s: float
    comm_s: float
    exposed_comm_s: float
    price_usd_per_gpu_hour: float
    overhead_s: float = 0.0
    price_kind: str = "list"     # "list", "estimate" or "reader" (catalog.price_kind_of)

    @property
    def tokens_per_step(self) -> int:
        return self.batch * self.seq * self.grad_accum * self.n_gpus

    @property
    def step_s(self) -> float:
        return max(self.compute_s + self.dequant_s, self.overhead_s) + self.exposed_comm_s

    @property
    def steps(self) -> int:
        return math.ceil(self.tokens / self.tokens_per_step)

    @property
    def tokens_per_s(self) -> float:
        """All GPUs together."""
        return self.tokens_per_step / self.step_s

    @property
    def seconds(self) -> float:
        return self.tokens / self.tokens_per_s

    @property
    def hours(self) -> float:
        return self.seconds / 3600

    @property
    def days(self) -> float:
        return self.hours / 24

    @property
    def gpu_hours(self) -> float:
        return self.hours * self.n_gpus

    @property
    def hours_range(self) -> tuple | None:
        """The 80% range of the run's hours: :data:`RESIDUAL_RANGE` (leave-one-source-out conformal bounds of
        published / predicted step times, chapter 16) times :attr:`hours`. ``None`` for full fine-tuning,
        which the published rows do not bound (their fixed per-step costs are ``known_out``)."""
        return None if self.method == "full" else tuple(self.hours * f for f in RESIDUAL_RANGE)

    @property
    def gpu_hours_range(self) -> tuple | None:
        """:attr:`hours_range` on all the GPUs: the same GPUs for longer or shorter (``None`` for full)."""
        return None if self.hours_range is None else tuple(h * self.n_gpus for h in self.hours_range)

    @property
    def cost_usd_range(self) -> tuple | None:
        """:attr:`gpu_hours_range` at the same price per GPU-hour (``None`` for full fine-tuning)."""
        return None if self.hours_range is None else tuple(h * self.price_usd_per_gpu_hour
                                                            for h in self.gpu_hours_range)

    @property
    def cost_usd(self) -> float:
        return self.gpu_hours * self.price_usd_per_gpu_hour

    @property
    def mfu(self) -> float:
        """The method's model FLOPs (:attr:`FinetuneFlops.model_flops`) over the GPUs' dense bf16 peak."""
        peak = dense_tflops(self.gpu, "bf16") * 1e12
        return self.tokens_per_s * self.flops.model_flops / (self.n_gpus * peak)

    def to_dict(self) -> dict:
        return {"model": self.model, "method": self.method, "gpu": self.gpu, "n_gpus": self.n_gpus,
                "strategy": self.strategy, "tokens": self.tokens, "seq": self.seq, "batch": self.batch,
                "grad_accum": self.grad_accum, "flops_per_token": self.flops.model_flops,
                "kernel_efficiency": self.kernel_efficiency, "step_s": self.step_s,
                "compute_s": self.compute_s, "dequant_s": self.dequant_s, "overhead_s": self.overhead_s,
                "exposed_comm_s": self.exposed_comm_s, "steps": self.steps,
                "tokens_per_s": self.tokens_per_s, "mfu": self.mfu, "hours": self.hours, "days": self.days,
                "gpu_hours": self.gpu_hours, "price_usd_per_gpu_hour": self.price_usd_per_gpu_hour,
                "cost_usd": self.cost_usd, "price_kind": self.price_kind,
                **dict(zip(("hours_low", "hours_high"), self.hours_range or (None, None)))}


def finetune_time(model: Model | str, *, gpu, method: str = "lora", tokens: float, epochs: float = 1.0,
                  seq: int, batch: int = 1, grad_accum: int = 1, n_gpus: int = 1, strategy: str = "ddp",
                  rank: int = 16, targets=ALL_LINEAR, recompute: str = "none",
                  kernel_efficiency: float | None = None, dequant_bandwidth_fraction: float | None = None,
                  layer_overhead_s: float | None = None, price_usd_per_gpu_hour: float | None = None,
                  node=None) -> FinetuneTime:
    """How long fine-tuning ``model`` on ``tokens`` tokens for ``epochs`` epochs takes on ``n_gpus`` GPUs of
    type ``gpu``, and what it costs (module docstring): the step's arithmetic
    (:func:`finetune_flops_per_token`'s hardware FLOPs as the step model prices them: GEMMs by shape, causal
    attention at the kernels' rate; or, given ``kernel_efficiency``, every FLOP at that share of the dense
    bf16 peak, and the result's ``kernel_efficiency`` is the one share that gives the time), QLoRA's
    dequantisation at ``dequant_bandwidth_fraction`` of the HBM bandwidth (default the fitted
    :data:`DEQUANT_BANDWIDTH_FRACTION`), the launches of a PEFT step (``layer_overhead_s`` per layer and
    micro-batch, default the fitted :data:`LAYER_OVERHEAD_S`; LoRA, QLoRA; since ft34 a micro-batch takes the
    larger of them and its GPU work, before, their sum), and the communication the step cannot hide
    (:func:`finetune_communication`; gathers behind each micro-batch's forward and backward, DDP's all-reduce
    behind the last backward). Full fine-tuning on several GPUs is
    :func:`~llmsizing.layouts.step_time` on ``Parallel(dp=n, zero=0 or 3)``. It does not check that the step
    fits: :func:`finetune_memory_per_gpu` does."""
    model = resolve_model(model)
    g = get_gpu(gpu)
    method = check_choice("method", method, METHODS)
    strategy = check_choice("strategy", strategy, STRATEGIES)
    tokens = check_number("tokens", tokens, allow_equal=False)
    epochs = check_number("epochs", epochs, allow_equal=False, maximum=1e6)
    seq, batch, m = check_int("seq", seq), check_int("batch", batch), check_int("grad_accum", grad_accum)
    n = check_int("n_gpus", n_gpus, maximum=65536)
    frac = (DEQUANT_BANDWIDTH_FRACTION if dequant_bandwidth_fraction is None
            else check_fraction("dequant_bandwidth_fraction", dequant_bandwidth_fraction))
    per_layer = (LAYER_OVERHEAD_S if layer_overhead_s is None
                 else check_number("layer_overhead_s", layer_overhead_s, maximum=1.0))
    flat = kernel_efficiency is not None
    eff = check_fraction("kernel_efficiency", kernel_efficiency) if flat else None
    price = gpu_price(g, price_usd_per_gpu_hour)
    fl = finetune_flops_per_token(model, method=method, seq=seq, rank=rank, targets=targets,
                                  recompute=recompute)
    micro_tokens = batch * seq
    if method == "full":
        from .layouts import step_time
        from .parallel import Parallel

        par = Parallel(dp=n, zero=0 if strategy == "ddp" else 3)
        st = step_time(model, g, par, batch=batch, seq=seq, grad_accum=m, kernel_efficiency=eff,
                       recompute=recompute)
        return FinetuneTime(model.name, method, g.name, n, strategy, tokens * epochs, seq, batch, m, fl,
                            st.kernel_efficiency, st.compute_s, 0.0, st.comm_s, st.exposed_comm_s, price,
                            price_kind=price_kind_of(g, price))
    peak = dense_tflops(g, "bf16") * 1e12
    if flat:                                          # one rate for every FLOP (the caller's efficiency)
        micro_s = micro_tokens * fl.hardware_flops / (peak * eff)
    else:                                             # as the step model prices a step (kernels)
        micro_s = _kernel_seconds(model, g, fl, seq=seq, batch=batch, recompute=recompute)
        eff = micro_tokens * fl.hardware_flops / (peak * micro_s)
    dq = 0.0
    if method == "qlora":
        dq = dequant_passes(recompute) * dequant_bytes(model) / (g.memory_bandwidth_gbps * 1e9 * frac)
    comm = finetune_communication(model, g, n_gpus=n, strategy=strategy, method=method, rank=rank,
                                  targets=targets, grad_accum=m, node=node)
    fwd_share = fl.forward / fl.hardware_flops
    fwd_s, bwd_s = micro_s * fwd_share, micro_s * (1 - fwd_share)
    if comm.reduce_per_micro_batch:
        total = m * (comm.gather_forward_s + comm.gather_backward_s + comm.reduce_s)
        exposed = m * (max(0.0, comm.gather_forward_s - fwd_s)
                       + max(0.0, comm.gather_backward_s + comm.reduce_s - bwd_s))
    else:
        total = comm.reduce_s
        exposed = max(0.0, comm.reduce_s - bwd_s)
    return FinetuneTime(model.name, method, g.name, n, strategy, tokens * epochs, seq, batch, m, fl, eff,
                        m * micro_s, m * dq, total, exposed, price, m * model.layers * per_layer,
                        price_kind_of(g, price))


def _kernel_seconds(model, g, fl, *, seq: int, batch: int, recompute: str) -> float:
    """One micro-batch's compute seconds on one GPU as :func:`~llmsizing.comm.step_compute_time_s` prices a
    training step (:mod:`llmsizing.kernels`): the Linear layers (the base's, the adapters') at the calibrated
    :func:`~llmsizing.hardware.kernel_efficiency` x the GEMM efficiency of the micro-batch's shape, the
    attention core as causal kernels run it, at the attention kernels' rate, and the layers' memory-bound
    kernels (norms, activation, loss) at the HBM bandwidth (:mod:`llmsizing.pointwise`)."""
    from .flops import stage_attention_flops_per_token
    from .hardware import kernel_efficiency as step_kernel_efficiency
    from .kernels import compute_seconds, rates
    from .parallel import Parallel
    from .pointwise import pointwise_seconds, stage_pointwise_bytes_per_token

    par = Parallel()
    full = stage_attention_flops_per_token(model, par, seq=seq, recompute=recompute)[0]
    causal = stage_attention_flops_per_token(model, par, seq=seq, recompute=recompute, causal=True)[0]
    gemm, attention = rates(model, g, tp=1, cp=1, batch=batch, seq=seq, dtype="bf16",
                            kernel_efficiency=step_kernel_efficiency(g, "bf16"))
    return (compute_seconds(fl.hardware_flops, full, causal, batch * seq, gemm, attention)
            + pointwise_seconds(stage_pointwise_bytes_per_token(model, par, recompute=recompute)[0],
                                batch * seq, g.memory_bandwidth_gbps * 1e9))


# =========================================================================== calibration
def _published_frame():
    import pandas as pd

    from .catalog import DATA_DIR

    df = pd.read_csv(DATA_DIR / "finetune_published.csv")
    df["strategy"] = df["strategy"].fillna("ddp") if "strategy" in df else "ddp"
    # why a row is outside the model / why it misses the fitted spread
    for col in ("known_out", "miss_reason"):
        df[col] = df[col].fillna("") if col in df else ""
    return df


def _predict(r, *, whole: bool = False, **constants):
    """Seconds per optimizer step of a row of ``data/finetune_published.csv`` (``whole``: its FinetuneTime;
    ``constants``: the fitted two); ``targets`` all-linear or short names, ``strategy`` blank for ddp."""
    targets = r.targets if r.method == "full" or r.targets == "all-linear" else tuple(r.targets.split())
    adapters = {} if r.method == "full" else dict(rank=int(r.rank), targets=targets)   # (full: every weight)
    t = finetune_time(r.model, gpu=r.gpu, method=r.method, tokens=1.0, seq=int(r.seq), batch=int(r.batch),
                      grad_accum=int(r.grad_accum), n_gpus=int(r.n_gpus), recompute=r.recompute,
                      strategy=getattr(r, "strategy", "ddp"), **constants, **adapters)
    return t if whole else t.step_s


def _step_of(r):
    """:func:`_predict` of a LoRA/QLoRA row as ``step(layer_overhead_s, dequant_bandwidth_fraction)``: the
    same terms as :func:`finetune_time`, the parts free of those constants priced once (for the grid)."""
    t, layers, m = _predict(r, whole=True), resolve_model(r.model).layers, int(r.grad_accum)
    moved = dequant_passes(r.recompute) * dequant_bytes(r.model) if r.method == "qlora" else 0.0
    hbm = get_gpu(r.gpu).memory_bandwidth_gbps * 1e9
    return lambda overhead, frac: (max(t.compute_s + m * (moved / (hbm * frac) if moved else 0.0),
                                       m * layers * overhead) + t.exposed_comm_s)


def _best_on_grid(loss, grid) -> float:
    """The grid point with the least loss (the first on ties): deterministic, no SciPy."""
    return min(grid, key=loss)                        # (min keeps the first of equal losses)


def _grid_fit(loss, lo: float, step: float, n: int, refine: bool) -> float:
    """The least-loss point of ``lo + i x step`` (``i < n``): on the whole grid, or (``refine``) on every
    tenth point first and then the whole grid within a coarse step of the best (the loss is smooth in one
    constant: the folds of :func:`finetune_loso_check` refit so)."""
    if not refine:
        return _best_on_grid(loss, [lo + i * step for i in range(n)])
    best = _best_on_grid(loss, [lo + i * step for i in range(0, n, 10)])
    k = round((best - lo) / step)
    return _best_on_grid(loss, [lo + i * step for i in range(max(0, k - 10), min(n, k + 11))])


def _fit_on(rows, refine: bool = False) -> tuple[float, float]:
    """``(layer_overhead_s, dequant_bandwidth_fraction)`` fitted on ``rows`` (module docstring)."""
    lora, qlora = rows[rows["method"] == "lora"], rows[rows["method"] == "qlora"]
    if lora.empty or qlora.empty:
        raise ValueError("the rows to fit on need LoRA and QLoRA rows (one constant is fitted on each)")
    lora, qlora = ([(r.s_per_step, _step_of(r)) for r in sub.itertuples()] for sub in (lora, qlora))

    def loss(sub, overhead, frac):
        return sum(math.log(s / step(overhead, frac)) ** 2 for s, step in sub)

    overhead = _grid_fit(lambda x: loss(lora, x, 0.5), 0.0, 1e-5, 1001, refine)
    frac = _grid_fit(lambda x: loss(qlora, overhead, x), 0.005, 0.001, 996, refine)
    return overhead, frac


def finetune_loso_check(coverage: float = 0.8, unit: str = "row"):
    """The fine-tuning step model checked by leaving one source out (:mod:`llmsizing.intervals`): each
    source's LoRA/QLoRA rows (not ``known_out``) are predicted with the constants refitted on every covered
    row of the other sources; the stated range is the conformal bounds of those log residuals. With three
    sources or more (module docstring) the check is nested: a held-out source is judged by bounds from the
    other sources' residuals, each of those from a fit that saw neither. Rows weigh alike (``unit="row"``:
    data/intervals.csv); ``unit="source"`` weighs sources alike, which needs 9 sources in each fold at 80%
    (:func:`~llmsizing.intervals.min_units`), so 10 in all (else ValueError). Two sources cannot be nested.
    ``(check, rows)``; refits are memoised by their training rows: ``S (S - 1) / 2 + S`` fits."""
    import numpy as np

    from .intervals import loso_check, source_key

    df = _published_frame()
    rows = df[df["known_out"] == ""].reset_index(drop=True)
    src = np.array([source_key(s) for s in rows["source"]], dtype=object)

    fits = {}

    def fit_predict(train, test):
        key = tuple(np.flatnonzero(train))
        if key not in fits:
            fits[key] = _fit_on(rows[train], refine=True)
        overhead, frac = fits[key]
        return [math.log(_predict(r, layer_overhead_s=overhead, dequant_bandwidth_fraction=frac))
                for r in rows[test].itertuples()]

    check = loso_check(np.log(rows["s_per_step"].to_numpy(float)), src, fit_predict, coverage=coverage,
                       nested=len(set(src)) >= 3, unit=unit)
    return check, rows.assign(source_key=src)


def fit_finetune_constants(with_range: bool = True) -> dict:
    """Fit :data:`LAYER_OVERHEAD_S` and :data:`DEQUANT_BANDWIDTH_FRACTION` on the covered rows (not
    ``known_out``) of ``data/finetune_published.csv``, every source, as each fold of
    :func:`finetune_loso_check` fits on the other sources (module docstring): first the per-layer overhead on
    the LoRA rows, then the dequantisation's bandwidth share on the QLoRA rows at that overhead, each
    minimising the squared log ratios of published to predicted step times over a fine grid (0 to 10 ms per
    layer in 0.01 ms steps; 0.005 to 1 in steps of 0.001). Returns both, rounded, and the 80% range of
    :func:`finetune_loso_check` (leave one source out; rounded outwards to 0.01 and widened to hold 1), unless
    ``with_range=False`` (the constants alone, without the check's refits)."""
    df = _published_frame()
    overhead, frac = _fit_on(df[df["known_out"] == ""])
    out = {"layer_overhead_s": round(overhead, 5), "dequant_bandwidth_fraction": round(frac, 3)}
    if not isinstance(with_range, bool):
        raise TypeError(f"with_range must be True or False, got {type(with_range).__name__}")
    if with_range:
        low, high = finetune_loso_check()[0].stated()
        out.update(range_low=math.floor(min(low, 1.0) * 100) / 100,
                   range_high=math.ceil(max(high, 1.0) * 100) / 100)
    return out


def finetune_residuals():
    """Every row of ``data/finetune_published.csv`` with the model's step time at the calibrated constants and
    the ratio published / predicted (above 1: the model is too fast), and whether the ratio lies inside the
    80% :data:`RESIDUAL_RANGE` (about one row in five need not; ``known_out`` rows are setups the model does
    not price). Shown in chapter 16."""
    df = _published_frame()
    df["predicted_s"] = [_predict(r) for r in df.itertuples()]
    df["ratio"] = df["s_per_step"] / df["predicted_s"]
    lo, hi = RESIDUAL_RANGE
    df["in_range"] = (df["ratio"] >= lo) & (df["ratio"] <= hi)
    return df


# moved when its table took the range of the hours (issue 34); the old import forwards for one release
__getattr__ = _forward(__name__, {"strategy_table": "llmsizing.finetune_strategies"})
