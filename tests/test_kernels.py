"""llmsizing.kernels (issue 34): attention as causal kernels run it and GEMM efficiency by shape. Expected
values are derived by hand from the published figures in data/attention_efficiency.csv and
data/gemm_efficiency.csv, written out below."""

import math

import _kernels_by_hand as KH
import pytest

from llmsizing import kernels as K
from llmsizing.comm import step_compute_time_s
from llmsizing.flops import attention_flops_per_token
from llmsizing.model import Model


def test_fa2_a100_causal_hd128_8k():
    # Dao 2023, FlashAttention-2, Fig. 4(d): A100 80GB, causal, head dim 128, seq 8K, fwd+bwd: 182 TFLOP/s,
    # counting the causal half and fwd+bwd as 3.5 forwards. The library counts 3 forwards: 182 x 3 / 3.5 =
    # 156 TFLOP/s of the A100's 312 BF16 peak = 0.5
    assert K.attention_efficiency("A100 80GB", head_dim=128, seq=8192) == pytest.approx(182 * 3 / 3.5 / 312)
    # between the bars: 4K (173) and 8K (182) at 6K is log2-linear: 173 + 9 x (log2 6144 - 12)
    at6k = 173 + 9 * (math.log2(6144) - 12)
    assert K.attention_efficiency("A100 80GB", head_dim=128, seq=6144) == pytest.approx(at6k * 3 / 3.5 / 312)
    # beyond the table (16K: 189) the kernel is flat; head dim 96: halfway between 64 (165) and 128 (182)
    assert K.attention_efficiency("A100 80GB", head_dim=128, seq=131072) == pytest.approx(189 * 3 / 3.5 / 312)
    assert K.attention_efficiency("A100 80GB", head_dim=96, seq=8192) == pytest.approx(
        (165 + 182) / 2 * 3 / 3.5 / 312)


def test_fa3_h100_forward_and_backward_combined():
    # Shah et al. 2024: FA3 on H100, head dim 128, 16K: causal forward 616 TFLOP/s (Fig. 5d), backward 561
    # (Fig. 6, unmasked, taken at the same rate). Forward F / 616, backward 2.5 F / 561; the library's 3 F
    # over that time, over the H100's 989.4 BF16 peak
    rate = 3 / (1 / 616 + 2.5 / 561)
    assert rate == pytest.approx(493.4, abs=0.1)          # 3 / (0.0016234 + 0.0044563)
    assert K.attention_efficiency("H100 SXM", head_dim=128, seq=16384, kernel="flash-attention-3") == \
        pytest.approx(rate / 989.4, rel=1e-3)


def test_attention_time_in_the_step_is_the_causal_half_at_the_attention_rate():
    # a 1-layer model, no GEMM to speak of beside attention: the step's compute minus the same step with the
    # attention removed (seq tiny) is the attention core's causal FLOPs at the A100's FA2 rate
    m = Model("toy", layers=1, hidden=2048, heads=16, ffn_hidden=8192, vocab=32000, max_seq=16384)
    seq = 8192
    full = attention_flops_per_token(m, seq=seq)                 # 4 s h per layer: the whole matrix
    causal = attention_flops_per_token(m, seq=seq, causal=True)
    assert causal == pytest.approx(full / 2)
    assert full == pytest.approx(4 * seq * 2048)
    rate = 312e12 * 182 * 3 / 3.5 / 312                          # FA2, head dim 128, 8K
    attn_s = 3 * causal * seq / rate                             # forward + backward, one sequence
    gemm_rate, attention_rate = K.rates(m, "A100 80GB", tp=1, cp=1, batch=1, seq=seq, dtype="bf16",
                                        kernel_efficiency=0.7)
    assert attention_rate == pytest.approx(rate)
    total = step_compute_time_s(m, batch=1, seq=seq, gpu="A100 80GB", kernel_efficiency=0.7)
    from llmsizing.flops import training_flops_per_token
    rest = (training_flops_per_token(m, seq=seq) - 3 * full) * seq / gemm_rate
    # and the memory-bound kernels (llmsizing.pointwise) at the A100 80GB's 2,039 GB/s: one layer (16 heads of
    # 128, MLP 8,192), the embedding and the loss over 32,000 logits (tests/_kernels_by_hand.py)
    pw = (KH.pointwise_layer_bytes(2048, 16, 16, 128, 8192) + sum(KH.pointwise_end_bytes(2048, 32000))) * seq
    assert total == pytest.approx(rest + attn_s + pw / 2039e9, rel=1e-9)


