"""Bytes per element, bytes per parameter for every recipe x optimizer, ZeRO sharding, training totals
(chapter 2, "Bytes per parameter"; chapter 4 for ``training_memory``).

Every expected value is hand arithmetic written out here, or a figure printed in a paper.
"""

from __future__ import annotations

import math

import pytest
from conftest import small_models
from hypothesis import given
from hypothesis import strategies as st

from llmsizing import (DTYPE_BYTES, OPTIMIZERS, RECIPES, Model, Parallel, bytes_per_element, get_model,
                       model_states, training_memory)
from llmsizing.activations import activation_memory
from llmsizing.memory import FIXED_OVERHEAD_BYTES, FRAGMENTATION, default_overhead_bytes
from llmsizing.units import GiB

# adamw-8bit: two int8 moments + one fp32 absmax per block of 256 values each: bitsandbytes 0.44.0 (PR #1365,
# 2024-09: "Change 8bit optimizer blocksize 2048->256"; the paper, Dettmers et al. 2022, had 2048)
Q8 = 2 * (1 + 4 / 256)


# ----------------------------------------------------------------------------- dtypes
def test_dtype_bytes():
    assert DTYPE_BYTES["fp32"] == 4 and DTYPE_BYTES["tf32"] == 4     # tf32 is stored as 32 bits
    assert DTYPE_BYTES["bf16"] == 2 and DTYPE_BYTES["fp16"] == 2
    assert DTYPE_BYTES["fp8"] == 1 and DTYPE_BYTES["int8"] == 1
    assert DTYPE_BYTES["int4"] == 0.5


def test_nf4_is_4_127_bits():
    """QLoRA Sec. 3: 4 bits + 8/64 (fp8 constant per 64) + 32/(64*256) (fp32 per 256 constants) = 4.127 bits."""
    bits = DTYPE_BYTES["nf4"] * 8
    assert round(bits, 3) == 4.127
    assert bits == pytest.approx(4 + 0.125 + 0.001953125, rel=1e-12)


def test_bytes_per_element_validates():
    assert bytes_per_element("bf16") == 2
    with pytest.raises(ValueError, match="Did you mean 'bf16'"):
        bytes_per_element("bf61")


# ----------------------------------------------------------------------------- recipes x optimizers
# Bytes per parameter, by hand: working weights + gradients (+ a second fp32 gradient buffer) + fp32 master +
# optimizer moments in the recipe's state dtype (fp32, or bf16 for pure bf16).
EXPECTED_BPP = {
    #                          sgd          sgd-momentum     adam / adamw         lion             adamw-8bit
    "fp32":                  (4 + 4,       4 + 4 + 4,       4 + 4 + 4 + 4,       4 + 4 + 4,       4 + 4 + Q8),
    "bf16-mixed":            (2 + 2 + 4,   2 + 2 + 4 + 4,   2 + 2 + 4 + 4 + 4,   2 + 2 + 4 + 4,   2 + 2 + 4 + Q8),
    "fp16-mixed":            (2 + 2 + 4,   2 + 2 + 4 + 4,   2 + 2 + 4 + 4 + 4,   2 + 2 + 4 + 4,   2 + 2 + 4 + Q8),
    "bf16-mixed-fp32-grads": (2 + 4 + 4,   2 + 4 + 4 + 4,   2 + 4 + 4 + 4 + 4,   2 + 4 + 4 + 4,   2 + 4 + 4 + Q8),
    "bf16-mixed-dual-grads": (2 + 2 + 4 + 4, 2 + 2 + 4 + 4 + 4, 2 + 2 + 4 + 4 + 4 + 4, 2 + 2 + 4 + 4 + 4,
                              2 + 2 + 4 + 4 + Q8),
    "bf16":                  (2 + 2,       2 + 2 + 2,       2 + 2 + 2 + 2,       2 + 2 + 2,       2 + 2 + Q8),
    # torch.autocast: fp32 weights and grads, no separate master copy (the autocast copies are not states)
    "bf16-amp":              (4 + 4,       4 + 4 + 4,       4 + 4 + 4 + 4,       4 + 4 + 4,       4 + 4 + Q8),
}
OPT_COLUMNS = {"sgd": 0, "sgd-momentum": 1, "adam": 2, "adamw": 2, "lion": 3, "adamw-8bit": 4}


