"""The memory-bound kernels of every layer (llmsizing.pointwise, issue 35/34): the byte counts derived by hand
from the kernels' code (Megatron-Core's fused_bias_swiglu.py, fused_bias_dropout.py, tensor_parallel/
cross_entropy.py; Transformer Engine's LayerNormLinear and fused RoPE) on Llama 3 8B's published shape
(Meta's model card and config: hidden 4,096, MLP 14,336, 32 heads, 8 KV heads of 128, vocabulary 128,256,
32 layers, RMSNorm, SwiGLU, RoPE), and the step model charging them at HBM bandwidth."""

import pytest

from llmsizing import pointwise
from llmsizing.catalog import get_gpu, get_model
from llmsizing.parallel import Parallel

H, F, HEADS, KV, HD, V, LAYERS, B = 4096, 14336, 32, 8, 128, 128256, 32, 2


def _llama3_8b_by_hand():
    """Per layer and token, bytes (module docstring of llmsizing.pointwise, counted by hand here):
    two RMSNorms: forward read + write 2 x 4,096 x 2 bytes + a 4-byte fp32 rstd; backward read input and
    gradient, write gradient, 3 x 4,096 x 2 + 4. Two residual adds, 3 x 4,096 x 2 each way. SwiGLU: read
    [gate | up] (2 x 14,336 x 2), write 14,336 x 2 forward; backward read [gate | up] and the gradient, write
    both gradients: 5 x 14,336 x 2. RoPE on (32 + 8) x 128 query and key elements, read + write, each way."""
    fwd_rep = 2 * (2 * H * B + 4) + 2 * 3 * H * B          # 32,776 + 49,152
    bwd_rep = 2 * (3 * H * B + 4) + 2 * 3 * H * B          # 49,160 + 49,152
    rot = (HEADS + KV) * HD                                 # 5,120
    fwd_split = 3 * F * B + 2 * rot * B                     # 86,016 + 20,480
    bwd_split = 5 * F * B + 2 * rot * B                     # 143,360 + 20,480
    return (fwd_rep, bwd_rep), (fwd_split, bwd_split)


def test_llama3_8b_layer_bytes_by_hand():
    got = pointwise.layer_pointwise_bytes_per_token(get_model("llama-3-8b"))
    assert got == _llama3_8b_by_hand()
    assert sum(got[0]) + sum(got[1]) == 450_576


def test_the_loss_bytes_per_logit_by_hand():
    """Megatron-Core's _VocabParallelCrossEntropy on BF16 logits: forward .float() (read 2, write 4), max
    (read 4), in-place -= max (4 + 4), exp into the same buffer (4 + 4), sum (4), div_ by the sum (4 + 4) =
    38; backward mul_ by the loss's gradient (4 + 4), the fp32 gradient cast back to BF16 (4 + 2) = 14."""
    assert pointwise.LOSS_BYTES_PER_LOGIT == (2 + 4 + 4 + 8 + 8 + 4 + 8, 8 + 6)
    first, last = pointwise.ends_pointwise_bytes_per_token(get_model("llama-3-8b"))
    assert first == 2 * H * B + H * B + 8 * H
    assert last == (2 * H * B + 4) + (3 * H * B + 4) + 52 * V


def test_one_stage_and_pipeline_stages_sum_to_the_model():
    m = get_model("llama-3-8b")
    one = pointwise.stage_pointwise_bytes_per_token(m, Parallel())
    first, last = pointwise.ends_pointwise_bytes_per_token(m)
    assert one == (LAYERS * 450_576 + first + last,)
    four = pointwise.stage_pointwise_bytes_per_token(m, Parallel(pp=4))
    assert four == (8 * 450_576 + first, 8 * 450_576, 8 * 450_576, 8 * 450_576 + last)


def test_full_recomputation_runs_each_layers_forward_again():
    m = get_model("llama-3-8b")
    (fr, _), (fs, _) = _llama3_8b_by_hand()
    none = pointwise.stage_pointwise_bytes_per_token(m, Parallel())[0]
    full = pointwise.stage_pointwise_bytes_per_token(m, Parallel(), recompute="full")[0]
    assert full == none + 32 * (fr + fs)
    assert pointwise.stage_pointwise_bytes_per_token(m, Parallel(), recompute="selective")[0] == none
    part = pointwise.stage_pointwise_bytes_per_token(m, Parallel(), recompute="full", recompute_layers=5)[0]
    assert part == none + 5 * (fr + fs)


