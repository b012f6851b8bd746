"""Serving a mixture of experts (issue 24, "Serving"): expert reads per decode step, active FLOPs, MLA's latent
cache and absorbed decode, expert parallelism and its all-to-all.

Expected values are worked out by hand from the published configs (Mixtral-8x7B: 32 layers, hidden 4096, 8
experts of width 14336, top-2, vocab 32000, 8 KV heads of 128; DeepSeek-V3: 61 layers, MLA latent 512 + rope 64,
128 heads, 256 routed experts of width 2048, top-8, first 3 layers dense) and from DeepEP's published all-to-all
latencies (data/deepep_all_to_all.csv), never from the library's own output."""

import csv
import math
from pathlib import Path

import pytest

from llmsizing import cli
from llmsizing.catalog import get_model
from llmsizing.flops import matmul_params
from llmsizing.inference import (decode_weight_bytes_read, moe_expert_bytes_read, moe_experts_touched,
                                 routed_expert_bytes, weights_bytes)
from llmsizing.serve import all_to_all_s, replicas_for, serving
from llmsizing.serve_engine import kv_capacity_tokens, weights_bytes_per_gpu

ROOT = Path(__file__).resolve().parents[1]

# Mixtral-8x7B by hand: routed experts = 32 layers x 8 experts x 3 matrices x 4096 x 14336
MIXTRAL_TOTAL = 46_702_792_704
MIXTRAL_ROUTED = 32 * 8 * 3 * 4096 * 14336            # 45,097,156,608
MIXTRAL_REST = MIXTRAL_TOTAL - MIXTRAL_ROUTED         # 1,605,636,096: attention, norms, router, embeddings, head
MIXTRAL_EMB = 32000 * 4096                            # the untied input embedding: a gather of one row a token


def test_experts_touched_uniform_routing_by_hand():
    # E (1 - (1 - k/E)^B), E = 8, k = 2
    assert moe_experts_touched("mixtral-8x7b", 1) == pytest.approx(2.0, rel=1e-15)
    assert moe_experts_touched("mixtral-8x7b", 4) == pytest.approx(8 * (1 - 81 / 256), rel=1e-15)  # 5.46875
    assert moe_experts_touched("mixtral-8x7b", 64) == pytest.approx(8.0, abs=1e-6)
    # DeepSeek-V3: E = 256, k = 8; B = 1 -> 8; B = 32 -> 256 (1 - (31/32)^32) = 162.9...
    assert moe_experts_touched("deepseek-v3", 1) == pytest.approx(8.0, rel=1e-12)
    assert moe_experts_touched("deepseek-v3", 32) == pytest.approx(256 * (1 - (31 / 32) ** 32), rel=1e-12)
    assert moe_experts_touched("llama-3-8b", 16) == 0.0


def test_decode_reads_active_weights_at_batch_1_and_all_by_batch_64():
    # batch 1: the rest once + 2 of 8 experts = Mixtral's "12.9B active" (12,879,925,248), as bf16 bytes
    assert MIXTRAL_REST + MIXTRAL_ROUTED // 4 == 12_879_925_248
    # ... less the input embedding table (untied: 32,000 x 4,096 x 2 B = 262,144,000 B), plus the one row the
    # token gathers (4,096 x 2 B): 25,759,850,496 - 262,144,000 + 8,192 = 25,497,714,688 B = 25.50 GB
    assert decode_weight_bytes_read("mixtral-8x7b", 1) == pytest.approx(
        2 * 12_879_925_248 - 2 * MIXTRAL_EMB + 2 * 4096, rel=1e-12)
    assert decode_weight_bytes_read("mixtral-8x7b", 1) == pytest.approx(25_497_714_688, rel=1e-12)
    assert routed_expert_bytes("mixtral-8x7b") == 2 * MIXTRAL_ROUTED
    assert moe_expert_bytes_read("mixtral-8x7b", 4) == pytest.approx(2 * MIXTRAL_ROUTED * (1 - 81 / 256), rel=1e-12)
    # batch 64: every expert, all 46.7B, less the table plus the 64 rows gathered
    assert decode_weight_bytes_read("mixtral-8x7b", 64) == pytest.approx(
        2 * MIXTRAL_TOTAL - 2 * MIXTRAL_EMB + 64 * 4096 * 2, rel=1e-7)
    # fp8 halves the experts' bytes (linear layers) but not the embeddings and head (bf16)
    fp8 = decode_weight_bytes_read("mixtral-8x7b", 1, "fp8")
    assert fp8 < 0.55 * decode_weight_bytes_read("mixtral-8x7b", 1)
    # a dense model reads all its weights at any batch, but for the untied input embedding: Llama 3 8B
    # (8,030,261,248 parameters, vocabulary 128,256, hidden 4,096) gathers one row per token
    l3 = 2 * 8_030_261_248
    assert decode_weight_bytes_read("llama-3-8b", 1) == l3 - 128_256 * 4096 * 2 + 4096 * 2
    assert decode_weight_bytes_read("llama-3-8b", 64) == l3 - 128_256 * 4096 * 2 + 64 * 4096 * 2