def test_headline_figures():
    """The book's headline numbers: 16 (ZeRO paper), 18 (Megatron), 20 (EleutherAI's top), 8 (pure bf16)."""
    m = get_model("llama-2-7b")
    assert model_states(m).bytes_per_param == 16
    assert model_states(m, precision="bf16-mixed-fp32-grads").bytes_per_param == 18
    assert model_states(m, precision="bf16-mixed-dual-grads").bytes_per_param == 20
    assert model_states(m, precision="bf16").bytes_per_param == 8


def test_every_recipe_and_optimizer_is_tabulated():
    # the FP8 recipes add their weight copies per Linear parameter (model-dependent): tests/test_fp8.py
    # (and the block-scaled recipes of issue 36: tests/test_formats_2026.py)
    assert set(EXPECTED_BPP) | {"fp8-mixed", "fp8-deepseek", "mxfp8", "nvfp4"} == set(RECIPES)
    assert set(OPT_COLUMNS) | {"adafactor", "muon"} == set(OPTIMIZERS)     # shape-dependent: tested below


@pytest.mark.parametrize("recipe", sorted(EXPECTED_BPP))
@pytest.mark.parametrize("optimizer", sorted(OPT_COLUMNS))
def test_bytes_per_param_table(recipe, optimizer):
    expected = EXPECTED_BPP[recipe][OPT_COLUMNS[optimizer]]
    for name in ("gpt2", "llama-2-7b"):
        ms = model_states(name, precision=recipe, optimizer=optimizer)
        assert ms.bytes_per_param == pytest.approx(expected, rel=1e-12)
        assert ms.total_bytes == pytest.approx(expected * get_model(name).n_params, rel=1e-12)


def test_components_bf16_mixed_adamw():
    n = get_model("llama-2-7b").n_params
    ms = model_states("llama-2-7b")
    assert ms.weights_bytes == 2 * n
    assert ms.gradients_bytes == 2 * n
    assert ms.master_bytes == 4 * n
    assert ms.optimizer_state_bytes == 8 * n
    assert ms.optimizer_bytes == 12 * n     # the ZeRO paper's K = 12, master copy included
    assert ms.total_bytes == 16 * n
    df = ms.to_frame()
    assert df.loc["total", "bytes"] == 16 * n
    parts = df.drop(index="total")["bytes"].sum()
    assert parts == 16 * n
    assert df.loc["weights", "GiB"] == pytest.approx(2 * n / 2**30)
    assert df.loc["total", "bytes/param"] == 16


def test_seed_70b_needs_about_1_1_tb():
    """Seed 004's 70B example: 16 B/param x 70e9 = 1.12e12 bytes (1.1 TB, decimal)."""
    ms = model_states(get_model("llama-2-70b"))
    assert ms.total_bytes / 1e12 == pytest.approx(16 * 68_976_648_192 / 1e12)
    assert round(ms.total_bytes / 1e12, 1) == 1.1


# ----------------------------------------------------------------------------- adafactor
TINY = Model("tiny", layers=2, hidden=8, heads=2, kv_heads=1, head_dim=4, ffn_hidden=16, vocab=10,
             gated_mlp=True, tied_embeddings=False, norm="rmsnorm")


def test_tiny_model_count_by_hand():
    per_layer = 8 + (8 * 8) + (4 * 8) + (4 * 8) + (8 * 8) + 8 + 16 * 8 + 16 * 8 + 8 * 16
    assert per_layer == 592
    assert TINY.n_params == 2 * per_layer + 10 * 8 + 8 + 10 * 8 == 1352


def test_adafactor_factored_state_by_hand():
    """Adafactor keeps r + c numbers per r x c matrix and the whole vector for 1-D tensors (Shazeer & Stern
    2018). The tiny model's tensors, written out: per layer attn_norm 8, q (8x8) 16, k (4x8) 12, v (4x8) 12,
    o (8x8) 16, mlp_norm 8, gate (16x8) 24, up (16x8) 24, down (8x16) 24; plus embed (10x8) 18, final norm 8,
    lm_head (10x8) 18."""
    per_layer = 8 + 16 + 12 + 12 + 16 + 8 + 24 + 24 + 24
    elements = 2 * per_layer + 18 + 8 + 18
    assert elements == 332
    n = 1352
    ms = model_states(TINY, optimizer="adafactor")             # bf16-mixed: 2 + 2 + 4 + fp32 states
    assert ms.optimizer_state_bytes == 4 * elements
    assert ms.total_bytes == (2 + 2 + 4) * n + 4 * elements
    pure = model_states(TINY, precision="bf16", optimizer="adafactor")  # bf16 states
    assert pure.total_bytes == (2 + 2) * n + 2 * elements


