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
arithmetic doubles) show that floor; no sum gives it. **Per pass** (ft43): a step launches a layer's kernels
once per pass over it (:func:`~llmsizing.finetune_terms.layer_passes`: forward, backward, and the forward full
recomputation reruns), so ``layer_overhead_s`` prices a step without recomputation and full recomputation
pays :func:`launch_share` = 3 / 2 of it. The published launch-bound steps agree per pass, not per layer:
Qwen-1.8B's (full recomputation) 1.0 s / (8 x 24) = 5.2 ms a layer, optimum-benchmark's Llama-2 7B/13B at
batch 1 (none) 3.4 and 3.5 ms; per pass 1.74, 1.70, 1.75 ms. Per layer alone, each fold's floor came from the
source it kept and priced the other's 1.5x off (out of source 79.7% held at a stated 0.77-1.86; since, 81.4%
at 0.80-1.63). Tried after and not kept: a dequantisation share per quantizer family (GPTQ, bitsandbytes or
torchao; refitted in each fold) held 83.1% but widened the nested median range (2.36x to 2.43x).

**Calibration** (:func:`fit_finetune_constants`, ``tools/calibrate_finetune.py``,
``data/finetune_model.csv``). Both constants are fitted on every covered row of
``data/finetune_published.csv`` (not ``known_out``), as each leave-one-source-out fold of
:func:`finetune_loso_check` fits the other sources: ``layer_overhead_s`` on the LoRA rows, then
``dequant_bandwidth_fraction`` on the Q-LoRA rows. One share for all 4-bit kernels: most rows run GPTQ int4
with exllama off (Qwen's, optimum-benchmark's), the rest bitsandbytes or torchao, so the share leans to
GPTQ's, far below a decode step's. The range (issue 34) is an 80% prediction interval checked on sources the
fit never saw (:func:`finetune_loso_check`, :mod:`llmsizing.intervals`): the conformal
bounds of the out-of-source log residuals, per base since session 43 (:data:`GROUP_RANGES`, a QLoRA step's
and a LoRA step's: :data:`~llmsizing.finetune_groups.GROUPINGS` ``"base"``, adopted by its registered rule;
pooled, :data:`RESIDUAL_RANGE`); ``data/intervals.csv`` holds their measured coverage, width and sources.
Sources: Qwen README (1.8B-72B, one A100 to two nodes), Answer.AI's FSDP-QLoRA (nf4, four GPU types),
torchtune's README (8B-405B, compiled), LLaMA-Factory's wiki (LLaMA2-7B QLoRA, 1K-32K tokens), MLPerf's
reference log (Llama-2-70B, ZeRO-3, 8K), HF optimum-benchmark (Llama-2 7B/13B, 256 tokens, batch 1-16),
VectorLM (Llama-3-8B, FSDP on 1-4 A100s), universal-llm-trainer's README (8K tokens),
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

The step's FLOPs, QLoRA's dequantised bytes and the collectives over several GPUs are worked out in
:mod:`llmsizing.finetune_terms` (every name of which is importable from here too); this module prices them.

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
from .finetune import ALL_LINEAR, METHODS
# the groups of the range (issue 34; adopted in session 43): importable from here too
from .finetune_groups import (FINETUNE_GROUPING, GROUP_RANGES, GROUPINGS, RANGE_GROUPS,  # noqa: F401
                              finetune_group_labels, range_group, residual_range)
from .finetune_sharded import (STRATEGIES, ShardedFinetuneMemory, _base_dtype, _largest,  # noqa: F401
                               finetune_memory_per_gpu, gathered_unit_bytes, max_batch_per_gpu, max_seq)
# a step's FLOPs, dequantised bytes and collectives live in finetune_terms (issue 32: modules under 600
# lines); every name of theirs is still importable from here
from .finetune_terms import (ADAPTER_FLOPS_PER_PARAM, ADAPTER_GRAD_BYTES, FinetuneComm,  # noqa: F401
                             FinetuneFlops, adapter_checkpoint_bytes, dequant_bytes, dequant_passes,
                             finetune_communication, finetune_flops_per_token, layer_passes)