def test_tensor_parallel_without_sequence_parallelism_repeats_the_norms_and_adds():
    m = get_model("llama-3-8b")
    (fr, br), _ = _llama3_8b_by_hand()
    sp = pointwise.stage_pointwise_bytes_per_token(m, Parallel(tp=4, sp=True))[0]
    no_sp = pointwise.stage_pointwise_bytes_per_token(m, Parallel(tp=4, sp=False))[0]
    assert no_sp - sp == 3 * LAYERS * (fr + br)


def test_the_step_pays_them_at_hbm_bandwidth(monkeypatch):
    """step_compute_time_s with the term, minus the same step with no pointwise bytes, is the bytes x the
    GPU's tokens / its HBM bandwidth."""
    from llmsizing.comm import step_compute_time_s

    m, g = get_model("llama-3-8b"), get_gpu("H100 SXM")
    kw = dict(batch=2, seq=4096, grad_accum=3, kernel_efficiency=0.7, gpu=g)
    with_term = step_compute_time_s(m, Parallel(), **kw)
    bytes_ = pointwise.stage_pointwise_bytes_per_token(m, Parallel())[0]
    monkeypatch.setattr(pointwise, "stage_pointwise_bytes_per_token", lambda *a, **k: (0.0,))
    without = step_compute_time_s(m, Parallel(), **kw)
    assert with_term - without == pytest.approx(bytes_ * 2 * 4096 * 3 / (g.memory_bandwidth_gbps * 1e9),
                                                rel=1e-9)


def test_their_share_falls_with_the_width():
    """Bytes grow like the hidden size, GEMM FLOPs like its square: per FLOP, a 1B-wide MoE moves several
    times what Llama 3 70B moves."""
    from llmsizing.flops import training_flops_per_token

    def per_flop(name):
        m = get_model(name)
        bytes_ = pointwise.stage_pointwise_bytes_per_token(m, Parallel())[0]
        return bytes_ / training_flops_per_token(m, seq=4096)

    assert per_flop("granite-3.0-1b-a400m") > 5 * per_flop("llama-3-70b")
    assert per_flop("llama-3-8b") > 2 * per_flop("llama-3-70b")


def test_bad_input_is_refused():
    m = get_model("llama-3-8b")
    with pytest.raises(ValueError, match="act_bytes"):
        pointwise.layer_pointwise_bytes_per_token(m, act_bytes=0)
    with pytest.raises(ValueError, match="recompute"):
        pointwise.stage_pointwise_bytes_per_token(m, Parallel(), recompute="some")


# --------------------------------------------------------------- other layouts, by hand (review22 M4, M5)
def test_bloom_layernorm_gelu_and_alibi_by_hand():
    """BLOOM 176B (Scao et al. 2022; HF bigscience/bloom config: hidden 14,336, 112 heads, MLP 4 x hidden =
    57,344, LayerNorm, GeLU, ALiBi). Two LayerNorms with mean and rstd (8 bytes each), two residual adds;
    GeLU reads 57,344 and writes 57,344 forward, reads both and the gradient backward, no rotary pass: ALiBi
    is added to the scores inside the attention kernel. The rotary reading charged before moved 4 x (224 x
    128) x 2 = 229,376 bytes more."""
    h, f = 14336, 4 * 14336
    got = pointwise.layer_pointwise_bytes_per_token(get_model("bloom-176b"))
    assert got == ((2 * (2 * h * B + 8) + 2 * 3 * h * B, 2 * (3 * h * B + 8) + 2 * 3 * h * B),
                   (2 * f * B, 3 * f * B))
    assert got[1] == (229_376, 344_064)


def test_qwen3_moe_width_and_per_head_qk_norm_by_hand():
    """Qwen3-30B-A3B (config.json: hidden 2,048, 32 heads, 4 KV heads of 128, 128 experts of 768, top-8,
    per-head q/k RMSNorm): a MoE layer's SwiGLU over 8 x 768 = 6,144; rotary and q/k norm over (32 + 4) x 128
    = 4,608 numbers; the q/k norm's rstd, one fp32 per head of each token: 36 x 4 = 144 bytes each way."""
    w, qk, rows = 8 * 768, 36 * 128, 36
    _, split = pointwise.layer_pointwise_bytes_per_token(get_model("qwen3-30b-a3b"), moe_layer=True)
    assert split == (3 * w * B + 2 * qk * B + 2 * qk * B + rows * 4,
                     5 * w * B + 2 * qk * B + 3 * qk * B + rows * 4)
    assert split == (73_872, 107_664)