def test_adafactor_factors_gpt2s_fused_c_attn_as_one_matrix():
    """Hugging Face's GPT-2 holds q, k and v as one Conv1D ``c_attn`` of 768 x 2,304, which Adafactor factors
    as one matrix (``len(shape) >= 2``): 768 + 2,304 = 3,072 numbers, not 3 x (768 + 768) = 4,608. Per block:
    c_attn 3,072 + its bias 2,304, attention c_proj 1,536 + 768, two LayerNorms 2 x 1,536, c_fc 768 + 3,072
    = 3,840 + its bias 3,072, MLP c_proj 3,840 + 768: 22,272; x 12 = 267,264; wte 50,257 + 768 = 51,025, wpe
    1,024 + 768 = 1,792, ln_f 1,536: 321,617 (q, k, v apart would be 12 x 1,536 = 18,432 more)."""
    from llmsizing.states import optimizer_state_elements

    n = 124_439_808
    assert optimizer_state_elements("gpt2", "adafactor") == 12 * 22_272 + 51_025 + 1_792 + 1_536 == 321_617
    apart = get_model("gpt2").with_(fused_qkv=False)
    assert optimizer_state_elements(apart, "adafactor") == 321_617 + 12 * 2 * 768
    assert model_states("gpt2", optimizer="adafactor").bytes_per_param == pytest.approx(8 + 4 * 321_617 / n)
    assert round(8 + 4 * 321_617 / n, 4) == 8.0103


def test_8bit_adamw_with_bitsandbytes_blocks_of_256():
    """bf16-mixed with bitsandbytes' AdamW8bit: 2 (weights) + 2 (grads) + 4 (master) + 2 x 1 (int8 moments)
    + 2 x 4/256 (one fp32 absmax per 256 values of each moment) = 10.03125 bytes per parameter."""
    bpp = model_states("llama-3-8b", optimizer="adamw-8bit").bytes_per_param
    assert bpp == pytest.approx(10.03125, rel=1e-12)


def test_muon_state_by_hand():
    """Muon keeps one momentum buffer for each hidden matrix and AdamW's two moments for the rest (Jordan et
    al. 2024). The tiny model, written out: hidden matrices per layer q 64, k 32, v 32, o 64, gate 128, up 128,
    down 128 = 576, two layers 1,152; the rest: norms 2 x (8 + 8) = 32, embed 80, final norm 8, lm_head 80 =
    200. States: 1 x 1,152 + 2 x 200 = 1,552 numbers, fp32 with bf16-mixed, bf16 with pure bf16."""
    ms = model_states(TINY, optimizer="muon")
    assert ms.optimizer_state_bytes == 4 * 1552
    assert ms.total_bytes == (2 + 2 + 4) * 1352 + 4 * 1552
    assert model_states(TINY, precision="bf16", optimizer="muon").optimizer_state_bytes == 2 * 1552


def test_muon_on_llama_3_8b_from_its_config():
    """Llama 3 8B (h 4096, 32 layers, 8 KV heads of 128, f 14336, vocabulary 128256, untied): hidden matrices
    per layer 2 x 4096^2 + 2 x 1024 x 4096 + 3 x 14336 x 4096 = 218,103,808, x 32 = 6,979,321,856; the rest,
    embedding and LM head 2 x 128256 x 4096 = 1,050,673,152 plus 65 norm vectors of 4096 (266,240), is
    1,050,939,392. With bf16-mixed: 8 + (4 x 6,979,321,856 + 8 x 1,050,939,392) / 8,030,261,248 = 12.5235
    bytes per parameter."""
    hidden = 32 * (2 * 4096**2 + 2 * 1024 * 4096 + 3 * 14336 * 4096)
    rest = 2 * 128256 * 4096 + 65 * 4096
    assert hidden == 6_979_321_856 and rest == 1_050_939_392
    n = hidden + rest
    bpp = model_states("llama-3-8b", optimizer="muon").bytes_per_param
    assert bpp == pytest.approx(8 + (4 * hidden + 8 * rest) / n, rel=1e-12)
    assert round(bpp, 2) == 12.52