def test_gemm_efficiency_at_two_published_shapes():
    # DeepGEMM README (H800, FP8): 4096 x 7168 x 16384 at 1358 TFLOP/s and 4096 x 32768 x 512 at 590, of the
    # 1979 FP8 peak: 0.686 and 0.298. Intensity, 1 byte an element: 2mnk / (mk + kn + mn); the H800's ridge
    # 1979e12 / 3.35e12 = 590.7 FLOP/byte
    def by_hand(m, n, k):
        r = 2 * m * n * k / (m * k + k * n + m * n) / (1979e12 / 3.35e12)
        return min(0.93, 1.10 * r / (r + 3.75))
    big, small = by_hand(4096, 7168, 16384), by_hand(4096, 32768, 512)
    assert big == pytest.approx(0.686, rel=0.10)       # the curve against the table: within 10%
    assert small == pytest.approx(0.298, rel=0.10)
    assert K.gemm_efficiency("H800", 4096, 7168, 16384, "fp8") == pytest.approx(big, rel=1e-4)
    assert K.gemm_efficiency("H800", 4096, 32768, 512, "fp8") == pytest.approx(small, rel=1e-4)
    # NVIDIA's A100 figure: 8192^3 in BF16 at 290 of 312 TFLOP/s = 0.929. Intensity 8192 / 3 = 2730.7
    # FLOP/byte over the A100's ridge 312e12 / 2.039e12 = 153.0: r = 17.85, 1.10 x 17.85 / 21.60 = 0.909
    assert K.gemm_efficiency("A100 80GB", 8192, 8192, 8192) == pytest.approx(0.909, abs=0.001)
    assert 0.909 == pytest.approx(290 / 312, rel=0.10)


def test_gemm_curve_refits_to_its_constants():
    r_half, emax, rms = K.fit_gemm_curve()
    assert r_half == pytest.approx(K.GEMM_R_HALF, abs=0.01)
    assert emax == pytest.approx(K.GEMM_EMAX, abs=0.01)
    assert rms < 0.05


def test_narrow_model_runs_below_a_wide_one():
    # a 2,048-wide layer's GEMMs against a 16,384-wide one's, 8K tokens, BF16 on an H100
    narrow = K.layer_gemm_efficiency("mpt-bench-1b", "H100 SXM", tp=1, tokens=8192)
    wide = K.layer_gemm_efficiency("llama-3.1-405b", "H100 SXM", tp=1, tokens=8192)
    assert narrow < wide
    # tensor parallelism narrows the per-GPU GEMMs
    assert K.layer_gemm_efficiency("llama-3.1-405b", "H100 SXM", tp=8, tokens=8192) < wide


def test_bad_inputs_raise():
    with pytest.raises(ValueError, match="seq"):
        K.attention_efficiency("A100 80GB", head_dim=128, seq=0)
    with pytest.raises(ValueError, match="head_dim"):
        K.attention_efficiency("A100 80GB", head_dim=-1, seq=1024)
    with pytest.raises(ValueError, match="kernel"):
        K.attention_efficiency("A100 80GB", head_dim=128, seq=1024, kernel="flash-attention-9")
    with pytest.raises(ValueError, match="dtype"):
        K.gemm_efficiency("H100 SXM", 1024, 1024, 1024, dtype="int4")
    with pytest.raises((ValueError, TypeError), match="m"):
        K.gemm_efficiency("H100 SXM", 0, 1024, 1024)
    with pytest.raises(ValueError, match="kernel_efficiency"):
        K.rates("llama-3-8b", "H100 SXM", tp=1, cp=1, batch=1, seq=8192, dtype="bf16", kernel_efficiency=1.5)


