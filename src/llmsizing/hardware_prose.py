"""Chapter 6's H200-against-H100 exercise in sentences: every number its solution quotes (issue 38), and
how far its decoding bound is from calibrated engines (:func:`decode_bound_against_engines`).

:func:`h200_exercise_prose` sets the two Hopper parts side by side (ridge point, decoding bound, the
calibrated training time, the step model's memory-bound kernels and GEMMs, a card filled with KV caches) and
returns a :class:`~llmsizing.prose.ChapterText`: what the solution prints (``report``) and the texts its
prose quotes, keyed by name (``values``, glued as ``ch6_<name>``).
Each reading of the prose ("not at all faster", "the curve's gain is several times what was measured", "the
bandwidth does more than the capacity") is checked against the numbers, and :class:`ProseOutOfDate` names the
one that no longer holds. Nothing here computes a new quantity: the sentences only format and compare what the
library's functions return.
"""

from __future__ import annotations

from ._validate import check_int
from .catalog import get_gpu
from .hardware import decode_resident_batch, decode_step_roofline, dense_tflops, ridge_point_flops_per_byte
from .inference import weights_bytes
from .kernels import gemm_efficiency
from .layouts import step_time
from .parallel import Parallel
from .pointwise import pointwise_seconds, stage_pointwise_bytes_per_token
from .prose import ChapterText, ProseOutOfDate
from .prose import prose_check as _prose_check
from .serve import MBU_DEFAULT, serving, serving_ends
from .time_cost import training_time
from .units import GiB

__all__ = ["ProseOutOfDate", "MAMF_FP8_TFLOPS", "NVIDIA_MLPERF_H200_GAIN", "decode_bound_against_engines",
           "decode_fill", "h200_exercise_prose"]

#: Bekman's FP8 MAMF search (stas00/ml-engineering compute/accelerator/README.md, 2026-08-22): the H200 SXM at
#: 1,453.4 TFLOP/s (torch 2.7.1+cu128) against the H100 SXM's 1,402.6 (2.7.0+cu126).
MAMF_FP8_TFLOPS = {"H100 SXM": 1402.6, "H200": 1453.4}
#: NVIDIA's "up to 47%" for the H200 over the H100 (MLPerf Training v4.0, blogs.nvidia.com/blog/
#: mlperf-training-benchmarks, June 2024).
NVIDIA_MLPERF_H200_GAIN = 0.47


def _says(holds, what: str) -> None:
    _prose_check(holds, what, "chapter 6's exercise 1")


def decode_fill(model, gpu, context: int = 4096):
    """(sequences, roofline): :func:`~llmsizing.hardware.decode_resident_batch`, as many ``context``-token
    sequences as the whole memory of ``gpu`` holds next to the weights, and
    :func:`~llmsizing.hardware.decode_step_roofline` at that batch (None when not even one fits)."""
    b = decode_resident_batch(model, gpu, context=context)
    return b, (decode_step_roofline(model, gpu, batch=b, context=context) if b else None)


def decode_bound_against_engines(model="llama-3-8b", gpu="H100 SXM", context: int = 4096) -> ChapterText:
    """How far the roofline's decoding bound (one sequence, ``context`` tokens) is from what engines reach:
    the weights' share of the HBM bandwidth that chapter 15 fits on published serving runs (``dec_mbu``) and
    that chapter's calibrated decode step at the same context, in tokens/s with its stated 80% range
    (``dec_engine_tps``, ``dec_engine_low``, ``dec_engine_high``: :func:`~llmsizing.serve.serving` at batch
    1 with a mean context of ``context``, :func:`~llmsizing.serve.serving_ends`). Raises
    :class:`ProseOutOfDate` if even the range's fast end reaches the bound, which the prose calls a bound."""
    context = check_int("context", context, minimum=129)         # a prompt of at least one token
    bound = decode_step_roofline(model, gpu, batch=1, context=context).tokens_per_s
    s = serving(model, gpu, prompt=context - 128, output=256, batch=1)     # mean context: prompt + 256 // 2
    ends = serving_ends(s, ["decode_step_s"])
    tps, low, high = 1 / s.decode_step_s, 1 / ends["decode_step_s_high"], 1 / ends["decode_step_s_low"]
    _prose_check(high < bound, "the roofline's tokens/s bound the calibrated engines' range",
                 "chapter 6's decoding section")
    return ChapterText({"dec_mbu": f"{MBU_DEFAULT:.0%}", "dec_engine_tps": f"{tps:.0f}",
                        "dec_engine_low": f"{low:.0f}", "dec_engine_high": f"{high:.0f}"},
                       f"{getattr(model, 'name', model)} on {get_gpu(gpu).name}, one sequence at {context:,} "
                       f"tokens: roofline <= {bound:.0f} tokens/s; calibrated engines {tps:.0f} "
                       f"({low:.0f}-{high:.0f}) tokens/s\n")