def test_adafactor_is_tiny_for_a_big_model():
    """For llama-2-7b the factored state is ~0.1% of the parameters, so bf16-mixed Adafactor is ~8 B/param."""
    bpp = model_states("llama-2-7b", optimizer="adafactor").bytes_per_param
    assert 8 < bpp < 8.01


# ----------------------------------------------------------------------------- ZeRO and model parallelism
@pytest.mark.parametrize("nd", [8, 64])
def test_zero_stages_match_paper_formulas(nd):
    """Rajbhandari et al. 2020, Sec. 5 / Fig. 1, with K = 12 (mixed-precision Adam): per GPU,
    stage 0: (2 + 2 + K) psi; stage 1: (2 + 2 + K/Nd) psi; stage 2: (2 + (2 + K)/Nd) psi; stage 3:
    (2 + 2 + K) psi / Nd."""
    K = 12
    psi = get_model("llama-2-7b").n_params
    expected = {0: (2 + 2 + K) * psi, 1: (2 + 2 + K / nd) * psi, 2: (2 + (2 + K) / nd) * psi,
                3: (2 + 2 + K) * psi / nd}
    for stage, want in expected.items():
        got = model_states("llama-2-7b", parallel=Parallel(dp=nd, zero=stage)).total_bytes
        assert got == pytest.approx(want, rel=1e-12), stage


def test_zero_paper_figure1():
    """ZeRO Fig. 1: 7.5B parameters, Nd = 64: 120 GB, 31.4 GB, 16.6 GB, 1.9 GB per GPU."""
    psi = 7.5e9
    got = [model_states("llama-2-7b", parallel=Parallel(dp=64, zero=z)).bytes_per_param * psi / 1e9
           for z in range(4)]
    assert [round(x, 1) for x in got] == [120.0, 31.4, 16.6, 1.9]


def test_zero_stage_components():
    n = get_model("gpt2").n_params
    s1 = model_states("gpt2", parallel=Parallel(dp=8, zero=1))
    assert (s1.weights_bytes, s1.gradients_bytes, s1.optimizer_bytes) == (2 * n, 2 * n, 12 * n / 8)
    s2 = model_states("gpt2", parallel=Parallel(dp=8, zero=2))
    assert (s2.weights_bytes, s2.gradients_bytes, s2.optimizer_bytes) == (2 * n, 2 * n / 8, 12 * n / 8)
    s3 = model_states("gpt2", parallel=Parallel(dp=8, zero=3))
    assert (s3.weights_bytes, s3.gradients_bytes, s3.optimizer_bytes) == (2 * n / 8, 2 * n / 8, 12 * n / 8)


def test_dual_grads_fp32_copy_is_sharded_with_the_optimizer():
    """DeepSpeed ZeRO-1/2 keep the fp32 gradient copy only for the GPU's own optimizer partition: at ZeRO-1
    a GPU holds 2 (bf16 grads, replicated) + 4/dp (fp32 copy) bytes of gradients per parameter."""
    n = get_model("gpt2").n_params
    s0 = model_states("gpt2", precision="bf16-mixed-dual-grads", parallel=Parallel(dp=8, zero=0))
    assert s0.gradients_bytes == (2 + 4) * n
    s1 = model_states("gpt2", precision="bf16-mixed-dual-grads", parallel=Parallel(dp=8, zero=1))
    assert s1.gradients_bytes == 2 * n + 4 * n / 8
    assert s1.optimizer_bytes == 12 * n / 8
    s2 = model_states("gpt2", precision="bf16-mixed-dual-grads", parallel=Parallel(dp=8, zero=2))
    assert s2.gradients_bytes == (2 + 4) * n / 8


def test_dp_without_zero_replicates():
    assert model_states("gpt2", parallel=Parallel(dp=8)).total_bytes == model_states("gpt2").total_bytes


def test_tp_split_exactly_by_hand():
    """Llama-2-70B over 8 tensor-parallel GPUs (Megatron-LM's layout): every matrix split 8 ways (K and V: one of
    the 8 KV heads per GPU), the embedding and LM head split along the vocabulary, the norms replicated."""
    from llmsizing.memory import stage_params

    h, f, V, L = 8192, 28672, 32000, 80
    per_layer = (2 * h * h + 2 * h * 1024 + 3 * h * f) / 8 + 2 * h       # matrices / 8, two norm gains whole
    by_hand = 2 * V * h / 8 + L * per_layer + h                            # + embedding, LM head, final norm
    assert stage_params("llama-2-70b", Parallel(tp=8)) == [by_hand]
    ms = model_states("llama-2-70b", parallel=Parallel(tp=8))
    assert ms.total_bytes == 16 * by_hand                                  # bf16-mixed AdamW
    assert ms.total_bytes > model_states("llama-2-70b").total_bytes / 8    # replicated norms: a little more