def test_unfused_attention_by_hand():
    # A100 80GB: 312 TFLOP/s BF16, 2,039 GB/s HBM (NVIDIA's datasheet). Per head and per s^2: six batched
    # GEMMs of 2 d FLOPs, each at least one 2-byte pass over the scores; at d = 96 the pass wins:
    # 2 x 96 / (0.93 x 312e12) = 6.617e-13 s < 2 / 2.039e12 = 9.809e-13 s. The fused softmax and its backward
    # make 5 more passes (10 bytes): 10 / 2.039e12 = 4.904e-12 s. Time 6 x 9.809e-13 + 4.904e-12
    # = 1.0789e-11 s for 6 x 96 = 576 FLOPs in the library's count: 576 / (312e12 x 1.0789e-11) = 0.1711
    assert K.unfused_attention_efficiency("A100 80GB", head_dim=96) == pytest.approx(0.1711, abs=2e-4)
    # with attention dropout, 5 passes more (read, write, 1-byte mask; forward and backward): 20 bytes
    # 6 x 9.809e-13 + 20 / 2.039e12 = 1.5695e-11 s: 576 / (312e12 x 1.5695e-11) = 0.1176
    assert K.unfused_attention_efficiency("A100 80GB", head_dim=96, kernel="unfused-dropout") == \
        pytest.approx(0.1176, abs=2e-4)
    # d = 128: 256 / (0.93 x 312e12) = 8.82e-13 s, still below a pass: the same time, 768 FLOPs: 0.2281
    assert K.unfused_attention_efficiency("A100 80GB", head_dim=128) == pytest.approx(0.2281, abs=2e-4)
    # about half of FlashAttention-2's published rate on the A100 (Dao 2023), which is why it replaced it
    fa2 = K.attention_efficiency("A100 80GB", head_dim=128, seq=2048)
    assert 0.4 < K.attention_efficiency("A100 80GB", head_dim=128, seq=2048, kernel="unfused") / fa2 < 0.6
    with pytest.raises(ValueError, match="kernel"):
        K.unfused_attention_efficiency("A100 80GB", head_dim=96, kernel="flash")


def test_runs_before_flash_attention_are_priced_unfused():
    from llmsizing.calibration import attention_kernel_of

    # Megatron-LM 2021 (Narayanan et al.), default attention dropout 0.1; Megatron-DeepSpeed (MT-NLG, BLOOM)
    assert attention_kernel_of("megatron", "A100 80GB") == "unfused-dropout"
    assert attention_kernel_of("megatron-deepspeed", "A100 80GB") == "unfused"
    # Megatron-Core keeps cuDNN on Hopper; FSDP stacks the generation's default
    assert attention_kernel_of("megatron-core", "H100 SXM") == "cudnn"
    assert attention_kernel_of("fsdp/llm-foundry", "A100 80GB") is None


def test_grouped_gemm_share_from_deepgemms_grouped_tables():
    # DeepGEMM README (H800, FP8): grouped GEMMs at 512 rows a group reach 1040 (n 4096, k 7168) and 916
    # (n 7168, k 2048) TFLOP/s, the normal GEMMs of the same n, k at m = 4096 1304 and 1025
    s512 = (1040 / 1304 + 916 / 1025) / 2
    s1024 = (1233 / 1304 + 925 / 1025) / 2
    s256 = (932 / 1304 + 815 / 1025) / 2
    assert K.grouped_gemm_share(512) == pytest.approx(s512, rel=1e-12)
    assert K.grouped_gemm_share(1024) == pytest.approx(s1024, rel=1e-12)
    # log2-linear between the table's rows, flat below 256, never above 1 (the 4,096-row groups reach 1.03)
    assert K.grouped_gemm_share(768) == pytest.approx(s512 + (s1024 - s512) * (math.log2(768) - 9), rel=1e-12)
    assert K.grouped_gemm_share(64) == pytest.approx(s256, rel=1e-12)
    assert K.grouped_gemm_share(8192) == 1.0
    with pytest.raises(ValueError, match="rows"):
        K.grouped_gemm_share(0)