from .flops import RECOMPUTE
from .hardware import dense_tflops
from .model import Model


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
#: CPU seconds of a PEFT step's launches per layer and micro-batch of a step without recomputation (its two
#: passes; full recomputation: x :func:`launch_share`; LoRA, QLoRA; they overlap the GPU), fitted.
LAYER_OVERHEAD_S = _FITTED["layer_overhead_s"]
#: The pooled 80% range of published/predicted step time: leave-one-source-out conformal bounds
#: (:func:`finetune_loso_check`), rounded outwards; measured coverage in ``data/intervals.csv``. Still
#: reported; since session 43 a step takes its own group's, :data:`GROUP_RANGES`.
RESIDUAL_RANGE = (_FITTED["range_low"], _FITTED["range_high"])
#: The passes over a layer that :data:`LAYER_OVERHEAD_S` prices: the forward and the backward of a step
#: without recomputation (ft43; :func:`launch_share`).
LAUNCH_PASSES_PRICED = 2


def launch_share(recompute: str = "none") -> float:
    """The launch floor of a PEFT step with ``recompute`` over that of a step without (ft43, issue 34): a step
    launches a layer's kernels once per pass over it (:func:`~llmsizing.finetune_terms.layer_passes`: the
    forward, the backward and the forward full recomputation reruns, the passes QLoRA dequantises in), so
    full recomputation costs 3 / 2 of the launches; selective recomputation reruns no layer (1)."""
    return layer_passes(recompute) / LAUNCH_PASSES_PRICED


# =========================================================================== time and cost
@dataclass(frozen=True)
class FinetuneTime:
    """Time and cost of a fine-tune (:func:`finetune_time`). Seconds are per optimizer step on one GPU:
    ``compute_s`` the arithmetic, ``dequant_s`` QLoRA's dequantisation, ``overhead_s`` the CPU time of a
    PEFT step's launches (``layer_overhead_s`` per layer and micro-batch, x :func:`launch_share`),
    ``exposed_comm_s`` the
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
    price_kind: str = "list"     # one of catalog.PRICE_KINDS (catalog.price_kind_of)

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
    def range_group(self) -> str | None:
        """The group whose range this step states (:func:`range_group`: ``"quantised"`` for QLoRA,
        ``"bf16-base"`` for LoRA; ``None`` for full fine-tuning). Session 43."""
        return range_group(self.method)

    @property
    def residual_range(self) -> tuple | None:
        """The factors of the range, :attr:`range_group`'s :data:`GROUP_RANGES` (``None`` for full)."""
        return residual_range(self.method)

    @property
    def hours_range(self) -> tuple | None:
        """The 80% range of the run's hours: :attr:`residual_range` (leave-one-source-out conformal bounds of
        published / predicted step times of the step's group, chapter 16) times :attr:`hours`. ``None`` for
        full fine-tuning, which the published rows do not bound (their fixed per-step costs are
        ``known_out``)."""
        return None if self.method == "full" else tuple(self.hours * f for f in self.residual_range)

    @property
    def step_s_range(self) -> tuple | None:
        """The 80% range of one step's time: :attr:`residual_range` times :attr:`step_s` (the range is
        measured on published / predicted step times; :attr:`hours_range` is the same over the run's steps).
        ``None`` for full fine-tuning. Issue 34; chapter 16."""
        return None if self.method == "full" else tuple(self.step_s * f for f in self.residual_range)

    @property
    def exposed_comm_s_range(self) -> tuple | None:
        """:attr:`exposed_comm_s` at the ends of :attr:`step_s_range`, its share of the step kept. The range
        is measured on whole steps only, so this assumes that the model misses every part of a step alike (as
        serving's ``at_speed`` divides every step alike): a miss in the links alone would move the exposed
        time further, a miss in compute alone the other way (slower compute hides more). ``None`` for full
        fine-tuning. Issue 34; chapter 16."""
        return None if self.method == "full" else tuple(self.exposed_comm_s * f for f in self.residual_range)

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
                **dict(zip(("hours_low", "hours_high"), self.hours_range or (None, None))),
                "range_group": self.range_group}