def test_pipeline_stages_hold_embedding_and_head():
    from llmsizing.memory import stage_params

    m = get_model("llama-2-70b")
    stages = stage_params(m, Parallel(pp=4))
    parts = m.param_breakdown()
    per_layer = m.params_per_layer
    assert stages[0] == 20 * per_layer + parts["embedding"]
    assert stages[1] == stages[2] == 20 * per_layer
    assert stages[3] == 20 * per_layer + parts["lm_head"] + parts["norms"] - 80 * 2 * 8192
    assert sum(stages) == m.n_params                                       # nothing replicated without TP
    # tied embeddings: the last stage keeps a copy of the embedding for the output layer
    g = get_model("gpt2")
    two = stage_params(g, Parallel(pp=2))
    assert sum(two) == g.n_params + g.param_breakdown()["embedding"]
    # the most loaded stage sets the per-GPU states
    assert model_states(m, parallel=Parallel(pp=4)).total_bytes == 16 * max(stages)


def test_most_loaded_rank_matches_megatron_theoretical_memory():
    """Megatron-LM ``megatron/training/theoretical_memory_usage.py`` (compute_weight_and_optimizer_memory), on its
    own conventions: vocabulary padded to a multiple of 128 x tp, no biases, most loaded shard
    = (transformer block / pp + embedding) / tp, 18 bytes per parameter without the distributed optimizer and
    6 + 12 / dp with it. Written out here for a Llama-2-70B shape at t = 8, p = 8:"""
    from llmsizing import Model

    h, f, L, a, g, V = 8192, 28672, 80, 64, 8, 32768          # 32,000 padded to a multiple of 1,024
    m = Model("megatron-70b", layers=L, hidden=h, heads=a, kv_heads=g, ffn_hidden=f, vocab=V)
    attn = 2 * h * h * (1 + g / a)                              # Megatron's self_attn_term (d = h / a)
    layer = 2 * h * (f * 3 / 2 + 1) + attn                     # swiglu multiplier 3/2, RMSNorm norm_size 1
    block = L * layer + h                                       # + final layernorm
    megatron_params = (block / 8 + h * V) / 8                   # first stage: block / pp + embedding, / tp
    for zero, dp, bpp in ((0, 1, 18), (1, 16, 6 + 12 / 16)):
        ours = model_states(m, precision="bf16-mixed-fp32-grads",
                            parallel=Parallel(tp=8, pp=8, dp=dp, zero=zero)).total_bytes
        # Megatron divides the norms by tp (we replicate them, as Megatron-LM's modules do) and spreads the final
        # norm over all stages (we put it on the last, which is then the most loaded): exactly this much more,
        # 1.4e-4 of the shard
        norms = 10 * 2 * h * (1 - 1 / 8) + h - h / 64
        assert ours == pytest.approx((megatron_params + norms) * bpp, rel=1e-12)
        assert ours == pytest.approx(megatron_params * bpp, rel=2e-4)


def test_parallel_validation():
    assert Parallel(tp=2, pp=3, dp=4).gpus == 24
    with pytest.raises(ValueError, match="zero"):
        Parallel(zero=4)
    with pytest.raises(ValueError, match="sp"):
        Parallel(sp=True)
    with pytest.raises(TypeError, match="tp"):
        Parallel(tp=2.0)
    with pytest.raises(ValueError, match="dp"):
        Parallel(dp=0)
    with pytest.raises(TypeError, match="parallel"):
        model_states("gpt2", parallel=8)


