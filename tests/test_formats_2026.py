"""Issue 36: the block-scaled formats of 2026 (MXFP4, NVFP4, MXFP8, 6-bit), the mxfp8 and nvfp4 training
recipes, the FP4 peaks, and the done-when checks: gpt-oss-120b in MXFP4 on one 80 GB GPU, an NVFP4 run on B200s
at the FP4 peak.

Expected values are written out by hand from the specifications (OCP MX v1.0: 32 elements share one 8-bit
scale; NVIDIA NVFP4: 16 elements share one FP8 scale), the gpt-oss model card and the GPU datasheets.
"""

from __future__ import annotations

import warnings

import pytest

from llmsizing import get_model
from llmsizing.catalog import get_gpu
from llmsizing.hardware import check_recipe_runs_on, dense_tflops
from llmsizing.inference import (inference_memory, kv_cache_bytes_per_token, kv_cached_tokens, routed_expert_bytes,
                                 weights_bytes)
from llmsizing.precision import DTYPE_BYTES, KV_DTYPES, RECIPES, compute_dtype
from llmsizing.memory import model_states
from llmsizing.time_cost import training_time


def test_block_formats_bits_with_their_scales():
    assert DTYPE_BYTES["mxfp4"] * 8 == 4 + 8 / 32 == 4.25          # OCP MX v1.0: E2M1 x 32 + one E8M0
    assert DTYPE_BYTES["nvfp4"] * 8 == 4 + 8 / 16 == 4.5           # E2M1 x 16 + one E4M3 (per-tensor fp32 aside)
    assert DTYPE_BYTES["mxfp8"] * 8 == 8.25 and DTYPE_BYTES["mxfp6"] * 8 == 6.25
    assert DTYPE_BYTES["fp6"] == 0.75 and DTYPE_BYTES["fp4"] == 0.5


def test_fp8_fp6_fp4_kv_caches():
    m = get_model("llama-3-8b")                                    # 32 layers x 8 KV heads x 128
    per_number = 2 * 32 * 8 * 128
    for dtype, bits in (("fp8", 8), ("fp6", 6), ("mxfp6", 6.25), ("fp4", 4), ("nvfp4", 4.5)):
        assert dtype in KV_DTYPES
        assert kv_cache_bytes_per_token(m, dtype) == per_number * bits / 8


# ----------------------------------------------------------------------------- gpt-oss-120b in MXFP4
# OpenAI gpt-oss model card (2025-08-05), Table 1 and Sec. 2.1: 36 layers, 128 experts of width 2880 (hidden 2880)
# with biases, the MoE weights in MXFP4 and everything else in BF16; "fits on a single 80GB GPU"; the
# checkpoint is 60.8 GiB.
H, F, E, LAYERS = 2880, 2880, 128, 36
EXPERT_PER_LAYER = E * (H * 2 * F + 2 * F + F * H + H)            # gate_up with bias, down with bias


def test_gpt_oss_120b_mxfp4_checkpoint_is_the_published_size():
    m = get_model("gpt-oss-120b")
    routed = LAYERS * EXPERT_PER_LAYER
    assert m.routed_expert_params == routed == 114_701_598_720
    # the checkpoint stores the expert matrices as MXFP4 *_blocks + *_scales and their biases in BF16
    matrices = LAYERS * E * (H * 2 * F + F * H)
    biases = LAYERS * E * (2 * F + H)
    assert matrices + biases == routed and biases == 39_813_120
    want = matrices * 4.25 / 8 + (m.n_params - matrices) * 2
    assert weights_bytes(m, "mxfp4-moe") == want
    assert round(want / 2**30, 1) == 60.8          # the model card's 60.8 GiB
    assert weights_bytes(m, "mxfp4") < weights_bytes(m, "mxfp4-moe")   # (attention too: not as released)