def finetune_time(model: Model | str, *, gpu, method: str = "lora", tokens: float, epochs: float = 1.0,
                  seq: int, batch: int = 1, grad_accum: int = 1, n_gpus: int = 1, strategy: str = "ddp",
                  rank: int = 16, targets=ALL_LINEAR, recompute: str = "none",
                  kernel_efficiency: float | None = None, dequant_bandwidth_fraction: float | None = None,
                  layer_overhead_s: float | None = None, price_usd_per_gpu_hour: float | None = None,
                  node=None, kbit_prep: bool | None = None) -> FinetuneTime:
    """How long fine-tuning ``model`` on ``tokens`` tokens for ``epochs`` epochs takes on ``n_gpus`` GPUs of
    type ``gpu``, and what it costs (module docstring): the step's arithmetic
    (:func:`finetune_flops_per_token`'s hardware FLOPs as the step model prices them: GEMMs by shape, causal
    attention at the kernels' rate; or, given ``kernel_efficiency``, every FLOP at that share of the dense
    bf16 peak, and the result's ``kernel_efficiency`` is the one share that gives the time), QLoRA's
    dequantisation at ``dequant_bandwidth_fraction`` of the HBM bandwidth (default the fitted
    :data:`DEQUANT_BANDWIDTH_FRACTION`), the launches of a PEFT step (``layer_overhead_s`` per layer and
    micro-batch without recomputation, default the fitted :data:`LAYER_OVERHEAD_S`; since ft43 full
    recomputation pays :func:`launch_share` = 3 / 2 of it, a third pass; LoRA, QLoRA; since ft34 a micro-batch
    takes the larger of them and its GPU work, before, their sum), and the communication the step cannot hide
    (:func:`finetune_communication`; gathers behind each micro-batch's forward and backward, DDP's all-reduce
    behind the last backward; ``kbit_prep``, QLoRA's recipe, sets the base an FSDP/ZeRO-3 step gathers,
    default the strategy's, :func:`~llmsizing.finetune_sharded.default_kbit_prep`). Full fine-tuning on
    several GPUs is :func:`~llmsizing.layouts.step_time` on ``Parallel(dp=n, zero=0 or 3)``. It does not check
    that the step fits: :func:`finetune_memory_per_gpu` does."""
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
                                  targets=targets, grad_accum=m, node=node, kbit_prep=kbit_prep)
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
                        m * micro_s, m * dq, total, exposed, price,
                        m * model.layers * per_layer * launch_share(recompute), price_kind_of(g, price))


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


def attention_seconds(model: Model | str, gpu, *, seq: int, batch: int = 1, recompute: str = "none") -> float:
    """The attention core's seconds in one micro-batch on one GPU, as :func:`finetune_time` prices them
    (:func:`_kernel_seconds`: the core as causal kernels compute it, half the score matrix, in the forward,
    the backward and a recomputed forward, at the attention kernels' rate, :func:`~llmsizing.kernels.rates`):
    the part of a micro-batch's compute spent in attention, whatever the method (LoRA leaves the core alone).
    Chapter 16 reads it against the step at 32K tokens."""
    from .flops import stage_attention_flops_per_token
    from .hardware import kernel_efficiency as step_kernel_efficiency
    from .kernels import rates
    from .parallel import Parallel

    model = resolve_model(model)
    g = get_gpu(gpu)
    seq, batch = check_int("seq", seq), check_int("batch", batch)
    recompute = check_choice("recompute", recompute, RECOMPUTE)
    causal = stage_attention_flops_per_token(model, Parallel(), seq=seq, recompute=recompute, causal=True)[0]
    attention = rates(model, g, tp=1, cp=1, batch=batch, seq=seq, dtype="bf16",
                      kernel_efficiency=step_kernel_efficiency(g, "bf16"))[1]
    return causal * batch * seq / attention


# =========================================================================== calibration
def _published_frame():
    import pandas as pd

    from .catalog import DATA_DIR

    df = pd.read_csv(DATA_DIR / "finetune_published.csv")
    df["strategy"] = df["strategy"].fillna("ddp") if "strategy" in df else "ddp"
    # why a row is outside the model / why it misses the fitted spread
    for col in ("known_out", "miss_reason", "kbit_prep"):
        df[col] = df[col].fillna("") if col in df else ""
    return df


def _predict(r, *, whole: bool = False, **constants):
    """Seconds per optimizer step of a row of ``data/finetune_published.csv`` (``whole``: its FinetuneTime;
    ``constants``: the fitted two); ``targets`` all-linear or short names, ``strategy`` blank for ddp."""
    targets = r.targets if r.method == "full" or r.targets == "all-linear" else tuple(r.targets.split())
    adapters = {} if r.method == "full" else dict(rank=int(r.rank), targets=targets)   # (full: every weight)
    prep = {"yes": {"kbit_prep": True}, "no": {"kbit_prep": False}}.get(getattr(r, "kbit_prep", ""), {})
    t = finetune_time(r.model, gpu=r.gpu, method=r.method, tokens=1.0, seq=int(r.seq), batch=int(r.batch),
                      grad_accum=int(r.grad_accum), n_gpus=int(r.n_gpus), recompute=r.recompute,
                      strategy=getattr(r, "strategy", "ddp"), **constants, **adapters, **prep)
    return t if whole else t.step_s


