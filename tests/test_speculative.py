"""Speculative decoding (chapter 15) and the weight formats engines store (chapters 3 and 15), checked against
hand arithmetic and against published GGUF file sizes."""

from __future__ import annotations

import csv
import math

import pytest

from llmsizing.catalog import DATA_DIR, resolve_model
from llmsizing.hardware import decode_step_roofline
from llmsizing.inference import inference_memory, kv_cache_bytes_per_token, weights_bytes
from llmsizing.memory import model_states
from llmsizing.precision import DTYPE_BYTES, use_more_bits
from llmsizing.serve import serving
from llmsizing.speculative import (expected_tokens_per_step, speculative_breakeven_batch, speculative_decoding,
                                   speedup_from_cost_ratio)

PAIR = dict(model="llama-3-70b", draft="llama-3-8b", gpu="H200", weights="fp8")


# ------------------------------------------------------------------ the expected yield of one round
@pytest.mark.parametrize("a, k, tokens", [
    (0.0, 4, 1.0),                       # every guess rejected: the target still gives one token
    (0.5, 1, 1.5),                       # 1 + 0.5
    (0.5, 2, 1.75),                      # 1 + 0.5 + 0.25
    (0.8, 4, 3.3616),                    # (1 - 0.8^5) / 0.2 = (1 - 0.32768) / 0.2
    (0.9, 8, (1 - 0.9**9) / 0.1),
])
def test_expected_tokens_by_hand(a, k, tokens):
    assert expected_tokens_per_step(a, k) == pytest.approx(tokens, rel=1e-12)


def test_expected_tokens_tends_to_k_plus_one():
    assert expected_tokens_per_step(0.999999, 4) == pytest.approx(5, rel=1e-5)


def test_leviathan_improvement_factor_by_hand():
    # a = 0.8, k = 4, c = 1/8: 3.3616 / (4/8 + 1) = 2.241066...
    assert speedup_from_cost_ratio(0.8, 4, 0.125) == pytest.approx(3.3616 / 1.5, rel=1e-12)
    # a free draft at a = 0.5, k = 2 buys exactly the yield: 1.75
    assert speedup_from_cost_ratio(0.5, 2, 1e-12) == pytest.approx(1.75, rel=1e-9)


@pytest.mark.parametrize("bad", [1.0, 1.5, -0.1, float("nan")])
def test_acceptance_outside_zero_one_is_refused_by_name(bad):
    with pytest.raises(ValueError, match="acceptance"):
        expected_tokens_per_step(bad, 4)


@pytest.mark.parametrize("bad, err", [(0, ValueError), (65, ValueError), (2.0, TypeError), (True, TypeError)])
def test_k_must_be_a_positive_int(bad, err):
    with pytest.raises(err, match="k must be"):
        expected_tokens_per_step(0.5, bad)


# ------------------------------------------------------------------ on the roofline
def test_batch_one_verify_costs_one_decode_step_and_matches_leviathan():
    s = speculative_decoding(**PAIR, k=4, acceptance=0.8, batch=1, context=1024, step_overhead_s=0.0)
    assert s.verify_bound == "memory"
    # the plain step by hand, as the serving model prices it (spec34): fp8 weights less the untied input
    # embedding's 128,256 x 8,192 table, which stays 16-bit under fp8, plus the one row the token gathers, at
    # HBM x the fitted MBU, + one sequence's 1,024 tokens of KV at HBM x the fitted attention share
    from llmsizing.serve import ATTENTION_BU_DEFAULT, MBU_DEFAULT

    row, kv = 8_192 * 2, kv_cache_bytes_per_token("llama-3-70b")
    weights_read = weights_bytes("llama-3-70b", "fp8") - 128_256 * row + row
    by_hand = weights_read / (4800e9 * MBU_DEFAULT) + kv * 1024 / (4800e9 * ATTENTION_BU_DEFAULT)
    # (chapter 6's roofline reads the same bytes, all at one rate)
    r = decode_step_roofline("llama-3-70b", "H200", batch=1, context=1024, weights="fp8")
    assert r.bytes_read == pytest.approx(weights_read + kv * 1024, rel=1e-12)
    assert s.target_step_s == pytest.approx(by_hand, rel=1e-12)
    # k + 1 tokens cost what one does while memory-bound, but for the k more embedding rows they gather and
    # the k more KV rows the last position attends to
    assert s.verify_step_s == pytest.approx(
        by_hand + 4 * row / (4800e9 * MBU_DEFAULT) + 4 * kv / (4800e9 * ATTENTION_BU_DEFAULT), rel=1e-12)
    assert s.itl_s == pytest.approx((4 * s.draft_step_s + s.verify_step_s) / 3.3616, rel=1e-12)
    # Leviathan et al.'s Theorem 3.8 prices the verify step as one target step: here it is 1.4e-5 more
    # ((4 x 16 KiB / 0.662 + 4 x 320 KiB / 0.962) / 4.8 TB/s over 22.3 ms)
    assert s.verify_step_s / s.target_step_s - 1 == pytest.approx(1.4e-5, abs=0.1e-5)
    assert s.speedup == pytest.approx(speedup_from_cost_ratio(0.8, 4, s.cost_ratio), rel=3e-5)
    assert 2.0 < s.speedup < 2.5
    # the draft reads about an eighth of the target's bytes
    assert 0.1 < s.cost_ratio < 0.15