def test_serving_mixtral_decode_bytes_and_flops_by_hand():
    s = serving("mixtral-8x7b", "H100 SXM", tp=1, batch=1, prompt=1024, output=256)
    ctx = 1024 + 128                                   # the mean decode context
    kv = 2 * 32 * 8 * 128 * 2 * ctx                    # K and V, 32 layers, 8 KV heads of 128, 2 bytes
    assert s.decode_bytes_per_gpu == pytest.approx(2 * 12_879_925_248 - 2 * MIXTRAL_EMB + 2 * 4096 + kv,
                                                   rel=1e-12)
    assert s.experts_touched == pytest.approx(2.0)
    # FLOPs: 2 x active weights less the input embedding, plus 4 x keys x heads x head_dim x layers
    active_matmul = 12_879_925_248 - 32000 * 4096
    assert s.decode_flops_per_gpu == pytest.approx(2 * active_matmul + 4 * ctx * 32 * 128 * 32, rel=1e-12)
    # weights resident: every expert
    assert s.weights_bytes_per_gpu == pytest.approx(2 * MIXTRAL_TOTAL, rel=1e-12)


def test_moe_decode_is_cheap_at_batch_1_and_approaches_dense_of_its_total_size():
    one = serving("mixtral-8x7b", "H100 SXM", tp=2, batch=1)
    big = serving("mixtral-8x7b", "H100 SXM", tp=2, batch=64)
    w = weights_bytes("mixtral-8x7b") / 2
    # the active share less the input embedding's table (gathered: one row), over the two GPUs
    kv1 = one.decode_bytes_per_gpu - w * 12_879_925_248 / MIXTRAL_TOTAL + (MIXTRAL_EMB - 4096) * 2 / 2
    assert kv1 > 0 and kv1 < 0.01 * w                  # batch 1: the active share plus one sequence's cache
    assert big.decode_bytes_per_gpu > w                # batch 64: every expert plus 64 caches
    assert one.itl_s < 0.5 * big.itl_s


def test_deepseek_v3_mla_latent_cache_and_absorbed_decode_flops():
    m = get_model("deepseek-v3")
    s1 = serving(m, "H800", tp=1, batch=1, weights="fp8", prompt=1024, output=256)
    s8 = serving(m, "H800", tp=8, batch=1, weights="fp8", prompt=1024, output=256)
    c = 1024 + 128
    latent = 61 * (512 + 64) * 2 * c                   # one latent + rope key per layer and token, bf16
    # the latent cache is not split by tp: each rank keeps all of it
    w1 = decode_weight_bytes_read(m, 1, "fp8")
    assert s1.decode_bytes_per_gpu == pytest.approx(w1 + latent, rel=1e-12)
    assert s8.decode_bytes_per_gpu == pytest.approx(w1 / 8 + latent, rel=1e-12)
    # absorbed path (DeepSeek-V2 Sec. 2.1.2): per layer 2 c N (Lkv + R) + 2 c N Lkv over the latent, N = 128
    core = 61 * (2 * c * 128 * (512 + 64) + 2 * c * 128 * 512)
    assert s1.decode_flops_per_gpu == pytest.approx(2 * matmul_params(m) + core, rel=1e-12)