def h200_exercise_prose(gemm_shape) -> ChapterText:
    """Exercise 1's solution: what it prints and its texts by name. ``gemm_shape``: (m, n, k) of the best
    bf16 matrix multiply of Bekman's H100 search (``data/gemm_efficiency.csv``), which he notes the H200 runs
    no faster. Raises :class:`ProseOutOfDate` where the solution's reading fails."""
    h100, h200 = get_gpu("H100 SXM"), get_gpu("H200")
    parts = (h100, h200)
    lines, dec, run = [], {}, {}
    for g in parts:
        dec[g.name] = decode_step_roofline("llama-3-8b", g, batch=1, context=4096)
        run[g.name] = training_time("llama-3-8b", tokens=1e12, gpu=g, n_gpus=8, seq=4096)   # calibrated MFU
        lines.append(f"{g.name:<8s} ridge {ridge_point_flops_per_byte(g):.0f} FLOP/byte, dense bf16 "
                     f"{dense_tflops(g):.0f} TFLOP/s, decode <= {dec[g.name].tokens_per_s:.0f} tokens/s, "
                     f"training at MFU {run[g.name].mfu:.0%}: {run[g.name].tokens_per_s_per_gpu:,.0f} "
                     "tokens/s per GPU")
    x_bw = h200.memory_bandwidth_gbps / h100.memory_bandwidth_gbps
    train_x = run["H200"].tokens_per_s_per_gpu / run["H100 SXM"].tokens_per_s_per_gpu
    t = {"ex1_bw_x": f"{x_bw:.2f}", "ex1_ridge": f"{ridge_point_flops_per_byte(h200):.0f}",
         "ex1_ridge_h100": f"{ridge_point_flops_per_byte(h100):.0f}",
         "ex1_dec_x": f"{dec['H200'].tokens_per_s / dec['H100 SXM'].tokens_per_s:.2f}"}
    _says(abs(train_x - 1) < 0.01, "the H200 trains not at all faster in the model (same cores and MFU)")
    t["ex1_train_x"] = f"{train_x:.2f}"
    _says(1 + NVIDIA_MLPERF_H200_GAIN > x_bw, "NVIDIA's 'up to 47%' exceeds the bandwidth ratio")
    t["ex1_gib"] = f"{h200.memory_gib:.0f} GiB against {h100.memory_gib:.0f} GiB"
    # the step model (chapter 10) on one layout: GEMMs by shape against each part's ridge point, and the
    # memory-bound kernels (llmsizing.pointwise) at each part's HBM bandwidth
    par = Parallel(dp=8, zero=1)
    st = {g.name: step_time("llama-3-8b", g, par, batch=1, seq=4096, grad_accum=8) for g in parts}
    pw = {g.name: pointwise_seconds(stage_pointwise_bytes_per_token("llama-3-8b", par)[0], 8 * 4096,
                                    g.memory_bandwidth_gbps * 1e9) for g in parts}
    saved, pw_saved = st["H100 SXM"].step_s - st["H200"].step_s, pw["H100 SXM"] - pw["H200"]
    _says(0 < pw_saved < saved, "the memory-bound kernels are part of the step's saving, not all of it")
    t.update(ex1_step_x=f"{st['H100 SXM'].step_s / st['H200'].step_s:.2f}", ex1_step_saved=f"{saved:.2f} s",
             ex1_step_pw=f"{pw_saved:.2f} s")
    shape = tuple(int(x) for x in gemm_shape)
    curve_gain = gemm_efficiency(h200, *shape) / gemm_efficiency(h100, *shape) - 1
    fp8_gain = MAMF_FP8_TFLOPS["H200"] / MAMF_FP8_TFLOPS["H100 SXM"] - 1
    _says(curve_gain > 0.1 > fp8_gain > 0, "the GEMM curve's gain is several times what was measured")
    held = st["H100 SXM"].step_s / (st["H100 SXM"].step_s - pw_saved)
    _says(1 < held < st["H100 SXM"].step_s / st["H200"].step_s,
          "with the GEMMs held at the H100's speed the step gains less than the model's")
    t.update(ex1_curve_gain=f"{curve_gain:.0%}", ex1_fp8_gain=f"{fp8_gain:.0%}",
             ex1_step_x_held=f"{held:.2f}")
    # serving: fill each card with 4,096-token sequences, and the memory-bound tokens/s at that batch
    full = {g.name: decode_fill("llama-3-8b", g) for g in parts}
    lines += [f"{name:<8s} Llama-3-8B at 4,096 tokens: {b} sequences fit, {r.tokens_per_s:,.0f} tokens/s "
              "in all" for name, (b, r) in full.items()]
    x_full = full["H200"][1].tokens_per_s / full["H100 SXM"][1].tokens_per_s
    t.update(ex1_fit_h100=f"{full['H100 SXM'][0]}", ex1_fit_h200=f"{full['H200'][0]}",
             ex1_tps_h100=f"{full['H100 SXM'][1].tokens_per_s:,.0f}",
             ex1_tps_h200=f"{full['H200'][1].tokens_per_s:,.0f}", ex1_full_x=f"{x_full:.2f}",
             ex1_cap_x=f"{x_full / x_bw:.2f}")
    _says(x_full / x_bw < x_bw, "for Llama-3-8B the bandwidth does more than the capacity")
    fit70 = {g.name: decode_fill("llama-3-70b", g)[0] for g in parts}
    w70 = weights_bytes("llama-3-70b") / GiB
    lines.append(f"Llama-3-70B, bf16 weights {w70:,.1f} GiB: {fit70} sequences of 4,096 fit")
    _says(fit70["H100 SXM"] == 0 < fit70["H200"], "Llama-3-70B's weights fit on one H200 and not on one H100")
    t.update(ex1_w70=f"{w70:,.1f} GiB", ex1_fit70_h200=f"{fit70['H200']}")
    return ChapterText(t, "\n".join(lines) + "\n")