def test_expert_format_split_is_the_same_in_weights_and_routed_bytes():
    """weights_bytes less routed_expert_bytes is the bf16 rest, so the decode's dense reads stay consistent."""
    m = get_model("gpt-oss-120b")
    rest = weights_bytes(m, "mxfp4-moe") - routed_expert_bytes(m, "mxfp4-moe")
    assert rest == (m.n_params - m.routed_expert_params) * 2
    assert routed_expert_bytes(m, "mxfp4-moe") == (LAYERS * E * 3 * F * H * 4.25 / 8
                                                   + LAYERS * E * 3 * F * 2)


def test_gpt_oss_120b_mxfp4_serves_on_one_80_gb_gpu_with_its_kv_room():
    m, h100 = get_model("gpt-oss-120b"), get_gpu("H100 SXM")
    mem = inference_memory(m, batch=1, context=131_072, weights="mxfp4-moe", kv_cache="bf16")
    assert mem.total_bytes < h100.memory_bytes
    # the KV room: 18 full-attention layers x 8 KV heads x 64 x 2 x 2 bytes per token, the 18 windowed layers
    # keep 128 tokens each
    full_per_token = 18 * 8 * 64 * 2 * 2
    assert kv_cache_bytes_per_token(m, "bf16") == 2 * full_per_token
    cached = kv_cached_tokens(m, 131_072)
    assert cached == (18 * 128 + 18 * 131_072) / 36
    assert mem.kv_cache_bytes == pytest.approx(2 * full_per_token * cached, rel=1e-12)


# ----------------------------------------------------------------------------- recipes and peaks
def test_fp4_peaks_from_the_datasheets():
    assert dense_tflops("B200", "fp4") == 9000 == 2 * dense_tflops("B200", "fp8")
    assert dense_tflops("GB200", "fp4") == 10000
    assert dense_tflops("B300", "fp4") == 13500
    assert dense_tflops("MI355X", "fp4") == pytest.approx(256 * 16384 * 2.4e9 / 1e12, rel=1e-5)
    with pytest.raises(ValueError, match="fp4"):
        dense_tflops("H100 SXM", "fp4")
    with pytest.raises(ValueError, match="FP4"):
        check_recipe_runs_on("nvfp4", "H100 SXM")


def test_mxfp8_and_nvfp4_recipes_states():
    n, linear = 8_030_261_248, 6_979_321_856                       # Llama 3 8B, its Linear weights (test_fp8)
    for recipe, copies in (("mxfp8", 2 * 8.25 / 8), ("nvfp4", 2 * 4.5 / 8)):
        ms = model_states("llama-3-8b", precision=recipe)
        assert ms.weights_bytes == 2 * n and ms.gradients_bytes == 4 * n
        assert ms.master_bytes == 4 * n and ms.optimizer_state_bytes == 8 * n
        assert ms.fp8_weights_bytes == pytest.approx(copies * linear, rel=1e-12)
        assert ms.fp8_meta_bytes == 0                              # block scales: no amax history
    assert compute_dtype("mxfp8") == "fp8" and compute_dtype("nvfp4") == "fp4"
    assert RECIPES["nvfp4"].compute_dtype == "fp4"


def test_nvfp4_run_on_b200s_is_priced_at_the_fp4_peak():
    """Same model, tokens and GPUs: an NVFP4 run takes exactly the FP8 run's time x 4,500 / 9,000 (the B200's
    FP8 and FP4 dense peaks), since the FP8 calibration's MFU is used for FP4 (no published FP4 run yet)."""
    kw = dict(tokens=1e12, gpu="B200", n_gpus=64, seq=4096)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fp8 = training_time("llama-2-7b", precision="mxfp8", **kw)
        fp4 = training_time("llama-2-7b", precision="nvfp4", **kw)
    assert fp4.mfu == fp8.mfu
    assert fp4.days == pytest.approx(fp8.days * 4500 / 9000, rel=1e-12)
    assert fp4.tokens_per_s_per_gpu == pytest.approx(9000e12 * fp4.mfu / fp4.flops_per_token, rel=1e-12)