def test_expert_parallel_weights_per_gpu_by_hand():
    m = get_model("mixtral-8x7b")
    # ep 8, attention in groups of tp = 2: (W - R) / 2 + R / 8
    w = weights_bytes_per_gpu(m, "bf16", tp=2, ep=8)
    assert w == pytest.approx(2 * (MIXTRAL_REST / 2 + MIXTRAL_ROUTED / 8), rel=1e-12)
    assert weights_bytes_per_gpu(m, "bf16", tp=2) == pytest.approx(2 * MIXTRAL_TOTAL / 2, rel=1e-12)
    # DeepSeek-V3's 320-GPU decode unit: 256 experts, one per GPU, the other 64 GPUs hold redundant copies
    d = get_model("deepseek-v3")
    routed = d.routed_expert_params
    assert routed == 58 * 256 * 3 * 7168 * 2048        # 58 MoE layers (3 dense of 61)
    w320 = weights_bytes_per_gpu(d, "fp8", tp=4, ep=320)
    assert w320 == pytest.approx((weights_bytes(d, "fp8") - routed) / 4 + routed / 256, rel=1e-12)


def test_expert_parallel_decode_step_by_hand():
    # Mixtral, ep = 8 over tp = 1 attention groups, batch 64: 8 sequences per GPU
    s = serving("mixtral-8x7b", "H100 SXM", tp=1, ep=8, batch=64, prompt=1024, output=256)
    assert s.gpus == 8 and s.attention_dp == 8
    # no tensor parallelism: the step's communication is the 32 layers' dispatch + combine, 8 tokens x top-2
    msg = 8 * 2 * 4096 * 2
    assert s.decode_comm_s == pytest.approx(2 * 32 * all_to_all_s(msg, 8, "H100 SXM"), rel=1e-12)
    assert s.all_to_all_s == pytest.approx(all_to_all_s(msg, 8, "H100 SXM"), rel=1e-12)
    # bytes: the rest once (the input embedding: the 8 rows of the GPU's own tokens, not the table) + 1/8 of
    # the experts the 64 tokens touch + the GPU's 8 sequences' caches
    kv = 8 * 2 * 32 * 8 * 128 * 2 * (1024 + 128)
    touched = 1 - 0.75 ** 64
    rest = MIXTRAL_REST - MIXTRAL_EMB + 8 * 4096
    assert s.decode_bytes_per_gpu == pytest.approx(2 * (rest + MIXTRAL_ROUTED * touched / 8) + kv, rel=1e-12)
    # FLOPs: 8 sequences' non-expert work + 1/8 of the 64 tokens' expert work (2 of 8 experts each)
    full = serving("mixtral-8x7b", "H100 SXM", tp=1, batch=1, prompt=1024, output=256).decode_flops_per_gpu
    expert = 2 * MIXTRAL_ROUTED / 4
    assert s.decode_flops_per_gpu == pytest.approx(8 * (full - expert) + 64 * expert / 8, rel=1e-12)
    # each attention group holds its own sequences: the batch limit is 8 groups' worth
    cap = kv_capacity_tokens(get_model("mixtral-8x7b"), "H100 SXM", tp=1, ep=8)
    assert s.max_batch == cap.blocks // math.ceil((1024 + 256) / 16) * 8


def _deepep_rows():
    with open(ROOT / "data" / "deepep_all_to_all.csv", newline="") as f:
        return list(csv.DictReader(f))


def test_all_to_all_against_deepep_published_latencies():
    rows = _deepep_rows()
    assert len(rows) == 12 and all(r["source"] and r["as_of"] for r in rows)
    for r in rows:
        ep = int(r["ep"])
        msg = int(r["tokens_per_gpu"]) * int(r["experts_per_token"]) * int(r["hidden"]) * int(r["bytes_per_number"])
        ratio = all_to_all_s(msg, ep, r["gpu"]) * 1e6 / float(r["latency_us"])
        if ep > 8:      # across nodes: the NIC-bound regime the model prices (EP 16-256: 0.90-0.99 of DeepEP)
            assert 0.85 <= ratio <= 1.05, (r["op"], ep, ratio)
        else:           # EP 8: DeepEP's "pure RDMA" kernels sent even a node's peers through the NIC
            assert 0.6 <= ratio < 1.0, (r["op"], ep, ratio)


def test_all_to_all_grows_with_bytes_and_is_zero_for_one_gpu():
    assert all_to_all_s(1e6, 1, "H100 SXM") == 0.0
    assert all_to_all_s(2e6, 16, "H100 SXM") > all_to_all_s(1e6, 16, "H100 SXM")
    # crossing nodes costs more than staying in one
    assert all_to_all_s(8e6, 16, "H100 SXM") > all_to_all_s(8e6, 8, "H100 SXM")