def test_serving_decode_step_over_several_positions_by_hand():
    """spec34: serving(decode_tokens=q) is the decode step over q positions per sequence, which the verify
    step uses. Llama-3-8B, bf16 on one H100 SXM (3.35 TB/s, 989.4 dense TFLOPS), batch 8, context 1,000 (output
    1): q times the FLOPs, q - 1 more embedding rows (4,096 x 2 B) and KV rows (131,072 B) per sequence."""
    from llmsizing.flops import forward_flops_per_token
    from llmsizing.serve import ATTENTION_BU_DEFAULT, MBU_DEFAULT, MFU_DEFAULT

    kw = dict(prompt=1000, output=1, batch=8, step_overhead_s=0.0)
    one = serving("llama-3-8b", "H100 SXM", **kw)
    five = serving("llama-3-8b", "H100 SXM", decode_tokens=5, **kw)
    more = 8 * 4 * (4_096 * 2 / MBU_DEFAULT + 131_072 / ATTENTION_BU_DEFAULT) / 3.35e12
    assert five.decode_memory_s - one.decode_memory_s == pytest.approx(more, rel=1e-9)
    flops = 5 * 8 * forward_flops_per_token("llama-3-8b", seq=1000)
    assert five.decode_compute_s == pytest.approx(flops / (989.4e12 * MFU_DEFAULT), rel=1e-9)
    assert five.decode_compute_s == pytest.approx(5 * one.decode_compute_s, rel=1e-12)
    for bad, err in ((0, ValueError), (2.0, TypeError)):
        with pytest.raises(err, match="decode_tokens"):
            serving("llama-3-8b", "H100 SXM", decode_tokens=bad, **kw)


def test_step_overhead_is_paid_by_every_draft_and_verify_step():
    """Issue 37: each of the k draft steps and the verify step is an engine step with its fixed cost t0. By
    hand, with t0 = 1 ms: a round is 4 (d + t0) + (v + t0), plain decoding p + t0 per token."""
    bare = speculative_decoding(**PAIR, k=4, acceptance=0.8, batch=1, step_overhead_s=0.0)
    s = speculative_decoding(**PAIR, k=4, acceptance=0.8, batch=1, step_overhead_s=1e-3)
    d, v, p = bare.draft_step_s, bare.verify_step_s, bare.target_step_s
    tokens = (1 - 0.8 ** 5) / 0.2
    assert s.itl_s == pytest.approx((4 * (d + 1e-3) + v + 1e-3) / tokens, rel=1e-12)
    assert s.speedup == pytest.approx((p + 1e-3) / s.itl_s, rel=1e-12)
    assert s.speedup < bare.speedup                    # the overhead weighs on the short draft steps most
    # the default is the default engine's fitted overhead; an engine with a larger one gains less
    from llmsizing.serve import ENGINE_STEP_OVERHEAD_S, STEP_OVERHEAD_S

    assert speculative_decoding(**PAIR, k=4, acceptance=0.8).step_overhead_s == STEP_OVERHEAD_S
    trt = speculative_decoding(**PAIR, k=4, acceptance=0.8, engine="TensorRT-LLM/static")
    assert trt.step_overhead_s == ENGINE_STEP_OVERHEAD_S["TensorRT-LLM/static"]
    with pytest.raises(ValueError, match="engine"):
        speculative_decoding(**PAIR, engine="nope")


def test_large_batch_makes_the_verify_step_compute_bound_and_speculation_lose():
    s = speculative_decoding(**PAIR, k=4, acceptance=0.8, batch=256)
    assert s.verify_bound == "compute"
    assert s.verify_step_s > 4 * s.target_step_s
    assert s.speedup < 1


def test_breakeven_batch_is_where_the_speedup_crosses_one():
    b = speculative_breakeven_batch(**PAIR, k=4, acceptance=0.8)
    assert b is not None and b > 1
    assert speculative_decoding(**PAIR, k=4, acceptance=0.8, batch=b - 1).speedup > 1
    assert speculative_decoding(**PAIR, k=4, acceptance=0.8, batch=b).speedup <= 1
    with pytest.raises(TypeError, match="batch"):
        speculative_breakeven_batch(**PAIR, batch=4)