def _step_of(r):
    """:func:`_predict` of a LoRA/QLoRA row as ``step(layer_overhead_s, dequant_bandwidth_fraction)``: the
    same terms as :func:`finetune_time`, the parts free of those constants priced once (for the grid)."""
    t, layers, m = _predict(r, whole=True), resolve_model(r.model).layers, int(r.grad_accum)
    moved = dequant_passes(r.recompute) * dequant_bytes(r.model) if r.method == "qlora" else 0.0
    hbm = get_gpu(r.gpu).memory_bandwidth_gbps * 1e9
    return lambda overhead, frac: (max(t.compute_s + m * (moved / (hbm * frac) if moved else 0.0),
                                       m * layers * overhead * launch_share(r.recompute)) + t.exposed_comm_s)


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


def published_frame():
    """The published LoRA/QLoRA/full fine-tuning step times (``data/finetune_published.csv``) as the
    calibration reads them: ``strategy`` defaults to ``"ddp"``, ``known_out``, ``miss_reason`` and
    ``kbit_prep`` to ``""`` (``kbit_prep``: ``"no"`` where the row's script never calls PEFT's k-bit
    preparation, Answer.AI's ``train.py`` and torchtune; blank, the strategy's recipe,
    :func:`~llmsizing.finetune_sharded.default_kbit_prep`). Chapter 16 refits on parts of it
    (:func:`fit_on`)."""
    return _published_frame()


def fit_on(rows, refine: bool = False) -> tuple[float, float]:
    """``(layer_overhead_s, dequant_bandwidth_fraction)`` fitted on ``rows`` of :func:`published_frame`
    (the calibration's fit, module docstring): chapter 16 fits without one source to show what it sets."""
    return _fit_on(rows, refine=refine)


def finetune_loso_check(coverage: float = 0.8, unit: str = "row", grouping: str | None = None):
    """The fine-tuning step model checked by leaving one source out (:mod:`llmsizing.intervals`): each
    source's LoRA/QLoRA rows (not ``known_out``) are predicted with the constants refitted on every covered
    row of the other sources; the stated range is the conformal bounds of those log residuals. With three
    sources or more (module docstring) the check is nested: a held-out source is judged by bounds from the
    other sources' residuals, each of those from a fit that saw neither. Rows weigh alike (``unit="row"``:
    data/intervals.csv); ``unit="source"`` weighs sources alike, which needs 9 sources in each fold at 80%
    (:func:`~llmsizing.intervals.min_units`), so 10 in all (else ValueError). Two sources cannot be nested.
    ``grouping`` (a name of :data:`GROUPINGS`; ``None``: one pooled range; the library states
    :data:`FINETUNE_GROUPING`'s, :data:`GROUP_RANGES`) gives each group bounds of its own where a fold holds
    9 of its rows (else the fold's pooled ones); ``rows`` then has a ``group`` column. ``(check, rows)``;
    refits are memoised by their training rows: ``S (S - 1) / 2 + S``."""
    return _loso_check(coverage, unit, grouping, {})


def _loso_check(coverage, unit, grouping, fits: dict):
    """:func:`finetune_loso_check` with its refits memoised in ``fits`` (training rows' indices -> constants),
    which :func:`finetune_grouping_table` shares between its groupings: a fit depends on its training rows
    alone, never on the grouping."""
    import numpy as np

    from .intervals import loso_check, source_key

    df = _published_frame()
    rows = df[df["known_out"] == ""].reset_index(drop=True)
    src = np.array([source_key(s) for s in rows["source"]], dtype=object)
    strata = None if grouping is None else finetune_group_labels(rows, grouping)

    def fit_predict(train, test):
        key = tuple(np.flatnonzero(train))
        if key not in fits:
            fits[key] = _fit_on(rows[train], refine=True)
        overhead, frac = fits[key]
        return [math.log(_predict(r, layer_overhead_s=overhead, dequant_bandwidth_fraction=frac))
                for r in rows[test].itertuples()]

    check = loso_check(np.log(rows["s_per_step"].to_numpy(float)), src, fit_predict, coverage=coverage,
                       nested=len(set(src)) >= 3, unit=unit, strata=strata)
    rows = rows.assign(source_key=src)
    return check, rows if strata is None else rows.assign(group=strata)