@pytest.mark.parametrize("kwargs, match", [
    (dict(model="llama-3-8b", ep=2), "ep=2.*dense"),
    (dict(model="mixtral-8x7b", ep=3), "ep=3 must divide the 8 routed experts"),
    (dict(model="mixtral-8x7b", ep=4, tp=8), "ep=4 must be a multiple of tp=8"),
    (dict(model="mixtral-8x7b", ep=8, pp=2), "pipeline stages is not modelled"),
    (dict(model="mixtral-8x7b", ep=0), "ep must be an integer >= 1"),
])
def test_bad_ep_is_refused_by_name(kwargs, match):
    model = kwargs.pop("model")
    with pytest.raises(ValueError, match=match):
        serving(model, "H100 SXM", **kwargs)


def test_ep_of_wrong_type_is_a_type_error():
    with pytest.raises((TypeError, ValueError), match="ep"):
        serving("mixtral-8x7b", "H100 SXM", ep="8")


def test_replicas_for_serves_a_mixture_of_experts():
    plan = replicas_for("mixtral-8x7b", "H100 SXM", users=200, prompt=1024, output=256, itl_s=0.03)
    assert plan.gpus >= 2 and plan.serving.itl_s <= 0.03
    ep_plan = replicas_for("mixtral-8x7b", "H100 SXM", users=200, prompt=1024, output=256, itl_s=0.03, ep=8)
    assert ep_plan.serving.ep == 8 and ep_plan.gpus % 8 == 0
    assert 8 % ep_plan.tp == 0


def test_cli_serve_accepts_moe_and_ep(capsys):
    assert cli.main(["serve", "mixtral-8x7b", "--gpu", "H100 SXM", "--prompt", "1024", "--output", "256",
                     "--users", "200", "--itl-ms", "30"]) == 0
    assert "mixtral-8x7b on H100 SXM" in capsys.readouterr().out
    assert cli.main(["serve", "mixtral-8x7b", "--gpu", "H100 SXM", "--prompt", "1024", "--output", "256",
                     "--users", "200", "--itl-ms", "30", "--ep", "8"]) == 0
    assert "ep=8" in capsys.readouterr().out
    assert cli.main(["serve", "llama-3-8b", "--gpu", "H100 SXM", "--prompt", "1024", "--output", "256",
                     "--users", "20", "--itl-ms", "30", "--ep", "2"]) == 2
    assert "ep=2" in capsys.readouterr().err


def test_lookup_tables_are_gathered_not_read_by_hand():
    """The input embedding is a lookup (vLLM's VocabParallelEmbedding: F.embedding; llama.cpp: ggml_get_rows):
    a step reads the rows its tokens gather, not the table. Tied embeddings are also the LM head, read whole."""
    # tied and no learned positions (Granite 3.0 2B): nothing changes at any batch
    for b in (1, 64):
        assert decode_weight_bytes_read("granite-3.0-2b", b) == weights_bytes("granite-3.0-2b")
    # GPT-2: tied (no change for the vocabulary) but 1,024 learned positions of 768, a lookup too:
    # 124,439,808 x 2 B less 1,023 unread rows of 768 x 2 B = 248,879,616 - 1,571,328 = 247,308,288 B
    assert decode_weight_bytes_read("gpt2", 1) == 2 * 124_439_808 - 1023 * 768 * 2 == 247_308_288
    # a batch larger than the table gathers at most every row
    assert decode_weight_bytes_read("gpt2", 5000) == weights_bytes("gpt2")
    # GGUF Q4_K_M keeps Llama 3 8B's token_embd in Q4_K (144 bytes per 256 numbers): 128,255 rows unread
    q4 = weights_bytes("llama-3-8b", "q4_k_m") - decode_weight_bytes_read("llama-3-8b", 1, "q4_k_m")
    assert q4 == pytest.approx(128_255 * 4096 * 144 / 256, rel=1e-12)
    # int4-g128 (AWQ) leaves the embedding in 16 bits: the same 2-byte table as bf16
    awq = weights_bytes("llama-3-8b", "int4-g128") - decode_weight_bytes_read("llama-3-8b", 1, "int4-g128")
    assert awq == 128_255 * 4096 * 2
    with pytest.raises(ValueError, match="batch"):
        decode_weight_bytes_read("llama-3-8b", 0)