# ----------------------------------------------------------------------------- training_memory
def test_training_memory_phases_by_hand():
    """The phases of one step at steady state (gradients freed by zero_grad), written out for Llama-2-7B."""
    tm = training_memory("llama-2-7b", batch=2, seq=1024)
    ms = model_states("llama-2-7b")
    n = 6_738_415_616                                   # published count (Touvron et al. 2023b)
    W, G, O = 2 * n, 2 * n, 12 * n                      # bf16-mixed AdamW: 2 + 2 + 12 (ZeRO paper)
    assert (tm.weights_bytes, tm.gradients_bytes, tm.optimizer_bytes) == (W, G, O) == \
        (ms.weights_bytes, ms.gradients_bytes, ms.optimizer_bytes)
    A = activation_memory("llama-2-7b", batch=2, seq=1024).total_bytes
    ph = tm.phases_bytes
    assert ph["forward"] == W + O + A                    # no gradients yet
    assert ph["loss backward"] == W + O + A + tm.loss_temporaries_bytes
    # PyTorch's foreach AdamW: torch._foreach_sqrt of every fp32 second moment, 4 bytes per parameter
    assert tm.optimizer_temporaries_bytes == 4 * n
    assert ph["optimizer step"] == W + G + O + 4 * n
    assert tm.peak_bytes == max(ph.values()) >= ph["forward"]
    assert tm.overhead_bytes == pytest.approx(1 * GiB + 0.08 * tm.peak_bytes)
    assert tm.total_bytes == pytest.approx(tm.peak_bytes + tm.overhead_bytes)
    df = tm.phases
    assert list(df.index) == ["forward", "loss backward", "backward", "optimizer step"]
    assert df["bytes"].max() == tm.peak_bytes and tm.peak_phase in df.index


def test_optimizer_implementations():
    n = 6_738_415_616
    big = 32000 * 4096                                   # Llama-2-7B's largest tensors: embedding and LM head
    kw = dict(batch=1, seq=1024)
    fe = training_memory("llama-2-7b", optimizer_impl="foreach", **kw).optimizer_temporaries_bytes
    fl = training_memory("llama-2-7b", optimizer_impl="for-loop", **kw).optimizer_temporaries_bytes
    fu = training_memory("llama-2-7b", optimizer_impl="fused", **kw).optimizer_temporaries_bytes
    assert (fe, fl, fu) == (4 * n, 2 * 4 * big, 0)
    assert training_memory("llama-2-7b", optimizer="sgd", **kw).optimizer_temporaries_bytes == 0
    # ZeRO-1 shards the optimizer's states, and with them the foreach temporary
    z = training_memory("llama-2-7b", parallel=Parallel(dp=8, zero=1), **kw).optimizer_temporaries_bytes
    assert z == 4 * n / 8


def test_autocast_recipe_counts_the_weight_copies():
    from llmsizing.model import Model

    m = get_model("llama-2-7b")
    amp = training_memory(m, batch=1, seq=1024, precision="bf16-amp", stack="hf")
    # 2 bytes per matrix-multiply weight: attention + MLP + LM head, not the embedding lookup or the norms
    per_layer = 4 * 4096**2 + 3 * 4096 * 11008
    assert amp.autocast_copies_bytes == 2 * (32 * per_layer + 32000 * 4096)
    assert amp.phases_bytes["forward"] >= amp.weights_bytes + amp.optimizer_bytes + amp.autocast_copies_bytes
    assert amp.phases_bytes["optimizer step"] == amp.weights_bytes + amp.gradients_bytes + amp.optimizer_bytes + \
        amp.optimizer_temporaries_bytes                  # the copies are gone by then


def test_default_overhead():
    assert FIXED_OVERHEAD_BYTES == 2**30 and FRAGMENTATION == 0.08
    assert default_overhead_bytes(0) == 2**30
    assert default_overhead_bytes(100 * 2**30) == 2**30 + 8 * 2**30


def test_training_memory_explicit_overhead():
    tm = training_memory("gpt2", batch=1, seq=128, overhead_bytes=0)
    assert tm.overhead_bytes == 0
    assert tm.total_bytes == tm.peak_bytes


def test_grad_accum_changes_global_batch_and_keeps_gradients_alive():
    a = training_memory("llama-2-7b", batch=4, seq=2048)
    b = training_memory("llama-2-7b", batch=4, seq=2048, grad_accum=8)
    assert b.activations_bytes == a.activations_bytes
    # from the second micro-batch on, the accumulated gradients are alive during the forward
    assert b.phases_bytes["forward"] == a.phases_bytes["forward"] + a.gradients_bytes
    assert b.phases_bytes["optimizer step"] == a.phases_bytes["optimizer step"]
    assert (a.global_batch, b.global_batch) == (4, 32)
    assert b.tokens_per_step == 32 * 2048
    c = training_memory("llama-2-7b", batch=4, seq=2048, grad_accum=8, parallel=Parallel(dp=16, zero=3))
    assert c.global_batch == 4 * 8 * 16


