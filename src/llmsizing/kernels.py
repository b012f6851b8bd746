"""What the kernels of a training step reach, by what they compute (issue 34): the attention core as
FlashAttention runs it, and each Linear layer's GEMM by its shape. Taught in chapter 10 ("Kernel efficiency")
and the "Long context" chapter.

**Attention.** A causal kernel (FlashAttention-2/3, cuDNN) skips the masked blocks, so it executes about
half of the ``s x s`` score matrix (:func:`~llmsizing.flops.attention_flops_per_token`, ``causal=True``), and
it runs below GEMM speed: :func:`attention_efficiency` is the share of the dense BF16 peak its forward and
backward reach, from the published benchmarks in ``data/attention_efficiency.csv`` (Dao 2023, Fig. 4; the
flash-attention README's H100 figure; Shah et al. 2024, Figs. 5-6), at the head dimension and the sequence
each GPU's kernel sees, interpolated in ``log2(seq)`` and ``head_dim`` and held flat beyond the table. Those
benchmarks count a causal pass as half the matrix and forward plus backward as 3.5 forwards (the backward
recomputes ``QK^T``: ``benchmarks/benchmark_flash_attention.py``); the library counts 3 forwards (the model's
FLOPs), so the rate in its convention is ``3 / 3.5`` of the published one. The same A100 figure's Triton
bars (``"flash-attention-triton"``, the kernel llm-foundry copied) are there on request, not as any stack's
default: at the calibrated Ampere efficiency they fit llm-foundry's A100 rows less well than FlashAttention-2
(published / predicted 1.22 and 1.29 against 0.99 and 0.83 for MPT-7B at 8K and MPT-13B at 32K), although
those rows' notes, from their source, say the sweep ran it: a model inference, not a finding about what ran
(tests/test_long_context_kernels.py).

**Unfused attention** (``"unfused"``, ``"unfused-dropout"``: :func:`unfused_attention_efficiency`). Before
FlashAttention (Dao et al. 2022) a layer's attention wrote each head's ``s x s`` scores to HBM and read them
back (Dao et al. 2022, Sec. 2.2, Algorithm 0; Megatron-LM's ``CoreAttention``: ``baddbmm``, fused scale-mask
softmax, attention dropout, ``bmm``), so it runs at the HBM bandwidth, not at GEMM speed. Priced by a
roofline on the GPU's own peak and bandwidth, not by a benchmark: an approximation that takes every pass
at the full HBM bandwidth and every GEMM at ``GEMM_CEILING``, with no launch or cache cost, so it is an upper
bound on the share. It has not been checked against a measured unfused kernel, so its error is not known;
the check is indirect: Narayanan et al.'s eight Megatron-LM runs priced with it land inside the range held
out of their source (chapter 10, issue 34).

**GEMMs.** A matrix multiply ``(m x k) @ (k x n)`` reaches a share of the peak that grows with its arithmetic
intensity ``I`` (FLOPs per byte moved, :func:`~llmsizing.hardware.matmul_intensity_flops_per_byte`) over the
GPU's ridge point (:func:`~llmsizing.hardware.ridge_point_flops_per_byte`): :func:`gemm_efficiency` is
``min(GEMM_CEILING, GEMM_EMAX x r / (r + GEMM_R_HALF))`` with ``r = I / ridge``, fitted on cuBLAS (A100 BF16,
NVIDIA's CUDA 11 figure) and DeepGEMM (H800 FP8) tables in ``data/gemm_efficiency.csv``
(:func:`fit_gemm_curve`: one curve for both, 2.7% rms). Below ``FEW_ROWS`` (4,096) rows a GEMM is priced at
the curve's share at 4,096 rows times :func:`few_row_share`, what XLA's measured H100 BF16 table (``kind ==
"grid"``, 256 to 4,096 in each dimension) keeps at ``m`` rows of its rate at 4,096 rows, same ``n`` and ``k``
(gemm44, 2026-12-04); a GPU of a compute target with its own measured table prices by it (:func:`grid_gpu`:
the B200's and GB200's, XLA's ``sm_100``, which keeps 0.86 at 1,024 rows where the H100's keeps 0.96; in FP8
and FP4 its FP8 rows, 0.70: :mod:`llmsizing.gemm_grid`). The curve alone read few rows by intensity, as if a
1,024-row GEMM were a 1,024^3 square (which loses to wave quantisation): at ``n = k = 4,096`` it kept 0.69 and
0.87 of the 4,096-row share at 1,024 and 2,048 rows where XLA measured 0.96 and 0.96 (751.9 and 752.3 of 780.2
TFLOP/s); Bekman's best A100 shape, 1,024 x 10,240 x 5,120, 0.87 of the peak measured, was 0.64 on the curve
and is 0.81 now; the A100 squares of NVIDIA's CUDA 11 figure, which the rule does not read, keep 0.32 and 0.57
of 4,096^3 at 1,024^3 and 1,536^3 against 0.34 and 0.58 measured (the curve alone: 0.53 and 0.67). At small
``n`` and ``k`` the table falls faster with fewer rows than the curve did, so those GEMMs cost more.
What it moved (nothing fitted; kernel efficiency refit as always): the layout range 81.1% / 1.583x -> 87.4% /
1.529x out of source (Qi et al.'s Zero Bubble A100 rows at 1 x 1,024 tokens a micro-batch, PP16/PP32, were
1.21-1.27 over the step model against 0.99-1.04 at PP8: all 12 now 0.98-1.04; Ampere's kernel efficiency
0.722 -> 0.706), the named-stack one 79.3% / 1.494x -> 85.6% / 1.461x, fine-tuning's 83.9% / 2.274x -> 83.1%
/ 2.200x; the MoE range (1.952x, every run's ratio the same to 3 places) and serving unchanged
(``tools/gemm_table_check.py few-rows``). Nemotron-4 15B at TP8 (4,096-token micro-batches) does not move.
Before it (gemm37, Dec 2026) the whole table in place of the curve narrowed the layout range about as much
(82.9% / 1.65x -> 87.4% / 1.54x) but widened the MoE range (2.32x -> 3.37x; with the experts' tile padding
priced, moe38: 2.17x -> 3.12x; with JetMoE's attention experts, jetmoe38: 2.10x -> 3.12x): the small
mixtures of experts (Granite 3.0 1B and 3B, JetMoE) run slower than their GEMMs, and for them the curve's
steep fall at small ``n`` and ``k`` stands in for what else a layer costs (a launch cost of 40-200 us a layer
does not close it; tests/test_gemm_table.py). So the curve keeps the shape above 4,096 rows until those costs
are priced apart. A layer's GEMMs (:func:`layer_gemms`) have ``m`` = the tokens of a micro-batch on one GPU
and ``k``, ``n`` from the hidden, heads and MLP widths divided by ``tp``: a 2,048-wide model's GEMMs run below
a 16,384-wide one's. A mixture of experts' routed GEMMs run grouped, all of a GPU's experts in one kernel:
priced at all their rows, times what DeepGEMM's grouped tables lose to few rows per expert
(:func:`grouped_gemm_share`), times the share of each expert's 128-row tiles its rows fill
(:func:`expert_padding_share`: the kernels pad an expert's rows to whole tiles, moe38).

The step model (:func:`~llmsizing.comm.step_compute_time_s` and the planner's copy) charges the Linear layers
at ``kernel_efficiency x gemm_efficiency`` (the calibrated ``kernel_efficiency``,
``data/kernel_efficiency.csv``, is what a step loses besides the GEMM shape and the terms priced apart:
launches and what is not counted) and the attention core at :func:`attention_efficiency`:
:func:`compute_seconds` is that sum, in one place for both; the norms, residual adds, activation, rotary
embedding and loss are priced apart on HBM bandwidth by their bytes (:mod:`llmsizing.pointwise`). Under an
FP8 recipe the Linear layers' rate also pays the kernels that cast their operands to FP8, by the bytes they
move at the HBM bandwidth (:mod:`llmsizing.fp8_cast`; :func:`rates`): about 8-10% of an H100's FP8 GEMM time
for Llama 3 8B or MPT-3B, the most for narrow layers and few tokens per micro-batch.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from ._validate import check_choice, check_int, check_number
from .catalog import get_gpu, resolve_model
from .fp8_cast import cast_seconds, linear_cast_bytes
from .gemm_grid import (  # noqa: F401 (the few-row tables, moved out in gb46; every name still importable here)
    FEW_ROWS, GRID_SIZES, GRID_STAND_IN, _grid_rate, _grid_tables, few_row_share, grid_dtype, grid_gpu)
from .hardware import _intensity, dense_tflops, kernel_efficiency_row, matmul_intensity_flops_per_byte
from .hardware import ridge_point_flops_per_byte

DATA = Path(__file__).resolve().parents[2] / "data"

#: The published GEMM curve (:func:`fit_gemm_curve` on ``data/gemm_efficiency.csv``'s ``kind == "curve"``
#: rows whose output fills a wave): share of the peak ``GEMM_EMAX x r / (r + GEMM_R_HALF)``,
#: ``r`` = intensity / ridge.
GEMM_R_HALF = 3.75
GEMM_EMAX = 1.10
#: ... never above the best share a table measured (A100 BF16, 8192^3: 290 of 312 TFLOP/s).
GEMM_CEILING = 0.93
#: A GEMM whose output has fewer elements than this (128 tiles of 128 x 256: one wave on a 108- to 132-SM GPU)
#: loses to wave quantisation, which training's GEMMs (thousands of tokens) do not: the fit leaves it out.
WAVE_OUTPUTS = 2 ** 22

#: The attention kernel each generation's training stacks run by default; a generation without published
#: figures takes ``STAND_IN`` (FlashAttention-2 on Ampere: the portable kernel's measured share of peak).
DEFAULT_KERNEL = {"ampere": "flash-attention-2", "hopper": "flash-attention-2"}
STAND_IN = ("ampere", "flash-attention-2")
#: FlashAttention's benchmarks count forward + backward as 3.5 forwards, the library as 3.
FA_FWD_BWD, LIB_FWD_BWD, FA_BWD = 3.5, 3.0, 2.5


@dataclass(frozen=True)
class AttentionPoint:
    """A row of ``data/attention_efficiency.csv``: one published attention benchmark bar."""

    gpu: str
    generation: str
    kernel: str
    passes: str
    causal: bool
    head_dim: int
    seq: int
    tflops: float
    source: str


@lru_cache(maxsize=1)
def attention_points() -> tuple[AttentionPoint, ...]:
    """``data/attention_efficiency.csv`` (every row names its source and ``as_of``)."""
    with open(DATA / "attention_efficiency.csv", newline="") as fh:
        return tuple(AttentionPoint(r["gpu"], r["generation"], r["kernel"], r["passes"], r["causal"] == "yes",
                                    int(r["head_dim"]), int(r["seq"]), float(r["tflops"]), r["source"])
                     for r in csv.DictReader(fh))


def _interp(x: float, xs, ys) -> float:
    """Linear interpolation, flat beyond the ends (``xs`` ascending)."""
    if x <= xs[0]:
        return ys[0]
    for (x0, y0), (x1, y1) in zip(zip(xs, ys), zip(xs[1:], ys[1:])):
        if x <= x1:
            return y0 + (y1 - y0) * (x - x0) / (x1 - x0)
    return ys[-1]


def _curve(rows, head_dim: int, seq: int) -> float:
    """TFLOP/s of ``rows`` (one kernel, pass and mask) at ``head_dim`` and ``seq``: in ``log2(seq)`` at each
    head dimension, then in ``head_dim``."""
    dims = sorted({r.head_dim for r in rows})
    at = []
    for d in dims:
        pts = sorted((math.log2(r.seq), r.tflops) for r in rows if r.head_dim == d)
        at.append(_interp(math.log2(seq), [p[0] for p in pts], [p[1] for p in pts]))
    return _interp(head_dim, dims, at)


@lru_cache(maxsize=4096)
def _attention_rate_tflops(generation: str, kernel: str, head_dim: int, seq: int) -> float:
    rows = [r for r in attention_points() if r.generation == generation and r.kernel == kernel]
    both = [r for r in rows if r.passes == "fwd+bwd" and r.causal]
    if both:
        return _curve(both, head_dim, seq) * LIB_FWD_BWD / FA_FWD_BWD
    fwd = [r for r in rows if r.passes == "fwd" and r.causal]
    bwd = [r for r in rows if r.passes == "bwd" and r.causal] or [r for r in rows if r.passes == "bwd"]
    if not fwd or not bwd:
        raise ValueError(f"kernel {kernel!r} has no causal forward and backward figures for {generation}")
    # time of the causal forward (F / R_fwd) and backward (2.5 F / R_bwd; the papers' backward is unmasked:
    # taken at the same rate), in the library's 3 F
    return LIB_FWD_BWD / (1 / _curve(fwd, head_dim, seq) + FA_BWD / _curve(bwd, head_dim, seq))


#: The unfused attention kernels (module docstring) and the ``s x s`` passes through HBM each makes per head,
#: forward and backward, a pass being one read or write of the 2-byte score matrix
#: (:func:`unfused_attention_efficiency`)
UNFUSED_PASSES = {"unfused": 11.0, "unfused-dropout": 16.0}


def attention_kernels(gpu) -> tuple[str, ...]:
    """The attention kernels with published figures for ``gpu``'s generation, and the unfused ones
    (:data:`UNFUSED_PASSES`, priced on any GPU)."""
    gen = kernel_efficiency_row(gpu, "bf16").generation
    return tuple(sorted({r.kernel for r in attention_points() if r.generation == gen} | set(UNFUSED_PASSES)))


def unfused_attention_efficiency(gpu, *, head_dim: int, kernel: str = "unfused") -> float:
    """Share of ``gpu``'s dense BF16 peak ``P`` that unfused attention reaches, forward and backward, in the
    library's FLOP convention (``6 s^2 d`` per head: the causal half, 3 forwards), by a roofline at its
    HBM bandwidth ``B``. Per head and per ``s^2`` (the sequence cancels):

    * six batched GEMMs (forward ``QK^T`` and ``PV``; backward ``dO V^T``, ``P^T dO``, ``dS K``,
      ``dS^T Q``), each ``2 d`` FLOPs (the whole matrix: a mask skips nothing) and one 2-byte pass over a
      score matrix, taking ``max(2 d / (GEMM_CEILING P), 2 / B)``;
    * the rest of the passes (:data:`UNFUSED_PASSES`) at ``B``: the fused softmax reads the scores and writes
      the probabilities (2 passes), its backward reads the probabilities and their gradient and writes the
      scores' (3); 11 in all. ``"unfused-dropout"`` adds attention dropout: forward reads the probabilities,
      writes them dropped and a 1-byte mask, its backward the same (2.5 + 2.5), 16 in all (Megatron-LM's
      default ``--attention-dropout 0.1``, ``megatron/arguments.py``).

    A100 80GB, ``d = 96``: ``2 d / (0.93 x 312e12) = 6.6e-13 < 2 / 2.039e12 = 9.8e-13`` s, so memory-bound;
    ``6 x 9.8e-13 + 10 / 2.039e12 = 1.08e-11`` s, and ``6 x 96 / (312e12 x 1.08e-11) = 0.171``
    (FlashAttention-2 reaches about twice that)."""
    g = get_gpu(gpu)
    head_dim = check_int("head_dim", head_dim)
    kernel = check_choice("kernel", kernel, tuple(UNFUSED_PASSES))
    peak = dense_tflops(g, "bf16") * 1e12
    bw = g.memory_bandwidth_gbps * 1e9
    gemm_s = 6 * max(2 * head_dim / (GEMM_CEILING * peak), 2 / bw)
    rest_s = 2 * (UNFUSED_PASSES[kernel] - 6) / bw
    return 6 * head_dim / (peak * (gemm_s + rest_s))


def attention_efficiency(gpu, *, head_dim: int, seq: int, kernel: str | None = None) -> float:
    """Share of ``gpu``'s dense BF16 peak that causal attention reaches, forward and backward, in the
    library's FLOP convention (the causal half of the score matrix, 3 forwards): the published TFLOP/s of
    ``kernel`` (default :data:`DEFAULT_KERNEL` of the GPU's generation; a generation without figures takes
    :data:`STAND_IN`) at ``head_dim`` and ``seq`` (the query length one GPU's kernel sees), x 3 / 3.5, over
    the peak of the GPU the benchmark ran on. FA2 on an A100 at head dim 128 and 8K: 182 x 3 / 3.5 / 312 =
    0.50."""
    return _attention_efficiency(get_gpu(gpu), check_int("head_dim", head_dim), check_int("seq", seq), kernel)


@lru_cache(maxsize=4096)
def _attention_efficiency(g, head_dim: int, seq: int, kernel: str | None) -> float:
    """:func:`attention_efficiency` of checked arguments, kept (the planner asks for the same GPU and query
    length once per tensor-parallel degree, micro-batch and ``ep``; a refused ``kernel`` raises each time)."""
    if kernel in UNFUSED_PASSES:
        return unfused_attention_efficiency(g, head_dim=head_dim, kernel=kernel)
    gen = kernel_efficiency_row(g, "bf16").generation
    if gen not in {r.generation for r in attention_points()}:
        gen, default = STAND_IN
    else:
        default = DEFAULT_KERNEL[gen]
    kernel = default if kernel is None else check_choice(
        "kernel", kernel, tuple(sorted({r.kernel for r in attention_points() if r.generation == gen}
                                       | set(UNFUSED_PASSES))))
    bench = next(r.gpu for r in attention_points() if r.generation == gen and r.kernel == kernel)
    return _attention_rate_tflops(gen, kernel, head_dim, seq) / dense_tflops(bench, "bf16")


def gemm_efficiency(gpu, m: int, n: int, k: int, dtype: str = "bf16") -> float:
    """Share of ``gpu``'s dense peak in ``dtype`` that one ``(m x k) @ (k x n)`` GEMM reaches (module
    docstring): ``min(GEMM_CEILING, GEMM_EMAX x r / (r + GEMM_R_HALF))``, ``r`` its arithmetic intensity
    (inputs and output read or written once, 1 byte per element in FP8, 2 otherwise) over the ridge point;
    below ``FEW_ROWS`` rows that at ``FEW_ROWS`` rows times :func:`few_row_share` (gemm44)."""
    dtype = check_choice("dtype", dtype, ("bf16", "fp16", "fp8", "fp4"))
    m, n, k = check_int("m", m), check_int("n", n), check_int("k", k)
    return _efficiency_at(ridge_point_flops_per_byte(gpu, dtype), m, n, k, dtype, grid_gpu(gpu))


def _efficiency_at(ridge: float, m: int, n: int, k: int, dtype: str, table: str | None = None) -> float:
    """:func:`gemm_efficiency` at checked ``m``, ``n``, ``k``, ``dtype``, the ridge point and the measured
    table ``table`` (:func:`grid_gpu`; a layer's GEMMs share the last three): the curve, below
    :data:`FEW_ROWS` rows at ``FEW_ROWS`` times :func:`few_row_share` (``None``: :data:`GRID_STAND_IN`)."""
    if m < FEW_ROWS:
        t = GRID_STAND_IN if table is None else table
        d = grid_dtype(t, dtype)
        return (_curve_share(ridge, FEW_ROWS, n, k, dtype) * _grid_rate(m, n, k, t, d)
                / _grid_rate(FEW_ROWS, n, k, t, d))
    return _curve_share(ridge, m, n, k, dtype)


def _curve_share(ridge: float, m: int, n: int, k: int, dtype: str) -> float:
    """The intensity curve: ``min(GEMM_CEILING, GEMM_EMAX x r / (r + GEMM_R_HALF))``."""
    r = _intensity(m, k, n, _ELEMENT_BYTES.get(dtype, 2.0)) / ridge
    return min(GEMM_CEILING, GEMM_EMAX * r / (r + GEMM_R_HALF))


#: Bytes per element of a GEMM's operands by dtype (floats, as ``check_number`` gives them).
_ELEMENT_BYTES = {"fp8": 1.0, "fp4": 0.5}


def best_gemm_share(gpus, dtype: str = "bf16") -> float | None:
    """The largest share of its dense ``dtype`` peak that any of ``gpus`` (names) reached in a search for its
    best GEMM shape (``data/gemm_efficiency.csv``'s ``kind == "best"`` rows: Bekman, *ML Engineering*,
    "Maximum Achievable Matmul FLOPS"); ``None`` when none was measured. What a generation's software stack
    can reach at all: 0.80 of the H100's BF16 peak, 0.51 of the MI300X's (chapter 10)."""
    import pandas as pd

    d = pd.read_csv(DATA / "gemm_efficiency.csv")
    d = d[(d["kind"] == "best") & (d["dtype"] == dtype) & d["gpu"].isin(list(gpus))]
    if d.empty:
        return None
    return max(float(r.tflops) / dense_tflops(get_gpu(r.gpu), dtype) for r in d.itertuples())


def layer_gemms(model, *, tp: int = 1, tokens: int, ep: int = 1) -> tuple[tuple[int, int, int], ...]:
    """The ``(m, n, k)`` of one transformer layer's forward GEMMs on one of ``tp`` GPUs (Megatron's split:
    column-parallel QKV and MLP input, row-parallel output and MLP output), ``m = tokens`` (a micro-batch's
    tokens on that GPU): QKV ``(h) -> (heads + 2 kv_heads) d / tp``, attention output ``heads d / tp -> h``,
    MLP ``h -> ffn / tp`` (twice that when gated) and ``ffn / tp -> h``. The backward's GEMMs are these
    transposed (same intensity). A mixture of experts uses the expert width with ``tokens x experts_per_token
    x ep / experts`` rows per expert (with ``ep``-way expert parallelism an expert gets the tokens of ``ep``
    GPUs). A mixture of attention heads has the same q/k/v and output FLOPs as these two GEMMs, but runs
    them as :func:`attention_expert_gemms` (which :func:`layer_gemm_efficiencies` prices)."""
    model = resolve_model(model, moe=True)
    tp, tokens, ep = check_int("tp", tp), check_int("tokens", tokens), check_int("ep", ep)
    h, d = model.hidden, model.head_dim
    ffn, rows = model.ffn_hidden, _expert_rows(model, tokens, ep)
    if model.is_moe:
        ffn = model.expert_ffn_hidden or model.ffn_hidden
    up = ffn * (2 if model.gated_mlp else 1)
    return ((tokens, max(1, (model.heads + 2 * model.kv_heads) * d // tp), h),
            (tokens, h, max(1, model.heads * d // tp)),
            (rows, max(1, up // tp), h),
            (rows, h, max(1, ffn // tp)))


def attention_expert_gemms(model, *, tp: int = 1, tokens: int) -> tuple[tuple[int, int, int, int], ...]:
    """The ``(m, n, k, experts)`` of one layer's attention GEMMs on one of ``tp`` GPUs for a mixture of
    attention heads (:class:`~llmsizing.model.Model`'s ``attn_experts``; JetMoE's ``JetMoeMoA``): the
    shared K/V projection ``h -> 2 kv_heads d / tp`` on ``tokens`` rows (``experts`` 1), then the query and
    output experts, each of ``w = heads / attn_experts_per_token x d / tp`` (``h -> w``, ``w -> h``), grouped
    as the MLP experts are: ``tokens x attn_experts_per_token / attn_experts`` rows an expert, all
    ``attn_experts`` on every GPU (expert parallelism splits the MLP experts only, as JetMoE's
    MegaBlocks layers do). Empty for other models (:func:`layer_gemms`' q/k/v and output GEMMs)."""
    model = resolve_model(model, moe=True)
    tp, tokens = check_int("tp", tp), check_int("tokens", tokens)
    ea = getattr(model, "attn_experts", 0)
    if not ea:
        return ()
    h, d = model.hidden, model.head_dim
    w = max(1, model.heads // model.attn_experts_per_token * d // tp)
    rows = max(1, tokens * model.attn_experts_per_token // ea)
    return ((tokens, max(1, 2 * model.kv_heads * d // tp), h, 1), (rows, w, h, ea), (rows, h, w, ea))


def _attention_gemms(model, tp: int, tokens: int, qkv, proj, ridge: float, dtype: str):
    """``(m, n, k, share)`` of one layer's attention GEMMs, ``m`` all rows of the GEMM (a grouped one's
    experts together) and ``share`` what grouping keeps of :func:`gemm_efficiency` (1 for a plain GEMM;
    :func:`grouped_gemm_share` x :func:`expert_padding_share` at one expert's rows): :func:`layer_gemms`'
    q/k/v and output, or a mixture of attention heads' (:func:`attention_expert_gemms`)."""
    groups = attention_expert_gemms(model, tp=tp, tokens=tokens)
    if not groups:
        return ((*qkv, 1.0), (*proj, 1.0))
    return tuple((m * e, n, k, grouped_gemm_share(m) * expert_padding_share(m) if e > 1 else 1.0)
                 for m, n, k, e in groups)


def _expert_rows(model, tokens: int, ep: int) -> int:
    """The rows of one expert's GEMM (:func:`layer_gemms`): ``tokens x experts_per_token x ep / experts``, at
    least 1; a dense model's MLP has ``tokens`` rows."""
    return max(1, tokens * model.experts_per_token * ep // model.experts) if model.is_moe else tokens


@lru_cache(maxsize=1)
def _grouped_points() -> tuple[tuple[float, float], ...]:
    """``(log2 rows, share)`` of :func:`grouped_gemm_share`, ascending: each ``kind == "grouped"`` row of
    ``data/gemm_efficiency.csv`` over the ``kind == "curve"`` row of the same GPU, dtype, ``n`` and ``k`` at
    ``m = 4096``, averaged over the shapes measured at the same rows per group."""
    with open(DATA / "gemm_efficiency.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    full = {(r["gpu"], r["dtype"], r["n"], r["k"]): float(r["tflops"]) for r in rows
            if r["kind"] == "curve" and r["m"] == "4096"}
    by_rows: dict[int, list[float]] = {}
    for r in rows:
        if r["kind"] == "grouped":
            by_rows.setdefault(int(r["m"]), []).append(float(r["tflops"]) / full[r["gpu"], r["dtype"], r["n"],
                                                                                r["k"]])
    return tuple((math.log2(m), sum(v) / len(v)) for m, v in sorted(by_rows.items()))


def grouped_gemm_share(rows: float) -> float:
    """What a grouped GEMM of ``rows`` rows per group (an expert's tokens) reaches, as a share of one GEMM of
    the same ``n`` and ``k`` at full size: DeepGEMM's grouped-GEMM tables over its normal GEMMs at ``m =
    4096`` (``data/gemm_efficiency.csv``, ``kind == "grouped"``; H800 FP8: 0.76 at 256 rows a group, 0.85 at
    512, 0.92 at 1,024), interpolated in ``log2(rows)``, flat beyond the table and never above 1. The grouped
    kernel schedules every group's tiles in one launch, so few rows per expert cost far less than a lone GEMM
    of that many rows (:func:`gemm_efficiency` at ``m = 512``: 0.31 of the H100's peak for a 4,096-wide
    layer), which GRIN MoE's measured throughput confirms (Liu et al. 2024, arXiv:2409.12136, Table 3: a
    16-expert top-2 MoE trains at 86.6% of the speed of the dense model of its active size on MegaBlocks'
    grouped GEMMs). A stand-in outside Hopper FP8: no BF16 or Ampere grouped table is stored. Its error on
    H100 BF16, by that check: the step model gives the MoE 0.91-0.94 of its twin's speed against the measured
    0.866, 5-9% fast (tests/test_kernels.py: pipeline depths 4-16, micro-batches of one or two sequences, the
    faster with two; chapter 18)."""
    rows = check_number("rows", rows, allow_equal=False)
    xs, ys = _grouped_xy()
    return min(1.0, _interp(math.log2(rows), xs, ys))


#: The M-tile a grouped MoE kernel computes an expert's rows in (issue 35, moe38): ScatterMoE as Granite 3.0
#: ran it (shawntan/scattermoe 0526612, ``kernels/ops.py``: ``BLOCK_M = 128``; ``padded_block_indices`` gives
#: each expert ``ceil(count / 128)`` blocks), DeepGEMM's contiguous layout (README a6d97a1: "each expert
#: segment must be aligned to the GEMM M block size") and MegaBlocks' dMoE (databricks/megablocks 0151609,
#: ``layers/dmoe.py``: ``self.blocking = 128``, ``ops.round_up(tokens_per_expert, self.blocking)``).
EXPERT_M_BLOCK = 128


def expert_padding_share(rows: float, block: int = EXPERT_M_BLOCK) -> float:
    """The share of a grouped kernel's tiles that hold an expert's ``rows`` (its mean rows a micro-batch)
    when each expert's rows are computed in whole ``block``-row tiles: ``rows / max(block, rows + (block - 1)
    / 2)``, the last tile's filled rows taken as uniform over ``1..block`` under routing (counts are not
    multiples of the tile). :func:`grouped_gemm_share` comes from DeepGEMM's masked benchmark, which gives
    every group exactly 256, 512 or 1,024 rows (``tests/test_core.py`` a6d97a1, ``masked_m = m``), so it holds
    no padding: this is priced on top of it. Few rows an expert are memory-bound, where padded rows cost less
    than this charges (the weights' loads set the time): the training runs have 512 rows or more. By hand:
    1,024 rows -> 1,024 / 1,087.5 = 0.942; 512 -> 0.890; 64 -> 0.5."""
    rows = check_number("rows", rows, allow_equal=False)
    block = check_int("block", block, minimum=1)
    return rows / max(float(block), rows + (block - 1) / 2)


@lru_cache(maxsize=1)
def _grouped_xy() -> tuple[list, list]:
    """:func:`_grouped_points` as its two columns."""
    pts = _grouped_points()
    return [p[0] for p in pts], [p[1] for p in pts]


@lru_cache(maxsize=4096)
def layer_gemm_efficiency(model, gpu, *, tp: int, tokens: int, dtype: str = "bf16", ep: int = 1) -> float:
    """:func:`gemm_efficiency` of one layer's GEMMs (:func:`layer_gemms`) together: their FLOPs over the sum
    of each one's FLOPs / efficiency (the time-weighted mean). A mixture of experts' routed GEMMs count with
    the FLOPs of all ``experts / ep`` experts a GPU holds (``tokens x k`` rows in all, not one expert's), and
    run as one grouped GEMM: :func:`gemm_efficiency` at all those rows times :func:`grouped_gemm_share` at one
    expert's rows (a plain GEMM when the GPU holds one expert)."""
    return layer_gemm_efficiencies(model, gpu, tp=tp, tokens=tokens, dtype=dtype, eps=(ep,))[0]


def layer_gemm_efficiencies(model, gpu, *, tp: int, tokens: int, dtype: str = "bf16",
                            eps: tuple = (1,)) -> tuple[float, ...]:
    """:func:`layer_gemm_efficiency` at each expert-parallel degree of ``eps``, checked once (the planner
    asks for every ``ep`` of a (GPU, tp, micro-batch) at once; issue 35): :func:`layer_gemms`' shapes, whose
    attention GEMMs and MLP widths do not depend on ``ep``, and each distinct expert row count priced once
    (the same operations in the same order as one ``ep`` at a time, so each value is bit for bit that)."""
    model = resolve_model(model, moe=True)
    eps = tuple(check_int("ep", e) for e in eps)
    dtype = check_choice("dtype", dtype, ("bf16", "fp16", "fp8", "fp4"))
    ridge, table = ridge_point_flops_per_byte(gpu, dtype), grid_gpu(gpu)
    qkv, proj, (_, n_up, k_up), (_, n_down, k_down) = layer_gemms(model, tp=tp, tokens=tokens)
    dense = [(m * n * k, m * n * k / _efficiency_at(ridge, m, n, k, dtype, table) / s)
             for m, n, k, s in _attention_gemms(model, tp, tokens, qkv, proj, ridge, dtype)]
    out, seen = [], {}
    for ep in eps:
        local = max(1, model.experts // ep) if model.is_moe else 1
        rows = _expert_rows(model, tokens, ep)
        if (rows, local) not in seen:
            flops = time = 0.0
            for f, t in dense:
                flops += f
                time += t
            share = grouped_gemm_share(rows) * expert_padding_share(rows) if local > 1 else 1.0
            for n, k in ((n_up, k_up), (n_down, k_down)):
                if local > 1:            # the routed experts' up and down projections, grouped
                    f = rows * n * k * local
                    e = _efficiency_at(ridge, rows * local, n, k, dtype, table) * share
                else:
                    f, e = rows * n * k, _efficiency_at(ridge, rows, n, k, dtype, table)
                flops += f
                time += f / e
            seen[rows, local] = flops / time
        out.append(seen[rows, local])
    return tuple(out)


def rates(model, gpu, *, tp: int, cp: int, batch: int, seq: int, dtype: str, kernel_efficiency: float,
          attention_kernel: str | None = None, ep: int = 1):
    """``(gemm, attention)`` FLOP/s of one GPU: the Linear layers at ``peak(dtype) x kernel_efficiency x``
    :func:`layer_gemm_efficiency` (``batch x seq / cp`` tokens a micro-batch), the attention core at the BF16
    peak (FP8 recipes leave it in BF16; FP16 runs at its own peak) x :func:`attention_efficiency` at the
    ``seq / cp`` queries a context-parallel rank holds (``attention_kernel``: one of
    :func:`attention_kernels`, default the generation's). In FP8 the Linear layers' rate also pays their cast
    kernels on HBM bandwidth (:mod:`llmsizing.fp8_cast`, :func:`_with_fp8_cast`). ``ep`` a tuple of degrees:
    ``gemm`` is a tuple, one rate per degree (the planner asks for every ``ep`` of a layout at once; issue
    35)."""
    model = resolve_model(model, moe=True)
    g = get_gpu(gpu)
    eff = check_number("kernel_efficiency", kernel_efficiency, maximum=1.0, allow_equal=False)
    tokens = max(1, batch * seq // cp)
    peak = dense_tflops(g, dtype) * 1e12 * eff
    gemm = (tuple(peak * e for e in _kept_gemm_efficiencies(model, g, tp, tokens, dtype, ep))
            if isinstance(ep, tuple) else
            peak * layer_gemm_efficiency(model, g, tp=tp, tokens=tokens, dtype=dtype, ep=ep))
    if dtype == "fp8":       # the FP8 cast kernels, priced on HBM bandwidth with the Linear layers' FLOPs
        gemm = (tuple(_with_fp8_cast(model, g, tp, tokens, e, r) for e, r in zip(ep, gemm))
                if isinstance(ep, tuple) else _with_fp8_cast(model, g, tp, tokens, ep, gemm))
    attn_dtype = "bf16" if dtype in ("fp8", "fp4") else dtype
    attention = dense_tflops(g, attn_dtype) * 1e12 * attention_efficiency(g, head_dim=model.head_dim,
                                                                          seq=max(1, seq // cp),
                                                                          kernel=attention_kernel)
    return gemm, attention


def _with_fp8_cast(model, g, tp: int, tokens: int, ep: int, gemm_rate: float) -> float:
    """``gemm_rate`` (FLOP/s of one layer's Linear GEMMs) lowered by the FP8 cast kernels of those Linear
    layers (:mod:`llmsizing.fp8_cast`): one layer's forward and backward GEMM FLOPs of a micro-batch,
    ``6 sum(m n k)`` over :func:`layer_gemms` (a GPU's ``experts / ep`` routed experts together, as
    :func:`layer_gemm_efficiencies` counts them), over their time at ``gemm_rate`` plus the cast bytes
    (:func:`~llmsizing.fp8_cast.linear_cast_bytes`) at the GPU's HBM bandwidth
    (:func:`~llmsizing.fp8_cast.cast_seconds`). The rest of the step's GEMM FLOPs (the LM head, a recomputed
    forward) pay the same share: the rate stands for all of them."""
    qkv, proj, (_, n_up, k_up), (_, n_down, k_down) = layer_gemms(model, tp=tp, tokens=tokens)
    local = max(1, model.experts // ep) if model.is_moe else 1
    rows = _expert_rows(model, tokens, ep) * local
    attn = tuple((m * e, n, k, e) for m, n, k, e in attention_expert_gemms(model, tp=tp, tokens=tokens)) \
        or ((*qkv, 1), (*proj, 1))
    shapes = (*attn, (rows, n_up, k_up, local), (rows, n_down, k_down, local))
    flops = 6.0 * sum(m * n * k for m, n, k, _ in shapes)
    moved = sum(linear_cast_bytes(*s) for s in shapes)
    return flops / (flops / gemm_rate + cast_seconds(moved, g.memory_bandwidth_gbps * 1e9))


def _kept_gemm_efficiencies(model, gpu, tp: int, tokens: int, dtype: str, eps: tuple) -> tuple[float, ...]:
    """:func:`layer_gemm_efficiencies` kept per (model, GPU, tp, tokens, dtype, eps) for :func:`rates`: the
    planner's pricing asks once per (GPU, tp, cp, micro-batch), and ``batch x seq / cp`` tokens repeat over
    them (issue 35, moefast35: a Qwen3-30B-A3B search asks 55 times for 24 distinct). Unhashable arguments
    are worked out (and refused) as given."""
    try:
        return _gemm_efficiencies_of(model, gpu, tp, tokens, dtype, eps)
    except TypeError:
        return layer_gemm_efficiencies(model, gpu, tp=tp, tokens=tokens, dtype=dtype, eps=eps)


@lru_cache(maxsize=1024)
def _gemm_efficiencies_of(model, gpu, tp: int, tokens: int, dtype: str, eps: tuple) -> tuple[float, ...]:
    return layer_gemm_efficiencies(model, gpu, tp=tp, tokens=tokens, dtype=dtype, eps=eps)


def compute_seconds(stage_flops, attention_full, attention_causal, per_gpu_tokens, gemm_rate, attention_rate):
    """One GPU's compute seconds: the stage's FLOPs but its attention core (full-matrix convention) at the
    GEMM rate, plus the attention core as causal kernels compute it at the attention rate, for
    ``per_gpu_tokens`` tokens. Scalars or NumPy arrays (the planner's copy uses the same expression)."""
    return ((stage_flops - attention_full) * per_gpu_tokens / gemm_rate
            + attention_causal * per_gpu_tokens / attention_rate)


def fit_gemm_curve(rows=None):
    """``(r_half, emax, rms_log)`` of the GEMM curve (module docstring) on ``data/gemm_efficiency.csv``'s
    ``kind == "curve"`` rows whose output fills a wave (``m x n >= WAVE_OUTPUTS``: training's shapes; the
    128-row DeepGEMM lines and the small squares lose to wave quantisation): a grid over ``r_half`` (0.1 to
    10), one ``emax`` per (generation, dtype) by least squares in logs, the curve's ``emax`` their geometric
    mean."""
    import numpy as np
    import pandas as pd

    d = pd.read_csv(DATA / "gemm_efficiency.csv") if rows is None else rows
    d = d[(d["kind"] == "curve") & (d["m"] * d["n"] >= WAVE_OUTPUTS)].reset_index(drop=True)
    r = np.array([matmul_intensity_flops_per_byte(int(x.m), int(x.k), int(x.n), 1 if x.dtype == "fp8" else 2)
                  / ridge_point_flops_per_byte(x.gpu, x.dtype) for x in d.itertuples()])
    eff = np.log(d["tflops"].to_numpy() / [dense_tflops(g, t) for g, t in zip(d["gpu"], d["dtype"])])
    groups = [np.flatnonzero((d["generation"] == g) & (d["dtype"] == t)).tolist()
              for g, t in sorted(set(zip(d["generation"], d["dtype"])))]
    best = None
    for rh in np.round(np.arange(0.1, 10.001, 0.01), 2):
        f = np.log(r / (r + rh))
        lev = [float(np.mean(eff[i] - f[i])) for i in groups]
        ss = sum(float(((eff[i] - le - f[i]) ** 2).sum()) for i, le in zip(groups, lev))
        if best is None or ss < best[0]:
            best = (ss, float(rh), float(np.exp(np.mean(lev))))
    return best[1], best[2], math.sqrt(best[0] / len(d))