def test_olmoe_projection_qk_norm_has_two_statistics():
    """OLMoE-1B-7B (arXiv:2409.02060: hidden 2,048, 16 heads of 128, 64 experts of 1,024, top-8, QK-norm over
    the whole projections): one rstd for the query and one for the key, 2 x 4 bytes."""
    w, qk = 8 * 1024, 32 * 128
    _, split = pointwise.layer_pointwise_bytes_per_token(get_model("olmoe-1b-7b"), moe_layer=True)
    assert split[0] == 3 * w * B + 2 * qk * B + 2 * qk * B + 2 * 4 == 81_928


def test_smollm3_rotates_three_layers_in_four():
    """SmolLM3 (stage1_8T.yaml: hidden 2,048, 16 heads, 4 KV heads of 128, SwiGLU 11,008, no RoPE on every
    4th of 36 layers): the rotary bytes of (16 + 4) x 128 numbers on 27 of 36 layers, 3/4 of them a layer."""
    _, split = pointwise.layer_pointwise_bytes_per_token(get_model("smollm3-3b"))
    assert split[0] == 3 * 11008 * B + 2 * (20 * 128 * 27 / 36) * B == 73_728


def test_a_learned_table_adds_its_gather_and_add_on_the_first_stage():
    """GPT-3 175B (Brown et al. 2020, learned positions, hidden 12,288): the token row's gather (2 h b) and
    its gradient (h b + 8 h), the position row's gather, the add (3 h b) and its gradient: 9 h b + 16 h."""
    h = 12288
    first, _ = pointwise.ends_pointwise_bytes_per_token(get_model("gpt3-175b"))
    assert first == 9 * h * B + 16 * h == 417_792


def test_a_parallel_block_moves_the_residual_adds_of_a_sequential_one():
    """Hugging Face's Falcon: ``mlp_output += attention_output`` then ``dropout_add(mlp_output, residual)``:
    two binary adds of 3 h b, as a sequential block's two."""
    m = get_model("llama-3-8b")
    assert (pointwise.layer_pointwise_bytes_per_token(m.with_(parallel_block=True))
            == pointwise.layer_pointwise_bytes_per_token(m))


# --------------------------------------------------------------- against measured kernel times (review22 M4)
#: Liger-Kernel's published benchmark table (linkedin/Liger-Kernel benchmark/data/all_benchmark_data.csv,
#: rows of 2026-06-15 to 2026-07-26, liger 0.8.0/0.8.1, "NVIDIA H100 80GB HBM3", median of triton's do_bench):
#: Megatron-Core's own kernels on BF16 activations of 2,048 x 4 = 8,192 tokens. ``megatron_cross_entropy``,
#: provider ``megatron-unfused``: ``vocab_parallel_cross_entropy`` (benchmark_megatron_cross_entropy.py), the
#: _VocabParallelCrossEntropy chain pointwise.py counts; ``megatron_swiglu``, provider ``megatron``:
#: ``bias_swiglu_impl`` forward (benchmark_megatron_swiglu.py). Milliseconds.
LIGER_H100 = {("cross_entropy", "forward", 131072): 15.8124, ("cross_entropy", "full", 131072): 21.2458,
              ("cross_entropy", "forward", 32768): 4.0231, ("cross_entropy", "full", 32768): 5.4108,
              ("swiglu", "forward", 32768): 0.8585, ("swiglu", "forward", 8192): 0.2202}
TOKENS = 2048 * 4


@pytest.mark.parametrize("vocab", [131072, 32768])
def test_the_loss_against_megatrons_measured_cross_entropy(vocab):
    """Bytes over measured time is the bandwidth the kernels reached: 38 bytes x 8,192 x 131,072 logits = 40.8
    GB in 15.81 ms forward is 2.58 TB/s, 0.77 of the H100's 3.35 TB/s; with the backward 52 bytes a logit
    (55.8 GB) in 21.25 ms, 2.63 TB/s, 0.78. The library charges the whole 3.35 TB/s, so its loss time is
    about 0.77 of the measured one (module docstring, "Where it is an approximation"); at 32,768 logits the
    same, 0.76 and 0.77."""
    hbm = get_gpu("H100 SXM").memory_bandwidth_gbps * 1e9
    assert hbm == 3.35e12
    fwd, bwd = pointwise.LOSS_BYTES_PER_LOGIT
    for mode, per_logit in (("forward", fwd), ("full", fwd + bwd)):
        measured_s = LIGER_H100["cross_entropy", mode, vocab] * 1e-3
        charged_s = pointwise.pointwise_seconds(per_logit * vocab, TOKENS, hbm)
        assert 0.74 < charged_s / measured_s < 0.80, (mode, charged_s / measured_s)