def test_training_memory_activation_dtype_follows_recipe():
    """fp32 training saves fp32 activations: the linear part doubles, so activations grow."""
    a16 = training_memory("gpt2", batch=1, seq=256).activations_bytes
    a32 = training_memory("gpt2", batch=1, seq=256, precision="fp32").activations_bytes
    assert a32 > 1.5 * a16


def test_full_recompute_costs_a_forward_pass_of_the_layers():
    """6N -> about 8N per token (Korthikanti Sec. 5): full recomputation reruns the forward of the
    transformer layers (2 FLOPs per layer weight plus attention), not the LM head, which sits outside the
    checkpointed layers."""
    none = training_memory("llama-2-7b", batch=1, seq=4096).flops_per_token
    full = training_memory("llama-2-7b", batch=1, seq=4096, recompute="full").flops_per_token
    n = get_model("llama-2-7b").n_params
    # 6N (minus the embedding lookup, which is no matmul) plus attention 3 * 4 * s * a * d * L
    lookup = 32000 * 4096
    attn = 4 * 4096 * 32 * 128 * 32
    assert none == 6 * (n - lookup) + 3 * attn
    # one layer of Llama-2-7B: q, k, v, o 4 * 4096^2, MLP 3 * 4096 * 11008, two RMSNorm gains 2 * 4096
    per_layer = 4 * 4096**2 + 3 * 4096 * 11008 + 2 * 4096
    assert full == none + 2 * 32 * per_layer + attn
    assert 1.3 < full / none < 4 / 3      # a little under 8N/6N: the LM head is not rerun


def test_causal_halves_only_the_attention_term():
    from llmsizing.flops import attention_flops_per_token, forward_flops_per_token

    full = forward_flops_per_token("llama-2-7b", seq=4096)
    causal = forward_flops_per_token("llama-2-7b", seq=4096, causal=True)
    assert full - causal == 4 * 4096 * 32 * 128 * 32 / 2
    assert attention_flops_per_token("llama-2-7b", seq=4096, causal=True) == 4 * 4096 * 4096 * 32 / 2


# ----------------------------------------------------------------------------- invariants (hypothesis)
RECIPE_ORDER = ["bf16", "bf16-mixed", "bf16-mixed-fp32-grads", "bf16-mixed-dual-grads"]


@given(small_models(), st.sampled_from(sorted(RECIPES)), st.sampled_from(sorted(OPTIMIZERS)),
       st.integers(1, 8))
def test_more_layers_never_fewer_state_bytes(m, precision, optimizer, extra):
    a = model_states(m, precision=precision, optimizer=optimizer)
    b = model_states(m.with_(layers=m.layers + extra), precision=precision, optimizer=optimizer)
    for f in ("weights_bytes", "gradients_bytes", "optimizer_bytes", "total_bytes"):
        assert getattr(b, f) >= getattr(a, f), f
    assert b.total_bytes > a.total_bytes


@given(small_models(), st.sampled_from(sorted(OPTIMIZERS)))
def test_smaller_recipe_never_more_bytes(m, optimizer):
    totals = [model_states(m, precision=r, optimizer=optimizer).total_bytes for r in RECIPE_ORDER]
    assert totals == sorted(totals)
    assert model_states(m, precision="fp16-mixed", optimizer=optimizer).total_bytes == \
        model_states(m, precision="bf16-mixed", optimizer=optimizer).total_bytes
    assert model_states(m, precision="fp32", optimizer=optimizer).total_bytes >= \
        model_states(m, precision="bf16", optimizer=optimizer).total_bytes


@given(small_models(), st.sampled_from(sorted(RECIPES)))
def test_8bit_adam_never_more_than_adam(m, precision):
    assert model_states(m, precision=precision, optimizer="adamw-8bit").total_bytes <= \
        model_states(m, precision=precision, optimizer="adamw").total_bytes


@given(small_models(), st.integers(1, 64), st.sampled_from([1, 2, 3]))
def test_zero_stages_never_increase_bytes(m, dp, _):
    totals = [model_states(m, parallel=Parallel(dp=dp, zero=z)).total_bytes for z in range(4)]
    assert all(x >= y for x, y in zip(totals, totals[1:]))


@given(small_models(), st.integers(1, 4), st.integers(16, 512), st.integers(1, 8),
       st.sampled_from(["none", "selective", "full"]), st.sampled_from(["flash", "eager"]))