def test_a_worse_draft_or_a_longer_guess_at_low_acceptance_pays_less():
    lo = speculative_decoding(**PAIR, k=4, acceptance=0.5).speedup
    hi = speculative_decoding(**PAIR, k=4, acceptance=0.9).speedup
    assert lo < hi
    assert speculative_decoding(**PAIR, k=8, acceptance=0.3).speedup < speculative_decoding(
        **PAIR, k=2, acceptance=0.3).speedup


def test_a_draft_with_another_vocabulary_is_refused():
    with pytest.raises(ValueError, match="draft 'llama-2-7b'.*tokenizer"):
        speculative_decoding("llama-3-70b", "llama-2-7b", "H200", weights="fp8")


# ------------------------------------------------------------------ weight formats as engines store them
@pytest.mark.parametrize("fmt, bits", [("q8_0", 8.5), ("q4_0", 4.5), ("q4_k", 4.5), ("q6_k", 6.5625),
                                       ("int4-g128", 4 + 20 / 128), ("fp8", 8), ("int4", 4)])
def test_bits_per_weight_include_the_scales(fmt, bits):
    assert DTYPE_BYTES[fmt] * 8 == pytest.approx(bits, rel=1e-12)


def test_use_more_bits_picks_half_of_32_layers():
    # first 4, last 4, and i = 6, 9, ..., 27 in between: 16 of 32
    picked = [i for i in range(32) if use_more_bits(i, 32)]
    assert picked == [0, 1, 2, 3, 6, 9, 12, 15, 18, 21, 24, 27, 28, 29, 30, 31]


def test_q8_0_by_hand():
    m = resolve_model("llama-3-8b")
    vectors = sum(math.prod(s) * k for _, _, s, k in m.tensors() if len(s) == 1)
    assert weights_bytes(m, "q8_0") == pytest.approx((m.n_params - vectors) * 8.5 / 8 + vectors * 4, rel=1e-12)


#: Published GGUF files (data/gguf_file_sizes.csv: bartowski's Meta-Llama-3-8B-Instruct GGUF, TheBloke's
#: Llama-2-7B GGUF, Hugging Face), the sizes their READMEs list in GB.
GGUF_FILES = [(r["model"], r["format"], float(r["published_gb"]))
              for r in csv.DictReader(open(DATA_DIR / "gguf_file_sizes.csv", newline=""))]


def test_the_published_gguf_files_are_the_five_first_checked():
    assert GGUF_FILES == [("llama-3-8b", "q8_0", 8.54), ("llama-3-8b", "q4_k_m", 4.92),
                          ("llama-3-8b", "q6_k", 6.60), ("llama-2-7b", "q4_k_m", 4.08), ("llama-2-7b", "q4_0", 3.83)]


@pytest.mark.parametrize("model, fmt, published_gb", GGUF_FILES)
def test_gguf_sizes_match_published_files(model, fmt, published_gb):
    assert weights_bytes(model, fmt) / 1e9 == pytest.approx(published_gb, rel=0.01)


def test_awq_keeps_embeddings_and_head_in_16_bits():
    m = resolve_model("llama-3-8b")
    head_and_embed = 2 * m.vocab * m.hidden
    blocks = weights_bytes(m, "int4-g128") - head_and_embed * 2 - sum(
        math.prod(s) * k * 2 for _, _, s, k in m.tensors() if len(s) == 1)
    assert blocks == pytest.approx((m.n_params - head_and_embed - sum(
        math.prod(s) * k for _, _, s, k in m.tensors() if len(s) == 1)) * 4.15625 / 8, rel=1e-12)
    assert weights_bytes(m, "int4-g128") > weights_bytes(m, "int4")


def test_formats_work_for_inference_and_serving():
    assert inference_memory("llama-3-8b", weights="q4_k_m").weights_bytes == weights_bytes("llama-3-8b", "q4_k_m")
    fast, slow = serving("llama-3-8b", "RTX 4090", weights="q4_k_m"), serving("llama-3-8b", "RTX 4090", weights="q8_0")
    assert fast.itl_s < slow.itl_s


def test_weight_only_formats_are_refused_for_the_kv_cache_and_training():
    with pytest.raises(ValueError, match="kv_cache"):
        inference_memory("llama-3-8b", kv_cache="q4_k")
    with pytest.raises(ValueError, match="precision='q4_k_m' is a storage format for weights"):
        model_states("llama-3-8b", precision="q4_k_m")
    with pytest.raises(ValueError, match="precision='int4-g128' is a storage format"):
        model_states("llama-3-8b", precision="int4-g128")
    inference_memory("llama-3-8b", kv_cache="q8_0")          # llama.cpp's cache types stay allowed