def test_moe_layer_gemm_efficiency_counts_every_expert_a_gpu_holds():
    # JetMoE-8B's MLP experts (llmsizing.moe_runs.JETMOE_8B_STANDIN, deprecated: its attention dense): 4,096
    # tokens a micro-batch, top-2 of 8 experts, no expert parallelism: each expert 1,024 rows, all 8 on the
    # GPU, so the routed GEMMs are 8 x (1024 x 11264 x 2048) and 8 x (1024 x 2048 x 5632), run grouped: the
    # curve at 8,192 rows times the grouped share at 1,024. The attention's two GEMMs at the whole
    # micro-batch.
    from _kernels_by_hand import H100_BF16, H100_HBM, gemm_eff

    with pytest.warns(DeprecationWarning, match="JETMOE_8B"):
        from llmsizing.moe_runs import JETMOE_8B_STANDIN

    ridge = H100_BF16 / H100_HBM
    # each expert's 1,024 rows in whole 128-row tiles, the last half full on average (moe38): 1,024 / 1,087.5
    share = (1233 / 1304 + 925 / 1025) / 2 * 1024 / (1024 + 127 / 2)
    gemms = [(4096 * 8192 * 2048, gemm_eff(4096, 8192, 2048, ridge)),
             (4096 * 2048 * 4096, gemm_eff(4096, 2048, 4096, ridge)),
             (8 * 1024 * 11264 * 2048, gemm_eff(8192, 11264, 2048, ridge) * share),
             (8 * 1024 * 2048 * 5632, gemm_eff(8192, 2048, 5632, ridge) * share)]
    by_hand = sum(f for f, _ in gemms) / sum(f / e for f, e in gemms)
    assert K.layer_gemm_efficiency(JETMOE_8B_STANDIN, "H100 SXM", tp=1, tokens=4096) == \
        pytest.approx(by_hand, rel=1e-9)
    # one expert per GPU (ep = experts) is a plain GEMM of its rows: 4,096 x 2 x 8 / 8 = 8,192
    plain = [(4096 * 8192 * 2048, gemm_eff(4096, 8192, 2048, ridge)),
             (4096 * 2048 * 4096, gemm_eff(4096, 2048, 4096, ridge)),
             (8192 * 11264 * 2048, gemm_eff(8192, 11264, 2048, ridge)),
             (8192 * 2048 * 5632, gemm_eff(8192, 2048, 5632, ridge))]
    assert K.layer_gemm_efficiency(JETMOE_8B_STANDIN, "H100 SXM", tp=1, tokens=4096, ep=8) == \
        pytest.approx(sum(f for f, _ in plain) / sum(f / e for f, e in plain), rel=1e-9)


def test_attention_experts_run_as_grouped_gemms_as_the_mlp_experts_do():
    """JetMoE-8B exactly (moe_runs.JETMOE_8B; jetmoe38): its attention is a shared K/V projection on the
    4,096 tokens (4096 x 4096 x 2048: 16 KV heads of 128, twice) and top-2 of 8 query and output experts of 16
    heads of 128 (2,048 wide): 4,096 x 2 / 8 = 1,024 rows an expert, 8 x (1024 x 2048 x 2048) each way, run
    grouped with the MLP experts' shares (the curve at 8,192 rows x the grouped share at 1,024 x the tile
    padding at 1,024), where the stand-in priced one 4096 x 8192 x 2048 and one 4096 x 2048 x 4096 GEMM."""
    from _kernels_by_hand import H100_BF16, H100_HBM, gemm_eff

    from llmsizing.moe_runs import JETMOE_8B

    ridge = H100_BF16 / H100_HBM
    share = (1233 / 1304 + 925 / 1025) / 2 * 1024 / (1024 + 127 / 2)
    gemms = [(4096 * 4096 * 2048, gemm_eff(4096, 4096, 2048, ridge)),
             (8 * 1024 * 2048 * 2048, gemm_eff(8192, 2048, 2048, ridge) * share),
             (8 * 1024 * 2048 * 2048, gemm_eff(8192, 2048, 2048, ridge) * share),
             (8 * 1024 * 11264 * 2048, gemm_eff(8192, 11264, 2048, ridge) * share),
             (8 * 1024 * 2048 * 5632, gemm_eff(8192, 2048, 5632, ridge) * share)]
    by_hand = sum(f for f, _ in gemms) / sum(f / e for f, e in gemms)
    assert K.layer_gemm_efficiency(JETMOE_8B, "H100 SXM", tp=1, tokens=4096) == \
        pytest.approx(by_hand, rel=1e-9)
    assert K.attention_expert_gemms(JETMOE_8B, tp=2, tokens=4096) == (
        (4096, 2048, 2048, 1), (1024, 1024, 2048, 8), (1024, 2048, 1024, 8))
    assert K.attention_expert_gemms("llama-3-8b", tokens=4096) == ()