@pytest.mark.parametrize("ffn", [32768, 8192])
def test_the_activation_against_megatrons_measured_swiglu(ffn):
    """Megatron's fused SwiGLU forward reads [gate | up] and writes their product, 3 x ffn x 2 bytes a token:
    8,192 tokens at ffn 32,768 move 1.61 GB, which took 0.859 ms: 1.88 TB/s, 0.56 of the peak the library
    charges (at 8,192: 0.40 GB in 0.220 ms, 0.55)."""
    hbm = get_gpu("H100 SXM").memory_bandwidth_gbps * 1e9
    m = get_model("llama-3-8b").with_(ffn_hidden=ffn)
    _, (fwd_split, _) = pointwise.layer_pointwise_bytes_per_token(m)
    act = fwd_split - 2 * (HEADS + KV) * HD * B             # the forward's activation bytes, without the rotary
    assert act == 3 * ffn * B
    charged_s = pointwise.pointwise_seconds(act, TOKENS, hbm)
    assert 0.52 < charged_s / (LIGER_H100["swiglu", "forward", ffn] * 1e-3) < 0.60


def test_deepseek_v3_mla_rotary_and_shared_expert_by_hand():
    """DeepSeek-V3 (arXiv:2412.19437 Sec. 2.1 and config.json: 128 heads, decoupled RoPE of 64 on each query
    head and on one key shared by all heads, 8 routed experts of 2,048 and 1 shared of 2,048 per token): the
    rotary kernel turns (128 + 1) x 64 = 8,256 numbers; a MoE layer's SwiGLU spans 9 x 2,048 = 18,432."""
    r, w = 129 * 64, 9 * 2048
    _, split = pointwise.layer_pointwise_bytes_per_token(get_model("deepseek-v3"), moe_layer=True)
    assert split == (3 * w * B + 2 * r * B, 5 * w * B + 2 * r * B) == (143_616, 217_344)


def test_deepseek_v3_mla_latent_norms_by_hand():
    """DeepSeek-V3's config.json: hidden 7,168, q_lora_rank 1,536, kv_lora_rank 512. The block's two
    RMSNorms and two residual adds, 2 (2 x 7,168 x 2 + 4) + 2 x 3 x 7,168 x 2 = 143,368 forward and
    2 (3 x 7,168 x 2 + 4) + 86,016 = 172,040 backward, plus MLA's two latent RMSNorms (transformers'
    modeling_deepseek_v3 q_a_layernorm and kv_a_layernorm) over 1,536 + 512 = 2,048 numbers: 2 x 2,048 x 2 +
    2 x 4 = 8,200 forward and 3 x 2,048 x 2 + 2 x 4 = 12,296 backward (review23a L2's "about 8.2 kB and 12.3
    kB"), on every token of each GPU of a tensor-parallel group without sequence parallelism."""
    h, d = 7168, 1536 + 512
    block = (2 * (2 * h * B + 4) + 2 * 3 * h * B, 2 * (3 * h * B + 4) + 2 * 3 * h * B)
    assert block == (143_368, 172_040)
    m = get_model("deepseek-v3")
    for moe_layer in (False, True):
        rep, _ = pointwise.layer_pointwise_bytes_per_token(m, moe_layer=moe_layer)
        assert rep == (block[0] + 2 * d * B + 2 * 4, block[1] + 3 * d * B + 2 * 4) == (151_568, 184_336)
    # without a query bottleneck (q_lora_rank None, as DeepSeek-V2-Lite) only kv_a_layernorm: one norm of 512
    lite = m.with_(q_lora_rank=None)
    rep, _ = pointwise.layer_pointwise_bytes_per_token(lite)
    assert rep == (block[0] + 2 * 512 * B + 4, block[1] + 3 * 512 * B + 4)
    # not multi-head latent attention: no latent norm (Llama 3 8B's block, by hand above)
    assert pointwise.layer_pointwise_bytes_per_token(get_model("llama-3-8b"))[0] == _llama3_8b_by_hand()[0]