def finetune_grouping_table(groupings=None):
    """Per grouping of :data:`GROUPINGS` (``None``: all of them), after the single range ``"none"``, and per
    group (``"all"``: every row): rows, sources, the out-of-source coverage and median width of
    :func:`finetune_loso_check` ``grouping=``, and the bounds stated on every source (the group's own, or
    the pooled ones). ``adopt``, the rule registered before the check, on a grouping's ``"all"`` row:
    coverage at least and median width below the single range's, and every group's coverage at least 75%."""
    import numpy as np
    import pandas as pd

    from ._validate import check_choice

    names = tuple(GROUPINGS) if groupings is None else tuple(groupings)
    out, fits = [], {}                                # (the refits, shared: the same rows in every grouping)
    for name in ("none", *(check_choice("groupings", n, GROUPINGS) for n in names)):
        check, rows = _loso_check(0.8, "row", None if name == "none" else name, fits)
        groups = rows["group"].to_numpy() if name != "none" else np.full(len(rows), "all", dtype=object)
        width = np.exp(check.high_log - check.low_log)
        for g in dict.fromkeys(("all", *groups)):
            m = np.ones(len(rows), bool) if g == "all" else groups == g
            lo, hi = check.stated(None if g == "all" else g)
            out.append(dict(grouping=name, group=g, rows=int(m.sum()),
                            sources=int(rows["source_key"][m].nunique()),
                            measured_coverage=float(check.inside[m].mean()),
                            median_width=float(np.median(width[m])), low=lo, high=hi))
    t = pd.DataFrame(out)
    ref = t.iloc[0]                                   # the single range
    floor = t.groupby("grouping")["measured_coverage"].min() >= 0.75
    t["adopt"] = [r.group == "all" and r.grouping != "none" and r.measured_coverage >= ref.measured_coverage
                  and r.median_width < ref.median_width and bool(floor[r.grouping]) for r in t.itertuples()]
    return t


def fit_finetune_constants(with_range: bool = True) -> dict:
    """Fit :data:`LAYER_OVERHEAD_S` and :data:`DEQUANT_BANDWIDTH_FRACTION` on the covered rows (not
    ``known_out``) of ``data/finetune_published.csv``, every source, as each fold of
    :func:`finetune_loso_check` fits on the other sources (module docstring): first the per-layer overhead on
    the LoRA rows, then the dequantisation's bandwidth share on the QLoRA rows at that overhead, each
    minimising the squared log ratios of published to predicted step times over a fine grid (0 to 10 ms per
    layer in 0.01 ms steps; 0.005 to 1 in steps of 0.001). Returns both, rounded, and the 80% range of
    :func:`finetune_loso_check` (leave one source out; rounded outwards to 0.01 and widened to hold 1), pooled
    (``range_low``/``range_high``) and per group of :data:`FINETUNE_GROUPING` (``range_low_quantised``, ...:
    ``grouping="base"``'s bounds), unless ``with_range=False`` (the constants alone, without the refits)."""
    df = _published_frame()
    overhead, frac = _fit_on(df[df["known_out"] == ""])
    out = {"layer_overhead_s": round(overhead, 5), "dequant_bandwidth_fraction": round(frac, 3)}
    if not isinstance(with_range, bool):
        raise TypeError(f"with_range must be True or False, got {type(with_range).__name__}")
    if with_range:
        fits = {}                                     # (the refits, shared by the pooled and grouped checks)
        grouped = _loso_check(0.8, "row", FINETUNE_GROUPING, fits)[0]
        for suffix, (low, high) in [("", _loso_check(0.8, "row", None, fits)[0].stated()),
                                    *((f"_{k}", grouped.stated(g)) for g, k in RANGE_GROUPS.items())]:
            out.update({f"range_low{suffix}": math.floor(min(low, 1.0) * 100) / 100,
                        f"range_high{suffix}": math.ceil(max(high, 1.0) * 100) / 100})
    return out


def finetune_residuals():
    """Every row of ``data/finetune_published.csv`` with the model's step time at the calibrated constants and
    the ratio published / predicted (above 1: the model is too fast), and whether the ratio lies inside the
    80% range of its group (``range_group``, :data:`GROUP_RANGES`; a full row, the pooled
    :data:`RESIDUAL_RANGE`; about one row in five need not; ``known_out`` rows are setups the model does
    not price). Shown in chapter 16."""
    df = _published_frame()
    df["predicted_s"] = [_predict(r) for r in df.itertuples()]
    df["ratio"] = df["s_per_step"] / df["predicted_s"]
    df["range_group"] = [range_group(m) for m in df["method"]]
    lo, hi = (df["method"].map(lambda m, i=i: (residual_range(m) or RESIDUAL_RANGE)[i]) for i in (0, 1))
    df["in_range"] = (df["ratio"] >= lo) & (df["ratio"] <= hi)
    return df


# moved when its table took the range of the hours (issue 34); the old import forwards for one release
__getattr__ = _forward(__name__, {"strategy_table": "llmsizing.finetune_strategies"})