def test_a_16_expert_moe_trains_near_its_dense_twin_as_grin_measured():
    """GRIN MoE (Liu et al. 2024, arXiv:2409.12136, Sec. 3.2, Table 3): on 64 H100s, the 16-expert top-2 42B
    MoE (Phi-3.5-MoE's architecture) trains 7,077 tokens/s per GPU, the dense 6.6B of its active size 8,176
    under the same parallelism (no expert parallelism: MegaBlocks grouped GEMMs, data and pipeline parallelism):
    86.6%. The layout is not published; the step model's ratio barely moves with it (pp 4 to 16, micro-batches
    of 1 or 2 sequences): within 5% of the measured one on every one of those layouts. Before each expert's
    rows were priced in whole 128-row tiles (moe38, ``kernels.expert_padding_share``: 512 rows -> 512 / 575.5
    = 0.890 of the tiles) the ratio was 0.909-0.941, 5.0-8.7% above the measured one on every layout; with the
    padding it is 0.841-0.906 (-2.9% at one sequence a micro-batch, +4.7% at two). Priced as lone GEMMs of 512
    rows, as the library did before issue 35, the MoE came out at 54% of its twin."""
    import dataclasses

    from llmsizing.layouts import step_time
    from llmsizing.moe_runs import PHI_35_MOE_STANDIN as moe
    from llmsizing.parallel import Parallel

    dense = dataclasses.replace(moe, name="dense twin", experts=0, experts_per_token=0, expert_ffn_hidden=0,
                                ffn_hidden=2 * 6400)
    assert dense.active_params == pytest.approx(moe.active_params, rel=1e-3)
    for pp, mb in ((4, 1), (4, 2), (8, 1), (8, 2), (16, 1), (16, 2)):
        dp = 64 // pp
        tput = {}
        for name, m in (("moe", moe), ("dense", dense)):
            st = step_time(m, "H100 SXM", Parallel(pp=pp, dp=dp, zero=1), batch=mb, seq=4096,
                           grad_accum=1024 // dp // mb, recompute="full")
            tput[name] = st.tokens / st.step_s
        assert tput["moe"] / tput["dense"] == pytest.approx(7077 / 8176, rel=0.05)


def test_layer_gemm_efficiencies_are_the_per_gemm_functions_bit_for_bit():
    # issue 35 (moe35p): the planner asks for every ep of a (GPU, tp, micro-batch) at once, on the GEMM curve
    # written out; each value must be exactly what layer_gemms' shapes give through the public per-GEMM
    # functions (gemm_efficiency, grouped_gemm_share, expert_padding_share), the time-weighted mean in the
    # GEMMs' order
    from llmsizing.catalog import get_model

    def composed(model, gpu, tp, tokens, dtype, ep):
        local = max(1, model.experts // ep) if model.is_moe else 1
        flops = time = 0.0
        for i, (m, n, k) in enumerate(K.layer_gemms(model, tp=tp, tokens=tokens, ep=ep)):
            if i >= 2 and local > 1:
                f = m * n * k * local
                e = K.gemm_efficiency(gpu, m * local, n, k, dtype) * (K.grouped_gemm_share(m)
                                                                      * K.expert_padding_share(m))
            else:
                f, e = m * n * k, K.gemm_efficiency(gpu, m, n, k, dtype)
            flops += f
            time += f / e
        return flops / time

    checked = 0
    for name, eps in (("deepseek-v2", (1, 2, 8, 32, 160)), ("qwen3-30b-a3b", (1, 4, 16, 128)),
                      ("mixtral-8x7b", (1, 2, 8)), ("llama-3-8b", (1,))):
        model = get_model(name)
        for gpu, dtype in (("H100 SXM", "bf16"), ("H100 SXM", "fp8"), ("A100 80GB", "bf16"), ("B200", "fp4")):
            for tp, tokens in ((1, 4096), (2, 8192), (8, 1), (4, 3 * 65536)):
                got = K.layer_gemm_efficiencies(model, gpu, tp=tp, tokens=tokens, dtype=dtype, eps=eps)
                want = tuple(composed(model, gpu, tp, tokens, dtype, e) for e in eps)
                assert got == want, (name, gpu, dtype, tp, tokens)
                assert got == tuple(K.layer_gemm_efficiency(model, gpu, tp=tp, tokens=tokens, dtype=dtype,
                                                            ep=e) for e in eps)
                checked += len(eps)
    assert checked == 4 * 4 * (5 + 4 + 3 + 1)
    # the distinct eps of a MoE differ (each its own rows per expert): the answer is not one value repeated
    several = K.layer_gemm_efficiencies("deepseek-v2", "H100 SXM", tp=1, tokens=4096, eps=(1, 8, 160))
    assert len(set(several)) == 3