def test_deepseek_v3s_mtp_module_is_a_moe_layer_a_loss_and_its_join_on_the_last_stage():
    """DeepSeek-V3's multi-token-prediction module (arXiv:2412.19437 Sec. 2.2, depth 1: ``M [RMSNorm(h);
    RMSNorm(Emb(t))]``, a transformer block and the shared output head; Megatron-Core's
    multi_token_prediction.py ``_concat_embeddings``: enorm, hnorm, torch.cat, eh_proj): one MoE layer's
    bytes, 151,568 + 184,336 + 143,616 + 217,344 = 696,864; a second final norm and loss, 5 x 7,168 x 2 + 8 +
    52 x 129,280 = 6,794,248; the join's two RMSNorms over h, 2 (2 h b + 4) + 2 (3 h b + 4) = 143,376, and
    the concatenation's copy, read and write 2 h b, 57,344; the next token's embedding gathered, 2 h b + h b
    + 8 h = 100,352: 7,792,184 bytes a token."""
    m = get_model("deepseek-v3")
    h = 7168
    assert (m.hidden, m.vocab) == (h, 129280)
    join = 2 * (2 * h * B + 4) + 2 * (3 * h * B + 4) + 2 * 2 * h * B
    gather = 2 * h * B + h * B + 8 * h
    assert pointwise.mtp_pointwise_bytes_per_token(m) == (join, gather) == (200_720, 100_352)
    one = pointwise.stage_pointwise_bytes_per_token(m, Parallel())[0]
    mtp = pointwise.stage_pointwise_bytes_per_token(m, Parallel(), mtp_depth=1)[0]
    assert mtp - one == 696_864 + 5 * h * B + 8 + 52 * 129280 + join + gather == 7_792_184
    # tensor parallelism without sequence parallelism: the join's norms and copy on every token of each GPU
    tp = Parallel(tp=4, sp=False)
    one4 = pointwise.stage_pointwise_bytes_per_token(m, tp)[0]
    mtp4 = pointwise.stage_pointwise_bytes_per_token(m, tp, mtp_depth=1)[0]
    (fr, br), (fs, bs) = pointwise.layer_pointwise_bytes_per_token(m, moe_layer=True)
    assert mtp4 - one4 == pytest.approx(4 * (fr + br) + fs + bs + 5 * h * B + 8 + 52 * 129280
                                        + 4 * join + gather, rel=1e-12)


def test_llama4_scouts_weightless_qk_norm_on_its_rotating_layers_by_hand():
    """Llama 4 Scout (meta-llama/Llama-4-Scout-17B-16E config.json text_config: hidden 5,120, 40 heads and 8
    KV heads of 128, 16 experts of 8,192, top-1, a shared expert of 8,192, use_qk_norm true, no RoPE on every
    4th of 48 layers). transformers' modeling_llama4 builds Llama4TextL2Norm (no weights) where
    ``config.use_qk_norm and self.use_rope``: 36 of 48 layers. Per MoE layer-token, SwiGLU over 2 x 8,192:
    3 x 16,384 x 2 = 98,304 forward, 163,840 backward; rotary over 48 x 128 = 6,144 numbers on 3/4 of the
    layers, 2 x 4,608 x 2 = 18,432 each way; the L2 norm on 3/4 of the layers, (2 x 6,144 x 2 + 48 x 4) x 3/4 =
    18,576 forward and (3 x 6,144 x 2 + 48 x 4) x 3/4 = 27,792 backward."""
    m = get_model("llama-4-scout")
    assert (m.qk_norm, m.rope_layers, m.layers) == ("head_l2", 36, 48)
    _, split = pointwise.layer_pointwise_bytes_per_token(m, moe_layer=True)
    assert split == (98_304 + 18_432 + 18_576, 163_840 + 18_432 + 27_792) == (135_312, 210_064)
    # the norm has no parameters: the count is the one transformers gives Llama4ForCausalLM's text model
    assert m.n_params == m.with_(qk_norm=None).n_params
    no_norm = pointwise.layer_pointwise_bytes_per_token(m.with_(qk_norm=None), moe_layer=True)[1]
    assert (split[0] - no_norm[0], split[1] - no_norm[1]) == (18_576, 27_792)


def test_llama4s_qk_norm_is_read_from_use_qk_norm_not_the_name():
    """The Hugging Face reading takes ``use_qk_norm`` from the config (Llama4TextConfig's default: true);
    Maverick's config sets it false (modeling_llama4: "the 128E model does not use qk_norm")."""
    import csv
    import json
    from pathlib import Path

    from llmsizing.model import Model
    from llmsizing.moe_runs import MAVERICK_STANDIN

    with open(Path(__file__).resolve().parents[1] / "data" / "hf_type_sweep.csv", newline="") as fh:
        cfg = next(json.loads(r["config_json"]) for r in csv.DictReader(fh)
                   if (r["model_type"], r["kind"]) == ("llama4_text", "saved"))
    assert Model.from_hf_config({**cfg, "use_qk_norm": True}).qk_norm == "head_l2"
    assert Model.from_hf_config({**cfg, "use_qk_norm": False}).qk_norm is None
    assert MAVERICK_STANDIN.qk_norm is None