def test_more_layers_never_fewer_training_bytes(m, batch, seq, extra, recompute, attention):
    a = training_memory(m, batch=batch, seq=seq, recompute=recompute, attention=attention)
    b = training_memory(m.with_(layers=m.layers + extra), batch=batch, seq=seq, recompute=recompute,
                        attention=attention)
    assert b.total_bytes >= a.total_bytes
    for x in (a, b):
        for f in ("weights_bytes", "gradients_bytes", "optimizer_bytes", "activations_bytes",
                  "overhead_bytes", "total_bytes"):
            v = getattr(x, f)
            assert math.isfinite(v) and v >= 0, f


# ----------------------------------------------------------------------------- the peak of a step: invariants
@given(small_models(), st.integers(1, 8), st.integers(1, 2048), st.sampled_from(["fused", "hf"]),
       st.sampled_from(["flash", "eager"]), st.sampled_from(["none", "full"]), st.integers(1, 4),
       st.sampled_from(["foreach", "for-loop", "fused"]),
       st.sampled_from(["bf16-mixed", "fp32", "bf16", "bf16-amp", "bf16-mixed-fp32-grads"]))
def test_peak_is_never_below_the_end_of_the_forward(m, batch, seq, stack, attention, recompute, accum, impl,
                                                    precision):
    tm = training_memory(m, batch=batch, seq=seq, stack=stack, attention=attention, recompute=recompute,
                         grad_accum=accum, optimizer_impl=impl, precision=precision)
    kept = tm.activations_bytes - tm.activations.rebuilt_bytes    # the rebuilt layer exists only in the backward
    assert tm.peak_bytes >= tm.phases_bytes["forward"] >= tm.weights_bytes + tm.optimizer_bytes + kept
    assert tm.phases_bytes["backward"] >= tm.weights_bytes + tm.optimizer_bytes + tm.activations.rebuilt_bytes
    assert tm.total_bytes > tm.peak_bytes


@given(small_models(), st.integers(1, 8), st.integers(1, 2048), st.sampled_from(["flash", "eager"]),
       st.sampled_from(["none", "full"]))
def test_autocast_is_never_below_pure_16_bit(m, batch, seq, attention, recompute):
    kw = dict(batch=batch, seq=seq, attention=attention, recompute=recompute, stack="hf")
    pure = activation_memory(m, dtype="bf16", **kw).total_bytes
    amp = activation_memory(m, dtype="bf16", autocast=True, **kw).total_bytes
    assert amp >= pure
    pure_step = training_memory(m, precision="bf16", **kw)
    amp_step = training_memory(m, precision="bf16-amp", **kw)
    assert amp_step.peak_bytes >= pure_step.peak_bytes


def test_virtual_stages_and_bubble():
    from llmsizing.parallel import pipeline_bubble

    assert Parallel(pp=4, virtual_stages=2).virtual_stages == 2
    with pytest.raises(ValueError, match="virtual_stages=2 needs pp > 1"):
        Parallel(virtual_stages=2)
    # 32 layers / 4 = 8 per stage in 3 chunks of 3, 3, 2: Megatron-Core's pipeline layout takes it (issue 35)
    model_states("llama-2-7b", parallel=Parallel(pp=4, virtual_stages=3))
    with pytest.raises(ValueError, match="virtual_stages=9 needs at least that many layers"):
        model_states("llama-2-7b", parallel=Parallel(pp=4, virtual_stages=9))
    model_states("llama-2-7b", parallel=Parallel(pp=4, virtual_stages=2))
    # Narayanan et al. 2021, Sec. 2.2: (p - 1) / m, and (p - 1) / (v m) interleaved
    assert pipeline_bubble(8, 32) == 7 / 32
    assert pipeline_bubble(8, 32, virtual_stages=4) == 7 / 128
    assert pipeline_bubble(1, 5) == 0


def test_muon_matrix_params_by_hand():
    # Llama-3-8B (h 4096, 32 heads, 8 KV heads of 128, ffn 14336, 32 layers): per block the q and o
    # projections 2 x 4096^2, k and v 2 x 4096 x 1024, the gated MLP 3 x 4096 x 14336; no embedding or head
    from llmsizing.states import muon_matrix_params
    per_block = 2 * 4096 * 4096 + 2 * 4096 * 1024 + 3 * 4096 * 14336
    assert muon_matrix_params("llama-3-8b") == 32 * per_block == 6_979_321_856
